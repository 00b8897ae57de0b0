# Packaging check, run by CTest as `cmake -D... -P run_consumer.cmake`.
#
# AVGPOOL_CONSUMER_MODE=package:
#   configure + install avgpool (tests/examples/bench off) into <work>/prefix, check the installed
#   layout, build and run the consumer with find_package(avgpool 0.1 CONFIG REQUIRED), check that
#   find_package(avgpool 99.0 CONFIG) is refused, and check avgpool.pc with pkg-config (if any).
# AVGPOOL_CONSUMER_MODE=subdirectory:
#   build and run the consumer with add_subdirectory(<avgpool source>).
# AVGPOOL_CONSUMER_MODE=single_header:
#   copy the consumer project into <work>, put the generated single header (and nothing else of
#   avgpool) into it as third_party/avgpool/avgpool.hpp, build and run it there.
# Every consumer build makes two programs, main.cpp (exceptions on) and main_noexcept.cpp
# (-fno-exceptions, errors handled as values), which link the kernels of instances.cpp
# (AVGPOOL_EXTERN_TEMPLATES), and runs both.
#
# Inputs (-D): AVGPOOL_SOURCE_DIR AVGPOOL_CONSUMER_SOURCE_DIR AVGPOOL_WORK_DIR AVGPOOL_CONSUMER_MODE
#              AVGPOOL_CXX_COMPILER AVGPOOL_GENERATOR, optional AVGPOOL_MAKE_PROGRAM
#              AVGPOOL_GENERATOR_PLATFORM AVGPOOL_BUILD_TYPE AVGPOOL_CXX_STANDARD AVGPOOL_USE_XSIMD
#              AVGPOOL_XSIMD_DIR, and AVGPOOL_SINGLE_HEADER_FILE (single_header mode)
cmake_minimum_required(VERSION 3.14)

foreach(_var IN ITEMS AVGPOOL_SOURCE_DIR AVGPOOL_CONSUMER_SOURCE_DIR AVGPOOL_WORK_DIR
                      AVGPOOL_CONSUMER_MODE AVGPOOL_CXX_COMPILER AVGPOOL_GENERATOR)
    if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
        message(FATAL_ERROR "run_consumer.cmake: -D${_var}=... is required")
    endif()
endforeach()

if(NOT AVGPOOL_BUILD_TYPE)
    set(AVGPOOL_BUILD_TYPE Release)
endif()
if(NOT DEFINED AVGPOOL_USE_XSIMD)
    set(AVGPOOL_USE_XSIMD ON)
endif()

set(_work "${AVGPOOL_WORK_DIR}")
file(REMOVE_RECURSE "${_work}")
file(MAKE_DIRECTORY "${_work}")

# Arguments shared by every configure step.
set(_common -G "${AVGPOOL_GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${AVGPOOL_CXX_COMPILER}"
    "-DCMAKE_BUILD_TYPE=${AVGPOOL_BUILD_TYPE}"
    "-DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON")
if(AVGPOOL_MAKE_PROGRAM)
    list(APPEND _common "-DCMAKE_MAKE_PROGRAM=${AVGPOOL_MAKE_PROGRAM}")
endif()
get_filename_component(_avgpool_cxx_name "${AVGPOOL_CXX_COMPILER}" NAME_WE)
if(AVGPOOL_BUILD_TYPE STREQUAL "Debug" AND NOT _avgpool_cxx_name MATCHES "^(cl|clang-cl)$")
    # -O0 without -g: nobody debugs these builds, and the debug information was a fifth of
    # their compile time (the kernels' instantiations: 16.4 against 13.3 s).
    list(APPEND _common "-DCMAKE_CXX_FLAGS_DEBUG=-O0")
endif()
if(AVGPOOL_GENERATOR_PLATFORM)
    list(APPEND _common -A "${AVGPOOL_GENERATOR_PLATFORM}")
