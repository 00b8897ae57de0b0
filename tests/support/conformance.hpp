// Locating and loading the shared conformance vectors (../shared/conformance next to the
// repository in CI). Tests skip with a clear message when the folder is absent.
#ifndef AVGPOOL_TEST_SUPPORT_CONFORMANCE_HPP
#define AVGPOOL_TEST_SUPPORT_CONFORMANCE_HPP

#include <avgpool/avgpool.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "json.hpp"

namespace avgpool_test {

/// AVGPOOL_CONFORMANCE_DIR from the environment wins over the build-time path.
inline std::string conformance_dir() {
    if (const char* env = std::getenv("AVGPOOL_CONFORMANCE_DIR")) return env;
#ifdef AVGPOOL_CONFORMANCE_DIR
    return AVGPOOL_CONFORMANCE_DIR;
#else
    return "";
#endif
}

inline bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

/// The parsed file, or nullptr when it is not there. Parsed once per process.
inline const json::value* conformance_file(const std::string& name) {
    static std::map<std::string, json::value> cache;
    auto it = cache.find(name);
    if (it != cache.end()) return &it->second;
    const std::string path = conformance_dir() + "/" + name;
    if (conformance_dir().empty() || !file_exists(path)) return nullptr;
    return &cache.emplace(name, json::parse_file(path)).first->second;
}

#define AVGPOOL_REQUIRE_CONFORMANCE(var, name)                                               \
    const ::avgpool_test::json::value* var = ::avgpool_test::conformance_file(name);         \
    if (var == nullptr)                                                                      \
    GTEST_SKIP() << "conformance vectors not found: " << ::avgpool_test::conformance_dir()  \
                 << "/" << (name)                                                            \
                 << " (CI provides ../shared/conformance; set AVGPOOL_CONFORMANCE_DIR to "   \
                    "point elsewhere)"

/// Copies a channels-first tensor {N, C, spatial...} into channels-last order.
template <class T>
std::vector<T> to_channels_last(const std::vector<T>& x, const std::vector<avgpool::index_t>& shape) {
    const avgpool::index_t N = shape[0], C = shape[1];
    avgpool::index_t S = 1;
    for (std::size_t i = 2; i < shape.size(); ++i) S *= shape[i];
    std::vector<T> y(x.size());
    for (avgpool::index_t n = 0; n < N; ++n)
        for (avgpool::index_t c = 0; c < C; ++c)
            for (avgpool::index_t s = 0; s < S; ++s)
                y[static_cast<std::size_t>((n * S + s) * C + c)] =
                    x[static_cast<std::size_t>((n * C + c) * S + s)];
    return y;
}

/// Calls f(std::integral_constant<std::size_t, R>{}) for a runtime R in 1..4, so that a test
/// can reach the fixed-rank API (pool_attrs<R>, pooling<R>, the front ends' templates).
/// Returns false (and calls nothing) for any other R.
template <class F>
bool for_rank(std::size_t R, F&& f) {
    switch (R) {
        case 1: f(std::integral_constant<std::size_t, 1>{}); return true;
        case 2: f(std::integral_constant<std::size_t, 2>{}); return true;
        case 3: f(std::integral_constant<std::size_t, 3>{}); return true;
        case 4: f(std::integral_constant<std::size_t, 4>{}); return true;
        default: return false;
    }
}

/// The first N entries of a runtime shape as dims<N> (the vector must have N entries).
template <std::size_t N>
avgpool::dims<N> to_dims(const std::vector<avgpool::index_t>& v) {
    avgpool::dims<N> d{};
    for (std::size_t i = 0; i < N && i < v.size(); ++i) d[i] = v[i];
    return d;
}

/// Field-by-field equality of two attribute sets.
template <std::size_t R>
bool same_attrs(const avgpool::pool_attrs<R>& a, const avgpool::pool_attrs<R>& b) {
    return a.kernel == b.kernel && a.strides == b.strides && a.dilations == b.dilations &&
           a.pads_begin == b.pads_begin && a.pads_end == b.pads_end && a.auto_pad == b.auto_pad &&
           a.rounding == b.rounding && a.divisor == b.divisor && a.divisor_override == b.divisor_override &&
           a.empty_window_nan == b.empty_window_nan && a.oversized_kernel == b.oversized_kernel;
}

/// Runs the plan of fixed-rank attributes on a channels-first or channels-last tensor whose
/// logical shape {N, C, spatial...} has R + 2 entries. Returns the library's status.
template <class T, std::size_t R>
avgpool::status run_forward(const std::vector<avgpool::index_t>& shape, const avgpool::pool_attrs<R>& attrs,
                            avgpool::layout lay, const std::vector<T>& in, std::vector<T>& out,
                            std::vector<avgpool::index_t>* out_shape = nullptr) {
    auto plan = avgpool::pooling<R>::create(to_dims<R + 2>(shape), attrs, lay);
    if (!plan) return plan.error_data();
    out.assign(static_cast<std::size_t>(plan->output_size()), T(-12345));
    if (out_shape) out_shape->assign(plan->output_shape().begin(), plan->output_shape().end());
    return plan->forward(in.data(), out.data());
}

}  // namespace avgpool_test

#endif  // AVGPOOL_TEST_SUPPORT_CONFORMANCE_HPP
