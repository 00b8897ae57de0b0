# headers_self_contained, run by CTest as `cmake -D... -P run_headers.cmake`.
#
# Every header under include/avgpool/, public or detail, compiled alone (-fsyntax-only, a file
# holding only its #include): each must bring what it uses. The suite includes
# <avgpool/avgpool.hpp>, which hides a header that leans on an earlier one's includes.
#
# Inputs (-D): AVGPOOL_INCLUDE_DIR AVGPOOL_WORK_DIR AVGPOOL_CXX_COMPILER, optional AVGPOOL_CXX_STANDARD
#              AVGPOOL_XSIMD_INCLUDE_DIRS ('|'-separated)
cmake_minimum_required(VERSION 3.14)

foreach(_var IN ITEMS AVGPOOL_INCLUDE_DIR AVGPOOL_WORK_DIR AVGPOOL_CXX_COMPILER)
    if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
        message(FATAL_ERROR "run_headers.cmake: -D${_var}=... is required")
    endif()
endforeach()

include("${CMAKE_CURRENT_LIST_DIR}/../support/direct_compile.cmake")
if(_avgpool_msvc_cli)
    message(STATUS "MSVC-style compiler: headers_self_contained skipped")
    return()
endif()

file(MAKE_DIRECTORY "${AVGPOOL_WORK_DIR}")
file(GLOB_RECURSE _headers RELATIVE "${AVGPOOL_INCLUDE_DIR}" "${AVGPOOL_INCLUDE_DIR}/avgpool/*.hpp")
list(SORT _headers)
set(_failed "")
foreach(_h IN LISTS _headers)
    file(WRITE "${AVGPOOL_WORK_DIR}/header_check.cpp" "#include <${_h}>\n")
    execute_process(COMMAND "${AVGPOOL_CXX_COMPILER}" ${_std} -fsyntax-only -Wall -Wextra
                            "-I${AVGPOOL_INCLUDE_DIR}" ${_xsimd_flags} "${AVGPOOL_WORK_DIR}/header_check.cpp"
                    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
    if(NOT _rc EQUAL 0 OR NOT _out STREQUAL "")
        message(SEND_ERROR "${_h} alone: ${_out}")
        list(APPEND _failed "${_h}")
    endif()
endforeach()
list(LENGTH _headers _n)
if(_failed)
    message(FATAL_ERROR "headers that do not compile alone (or warn): ${_failed}")
endif()
message(STATUS "${_n} headers compile alone")