endif()
if(AVGPOOL_CXX_STANDARD)
    list(APPEND _common "-DCMAKE_CXX_STANDARD=${AVGPOOL_CXX_STANDARD}")
endif()
if(AVGPOOL_XSIMD_DIR)
    list(APPEND _common "-Dxsimd_DIR=${AVGPOOL_XSIMD_DIR}")
endif()

if(CMAKE_HOST_WIN32)
    set(_exe_suffix ".exe")
else()
    set(_exe_suffix "")
endif()

# Runs a command; on failure prints its output and stops with an error.
function(_avgpool_step _what)
    message(STATUS "[${AVGPOOL_CONSUMER_MODE}] ${_what}")
    execute_process(COMMAND ${ARGN}
                    RESULT_VARIABLE _rc
                    OUTPUT_VARIABLE _out
                    ERROR_VARIABLE _out)
    if(NOT _rc EQUAL 0)
        message(FATAL_ERROR "${_what}: failed (${_rc})\n${_out}")
    endif()
    set(_avgpool_last_output "${_out}" PARENT_SCOPE)
endfunction()

# Configures, builds and runs the consumer project (sources in _consumer_src) in <work>/<name>:
# both programs, with and without exceptions, unless ARGN turns the second off.
set(_consumer_src "${AVGPOOL_CONSUMER_SOURCE_DIR}")
function(_avgpool_consumer _name)
    set(_bin "${_work}/${_name}")
    _avgpool_step("configure consumer (${_name})"
        "${CMAKE_COMMAND}" -S "${_consumer_src}" -B "${_bin}" ${_common} ${ARGN})
    _avgpool_step("build consumer (${_name})"
        "${CMAKE_COMMAND}" --build "${_bin}" --config "${AVGPOOL_BUILD_TYPE}")
    _avgpool_step("run consumer (${_name})" "${_bin}/bin/avgpool_consumer${_exe_suffix}")
    message(STATUS "${_avgpool_last_output}")
    if(NOT "-DAVGPOOL_CONSUMER_NOEXCEPT=OFF" IN_LIST ARGN)
        _avgpool_step("run consumer without exceptions (${_name})"
            "${_bin}/bin/avgpool_consumer_noexcept${_exe_suffix}")
        message(STATUS "${_avgpool_last_output}")
    endif()
endfunction()

if(AVGPOOL_CONSUMER_MODE STREQUAL "subdirectory")
    # Exceptions on only: the package and single-header modes build the -fno-exceptions program,
    # and the suite's avgpool_no_exceptions covers the source tree (a fifth of this test's time).
    _avgpool_consumer(consumer-subdirectory
        "-DAVGPOOL_CONSUMER_MODE=subdirectory"
        "-DAVGPOOL_CONSUMER_NOEXCEPT=OFF"
        "-DAVGPOOL_SOURCE_DIR=${AVGPOOL_SOURCE_DIR}"
        "-DAVGPOOL_USE_XSIMD=${AVGPOOL_USE_XSIMD}")
    message(STATUS "consumer via add_subdirectory: OK")
    return()
elseif(AVGPOOL_CONSUMER_MODE STREQUAL "single_header")
    if(NOT AVGPOOL_SINGLE_HEADER_FILE OR NOT EXISTS "${AVGPOOL_SINGLE_HEADER_FILE}")
        message(FATAL_ERROR "run_consumer.cmake: the single header '${AVGPOOL_SINGLE_HEADER_FILE}' "
                            "does not exist (build the avgpool_single_header target first)")
    endif()
    # A project of its own, outside the avgpool tree: the consumer's sources plus one header.
    set(_consumer_src "${_work}/consumer-single-header-src")
    file(MAKE_DIRECTORY "${_consumer_src}/third_party/avgpool")
    foreach(_f IN ITEMS CMakeLists.txt main.cpp main_noexcept.cpp instances.cpp)
        configure_file("${AVGPOOL_CONSUMER_SOURCE_DIR}/${_f}" "${_consumer_src}/${_f}" COPYONLY)
    endforeach()
    configure_file("${AVGPOOL_SINGLE_HEADER_FILE}"
                   "${_consumer_src}/third_party/avgpool/avgpool.hpp" COPYONLY)
    _avgpool_consumer(consumer-single-header
        "-DAVGPOOL_CONSUMER_MODE=single_header"
        "-DAVGPOOL_USE_XSIMD=${AVGPOOL_USE_XSIMD}")
    message(STATUS "consumer via the single header: OK")
    return()
