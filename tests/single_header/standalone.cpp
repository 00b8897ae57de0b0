// The single-header smoke program: run_standalone.cmake copies it and the generated
// avgpool.hpp, and nothing else, into an empty directory and compiles it there with the
// compiler alone. Checks a small exact case and a larger one (wide enough for the vector
// kernels) against a plain loop. Returns non-zero on any mismatch.
#include "avgpool.hpp"

#include <cmath>
#include <cstdio>
#include <vector>

#ifndef AVGPOOL_SINGLE_HEADER
#error "avgpool.hpp here must be the generated single header"
#endif
#if defined(AVGPOOL_EXPECT_XSIMD) && AVGPOOL_HAS_XSIMD != AVGPOOL_EXPECT_XSIMD
#error "AVGPOOL_HAS_XSIMD is not what this build expects"
#endif

int main() {
    int failures = 0;

    // 1x1x4x4 holding 1..16, 2x2 kernel, stride 2: four exact averages.
    std::vector<float> small(16);
    for (std::size_t i = 0; i < small.size(); ++i) small[i] = static_cast<float>(i + 1);
    avgpool::pool_attrs<2> attrs;
    attrs.kernel = {2, 2};
    attrs.strides = {2, 2};
    std::vector<float> out(4, -1.0f);
    auto st = avgpool::avg_pool<float, 2>(small.data(), {1, 1, 4, 4}, attrs, out.data());
    const float expected[4] = {3.5f, 5.5f, 11.5f, 13.5f};
    if (!st) {
        std::fprintf(stderr, "FAIL: 4x4 pooling reported an error\n");
        ++failures;
    }
    for (int i = 0; i < 4; ++i) {
        if (out[static_cast<std::size_t>(i)] != expected[i]) {
            std::fprintf(stderr, "FAIL: out[%d] = %g, expected %g\n", i,
                         static_cast<double>(out[static_cast<std::size_t>(i)]),
                         static_cast<double>(expected[i]));
            ++failures;
        }
    }

    // 1x3x37x70, 3x3 kernel, stride 1, pads 1 (exclude padding): against a plain loop.
    const int C = 3, H = 37, W = 70;
    std::vector<double> in(static_cast<std::size_t>(C * H * W));
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>((i * 7919) % 101) - 50.0;
    avgpool::pool_attrs<2> a3;
    a3.kernel = {3, 3};
    a3.pads_begin = {1, 1};
    a3.pads_end = {1, 1};
    std::vector<double> got(in.size(), -1.0);
    st = avgpool::avg_pool<double, 2>(in.data(), {1, C, H, W}, a3, got.data());
    if (!st) {
        std::fprintf(stderr, "FAIL: 37x70 pooling reported an error\n");
        ++failures;
    }
    double worst = 0.0;
    for (int c = 0; c < C; ++c)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                double sum = 0.0;
                int n = 0;
                for (int dy = -1; dy <= 1; ++dy)
                    for (int dx = -1; dx <= 1; ++dx) {
                        const int yy = y + dy, xx = x + dx;
                        if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                        sum += in[static_cast<std::size_t>((c * H + yy) * W + xx)];
                        ++n;
                    }
                const double want = sum / n;
                const double diff = std::fabs(got[static_cast<std::size_t>((c * H + y) * W + x)] - want);
                if (diff > worst) worst = diff;
            }
    if (!(worst <= 1e-9)) {
        std::fprintf(stderr, "FAIL: 37x70 pooling differs from the plain loop by %g\n", worst);
        ++failures;
    }

    if (failures != 0) return 1;
    std::printf("avgpool %d.%d.%d single header alone: OK (xsimd %s, exceptions %s)\n",
                AVGPOOL_VERSION_MAJOR, AVGPOOL_VERSION_MINOR, AVGPOOL_VERSION_PATCH,
                AVGPOOL_HAS_XSIMD ? "on" : "off", AVGPOOL_HAS_EXCEPTIONS ? "on" : "off");
    return 0;
}
