// Uniform random reals for test inputs.
#ifndef AVGPOOL_TEST_SUPPORT_RANDOM_HPP
#define AVGPOOL_TEST_SUPPORT_RANDOM_HPP

#include <cstdint>
#include <random>

namespace avgpool_test {

/// Uniform values in [lo, hi] (hi only by rounding) from a 32- or 64-bit engine (std::mt19937,
/// std::mt19937_64), as std::uniform_real_distribution is used here:
/// `uniform<double> dist(-1, 1); x = dist(gen);`.
/// Not the standard distribution: libstdc++'s computes a logarithm for every value, which
/// unoptimized sanitizer builds do not fold away (a sixth of some tests' time there).
template <class T>
class uniform {
public:
    uniform(T lo, T hi) noexcept : lo_(static_cast<double>(lo)), width_(static_cast<double>(hi) - static_cast<double>(lo)) {}

    template <class Gen>
    T operator()(Gen& gen) const {
        static_assert(Gen::min() == 0, "uniform: an engine whose values start at 0");
        double u;  // in [0, 1), exactly representable
        if constexpr (Gen::max() == UINT64_MAX) {
            u = static_cast<double>(gen() >> 11) * 0x1p-53;
        } else {
            static_assert(Gen::max() == UINT32_MAX, "uniform: a 32- or 64-bit engine");
            u = static_cast<double>(gen()) * 0x1p-32;
        }
        return static_cast<T>(lo_ + width_ * u);
    }

private:
    double lo_, width_;
};

}  // namespace avgpool_test

#endif  // AVGPOOL_TEST_SUPPORT_RANDOM_HPP
