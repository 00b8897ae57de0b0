// Hand-worked cases, one per trap that DESIGN.md lists, plus the divisor rules. Every expected
// value below was worked out by hand from the window definition: taps start + j*d, start = o*s - pb.
#include <gtest/gtest.h>

#include <avgpool/avgpool.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "support/run.hpp"

namespace {

using avgpool::divisor_type;
using avgpool::pad_type;
using avgpool::rounding_type;
using avgpool_test::attrs1;
using avgpool_test::iota;
using avgpool_test::pool;
using V = std::vector<double>;

// ONNX's reference evaluator shifts the windows in ceil mode once the ceil extra reaches 2
// (stride >= 3). Windows must start at o*s - pb regardless.
TEST(Traps, CeilModeWindowsDoNotShift) {
    auto a = attrs1(3, 3);
    a.rounding = rounding_type::ceil;
    // X = 7: windows [0,3) [3,6) [6,9): the last holds only x6 = 7.
    EXPECT_EQ((pool<1>({1, 1, 7}, a, iota(7))), (V{2, 5, 7}));
    // X = 8: the last window holds x6, x7.
    EXPECT_EQ((pool<1>({1, 1, 8}, a, iota(8))), (V{2, 5, 7.5}));
    a.rounding = rounding_type::ceil_torch;  // those windows start inside the input: kept
    EXPECT_EQ((pool<1>({1, 1, 7}, a, iota(7))), (V{2, 5, 7}));
}

// ONNX's reference evaluator ignores dilation under SAME / VALID; the dilated extent ke is what
// sizes the pads and the output.
TEST(Traps, DilationCountsUnderAutoPad) {
    auto a = attrs1(2, 1);
    a.dilations = {2};  // ke = 3
    a.auto_pad = pad_type::same_upper;  // out 5, total pad 2: 1 before, 1 after
    // Windows start at -1..3, taps start, start + 2; exclude-pad divides by the taps inside.
    EXPECT_EQ((pool<1>({1, 1, 5}, a, iota(5))), (V{2, 2, 3, 4, 4}));
    a.auto_pad = pad_type::valid;  // out (5 - 3) / 1 + 1 = 3
    EXPECT_EQ((pool<1>({1, 1, 5}, a, iota(5))), (V{2, 3, 4}));
    a.auto_pad = pad_type::same_lower;  // total 2 splits evenly: same as same_upper
    EXPECT_EQ((pool<1>({1, 1, 5}, a, iota(5))), (V{2, 2, 3, 4, 4}));
}

// The core accepts any pad >= 0 (framework limits belong to the front ends). Windows wholly in
// padding count no tap: 0, or NaN with empty_window_nan (nGraph).
TEST(Traps, PadsLargerThanTheKernel) {
    auto a = attrs1(2, 1, 3, 3);  // X = 2 padded to 8: 7 windows starting at -3..3
    const V x{10, 20};
    EXPECT_EQ((pool<1>({1, 1, 2}, a, x)), (V{0, 0, 10, 15, 20, 0, 0}));
    a.empty_window_nan = true;
    const V nan = pool<1>({1, 1, 2}, a, x);
    ASSERT_EQ(nan.size(), 7u);
    EXPECT_TRUE(std::isnan(nan[0]) && std::isnan(nan[1]) && std::isnan(nan[5]) && std::isnan(nan[6]));
    EXPECT_EQ(nan[3], 15);
    // include_pad: every window lies in [-3, 5), divisor 2; windows in padding average zeros.
    a.empty_window_nan = true;
    a.divisor = divisor_type::include_pad;
    EXPECT_EQ((pool<1>({1, 1, 2}, a, x)), (V{0, 0, 5, 15, 10, 0, 0}));
}

// include_pad counts the padding but not a ceil overhang past it (PyTorch count_include_pad,
// ONNX >= 19); full_kernel counts everything (oneDNN).
TEST(Divisors, IncludePadStopsAtTheEndPadding) {
    auto a = attrs1(2, 2);  // X = 5, ceil: 3 windows, the last [4, 6) overhangs by one
    a.rounding = rounding_type::ceil_torch;
    const V x = iota(5);
    a.divisor = divisor_type::exclude_pad;
    EXPECT_EQ((pool<1>({1, 1, 5}, a, x)), (V{1.5, 3.5, 5}));
    a.divisor = divisor_type::include_pad;
    EXPECT_EQ((pool<1>({1, 1, 5}, a, x)), (V{1.5, 3.5, 5}));
    a.divisor = divisor_type::full_kernel;
    EXPECT_EQ((pool<1>({1, 1, 5}, a, x)), (V{1.5, 3.5, 2.5}));
    // X = 6, k = 3, s = 3, one pad each side, ceil: windows start -1, 2, 5. The last holds
    // tap 5 (x = 6), tap 6 (end padding) and tap 7 (ceil overhang, past the padding).
    auto b = attrs1(3, 3, 1, 1);
    b.rounding = rounding_type::ceil_torch;  // starts at 5 < X + pb = 7: kept
    const V y = iota(6);
    b.divisor = divisor_type::include_pad;  // taps in [-1, 7): 3, 3, 2
    EXPECT_EQ((pool<1>({1, 1, 6}, b, y)), (V{1, 4, 3}));
    b.divisor = divisor_type::exclude_pad;  // taps in [0, 6): 2, 3, 1
    EXPECT_EQ((pool<1>({1, 1, 6}, b, y)), (V{1.5, 4, 6}));
    b.divisor = divisor_type::full_kernel;  // 3 always
    EXPECT_EQ((pool<1>({1, 1, 6}, b, y)), (V{1, 4, 2}));
}

// OpenVINO: exclude-pad="false" divides by the full kernel when any resolved pad is non-zero,
// else by the taps inside (AvgPoolV1_1d_ceil_no_pad_include_pad: last window [7, 8] -> 7.5).
TEST(Divisors, FullKernelIfPadded) {
    auto a = attrs1(3, 2);
    a.rounding = rounding_type::ceil;
    a.divisor = divisor_type::full_kernel_if_padded;
    auto plan = avgpool::pooling<1>::create({1, 1, 8}, a);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->divisor_mode(), divisor_type::exclude_pad);
    EXPECT_EQ((pool<1>({1, 1, 8}, a, iota(8))), (V{2, 4, 6, 7.5}));
    // same_upper resolves pads 0 / 1 on X = 3, k = 2, s = 1: any pad -> full kernel.
    avgpool::pool_attrs<2> s;
    s.kernel = {2, 2};
    s.auto_pad = pad_type::same_upper;
    s.divisor = divisor_type::full_kernel_if_padded;
    auto splan = avgpool::pooling<2>::create({1, 1, 3, 3}, s);
    ASSERT_TRUE(splan.ok());
    EXPECT_EQ(splan->divisor_mode(), divisor_type::full_kernel);
    EXPECT_EQ((pool<2>({1, 1, 3, 3}, s, iota(9))), (V{3, 4, 2.25, 6, 7, 3.75, 3.75, 4.25, 2.25}));
}

