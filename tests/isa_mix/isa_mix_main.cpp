// Built with the build's own flags (SSE2 by default, AVX-512 under -march=native on such a
// machine): the library's inline functions and templates are instantiated here and in
// isa_mix_other.cpp with different bodies. Were they the same symbols, the linker would keep
// one body for both units (the AVX2 one could run here, on a machine without AVX2); the ABI
// tag (config.hpp) keeps them apart. Checks that each unit runs its own code, and that the two
// agree on the results. (A build whose own flags are AVX2 without AVX-512 gives both units the
// same target: the check still runs, but cannot fail.)
#include <cmath>
#include <cstdio>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#define AVGPOOL_TEST_X86 1
#endif

#include "isa_mix_common.hpp"

#ifdef AVGPOOL_TEST_X86
// Whether the CPU (and the OS, for AVX state) can run the AVX2 unit. Clang 14's
// __builtin_cpu_supports does not know "f16c": CPUID leaf 1 tells.
static bool runs_avx2_unit() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || (c & bit_F16C) == 0) return false;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

int main() {
    const isa_report mine = isa_mix_report();
    std::printf("this unit: %s (%s)\n", mine.simd.c_str(), mine.tag.c_str());
#ifdef AVGPOOL_TEST_X86
    if (!runs_avx2_unit()) {
        std::puts("SKIP: this CPU cannot run the AVX2 unit");
        return 0;
    }
#endif
    const isa_report other = isa_mix_other();
    std::printf("other unit: %s (%s)\n", other.simd.c_str(), other.tag.c_str());
    if (other.tag == mine.tag) std::puts("note: both units were built for the same target");
    for (const isa_report* r : {&mine, &other}) {
        if (r->simd != r->expected) {
            std::printf("FAIL: the %s unit ran simd_name() of %s: the linker merged the units' symbols\n",
                        r->expected.c_str(), r->simd.c_str());
            return 1;
        }
    }
    for (int l = 0; l < 2; ++l) {
        const std::vector<float>& a = l == 0 ? mine.cf : mine.cl;
        const std::vector<float>& b = l == 0 ? other.cf : other.cl;
        if (a.empty() || a.size() != b.size()) {
            std::puts("FAIL: a pool failed");
            return 1;
        }
        for (std::size_t i = 0; i < a.size(); ++i) {
            // Sums of at most 9 values of [-6, 6.5] in steps of 1/8 are exact; the quotients
            // may round differently between instruction sets, by an ulp or so.
            if (!(std::fabs(a[i] - b[i]) <= 1e-6f * std::fabs(a[i]))) {
                std::printf("FAIL: %s output %zu: %g against %g\n", l == 0 ? "cf" : "cl", i, a[i], b[i]);
                return 1;
            }
        }
    }
    std::puts("OK");
    return 0;
}
