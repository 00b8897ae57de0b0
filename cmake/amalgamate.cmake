# avgpool: generate one self-contained header from include/avgpool/.
# SPDX-License-Identifier: MIT
#
#   cmake -DAVGPOOL_SOURCE_DIR=<repo> -DAVGPOOL_OUTPUT=<dir>/avgpool/avgpool.hpp
#         -P cmake/amalgamate.cmake
#
# Starts at include/avgpool/avgpool.hpp and follows every quoted include ("error.hpp",
# "detail/plan.hpp", "../types.hpp"), resolved relative to the including file, inlining each
# header once: a header reached a second time is dropped (its include guard would make it empty
# anyway). Only the `#include "..."` line itself is replaced, so preprocessor conditionals
# around includes stay as they are. Angle-bracket includes (<vector>, <xsimd/xsimd.hpp>,
# <immintrin.h>) are left alone, so the result uses xsimd when it is reachable and
# AVGPOOL_NO_XSIMD is not defined, exactly like the separate headers; only <avgpool/...>, the
# library itself, is inlined like a quoted include.
# Headers under include/avgpool/ that avgpool.hpp does not reach (opt-in headers) follow after
# it, in path order, so the single header holds the whole library and code written for any
# of its headers works with it.
#
# The output starts with the LICENSE text and the library version, and defines
# AVGPOOL_SINGLE_HEADER 1 so that a program can tell which form of the library it got.
# A quoted include that does not resolve to a file under include/avgpool/ is an error: the output
# must not depend on anything but the standard library and, optionally, xsimd.
cmake_minimum_required(VERSION 3.14)

foreach(_var IN ITEMS AVGPOOL_SOURCE_DIR AVGPOOL_OUTPUT)
    if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
        message(FATAL_ERROR "amalgamate.cmake: -D${_var}=... is required")
    endif()
endforeach()

get_filename_component(_src "${AVGPOOL_SOURCE_DIR}" ABSOLUTE)
get_filename_component(_out "${AVGPOOL_OUTPUT}" ABSOLUTE)
set(_include_root "${_src}/include")
set(_entry "${_include_root}/avgpool/avgpool.hpp")
if(NOT EXISTS "${_entry}")
    message(FATAL_ERROR "amalgamate.cmake: ${_entry} does not exist")
endif()

# ---- version and license ---------------------------------------------------------------------
file(STRINGS "${_include_root}/avgpool/version.hpp" _version_lines
     REGEX "^#define[ \t]+AVGPOOL_VERSION_(MAJOR|MINOR|PATCH)[ \t]+[0-9]+")
set(_version "")
foreach(_part IN ITEMS MAJOR MINOR PATCH)
    set(_found "")
    foreach(_line IN LISTS _version_lines)
        if(_line MATCHES "^#define[ \t]+AVGPOOL_VERSION_${_part}[ \t]+([0-9]+)")
            set(_found "${CMAKE_MATCH_1}")
        endif()
    endforeach()
    if(_found STREQUAL "")
        message(FATAL_ERROR "amalgamate.cmake: AVGPOOL_VERSION_${_part} not found in version.hpp")
    endif()
    list(APPEND _version "${_found}")
endforeach()
string(REPLACE ";" "." _version "${_version}")

# Source text is split into lines through a CMake list; semicolons, square brackets and
# backslashes (a line continuation would escape the list separator) in C++ would confuse list
# handling, so they travel as control-character placeholders.
string(ASCII 1 _ph_semi)
string(ASCII 2 _ph_open)
string(ASCII 3 _ph_close)
string(ASCII 4 _ph_backslash)

# Reads a file into a list of lines (placeholders in, trailing newline dropped) in <out_var>.
function(_avgpool_read_lines _path _out_var)
    file(READ "${_path}" _text)
    string(REPLACE "\r\n" "\n" _text "${_text}")
    string(REPLACE "\\" "${_ph_backslash}" _text "${_text}")
    string(REPLACE ";" "${_ph_semi}" _text "${_text}")
    string(REPLACE "[" "${_ph_open}" _text "${_text}")
    string(REPLACE "]" "${_ph_close}" _text "${_text}")
    string(REGEX REPLACE "\n$" "" _text "${_text}")
    string(REPLACE "\n" ";" _lines "${_text}")
    set(${_out_var} "${_lines}" PARENT_SCOPE)
endfunction()

set(_license_file "${_src}/LICENSE")
if(NOT EXISTS "${_license_file}")
    message(FATAL_ERROR "amalgamate.cmake: ${_license_file} does not exist")
endif()
_avgpool_read_lines("${_license_file}" _license_lines)

