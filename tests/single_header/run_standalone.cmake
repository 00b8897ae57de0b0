# single_header_standalone, run by CTest as `cmake -D... -P run_standalone.cmake`.
#
# Copies the generated single header, alone, into a fresh directory together with
# standalone.cpp, and builds and runs the program there with the compiler directly: no include
# path into the repository, no CMake target. Two variants:
#   xsimd      xsimd reachable (its include directories, when CMake found it); the program
#              checks AVGPOOL_HAS_XSIMD == 1 when the build found xsimd
#   no-xsimd   -DAVGPOOL_NO_XSIMD; the program checks AVGPOOL_HAS_XSIMD == 0
#
# Inputs (-D): AVGPOOL_SINGLE_HEADER_FILE AVGPOOL_PROGRAM AVGPOOL_WORK_DIR AVGPOOL_CXX_COMPILER,
#              optional AVGPOOL_CXX_STANDARD AVGPOOL_WITH_XSIMD AVGPOOL_XSIMD_INCLUDE_DIRS
#              ('|'-separated)
cmake_minimum_required(VERSION 3.14)

foreach(_var IN ITEMS AVGPOOL_SINGLE_HEADER_FILE AVGPOOL_PROGRAM AVGPOOL_WORK_DIR
                      AVGPOOL_CXX_COMPILER)
    if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
        message(FATAL_ERROR "run_standalone.cmake: -D${_var}=... is required")
    endif()
endforeach()
if(NOT EXISTS "${AVGPOOL_SINGLE_HEADER_FILE}")
    message(FATAL_ERROR "run_standalone.cmake: ${AVGPOOL_SINGLE_HEADER_FILE} does not exist "
                        "(build the avgpool_single_header target first)")
endif()

include("${CMAKE_CURRENT_LIST_DIR}/../support/direct_compile.cmake")
if(_avgpool_msvc_cli)
    # The program would build the same way; only the command line below is GCC/Clang style.
    message(STATUS "MSVC-style compiler: single_header_standalone skipped")
    return()
endif()
if(CMAKE_HOST_WIN32)
    set(_exe_suffix ".exe")
else()
    set(_exe_suffix "")
endif()

function(_avgpool_run _what)
    execute_process(COMMAND ${ARGN}
                    RESULT_VARIABLE _rc
                    OUTPUT_VARIABLE _out
                    ERROR_VARIABLE _out)
    if(NOT _rc EQUAL 0)
        message(FATAL_ERROR "${_what}: failed (${_rc})\n${_out}")
    endif()
    message(STATUS "${_what}: OK ${_out}")
endfunction()

# Builds and runs one variant in <work>/<name>, a directory holding only avgpool.hpp and main.cpp.
function(_avgpool_variant _name)
    set(_dir "${AVGPOOL_WORK_DIR}/${_name}")
    file(REMOVE_RECURSE "${_dir}")
    file(MAKE_DIRECTORY "${_dir}")
    configure_file("${AVGPOOL_SINGLE_HEADER_FILE}" "${_dir}/avgpool.hpp" COPYONLY)
    configure_file("${AVGPOOL_PROGRAM}" "${_dir}/main.cpp" COPYONLY)
    file(GLOB _contents RELATIVE "${_dir}" "${_dir}/*")
    list(SORT _contents)
    if(NOT _contents STREQUAL "avgpool.hpp;main.cpp")
        message(FATAL_ERROR "${_dir} holds more than avgpool.hpp and main.cpp: ${_contents}")
    endif()
    _avgpool_run("[${_name}] compile"
        "${AVGPOOL_CXX_COMPILER}" ${_std} -O0 -Wall -Wextra ${ARGN}
        main.cpp -o "main${_exe_suffix}" -pthread
        WORKING_DIRECTORY "${_dir}")
    _avgpool_run("[${_name}] run" "${_dir}/main${_exe_suffix}" WORKING_DIRECTORY "${_dir}")
endfunction()

file(REMOVE_RECURSE "${AVGPOOL_WORK_DIR}")
if(AVGPOOL_WITH_XSIMD)
    _avgpool_variant(xsimd ${_xsimd_flags} -DAVGPOOL_EXPECT_XSIMD=1)
else()
    # xsimd was not found by CMake; the header still uses it if <xsimd/xsimd.hpp> is reachable.
    _avgpool_variant(xsimd-if-reachable)
endif()
_avgpool_variant(no-xsimd -DAVGPOOL_NO_XSIMD -DAVGPOOL_EXPECT_XSIMD=0)
message(STATUS "single header, copied alone and compiled with the compiler directly: OK")
