// The stride-2 row kernel (kernel_stride2.hpp; AVX2 builds): channels-first float planes of
// R = 1 to 3 with rows of 9 to 128 inputs (rows of more than 32 streamed chunk by chunk, or in
// AVX-512 builds in 16-lane vectors; backward
// up to 64), stride 2 on the last axis, 2x2, 3x3 and 5x5 windows, and rows of 7 or 8 under
// 3x3 windows padded by 1 (the narrow path, R >= 2).
#include <gtest/gtest.h>

#include <avgpool/avgpool.hpp>

#include "support/geometry.hpp"
#include "support/random.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace {

using avgpool::index_t;
namespace dt = avgpool::detail;

#if AVGPOOL_STRIDE2_KERNEL

// AVX2 builds give the kernel every plan it has code for; AVX-512 builds only 2-D planes of
// rows of 9 and more (1-D rows and the narrow rows stay with the permute kernels there).
constexpr bool s2_everywhere = !AVGPOOL_PERM_KERNEL;

// A random plan the kernel is meant for: rows of 5 to max_width at stride 2 with one of its
// windows, any outer axes (stride, pads, rounding), any divisor rule, override and
// empty-window mode. (Forward takes rows up to 128, backward up to 64.)
template <std::size_t R>
avgpool::pool_attrs<R> s2_attrs(std::mt19937_64& gen, avgpool::dims<R + 2>& shape, index_t max_width = 66) {
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    static const index_t windows[][2] = {{2, 0}, {3, 1}, {3, 0}, {5, 2}};  // (k, left pad)
    const auto& w = windows[pick(0, 3)];
    avgpool::pool_attrs<R> a;
    shape[0] = pick(1, 3);
    shape[1] = pick(1, 13);
    // R = 3: one outer axis has a window of 1 (rows per output row = the row's taps, as the
    // kernel needs): slices (k, 1, k) or (1, k, k).
    const std::size_t flat_axis = R == 3 ? static_cast<std::size_t>(pick(0, 1)) : R;
    for (std::size_t ax = 0; ax < R; ++ax) {
        const bool slice = ax == flat_axis;
        a.kernel[ax] = slice ? 1 : w[0];
        a.pads_begin[ax] = slice ? 0 : w[1];
        // (Pads past the kernel give windows wholly in the padding, empty.)
        a.pads_end[ax] = slice ? 0 : pick(0, 1) == 0 ? pick(0, w[1] + 1) : pick(0, 6);
        a.strides[ax] = ax + 1 == R ? 2 : pick(1, 3);
        // (Outer extents of at least the kernel: the kernel takes windows of k rows only.)
        shape[ax + 2] = ax + 1 == R ? pick(5, max_width) : pick(slice ? 1 : w[0], 12);
    }
    a.rounding = static_cast<avgpool::rounding_type>(pick(0, 2));
    if (pick(0, 3) == 0) a.auto_pad = static_cast<avgpool::pad_type>(pick(1, 3));
    a.divisor = static_cast<avgpool::divisor_type>(pick(0, 3));
    a.divisor_override = pick(0, 5) == 0 ? pick(1, 30) : 0;
    a.empty_window_nan = pick(0, 1) == 1;
    return a;
}

template <class T>
bool same_value(T a, T b) {
    return std::memcmp(&a, &b, sizeof(T)) == 0 || (std::isnan(a) && std::isnan(b));
}

// n values in [-4, 4), and with `specials` a few infinities and NaN; abs: their magnitudes.
void random_values(std::mt19937_64& gen, std::size_t n, bool specials, std::vector<float>& v, std::vector<float>& abs) {
    avgpool_test::uniform<double> dist(-4.0, 4.0);
    v.resize(n);
    abs.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        v[i] = static_cast<float>(dist(gen));
        if (specials && std::uniform_int_distribution<int>(0, 40)(gen) == 0) {
            const float s[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
            v[i] = s[std::uniform_int_distribution<int>(0, 2)(gen)];
        }
        abs[i] = std::fabs(v[i]);
    }
}

