// Random pooling attributes and a one-line description of a case, shared by the randomized
// kernel tests (the description goes into SCOPED_TRACE so a failure names its geometry).
#ifndef AVGPOOL_TEST_SUPPORT_GEOMETRY_HPP
#define AVGPOOL_TEST_SUPPORT_GEOMETRY_HPP

#include <avgpool/avgpool.hpp>

#include <algorithm>
#include <random>
#include <string>

namespace avgpool_test {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool under_asan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool under_asan = true;
#else
constexpr bool under_asan = false;
#endif
#else
constexpr bool under_asan = false;
#endif

/// Cases for a randomized sweep of n: all of them, or a quarter under AddressSanitizer, where a
/// case costs about 50x more (the sanitizer CI stage looks for memory errors, which the
/// geometries of the first quarter reach as well; the release test workflow runs every case).
/// (A half made the sanitizer stage's tests 186 s of a CI run of 1196 s, against 1200 allowed.)
constexpr int sweep(int n) noexcept { return under_asan ? (n + 3) / 4 : n; }

/// Any mode: kernels 1-13 (at most 2 past the extent), strides 1-5, dilation 2-3 on a quarter
/// of the axes, pads up to a kernel, every auto_pad / rounding / divisor, overrides, NaN mode.
template <std::size_t R>
avgpool::pool_attrs<R> random_attrs(std::mt19937_64& gen, const avgpool::dims<R>& spatial) {
    using avgpool::index_t;
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    avgpool::pool_attrs<R> a;
    for (std::size_t ax = 0; ax < R; ++ax) {
        a.kernel[ax] = pick(1, std::min<index_t>(13, spatial[ax] + 2));
        a.strides[ax] = pick(1, 5);
        a.dilations[ax] = pick(0, 3) == 0 ? pick(2, 3) : 1;
        a.pads_begin[ax] = pick(0, a.kernel[ax]);
        a.pads_end[ax] = pick(0, a.kernel[ax] + 1);
    }
    a.auto_pad = static_cast<avgpool::pad_type>(pick(0, 3));
    a.rounding = static_cast<avgpool::rounding_type>(pick(0, 2));
    a.divisor = static_cast<avgpool::divisor_type>(pick(0, 3));
    a.divisor_override = pick(0, 5) == 0 ? pick(1, 30) : 0;
    a.empty_window_nan = pick(0, 1) == 1;
    a.oversized_kernel = pick(0, 1) == 1;
    return a;
}

/// "<label> shape N C ... k ... s ... d ... pb ... pe ... pad P round R div D override O nan B".
template <std::size_t R>
std::string describe(const avgpool::dims<R + 2>& s, const avgpool::pool_attrs<R>& a, const std::string& label) {
    std::string t = label + " shape";
    for (avgpool::index_t v : s) t += " " + std::to_string(v);
    auto list = [&](const char* name, const avgpool::dims<R>& d) {
        t += std::string(" ") + name;
        for (avgpool::index_t v : d) t += " " + std::to_string(v);
    };
    list("k", a.kernel);
    list("s", a.strides);
    list("d", a.dilations);
    list("pb", a.pads_begin);
    list("pe", a.pads_end);
    t += " pad " + std::to_string(static_cast<int>(a.auto_pad)) + " round " +
         std::to_string(static_cast<int>(a.rounding)) + " div " + std::to_string(static_cast<int>(a.divisor)) +
         " override " + std::to_string(a.divisor_override) + " nan " + std::to_string(a.empty_window_nan) +
         " oversized " + std::to_string(a.oversized_kernel);
    return t;
}

}  // namespace avgpool_test

#endif  // AVGPOOL_TEST_SUPPORT_GEOMETRY_HPP
