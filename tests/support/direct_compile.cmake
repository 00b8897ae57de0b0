# Included by the test scripts that run the compiler directly, in CMake's script mode
# (single_header/run_standalone.cmake, headers/run_headers.cmake). Sets in the including scope:
#   _avgpool_msvc_cli  TRUE when AVGPOOL_CXX_COMPILER is MSVC-style (cl, clang-cl): the scripts'
#                      command lines are GCC / Clang style, so they skip their test then
#   _std               -std=c++<AVGPOOL_CXX_STANDARD>, C++17 when that is not given
#   _xsimd_flags       -I<dir> for each of AVGPOOL_XSIMD_INCLUDE_DIRS ('|'-separated)
get_filename_component(_cxx_name "${AVGPOOL_CXX_COMPILER}" NAME_WE)
set(_avgpool_msvc_cli FALSE)
if(_cxx_name MATCHES "^(cl|clang-cl)$")
    set(_avgpool_msvc_cli TRUE)
endif()

if(AVGPOOL_CXX_STANDARD)
    set(_std "-std=c++${AVGPOOL_CXX_STANDARD}")
else()
    set(_std "-std=c++17")
endif()

set(_xsimd_flags "")
if(AVGPOOL_XSIMD_INCLUDE_DIRS)
    string(REPLACE "|" ";" _xsimd_dirs "${AVGPOOL_XSIMD_INCLUDE_DIRS}")
    foreach(_d IN LISTS _xsimd_dirs)
        list(APPEND _xsimd_flags "-I${_d}")
    endforeach()
endif()
