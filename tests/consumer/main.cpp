// A downstream program: pools a 1x1x16 float tensor with a kernel of 4, stride 4, and checks the
// four averages. Built by tests/consumer/CMakeLists.txt, against an installed avgpool
// (find_package) or a source tree (add_subdirectory). Returns non-zero on any mismatch.
#include <avgpool/avgpool.hpp>

#include <array>
#include <cstdio>
#include <exception>

int main() {
    // 1 2 ... 16
    std::array<float, 16> in{};
    for (std::size_t i = 0; i < in.size(); ++i) {
        in[i] = static_cast<float>(i + 1);
    }
    std::array<float, 4> out{-1.0f, -1.0f, -1.0f, -1.0f};

    avgpool::pool_attrs<1> attrs;
    attrs.kernel = {4};
    attrs.strides = {4};

    try {
        avgpool::avg_pool<float, 1>(in.data(), {1, 1, 16}, attrs, out.data());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "avg_pool threw: %s\n", e.what());
        return 2;
    }

    // (1+2+3+4)/4, (5+...+8)/4, (9+...+12)/4, (13+...+16)/4: all exact in float.
    const std::array<float, 4> expected{2.5f, 6.5f, 10.5f, 14.5f};
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
    std::printf("avgpool %d.%d.%d consumer: 4/4 pooling of 1x1x16 OK (%g %g %g %g)\n",
                AVGPOOL_VERSION_MAJOR, AVGPOOL_VERSION_MINOR, AVGPOOL_VERSION_PATCH,
                static_cast<double>(out[0]), static_cast<double>(out[1]),
                static_cast<double>(out[2]), static_cast<double>(out[3]));
    return 0;
}
