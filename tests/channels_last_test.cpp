// The fast channels-last kernel (N[D]HWC) against the reference kernel (the oracle), within the
// accuracy bound of DESIGN.md section 3, on randomized geometries: ranks 1-3, channel counts
// around the vector widths (1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33) and wide enough for channel
// blocks, odd widths, strides 1-5, kernels 1-13, dilations, every pad, rounding and divisor
// mode, divisor_override, empty windows, adaptive plans, the sum op, float and double. Also a
// hand-computed NHWC case, the dispatch from forward(), and executor independence.
#include <gtest/gtest.h>

#include <avgpool/avgpool.hpp>

#include "support/geometry.hpp"
#include "support/random.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using avgpool::index_t;
using avgpool_test::describe;
using avgpool_test::random_attrs;
using avgpool_test::sweep;
using avgpool::detail::pool_op;

template <class T>
constexpr double eps() {
    return sizeof(T) == 4 ? 0x1p-24 : 0x1p-53;
}

constexpr index_t channel_counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33};

template <class T>
std::vector<T> random_input(std::size_t n, std::mt19937_64& gen) {
    avgpool_test::uniform<double> dist(-4.0, 4.0);
    std::vector<T> in(n);
    for (T& x : in) x = static_cast<T>(dist(gen));
    return in;
}

// Runs the channels-last kernel and the reference through the plan's own data and compares
// every output, for both ops. Returns false when the kernel does not cover the plan.
template <class T, std::size_t R>
bool compare_plan(const avgpool::pooling<R>& plan, std::mt19937_64& gen, const std::string& trace) {
    SCOPED_TRACE(trace);
    const auto& d = avgpool::detail::plan_access::data(plan);
    EXPECT_EQ(d.memory_layout, avgpool::layout::channels_last);
    if (!avgpool::detail::cl_applicable<T, R>(d)) return false;
    const std::vector<T> in = random_input<T>(static_cast<std::size_t>(plan.input_size()), gen);
    std::vector<T> absin(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) absin[i] = std::fabs(in[i]);
    const std::size_t n = static_cast<std::size_t>(plan.output_size());
    const index_t planes = plan.input_shape()[0] * plan.input_shape()[1];
    double ksum = 0;
    for (std::size_t ax = 0; ax < R; ++ax) ksum += static_cast<double>(plan.geometry().kernel[ax]);
    for (auto op : {pool_op::average, pool_op::sum}) {
        std::vector<T> fast(n, T(1e30)), ref(n), ref_abs(n);
        const avgpool::detail::cl_kernel<T, R> kernel(d, op);
        kernel.run(in.data(), fast.data(), 0, kernel.items());
        avgpool::detail::reference_pool<T, R>(d, in.data(), ref.data(), op, 0, planes);
        // The same window statistic of |x| (sum over the taps, divided like the output).
        avgpool::detail::reference_pool<T, R>(d, absin.data(), ref_abs.data(), op, 0, planes);
        for (std::size_t i = 0; i < n; ++i) {
            if (std::isnan(ref[i])) {
                EXPECT_TRUE(std::isnan(fast[i])) << "output " << i;
                if (!std::isnan(fast[i])) return true;
                continue;
            }
            const double bound = 4 * ksum * eps<T>() * static_cast<double>(ref_abs[i]) * (1 + 1e-6) +
                                 std::numeric_limits<T>::denorm_min();
            const double err = std::fabs(static_cast<double>(fast[i]) - static_cast<double>(ref[i]));
            EXPECT_LE(err, bound) << "output " << i << ": fast " << fast[i] << " reference " << ref[i]
                                  << (op == pool_op::sum ? " (sum)" : " (average)");
            if (!(err <= bound)) return true;
        }
    }
    return true;
}

// Random geometries; C cycles through channel_counts, plus a few wide ones (channel blocks).
template <class T, std::size_t R>
void random_suite(int cases, index_t max_extent, index_t max_last, index_t max_wide_c) {
    int ran = 0, valid = 0;
    for (int c = 0; c < cases; ++c) {
        const std::uint64_t seed = 3000 * R + static_cast<std::uint64_t>(c) + (sizeof(T) == 4 ? 0 : 700000);
        std::mt19937_64 gen(seed);
        auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
        avgpool::dims<R + 2> shape{};
        shape[0] = pick(1, 2);
        shape[1] = c % 8 == 7 ? pick(34, max_wide_c) : channel_counts[static_cast<std::size_t>(c) % 11];
        avgpool::dims<R> spatial{};
        for (std::size_t ax = 0; ax < R; ++ax) spatial[ax] = pick(1, ax + 1 == R ? max_last : max_extent);
        for (std::size_t ax = 0; ax < R; ++ax) shape[ax + 2] = spatial[ax];
        const auto a = random_attrs<R>(gen, spatial);
        auto plan = avgpool::detail::plan_access::create_exact<R>(shape, a, avgpool::layout::channels_last);
        if (!plan) continue;  // geometry rejected: covered elsewhere
        ++valid;
        if (compare_plan<T, R>(*plan, gen, describe<R>(shape, a, "seed " + std::to_string(seed)))) ++ran;
        if (::testing::Test::HasFailure()) return;
    }
    EXPECT_GT(ran, valid * 9 / 10) << "the kernel should cover almost every random geometry";
}

TEST(ChannelsLast, Rank1MatchesReference) {
    random_suite<float, 1>(sweep(500), 0, 300, 600);
    random_suite<double, 1>(sweep(200), 0, 300, 600);
}
TEST(ChannelsLast, Rank2MatchesReference) {
    random_suite<float, 2>(sweep(400), 20, 70, 300);
    random_suite<double, 2>(sweep(150), 20, 70, 300);
}
TEST(ChannelsLast, Rank3MatchesReference) {
    random_suite<float, 3>(sweep(200), 9, 20, 100);
    random_suite<double, 3>(sweep(80), 9, 20, 100);
}

// Adaptive plans: windows of varying start and length (overlapping when O > X).
template <class T, std::size_t R>
void adaptive_suite(int cases) {
    for (int c = 0; c < cases; ++c) {
        const std::uint64_t seed = 91000 + 100 * R + static_cast<std::uint64_t>(c) + (sizeof(T) == 4 ? 0 : 5000);
        std::mt19937_64 gen(seed);
        auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
        avgpool::dims<R + 2> shape{};
        shape[0] = pick(1, 2);
        shape[1] = c % 5 == 4 ? pick(34, 200) : channel_counts[static_cast<std::size_t>(c) % 11];
        avgpool::dims<R> out{};
        for (std::size_t ax = 0; ax < R; ++ax) {
            shape[ax + 2] = pick(1, ax + 1 == R ? 80 : 15);
            out[ax] = pick(1, shape[ax + 2] + 4);
        }
        auto plan = avgpool::detail::plan_access::create_adaptive_exact<R>(shape, out, avgpool::layout::channels_last);
        ASSERT_TRUE(plan.ok());
        std::string t = "adaptive seed " + std::to_string(seed);
        EXPECT_TRUE((compare_plan<T, R>(*plan, gen, t))) << t << ": expected the channels-last kernel";
        if (::testing::Test::HasFailure()) return;
    }
}

// Cubic 2x2x2 and 3x3x3 windows (the row pointers held in registers: on the ring path, which
// takes C >= 4 vectors, and on the register path, which takes fewer, a multiple of the width):
// strides 1 and 2, with and without padding (clipped windows near the edges take the general
// sum), C a multiple of the vector width or not, both divisors.
TEST(ChannelsLast, CubicWindowsRank3) {
    std::mt19937_64 gen(41);
    for (index_t k : {2, 3}) {
        for (index_t s : {1, 2}) {
            for (index_t pad : {index_t(0), k - 1}) {
                for (index_t C : {8, 16, 32, 48, 67}) {
                    avgpool::pool_attrs<3> a;
                    a.kernel = {k, k, k};
                    a.strides = {s, s, s};
                    a.pads_begin = {pad, pad, pad};
                    a.pads_end = {pad, 0, pad};
                    a.divisor = pad > 0 && C == 48 ? avgpool::divisor_type::include_pad
                                                   : avgpool::divisor_type::exclude_pad;
                    auto plan = avgpool::detail::plan_access::create_exact<3>({2, C, 5, 6, 9}, a, avgpool::layout::channels_last);
                    ASSERT_TRUE(plan.ok());
                    const std::string t = "k " + std::to_string(k) + " s " + std::to_string(s) + " pad " +
                                          std::to_string(pad) + " C " + std::to_string(C);
                    EXPECT_TRUE((compare_plan<float, 3>(*plan, gen, t))) << t << ": expected the channels-last kernel";
                    EXPECT_TRUE((compare_plan<double, 3>(*plan, gen, t))) << t << ": expected the channels-last kernel";
                }
            }
        }
    }
}

// Rows narrower than a vector (9-15 channels: past the pixel kernel, under AVX-512's 16
// lanes) through the row buffer, whose horizontal pass takes one vector an output and unrolls
// whole windows of 2-4 taps; with 3-D windows of 2-3 x 2-4 rows (their pointers held in
// registers) and clipped ones at the edges, dilation, ceil rounding, both divisors.
TEST(ChannelsLast, NarrowRowsAndFixedRowGroups) {
    std::mt19937_64 gen(43);
    const avgpool::dims<3> kernels[] = {{2, 4, 3}, {3, 3, 3}, {2, 2, 2}, {3, 2, 4}, {2, 3, 5}, {1, 4, 2}};
    for (const auto& k : kernels) {
        for (index_t C : {9, 12, 15, 6}) {
            for (int mode = 0; mode < 3; ++mode) {
                avgpool::pool_attrs<3> a;
                a.kernel = k;
                a.strides = {2, 2, mode == 1 ? 1 : 2};
                a.pads_begin = {1, 1, mode == 2 ? 0 : 1};
                a.pads_end = {0, 1, 0};
                if (mode == 1) a.dilations = {1, 1, 2};
                if (mode == 2) a.rounding = avgpool::rounding_type::ceil;
                a.divisor = mode == 1 ? avgpool::divisor_type::full_kernel : avgpool::divisor_type::exclude_pad;
                auto plan = avgpool::detail::plan_access::create_exact<3>({1, C, 7, 9, 23}, a, avgpool::layout::channels_last);
                ASSERT_TRUE(plan.ok());
                const std::string t = "kernel " + std::to_string(k[0]) + "x" + std::to_string(k[1]) + "x" +
                                      std::to_string(k[2]) + " C " + std::to_string(C) + " mode " + std::to_string(mode);
                EXPECT_TRUE((compare_plan<float, 3>(*plan, gen, t))) << t << ": expected the channels-last kernel";
                EXPECT_TRUE((compare_plan<double, 3>(*plan, gen, t))) << t << ": expected the channels-last kernel";
            }
        }
    }
}