elseif(NOT AVGPOOL_CONSUMER_MODE STREQUAL "package")
    message(FATAL_ERROR "run_consumer.cmake: unknown AVGPOOL_CONSUMER_MODE '${AVGPOOL_CONSUMER_MODE}'")
endif()

# ---- package mode -------------------------------------------------------------------------
set(_prefix "${_work}/prefix")
set(_avgpool_bin "${_work}/avgpool-build")

_avgpool_step("configure avgpool"
    "${CMAKE_COMMAND}" -S "${AVGPOOL_SOURCE_DIR}" -B "${_avgpool_bin}" ${_common}
    "-DCMAKE_INSTALL_PREFIX=${_prefix}"
    -DAVGPOOL_BUILD_TESTS=OFF -DAVGPOOL_BUILD_EXAMPLES=OFF -DAVGPOOL_BUILD_BENCH=OFF
    -DAVGPOOL_INSTALL=ON
    "-DAVGPOOL_USE_XSIMD=${AVGPOOL_USE_XSIMD}")
_avgpool_step("build and install avgpool"
    "${CMAKE_COMMAND}" --build "${_avgpool_bin}" --config "${AVGPOOL_BUILD_TYPE}" --target install)

# The installed layout: headers, an arch-independent CMake package, a pkg-config file.
foreach(_f IN ITEMS
        include/avgpool/avgpool.hpp
        include/avgpool/version.hpp
        share/cmake/avgpool/avgpoolConfig.cmake
        share/cmake/avgpool/avgpoolConfigVersion.cmake
        share/cmake/avgpool/avgpoolTargets.cmake
        share/pkgconfig/avgpool.pc)
    if(NOT EXISTS "${_prefix}/${_f}")
        message(FATAL_ERROR "install: ${_prefix}/${_f} is missing")
    endif()
endforeach()
foreach(_d IN ITEMS lib lib64 bin)
    if(EXISTS "${_prefix}/${_d}")
        message(FATAL_ERROR "install: header-only avgpool installed something into ${_prefix}/${_d}")
    endif()
endforeach()

# Expected version, read from the same header CMake's project() uses.
file(STRINGS "${AVGPOOL_SOURCE_DIR}/include/avgpool/version.hpp" _lines
     REGEX "^#define[ \t]+AVGPOOL_VERSION_(MAJOR|MINOR|PATCH)[ \t]+[0-9]+")
set(_version "")
foreach(_part IN ITEMS MAJOR MINOR PATCH)
    foreach(_line IN LISTS _lines)
        if(_line MATCHES "AVGPOOL_VERSION_${_part}[ \t]+([0-9]+)")
            list(APPEND _version "${CMAKE_MATCH_1}")
        endif()
    endforeach()
endforeach()
string(REPLACE ";" "." _version "${_version}")

# 1. find_package(avgpool 0.1 CONFIG REQUIRED) from the temporary prefix.
_avgpool_consumer(consumer-package
    "-DAVGPOOL_CONSUMER_MODE=package"
    "-DCMAKE_PREFIX_PATH=${_prefix}"
    "-DAVGPOOL_EXPECTED_PREFIX=${_prefix}"
    "-DAVGPOOL_EXPECTED_VERSION=${_version}")

