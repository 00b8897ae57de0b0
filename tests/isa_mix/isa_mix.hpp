// Two translation units built for different instruction sets (isa_mix_main.cpp with the
// build's flags, isa_mix_other.cpp with AVX2 and without AVX-512), as a runtime-dispatch build
// compiles them. Each reports what its own code was compiled for and pools the same tensor.
#ifndef AVGPOOL_TEST_ISA_MIX_HPP
#define AVGPOOL_TEST_ISA_MIX_HPP

#include <string>
#include <vector>

struct isa_report {
    std::string simd;      // avgpool::simd_name(), called through the symbol the program links
    std::string expected;  // what this unit's own code says (xsimd's type for its target)
    std::string tag;   // AVGPOOL_ABI_TAG as this unit expands it
    std::vector<float> cf, cl;  // a 3x3 stride-2 pool of the same input, both layouts
};

isa_report isa_mix_other();

#endif