TEST(ChannelsLast, AdaptiveMatchesReference) {
    adaptive_suite<float, 1>(sweep(60));
    adaptive_suite<float, 2>(sweep(80));
    adaptive_suite<double, 2>(sweep(30));
    adaptive_suite<float, 3>(sweep(40));
}

// Global pooling and wide rows: the many-rows vertical pass, channel blocks, column tiles.
TEST(ChannelsLast, GlobalAndWideShapes) {
    std::mt19937_64 gen(5);
    auto global2 = [&](index_t C, index_t H, index_t W) {
        avgpool::pool_attrs<2> a;
        a.kernel = {H, W};
        auto plan = avgpool::detail::plan_access::create_exact<2>({2, C, H, W}, a, avgpool::layout::channels_last);
        ASSERT_TRUE(plan.ok());
        const std::string t = "global C " + std::to_string(C) + " " + std::to_string(H) + "x" + std::to_string(W);
        EXPECT_TRUE((compare_plan<float, 2>(*plan, gen, t))) << t;
        EXPECT_TRUE((compare_plan<double, 2>(*plan, gen, t))) << t;
    };
    global2(3, 56, 57);
    global2(32, 112, 112);
    global2(96, 56, 56);
    global2(1000, 13, 13);
    global2(2048, 7, 7);
    global2(5, 7, 11);
    avgpool::pool_attrs<3> b;
    b.kernel = {32, 7, 7};
    auto p3 = avgpool::detail::plan_access::create_exact<3>({1, 19, 32, 7, 7}, b, avgpool::layout::channels_last);
    ASSERT_TRUE(p3.ok());
    EXPECT_TRUE((compare_plan<float, 3>(*p3, gen, "global 3d")));
    // Wide rows with many channels: several tiles of columns per row. Under AddressSanitizer one
    // channel count per (stride, kernel), in turn (see sweep()).
    int turn = 0;
    for (index_t s = 1; s <= 5; ++s) {
        for (index_t k : {1, 2, 3, 7, 13}) {
            avgpool::pool_attrs<2> a;
            a.kernel = {2, k};
            a.strides = {1, s};
            a.pads_begin = {0, k / 2};
            a.pads_end = {1, k / 2};
            a.rounding = avgpool::rounding_type::ceil;
            a.divisor = avgpool::divisor_type::include_pad;
            ++turn;
            for (index_t C : {3, 40, 300}) {
                if (avgpool_test::under_asan && C != (turn % 3 == 0 ? 3 : turn % 3 == 1 ? 40 : 300)) continue;
                auto plan = avgpool::detail::plan_access::create_exact<2>({1, C, 3, 100 + 7 * s + k}, a, avgpool::layout::channels_last);
                ASSERT_TRUE(plan.ok());
                const std::string t = "wide s " + std::to_string(s) + " k " + std::to_string(k) + " C " + std::to_string(C);
                EXPECT_TRUE((compare_plan<float, 2>(*plan, gen, t))) << t;
                a.dilations = {1, 2};
                auto dil = avgpool::detail::plan_access::create_exact<2>({1, C, 3, 100 + 7 * s + k}, a, avgpool::layout::channels_last);
                ASSERT_TRUE(dil.ok());
                EXPECT_TRUE((compare_plan<double, 2>(*dil, gen, t + " dilated"))) << t;
                a.dilations = {1, 1};
            }
        }
    }
}

// The global path: C >= one vector (16 floats with AVX-512, hence C of 16 and more), any
// number of input rows (more than the row path's list of 1024), last axes longer and shorter
// than one pass of positions, channel blocks with the last block shifted back, C not a
// multiple of the vector width, blocks summed in registers and blocks summed position by
// position into the buffer (more than two register blocks); every rank, both types.
TEST(ChannelsLast, GlobalPathAnyExtent) {
    std::mt19937_64 gen(29);
    auto check = [&](auto shape, const std::string& t) {
        constexpr std::size_t R = std::tuple_size<decltype(shape)>::value - 2;
        avgpool::pool_attrs<R> a;
        for (std::size_t ax = 0; ax < R; ++ax) a.kernel[ax] = shape[ax + 2];
        for (auto div : {avgpool::divisor_type::exclude_pad, avgpool::divisor_type::include_pad}) {
            a.divisor = div;
            a.divisor_override = div == avgpool::divisor_type::include_pad ? 7 : 0;
            auto plan = avgpool::detail::plan_access::create_exact<R>(shape, a, avgpool::layout::channels_last);
            ASSERT_TRUE(plan.ok()) << t;
            const auto& d = avgpool::detail::plan_access::data(*plan);
            ASSERT_TRUE(d.global) << t;
            ASSERT_TRUE((avgpool::detail::cl_applicable<float, R>(d))) << t;
            ASSERT_TRUE((avgpool::detail::cl_applicable<double, R>(d))) << t;
            EXPECT_TRUE((compare_plan<float, R>(*plan, gen, t))) << t;
            EXPECT_TRUE((compare_plan<double, R>(*plan, gen, t))) << t;
        }
    };
    check(avgpool::dims<3>{2, 19, 1500}, "1-D W 1500");
    check(avgpool::dims<3>{1, 2051, 9}, "1-D C 2051");
    check(avgpool::dims<4>{1, 19, 1100, 3}, "2-D 1100 rows");
    check(avgpool::dims<4>{2, 2051, 3, 17}, "2-D C 2051");
    check(avgpool::dims<4>{1, 16, 1, 8}, "2-D one pass");
    check(avgpool::dims<5>{1, 1030, 3, 2, 5}, "3-D C 1030");
    check(avgpool::dims<5>{2, 2051, 2, 3, 2}, "3-D C 2051");  // channel blocks of whole rows
    check(avgpool::dims<5>{1, 21, 40, 30, 2}, "3-D 1200 rows");
}

// Windows covering every axis but the first whole (the slice path, as i3d's 2x7x7 on 8x7x7):
// strides, dilation and pads on the first axis, pads on the inner axes (include-pad divisors
// larger than the input), a first-axis window wholly in padding (the row path's empty
// output), the override, adaptive plans; C below, at and above the vector width.
TEST(ChannelsLast, SlicePathInnerAxesWhole) {
    std::mt19937_64 gen(31);
    for (index_t C : {3, 8, 21, 1030}) {
        for (auto div : {avgpool::divisor_type::exclude_pad, avgpool::divisor_type::include_pad}) {
            avgpool::pool_attrs<3> a;
            a.kernel = {2, 7, 7};
            a.divisor = div;
            auto i3d = avgpool::detail::plan_access::create_exact<3>({1, C, 8, 7, 7}, a, avgpool::layout::channels_last);
            ASSERT_TRUE(i3d.ok());
            EXPECT_TRUE((compare_plan<float, 3>(*i3d, gen, "i3d C " + std::to_string(C))));
            a.kernel = {3, 9, 7};
            a.strides = {2, 1, 1};
            a.dilations = {2, 1, 1};
            a.pads_begin = {5, 1, 0};
            a.pads_end = {1, 1, 0};
            a.divisor_override = C == 21 ? 5 : 0;
            auto odd = avgpool::detail::plan_access::create_exact<3>({2, C, 11, 7, 7}, a, avgpool::layout::channels_last);
            ASSERT_TRUE(odd.ok());
            const auto& d = avgpool::detail::plan_access::data(*odd);
            ASSERT_EQ(d.axis(0)[0].count, 0);  // taps -5, -3 and -1: wholly in padding
            EXPECT_TRUE((compare_plan<float, 3>(*odd, gen, "dilated, padded C " + std::to_string(C))));
            EXPECT_TRUE((compare_plan<double, 3>(*odd, gen, "dilated, padded C " + std::to_string(C))));
            avgpool::pool_attrs<2> b;
            b.kernel = {3, 5};
            b.strides = {2, 1};
            b.pads_begin = {1, 0};
            b.pads_end = {1, 0};
            b.rounding = avgpool::rounding_type::ceil;
            b.divisor = div;
            auto two = avgpool::detail::plan_access::create_exact<2>({1, C, 10, 5}, b, avgpool::layout::channels_last);
            ASSERT_TRUE(two.ok());
            EXPECT_TRUE((compare_plan<float, 2>(*two, gen, "2-D C " + std::to_string(C))));
        }
        auto ad = avgpool::detail::plan_access::create_adaptive_exact<3>({1, C, 5, 6, 7}, {3, 1, 1}, avgpool::layout::channels_last);
        ASSERT_TRUE(ad.ok());
        EXPECT_TRUE((compare_plan<float, 3>(*ad, gen, "adaptive C " + std::to_string(C))));
    }
}