// PyTorch divisor_override replaces every divisor, padding or not.
TEST(Divisors, OverrideReplacesEveryDivisor) {
    auto a = attrs1(3, 1, 1, 1);
    a.divisor_override = 2;
    EXPECT_EQ((pool<1>({1, 1, 3}, a, iota(3))), (V{1.5, 3, 2.5}));
    auto plan = avgpool::pooling<1>::create({1, 1, 3}, a);
    ASSERT_TRUE(plan.ok());
    V d(3);
    plan->divisor(d.data());
    EXPECT_EQ(d, (V{2, 2, 2}));
}

// ceil keeps a last window that starts in the end padding; ceil_torch drops it.
TEST(Traps, CeilTorchDropsOnlyAWindowStartingInTheEndPadding) {
    avgpool::pool_attrs<2> a;
    a.kernel = {2, 2};
    a.strides = {2, 2};
    a.pads_begin = {1, 1};
    a.pads_end = {1, 1};
    a.rounding = rounding_type::ceil;
    EXPECT_EQ((pool<2>({1, 1, 3, 3}, a, iota(9))), (V{1, 2.5, 0, 5.5, 7, 0, 0, 0, 0}));
    a.rounding = rounding_type::ceil_torch;
    EXPECT_EQ((pool<2>({1, 1, 3, 3}, a, iota(9))), (V{1, 2.5, 5.5, 7}));
}