set(_result "")
string(APPEND _result
    "// avgpool ${_version}, generated from include/avgpool/ by cmake/amalgamate.cmake; do not edit.\n"
    "// Header-only N-D average pooling: the whole library in one file.\n"
    "// SPDX-License-Identifier: MIT\n"
    "//\n")
foreach(_line IN LISTS _license_lines)
    if(_line STREQUAL "")
        string(APPEND _result "//\n")
    else()
        string(APPEND _result "// ${_line}\n")
    endif()
endforeach()
string(APPEND _result
    "\n"
    "#ifndef AVGPOOL_SINGLE_HEADER_HPP\n"
    "#define AVGPOOL_SINGLE_HEADER_HPP\n"
    "\n"
    "// This file is the whole library: it needs only the standard library and, when\n"
    "// <xsimd/xsimd.hpp> is reachable and AVGPOOL_NO_XSIMD is not defined, xsimd.\n"
    "#define AVGPOOL_SINGLE_HEADER 1\n")

# ---- inlining --------------------------------------------------------------------------------
# A header inlined where no #if is open (its own include guard aside) is in the output for
# good, and later includes of it are dropped. One inlined inside an #if/#ifdef block may have
# been skipped by the preprocessor, so a later include inlines it again (its guard then keeps
# the second copy empty whenever the first one counted).
set(_seen "")     # headers inlined unconditionally (absolute paths)
set(_inlined "")  # every header inlined at all, for the summary
set(_stack "")    # headers being inlined right now (include cycles)
set(_dash_run "------------------------------------------------------------------------------")

# Appends the text of <_path> (absolute) to _result, recursively inlining quoted includes.
# <_cond> is TRUE when the include that led here sits inside a conditional block.
# A function has its own scope, so _result/_seen/_inlined go back with PARENT_SCOPE.
function(_avgpool_inline _path _cond)
    file(RELATIVE_PATH _rel "${_include_root}" "${_path}")
    if(NOT _cond)
        list(APPEND _seen "${_path}")
    endif()
    list(APPEND _inlined "${_path}")
    list(REMOVE_DUPLICATES _inlined)
    list(APPEND _stack "${_path}")
    get_filename_component(_dir "${_path}" DIRECTORY)
    _avgpool_read_lines("${_path}" _lines)

    # "// ---- begin <rel> ---...": padded to 80 columns (string(REPEAT) needs CMake 3.15).
    string(APPEND _result "\n// ---- begin ${_rel} ")
    string(LENGTH "${_rel}" _len)
    math(EXPR _dashes "80 - 15 - ${_len}")
    if(_dashes GREATER 0)
        string(SUBSTRING "${_dash_run}" 0 ${_dashes} _pad)
        string(APPEND _result "${_pad}")
    endif()
    string(APPEND _result "\n")

    # Conditional nesting inside this file: _depth counts open #if/#ifdef/#ifndef blocks;
    # a leading `#ifndef X` + `#define X` is the include guard and does not count.
    set(_depth 0)
    set(_guard_depth 0)
    set(_directives 0)
    set(_guard_name "")
    foreach(_line IN LISTS _lines)
        if(_line MATCHES "^[ \t]*#[ \t]*([a-z]+)[ \t]*([A-Za-z0-9_]*)")
            set(_directive "${CMAKE_MATCH_1}")
            set(_name "${CMAKE_MATCH_2}")
            math(EXPR _directives "${_directives} + 1")
            if(_directive MATCHES "^(if|ifdef|ifndef)$")
                math(EXPR _depth "${_depth} + 1")
                if(_directives EQUAL 1 AND _directive STREQUAL "ifndef")
                    set(_guard_name "${_name}")
                endif()
            elseif(_directive STREQUAL "endif")
                math(EXPR _depth "${_depth} - 1")
            elseif(_directives EQUAL 2 AND _directive STREQUAL "define"
                   AND NOT _guard_name STREQUAL "" AND _name STREQUAL _guard_name)
                set(_guard_depth 1)
            endif()
        endif()
        if(_cond OR _depth GREATER _guard_depth)
            set(_here_cond TRUE)
        else()
            set(_here_cond FALSE)
        endif()

        set(_target "")
        if(_line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"")
            # "x.hpp": relative to the including file, as the preprocessor looks first.
            set(_inc "\"${CMAKE_MATCH_1}\"")
            get_filename_component(_target "${_dir}/${CMAKE_MATCH_1}" ABSOLUTE)
            if(NOT EXISTS "${_target}" OR IS_DIRECTORY "${_target}")
                message(FATAL_ERROR "amalgamate.cmake: ${_rel}: #include ${_inc} does not "
                                    "name a file next to it (${_target})")
            endif()
            string(FIND "${_target}" "${_include_root}/avgpool/" _pos)
            if(NOT _pos EQUAL 0)
                message(FATAL_ERROR "amalgamate.cmake: ${_rel}: #include ${_inc} leaves "
                                    "${_include_root}/avgpool")
            endif()
        elseif(_line MATCHES "^[ \t]*#[ \t]*include[ \t]*<(avgpool/[^>]+)>")
            # <avgpool/x.hpp> inside the library is the library too: inline it as well.
            set(_inc "<${CMAKE_MATCH_1}>")
            get_filename_component(_target "${_include_root}/${CMAKE_MATCH_1}" ABSOLUTE)
            if(NOT EXISTS "${_target}" OR IS_DIRECTORY "${_target}")
                message(FATAL_ERROR "amalgamate.cmake: ${_rel}: #include ${_inc} is not a file "
                                    "under ${_include_root}")
            endif()
        endif()
        if(NOT _target STREQUAL "")
            file(RELATIVE_PATH _inc_rel "${_include_root}" "${_target}")
            list(FIND _seen "${_target}" _done)
            list(FIND _stack "${_target}" _open)
            if(NOT _open EQUAL -1)
                # An include cycle: the header's guard is already defined here, so the
                # preprocessor would skip it too.
                string(APPEND _result
                       "// #include ${_inc}: ${_inc_rel} is being inlined (include cycle)\n")
            elseif(_done EQUAL -1)
                _avgpool_inline("${_target}" ${_here_cond})
                string(APPEND _result "// ---- back in ${_rel}\n")
            else()
                string(APPEND _result "// #include ${_inc}: ${_inc_rel} is inlined above\n")
            endif()
        elseif(_line MATCHES "^[ \t]*#[ \t]*pragma[ \t]+once")
            # The single header has its own guard; `#pragma once` inside it would be noise.
            string(APPEND _result "// (#pragma once)\n")
        else()
            string(APPEND _result "${_line}\n")
        endif()
    endforeach()

    string(APPEND _result "// ---- end ${_rel}\n")
    set(_result "${_result}" PARENT_SCOPE)
    set(_seen "${_seen}" PARENT_SCOPE)
    set(_inlined "${_inlined}" PARENT_SCOPE)