// Long kernels at stride 1 (the block-sum path: suffix of one block plus prefix of the next)
// and channel counts that are not a multiple of the vector width (the last vector shifted
// back), 1-D and 2-D, every pad up to k - 1, both divisors.
TEST(ChannelsLast, LongKernelsStrideOne) {
    std::mt19937_64 gen(29);
    for (index_t k : {6, 7, 9, 13, 25, 32}) {
        for (index_t pad : {index_t(0), k / 2, k - 1}) {
            for (index_t W : {k, k + 1, 2 * k - 1, 2 * k + 3, 3 * k + 5}) {
                for (index_t C : {8, 9, 21, 35}) {
                    for (auto div : {avgpool::divisor_type::exclude_pad, avgpool::divisor_type::include_pad}) {
                        const std::string t = "k " + std::to_string(k) + " pad " + std::to_string(pad) + " W " +
                                              std::to_string(W) + " C " + std::to_string(C) +
                                              (div == avgpool::divisor_type::include_pad ? " include" : " exclude");
                        avgpool::pool_attrs<1> a;
                        a.kernel = {k};
                        a.pads_begin = {pad};
                        a.pads_end = {(pad + W) % k == 0 ? pad : pad / 2};
                        a.divisor = div;
                        auto p1 = avgpool::detail::plan_access::create_exact<1>({2, C, W}, a, avgpool::layout::channels_last);
                        ASSERT_TRUE(p1.ok()) << t;
                        EXPECT_TRUE((compare_plan<float, 1>(*p1, gen, t))) << t;
                        if (C == 9) {
                            EXPECT_TRUE((compare_plan<double, 1>(*p1, gen, t))) << t;
                        }
                        avgpool::pool_attrs<2> b;
                        b.kernel = {2, k};
                        b.pads_begin = {1, pad};
                        b.pads_end = {0, a.pads_end[0]};
                        b.divisor = div;
                        auto p2 = avgpool::detail::plan_access::create_exact<2>({1, C, 3, W}, b, avgpool::layout::channels_last);
                        ASSERT_TRUE(p2.ok()) << t;
                        EXPECT_TRUE((compare_plan<float, 2>(*p2, gen, t + " 2-D"))) << t;
                        if (::testing::Test::HasFailure()) return;
                    }
                }
            }
        }
    }
}

// Kernels past cl_max_block: the fused block sums with their blocks in scratch, and no row
// buffer (cl_long_blocks; such plans ran the reference: 1x64x20000 with k = 1500 took 1.7 s).
// Forward against the reference, and backward through the API (the flipped plan's sum at
// stride 1) against the reference backward.
TEST(ChannelsLast, KernelsPastTheBlockArrays) {
    namespace dt = avgpool::detail;
    std::mt19937_64 gen(33);
    const index_t L = static_cast<index_t>(dt::vec<float>::width);
    struct shape_case {
        index_t k, W, pad, C;
    };
    std::vector<shape_case> cases;
    for (index_t k : {dt::cl_max_block + 1, index_t(90)})
        for (index_t W : {k + 1, 2 * k + 3, k + 300})
            for (index_t pad : {index_t(0), k / 2, k - 1})
                for (index_t C : {L, L + 3, 2 * L + 1}) cases.push_back({k, W, pad, C});
    cases.insert(cases.begin(), {{700, 900, 350, L + 1}, {2500, 2600, 1249, L}});  // (first: also under ASan)
    for (std::size_t ci = 0; ci < cases.size(); ci += avgpool_test::under_asan ? 4 : 1) {  // (a quarter under ASan)
        const shape_case& c = cases[ci];
        const std::string t = "k " + std::to_string(c.k) + " W " + std::to_string(c.W) + " pad " + std::to_string(c.pad) +
                              " C " + std::to_string(c.C);
        avgpool::pool_attrs<1> a;
        a.kernel = {c.k};
        a.pads_begin = {c.pad};
        a.pads_end = {c.pad / 3};
        a.divisor = c.W % 2 == 0 ? avgpool::divisor_type::include_pad : avgpool::divisor_type::exclude_pad;
        // (create_exact: one channel, with no SIMD, would otherwise run channels-first)
        auto p1 = dt::plan_access::create_exact<1>({1, c.C, c.W}, a, avgpool::layout::channels_last);
        ASSERT_TRUE(p1.ok()) << t;
        ASSERT_TRUE((dt::cl_long_blocks<float, 1>(dt::plan_access::data(*p1)))) << t;
        EXPECT_TRUE((compare_plan<float, 1>(*p1, gen, t))) << t;
        avgpool::pool_attrs<2> b;
        b.kernel = {2, c.k};
        b.pads_begin = {1, c.pad};
        b.pads_end = {0, c.pad / 3};
        b.divisor = a.divisor;
        auto p2 = dt::plan_access::create_exact<2>({1, c.C, 3, c.W}, b, avgpool::layout::channels_last);
        ASSERT_TRUE(p2.ok()) << t;
        EXPECT_TRUE((compare_plan<float, 2>(*p2, gen, t + " 2-D"))) << t;
        if (c.C == L + 3) {
            EXPECT_TRUE((compare_plan<double, 1>(*p1, gen, t + " double"))) << t;
        }
        // Backward: an input sums at most k shares, each rounded at most twice, so the error is
        // within 2 (k + 2) eps times the sum of |shares| (the reference on |g|).
        const auto& d = dt::plan_access::data(*p1);
        const std::vector<float> g = random_input<float>(static_cast<std::size_t>(p1->output_size()), gen);
        std::vector<float> g_abs(g.size()), got(static_cast<std::size_t>(p1->input_size()), 1e30f), ref(got.size()),
            ref_abs(got.size());
        for (std::size_t i = 0; i < g.size(); ++i) g_abs[i] = std::fabs(g[i]);
        ASSERT_TRUE(p1->backward(g.data(), got.data()).ok());
        dt::reference_backward<float, 1>(d, g.data(), ref.data(), 0, c.C);
        dt::reference_backward<float, 1>(d, g_abs.data(), ref_abs.data(), 0, c.C);
        for (std::size_t i = 0; i < got.size(); ++i)
            ASSERT_NEAR(got[i], ref[i], 2.0 * static_cast<double>(c.k + 2) * eps<float>() * ref_abs[i] + 1e-30)
                << t << " backward input " << i;
        if (::testing::Test::HasFailure()) return;
    }
    // An outer window wholly in padding (ceil rounding, include-pad): that output row has no
    // input rows, which the fused path cannot take and the row buffer cannot hold, so the plan
    // is not the kernel's; forward and sum still match the reference (no endless split).
    avgpool::pool_attrs<2> e;
    e.kernel = {2, 40};
    e.strides = {3, 1};
    e.pads_end = {1, 0};
    e.rounding = avgpool::rounding_type::ceil;
    e.divisor = avgpool::divisor_type::include_pad;
    auto pe = avgpool::pooling<2>::create({1, L, 3, 200}, e, avgpool::layout::channels_last);
    ASSERT_TRUE(pe.ok());
    const auto& de = dt::plan_access::data(*pe);
    ASSERT_EQ(de.axis(0)[1].count, 0) << "expected an outer window with no rows";
    EXPECT_FALSE((dt::cl_long_blocks<float, 2>(de)));
    const std::vector<float> x = random_input<float>(static_cast<std::size_t>(pe->input_size()), gen);
    std::vector<float> got(static_cast<std::size_t>(pe->output_size())), ref(got.size());
    for (auto op : {pool_op::average, pool_op::sum}) {
        ASSERT_TRUE((op == pool_op::sum ? pe->sum(x.data(), got.data()) : pe->forward(x.data(), got.data())).ok());
        dt::reference_pool<float, 2>(de, x.data(), ref.data(), op, 0, L);
        for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-4) << "output " << i;
    }
}

// Infinite and NaN inputs through every channels-last path (register, ring, block-sum, slice)
// and divisor kind (powers of two, others, include-pad): each output is what the reference's
// double sum gives, +-Inf for a window holding one sign of Inf, NaN for both signs or a NaN.
// (The corrected quotient once turned an infinite sum into NaN: Inf - Inf in its correction.)
template <class T, std::size_t R>
void expect_non_finite_like_reference(const avgpool::dims<R + 2>& shape, const avgpool::pool_attrs<R>& a,
                                      const std::string& what) {
    SCOPED_TRACE(what);
    auto plan = avgpool::detail::plan_access::create_exact<R>(shape, a, avgpool::layout::channels_last);
    ASSERT_TRUE(plan.ok());
    const auto& d = avgpool::detail::plan_access::data(*plan);
    ASSERT_TRUE((avgpool::detail::cl_applicable<T, R>(d)));
    std::vector<T> in(static_cast<std::size_t>(plan->input_size()), T(1));
    const T inf = std::numeric_limits<T>::infinity();
    for (std::size_t i = 0; i < in.size(); i += 37) in[i] = inf;
    for (std::size_t i = 11; i < in.size(); i += 101) in[i] = -inf;
    if (in.size() > 500) in[500] = std::numeric_limits<T>::quiet_NaN();
    const std::size_t n = static_cast<std::size_t>(plan->output_size());
    const index_t planes = shape[0] * shape[1];
    for (auto op : {pool_op::average, pool_op::sum}) {
        std::vector<T> fast(n, T(7)), ref(n);
        const avgpool::detail::cl_kernel<T, R> kernel(d, op);
        kernel.run(in.data(), fast.data(), 0, kernel.items());
        avgpool::detail::reference_pool<T, R>(d, in.data(), ref.data(), op, 0, planes);
        int inf_outputs = 0;
        for (std::size_t i = 0; i < n; ++i) {
            if (std::isnan(ref[i])) {
                ASSERT_TRUE(std::isnan(fast[i])) << "output " << i << ": " << fast[i];
            } else if (std::isinf(ref[i])) {
                ++inf_outputs;
                ASSERT_EQ(fast[i], ref[i]) << "output " << i;
            } else {
                ASSERT_NEAR(static_cast<double>(fast[i]), static_cast<double>(ref[i]), 1e-5 * std::fabs(ref[i]))
                    << "output " << i;
            }
        }
        EXPECT_GT(inf_outputs, 0);
    }
}

