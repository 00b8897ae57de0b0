// PyTorch front end: the arguments of torch.nn.AvgPool2d(3, stride=2, padding=1,
// ceil_mode=True, count_include_pad=False) on a 1x1x5x5 input 1..25, checked against the
// averages worked out by hand; then an argument PyTorch rejects, and an AdaptiveAvgPool2d size.
#include <avgpool/avgpool.hpp>
#include <avgpool/frontends/torch.hpp>

#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

int main() {
    // nn.AvgPool2d(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
    auto attrs = avgpool::torch::avg_pool2d({3}, {2}, {1}, /*ceil_mode=*/true, /*count_include_pad=*/false);
    if (!attrs) {
        std::printf("error: %s\n", attrs.error().message().c_str());
        return 1;
    }
    auto plan = avgpool::pooling<2>::create({1, 1, 5, 5}, *attrs);
    if (!plan) {
        std::printf("error: %s\n", plan.error().message().c_str());
        return 1;
    }
    std::vector<float> x(25), y(static_cast<std::size_t>(plan->output_size()));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
    plan->forward(x.data(), y.data());

    // Per axis the windows cover rows {0,1}, {1,2,3}, {3,4}: the padding is not counted.
    // E.g. (1 + 2 + 6 + 7) / 4 = 4 and (7 + 8 + 9 + 12 + 13 + 14 + 17 + 18 + 19) / 9 = 13.
    const float expected[9] = {4, 5.5f, 7, 11.5f, 13, 14.5f, 19, 20.5f, 22};
    std::printf("AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False) on 1x1x5x5 -> 1x1x%lldx%lld\n",
                (long long)plan->output_shape()[2], (long long)plan->output_shape()[3]);
    int wrong = y.size() == 9 ? 0 : 1;
    for (std::size_t r = 0; r < 3 && !wrong; ++r) {
        std::printf("  ");
        for (std::size_t c = 0; c < 3; ++c) {
            std::printf(" %5.2f", y[r * 3 + c]);
            if (std::fabs(y[r * 3 + c] - expected[r * 3 + c]) > 1e-5f) ++wrong;
        }
        std::printf("\n");
    }

    // PyTorch: "pad should be at most half of kernel size".
    auto bad = avgpool::torch::avg_pool2d({3}, {1}, {2});
    std::printf("AvgPool2d(3, stride=1, padding=2): %s\n", bad ? "accepted (unexpected)" : bad.error().message().c_str());
    if (bad) ++wrong;

    // nn.AdaptiveAvgPool2d((5, None)) on 1x64x10x9: None keeps the input's width.
    auto size = avgpool::torch::adaptive_avg_pool2d({1, 64, 10, 9}, {5, std::nullopt});
    if (!size) return 1;
    std::printf("AdaptiveAvgPool2d((5, None)) on 1x64x10x9 -> 1x64x%lldx%lld\n", (long long)(*size)[0],
                (long long)(*size)[1]);
    if ((*size)[0] != 5 || (*size)[1] != 9) ++wrong;

    std::printf(wrong ? "MISMATCH\n" : "matches the hand computation\n");
    return wrong ? 1 : 0;
}
