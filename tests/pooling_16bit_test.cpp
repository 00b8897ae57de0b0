// float16 and bfloat16 through forward, sum and backward: each 16-bit output within one of its
// own ulps of the float result on the same (16-bit) inputs (DESIGN.md section 3).
#include <gtest/gtest.h>

#include <avgpool/avgpool.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using avgpool::index_t;

// Distance in units in the last place between two finite 16-bit values (ordered bit patterns).
template <class H>
int ulps_apart(H a, H b) {
    auto ordered = [](H h) {
        const int v = h.bits();
        return (v & 0x8000) ? -(v & 0x7fff) : v;
    };
    return std::abs(ordered(a) - ordered(b));
}

template <class H, std::size_t R>
void check(const avgpool::pooling<R>& plan, std::mt19937_64& gen) {
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
    const std::size_t n_in = static_cast<std::size_t>(plan.input_size()), n_out = static_cast<std::size_t>(plan.output_size());
    std::vector<H> xh(n_in), gh(n_out), yh(n_out), sh(n_out), gih(n_in);
    std::vector<float> xf(n_in), gf(n_out), yf(n_out), sf(n_out), gif(n_in);
    for (std::size_t i = 0; i < n_in; ++i) {
        xh[i] = H(dist(gen));
        xf[i] = static_cast<float>(xh[i]);  // the same values in float
    }
    for (std::size_t o = 0; o < n_out; ++o) {
        gh[o] = H(dist(gen));
        gf[o] = static_cast<float>(gh[o]);
    }
    ASSERT_TRUE(plan.forward(xh.data(), yh.data()).ok());
    ASSERT_TRUE(plan.sum(xh.data(), sh.data()).ok());
    ASSERT_TRUE(plan.backward(gh.data(), gih.data()).ok());
    plan.forward(xf.data(), yf.data());
    plan.sum(xf.data(), sf.data());
    plan.backward(gf.data(), gif.data());
    for (std::size_t o = 0; o < n_out; ++o) {
        ASSERT_LE(ulps_apart(yh[o], H(yf[o])), 1) << "forward " << o << ": " << static_cast<float>(yh[o]) << " vs " << yf[o];
        ASSERT_LE(ulps_apart(sh[o], H(sf[o])), 1) << "sum " << o;
    }
    for (std::size_t i = 0; i < n_in; ++i)
        ASSERT_LE(ulps_apart(gih[i], H(gif[i])), 1) << "backward " << i << ": " << static_cast<float>(gih[i]) << " vs " << gif[i];
}

template <class H>
void suite() {
    std::mt19937_64 gen(sizeof(H) * 1000 + 7);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    for (int c = 0; c < 120; ++c) {
        avgpool::pool_attrs<2> a;
        for (int ax = 0; ax < 2; ++ax) {
            a.kernel[ax] = pick(1, 4);
            a.strides[ax] = pick(1, 3);
            a.pads_begin[ax] = pick(0, 2);
            a.pads_end[ax] = pick(0, 2);
        }
        a.rounding = static_cast<avgpool::rounding_type>(pick(0, 2));
        a.divisor = static_cast<avgpool::divisor_type>(pick(0, 3));
        const auto lay = c % 2 ? avgpool::layout::channels_last : avgpool::layout::channels_first;
        auto plan = avgpool::pooling<2>::create({pick(1, 2), pick(1, 3), pick(1, 12), pick(1, 12)}, a, lay);
        if (!plan) continue;
        SCOPED_TRACE(c);
        check<H>(*plan, gen);
        if (::testing::Test::HasFatalFailure()) return;
    }
    auto adaptive = avgpool::pooling<2>::create_adaptive({1, 2, 9, 7}, {4, 5});
    ASSERT_TRUE(adaptive.ok());
    check<H>(*adaptive, gen);
}

TEST(SixteenBit, Float16) { suite<avgpool::float16>(); }
TEST(SixteenBit, BFloat16) { suite<avgpool::bfloat16>(); }

TEST(SixteenBit, OneCallAndNaN) {
    avgpool::pool_attrs<1> a;
    a.kernel = {2};
    a.strides = {2};
    const avgpool::bfloat16 x[4] = {avgpool::bfloat16(1.0f), avgpool::bfloat16(2.0f), avgpool::bfloat16(NAN),
                                    avgpool::bfloat16(4.0f)};
    avgpool::bfloat16 y[2];
    avgpool::avg_pool<avgpool::bfloat16, 1>(x, {1, 1, 4}, a, y);
    EXPECT_EQ(static_cast<float>(y[0]), 1.5f);
    EXPECT_TRUE(std::isnan(static_cast<float>(y[1])));
}

}  // namespace