// 3x3 windows slide groups of vectors of channels in registers: at stride 2 groups of three
// (AVX2, AVX-512), then a pair, then single ones, the last shifted back to end at C when C is
// not a multiple of the width; at stride 1 pairs up to 256 bytes of channels, the ring past
// that; with AVX2, the ring also once three rows outgrow L1 (the 44-wide rows from 256 bytes
// of channels). Every mix, both divisor types, padded and not, float and double.
TEST(ChannelsLast, ThreeWideChannelGroups) {
    std::mt19937_64 gen(43);
    const auto exclude = avgpool::divisor_type::exclude_pad, include = avgpool::divisor_type::include_pad;
    auto check = [&](index_t s, index_t vectors, index_t extra, index_t pad, index_t W, avgpool::divisor_type div) {
        avgpool::pool_attrs<2> a;
        a.kernel = {3, 3};
        a.strides = {s, s};
        a.pads_begin = {pad, pad};
        a.pads_end = {pad, 0};
        a.divisor = div;
        const std::string t = "stride " + std::to_string(s) + ", " + std::to_string(vectors) + " vectors + " +
                              std::to_string(extra) + ", pad " + std::to_string(pad) + ", W " + std::to_string(W) +
                              (div == include ? " include" : " exclude");
        auto pf = avgpool::detail::plan_access::create_exact<2>({1, 16 * vectors + extra, 9, W}, a, avgpool::layout::channels_last);
        auto pd = avgpool::detail::plan_access::create_exact<2>({1, 8 * vectors + extra, 9, W}, a, avgpool::layout::channels_last);
        ASSERT_TRUE(pf.ok() && pd.ok());
        EXPECT_TRUE((compare_plan<float, 2>(*pf, gen, t))) << t << ": expected the channels-last kernel";
        EXPECT_TRUE((compare_plan<double, 2>(*pd, gen, t))) << t << ": expected the channels-last kernel";
    };
    for (index_t s : {1, 2})
        for (index_t vectors = 1; vectors <= 9; ++vectors)
            for (index_t extra : {0, 3})
                for (index_t pad : {0, 1}) {
                    for (auto div : {exclude, include}) check(s, vectors, extra, pad, 12, div);
                    // (Either side of the threshold, and the widest: the sanitizer build's time.)
                    if (vectors == 3 || vectors == 4 || vectors == 9) check(s, vectors, extra, pad, 44, exclude);
                }
}

TEST(ChannelsLast, NonFiniteInputsLikeReference) {
    avgpool::pool_attrs<2> two, three, three_inc, seven;
    two.kernel = two.strides = {2, 2};  // divisor 4: the exact reciprocal
    three.kernel = {3, 3};
    three.pads_begin = three.pads_end = {1, 1};  // divisors 4, 6, 9
    three_inc = three;
    three_inc.strides = {2, 2};
    three_inc.divisor = avgpool::divisor_type::include_pad;
    seven.kernel = {7, 7};
    seven.pads_begin = seven.pads_end = {3, 3};  // wider than the ring: the block-sum path
    avgpool::pool_attrs<2> global;
    global.kernel = {7, 7};
    for (index_t C : {8, 24, 32, 40}) {
        const std::string c = " C=" + std::to_string(C);
        expect_non_finite_like_reference<float, 2>({1, C, 8, 10}, two, "2x2 s2" + c);
        expect_non_finite_like_reference<float, 2>({1, C, 8, 10}, three, "3x3 s1 p1" + c);
        expect_non_finite_like_reference<float, 2>({1, C, 9, 9}, three_inc, "3x3 s2 p1 include" + c);
        expect_non_finite_like_reference<float, 2>({1, C, 9, 11}, seven, "7x7 s1 p3" + c);
        expect_non_finite_like_reference<float, 2>({1, C, 7, 7}, global, "global 7x7" + c);
        expect_non_finite_like_reference<double, 2>({1, C, 8, 10}, three, "double 3x3 s1 p1" + c);
        expect_non_finite_like_reference<double, 2>({1, C, 8, 10}, two, "double 2x2 s2" + c);
    }
}

// The mean of many ones is exactly 1, through forward().
TEST(ChannelsLast, MeanOfOnesIsExact) {
    avgpool::pool_attrs<2> a;
    a.kernel = {300, 301};
    auto plan = avgpool::detail::plan_access::create_exact<2>({1, 3, 300, 301}, a, avgpool::layout::channels_last);
    ASSERT_TRUE(plan.ok());
    ASSERT_TRUE((avgpool::detail::cl_applicable<float, 2>(avgpool::detail::plan_access::data(*plan))));
    std::vector<float> in(static_cast<std::size_t>(plan->input_size()), 1.0f), out(3, 0.0f);
    plan->forward(in.data(), out.data());
    for (float v : out) EXPECT_EQ(v, 1.0f);
}

// Every quotient is the correctly rounded sum / divisor: on integer inputs every window sum
// is exact in any order, so each output must equal float(S) / float(divisor) bit for bit.
// Covers the ring (3x3, 5x5, stride 1 and 2), register, block-sum and slice paths, exclude-
// and include-pad divisors (4, 6, 9, 25, 27, 49, ...), float and double. (A residual rounded
// before the correction, as an unfused a - q d would be, fails this.)
template <class T, std::size_t R>
void expect_correctly_rounded(const avgpool::dims<R + 2>& shape, const avgpool::pool_attrs<R>& a,
                              const std::string& what) {
    SCOPED_TRACE(what);
    auto plan = avgpool::detail::plan_access::create_exact<R>(shape, a, avgpool::layout::channels_last);
    ASSERT_TRUE(plan.ok());
    ASSERT_TRUE((avgpool::detail::cl_applicable<T, R>(avgpool::detail::plan_access::data(*plan))));
    std::mt19937_64 gen(7);
    std::uniform_int_distribution<int> dist(-(1 << 16), 1 << 16);
    std::vector<T> in(static_cast<std::size_t>(plan->input_size()));
    for (T& x : in) x = static_cast<T>(dist(gen));
    const std::size_t C = static_cast<std::size_t>(shape[1]);
    std::vector<T> out(static_cast<std::size_t>(plan->output_size())), sum(out.size()), div(out.size() / C);
    plan->forward(in.data(), out.data());
    plan->sum(in.data(), sum.data());
    plan->divisor(div.data());  // one per output position (N = 1)
    std::size_t bad = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
        const T d = div[i / C];
        const T expect = sum[i] / d;  // sums are exact integers: correctly rounded
        if (out[i] != expect && bad++ < 5)
            ADD_FAILURE() << "output " << i << ": " << out[i] << " != " << sum[i] << " / " << d << " = " << expect;
    }
    EXPECT_EQ(bad, 0u);
}

TEST(ChannelsLast, QuotientsCorrectlyRounded) {
    for (index_t k : {2, 3, 5, 7}) {
        for (index_t s : {1, 2}) {
            for (auto dv : {avgpool::divisor_type::exclude_pad, avgpool::divisor_type::include_pad}) {
                avgpool::pool_attrs<2> a;
                a.kernel = {k, k};
                a.strides = {s, s};
                a.pads_begin = a.pads_end = {k / 2, k / 2};
                a.divisor = dv;
                const std::string w = "k=" + std::to_string(k) + " s=" + std::to_string(s) +
                                      (dv == avgpool::divisor_type::include_pad ? " include" : " exclude");
                for (index_t C : {16, 64, 80}) {
                    expect_correctly_rounded<float, 2>({1, C, 11, 13}, a, w + " C=" + std::to_string(C));
                    expect_correctly_rounded<double, 2>({1, C, 11, 13}, a, w + " double C=" + std::to_string(C));
                }
            }
        }
    }
    avgpool::pool_attrs<3> cube;
    cube.kernel = {3, 3, 3};
    cube.pads_begin = cube.pads_end = {1, 1, 1};
    cube.divisor = avgpool::divisor_type::include_pad;
    expect_correctly_rounded<float, 3>({1, 64, 5, 6, 7}, cube, "3x3x3 include");
    avgpool::pool_attrs<2> global;
    global.kernel = {7, 7};
    expect_correctly_rounded<float, 2>({1, 96, 7, 7}, global, "global 7x7");
}

// A hand-computed NHWC case: N = 1, H = W = 3, C = 2, x(h, w, c) = 10 h + w + 100 c, kernel
// 2x2, stride 1, pads 1 at the end, exclude-pad; then include-pad with a divisor override.
TEST(ChannelsLast, HandComputedNHWC) {
    std::vector<float> in;
    for (int h = 0; h < 3; ++h)
        for (int w = 0; w < 3; ++w)
            for (int c = 0; c < 2; ++c) in.push_back(static_cast<float>(10 * h + w + 100 * c));
    avgpool::pool_attrs<2> a;
    a.kernel = {2, 2};
    a.pads_end = {1, 1};
    auto plan = avgpool::detail::plan_access::create_exact<2>({1, 2, 3, 3}, a, avgpool::layout::channels_last);
    ASSERT_TRUE(plan.ok());
    ASSERT_TRUE((avgpool::detail::cl_applicable<float, 2>(avgpool::detail::plan_access::data(*plan))));
    std::vector<float> out(static_cast<std::size_t>(plan->output_size()));
    ASSERT_EQ(out.size(), 18u);
    plan->forward(in.data(), out.data());
    // Channel 0, output (oh, ow): mean of x over the valid taps of rows oh..oh+1, cols ow..ow+1.
    const float c0[3][3] = {{5.5f, 6.5f, 7.0f}, {15.5f, 16.5f, 17.0f}, {20.5f, 21.5f, 22.0f}};
    for (int oh = 0; oh < 3; ++oh)
        for (int ow = 0; ow < 3; ++ow) {
            EXPECT_EQ(out[static_cast<std::size_t>((oh * 3 + ow) * 2)], c0[oh][ow]) << oh << "," << ow;
            EXPECT_EQ(out[static_cast<std::size_t>((oh * 3 + ow) * 2 + 1)], c0[oh][ow] + 100.0f) << oh << "," << ow;
        }
    std::vector<float> sums(out.size());
    plan->sum(in.data(), sums.data());
    EXPECT_EQ(sums[0], 22.0f);          // 0 + 1 + 10 + 11
    EXPECT_EQ(sums[1], 422.0f);         // + 4 * 100
    EXPECT_EQ(sums[17], 122.0f);        // (2, 2), channel 1: one tap, 122
    a.divisor_override = 4;
    auto ov = avgpool::detail::plan_access::create_exact<2>({1, 2, 3, 3}, a, avgpool::layout::channels_last);
    ASSERT_TRUE(ov.ok());
    ov->forward(in.data(), out.data());
    EXPECT_EQ(out[16], 22.0f / 4.0f);   // (2, 2), channel 0: 22 / 4
    EXPECT_EQ(out[17], 122.0f / 4.0f);
}

