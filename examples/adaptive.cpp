// Adaptive average pooling: PSPNet's pyramid bins (1, 2, 3, 6) over a 60x60 feature map, and
// an output larger than the input (overlapping windows), as in OpenVINO AdaptiveAvgPool-8 and
// PyTorch adaptive_avg_pool2d.
#include <avgpool/avgpool.hpp>

#include <cstdio>
#include <vector>

int main() {
    const avgpool::dims<4> shape{1, 8, 60, 60};  // {N, C, H, W}
    std::vector<float> in(1 * 8 * 60 * 60);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 60);  // value = column

    for (avgpool::index_t bin : {1, 2, 3, 6}) {
        auto plan = avgpool::pooling<2>::create_adaptive(shape, {bin, bin});
        if (!plan) {
            std::printf("error: %s\n", plan.error().message().c_str());
            return 1;
        }
        std::vector<float> out(static_cast<std::size_t>(plan->output_size()));
        plan->forward(in.data(), out.data());
        std::printf("bin %lld: output %lldx%lld, first row of channel 0:", (long long)bin, (long long)bin,
                    (long long)bin);
        for (avgpool::index_t x = 0; x < bin; ++x) std::printf(" %6.2f", out[static_cast<std::size_t>(x)]);
        std::printf("\n");
    }

    // X = 3 to O = 5: windows [0,1) [0,2) [1,2) [1,3) [2,3) overlap.
    const float x[3] = {10, 20, 30};
    float y[5];
    avgpool::adaptive_avg_pool<float, 1>(x, {1, 1, 3}, {5}, y);
    std::printf("3 -> 5:");
    for (float v : y) std::printf(" %g", v);
    std::printf("\n");
    return y[1] == 15.0f && y[3] == 25.0f ? 0 : 1;
}
