// Built with AVX2, FMA and F16C and without AVX-512 (tests/CMakeLists.txt).
#include "isa_mix_common.hpp"

isa_report isa_mix_other() { return isa_mix_report(); }