// One channel: N[D]HWC and NC[D]HW are the same bytes, so a channels-last plan runs the
// channels-first kernels (memory_layout() still reports channels-last), and forward, sum and
// backward give the channels-first plan's bits, float and bfloat16, ranks 1-3, N = 1 and 2.
template <std::size_t R>
void one_channel_as_channels_first(const avgpool::dims<R + 2>& shape, const avgpool::pool_attrs<R>& a) {
    SCOPED_TRACE(testing::Message() << "rank " << R << " N " << shape[0]);
    auto cl = avgpool::pooling<R>::create(shape, a, avgpool::layout::channels_last);
    auto cf = avgpool::pooling<R>::create(shape, a, avgpool::layout::channels_first);
    ASSERT_TRUE(cl.ok() && cf.ok());
    EXPECT_EQ(cl->memory_layout(), avgpool::layout::channels_last);
    EXPECT_EQ(avgpool::detail::plan_access::data(*cl).memory_layout, avgpool::layout::channels_first);
    std::mt19937_64 gen(R);
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
    std::vector<float> x(static_cast<std::size_t>(cl->input_size())), g(static_cast<std::size_t>(cl->output_size()));
    for (float& v : x) v = dist(gen);
    for (float& v : g) v = dist(gen);
    std::vector<float> a1(g.size(), 1.0f), a2(g.size(), 2.0f), b1(x.size(), 1.0f), b2(x.size(), 2.0f);
    ASSERT_TRUE(cl->forward(x.data(), a1.data()).ok());
    ASSERT_TRUE(cf->forward(x.data(), a2.data()).ok());
    EXPECT_EQ(0, std::memcmp(a1.data(), a2.data(), a1.size() * sizeof(float))) << "forward";
    ASSERT_TRUE(cl->sum(x.data(), a1.data()).ok());
    ASSERT_TRUE(cf->sum(x.data(), a2.data()).ok());
    EXPECT_EQ(0, std::memcmp(a1.data(), a2.data(), a1.size() * sizeof(float))) << "sum";
    ASSERT_TRUE(cl->backward(g.data(), b1.data()).ok());
    ASSERT_TRUE(cf->backward(g.data(), b2.data()).ok());
    EXPECT_EQ(0, std::memcmp(b1.data(), b2.data(), b1.size() * sizeof(float))) << "backward";
    std::vector<avgpool::bfloat16> xh(x.size()), h1(g.size()), h2(g.size());
    for (std::size_t i = 0; i < x.size(); ++i) xh[i] = avgpool::bfloat16(x[i]);
    ASSERT_TRUE(cl->forward(xh.data(), h1.data()).ok());
    ASSERT_TRUE(cf->forward(xh.data(), h2.data()).ok());
    EXPECT_EQ(0, std::memcmp(h1.data(), h2.data(), h1.size() * sizeof(avgpool::bfloat16))) << "bfloat16 forward";
}

TEST(ChannelsLast, OneChannelRunsChannelsFirst) {
    avgpool::pool_attrs<1> a1;
    a1.kernel = {3};
    a1.strides = {2};
    a1.pads_begin = a1.pads_end = {1};
    one_channel_as_channels_first<1>({2, 1, 37}, a1);
    avgpool::pool_attrs<2> a2;
    a2.kernel = {3, 3};
    a2.pads_begin = a2.pads_end = {1, 1};
    one_channel_as_channels_first<2>({1, 1, 20, 20}, a2);
    a2.strides = {2, 2};
    one_channel_as_channels_first<2>({2, 1, 7, 7}, a2);
    avgpool::pool_attrs<3> a3;
    a3.kernel = {2, 3, 3};
    a3.strides = {1, 2, 2};
    one_channel_as_channels_first<3>({1, 1, 5, 12, 13}, a3);
    // Two channels keep the channels-last kernels.
    auto two = avgpool::pooling<2>::create({1, 2, 20, 20}, a2, avgpool::layout::channels_last);
    ASSERT_TRUE(two.ok());
    EXPECT_EQ(avgpool::detail::plan_access::data(*two).memory_layout, avgpool::layout::channels_last);
}

// Fewer channels than a float vector, stride 1 on the last axis: the public plan runs a
// channels-first plan over rows W * C long. Random geometries of every mode against the
// reference on the channels-last plan: forward and sum within the forward bound, backward
// within the bound of any summation order; bfloat16 forward is the float result rounded once.
// strided: a stride of 2-5 on the last axis (the pixel kernel's plans: AVX-512 builds, and
// AVX2 ones forward).
template <std::size_t R>
void few_channels_suite(int cases, bool strided = false) {
    namespace dt = avgpool::detail;
    int flat = 0, pixels = 0, pixels_backward = 0;
    const auto width = static_cast<index_t>(dt::vec<float>::width);
    for (int c = 0; c < cases; ++c) {
        const std::uint64_t seed = (strided ? 53000 : 51000) * R + static_cast<std::uint64_t>(c);
        std::mt19937_64 gen(seed);
        auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
        avgpool::dims<R + 2> shape{};
        shape[0] = pick(1, 2);
        // Mostly fewer channels than a vector of this build (the mapped case), some up to 15.
        shape[1] = pick(0, 4) == 0 ? pick(2, 15) : pick(2, std::max<index_t>(2, width - 1));
        avgpool::dims<R> spatial{};
        for (std::size_t ax = 0; ax < R; ++ax) spatial[ax] = pick(1, R == 3 ? 9 : 24);
        for (std::size_t ax = 0; ax < R; ++ax) shape[ax + 2] = spatial[ax];
        auto a = random_attrs<R>(gen, spatial);
        if (strided) {
            a.strides[R - 1] = pick(2, 5);
            a.pads_begin[R - 1] = std::min(a.pads_begin[R - 1], (a.kernel[R - 1] - 1) * a.dilations[R - 1]);
            a.pads_end[R - 1] = std::min(a.pads_end[R - 1], (a.kernel[R - 1] - 1) * a.dilations[R - 1]);
        } else if (pick(0, 3) > 0) {
            a.strides[R - 1] = 1;  // mostly the mapped case
        }
        auto plan = avgpool::pooling<R>::create(shape, a, avgpool::layout::channels_last);
        auto exact = dt::plan_access::create_exact<R>(shape, a, avgpool::layout::channels_last);
        if (!plan) continue;
        ASSERT_TRUE(exact);
        const std::string trace = describe<R>(shape, a, "seed " + std::to_string(seed));
        SCOPED_TRACE(trace);
        const bool mapped = dt::plan_access::flattened(*plan);
        if (mapped) ++flat;
        if (dt::plan_access::pixels(*plan)) {
            ++pixels;
            ASSERT_FALSE(mapped);
            ASSERT_LE(shape[1], dt::px_max_channels);
            if (dt::plan_access::pixels_backward(*plan)) ++pixels_backward;
        }
        if (plan->geometry().strides[R - 1] != 1 || shape[1] >= width || dt::plan_access::data(*exact).global) {
            ASSERT_FALSE(mapped);
        }
        const auto& d = dt::plan_access::data(*exact);
        const index_t planes = shape[0] * shape[1];
        const std::vector<float> in = random_input<float>(static_cast<std::size_t>(plan->input_size()), gen);
        std::vector<float> absin(in.size());
        for (std::size_t i = 0; i < in.size(); ++i) absin[i] = std::fabs(in[i]);
        const std::size_t n = static_cast<std::size_t>(plan->output_size());
        double ksum = 0;
        for (std::size_t ax = 0; ax < R; ++ax) ksum += static_cast<double>(plan->geometry().kernel[ax]);
        for (auto op : {pool_op::average, pool_op::sum}) {
            std::vector<float> got(n, 1e30f), ref(n), ref_abs(n);
            ASSERT_TRUE((op == pool_op::sum ? plan->sum(in.data(), got.data()) : plan->forward(in.data(), got.data())).ok());
            dt::reference_pool<float, R>(d, in.data(), ref.data(), op, 0, planes);
            dt::reference_pool<float, R>(d, absin.data(), ref_abs.data(), op, 0, planes);
            for (std::size_t i = 0; i < n; ++i) {
                if (std::isnan(ref[i])) {
                    ASSERT_TRUE(std::isnan(got[i])) << "output " << i;
                    continue;
                }
                const double bound = 4 * ksum * eps<float>() * static_cast<double>(ref_abs[i]) * (1 + 1e-6) +
                                     std::numeric_limits<float>::denorm_min();
                ASSERT_LE(std::fabs(static_cast<double>(got[i]) - static_cast<double>(ref[i])), bound)
                    << "output " << i << ": " << got[i] << " reference " << ref[i] << (op == pool_op::sum ? " (sum)" : "");
            }
            if (op == pool_op::average) {
                std::vector<avgpool::bfloat16> hin(in.size()), hout(n);
                for (std::size_t i = 0; i < in.size(); ++i) hin[i] = avgpool::bfloat16(in[i]);
                std::vector<float> back(in.size()), fref(n);
                for (std::size_t i = 0; i < in.size(); ++i) back[i] = static_cast<float>(hin[i]);
                ASSERT_TRUE(plan->forward(hin.data(), hout.data()).ok());
                ASSERT_TRUE(plan->forward(back.data(), fref.data()).ok());
                for (std::size_t i = 0; i < n; ++i) {
                    const avgpool::bfloat16 want(fref[i]);
                    ASSERT_EQ(0, std::memcmp(&hout[i], &want, sizeof want)) << "bfloat16 output " << i;
                }
            }
        }
        std::vector<float> g(n), gabs(n), gi(in.size(), 1e30f), gref(in.size()), gref_abs(in.size());
        avgpool_test::uniform<double> dist(-1, 1);
        for (std::size_t i = 0; i < n; ++i) {
            g[i] = static_cast<float>(dist(gen));
            gabs[i] = std::fabs(g[i]);
        }
        ASSERT_TRUE(plan->backward(g.data(), gi.data()).ok());
        dt::reference_backward<float, R>(d, g.data(), gref.data(), 0, planes);
        dt::reference_backward<float, R>(d, gabs.data(), gref_abs.data(), 0, planes);
        double terms = 1;
        for (std::size_t ax = 0; ax < R; ++ax) terms *= static_cast<double>(std::max<index_t>(1, dt::max_cover<R>(d, ax)));
        for (std::size_t i = 0; i < in.size(); ++i)
            ASSERT_NEAR(static_cast<double>(gi[i]), static_cast<double>(gref[i]), 2 * (terms + 2) * 0x1p-24 * static_cast<double>(gref_abs[i]))
                << "backward input " << i;
    }
    if (strided) {
        if (AVGPOOL_PIXEL_KERNEL) {
            // (AVX2's 8-lane form takes 2-4 channels at strides that keep two pixels a vector.)
            EXPECT_GT(pixels, cases / (dt::px_lanes == 16 ? 4 : 6)) << "too few draws took the pixel kernel";
        } else {
            EXPECT_EQ(pixels, 0);
        }
        if (AVGPOOL_PERM_KERNEL) {
            EXPECT_GT(pixels_backward, cases / 8) << "too few draws took its backward";
        } else {
            EXPECT_EQ(pixels_backward, 0);
        }
        std::printf("[          ] R=%zu: %d of %d draws took the pixel kernel, %d its backward\n", R, pixels, cases,
                    pixels_backward);
    } else if (width > 2) {
        EXPECT_GT(flat, cases / 4) << "too few draws took the flattened plan";
    }
}