# 2. A too-new version request must be refused.
set(_too_new "${_work}/consumer-too-new")
message(STATUS "[package] configure consumer asking for avgpool 99.0 (must fail)")
execute_process(
    COMMAND "${CMAKE_COMMAND}" -S "${AVGPOOL_CONSUMER_SOURCE_DIR}" -B "${_too_new}" ${_common}
            "-DAVGPOOL_CONSUMER_MODE=package"
            "-DAVGPOOL_REQUEST_VERSION=99.0"
            "-DCMAKE_PREFIX_PATH=${_prefix}"
    RESULT_VARIABLE _rc
    OUTPUT_VARIABLE _out
    ERROR_VARIABLE _out)
if(_rc EQUAL 0)
    message(FATAL_ERROR "find_package(avgpool 99.0) succeeded but must be refused:\n${_out}")
endif()
string(REGEX REPLACE "[ \t\r\n]+" " " _flat "${_out}")
if(NOT _flat MATCHES "compatible with requested version \"99\\.0\"")
    message(FATAL_ERROR "find_package(avgpool 99.0) failed, but not on the version check:\n${_out}")
endif()
message(STATUS "[package] avgpool 99.0 refused, as it must be")

# 3. pkg-config: version, include directory, and a direct compile of the consumer.
find_program(_pkg_config NAMES pkg-config pkgconf)
if(NOT _pkg_config)
    message(STATUS "[package] pkg-config not found: avgpool.pc check skipped")
    message(STATUS "consumer via find_package: OK")
    return()
endif()
set(ENV{PKG_CONFIG_PATH} "${_prefix}/share/pkgconfig")
_avgpool_step("pkg-config --modversion avgpool" "${_pkg_config}" --modversion avgpool)
string(STRIP "${_avgpool_last_output}" _pc_version)
if(NOT _pc_version STREQUAL _version)
    message(FATAL_ERROR "avgpool.pc: version '${_pc_version}', expected '${_version}'")
endif()
_avgpool_step("pkg-config --cflags avgpool" "${_pkg_config}" --cflags avgpool)
string(STRIP "${_avgpool_last_output}" _pc_cflags)
separate_arguments(_pc_cflags UNIX_COMMAND "${_pc_cflags}")
set(_pc_include "")
foreach(_flag IN LISTS _pc_cflags)
    if(_flag MATCHES "^-I(.+)$")
        set(_pc_include "${CMAKE_MATCH_1}")
    endif()
endforeach()
if(NOT EXISTS "${_pc_include}/avgpool/avgpool.hpp")
    message(FATAL_ERROR "avgpool.pc: Cflags '${_avgpool_last_output}' do not point at the "
                        "installed headers")
endif()
_avgpool_step("pkg-config --libs avgpool" "${_pkg_config}" --libs avgpool)
string(STRIP "${_avgpool_last_output}" _pc_libs)
separate_arguments(_pc_libs UNIX_COMMAND "${_pc_libs}")
get_filename_component(_cxx_name "${AVGPOOL_CXX_COMPILER}" NAME_WE)
if(_cxx_name MATCHES "^(cl|clang-cl)$")
    message(STATUS "[package] MSVC-style compiler: pkg-config compile check skipped")
else()
    if(AVGPOOL_CXX_STANDARD)
        set(_std "-std=c++${AVGPOOL_CXX_STANDARD}")
    else()
        set(_std "-std=c++17")
    endif()
    _avgpool_step("compile the consumer with pkg-config's Cflags"
        "${AVGPOOL_CXX_COMPILER}" ${_std} ${_pc_cflags}
        "${AVGPOOL_CONSUMER_SOURCE_DIR}/main.cpp" ${_pc_libs}
        -o "${_work}/consumer-pkgconfig${_exe_suffix}")
    _avgpool_step("run the pkg-config consumer" "${_work}/consumer-pkgconfig${_exe_suffix}")
endif()
message(STATUS "consumer via find_package: OK")
