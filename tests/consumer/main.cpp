// A downstream program: pools a 1x1x4x4 float tensor with a 2x2 kernel, stride 2, and checks the
// four averages. Built by tests/consumer/CMakeLists.txt, against an installed avgpool
// (find_package) or a source tree (add_subdirectory). Returns non-zero on any mismatch.
#include <avgpool/avgpool.hpp>

#include <array>
#include <cstdio>
#include <exception>

int main() {
    // 1  2  3  4
    // 5  6  7  8
    // 9 10 11 12
    // 13 14 15 16
    std::array<float, 16> in{};
    for (std::size_t i = 0; i < in.size(); ++i) {
        in[i] = static_cast<float>(i + 1);
    }
    std::array<float, 4> out{-1.0f, -1.0f, -1.0f, -1.0f};

    avgpool::pool_attrs<2> attrs;
    attrs.kernel = {2, 2};
    attrs.strides = {2, 2};

    try {
        avgpool::avg_pool<float, 2>(in.data(), {1, 1, 4, 4}, attrs, out.data());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "avg_pool threw: %s\n", e.what());
        return 2;
    }

    // (1+2+5+6)/4, (3+4+7+8)/4, (9+10+13+14)/4, (11+12+15+16)/4: all exact in float.
    const std::array<float, 4> expected{3.5f, 5.5f, 11.5f, 13.5f};
    int failures = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (out[i] != expected[i]) {
            std::fprintf(stderr, "out[%zu] = %g, expected %g\n", i, static_cast<double>(out[i]),
                         static_cast<double>(expected[i]));
            ++failures;
        }
    }
    if (failures != 0) {
        return 1;
    }
    std::printf("avgpool %d.%d.%d consumer: 2x2/2 pooling of 1x1x4x4 OK (%g %g %g %g)\n",
                AVGPOOL_VERSION_MAJOR, AVGPOOL_VERSION_MINOR, AVGPOOL_VERSION_PATCH,
                static_cast<double>(out[0]), static_cast<double>(out[1]),
                static_cast<double>(out[2]), static_cast<double>(out[3]));
    return 0;
}
