// Small helpers for hand-worked tests: run a plan and get the output as a vector.
#ifndef AVGPOOL_TEST_SUPPORT_RUN_HPP
#define AVGPOOL_TEST_SUPPORT_RUN_HPP

#include <avgpool/avgpool.hpp>

#include <numeric>
#include <vector>

namespace avgpool_test {

/// 1, 2, 3, ... as a tensor's contents.
inline std::vector<double> iota(std::size_t n, double first = 1.0) {
    std::vector<double> v(n);
    std::iota(v.begin(), v.end(), first);
    return v;
}

/// forward() of a channels-first plan; an empty vector when create() fails.
template <std::size_t R, class T = double>
std::vector<T> pool(const avgpool::dims<R + 2>& shape, const avgpool::pool_attrs<R>& a,
                    const std::vector<T>& in) {
    auto plan = avgpool::pooling<R>::create(shape, a);
    if (!plan) return {};
    std::vector<T> out(static_cast<std::size_t>(plan->output_size()));
    plan->forward(in.data(), out.data());
    return out;
}

/// A 1-D attribute set in one line.
inline avgpool::pool_attrs<1> attrs1(avgpool::index_t k, avgpool::index_t s, avgpool::index_t pb = 0,
                                     avgpool::index_t pe = 0) {
    avgpool::pool_attrs<1> a;
    a.kernel = {k};
    a.strides = {s};
    a.pads_begin = {pb};
    a.pads_end = {pe};
    return a;
}

}  // namespace avgpool_test

#endif  // AVGPOOL_TEST_SUPPORT_RUN_HPP
