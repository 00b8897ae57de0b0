# Runs the ThreadSanitizer test program (-DAVGPOOL_TSAN_EXE=...). Any TSan report fails it
# (halt_on_error). TSan of LLVM <= 17 aborts with "unexpected memory mapping" on kernels whose
# mmap randomization (vm.mmap_rnd_bits) exceeds what its fixed layout allows: then the program
# runs again with randomization off (setarch -R), where the kernel and seccomp permit it.
if(NOT AVGPOOL_TSAN_EXE)
    message(FATAL_ERROR "run_tsan.cmake: pass -DAVGPOOL_TSAN_EXE=<program>")
endif()
set(ENV{TSAN_OPTIONS} "halt_on_error=1 second_deadlock_stack=1 $ENV{TSAN_OPTIONS}")

execute_process(COMMAND "${AVGPOOL_TSAN_EXE}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0 AND out MATCHES "unexpected memory mapping")
    find_program(_setarch setarch)
    execute_process(COMMAND uname -m OUTPUT_VARIABLE _arch OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_setarch)
        message(STATUS "TSan: unexpected memory mapping; running again under setarch ${_arch} -R")
        execute_process(COMMAND "${_setarch}" "${_arch}" -R "${AVGPOOL_TSAN_EXE}"
                        RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    endif()
endif()
message("${out}")
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "avgpool_tsan_tests failed (exit code ${rc})")
endif()