TEST(ChannelsLast, FewChannelsRunFlattened) {
    few_channels_suite<1>(150);
    few_channels_suite<2>(200);
    few_channels_suite<3>(120);
}

// A stride on the last axis: 2-8 channels take the pixel kernel (AVX-512; 2-4 with AVX2, and
// its backward on AVX-512 only), more keep the channels-last kernels; the same checks.
TEST(ChannelsLast, FewChannelsStridedPixels) {
    few_channels_suite<1>(150, true);
    few_channels_suite<2>(200, true);
    few_channels_suite<3>(120, true);
}

#if AVGPOOL_PERM_KERNEL
// The pixel backward's merged tables (shared loads, taps of different lanes in one permute)
// give expand()'s bits, with zeros, NaNs and infinities among the gradients (a NaN's sign
// aside): random strided few-channel geometries, both paths over every input row.
template <std::size_t R>
int merged_pixel_backward_cases(int cases, int& three_phases) {
    namespace dt = avgpool::detail;
    int merged = 0;
    for (int c = 0; c < cases; ++c) {
        const std::uint64_t seed = 57000 * R + static_cast<std::uint64_t>(c);
        std::mt19937_64 gen(seed);
        auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
        avgpool::dims<R + 2> shape{};
        shape[0] = 1;
        shape[1] = pick(0, 2) == 0 ? pick(2, 8) : (pick(0, 1) == 0 ? 3 : 8);  // RGB and 8 often
        avgpool::dims<R> spatial{};
        for (std::size_t ax = 0; ax < R; ++ax) spatial[ax] = pick(1, R == 3 ? 8 : 40);
        for (std::size_t ax = 0; ax < R; ++ax) shape[ax + 2] = spatial[ax];
        auto a = random_attrs<R>(gen, spatial);
        // Strides past 3 leave some phases with no tap at all (C = 4 at stride 6).
        a.strides[R - 1] = pick(0, 3) == 0 ? pick(4, 6) : pick(1, 3);
        a.dilations[R - 1] = pick(0, 3) == 0 ? 2 : 1;
        a.kernel[R - 1] = std::max<index_t>(1, std::min<index_t>(pick(1, 5), (spatial[R - 1] - 1) / a.dilations[R - 1] + 1));
        const index_t reach = (a.kernel[R - 1] - 1) * a.dilations[R - 1];
        a.pads_begin[R - 1] = std::min(a.pads_begin[R - 1], reach);
        a.pads_end[R - 1] = std::min(a.pads_end[R - 1], reach);
        auto plan = avgpool::pooling<R>::create(shape, a, avgpool::layout::channels_last);
        if (!plan) continue;
        const auto& d = dt::plan_access::data(*plan);
        if (d.bwd().px_b == nullptr) continue;
        SCOPED_TRACE(describe<R>(shape, a, "seed " + std::to_string(seed)));
        const dt::px_backward<R> fast(d), per_tap(d, false);
        EXPECT_FALSE(per_tap.merged());
        if (!fast.merged()) continue;
        ++merged;
        if (d.bwd().px_b->phases == 3) ++three_phases;
        std::vector<float> g = random_input<float>(static_cast<std::size_t>(plan->output_size()), gen);
        const float special[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                                 -std::numeric_limits<float>::quiet_NaN()};
        for (float& x : g)
            if (pick(0, 9) == 0) x = special[pick(0, 5)];
        const std::size_t ni = static_cast<std::size_t>(plan->input_size());
        std::vector<float> got(ni, 7.0f), want(ni, -7.0f);
        fast.run(g.data(), got.data(), 0, fast.items());
        per_tap.run(g.data(), want.data(), 0, per_tap.items());
        for (std::size_t i = 0; i < ni; ++i) {
            // Every bit, except that a NaN need only be NaN: where two NaNs meet, x86 keeps the
            // first operand's, and the compiler may order an addition's operands either way.
            std::uint32_t x, y;
            std::memcpy(&x, &got[i], 4);
            std::memcpy(&y, &want[i], 4);
            if (x != y && !(std::isnan(got[i]) && std::isnan(want[i]))) {
                ADD_FAILURE() << "input " << i << ": " << got[i] << " per-tap " << want[i];
                return merged;
            }
        }
    }
    return merged;
}

TEST(ChannelsLast, PixelBackwardMergedTablesMatchPerTap) {
    int three = 0;
    const int m1 = merged_pixel_backward_cases<1>(200, three), m2 = merged_pixel_backward_cases<2>(300, three),
              m3 = merged_pixel_backward_cases<3>(200, three);
    // (51, 64 and 49 of the draws take the merged tables, 83 of them with three phases.)
    EXPECT_GT(m1, 30);
    EXPECT_GT(m2, 40);
    EXPECT_GT(m3, 30);
    EXPECT_GT(three, 30) << "too few draws took the three-phase (RGB) tables";
}
#endif

// Rows longer than one chunk of the pixel kernel, and chunks with no input in them: under ceil
// rounding a last window past the input's end opens a chunk of its own (the kernel wrote
// before its row buffer there), and huge pads put whole chunks in the padding (it wrote past
// the buffer). Every output against the reference, float and bfloat16, both divisor rules.
TEST(ChannelsLast, PixelKernelChunksOutsideInput) {
    namespace dt = avgpool::detail;
    struct geo {
        avgpool::dims<3> shape;  // N, C, W (NWC memory)
        index_t k, s, pb, pe;
        bool ceil;
    };
    const geo cases[] = {
        {{1, 3, 1351}, 2, 4, 0, 0, true},  // 8 lanes: 339 outputs, chunks of 338; the last past W
        {{1, 3, 1355}, 2, 4, 0, 0, true},  // the same with 16 lanes
        {{1, 2, 2031}, 2, 4, 0, 0, true},
        {{2, 3, 2500}, 3, 2, 1, 1, false},  // several chunks, padding at both ends
        {{1, 2, 4}, 2, 2, 4000, 0, false},  // chunks wholly in the padding before the input
        {{1, 2, 4}, 2, 2, 0, 2100, false},  // and after it
        {{1, 4, 9}, 3, 3, 3000, 3000, true},
    };
    int took = 0;
    for (const geo& g : cases)
        for (auto div : {avgpool::divisor_type::exclude_pad, avgpool::divisor_type::include_pad}) {
            avgpool::pool_attrs<1> a;
            a.kernel = {g.k};
            a.strides = {g.s};
            a.pads_begin = {g.pb};
            a.pads_end = {g.pe};
            a.rounding = g.ceil ? avgpool::rounding_type::ceil : avgpool::rounding_type::floor;
            a.divisor = div;
            SCOPED_TRACE(describe<1>(g.shape, a, "pixel chunks"));
            auto plan = avgpool::pooling<1>::create(g.shape, a, avgpool::layout::channels_last);
            ASSERT_TRUE(plan.ok());
            if (dt::plan_access::pixels(*plan)) ++took;
            const auto& d = dt::plan_access::data(*plan);
            std::mt19937_64 gen(static_cast<std::uint64_t>(g.shape[2] + g.pb + g.pe));
            const std::vector<float> in = random_input<float>(static_cast<std::size_t>(plan->input_size()), gen);
            std::vector<float> absin(in.size());
            for (std::size_t i = 0; i < in.size(); ++i) absin[i] = std::fabs(in[i]);
            const std::size_t n = static_cast<std::size_t>(plan->output_size());
            std::vector<float> got(n, 1e30f), ref(n), ref_abs(n);
            ASSERT_TRUE(plan->forward(in.data(), got.data()).ok());
            dt::reference_pool<float, 1>(d, in.data(), ref.data(), pool_op::average, 0, g.shape[0] * g.shape[1]);
            dt::reference_pool<float, 1>(d, absin.data(), ref_abs.data(), pool_op::average, 0, g.shape[0] * g.shape[1]);
            for (std::size_t i = 0; i < n; ++i) {
                if (std::isnan(ref[i])) {
                    ASSERT_TRUE(std::isnan(got[i])) << "output " << i;
                    continue;
                }
                const double bound = 4 * static_cast<double>(g.k) * eps<float>() * static_cast<double>(ref_abs[i]) * (1 + 1e-6) +
                                     std::numeric_limits<float>::denorm_min();
                ASSERT_LE(std::fabs(static_cast<double>(got[i]) - static_cast<double>(ref[i])), bound)
                    << "output " << i << ": " << got[i] << " reference " << ref[i];
            }
            std::vector<avgpool::bfloat16> hin(in.size()), hout(n);
            std::vector<float> back(in.size()), fref(n);
            for (std::size_t i = 0; i < in.size(); ++i) {
                hin[i] = avgpool::bfloat16(in[i]);
                back[i] = static_cast<float>(hin[i]);
            }
            ASSERT_TRUE(plan->forward(hin.data(), hout.data()).ok());
            ASSERT_TRUE(plan->forward(back.data(), fref.data()).ok());
            for (std::size_t i = 0; i < n; ++i) {
                const avgpool::bfloat16 want(fref[i]);
                ASSERT_EQ(0, std::memcmp(&hout[i], &want, sizeof want)) << "bfloat16 output " << i;
            }
        }
    if (AVGPOOL_PIXEL_KERNEL) {
        EXPECT_GE(took, 10) << "too few of these plans took the pixel kernel";
    }
}