// The OpenVINO spec's same_upper examples (stride 2, 32x32) claim 32x32 outputs; the formula
// gives 16x16, and pads 0/0 for k=2 (total (16-1)*2 + 2 - 32 = 0), 1/2 for k=5.
TEST(Traps, OpenVinoSpecSameUpperIs16x16) {
    avgpool::pool_attrs<2> a;
    a.kernel = {2, 2};
    a.strides = {2, 2};
    a.pads_end = {1, 1};  // ignored under auto_pad
    a.auto_pad = pad_type::same_upper;
    auto g = avgpool::infer_geometry<2>({32, 32}, a);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->output, (avgpool::dims<2>{16, 16}));
    EXPECT_EQ(g->pads_end, (avgpool::dims<2>{0, 0}));
    a.kernel = {5, 5};
    g = avgpool::infer_geometry<2>({32, 32}, a);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->output, (avgpool::dims<2>{16, 16}));
    EXPECT_EQ(g->pads_begin, (avgpool::dims<2>{1, 1}));
    EXPECT_EQ(g->pads_end, (avgpool::dims<2>{2, 2}));
}

// Global pooling of 2^24 + 3 ones: past float's 2^24 exact-integer range, so a naive float
// accumulator would stop counting at 2^24 (mean 0.9999998f); the mean must be exactly 1.
TEST(Accuracy, MeanOfManyOnesIsExactlyOne) {
    const avgpool::index_t n = (avgpool::index_t(1) << 24) + 3;
    std::vector<float> x(static_cast<std::size_t>(n), 1.0f);
    float y = 0;
    avgpool::pool_attrs<1> a;
    a.kernel = {n};
    avgpool::avg_pool<float, 1>(x.data(), {1, 1, n}, a, &y);
    EXPECT_EQ(y, 1.0f);
}

// Windows of thousands of double taps, on the reference path (no fast kernel lists that many
// rows): the sums must stay inside DESIGN.md's bound, 4 * (k_1 + ... + k_R) * eps * sum|x| /
// divisor, forward and backward. A plain double sum there was 3624 units off for 21600 taps of
// 0.1 (bound 408) and 285 for 1800 gradient shares (bound 172).
TEST(Accuracy, ReferencePathDoubleLargeWindows) {
    constexpr double eps = 0x1p-53;
    auto adaptive = avgpool::pooling<3>::create_adaptive({1, 1, 60, 60, 12}, {1, 2, 1});  // windows 60x30x12
    ASSERT_TRUE(adaptive.ok());
    std::vector<double> x(static_cast<std::size_t>(adaptive->input_size()), 0.1), y(2, -1.0);
    ASSERT_TRUE(adaptive->forward(x.data(), y.data()).ok());
    for (double v : y) EXPECT_LE(std::fabs(v - 0.1), 4.0 * (60 + 30 + 12) * eps * 0.1) << v;

    avgpool::pool_attrs<3> a;
    a.kernel = {20, 18, 5};
    a.auto_pad = avgpool::pad_type::same_upper;
    a.divisor = avgpool::divisor_type::include_pad;  // every divisor 20 * 18 * 5 = 1800
    auto plan = avgpool::pooling<3>::create({1, 1, 20, 18, 5}, a);
    ASSERT_TRUE(plan.ok());
    std::vector<double> g(static_cast<std::size_t>(plan->output_size()), 1.0), gi(static_cast<std::size_t>(plan->input_size()), 0.0);
    ASSERT_TRUE(plan->backward(g.data(), gi.data()).ok());
    // Input (10, 9, 2) is tapped by every window: 1800 shares of 1 / 1800, sum|share| = 1.
    const double mid = gi[(10 * 18 + 9) * 5 + 2];
    EXPECT_LE(std::fabs(mid - 1.0), 4.0 * (20 + 18 + 5) * eps) << mid;
}

// Rank 4 (and beyond) runs through the same core.
TEST(Ranks, FourSpatialAxes) {
    avgpool::pool_attrs<4> a;
    a.kernel = {2, 2, 2, 2};
    a.strides = {2, 2, 2, 2};
    const V x = iota(16, 0);  // 2x2x2x2: one window holding 0..15
    EXPECT_EQ((pool<4>({1, 1, 2, 2, 2, 2}, a, x)), (V{7.5}));
}

}  // namespace
