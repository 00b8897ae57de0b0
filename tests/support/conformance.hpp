// Locating and loading the shared conformance vectors (../shared/conformance next to the
// repository in CI). Tests skip with a clear message when the folder is absent.
#ifndef AVGPOOL_TEST_SUPPORT_CONFORMANCE_HPP
#define AVGPOOL_TEST_SUPPORT_CONFORMANCE_HPP

#include <avgpool/avgpool.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
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

/// Runs the plan for a runtime rank 3..5 (R = 1..3; R = 4 too, for the random tests' sake)
/// on a channels-first or channels-last tensor. Returns the library's status.
template <class T>
avgpool::status run_forward(const std::vector<avgpool::index_t>& shape,
                            const avgpool::pool_attrs_dynamic& attrs, avgpool::layout lay,
                            const std::vector<T>& in, std::vector<T>& out,
                            std::vector<avgpool::index_t>* out_shape = nullptr);

namespace detail {
template <std::size_t R, class T>
avgpool::status run_forward_r(const std::vector<avgpool::index_t>& shape,
                              const avgpool::pool_attrs_dynamic& d, avgpool::layout lay,
                              const std::vector<T>& in, std::vector<T>& out,
                              std::vector<avgpool::index_t>* out_shape) {
    auto attrs = avgpool::to_static<R>(d);
    if (!attrs) return attrs.error_data();
    avgpool::dims<R + 2> s{};
    for (std::size_t i = 0; i < R + 2; ++i) s[i] = shape[i];
    auto plan = avgpool::pooling<R>::create(s, *attrs, lay);
    if (!plan) return plan.error_data();
    out.assign(static_cast<std::size_t>(plan->output_size()), T(-12345));
    if (out_shape) out_shape->assign(plan->output_shape().begin(), plan->output_shape().end());
    return plan->forward(in.data(), out.data());
}
}  // namespace detail

template <class T>
avgpool::status run_forward(const std::vector<avgpool::index_t>& shape,
                            const avgpool::pool_attrs_dynamic& attrs, avgpool::layout lay,
                            const std::vector<T>& in, std::vector<T>& out,
                            std::vector<avgpool::index_t>* out_shape) {
    switch (shape.size()) {
        case 3: return detail::run_forward_r<1>(shape, attrs, lay, in, out, out_shape);
        case 4: return detail::run_forward_r<2>(shape, attrs, lay, in, out, out_shape);
        case 5: return detail::run_forward_r<3>(shape, attrs, lay, in, out, out_shape);
        case 6: return detail::run_forward_r<4>(shape, attrs, lay, in, out, out_shape);
        default: {
            auto r = avgpool::infer_output_shape(shape, attrs);  // reports a rank error
            if (!r) return r.error_data();
            avgpool::error_info e{};  // a valid rank this helper does not instantiate
            e.code = avgpool::errc::unsupported;
            e.attribute = "test helper rank";
            return e;
        }
    }
}

}  // namespace avgpool_test

#endif  // AVGPOOL_TEST_SUPPORT_CONFORMANCE_HPP