// The pixel kernel's results do not depend on the executor, and its empty windows give the
// rule's value: NaN under nGraph's rule, 0 otherwise.
TEST(ChannelsLast, PixelKernelExecutorsAndEmptyWindows) {
    avgpool::thread_pool pool(3);
    std::mt19937_64 gen(29);
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.strides = {2, 2};
    a.pads_begin = a.pads_end = {1, 1};
    auto plan = avgpool::pooling<2>::create({1, 3, 37, 41}, a, avgpool::layout::channels_last);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(avgpool::detail::plan_access::pixels(*plan), AVGPOOL_PIXEL_KERNEL != 0);
    const std::vector<float> in = random_input<float>(static_cast<std::size_t>(plan->input_size()), gen);
    const std::size_t n = static_cast<std::size_t>(plan->output_size());
    std::vector<float> seq(n), par(n, -1.0f), split(n, -1.0f);
    plan->forward(in.data(), seq.data());
    plan->forward(in.data(), par.data(), pool);
    auto uneven = [](index_t count, auto&& fn) {
        for (index_t b = 0, step = 1; b < count; b += step, step = step % 3 + 1) fn(b, std::min(count, b + step));
    };
    plan->forward(in.data(), split.data(), uneven);
    EXPECT_EQ(0, std::memcmp(seq.data(), par.data(), n * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(seq.data(), split.data(), n * sizeof(float)));
    // Rows last to first: a store past a row's end would land on a row already written.
    auto backwards = [](index_t count, auto&& fn) {
        for (index_t e = count, step = 1; e > 0; e -= step, step = step % 3 + 1) fn(std::max<index_t>(0, e - step), e);
    };
    std::vector<float> rev(n, -1.0f);
    plan->forward(in.data(), rev.data(), backwards);
    EXPECT_EQ(0, std::memcmp(seq.data(), rev.data(), n * sizeof(float)));
    // Backward likewise (its work items are input rows).
    EXPECT_EQ(avgpool::detail::plan_access::pixels_backward(*plan), AVGPOOL_PERM_KERNEL != 0);
    const std::size_t ni = in.size();
    std::vector<float> bseq(ni), bpar(ni, -1.0f), bsplit(ni, -1.0f);
    plan->backward(seq.data(), bseq.data());
    plan->backward(seq.data(), bpar.data(), pool);
    plan->backward(seq.data(), bsplit.data(), uneven);
    EXPECT_EQ(0, std::memcmp(bseq.data(), bpar.data(), ni * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(bseq.data(), bsplit.data(), ni * sizeof(float)));

    for (bool nan : {true, false}) {
        avgpool::pool_attrs<2> e;  // the first output column's window lies wholly in padding
        e.kernel = {1, 2};
        e.strides = {1, 3};
        e.pads_begin = {0, 3};
        e.empty_window_nan = nan;
        auto p = avgpool::pooling<2>::create({1, 4, 2, 9}, e, avgpool::layout::channels_last);
        ASSERT_TRUE(p.ok());
        EXPECT_EQ(avgpool::detail::plan_access::pixels(*p), AVGPOOL_PIXEL_KERNEL != 0);
        ASSERT_EQ(p->geometry().output[1], 4);
        std::vector<float> x(72, 2.0f), y(static_cast<std::size_t>(p->output_size()), 5.0f);
        ASSERT_TRUE(p->forward(x.data(), y.data()).ok());
        for (index_t h = 0; h < 2; ++h)
            for (index_t c = 0; c < 4; ++c) {
                const float first = y[static_cast<std::size_t>(h * 16 + c)];  // window [-3, -2)
                if (nan) {
                    EXPECT_TRUE(std::isnan(first));
                } else {
                    EXPECT_EQ(first, 0.0f);
                }
                EXPECT_EQ(y[static_cast<std::size_t>(h * 16 + 4 + c)], 2.0f);  // window [0, 2)
            }
    }
}

// The pixel backward copies an input row (or 3-D slice) that the same outputs tap as the one
// before it (a window stride as long as the window on an outer axis): the copies equal the
// reference, and every split of the rows, which computes a row whose twin lies outside its
// range, gives the same bits.
template <std::size_t R>
void pixel_backward_repeats(const avgpool::dims<R + 2>& shape, const avgpool::pool_attrs<R>& a) {
    namespace dt = avgpool::detail;
    auto plan = avgpool::pooling<R>::create(shape, a, avgpool::layout::channels_last);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(dt::plan_access::pixels_backward(*plan), AVGPOOL_PERM_KERNEL != 0);
    const auto& d = dt::plan_access::data(*plan);
    std::mt19937_64 gen(61 + R);
    const std::vector<float> g = random_input<float>(static_cast<std::size_t>(plan->output_size()), gen);
    std::vector<float> gabs(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) gabs[i] = std::fabs(g[i]);
    const std::size_t ni = static_cast<std::size_t>(plan->input_size());
    std::vector<float> whole(ni, 1e30f), split(ni, -1e30f), ref(ni), ref_abs(ni);
    ASSERT_TRUE(plan->backward(g.data(), whole.data()).ok());
    auto uneven = [](index_t count, auto&& fn) {
        for (index_t b = 0, step = 1; b < count; b += step, step = step % 4 + 1) fn(b, std::min(count, b + step));
    };
    ASSERT_TRUE(plan->backward(g.data(), split.data(), uneven).ok());
    EXPECT_EQ(0, std::memcmp(whole.data(), split.data(), ni * sizeof(float)));
    const index_t planes = shape[0] * shape[1];
    dt::reference_backward<float, R>(d, g.data(), ref.data(), 0, planes);
    dt::reference_backward<float, R>(d, gabs.data(), ref_abs.data(), 0, planes);
    double terms = 1;  // (few_channels_suite's bound)
    for (std::size_t ax = 0; ax < R; ++ax) terms *= static_cast<double>(std::max<index_t>(1, dt::max_cover<R>(d, ax)));
    for (std::size_t i = 0; i < ni; ++i)
        ASSERT_NEAR(static_cast<double>(whole[i]), static_cast<double>(ref[i]), 2 * (terms + 2) * 0x1p-24 * static_cast<double>(ref_abs[i]))
            << "backward input " << i;
}

TEST(ChannelsLast, PixelBackwardRepeatedRows) {
    avgpool::pool_attrs<2> a2;  // rows in pairs (2 over 2), columns at stride 2
    a2.kernel = {2, 3};
    a2.strides = {2, 2};
    a2.pads_begin = {1, 1};
    a2.pads_end = {1, 2};
    pixel_backward_repeats<2>({2, 3, 9, 12}, a2);
    avgpool::pool_attrs<3> a3;  // shapes_3d_1's windows: slices in pairs, rows apart
    a3.kernel = {2, 3, 4};
    a3.strides = {2, 2, 2};
    a3.pads_begin = {1, 1, 1};
    a3.pads_end = {1, 2, 3};
    pixel_backward_repeats<3>({1, 8, 6, 7, 10}, a3);
    a3.kernel = {2, 2, 3};  // both: slices and rows in pairs
    a3.pads_begin = {0, 0, 1};
    a3.pads_end = {0, 0, 1};
    pixel_backward_repeats<3>({1, 5, 4, 6, 9}, a3);
}

// forward() dispatches channels-last plans to the kernel: its result is the kernel's, bit for
// bit, and an empty-window NaN survives.
TEST(ChannelsLast, ForwardUsesKernel) {
    std::mt19937_64 gen(17);
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.strides = {2, 2};
    a.pads_begin = {1, 1};
    a.pads_end = {1, 1};
    auto plan = avgpool::detail::plan_access::create_exact<2>({2, 17, 15, 14}, a, avgpool::layout::channels_last);
    ASSERT_TRUE(plan.ok());
    const auto& d = avgpool::detail::plan_access::data(*plan);
    ASSERT_TRUE((avgpool::detail::cl_applicable<float, 2>(d)));
    const std::vector<float> in = random_input<float>(static_cast<std::size_t>(plan->input_size()), gen);
    std::vector<float> viaplan(static_cast<std::size_t>(plan->output_size())), direct(viaplan.size());
    plan->forward(in.data(), viaplan.data());
    const avgpool::detail::cl_kernel<float, 2> kernel(d, pool_op::average);
    kernel.run(in.data(), direct.data(), 0, kernel.items());
    EXPECT_EQ(0, std::memcmp(viaplan.data(), direct.data(), viaplan.size() * sizeof(float)));

    avgpool::pool_attrs<1> e;  // exclude-pad window wholly in padding: NaN under nGraph rules
    e.kernel = {2};
    e.pads_begin = {3};
    e.empty_window_nan = true;
    auto nan_plan = avgpool::detail::plan_access::create_exact<1>({1, 5, 4}, e, avgpool::layout::channels_last);
    ASSERT_TRUE(nan_plan.ok());
    std::vector<float> x(20, 1.0f), y(static_cast<std::size_t>(nan_plan->output_size()));
    nan_plan->forward(x.data(), y.data());
    for (index_t c = 0; c < 5; ++c) {
        EXPECT_TRUE(std::isnan(y[static_cast<std::size_t>(c)]));       // window [-3, -2)
        EXPECT_EQ(y[static_cast<std::size_t>(2 * 5 + c)], 1.0f);       // window [-1, 1)
    }
}

// Results do not depend on the executor: a thread pool and a callable cutting the work into
// uneven pieces give the sequential result bit for bit (N = 1: rows are split).
template <class T, std::size_t R>
void executor_case(const avgpool::dims<R + 2>& shape, const avgpool::pool_attrs<R>& a, avgpool::thread_pool& pool) {
    std::mt19937_64 gen(23);
    auto plan = avgpool::detail::plan_access::create_exact<R>(shape, a, avgpool::layout::channels_last);
    ASSERT_TRUE(plan.ok());
    ASSERT_TRUE((avgpool::detail::cl_applicable<T, R>(avgpool::detail::plan_access::data(*plan))));
    const std::vector<T> in = random_input<T>(static_cast<std::size_t>(plan->input_size()), gen);
    const std::size_t n = static_cast<std::size_t>(plan->output_size());
    std::vector<T> seq(n), par(n, T(-1)), split(n, T(-1));
    plan->forward(in.data(), seq.data());
    plan->forward(in.data(), par.data(), pool);
    index_t calls = 0;
    auto uneven = [&calls](index_t count, auto&& fn) {
        for (index_t b = 0, step = 1; b < count; b += step, step = step % 3 + 1) {
            fn(b, std::min(count, b + step));
            ++calls;
        }
    };
    plan->forward(in.data(), split.data(), uneven);
    EXPECT_GT(calls, 1);
    EXPECT_EQ(0, std::memcmp(seq.data(), par.data(), n * sizeof(T)));
    EXPECT_EQ(0, std::memcmp(seq.data(), split.data(), n * sizeof(T)));
}

TEST(ChannelsLast, ExecutorsGiveIdenticalResults) {
    avgpool::thread_pool pool(3);
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.pads_begin = a.pads_end = {1, 1};
    executor_case<float, 2>({1, 33, 13, 11}, a, pool);
    executor_case<double, 2>({1, 3, 13, 11}, a, pool);
    avgpool::pool_attrs<3> b;
    b.kernel = {2, 3, 3};
    b.strides = {2, 2, 2};
    executor_case<float, 3>({2, 9, 7, 9, 11}, b, pool);
    avgpool::pool_attrs<1> c;
    c.kernel = {5};
    executor_case<float, 1>({5, 7, 40}, c, pool);
}

// 16-bit storage through a plan's channels-last kernel (rows one at a time): the float result
// on the same values (rows in pairs) rounded once, alike for row ranges of 1-3.
template <class H>
void half_pairs(const avgpool::pooling<2>& plan, std::mt19937_64& gen) {
    const std::vector<float> x = random_input<float>(static_cast<std::size_t>(plan.input_size()), gen);
    std::vector<H> xh(x.size());
    std::vector<float> back(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        xh[i] = H(x[i]);
        back[i] = static_cast<float>(xh[i]);
    }
    const std::size_t n = static_cast<std::size_t>(plan.output_size());
    std::vector<float> f(n);
    std::vector<H> seq(n), split(n);
    ASSERT_TRUE(plan.forward(back.data(), f.data()).ok());
    ASSERT_TRUE(plan.forward(xh.data(), seq.data()).ok());
    auto uneven = [](index_t count, auto&& fn) {
        for (index_t b = 0, step = 1; b < count; b += step, step = step % 3 + 1) fn(b, std::min(count, b + step));
    };
    ASSERT_TRUE(plan.forward(xh.data(), split.data(), uneven).ok());
    for (std::size_t i = 0; i < n; ++i) {
        const H want(f[i]);
        ASSERT_EQ(0, std::memcmp(&seq[i], &want, sizeof want)) << "16-bit output " << i;
    }
    EXPECT_EQ(0, std::memcmp(seq.data(), split.data(), n * sizeof(H)));
}

TEST(ChannelsLast, PairedRowsMatchSingleRows) {
    // 3x3 stride 1 over 4+ vectors of channels: run() takes two output rows at a time where
    // their windows are whole (AVX-512 builds, float and double storage), each output with the
    // bits it gets alone; the uneven executor of executor_case runs ranges of 1-3 rows, so
    // pairs start at every parity and rows at a range's end run alone.
    avgpool::thread_pool pool(3);
    const bool wide = sizeof(float) * avgpool::detail::vec<float>::width == 64;
    std::mt19937_64 gen(59);
    struct pair_case {
        avgpool::dims<4> shape;
        index_t pad_top, pad_bottom;
        avgpool::divisor_type divisor;
        avgpool::rounding_type rounding;
        index_t divisor_override;
    };
    const pair_case cases[] = {
        {{2, 96, 13, 11}, 1, 1, avgpool::divisor_type::exclude_pad, avgpool::rounding_type::floor, 0},
        {{1, 288, 9, 7}, 1, 1, avgpool::divisor_type::include_pad, avgpool::rounding_type::floor, 0},
        {{1, 2048, 6, 5}, 0, 2, avgpool::divisor_type::exclude_pad, avgpool::rounding_type::ceil, 0},  // blocks
        {{3, 70, 8, 9}, 2, 0, avgpool::divisor_type::full_kernel, avgpool::rounding_type::floor, 0},
        {{1, 65, 10, 4}, 1, 1, avgpool::divisor_type::exclude_pad, avgpool::rounding_type::floor, 7},
    };
    for (const pair_case& c : cases) {
        avgpool::pool_attrs<2> a;
        a.kernel = {3, 3};
        a.pads_begin = {c.pad_top, 1};
        a.pads_end = {c.pad_bottom, 1};
        a.divisor = c.divisor;
        a.rounding = c.rounding;
        a.divisor_override = c.divisor_override;
        auto plan = avgpool::detail::plan_access::create_exact<2>(c.shape, a, avgpool::layout::channels_last);
        ASSERT_TRUE(plan.ok());
        const auto& d = avgpool::detail::plan_access::data(*plan);
        ASSERT_TRUE((avgpool::detail::cl_applicable<float, 2>(d)));
        const std::string trace = "C = " + std::to_string(c.shape[1]) + ", H = " + std::to_string(c.shape[2]);
        EXPECT_EQ(wide, (avgpool::detail::cl_kernel<float, 2>(d, pool_op::average).pairs_rows())) << trace;
        EXPECT_TRUE((compare_plan<float, 2>(*plan, gen, trace)));
        EXPECT_TRUE((compare_plan<double, 2>(*plan, gen, trace + ", double")));
        executor_case<float, 2>(c.shape, a, pool);
        executor_case<double, 2>(c.shape, a, pool);
        // (16-bit storage does not pair: the same ring one row at a time.)
        EXPECT_FALSE((avgpool::detail::cl_kernel<float, 2, avgpool::bfloat16>(d, pool_op::average).pairs_rows())) << trace;
        half_pairs<avgpool::bfloat16>(*plan, gen);
        half_pairs<avgpool::float16>(*plan, gen);
    }
    // Not at stride 2 down the rows, nor under 4 vectors of channels.
    avgpool::pool_attrs<2> s2;
    s2.kernel = {3, 3};
    s2.strides = {2, 1};
    auto p2 = avgpool::detail::plan_access::create_exact<2>({1, 96, 9, 9}, s2, avgpool::layout::channels_last);
    ASSERT_TRUE(p2.ok());
    EXPECT_FALSE((avgpool::detail::cl_kernel<float, 2>(avgpool::detail::plan_access::data(*p2), pool_op::average).pairs_rows()));
    avgpool::pool_attrs<2> s1;
    s1.kernel = {3, 3};
    auto p3 = avgpool::detail::plan_access::create_exact<2>({1, 48, 9, 9}, s1, avgpool::layout::channels_last);
    ASSERT_TRUE(p3.ok());
    EXPECT_FALSE((avgpool::detail::cl_kernel<float, 2>(avgpool::detail::plan_access::data(*p3), pool_op::average).pairs_rows()));
}

// 3-D pools whose first-axis windows overlap over slices larger than L2's share run their
// output rows second axis first (cl_kernel::columns_first): the same outputs as the
// reference, the same bits whatever the executor (pieces of rows across images included).
TEST(ChannelsLast, LargeSlicesRunByColumns) {
    avgpool::pool_attrs<3> a;  // benchdnn's shapes_3d_4 windows
    a.kernel = {4, 2, 3};
    a.strides = {2, 2, 2};
    a.pads_begin = {1, 1, 1};
    a.pads_end = {3, 1, 2};
    const avgpool::dims<5> shape{2, 17, 9, 40, 64};  // 4 slices of 40 x 64 x 17 floats: 680 KiB
    auto plan = avgpool::detail::plan_access::create_exact<3>(shape, a, avgpool::layout::channels_last);
    ASSERT_TRUE(plan.ok());
    const auto& d = avgpool::detail::plan_access::data(*plan);
    ASSERT_TRUE((avgpool::detail::cl_applicable<float, 3>(d)));
    EXPECT_TRUE((avgpool::detail::cl_kernel<float, 3>(d, pool_op::average).by_columns()));
    std::mt19937_64 gen(41);
    EXPECT_TRUE((compare_plan<float, 3>(*plan, gen, "shapes_3d_4 windows")));
    EXPECT_TRUE((compare_plan<double, 3>(*plan, gen, "shapes_3d_4 windows, double")));
    avgpool::thread_pool pool(3);
    executor_case<float, 3>(shape, a, pool);
    avgpool::pool_attrs<3> dil = a;  // dilated first axis: windows 1, 3, 5, 7 apart still overlap
    dil.dilations = {2, 1, 1};
    auto dplan = avgpool::detail::plan_access::create_exact<3>({1, 16, 12, 40, 64}, dil, avgpool::layout::channels_last);
    ASSERT_TRUE(dplan.ok());
    EXPECT_TRUE((avgpool::detail::cl_kernel<float, 3>(avgpool::detail::plan_access::data(*dplan), pool_op::sum).by_columns()));
    EXPECT_TRUE((compare_plan<float, 3>(*dplan, gen, "dilated first axis")));

    // Not where the second axis's windows overlap, nor where the slices are small, nor where
    // first-axis windows do not overlap.
    auto by_columns = [](const avgpool::dims<5>& s, const avgpool::pool_attrs<3>& at) {
        auto p = avgpool::detail::plan_access::create_exact<3>(s, at, avgpool::layout::channels_last);
        return p.ok() && avgpool::detail::cl_kernel<float, 3>(avgpool::detail::plan_access::data(*p), pool_op::average).by_columns();
    };
    avgpool::pool_attrs<3> h3 = a;
    h3.kernel = {4, 3, 3};
    EXPECT_FALSE(by_columns(shape, h3));
    EXPECT_FALSE(by_columns({1, 16, 9, 10, 16}, a));
    avgpool::pool_attrs<3> d2 = a;
    d2.kernel = {2, 2, 3};
    d2.pads_end = {1, 1, 2};
    EXPECT_FALSE(by_columns(shape, d2));
}

}  // namespace
