// A downstream program built with -fno-exceptions (tests/consumer/CMakeLists.txt): every error
// comes back as a value. Pools a 1x1x16 float tensor with a kernel of 4, stride 4, then asks for
// a zero stride and checks that the error is reported, not thrown, and the output is untouched.
// Returns non-zero on any mismatch.
#include <avgpool/avgpool.hpp>

#include <array>
#include <cstdio>
#include <string>

#if AVGPOOL_HAS_EXCEPTIONS
#error "main_noexcept.cpp must be compiled with exceptions disabled"
#endif

int main() {
    std::array<float, 16> in{};
    for (std::size_t i = 0; i < in.size(); ++i) {
        in[i] = static_cast<float>(i + 1);
    }
    std::array<float, 4> out{-1.0f, -1.0f, -1.0f, -1.0f};

    avgpool::pool_attrs<1> attrs;
    attrs.kernel = {4};
    attrs.strides = {4};

    avgpool::status st = avgpool::avg_pool<float, 1>(in.data(), {1, 1, 16}, attrs, out.data());
    const std::array<float, 4> expected{2.5f, 6.5f, 10.5f, 14.5f};
    if (!st || out != expected) {
        std::fprintf(stderr, "valid pooling: %s, out = %g %g %g %g\n",
                     st ? "ok" : st.error().message().c_str(), static_cast<double>(out[0]),
                     static_cast<double>(out[1]), static_cast<double>(out[2]),
                     static_cast<double>(out[3]));
        return 1;
    }

    // An invalid stride: the call reports the error as a value and writes nothing.
    attrs.strides = {0};
    out.fill(-1.0f);
    st = avgpool::avg_pool<float, 1>(in.data(), {1, 1, 16}, attrs, out.data());
    const std::string message = st ? std::string() : st.error().message();
    if (st || st.error_code() != avgpool::errc::invalid_value ||
        message.find("strides[0]") == std::string::npos || out[0] != -1.0f) {
        std::fprintf(stderr, "zero stride: expected an invalid_value error naming strides[0], "
                             "got '%s'\n", message.c_str());
        return 1;
    }

    std::printf("avgpool %d.%d.%d consumer without exceptions: OK (error as value: %s)\n",
                AVGPOOL_VERSION_MAJOR, AVGPOOL_VERSION_MINOR, AVGPOOL_VERSION_PATCH,
                message.c_str());
    return 0;
}