// One plan: the kernel's average and sum against the reference (within the accuracy bound; NaN
// and infinity where the reference has them), over the whole tensor and in two calls split at a
// random plane (the same bits, nothing written outside a call's planes), and forward() / sum()
// of the public API, sequential and on two threads, giving the kernel's bits.
template <std::size_t R>
void s2_check(const avgpool::pooling<R>& plan, std::mt19937_64& gen, bool specials) {
    const auto& d = dt::plan_access::data(plan);
    const index_t items = d.input_shape[0] * d.input_shape[1];
    const std::size_t xn = static_cast<std::size_t>(plan.input_size()), on = static_cast<std::size_t>(plan.output_size());
    const std::size_t os = on / static_cast<std::size_t>(items);
    // Infinities and NaN in a few places: they must reach exactly the outputs whose windows
    // hold them (not through the lanes the kernel moves in from a neighbouring chunk or from
    // outside the row, which it zeroes).
    std::vector<float> in, absin;
    random_values(gen, xn, specials, in, absin);
    double ksum = 0;
    for (std::size_t ax = 0; ax < R; ++ax) ksum += static_cast<double>(d.geometry.kernel[ax]);
    // Three calls: planes [0, cut) and [cut2, items) into one buffer, [cut, cut2) into another.
    const index_t cut = items > 1 ? std::uniform_int_distribution<index_t>(1, items - 1)(gen) : 0;
    const index_t cut2 = std::uniform_int_distribution<index_t>(cut, items)(gen);
    avgpool::thread_pool pool(2);
    for (auto op : {dt::pool_op::average, dt::pool_op::sum}) {
        const char* what = op == dt::pool_op::sum ? "sum" : "average";
        const dt::s2_kernel<R> k(d, op);
        // 16 canaries past each output: nothing is written past the tensor's last row.
        std::vector<float> whole(on + 16, 1e30f), first(on + 16, 3.0f), second(on + 16, 5.0f), ref(on), ref_abs(on);
        k.run(in.data(), whole.data(), 0, items);
        if (k.wide()) {  // the 16-lane form: the 8-lane form's sums in its order, so its bits
            const dt::s2_kernel<R> eight(d, op, false);
            ASSERT_FALSE(eight.wide());
            std::vector<float> again(on + 16, 1e30f);
            eight.run(in.data(), again.data(), 0, items);
            for (std::size_t i = 0; i < on + 16; ++i)
                ASSERT_TRUE(same_value(again[i], whole[i])) << what << " output " << i << ": 8-lane form " << again[i] << ", 16-lane " << whole[i];
        }
        dt::reference_pool<float, R>(d, in.data(), ref.data(), op, 0, items);
        dt::reference_pool<float, R>(d, absin.data(), ref_abs.data(), op, 0, items);
        for (std::size_t i = 0; i < on; ++i) {
            if (std::isnan(ref[i]) || std::isinf(ref[i])) {
                ASSERT_TRUE(same_value(whole[i], ref[i])) << what << " output " << i << ": " << whole[i] << " reference " << ref[i];
                continue;
            }
            const double bound = 4 * ksum * 0x1p-24 * static_cast<double>(ref_abs[i]) * (1 + 1e-6) +
                                 std::numeric_limits<float>::denorm_min();
            ASSERT_LE(std::fabs(static_cast<double>(whole[i]) - static_cast<double>(ref[i])), bound)
                << what << " output " << i << ": kernel " << whole[i] << " reference " << ref[i];
        }
        // Two calls: each writes its own planes only, and together they give the same bits.
        k.run(in.data(), first.data(), cut2, items);
        k.run(in.data(), second.data(), cut, cut2);
        k.run(in.data(), first.data(), 0, cut);
        for (std::size_t i = on; i < on + 16; ++i) {
            ASSERT_EQ(whole[i], 1e30f) << what << ": wrote past the output, at " << i;
            ASSERT_EQ(second[i], 5.0f) << what << ": wrote past the output, at " << i;
            ASSERT_EQ(first[i], 3.0f) << what << ": wrote past the output, at " << i;
        }
        for (std::size_t i = 0; i < on; ++i) {
            const bool mine = i < static_cast<std::size_t>(cut) * os || i >= static_cast<std::size_t>(cut2) * os;
            ASSERT_TRUE(same_value(mine ? first[i] : second[i], whole[i]))
                << what << " output " << i << ", split at " << cut << " and " << cut2;
            ASSERT_EQ(mine ? second[i] : first[i], mine ? 5.0f : 3.0f)
                << what << ": output " << i << " written by a call that does not own it (split at " << cut << " and "
                << cut2 << ")";
        }
        // One plane by rows, in three calls (how the API splits few planes across threads):
        // the same bits, nothing written outside a call's rows.
        const index_t rows = static_cast<index_t>(os) / d.geometry.output[R - 1];
        if (k.splits_rows()) {
            const index_t plane = std::uniform_int_distribution<index_t>(0, items - 1)(gen);
            const index_t r1 = std::uniform_int_distribution<index_t>(0, rows)(gen);
            const index_t r2 = std::uniform_int_distribution<index_t>(r1, rows)(gen);
            std::vector<float> by_rows(on + 16, 11.0f);
            k.run_rows(in.data(), by_rows.data(), plane, r2, rows);
            k.run_rows(in.data(), by_rows.data(), plane, 0, r1);
            k.run_rows(in.data(), by_rows.data(), plane, r1, r2);
            for (std::size_t i = 0; i < on + 16; ++i) {
                const bool in_plane = i >= static_cast<std::size_t>(plane) * os && i < static_cast<std::size_t>(plane + 1) * os;
                if (in_plane) {
                    ASSERT_TRUE(same_value(by_rows[i], whole[i]))
                        << what << " by rows, plane " << plane << " output " << i << ", split at rows " << r1 << " and " << r2;
                } else {
                    ASSERT_EQ(by_rows[i], 11.0f) << what << " by rows of plane " << plane << ": wrote output " << i;
                }
            }
        }
        // The public API takes this kernel (few large planes go by rows to the first row
        // kernel that splits them, which is this one unless the 2x2 kernel takes the plan):
        // the same bits, also on two threads.
        if (dt::plane_blocks(items, rows, plan.input_size()).split() &&
            (!k.splits_rows() || dt::pair_applicable<float, R>(d)))
            continue;
        std::vector<float> api(on, 7.0f), threaded(on, 9.0f);
        if (op == dt::pool_op::average) {
            ASSERT_TRUE(plan.forward(in.data(), api.data()).ok());
            ASSERT_TRUE(plan.forward(in.data(), threaded.data(), pool).ok());
        } else {
            ASSERT_TRUE(plan.sum(in.data(), api.data()).ok());
            ASSERT_TRUE(plan.sum(in.data(), threaded.data(), pool).ok());
        }
        for (std::size_t i = 0; i < on; ++i) {
            ASSERT_TRUE(same_value(api[i], whole[i])) << what << " through the API, output " << i;
            ASSERT_TRUE(same_value(threaded[i], whole[i])) << what << " on two threads, output " << i;
        }
    }
}

