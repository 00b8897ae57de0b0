// The README's example: a 3x3 average pool, stride 2, PyTorch-style ceil mode, on a 1x2x5x5 tensor.
#include <avgpool/avgpool.hpp>

#include <cstdio>
#include <vector>

int main() {
    avgpool::pool_attrs<2> attrs;                        // 2 spatial axes
    attrs.kernel = {3, 3};
    attrs.strides = {2, 2};
    attrs.pads_begin = attrs.pads_end = {1, 1};
    attrs.rounding = avgpool::rounding_type::ceil_torch;  // PyTorch ceil_mode=True
    attrs.divisor = avgpool::divisor_type::include_pad;   // count_include_pad=True

    auto plan = avgpool::pooling<2>::create({1, 2, 5, 5}, attrs);  // {N, C, H, W}
    if (!plan) {
        std::printf("error: %s\n", plan.error().message().c_str());
        return 1;
    }
    std::vector<float> in(static_cast<std::size_t>(plan->input_size()));
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 25);
    std::vector<float> out(static_cast<std::size_t>(plan->output_size()));
    plan->forward(in.data(), out.data());  // reuse the plan for every call

    const auto& s = plan->output_shape();
    std::printf("output %lld x %lld x %lld x %lld\n", (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3]);
    for (long long h = 0; h < s[2]; ++h) {
        for (long long w = 0; w < s[3]; ++w) std::printf(" %6.3f", out[static_cast<std::size_t>(h * s[3] + w)]);
        std::printf("\n");
    }
    return 0;
}
