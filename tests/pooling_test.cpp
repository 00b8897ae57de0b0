// The plan's API: sum and divisor tensors, executors, layouts, element types, reuse.
#include <gtest/gtest.h>

#include <avgpool/avgpool.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "support/conformance.hpp"
#include "support/run.hpp"
#include "support/random.hpp"

namespace {

using avgpool::index_t;

avgpool::pool_attrs<2> padded3x3() {
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.strides = {2, 2};
    a.pads_begin = {1, 1};
    a.pads_end = {1, 1};
    a.rounding = avgpool::rounding_type::ceil_torch;
    return a;
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    avgpool_test::uniform<float> d(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = d(gen);
    return v;
}

// nGraph's definition: forward = sum / divisor, element by element.
TEST(Plan, ForwardIsSumOverDivisor) {
    for (auto div : {avgpool::divisor_type::exclude_pad, avgpool::divisor_type::include_pad,
                     avgpool::divisor_type::full_kernel}) {
        avgpool::pool_attrs<2> a = padded3x3();
        a.divisor = div;
        auto plan = avgpool::pooling<2>::create({2, 3, 7, 6}, a);
        ASSERT_TRUE(plan.ok());
        const auto in = random_floats(static_cast<std::size_t>(plan->input_size()), 1);
        std::vector<double> ind(in.begin(), in.end());
        std::vector<double> avg(static_cast<std::size_t>(plan->output_size())), sum(avg.size()),
            divs(static_cast<std::size_t>(plan->divisor_size()));
        ASSERT_TRUE(plan->forward(ind.data(), avg.data()).ok());
        ASSERT_TRUE(plan->sum(ind.data(), sum.data()).ok());
        ASSERT_TRUE(plan->divisor(divs.data()).ok());
        const index_t plane = plan->divisor_size();
        ASSERT_EQ(plane, 4 * 4);
        for (std::size_t i = 0; i < avg.size(); ++i)
            EXPECT_DOUBLE_EQ(avg[i], sum[i] / divs[i % static_cast<std::size_t>(plane)]) << i;
    }
}

// Exclude-pad divisors of a 3x3/s2/p1 ceil_torch window on 7x6: rows start -1,1,3,5 (taps
// inside: 2,3,3,2); columns start -1,1,3,5 (inside: 2,3,3,1; the last starts at 5 < 6 + 1, kept).
TEST(Plan, DivisorTensorIsTheOutputSpatialShape) {
    auto plan = avgpool::pooling<2>::create({2, 3, 7, 6}, padded3x3());
    ASSERT_TRUE(plan.ok());
    ASSERT_EQ(plan->output_shape(), (avgpool::dims<4>{2, 3, 4, 4}));
    ASSERT_EQ(plan->divisor_size(), 16);
    std::vector<float> d(16);
    plan->divisor(d.data());
    EXPECT_EQ(d, (std::vector<float>{4, 6, 6, 2, 6, 9, 9, 3, 6, 9, 9, 3, 4, 6, 6, 2}));
}

// Any callable executor works, and results are bit-identical whatever the partition.
TEST(Plan, ExecutorsDoNotChangeResults) {
    auto plan = avgpool::pooling<2>::create({3, 5, 9, 8}, padded3x3());
    ASSERT_TRUE(plan.ok());
    const auto in = random_floats(static_cast<std::size_t>(plan->input_size()), 2);
    std::vector<float> a(static_cast<std::size_t>(plan->output_size())), b(a.size()), c(a.size());
    plan->forward(in.data(), a.data());
    plan->forward(in.data(), b.data(), avgpool::sequential{});
    index_t calls = 0, covered = 0;
    auto one_at_a_time = [&](index_t n, auto&& fn) {
        for (index_t i = n; i-- > 0;) {  // backwards, one item per call
            fn(i, i + 1);
            ++calls;
            ++covered;
        }
    };
    plan->forward(in.data(), c.data(), one_at_a_time);
    EXPECT_EQ(calls, 15);  // N * C work items
    EXPECT_EQ(covered, 15);
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, c);
}

// Channels-last gives the same numbers as channels-first, transposed, within the accuracy bound
// (the two layouts may run different kernels): inputs in [-1, 1] and an exclude-pad divisor make
// sum|x| / divisor <= 1, so the bound is 4 * (3 + 3) * 2^-24.
TEST(Plan, LayoutsAgree) {
    const std::vector<index_t> shape{2, 3, 7, 6};
    const auto in = random_floats(2 * 3 * 7 * 6, 3);
    auto first = avgpool::pooling<2>::create({2, 3, 7, 6}, padded3x3());
    auto last = avgpool::pooling<2>::create({2, 3, 7, 6}, padded3x3(), avgpool::layout::channels_last);
    ASSERT_TRUE(first.ok() && last.ok());
    EXPECT_EQ(first->output_shape(), last->output_shape());  // logical shape either way
    std::vector<float> out_first(static_cast<std::size_t>(first->output_size())), out_last(out_first.size());
    first->forward(in.data(), out_first.data());
    const auto in_last = avgpool_test::to_channels_last(in, shape);
    last->forward(in_last.data(), out_last.data());
    const std::vector<index_t> out_shape(first->output_shape().begin(), first->output_shape().end());
    const auto expected = avgpool_test::to_channels_last(out_first, out_shape);
    ASSERT_EQ(expected.size(), out_last.size());
    for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(expected[i], out_last[i], 4 * 6 * 0x1p-24) << i;
}

// A plan is a value: copies run independently and any element type runs on one plan.
TEST(Plan, CopiesAndElementTypes) {
    auto plan = avgpool::pooling<1>::create({1, 1, 6}, avgpool_test::attrs1(2, 2));
    ASSERT_TRUE(plan.ok());
    const avgpool::pooling<1> copy = *plan;
    const std::vector<float> xf{1, 2, 3, 4, 5, 6};
    const std::vector<double> xd{1, 2, 3, 4, 5, 6};
    std::vector<float> yf(3);
    std::vector<double> yd(3);
    copy.forward(xf.data(), yf.data());
    plan->forward(xd.data(), yd.data());
    EXPECT_EQ(yf, (std::vector<float>{1.5f, 3.5f, 5.5f}));
    EXPECT_EQ(yd, (std::vector<double>{1.5, 3.5, 5.5}));
    EXPECT_EQ(copy.input_shape(), (avgpool::dims<3>{1, 1, 6}));
    EXPECT_EQ(copy.geometry().output[0], 3);
}

// NaN and infinities in the input propagate like any sum.
TEST(Plan, NonFiniteInputsPropagate) {
    const std::vector<float> x{1, NAN, 3, INFINITY, 5, 6};
    const auto y = avgpool_test::pool<1, float>({1, 1, 6}, avgpool_test::attrs1(2, 2), x);
    ASSERT_EQ(y.size(), 3u);
    EXPECT_TRUE(std::isnan(y[0]));
    EXPECT_TRUE(std::isinf(y[1]));
    EXPECT_EQ(y[2], 5.5f);
}

}  // namespace