template <std::size_t R>
void s2_suite(int cases, int& ran, int& streamed) {
    std::mt19937_64 gen(0x5e2d0 + R);
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> shape{};
        const avgpool::pool_attrs<R> a = s2_attrs<R>(gen, shape, 130);
        auto plan = avgpool::pooling<R>::create(shape, a);
        if (!plan) continue;
        const auto& d = dt::plan_access::data(*plan);
        if (!dt::s2_applicable<float, R>(d)) continue;
        ++ran;
        // (AVX-512 builds take those rows in the 16-lane form, wide_rows.)
        if (dt::s2_chunks(d.geometry.input[R - 1], d.geometry.output[R - 1]) > dt::s2_unrolled_chunks) ++streamed;
#if AVGPOOL_STRIDE2_WIDE
        EXPECT_EQ(dt::s2_kernel<R>(d, dt::pool_op::average).wide(), d.geometry.input[R - 1] >= dt::s2_wide_min_width);
#endif
        SCOPED_TRACE(avgpool_test::describe<R>(shape, a, "stride-2 kernel"));
        s2_check<R>(*plan, gen, c % 2 == 1);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

// A random plan for the narrow rows: 7 or 8 columns, 3 taps from column -1 at stride 2;
// outer axes with 3-row windows (or 1, a slice of a 3-D pool) at any stride and padding, or,
// with `square` (R = 2), the first axis pooled as the rows (7x7 and 8x8 planes).
template <std::size_t R>
avgpool::pool_attrs<R> narrow_attrs(std::mt19937_64& gen, avgpool::dims<R + 2>& shape, bool square) {
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    avgpool::pool_attrs<R> a;
    shape[0] = pick(1, 3);
    shape[1] = pick(1, 40);
    const std::size_t flat_axis = R == 3 ? static_cast<std::size_t>(pick(0, 1)) : R;
    for (std::size_t ax = 0; ax < R; ++ax) {
        const bool slice = ax == flat_axis, last = ax + 1 == R;
        a.kernel[ax] = slice ? 1 : 3;
        a.pads_begin[ax] = slice ? 0 : last ? 1 : pick(0, 2);
        a.pads_end[ax] = slice ? 0 : pick(0, 2);
        a.strides[ax] = last ? 2 : pick(1, 3);
        shape[ax + 2] = last ? pick(7, 8) : pick(slice ? 1 : 3, 12);
    }
    if (square && R == 2) {
        a.strides[0] = 2;
        a.pads_begin[0] = 1;
        shape[2] = shape[3];
    }
    a.rounding = static_cast<avgpool::rounding_type>(pick(0, 2));
    a.divisor = static_cast<avgpool::divisor_type>(pick(0, 3));
    a.divisor_override = pick(0, 5) == 0 ? pick(1, 30) : 0;
    a.empty_window_nan = pick(0, 1) == 1;
    return a;
}

template <std::size_t R>
void s2_narrow_suite(int cases, int& ran, int& square) {
    std::mt19937_64 gen(0x5e2d7 + R);
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> shape{};
        const avgpool::pool_attrs<R> a = narrow_attrs<R>(gen, shape, c % 2 == 0);
        auto plan = avgpool::pooling<R>::create(shape, a);
        if (!plan) continue;
        const auto& d = dt::plan_access::data(*plan);
        if (!dt::s2_applicable<float, R>(d)) continue;
        ++ran;
        if (dt::s2_kernel<R>(d, dt::pool_op::average).narrow_square()) ++square;
        SCOPED_TRACE(avgpool_test::describe<R>(shape, a, "stride-2 kernel, narrow rows"));
        s2_check<R>(*plan, gen, c % 3 == 1);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(Stride2Kernel, NarrowRowsMatchReference) {
    int ran2 = 0, square = 0, ran3 = 0, square3 = 0;
    s2_narrow_suite<2>(avgpool_test::sweep(200), ran2, square);
    if (HasFatalFailure()) return;
    s2_narrow_suite<3>(avgpool_test::sweep(60), ran3, square3);
    std::printf("[          ] %d (%d whole 7x7 or 8x8 planes) and %d random plans of R = 2, 3 took the narrow rows\n",
                ran2, square, ran3);
    if (!s2_everywhere) {
        EXPECT_EQ(ran2 + ran3, 0);
        return;
    }
    EXPECT_GT(ran2, avgpool_test::sweep(200) / 4);
    EXPECT_GT(square, avgpool_test::sweep(200) / 10);
    EXPECT_GT(ran3, avgpool_test::sweep(60) / 4);
    EXPECT_EQ(square3, 0);
}

TEST(Stride2Kernel, MatchesReference) {
    int ran1 = 0, ran2 = 0, ran3 = 0, streamed1 = 0, streamed2 = 0, streamed3 = 0;
    s2_suite<1>(avgpool_test::sweep(150), ran1, streamed1);
    if (HasFatalFailure()) return;
    s2_suite<2>(avgpool_test::sweep(300), ran2, streamed2);
    if (HasFatalFailure()) return;
    s2_suite<3>(avgpool_test::sweep(150), ran3, streamed3);
    std::printf("[          ] %d, %d and %d random plans of R = 1, 2, 3 took the kernel (%d, %d and %d with rows streamed)\n",
                ran1, ran2, ran3, streamed1, streamed2, streamed3);
    EXPECT_GT(ran2, avgpool_test::sweep(300) / 2);
    EXPECT_GT(streamed2, avgpool_test::sweep(300) / 8);
    if (!s2_everywhere) {
        EXPECT_EQ(ran1 + ran3, 0);
        return;
    }
    EXPECT_GT(ran1, avgpool_test::sweep(150) / 2);
    EXPECT_GT(streamed1, avgpool_test::sweep(150) / 8);
    EXPECT_GT(ran3, avgpool_test::sweep(150) / 2);
    EXPECT_GT(streamed3, avgpool_test::sweep(150) / 8);
}

// The kernel's windows on ShuffleNet's and DenseNet's planes go through it, and a dilation, a
// 4x4 window or a row of 8 or 17 does not.
TEST(Stride2Kernel, ChosenWhereItApplies) {
    auto plan_of = [](index_t w, index_t k, index_t pad, index_t dilation) {
        avgpool::pool_attrs<2> a;
        a.kernel = {k, k};
        a.strides = {2, 2};
        a.pads_begin = a.pads_end = {pad, pad};
        a.dilations = {1, dilation};
        return avgpool::pooling<2>::create({1, 24, w, w}, a);
    };
    auto takes = [&](index_t w, index_t k, index_t pad, index_t dilation) {
        auto plan = plan_of(w, k, pad, dilation);
        return plan && dt::s2_applicable<float, 2>(dt::plan_access::data(*plan));
    };
    for (index_t w : {9, 14, 28}) EXPECT_TRUE(takes(w, 3, 1, 1)) << w;
    EXPECT_TRUE(takes(14, 2, 0, 1));
    EXPECT_TRUE(takes(28, 2, 0, 1));
    EXPECT_TRUE(takes(13, 3, 0, 1));
    EXPECT_TRUE(takes(15, 5, 2, 1));
    EXPECT_TRUE(takes(32, 5, 2, 1));
    EXPECT_FALSE(takes(14, 3, 1, 2));  // dilation
    EXPECT_FALSE(takes(14, 4, 1, 1));  // a window it has no code for
    EXPECT_EQ(takes(7, 3, 1, 1), s2_everywhere);  // the narrow rows (ShuffleNet's 7x7)
    EXPECT_EQ(takes(8, 3, 1, 1), s2_everywhere);
    EXPECT_FALSE(takes(8, 3, 0, 1));  // 3 outputs
    EXPECT_FALSE(takes(8, 2, 0, 1));
    EXPECT_FALSE(takes(6, 3, 1, 1));
    for (index_t w : {33, 50, 56, 64, 112, 128}) EXPECT_TRUE(takes(w, 3, 1, 1)) << w;  // streamed chunks
    EXPECT_TRUE(takes(57, 5, 2, 1));
    EXPECT_FALSE(takes(129, 3, 1, 1));  // rows of nine chunks
    EXPECT_FALSE(takes(56, 2, 0, 1));  // whole 2x2 blocks past two chunks: the 2x2 kernel
    EXPECT_TRUE(takes(28, 2, 0, 1));
    // Backward takes rows of up to four chunks.
    auto takes_backward = [&](index_t w, index_t k, index_t pad) {
        auto plan = plan_of(w, k, pad, 1);
        return plan && dt::s2_backward_applicable<float, 2>(dt::plan_access::data(*plan));
    };
    for (index_t w : {9, 28, 33, 56, 64}) EXPECT_TRUE(takes_backward(w, 3, 1)) << w;
    EXPECT_TRUE(takes_backward(56, 2, 0));
    EXPECT_FALSE(takes_backward(65, 3, 1));
    // 1-D planes (a row each; pool_ci_1d's), forward only.
    avgpool::pool_attrs<1> a1;
    a1.kernel = {3};
    a1.strides = {2};
    auto plan1 = avgpool::pooling<1>::create({1, 64, 32}, a1);
    ASSERT_TRUE(plan1);
    EXPECT_EQ((dt::s2_applicable<float, 1>(dt::plan_access::data(*plan1))), s2_everywhere);
    EXPECT_FALSE((dt::s2_backward_applicable<float, 1>(dt::plan_access::data(*plan1))));
    EXPECT_FALSE(takes_backward(7, 3, 1));  // (the narrow rows: forward only)
    EXPECT_FALSE(takes_backward(112, 2, 0));
    auto plan = plan_of(14, 3, 1, 1);
    ASSERT_TRUE(plan);
    const auto& d = dt::plan_access::data(*plan);
    EXPECT_FALSE((dt::s2_applicable<double, 2>(d)));
    EXPECT_FALSE((dt::s2_applicable<float, 2, avgpool::bfloat16>(d)));
}

// The backward kernel (s2_backward) on one plan: against backward_cf (the same divisions and
// additions in the same order: the same bits) and the reference (backward_test's bound), over
// the whole tensor, in three calls split by planes and in three split by one plane's rows (the
// same bits, nothing written outside a call's rows or past the tensor), and through the API,
// sequential and on two threads.
template <std::size_t R>
void s2_backward_check(const avgpool::pooling<R>& plan, std::mt19937_64& gen, bool specials) {
    const auto& d = dt::plan_access::data(plan);
    const index_t items = d.input_shape[0] * d.input_shape[1];
    const std::size_t xn = static_cast<std::size_t>(plan.input_size()), on = static_cast<std::size_t>(plan.output_size());
    const std::size_t xs = xn / static_cast<std::size_t>(items);
    // Infinities and NaN: they must reach exactly the inputs their windows tap.
    std::vector<float> go, go_abs;
    random_values(gen, on, specials, go, go_abs);
    const dt::s2_backward<R> k(d);
    std::vector<float> whole(xn + 16, 1e30f);
    k.run(go.data(), whole.data(), 0, items);
    for (std::size_t i = xn; i < xn + 16; ++i) ASSERT_EQ(whole[i], 1e30f) << "wrote past grad_in, at " << i;
    // The other streaming form (16-lane vectors or 8-lane halves, chosen by CPU): the same bits.
    {
        const dt::s2_backward<R> other(d, !k.wide_stream());
        std::vector<float> again(xn + 16, 1e30f);
        other.run(go.data(), again.data(), 0, items);
        for (std::size_t i = 0; i < xn + 16; ++i)
            ASSERT_TRUE(same_value(again[i], whole[i])) << "input " << i << ": wide_stream " << other.wide_stream() << " gives " << again[i] << ", the other form " << whole[i];
    }
    ASSERT_TRUE((dt::backward_cf_applicable<float, R>(d)));
    std::vector<float> cf(xn, -7.0f), ref(xn), ref_abs(xn);
    dt::backward_cf<float, R>(d).run(go.data(), cf.data(), 0, items);
    dt::reference_backward<float, R>(d, go.data(), ref.data(), 0, items);
    dt::reference_backward<float, R>(d, go_abs.data(), ref_abs.data(), 0, items);
    double terms = 1;
    for (std::size_t ax = 0; ax < R; ++ax) terms *= static_cast<double>(std::max<index_t>(1, dt::max_cover<R>(d, ax)));
    for (std::size_t i = 0; i < xn; ++i) {
        ASSERT_TRUE(same_value(whole[i], cf[i])) << "input " << i << ": kernel " << whole[i] << " backward_cf " << cf[i];
        if (std::isnan(ref[i]) || std::isinf(ref[i])) {
            ASSERT_TRUE(same_value(whole[i], ref[i])) << "input " << i << ": " << whole[i] << " reference " << ref[i];
            continue;
        }
        const double tol = 2 * (terms + 2) * 0x1p-24 * static_cast<double>(ref_abs[i]);
        ASSERT_NEAR(static_cast<double>(whole[i]), static_cast<double>(ref[i]), tol) << "input " << i;
    }
    // Three calls by planes: [0, cut) and [cut2, items) into one buffer, [cut, cut2) into another.
    const index_t cut = items > 1 ? std::uniform_int_distribution<index_t>(1, items - 1)(gen) : 0;
    const index_t cut2 = std::uniform_int_distribution<index_t>(cut, items)(gen);
    std::vector<float> first(xn + 16, 3.0f), second(xn + 16, 5.0f);
    k.run(go.data(), first.data(), cut2, items);
    k.run(go.data(), second.data(), cut, cut2);
    k.run(go.data(), first.data(), 0, cut);
    for (std::size_t i = 0; i < xn + 16; ++i) {
        const bool mine = i < static_cast<std::size_t>(cut) * xs || i >= static_cast<std::size_t>(cut2) * xs;
        if (i >= xn) {
            ASSERT_EQ(first[i], 3.0f) << "wrote past grad_in, at " << i;
            ASSERT_EQ(second[i], 5.0f) << "wrote past grad_in, at " << i;
            continue;
        }
        ASSERT_TRUE(same_value(mine ? first[i] : second[i], whole[i])) << "input " << i << ", split at " << cut << " and " << cut2;
        ASSERT_EQ(mine ? second[i] : first[i], mine ? 5.0f : 3.0f)
            << "input " << i << " written by a call that does not own it (split at " << cut << " and " << cut2 << ")";
    }
    // Three calls by rows of one plane, last rows first, each into its own buffer.
    const index_t rows = static_cast<index_t>(xs) / d.geometry.input[R - 1], W = d.geometry.input[R - 1];
    const index_t plane = std::uniform_int_distribution<index_t>(0, items - 1)(gen);
    const index_t a = std::uniform_int_distribution<index_t>(0, rows)(gen);
    const index_t b = std::uniform_int_distribution<index_t>(a, rows)(gen);
    const index_t bounds[][2] = {{b, rows}, {0, a}, {a, b}};
    for (const auto& range : bounds) {
        if (range[0] == range[1]) continue;
        std::vector<float> part(xn + 16, 11.0f);
        k.run_rows(go.data(), part.data(), plane, range[0], range[1]);
        const std::size_t lo = static_cast<std::size_t>(plane) * xs + static_cast<std::size_t>(range[0] * W);
        const std::size_t hi = static_cast<std::size_t>(plane) * xs + static_cast<std::size_t>(range[1] * W);
        for (std::size_t i = 0; i < xn + 16; ++i) {
            if (i >= lo && i < hi) {
                ASSERT_TRUE(same_value(part[i], whole[i])) << "input " << i << ", rows " << range[0] << " .. " << range[1] << " of plane " << plane;
            } else {
                ASSERT_EQ(part[i], 11.0f) << "input " << i << " written by rows " << range[0] << " .. " << range[1] << " of plane " << plane;
            }
        }
    }
    // The public API takes this kernel: the same bits, also on two threads.
    avgpool::thread_pool pool(2);
    std::vector<float> api(xn, 7.0f), threaded(xn, 9.0f);
    ASSERT_TRUE(plan.backward(go.data(), api.data()).ok());
    ASSERT_TRUE(plan.backward(go.data(), threaded.data(), pool).ok());
    for (std::size_t i = 0; i < xn; ++i) {
        ASSERT_TRUE(same_value(api[i], whole[i])) << "through the API, input " << i;
        ASSERT_TRUE(same_value(threaded[i], whole[i])) << "on two threads, input " << i;
    }
}

template <std::size_t R>
void s2_backward_suite(int cases, int& ran, int& streamed, int& wide) {
    std::mt19937_64 gen(0xb5e2d0 + R);
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> shape{};
        const avgpool::pool_attrs<R> a = s2_attrs<R>(gen, shape);
        auto plan = avgpool::pooling<R>::create(shape, a);
        if (!plan) continue;
        const auto& d = dt::plan_access::data(*plan);
        if (!dt::s2_backward_applicable<float, R>(d)) continue;
        ++ran;
        wide += d.geometry.input[R - 1] > 32 ? 1 : 0;
        streamed += d.bwd().s2_bstream.empty() ? 0 : 1;
        SCOPED_TRACE(avgpool_test::describe<R>(shape, a, "stride-2 backward"));
        s2_backward_check<R>(*plan, gen, c % 2 == 1);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(Stride2Kernel, BackwardMatchesBackwardCfAndReference) {
    int ran2 = 0, ran3 = 0, streamed2 = 0, streamed3 = 0, wide2 = 0, wide3 = 0;
    s2_backward_suite<2>(avgpool_test::sweep(300), ran2, streamed2, wide2);
    if (HasFatalFailure()) return;
    s2_backward_suite<3>(avgpool_test::sweep(150), ran3, streamed3, wide3);
    std::printf("[          ] %d and %d random plans of R = 2, 3 took the backward kernel (%d and %d streamed, %d and %d "
                "with rows of 3 or 4 chunks)\n",
                ran2, ran3, streamed2, streamed3, wide2, wide3);
    EXPECT_GT(ran2, avgpool_test::sweep(300) / 2);
    EXPECT_GT(wide2, avgpool_test::sweep(300) / 5);
    if (s2_everywhere) {
        EXPECT_GT(ran3, avgpool_test::sweep(150) / 2);
        EXPECT_GT(wide3, 0);
    } else {
        EXPECT_EQ(ran3, 0);
    }
    // Both ways of gathering (streamed, and through the buffer) ran.
    EXPECT_GT(streamed2, 0);
    EXPECT_LT(streamed2, ran2);
}

// ShuffleNet's and DenseNet's planes stream, in the loop of two-row groups: 2x2 windows
// (each row its output row alone), 3x3 (the rows between two outputs gather both); 3x3
// windows at stride 1 down the planes and 5x5 ones gather three rows, through the buffer.
TEST(Stride2Kernel, BackwardWays) {
    auto plan_of = [](index_t w, index_t k, index_t pad, index_t stride_down) {
        avgpool::pool_attrs<2> a;
        a.kernel = {k, k};
        a.strides = {stride_down, 2};
        a.pads_begin = a.pads_end = {pad, pad};
        return avgpool::pooling<2>::create({1, 24, w, w}, a);
    };
    struct want {
        index_t w, k, pad, down;
        bool stream;
        int fast;
    };
    const want cases[] = {{14, 2, 0, 2, true, 1}, {28, 2, 0, 2, true, 1}, {14, 3, 1, 2, true, 2},
                          {28, 3, 1, 2, true, 2}, {13, 3, 0, 2, true, 2}, {14, 3, 1, 1, false, 0},
                          {15, 5, 2, 2, false, 0},  {56, 3, 1, 2, true, 2}, {56, 2, 0, 2, true, 1},
                          {40, 3, 1, 1, false, 0},  {64, 5, 2, 2, false, 0}};
    for (const want& c : cases) {
        auto plan = plan_of(c.w, c.k, c.pad, c.down);
        ASSERT_TRUE(plan);
        const auto& d = dt::plan_access::data(*plan);
        EXPECT_TRUE((dt::s2_backward_applicable<float, 2>(d))) << c.w << " k " << c.k;
        EXPECT_EQ(!d.bwd().s2_bstream.empty(), c.stream) << c.w << " k " << c.k << " down " << c.down;
        EXPECT_EQ(d.bwd().s2_bfast, c.fast) << c.w << " k " << c.k << " down " << c.down;
    }
    // Where backward_cf's ring does not fit (tall R = 3 slices) it adds the covering rows'
    // gradients before dividing, so this kernel, which gives its bits otherwise, is not used
    // (a review found 927 of 10240 inputs a few ulps apart on this plan).
    avgpool::pool_attrs<3> tall;
    tall.kernel = {3, 1, 3};
    tall.strides = {2, 1, 2};
    tall.pads_begin = tall.pads_end = {0, 0, 1};
    auto plan3 = avgpool::pooling<3>::create({1, 1, 5, 64, 32}, tall);
    ASSERT_TRUE(plan3);
    const auto& d3 = dt::plan_access::data(*plan3);
    EXPECT_EQ((dt::s2_applicable<float, 3>(d3)), s2_everywhere);
    EXPECT_FALSE((dt::backward_cf_ring_fits<float, 3>(d3)));
    EXPECT_FALSE((dt::s2_backward_applicable<float, 3>(d3)));
}

#if defined(__linux__)
// The input ends at a page followed by an unmapped page, and so does the output: the kernel
// reads nothing past the input (the vectors that pass a row are masked loads) and writes
// nothing past the output (the call's last row is a masked store). Every window it has code
// for, on rows of one chunk and of two, each whole or not; the padded windows' first output
// row reads a missing row (the zeros).
TEST(Stride2Kernel, ReadsAndWritesNothingPastTheTensors) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    // Pages ending exactly at n floats, followed by an unmapped page.
    struct guarded {
        void* map = MAP_FAILED;
        std::size_t span = 0, page = 0;
        float* at = nullptr;
        guarded(std::size_t n, std::size_t page_size) : page(page_size) {
            const std::size_t bytes = n * sizeof(float);
            span = (bytes + page - 1) / page * page;
            map = mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (map == MAP_FAILED || mprotect(static_cast<char*>(map) + span, page, PROT_NONE) != 0) return;
            at = reinterpret_cast<float*>(static_cast<char*>(map) + span - bytes);
        }
        ~guarded() {
            if (map != MAP_FAILED) munmap(map, span + page);
        }
    };
    const index_t windows[][2] = {{2, 0}, {3, 1}, {3, 0}, {5, 2}};
    for (const auto& win : windows)
        for (index_t w : {7, 8, 9, 13, 16, 17, 22, 28, 32, 33, 40, 49, 56, 64, 100, 128}) {
        avgpool::pool_attrs<2> a;
        a.kernel = {win[0], win[0]};
        a.strides = {2, 2};
        a.pads_begin = a.pads_end = {win[1], win[1]};
        auto plan = avgpool::pooling<2>::create({1, 5, w, w}, a);
        ASSERT_TRUE(plan);
        const auto& d = dt::plan_access::data(*plan);
        const std::size_t n = static_cast<std::size_t>(plan->input_size()), on = static_cast<std::size_t>(plan->output_size());
        // Forward: rows of 9 and more (7 and 8 under 3x3 padded by 1), but whole 2x2 blocks
        // past 32 columns.
        const bool forward = dt::s2_applicable<float, 2>(d);
        EXPECT_EQ(forward, (w >= 9 || (s2_everywhere && win[0] == 3 && win[1] == 1)) && !(w > 32 && win[0] == 2))
            << "k " << win[0] << " row " << w;
        if (forward) {
            guarded in(n, page), got(on, page);
            ASSERT_NE(in.at, nullptr);
            ASSERT_NE(got.at, nullptr);
            for (std::size_t i = 0; i < n; ++i) in.at[i] = static_cast<float>(i % 17) - 8.0f;
            std::vector<float> ref(on);
            dt::reference_pool<float, 2>(d, in.at, ref.data(), dt::pool_op::average, 0, 5);
            const dt::s2_kernel<2> k(d, dt::pool_op::average);
            k.run(in.at, got.at, 0, 5);
            for (std::size_t i = 0; i < on; ++i)
                ASSERT_NEAR(got.at[i], ref[i], 1e-5) << "k " << win[0] << " row " << w << ", output " << i;
            k.run(in.at, got.at, 3, 5);  // (a call's last row, and the tensor's, again)
            if (k.splits_rows()) k.run_rows(in.at, got.at, 4, d.geometry.output[0] / 2, d.geometry.output[0]);
        }
        // Backward: the output gradients end at the unmapped page (their last vector is a
        // masked load there), and so does grad_in (its last row, masked stores), whole and
        // by the last plane's rows.
        if (!dt::s2_backward_applicable<float, 2>(d)) {
            EXPECT_TRUE(w <= 32 || w > 64) << "k " << win[0] << " row " << w << ": expected the backward kernel";
            continue;
        }
        guarded go(on, page), gi(n, page);
        ASSERT_NE(go.at, nullptr);
        ASSERT_NE(gi.at, nullptr);
        for (std::size_t i = 0; i < on; ++i) go.at[i] = static_cast<float>(i % 13) - 6.0f;
        std::vector<float> bref(n);
        dt::reference_backward<float, 2>(d, go.at, bref.data(), 0, 5);
        const dt::s2_backward<2> b(d);
        b.run(go.at, gi.at, 0, 5);
        for (std::size_t i = 0; i < n; ++i)
            ASSERT_NEAR(gi.at[i], bref[i], 1e-5) << "backward, k " << win[0] << " row " << w << ", input " << i;
        b.run_rows(go.at, gi.at, 4, w / 2, w);
    }
}
#endif

#else

TEST(Stride2Kernel, NotInThisBuild) {
    GTEST_SKIP() << "the stride-2 row kernel is AVX2 code (build with -march=native on an AVX2 or AVX-512 CPU)";
}

#endif

}  // namespace