endfunction()

_avgpool_inline("${_entry}" FALSE)
list(LENGTH _inlined _from_umbrella)

# Headers that avgpool.hpp does not reach (opt-in headers such as a front end) are part of the
# library too: they follow, in path order, each again with everything it includes.
file(GLOB_RECURSE _all_headers "${_include_root}/avgpool/*.hpp")
list(SORT _all_headers)
set(_extra "")
foreach(_h IN LISTS _all_headers)
    get_filename_component(_h "${_h}" ABSOLUTE)
    list(FIND _seen "${_h}" _i)
    if(_i EQUAL -1)
        if(_extra STREQUAL "")
            string(APPEND _result
                "\n// ==== Headers that avgpool/avgpool.hpp does not include "
                "=============================\n")
        endif()
        file(RELATIVE_PATH _h_rel "${_include_root}" "${_h}")
        list(APPEND _extra "${_h_rel}")
        _avgpool_inline("${_h}" FALSE)
    endif()
endforeach()

string(APPEND _result "\n#endif  // AVGPOOL_SINGLE_HEADER_HPP\n")

string(REPLACE "${_ph_semi}" ";" _result "${_result}")
string(REPLACE "${_ph_open}" "[" _result "${_result}")
string(REPLACE "${_ph_close}" "]" _result "${_result}")
string(REPLACE "${_ph_backslash}" "\\" _result "${_result}")

# Sanity check: no quoted include and no include of a library header survived.
string(REGEX MATCH "\n[ \t]*#[ \t]*include[ \t]*(\"[^\"\n]*\"|<avgpool/[^>\n]*>)" _left
       "${_result}")
if(_left)
    message(FATAL_ERROR "amalgamate.cmake: an include of the library survived:${_left}")
endif()

# Write through a temporary file so that a failed run never leaves half a header behind.
get_filename_component(_out_dir "${_out}" DIRECTORY)
file(MAKE_DIRECTORY "${_out_dir}")
file(WRITE "${_out}.tmp" "${_result}")
file(RENAME "${_out}.tmp" "${_out}")

list(LENGTH _inlined _count)
message(STATUS "avgpool ${_version}: ${_count} headers inlined into ${_out} "
               "(${_from_umbrella} from avgpool/avgpool.hpp)")
if(NOT _extra STREQUAL "")
    string(REPLACE ";" ", " _extra "${_extra}")
    message(STATUS "avgpool: not included by avgpool/avgpool.hpp, appended: ${_extra}")
endif()
