// The body both translation units compile (each with its own flags).
#include <avgpool/avgpool.hpp>

#include "isa_mix.hpp"

#define AVGPOOL_TEST_STR_I(x) #x
#define AVGPOOL_TEST_STR(x) AVGPOOL_TEST_STR_I(x)

namespace {

isa_report isa_mix_report() {
    isa_report r;
    // Through a volatile pointer: the call goes to whichever definition the linker kept for
    // this unit's symbol, not to a copy the compiler inlined here.
    const char* (*volatile name)() noexcept = &avgpool::simd_name;
    r.simd = name();
#if AVGPOOL_HAS_XSIMD
    r.expected = xsimd::default_arch::name();  // a member of a type named after the target
#else
    r.expected = "scalar";
#endif
    r.tag = AVGPOOL_TEST_STR(AVGPOOL_ABI_TAG);
    const avgpool::index_t C = 37, H = 23, W = 29;
    std::vector<float> in(static_cast<std::size_t>(C * H * W));
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 7919) % 101) * 0.125f - 6.0f;
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.strides = {2, 2};
    a.pads_begin = a.pads_end = {1, 1};
    for (avgpool::layout lay : {avgpool::layout::channels_first, avgpool::layout::channels_last}) {
        auto plan = avgpool::pooling<2>::create({1, C, H, W}, a, lay);
        if (!plan) return r;
        std::vector<float>& out = lay == avgpool::layout::channels_first ? r.cf : r.cl;
        out.assign(static_cast<std::size_t>(plan->output_size()), -1.0f);
        if (!plan->forward(in.data(), out.data())) out.clear();
    }
    return r;
}

}  // namespace
