// The fast channels-first kernel against the reference kernel (the oracle), within the accuracy
// bound of DESIGN.md section 3, on randomized geometries: odd widths, strides 1-5, kernels 1-13,
// dilations, every pad mode and divisor, ranks 1-3, rows wide enough to need several tiles.
#include <gtest/gtest.h>

#include <avgpool/avgpool.hpp>

#include "support/geometry.hpp"
#include "support/random.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using avgpool::index_t;
using avgpool_test::describe;
using avgpool_test::random_attrs;
using avgpool_test::sweep;

template <class T>
constexpr double unit_roundoff() {
    return sizeof(T) == 4 ? 0x1p-24 : 0x1p-53;
}

enum class kernel_kind { rows, flat, same, pair };

// Runs a fast kernel and the reference through the plan's own data and compares every output.
template <class T, std::size_t R>
void compare(const avgpool::dims<R + 2>& shape, const avgpool::pool_attrs<R>& a, std::mt19937_64& gen,
             const std::string& trace, kernel_kind kind = kernel_kind::rows) {
    SCOPED_TRACE(trace);
    auto plan = avgpool::pooling<R>::create(shape, a);
    if (!plan) return;  // geometry rejected: covered elsewhere
    const auto& d = avgpool::detail::plan_access::data(*plan);
    if (kind == kernel_kind::rows) {
        ASSERT_TRUE((avgpool::detail::cf_applicable<T, R>(d))) << "expected the row kernel";
    } else if (kind == kernel_kind::flat) {
        if (d.global) return;  // one window covering the input: the global path, tested below
        ASSERT_TRUE((avgpool::detail::flat_applicable<T, R>(d))) << "expected the block kernel";
    } else if (kind == kernel_kind::same) {
        if (d.global) return;
        ASSERT_TRUE((avgpool::detail::same_applicable<T, R>(d))) << "expected the same-grid kernel";
    } else {
        ASSERT_TRUE((avgpool::detail::pair_applicable<T, R>(d))) << "expected the 2x2 stride-2 kernel";
    }
    avgpool_test::uniform<double> dist(-4.0, 4.0);
    std::vector<T> in(static_cast<std::size_t>(plan->input_size()));
    for (T& x : in) x = static_cast<T>(dist(gen));
    std::vector<T> absin(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) absin[i] = std::fabs(in[i]);
    const std::size_t n = static_cast<std::size_t>(plan->output_size());
    const index_t items = shape[0] * shape[1];
    for (auto op : {avgpool::detail::pool_op::average, avgpool::detail::pool_op::sum}) {
        std::vector<T> fast(n, T(1e30)), ref(n), ref_abs(n), ref_abs_sum(n);
        // Few planes are split into blocks of outer output rows (run_rows): the same bits as
        // run() for any cut, the rows after the cut computed first so that a spill past a
        // block's end shows.
        auto expect_split_rows = [&](const auto& k) {
            index_t Ho = 1;  // outer output rows per plane
            for (std::size_t ax = 0; ax + 1 < R; ++ax) Ho *= plan->output_shape()[2 + ax];
            std::vector<T> parts(n, T(1e30));
            for (index_t item = 0; item < items; ++item) {
                const index_t cut = std::uniform_int_distribution<index_t>(0, Ho)(gen);
                k.run_rows(in.data(), parts.data(), item, cut, Ho);
                k.run_rows(in.data(), parts.data(), item, 0, cut);
            }
            ASSERT_EQ(0, std::memcmp(fast.data(), parts.data(), n * sizeof(T))) << "run_rows split";
        };
        if (kind == kernel_kind::rows) {
            const avgpool::detail::cf_kernel<T, R> k(d, op);
            k.run(in.data(), fast.data(), 0, items);
            // In two calls, the later planes first (the slice path sums slices across planes),
            // and by rows: the same bits.
            const index_t cut = std::uniform_int_distribution<index_t>(0, items)(gen);
            std::vector<T> parts(n, T(1e30));
            k.run(in.data(), parts.data(), cut, items);
            k.run(in.data(), parts.data(), 0, cut);
            ASSERT_EQ(0, std::memcmp(fast.data(), parts.data(), n * sizeof(T))) << "two calls cut at " << cut;
            expect_split_rows(k);
        } else if (kind == kernel_kind::flat) {
            const avgpool::detail::flat_kernel<T, R> k(d, op);
            k.run(in.data(), fast.data(), 0, items);
            expect_split_rows(k);
            if constexpr (R == 1) {
                // 1-D rows: exactly the scalar sum of the padded row's taps in order (padding
                // adds +0), divided by the plan's divisor grid, plus 0; for any cut into two
                // calls, the later planes first (a spill past a call's last plane would
                // overwrite finished outputs); and with -0, NaN and infinities among the inputs.
                const auto& g = d.geometry;
                const index_t W = g.input[0], Wo = g.output[0];
                const T* div = d.template flat_divisor<T>();
                auto expect_in_order = [&](const std::vector<T>& x, const std::vector<T>& y, const char* what) {
                    for (index_t item = 0; item < items; ++item) {
                        for (index_t o = 0; o < Wo; ++o) {
                            T acc = T(0);
                            for (index_t j = 0; j < g.kernel[0]; ++j) {
                                const index_t c = o * g.strides[0] + j - g.pads_begin[0];
                                const T v = c >= 0 && c < W ? x[static_cast<std::size_t>(item * W + c)] : T(0);
                                acc = j == 0 ? v : acc + v;
                            }
                            if (op == avgpool::detail::pool_op::average) acc = acc / div[o];
                            acc = acc + T(0);
                            const T got = y[static_cast<std::size_t>(item * Wo + o)];
                            ASSERT_TRUE(std::memcmp(&acc, &got, sizeof(T)) == 0 || (std::isnan(acc) && std::isnan(got)))
                                << what << ": plane " << item << " output " << o << ": " << got
                                << " against the in-order sum " << acc;
                        }
                    }
                };
                expect_in_order(in, fast, "whole");
                if (::testing::Test::HasFatalFailure()) return;
                const index_t cut = std::uniform_int_distribution<index_t>(0, items)(gen);
                std::vector<T> parts(n, T(1e30));
                k.run(in.data(), parts.data(), cut, items);
                k.run(in.data(), parts.data(), 0, cut);
                ASSERT_EQ(0, std::memcmp(fast.data(), parts.data(), n * sizeof(T))) << "two calls cut at " << cut;
                std::vector<T> odd = in;
                const T specials[] = {T(-0.0), std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                                      -std::numeric_limits<T>::infinity(), T(-0.0), T(-0.0)};
                for (std::size_t i = 0; i < odd.size(); i += 7) odd[i] = specials[(i / 7) % 6];
                std::vector<T> out_odd(n, T(1e30));
                k.run(odd.data(), out_odd.data(), 0, items);
                expect_in_order(odd, out_odd, "special values");
            }
        } else if (kind == kernel_kind::same) {
            const avgpool::detail::same_kernel<T, R> k(d, op);
            k.run(in.data(), fast.data(), 0, items);
            if (k.splits_rows()) expect_split_rows(k);
        } else {
            // In two calls, the later planes first: a spill from the first half into the
            // second (a race between threads) would overwrite finished outputs.
            const avgpool::detail::pair_kernel<T, R> k(d, op);
            k.run(in.data(), fast.data(), items / 2, items);
            k.run(in.data(), fast.data(), 0, items / 2);
            expect_split_rows(k);
        }
        if (::testing::Test::HasFatalFailure()) return;
        avgpool::detail::reference_pool<T, R>(d, in.data(), ref.data(), op, 0, items);
        // Magnitude for the bound: the same window statistic of |x| (sum of |x| over the taps,
        // divided like the output), from the reference kernel.
        avgpool::detail::reference_pool<T, R>(d, absin.data(), ref_abs.data(), op, 0, items);
        double ksum = 0;
        for (std::size_t ax = 0; ax < R; ++ax) ksum += static_cast<double>(a.kernel[ax]);
        for (std::size_t i = 0; i < n; ++i) {
            if (std::isnan(ref[i])) {
                ASSERT_TRUE(std::isnan(fast[i])) << "output " << i;
                continue;
            }
            const double bound = 4 * ksum * unit_roundoff<T>() * static_cast<double>(ref_abs[i]) * (1 + 1e-6) +
                                 std::numeric_limits<T>::denorm_min();
            ASSERT_LE(std::fabs(static_cast<double>(fast[i]) - static_cast<double>(ref[i])), bound)
                << "output " << i << ": fast " << fast[i] << " reference " << ref[i]
                << (op == avgpool::detail::pool_op::sum ? " (sum)" : " (average)");
        }
    }
}

template <class T, std::size_t R>
void random_suite(int cases, index_t max_extent, index_t max_last) {
    for (int c = 0; c < cases; ++c) {
        const std::uint64_t seed = 1000 * R + static_cast<std::uint64_t>(c) + (sizeof(T) == 4 ? 0 : 500000);
        std::mt19937_64 gen(seed);
        auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
        avgpool::dims<R + 2> shape{};
        shape[0] = pick(1, 2);
        shape[1] = pick(1, 3);
        avgpool::dims<R> spatial{};
        for (std::size_t ax = 0; ax < R; ++ax) spatial[ax] = pick(1, ax + 1 == R ? max_last : max_extent);
        for (std::size_t ax = 0; ax < R; ++ax) shape[ax + 2] = spatial[ax];
        const auto a = random_attrs<R>(gen, spatial);
        compare<T, R>(shape, a, gen, describe<R>(shape, a, "seed " + std::to_string(seed)));
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(FastKernel, Rank1MatchesReference) {
    random_suite<float, 1>(400, 0, 300);
    random_suite<double, 1>(150, 0, 300);
}
TEST(FastKernel, Rank2MatchesReference) {
    random_suite<float, 2>(300, 20, 70);
    random_suite<double, 2>(100, 20, 70);
}
TEST(FastKernel, Rank3MatchesReference) {
    random_suite<float, 3>(150, 9, 20);
    random_suite<double, 3>(60, 9, 20);
}

// Windows covering every axis but the first whole (i3d's 2x7x7 on 8x7x7): each output is one
// contiguous run of slices. Kernel = extent + pads on those axes (so one output there), any
// first-axis attributes but dilation, every divisor mode; slices of up to 2400 elements (more
// than one 1024-element summation block). Returns how many took the slice path (each slice
// summed once, L slices at a time across planes).
template <class T, std::size_t R>
int whole_trailing_suite(int cases) {
    int slices = 0;
    for (int c = 0; c < cases; ++c) {
        std::mt19937_64 gen(77000 + 100 * R + static_cast<std::uint64_t>(c));
        auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
        avgpool::dims<R> spatial{};
        spatial[0] = pick(1, 12);
        for (std::size_t ax = 1; ax < R; ++ax) spatial[ax] = pick(1, c % 4 == 0 ? 48 : 9);
        auto a = random_attrs<R>(gen, spatial);
        a.auto_pad = avgpool::pad_type::explicit_pads;
        a.dilations[0] = 1;
        for (std::size_t ax = 1; ax < R; ++ax) {
            a.pads_begin[ax] = pick(0, 2);
            a.pads_end[ax] = pick(0, 2);
            a.kernel[ax] = spatial[ax] + a.pads_begin[ax] + a.pads_end[ax];
            a.strides[ax] = pick(1, 3);
            a.dilations[ax] = 1;
        }
        avgpool::dims<R + 2> shape{};
        shape[0] = 1;
        shape[1] = pick(1, c % 3 == 0 ? 40 : 3);
        for (std::size_t ax = 0; ax < R; ++ax) shape[ax + 2] = spatial[ax];
        auto plan = avgpool::pooling<R>::create(shape, a);
        if (plan && avgpool::detail::cf_slices_geometry<T, R>(avgpool::detail::plan_access::data(*plan))) ++slices;
        compare<T, R>(shape, a, gen, describe<R>(shape, a, "whole trailing " + std::to_string(c)));
        if (::testing::Test::HasFatalFailure()) return slices;
    }
    return slices;
}

TEST(FastKernel, WholeTrailingAxesMatchReference) {
    const int s2 = whole_trailing_suite<float, 2>(150);
    const int s3 = whole_trailing_suite<float, 3>(150);
    const int d3 = whole_trailing_suite<double, 3>(60);
    std::printf("[          ] %d, %d and %d plans took the slice path\n", s2, s3, d3);
    if (avgpool::detail::vec<float>::width < 2) {  // (no SIMD: a build without xsimd)
        EXPECT_EQ(s2 + s3 + d3, 0);
        return;
    }
    // (Slices of at least a vector: fewer with 16-float vectors.)
    EXPECT_GT(s2, 5);
    EXPECT_GT(s3, 15);
    EXPECT_GT(d3, 5);
}

// I3D's head (2x7x7 on 8x7x7 slices) through the public API takes the slice path: the bits of
// cf_kernel run directly, sequential, on two threads, and with few planes (split by rows).
TEST(FastKernel, SlicePathThroughTheApi) {
    namespace dt = avgpool::detail;
    if (dt::vec<float>::width < 2) GTEST_SKIP() << "the slice path sums vectors of slices (this build has no SIMD)";
    avgpool::pool_attrs<3> a;
    a.kernel = {2, 7, 7};
    avgpool::thread_pool pool(2);
    for (index_t C : {1, 2, 40}) {
        auto plan = avgpool::pooling<3>::create({1, C, 8, 7, 7}, a);
        ASSERT_TRUE(plan);
        const auto& d = dt::plan_access::data(*plan);
        ASSERT_TRUE((dt::cf_slices_geometry<float, 3>(d))) << C;
        EXPECT_FALSE((dt::perm_applicable<float, 3>(d))) << C;
        std::vector<float> in(static_cast<std::size_t>(plan->input_size()));
        for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(static_cast<double>(i % 29) * 0.37 - 5.0);
        const std::size_t n = static_cast<std::size_t>(plan->output_size());
        std::vector<float> direct(n, 1.0f), api(n, 2.0f), threaded(n, 3.0f), ref(n);
        dt::cf_kernel<float, 3>(d, dt::pool_op::average).run(in.data(), direct.data(), 0, C);
        ASSERT_TRUE(plan->forward(in.data(), api.data()).ok());
        ASSERT_TRUE(plan->forward(in.data(), threaded.data(), pool).ok());
        EXPECT_EQ(0, std::memcmp(api.data(), direct.data(), n * sizeof(float))) << "C " << C;
        EXPECT_EQ(0, std::memcmp(threaded.data(), direct.data(), n * sizeof(float))) << "C " << C;
        dt::reference_pool<float, 3>(d, in.data(), ref.data(), dt::pool_op::average, 0, C);
        for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(api[i], ref[i], 1e-5) << "C " << C << " output " << i;
    }
}

// Rows longer than one buffer tile (2048 elements) and every stride 1-5, kernels 1-13.
TEST(FastKernel, WideRowsSpanSeveralTiles) {
    std::mt19937_64 gen(7);
    for (index_t s = 1; s <= 5; ++s) {
        for (index_t k : {1, 2, 3, 7, 13}) {
            avgpool::pool_attrs<1> a;
            a.kernel = {k};
            a.strides = {s};
            a.pads_begin = {k / 2};
            a.pads_end = {k / 2};
            a.rounding = avgpool::rounding_type::ceil;
            a.divisor = avgpool::divisor_type::include_pad;
            const avgpool::dims<3> shape{1, 2, 5000 + 37 * s + k};
            compare<float, 1>(shape, a, gen, "wide s " + std::to_string(s) + " k " + std::to_string(k));
            a.dilations = {2};
            compare<double, 1>(shape, a, gen, "wide dilated s " + std::to_string(s) + " k " + std::to_string(k));
        }
    }
}

// Long kernels at stride 1 sum their rows by blocks (cf_blocks_geometry), from the fewest taps
// that do to kernels past cf_buffer (which ran the reference: 1x4x20000 with k = 1500 took
// 8900x a memcpy), also dilated, with any pads, rounding and divisor; R = 1 and 2, float and
// double.
TEST(FastKernel, LongKernelsSumByBlocks) {
    namespace dt = avgpool::detail;
    std::mt19937_64 gen(1500);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    int whole = 0, dilated = 0;
    for (int c = 0; c < avgpool_test::sweep(36); ++c) {
        const index_t dil = c % 4 == 3 ? pick(2, 5) : 1;  // dilated: per-residue rows
        const index_t kmin = dil == 1 ? dt::cf_block_min_taps<float>() : dt::cf_block_min_dilated_taps<float>();
        const index_t k = c < 3 ? kmin + c : pick(kmin, c % 3 == 0 ? 2 * dt::cf_buffer / dil : 300);
        // Every third row past the stack buffer (whole, in scratch).
        const index_t W = c % 3 == 0 ? pick(dt::cf_buffer + 1, (k - 1) * dil + 2500)
                                     : pick(std::max<index_t>(1, (k - 1) * dil - 30), (k - 1) * dil + 300);
        const index_t pb = pick(0, std::min<index_t>(k - 1, 40)), pe = pick(0, k - 1);
        const auto rounding = static_cast<avgpool::rounding_type>(pick(0, 2));
        const auto divisor = static_cast<avgpool::divisor_type>(pick(0, 2));
        const std::string trace = "case " + std::to_string(c) + ": k " + std::to_string(k) + " dilation " +
                                  std::to_string(dil) + " W " + std::to_string(W) + " pads " + std::to_string(pb) + "/" +
                                  std::to_string(pe);
        avgpool::pool_attrs<1> a;
        a.kernel = {k};
        a.dilations = {dil};
        a.pads_begin = {pb};
        a.pads_end = {pe};
        a.rounding = rounding;
        a.divisor = divisor;
        const avgpool::dims<3> shape{1, pick(1, 3), W};
        auto plan = avgpool::pooling<1>::create(shape, a);
        if (!plan) continue;
        ASSERT_TRUE((dt::cf_blocks_geometry<float, 1>(dt::plan_access::data(*plan)))) << trace;
        whole += plan->geometry().output[0] + (k - 1) * dil > dt::cf_buffer ? 1 : 0;
        dilated += dil > 1 ? 1 : 0;
        compare<float, 1>(shape, a, gen, trace);
        compare<double, 1>(shape, a, gen, trace);
        avgpool::pool_attrs<2> b;
        b.kernel = {pick(1, 3), k};
        b.strides = {pick(1, 2), 1};
        b.dilations = {1, dil};
        b.pads_begin = {0, pb};
        b.pads_end = {pick(0, b.kernel[0] - 1), pe};
        b.rounding = rounding;
        b.divisor = divisor;
        compare<float, 2>({1, pick(1, 2), pick(1, 6), W}, b, gen, trace + " (2-D)");
        if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_GE(whole, 3);  // rows past the stack buffer, in scratch
    EXPECT_GE(dilated, 2);
}

// Windows past cf_buffer / 2 at strides of 3 or more (the row whole in scratch, long windows
// summed in vectors) and outer windows past the kernel's on-stack list of input rows (a
// scratch list): both ran the reference (1x16x100000 with k = 2000, stride 1000, took 13x a
// memcpy; a 1200x1 window on 1300x64 planes 1000x).
TEST(FastKernel, WholeRowsAndLongOuterWindows) {
    namespace dt = avgpool::detail;
    std::mt19937_64 gen(2000);
    for (index_t s : {3, 7, 1000}) {
        for (index_t dil : {1, 2}) {
            avgpool::pool_attrs<1> a;
            a.kernel = {s == 1000 ? 2000 : 1100};  // past cf_buffer / 2
            a.strides = {s};
            a.dilations = {dil};
            a.pads_begin = {s == 3 ? 5 : 0};
            a.pads_end = {s == 3 ? 301 : 0};
            a.rounding = avgpool::rounding_type::ceil;
            const avgpool::dims<3> shape{1, 2, s == 1000 ? 30000 : 5000};
            const std::string t = "stride " + std::to_string(s) + " dilation " + std::to_string(dil);
            auto plan = avgpool::pooling<1>::create(shape, a);
            ASSERT_TRUE(plan.ok()) << t;
            ASSERT_TRUE((dt::cf_whole_row<float, 1>(dt::plan_access::data(*plan)))) << t;
            compare<float, 1>(shape, a, gen, t);
            compare<double, 1>(shape, a, gen, t);
        }
    }
    for (index_t kh : {1025, 1200}) {
        avgpool::pool_attrs<2> a;
        a.kernel = {kh, 3};
        a.strides = {5, 1};
        a.pads_begin = {0, 1};
        a.pads_end = {3, 1};
        const avgpool::dims<4> shape{1, 1, 1300, 24};
        auto plan = avgpool::pooling<2>::create(shape, a);
        ASSERT_TRUE(plan.ok());
        ASSERT_GT(dt::outer_taps<2>(plan->geometry()), dt::cf_max_outer_rows);
        compare<float, 2>(shape, a, gen, "outer window " + std::to_string(kh));
        avgpool::pool_attrs<3> b;
        b.kernel = {2, kh / 2 + 1, 3};
        const avgpool::dims<5> shape3{1, 1, 2, 700, 10};
        compare<double, 3>(shape3, b, gen, "3-D outer windows " + std::to_string(kh));
    }
}

// The block kernel: stride 1 or 2 and dilation 1 on the last axis, k <= 5, any width, pads and
// rounding; random outer-axis geometry (R = 2, 3); enough rows and planes to cross its row
// blocks; R = 3 includes 8 and 16 wide planes at stride 2 (one vector a row).
template <class T, std::size_t R>
void flat_suite(int cases) {
    int ran = 0;
    for (int c = 0; c < cases; ++c) {
        const std::uint64_t seed = 77000 + 100 * R + static_cast<std::uint64_t>(c) + (sizeof(T) == 4 ? 0 : 50000);
        std::mt19937_64 gen(seed);
        auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
        avgpool::pool_attrs<R> a;
        const index_t k = pick(1, 5);
        a.kernel[R - 1] = k;
        a.strides[R - 1] = pick(1, 2);
        a.pads_begin[R - 1] = pick(0, k + 1);
        a.pads_end[R - 1] = pick(0, k + 1);
        avgpool::dims<R + 2> shape{};
        shape[R + 1] = pick(1, 140);
        if constexpr (R >= 2) {
            shape[0] = pick(1, 2);
            shape[1] = pick(1, 3);
            for (std::size_t ax = 0; ax + 1 < R; ++ax) {
                // R = 2: up to 150 rows, several blocks when W is large; R = 3: up to 20 x 20.
                shape[2 + ax] = pick(1, R == 2 ? 150 : 20);
                a.kernel[ax] = pick(1, std::min<index_t>(6, shape[2 + ax] + 2));
                a.strides[ax] = pick(1, 3);
                a.dilations[ax] = pick(1, 2);
                a.pads_begin[ax] = pick(0, a.kernel[ax]);
                a.pads_end[ax] = pick(0, a.kernel[ax]);
            }
        } else {
            shape[0] = pick(1, 3);
            shape[1] = pick(1, 200);  // planes are the rows: several blocks
        }
        a.rounding = static_cast<avgpool::rounding_type>(pick(0, 2));
        a.auto_pad = pick(0, 3) == 0 ? static_cast<avgpool::pad_type>(pick(1, 3)) : avgpool::pad_type::explicit_pads;
        a.divisor = static_cast<avgpool::divisor_type>(pick(0, 3));
        a.divisor_override = pick(0, 5) == 0 ? pick(1, 30) : 0;
        a.empty_window_nan = pick(0, 1) == 1;
        compare<T, R>(shape, a, gen, describe<R>(shape, a, "seed " + std::to_string(seed)), kernel_kind::flat);
        if (::testing::Test::HasFatalFailure()) return;
        ++ran;
    }
    EXPECT_GT(ran, cases / 2);  // most draws are valid geometries
}

TEST(FlatKernel, Rank1MatchesReference) {
    flat_suite<float, 1>(sweep(300));
    flat_suite<double, 1>(sweep(100));
}
TEST(FlatKernel, Rank2MatchesReference) {
    flat_suite<float, 2>(sweep(300));
    flat_suite<double, 2>(sweep(100));
}
TEST(FlatKernel, Rank3MatchesReference) {
    flat_suite<float, 3>(sweep(200));
    flat_suite<double, 3>(sweep(60));
}

// backward() through the same-grid kernel's transpose against the reference backward, with
// the bound of the forward sum applied to the scaled gradients (sum of |g| / divisor).
template <class T>
void compare_backward(const avgpool::dims<4>& shape, const avgpool::pool_attrs<2>& a, std::mt19937_64& gen,
                      const std::string& trace) {
    SCOPED_TRACE(trace + " (backward)");
    auto plan = avgpool::pooling<2>::create(shape, a);
    ASSERT_TRUE(plan);
    const auto& d = avgpool::detail::plan_access::data(*plan);
    avgpool_test::uniform<double> dist(-4.0, 4.0);
    std::vector<T> g(static_cast<std::size_t>(plan->output_size())), absg(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) {
        g[i] = static_cast<T>(dist(gen));
        absg[i] = std::fabs(g[i]);
    }
    const std::size_t n = static_cast<std::size_t>(plan->input_size());
    std::vector<T> fast(n, T(1e30)), ref(n), ref_abs(n);
    const index_t items = shape[0] * shape[1];
    avgpool::detail::same_kernel<T, 2>(d, avgpool::detail::pool_op::sum, true).run_backward(g.data(), fast.data(), 0, items);
    avgpool::detail::reference_backward<T, 2>(d, g.data(), ref.data(), 0, items);
    avgpool::detail::reference_backward<T, 2>(d, absg.data(), ref_abs.data(), 0, items);
    const double ksum = static_cast<double>(a.kernel[0] + a.kernel[1]);
    for (std::size_t i = 0; i < n; ++i) {
        const double bound = 4 * ksum * unit_roundoff<T>() * static_cast<double>(ref_abs[i]) * (1 + 1e-6) +
                             std::numeric_limits<T>::denorm_min();
        ASSERT_LE(std::fabs(static_cast<double>(fast[i]) - static_cast<double>(ref[i])), bound)
            << "input " << i << ": fast " << fast[i] << " reference " << ref[i];
    }
}

// The same-grid kernel (2-D, stride 1, output grid = input grid): every kernel size 1-7 on
// both axes, every split of the padding, planes from 1x1 to wider than one mask segment.
template <class T>
void same_suite(int cases) {
    int ran = 0;
    for (int c = 0; c < cases; ++c) {
        const std::uint64_t seed = 91000 + static_cast<std::uint64_t>(c) + (sizeof(T) == 4 ? 0 : 50000);
        std::mt19937_64 gen(seed);
        auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
        avgpool::pool_attrs<2> a;
        avgpool::dims<4> shape{pick(1, 2), pick(1, 5), 1, 1};
        const bool wide = pick(0, 4) == 0;  // rows too long for a whole-plane mask: per-row
        shape[2] = pick(1, wide ? 6 : 40);
        shape[3] = wide ? pick(200, 1200) : pick(1, 40);
        for (std::size_t ax = 0; ax < 2; ++ax) {
            a.kernel[ax] = pick(1, 7);
            if (pick(0, 2) == 0) {
                a.auto_pad = pick(0, 1) ? avgpool::pad_type::same_upper : avgpool::pad_type::same_lower;
            }
            a.pads_begin[ax] = pick(0, a.kernel[ax] - 1);
            a.pads_end[ax] = a.kernel[ax] - 1 - a.pads_begin[ax];
        }
        a.divisor = static_cast<avgpool::divisor_type>(pick(0, 3));
        a.divisor_override = pick(0, 5) == 0 ? pick(1, 30) : 0;
        compare<T, 2>(shape, a, gen, describe<2>(shape, a, "seed " + std::to_string(seed)), kernel_kind::same);
        if (::testing::Test::HasFatalFailure()) return;
        compare_backward<T>(shape, a, gen, describe<2>(shape, a, "seed " + std::to_string(seed)));
        if (::testing::Test::HasFatalFailure()) return;
        ++ran;
    }
    EXPECT_EQ(ran, cases);
}

TEST(SameKernel, ForwardAndBackwardMatchReference) {
    same_suite<float>(sweep(400));
    same_suite<double>(sweep(150));
}

// Tall planes in row segments (kernel width x plane above the mask budget): output rows go
// in pairs through the whole plane, with an odd last row alone; every kernel height 1-7 (pairs
// from 3), asymmetric pads, even and odd heights, rows just one vector wide and wider.
TEST(SameKernel, TallPlanesPairRows) {
    std::mt19937_64 gen(4242);
    const index_t sizes[][2] = {{401, 8}, {200, 41}};  // H x W: odd and even heights
    for (const auto& hw : sizes) {
        const index_t H = hw[0], W = hw[1];
        for (index_t k = 1; k <= 7; ++k) {
            avgpool::pool_attrs<2> a;
            a.kernel = {k, k};
            a.pads_begin = {k / 3, (k - 1) / 2};
            a.pads_end = {k - 1 - k / 3, k - 1 - (k - 1) / 2};
            const avgpool::dims<4> shape{1, 2, H, W};
            auto plan = avgpool::pooling<2>::create(shape, a);
            ASSERT_TRUE(plan);
            const auto& d = avgpool::detail::plan_access::data(*plan);
            if (k >= 3) {
                ASSERT_EQ(avgpool::detail::same_segment<2>(d), W) << "row segments expected, k = " << k;
            }
            const std::string what = describe<2>(shape, a, "tall");
            compare<float, 2>(shape, a, gen, what, kernel_kind::same);
            compare<double, 2>(shape, a, gen, what, kernel_kind::same);
            compare_backward<float>(shape, a, gen, what);
            if (::testing::Test::HasFatalFailure()) return;
        }
    }
}

// Kernels with centred padding ((k - 1) / 2 or k / 2 before) other than 3x3 pad 1, which
// AVX-512 float builds sum vertically first, two output rows at a time, the taps as lane
// shifts (forward, and backward over the flipped windows): every kernel height and width 1-7
// with either split, planes one row to tall (odd and even heights: a last row alone) and one
// lane to several vectors wide (a row's last vector partial or whole); splits of the rows
// give the whole call's bits and write no other rows; NaN, Inf and -0 stay in their windows.
TEST(SameKernel, VerticalFirstKernels) {
    std::mt19937_64 gen(5151);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    int vertical_first = 0;
    for (index_t kh = 1; kh <= 7; ++kh) {
        for (index_t kw = 1; kw <= 7; ++kw) {
            for (int lower = 0; lower < 2; ++lower) {
                avgpool::pool_attrs<2> a;
                a.kernel = {kh, kw};
                a.pads_begin = {lower ? kh / 2 : (kh - 1) / 2, lower ? kw / 2 : (kw - 1) / 2};
                a.pads_end = {kh - 1 - a.pads_begin[0], kw - 1 - a.pads_begin[1]};
                a.divisor = static_cast<avgpool::divisor_type>(pick(0, 3));
                const index_t widths[] = {pick(1, 15), 16, pick(17, 47), 48, pick(49, 100)};
                for (index_t w : widths) {
                    const avgpool::dims<4> shape{1, pick(1, 3), pick(1, 21), w};
                    auto plan = avgpool::pooling<2>::create(shape, a);
                    ASSERT_TRUE(plan);
                    const auto& d = avgpool::detail::plan_access::data(*plan);
                    if (d.global) continue;
                    ASSERT_TRUE((avgpool::detail::same_applicable<float, 2>(d)));
                    const bool vf = avgpool::detail::same_kernel<float, 2>(d, avgpool::detail::pool_op::average).vertical_first();
#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
                    if (!(kh == 3 && kw == 3)) {
                        EXPECT_TRUE(vf) << describe<2>(shape, a, "vertical first expected");
                    }
#endif
                    vertical_first += vf ? 1 : 0;
                    compare<float, 2>(shape, a, gen, describe<2>(shape, a, "vertical first"), kernel_kind::same);
                    if (::testing::Test::HasFatalFailure()) return;
                    compare_backward<float>(shape, a, gen, describe<2>(shape, a, "vertical first, backward"));
                    if (::testing::Test::HasFatalFailure()) return;
                    namespace dt = avgpool::detail;
                    const index_t items = shape[0] * shape[1], H = shape[2], W = shape[3];
                    const std::size_t n = static_cast<std::size_t>(plan->input_size());
                    std::vector<float> x(n);
                    for (float& v : x) v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(gen);
                    // Each plane cut in two, the later rows first, into outputs holding a marker:
                    // the first call leaves every row outside its range alone (another thread's),
                    // and the two give the whole call's bits.
                    auto check_split = [&](const std::vector<float>& whole, auto rows, const char* what) {
                        std::vector<float> parts(n, 1e30f);
                        for (index_t item = 0; item < items; ++item) {
                            const index_t cut = pick(0, H);
                            rows(parts.data(), item, cut, H);
                            for (index_t i = 0; i < H * W; ++i) {
                                const std::size_t at = static_cast<std::size_t>(item * H * W + i);
                                if (i < cut * W) {
                                    ASSERT_EQ(parts[at], 1e30f) << what << ": row " << i / W << " written by rows " << cut << ".." << H;
                                } else {
                                    ASSERT_EQ(0, std::memcmp(&parts[at], &whole[at], sizeof(float))) << what << ": value " << at;
                                }
                            }
                            rows(parts.data(), item, 0, cut);
                        }
                        ASSERT_EQ(0, std::memcmp(whole.data(), parts.data(), n * sizeof(float))) << what;
                    };
                    const dt::same_kernel<float, 2> kf(d, dt::pool_op::average);
                    if (!kf.splits_rows()) {  // 3x3 pad 1 on the whole-plane paths (narrow8, flat3)
                        ASSERT_FALSE(vf);
                        continue;
                    }
                    std::vector<float> whole(n, 1e30f);
                    kf.run(x.data(), whole.data(), 0, items);
                    check_split(whole, [&](float* out, index_t item, index_t r0, index_t r1) { kf.run_rows(x.data(), out, item, r0, r1); },
                                "forward rows split");
                    if (::testing::Test::HasFatalFailure()) return;
                    const dt::same_kernel<float, 2> kb(d, dt::pool_op::sum, true);
                    ASSERT_TRUE(kb.splits_backward_rows() || !vf);
                    if (kb.splits_backward_rows()) {
                        std::fill(whole.begin(), whole.end(), 1e30f);
                        kb.run_backward(x.data(), whole.data(), 0, items);
                        check_split(
                            whole, [&](float* out, index_t item, index_t r0, index_t r1) { kb.run_backward_rows(x.data(), out, item, r0, r1); },
                            "backward rows split");
                        if (::testing::Test::HasFatalFailure()) return;
                    }
                    // NaN, Inf and -0 stay in their windows: where the reference gives NaN or an
                    // infinity, so does the kernel, and a window of -0 gives +0.
                    const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                              -std::numeric_limits<float>::infinity(), -0.0f};
                    for (std::size_t i = 0; i < n; ++i) {
                        if (pick(0, 9) == 0) x[i] = specials[pick(0, 3)];
                        if (pick(0, 3) == 0) x[i] = -0.0f;
                    }
                    std::vector<float> fast(n, 1e30f), ref(n);
                    kf.run(x.data(), fast.data(), 0, items);
                    dt::reference_pool<float, 2>(d, x.data(), ref.data(), dt::pool_op::average, 0, items);
                    for (std::size_t i = 0; i < n; ++i) {
                        if (std::isnan(ref[i]) || std::isinf(ref[i])) {
                            ASSERT_EQ(std::isnan(ref[i]), std::isnan(fast[i])) << describe<2>(shape, a, "specials") << " output " << i;
                            if (std::isinf(ref[i])) {
                                ASSERT_EQ(ref[i], fast[i]) << "output " << i;
                            }
                        } else if (ref[i] == 0.0f) {
                            ASSERT_FALSE(std::signbit(fast[i]) && fast[i] == 0.0f) << "-0 at output " << i;
                        }
                    }
                }
            }
        }
    }
#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
    EXPECT_GT(vertical_first, 400);
#endif
}

// 3x3, pad 1 on both sides (the Inception branch pool).
avgpool::pool_attrs<2> same3x3() {
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.pads_begin = {1, 1};
    a.pads_end = {1, 1};
    return a;
}

// The horizontal pass reads whole vectors across row and plane boundaries and masks the
// lanes out; an Inf or NaN next door must not leak in (a multiply by 0 would make NaN).
TEST(SameKernel, NonFiniteNeighboursDoNotLeak) {
    const avgpool::pool_attrs<2> a = same3x3();
    auto plan = avgpool::pooling<2>::create({1, 3, 5, 7}, a);
    ASSERT_TRUE(plan);
    ASSERT_TRUE((avgpool::detail::same_applicable<float, 2>(avgpool::detail::plan_access::data(*plan))));
    std::vector<float> in(3 * 35, 1.0f), out(3 * 35, 0.0f);
    for (int i = 0; i < 35; ++i) in[static_cast<std::size_t>(i)] = std::numeric_limits<float>::infinity();
    for (int i = 70; i < 105; ++i) in[static_cast<std::size_t>(i)] = std::numeric_limits<float>::quiet_NaN();
    ASSERT_TRUE(plan->forward(in.data(), out.data()));
    for (int i = 35; i < 70; ++i) EXPECT_EQ(out[static_cast<std::size_t>(i)], 1.0f) << "output " << i;
    EXPECT_TRUE(std::isinf(out[0]));
    EXPECT_TRUE(std::isnan(out[104]));
}

// 3x3 pad 1 on planes 8 wide with an even number of rows (Inception's 8x8 branch pools), which
// AVX-512 float builds run with the plane in registers, forward and backward: every divisor
// rule and the override, sums, 2 to 16 rows, plane counts around one and many; non-finite
// values stay in their windows and do not reach the neighbouring planes.
TEST(SameKernel, EightWidePlanes) {
    std::mt19937_64 gen(808);
    for (index_t H : {2, 4, 8, 16}) {
        for (index_t C : {1, 5, 33}) {
            for (int mode = 0; mode < 3; ++mode) {
                avgpool::pool_attrs<2> a = same3x3();
                if (mode == 1) a.divisor = avgpool::divisor_type::include_pad;
                if (mode == 2) a.divisor_override = 7;
                const std::string t = "H " + std::to_string(H) + " C " + std::to_string(C) + " mode " + std::to_string(mode);
                compare<float, 2>({1, C, H, 8}, a, gen, t, kernel_kind::same);
                compare<double, 2>({1, C, H, 8}, a, gen, t + " double", kernel_kind::same);
                compare_backward<float>({1, C, H, 8}, a, gen, t);
                compare_backward<double>({1, C, H, 8}, a, gen, t + " double");
                if (::testing::Test::HasFatalFailure()) return;
            }
        }
    }
    auto plan = avgpool::pooling<2>::create({1, 4, 8, 8}, same3x3());
    ASSERT_TRUE(plan);
    std::vector<float> in(4 * 64, 1.0f), out(4 * 64, 0.0f);
    for (int i = 0; i < 64; ++i) in[static_cast<std::size_t>(i)] = std::numeric_limits<float>::infinity();
    for (int i = 128; i < 192; ++i) in[static_cast<std::size_t>(i)] = std::numeric_limits<float>::quiet_NaN();
    in[192 + 8 * 3 + 7] = std::numeric_limits<float>::quiet_NaN();  // plane 3, row 3, column 7
    ASSERT_TRUE(plan->forward(in.data(), out.data()));
    for (int i = 0; i < 64; ++i) {
        EXPECT_TRUE(std::isinf(out[static_cast<std::size_t>(i)])) << "output " << i;
        EXPECT_EQ(out[static_cast<std::size_t>(64 + i)], 1.0f) << "output " << 64 + i;
        EXPECT_TRUE(std::isnan(out[static_cast<std::size_t>(128 + i)])) << "output " << 128 + i;
        const int r = i / 8, c = i % 8;
        const bool near = r >= 2 && r <= 4 && c >= 6;
        EXPECT_EQ(std::isnan(out[static_cast<std::size_t>(192 + i)]), near) << "plane 3 output " << i;
        if (!near) {
            EXPECT_EQ(out[static_cast<std::size_t>(192 + i)], 1.0f) << "plane 3 output " << i;
        }
    }
}

// 3x3 pad 1 on planes 2 to 63 wide, which AVX-512 float builds run as flat vectors with the
// horizontal sums in registers (a window of 2 Q + 3 vectors, Q = W / 16): every Q, widths
// around the vector boundaries (a row shorter than, equal to and just past 16, 32, 48 lanes),
// heights of one row up, plane sizes that end mid-vector and on a vector boundary, every divisor
// rule and the override, forward and backward, one plane and several.
TEST(SameKernel, FlatPlanesThreeByThree) {
    std::mt19937_64 gen(1935);
    for (index_t W : {2, 3, 9, 15, 16, 17, 31, 32, 33, 35, 47, 48, 56, 63}) {
        for (index_t H : {1, 2, 3, 16, 35}) {
            for (int mode = 0; mode < 3; ++mode) {
                avgpool::pool_attrs<2> a = same3x3();
                if (mode == 1) a.divisor = avgpool::divisor_type::include_pad;
                if (mode == 2) a.divisor_override = 5;
                const index_t C = (W + H + mode) % 2 == 0 ? 1 : 3;
                const std::string t = "H " + std::to_string(H) + " W " + std::to_string(W) + " C " + std::to_string(C) +
                                      " mode " + std::to_string(mode);
                compare<float, 2>({1, C, H, W}, a, gen, t, kernel_kind::same);
                compare_backward<float>({1, C, H, W}, a, gen, t);
                if (::testing::Test::HasFatalFailure()) return;
            }
        }
    }
    // Non-finite values stay inside their windows: plane 1 of 3 has a NaN in its last row and
    // column, so only the outputs in the 2x2 corner next to it are NaN and planes 0 and 2 are
    // untouched (all ones in: all ones out, exclude-pad).
    const index_t H = 17, W = 35, n = H * W;
    auto plan = avgpool::pooling<2>::create({1, 3, H, W}, same3x3());
    ASSERT_TRUE(plan);
    std::vector<float> in(static_cast<std::size_t>(3 * n), 1.0f), out(static_cast<std::size_t>(3 * n), 0.0f);
    in[static_cast<std::size_t>(n + n - 1)] = std::numeric_limits<float>::quiet_NaN();
    ASSERT_TRUE(plan->forward(in.data(), out.data()));
    for (index_t i = 0; i < 3 * n; ++i) {
        const index_t p = i / n, r = i % n / W, c = i % W;
        const bool near = p == 1 && r >= H - 2 && c >= W - 2;
        EXPECT_EQ(std::isnan(out[static_cast<std::size_t>(i)]), near) << "output " << i;
        if (!near) {
            EXPECT_EQ(out[static_cast<std::size_t>(i)], 1.0f) << "output " << i;
        }
    }
}

// The column-strip path (3x3 pad 1, planes at least a vector wide) takes small planes in
// blocks: counts that leave a partial block, against the reference, and the same bits in one
// call and in calls that start inside a block; and the plan split across two threads gives its
// own one-thread bits (the plan may choose another kernel: with AVX-512 the permute kernel
// takes 8x9 planes, whose sums differ in the last bit from this kernel's).
template <class T>
void strip_blocks_suite() {
    std::mt19937_64 gen(4471);
    const avgpool::dims<4> shapes[] = {{1, 70, 8, 8}, {1, 9, 17, 17}, {2, 5, 35, 35}, {1, 40, 8, 9}, {1, 3, 56, 56}};
    for (const auto& shape : shapes) {
        for (int mode = 0; mode < 2; ++mode) {
            avgpool::pool_attrs<2> a = same3x3();
            if (mode == 1) a.divisor = avgpool::divisor_type::include_pad;
            const std::string t = describe<2>(shape, a, "strip blocks");
            compare<T, 2>(shape, a, gen, t, kernel_kind::same);
            if (::testing::Test::HasFatalFailure()) return;
            SCOPED_TRACE(t);
            auto plan = avgpool::pooling<2>::create(shape, a);
            ASSERT_TRUE(plan);
            const auto& d = avgpool::detail::plan_access::data(*plan);
            std::vector<T> in(static_cast<std::size_t>(plan->input_size()));
            avgpool_test::uniform<double> dist(-4.0, 4.0);
            for (auto& v : in) v = static_cast<T>(dist(gen));
            const std::size_t no = static_cast<std::size_t>(plan->output_size());
            std::vector<T> whole(no), parts(no), planned(no), threaded(no);
            const index_t items = shape[0] * shape[1];
            avgpool::detail::same_kernel<T, 2> k(d, avgpool::detail::pool_op::average);
            k.run(in.data(), whole.data(), 0, items);
            for (index_t b = 0; b < items; b += 3) k.run(in.data(), parts.data(), b, std::min(items, b + 3));
            const avgpool::thread_pool pool(2);
            ASSERT_TRUE(plan->forward(in.data(), planned.data()));
            ASSERT_TRUE(plan->forward(in.data(), threaded.data(), pool));
            EXPECT_EQ(std::memcmp(whole.data(), parts.data(), no * sizeof(T)), 0);
            EXPECT_EQ(std::memcmp(planned.data(), threaded.data(), no * sizeof(T)), 0);
        }
    }
}

// Identical planes give identical outputs wherever they lie in the tensor. The vectors of the
// first and last planes whose reads would leave the tensor go lane by lane, and must sum the
// taps as the vector forms do (4 to 7 taps: as a tree). Values of mixed magnitudes, so that
// another order rounds differently; planes small enough for whole-plane masks and wide
// enough for one row's.
template <class T>
void same_planes_alike() {
    std::mt19937_64 gen(4242);
    avgpool_test::uniform<double> dist(-1.0, 1.0);
    std::uniform_int_distribution<int> scale(-12, 12);
    for (index_t k = 4; k <= 7; ++k) {
        for (const auto& hw : {std::pair<index_t, index_t>{20, 21}, std::pair<index_t, index_t>{40, 70}}) {
            avgpool::pool_attrs<2> a;
            a.kernel = {k, k};
            a.pads_begin = {k / 2, k / 2};
            a.pads_end = {(k - 1) / 2, (k - 1) / 2};
            constexpr index_t C = 3;
            auto plan = avgpool::pooling<2>::create({1, C, hw.first, hw.second}, a);
            ASSERT_TRUE(plan);
            ASSERT_TRUE((avgpool::detail::same_applicable<T, 2>(avgpool::detail::plan_access::data(*plan))));
            const std::size_t n = static_cast<std::size_t>(hw.first * hw.second);
            std::vector<T> in(C * n);
            for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<T>(std::ldexp(dist(gen), scale(gen)));
            for (std::size_t c = 1; c < C; ++c) std::copy_n(in.begin(), n, in.begin() + static_cast<std::ptrdiff_t>(c * n));
            std::vector<T> out(C * n, T(7));
            ASSERT_TRUE(plan->forward(in.data(), out.data()).ok());
            for (std::size_t c = 1; c < C; ++c)
                ASSERT_EQ(0, std::memcmp(out.data(), out.data() + c * n, n * sizeof(T)))
                    << k << "x" << k << " on " << hw.first << "x" << hw.second << ": plane " << c << " differs from plane 0";
        }
    }
}

TEST(SameKernel, PlanesAlikeWhereverTheyLie) {
    same_planes_alike<float>();
    same_planes_alike<double>();
}

TEST(SameKernel, StripBlocksFloat) { strip_blocks_suite<float>(); }
TEST(SameKernel, StripBlocksDouble) { strip_blocks_suite<double>(); }

// The same-grid kernel's backward is the forward sum, over the flipped windows, of the
// gradients each times its 1 / divisor (+ 0): bit for bit, in one call, in calls of a few
// planes and split by rows. 3x3 pad 1 planes at least a vector wide, which the strip path
// takes scaling each gradient as it loads it (where the inner rows share their reciprocals:
// H >= 3) or, on H < 3, the staged scaled plane. Gradients of mixed magnitudes with Inf, NaN
// and -0 among them; the tensor exactly sized, so the first and last planes' edge rows go lane
// by lane.
template <class T>
void same_backward_is_scaled_sum() {
    std::mt19937_64 gen(8117);
    avgpool_test::uniform<double> dist(-1.0, 1.0);
    std::uniform_int_distribution<int> scale(-20, 20), special(0, 40);
    const avgpool::dims<4> shapes[] = {{1, 37, 8, 8},  {2, 5, 17, 17}, {1, 3, 35, 35}, {1, 4, 8, 9},  {1, 6, 3, 16},
                                       {1, 5, 2, 23},  {1, 3, 1, 12},  {1, 2, 56, 56}, {1, 3, 9, 70}, {1, 2, 5, 72},
                                       {3, 1, 4, 100}, {1, 9, 3, 8}};
    for (const auto& shape : shapes) {
        for (int mode = 0; mode < 3; ++mode) {
            avgpool::pool_attrs<2> a = same3x3();
            if (mode == 1) a.divisor = avgpool::divisor_type::include_pad;
            if (mode == 2) a.divisor_override = 7;
            SCOPED_TRACE(describe<2>(shape, a, "backward = scaled sum"));
            auto plan = avgpool::pooling<2>::create(shape, a);
            ASSERT_TRUE(plan);
            const auto& d = avgpool::detail::plan_access::data(*plan);
            ASSERT_TRUE((avgpool::detail::same_applicable<T, 2>(d)));
            const index_t n = shape[2] * shape[3], items = shape[0] * shape[1];
            const std::size_t total = static_cast<std::size_t>(n * items);
            std::vector<T> g(total), scaled(total);
            const T* rg = d.template plane_reciprocals<T>();
            for (std::size_t i = 0; i < total; ++i) {
                const int s = special(gen);
                g[i] = s == 0   ? std::numeric_limits<T>::infinity()
                       : s == 1 ? -std::numeric_limits<T>::infinity()
                       : s == 2 ? std::numeric_limits<T>::quiet_NaN()
                       : s <= 6 ? T(-0.0)  // windows of -0 give +0
                                : static_cast<T>(std::ldexp(dist(gen), scale(gen)));
                scaled[i] = g[i] * rg[i % static_cast<std::size_t>(n)] + T(0);
            }
            std::vector<T> expect(total), whole(total, T(5)), parts(total, T(5)), rows(total, T(5));
            avgpool::detail::same_kernel<T, 2>(d, avgpool::detail::pool_op::sum).run(scaled.data(), expect.data(), 0, items);
            const avgpool::detail::same_kernel<T, 2> k(d, avgpool::detail::pool_op::sum, true);
            k.run_backward(g.data(), whole.data(), 0, items);
            for (index_t b = 0; b < items; b += 2) k.run_backward(g.data(), parts.data(), b, std::min(items, b + 2));
            if (k.splits_backward_rows()) {
                for (index_t p = 0; p < items; ++p)
                    for (index_t r = 0; r < shape[2]; r += 3)
                        k.run_backward_rows(g.data(), rows.data(), p, r, std::min(shape[2], r + 3));
            } else {
                rows = whole;
            }
            auto same_bits = [](T x, T y) { return (std::isnan(x) && std::isnan(y)) || std::memcmp(&x, &y, sizeof(T)) == 0; };
            for (std::size_t i = 0; i < total; ++i) {
                ASSERT_TRUE(same_bits(whole[i], expect[i])) << "input " << i << ": backward " << whole[i] << " scaled sum " << expect[i];
                ASSERT_TRUE(same_bits(parts[i], expect[i])) << "input " << i << " (calls of 2 planes)";
                ASSERT_TRUE(same_bits(rows[i], expect[i])) << "input " << i << " (calls of 3 rows)";
            }
        }
    }
}

TEST(SameKernel, BackwardIsTheScaledSum) {
    same_backward_is_scaled_sum<float>();
    same_backward_is_scaled_sum<double>();
}

// A kernel on 16-bit storage M (converted in registers) against the same kernel on float
// storage: the float kernel's bits on the rounded inputs, rounded once, for whole planes (two
// calls, the later planes first) and planes split at a random outer row. make_float(op) and
// make_half(op) build the two kernels; `rows`: outer output rows per plane.
template <class M, class MakeFloat, class MakeHalf>
void half_storage_check(const std::vector<float>& in, std::size_t on, index_t items, index_t rows, std::mt19937_64& gen,
                        MakeFloat&& make_float, MakeHalf&& make_half) {
    namespace dt = avgpool::detail;
    std::vector<M> hin(in.size());
    std::vector<float> rounded(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
        hin[i] = M(in[i]);
        rounded[i] = static_cast<float>(hin[i]);
    }
    for (auto op : {dt::pool_op::average, dt::pool_op::sum}) {
        std::vector<float> want(on);
        make_float(op).run(rounded.data(), want.data(), 0, items);
        std::vector<M> whole(on, M(1e30f)), parts(on, M(1e30f));
        const auto k = make_half(op);
        k.run(hin.data(), whole.data(), items / 2, items);
        k.run(hin.data(), whole.data(), 0, items / 2);
        for (index_t item = 0; item < items; ++item) {
            const index_t cut = std::uniform_int_distribution<index_t>(0, rows)(gen);
            k.run_rows(hin.data(), parts.data(), item, cut, rows);
            k.run_rows(hin.data(), parts.data(), item, 0, cut);
        }
        for (std::size_t i = 0; i < on; ++i) {
            const M w = M(want[i]);
            ASSERT_EQ(0, std::memcmp(&w, &whole[i], sizeof(M)))
                << (op == dt::pool_op::sum ? "sum" : "average") << " output " << i << ": " << static_cast<float>(whole[i])
                << ", the float kernel's rounded " << static_cast<float>(w);
        }
        ASSERT_EQ(0, std::memcmp(whole.data(), parts.data(), on * sizeof(M))) << "run_rows split";
    }
}

// The 2x2 kernel on 16-bit storage (half_storage_check).
template <class M>
void pair_half_check(const avgpool::detail::plan_data<2>& d, std::mt19937_64& gen) {
    namespace dt = avgpool::detail;
    const index_t items = d.input_shape[0] * d.input_shape[1], Ho = d.output_shape[2];
    avgpool_test::uniform<double> dist(-4.0, 4.0);
    std::vector<float> in(static_cast<std::size_t>(items * d.input_shape[2] * d.input_shape[3]));
    for (float& x : in) x = static_cast<float>(dist(gen));
    half_storage_check<M>(
        in, static_cast<std::size_t>(items * Ho * d.output_shape[3]), items, Ho, gen,
        [&](dt::pool_op op) { return dt::pair_kernel<float, 2>(d, op); }, [&](dt::pool_op op) { return dt::pair_kernel<float, 2, M>(d, op); });
}

// 2x2 stride 2 with whole windows: any extents (odd ones leave a row / column unread), pads
// that no window reaches, every divisor rule and override; forward in two calls and backward.
template <class T>
void pair_suite(int cases) {
    for (int c = 0; c < cases; ++c) {
        const std::uint64_t seed = 93000 + static_cast<std::uint64_t>(c) + (sizeof(T) == 4 ? 0 : 50000);
        std::mt19937_64 gen(seed);
        auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
        avgpool::pool_attrs<2> a;
        a.kernel = {2, 2};
        a.strides = {2, 2};
        avgpool::dims<4> shape{pick(1, 2), pick(1, 7), pick(2, 40), pick(2, pick(0, 3) == 0 ? 150 : 40)};
        for (std::size_t ax = 0; ax < 2; ++ax)
            a.pads_end[ax] = shape[ax + 2] % 2 == 0 ? pick(0, 1) : 0;  // floor keeps windows whole
        a.divisor = static_cast<avgpool::divisor_type>(pick(0, 3));
        a.divisor_override = pick(0, 4) == 0 ? pick(1, 30) : 0;
        const std::string trace = describe<2>(shape, a, "seed " + std::to_string(seed));
        {
            // Near misses must not take this kernel: the same tables of first / count at a
            // stride of 3 and dilation 2 (taps 0 and 2), and a ceil-mode partial window.
            avgpool::pool_attrs<2> b = a;
            b.strides = {3, 2};
            b.dilations = {2, 1};
            auto near = avgpool::pooling<2>::create(shape, b);
            if (near) {
                EXPECT_FALSE((avgpool::detail::pair_applicable<T, 2>(avgpool::detail::plan_access::data(*near))));
            }
            if (shape[2] % 2 == 1) {
                avgpool::pool_attrs<2> ceil_attrs = a;
                ceil_attrs.rounding = avgpool::rounding_type::ceil;
                auto partial = avgpool::pooling<2>::create(shape, ceil_attrs);
                ASSERT_TRUE(partial);
                EXPECT_FALSE((avgpool::detail::pair_applicable<T, 2>(avgpool::detail::plan_access::data(*partial))));
            }
        }
        compare<T, 2>(shape, a, gen, trace, kernel_kind::pair);
        if (::testing::Test::HasFatalFailure()) return;

        auto plan = avgpool::pooling<2>::create(shape, a);
        const auto& d = avgpool::detail::plan_access::data(*plan);
        if constexpr (std::is_same<T, float>::value) {
            SCOPED_TRACE(trace + " (16-bit storage)");
            pair_half_check<avgpool::bfloat16>(d, gen);
            pair_half_check<avgpool::float16>(d, gen);
            if (::testing::Test::HasFatalFailure()) return;
        }
        SCOPED_TRACE(trace + " (backward)");
        avgpool_test::uniform<double> dist(-4.0, 4.0);
        std::vector<T> g(static_cast<std::size_t>(plan->output_size()));
        for (T& x : g) x = static_cast<T>(dist(gen));
        std::vector<T> fast(static_cast<std::size_t>(plan->input_size()), T(1e30)), ref(fast.size());
        const index_t items = shape[0] * shape[1];
        const avgpool::detail::pair_kernel<T, 2> k(d, avgpool::detail::pool_op::average);
        k.run_backward(g.data(), fast.data(), 0, items / 2);
        k.run_backward(g.data(), fast.data(), items / 2, items);
        avgpool::detail::reference_backward<T, 2>(d, g.data(), ref.data(), 0, items);
        for (std::size_t i = 0; i < fast.size(); ++i) {
            // One product g * (1/div) against the reference's g / div: within an ulp or two.
            ASSERT_LE(std::fabs(static_cast<double>(fast[i]) - static_cast<double>(ref[i])),
                      4 * unit_roundoff<T>() * std::fabs(static_cast<double>(ref[i])))
                << "input " << i << ": fast " << fast[i] << " reference " << ref[i];
        }
    }
}

TEST(PairKernel, ForwardAndBackwardMatchReference) {
    pair_suite<float>(300);
    pair_suite<double>(100);
}

// The channel-tile kernel (many small planes) on one plan: forward average and sum, and
// backward, against the reference within the accuracy bound; each also run in two calls split
// inside a tile (partial tiles), which must give the same bits as one call.
template <class T, std::size_t R>
void tile_check(const avgpool::pooling<R>& plan, std::mt19937_64& gen, const std::string& trace) {
    SCOPED_TRACE(trace);
    const auto& d = avgpool::detail::plan_access::data(plan);
    // Backward takes the kernel on larger planes than forward does.
    const bool forward = avgpool::detail::tile_applicable<T, R>(d);
    ASSERT_TRUE((avgpool::detail::tile_applicable<T, R>(d, true))) << "expected the tile kernel";
    const index_t items = d.input_shape[0] * d.input_shape[1];
    // A split inside a tile (not at a multiple of the planes per tile P), so partial tiles run.
    const index_t P = avgpool::detail::tile_kernel<T, R>(d, avgpool::detail::pool_op::sum).planes_per_tile();
    index_t cut = std::uniform_int_distribution<index_t>(1, items - 1)(gen);
    if (cut % P == 0) cut = cut + 1 < items ? cut + 1 : cut - 1;
    double ksum = 0;
    for (std::size_t ax = 0; ax < R; ++ax) ksum += static_cast<double>(d.geometry.kernel[ax]);
    avgpool_test::uniform<double> dist(-4.0, 4.0);
    // Checks got against ref within the bound from ref_abs (the same computation on |x|).
    auto check = [&](const std::vector<T>& got, const std::vector<T>& ref, const std::vector<T>& ref_abs,
                     const char* what) {
        for (std::size_t i = 0; i < got.size(); ++i) {
            if (std::isnan(ref[i])) {
                ASSERT_TRUE(std::isnan(got[i])) << what << " " << i;
                continue;
            }
            const double bound = 4 * ksum * unit_roundoff<T>() * static_cast<double>(ref_abs[i]) * (1 + 1e-6) +
                                 std::numeric_limits<T>::denorm_min();
            ASSERT_LE(std::fabs(static_cast<double>(got[i]) - static_cast<double>(ref[i])), bound)
                << what << " " << i << ": tile " << got[i] << " reference " << ref[i];
        }
    };
    auto fill = [&](std::vector<T>& x, std::vector<T>& absx) {
        for (std::size_t i = 0; i < x.size(); ++i) {
            x[i] = static_cast<T>(dist(gen));
            absx[i] = std::fabs(x[i]);
        }
    };
    const std::size_t xn = static_cast<std::size_t>(plan.input_size()), on = static_cast<std::size_t>(plan.output_size());
    std::vector<T> in(xn), absin(xn);
    fill(in, absin);
    for (auto op : {avgpool::detail::pool_op::average, avgpool::detail::pool_op::sum}) {
        if (!forward) break;
        const char* what = op == avgpool::detail::pool_op::sum ? "sum output" : "average output";
        std::vector<T> whole(on, T(1e30)), split(on, T(1e30)), ref(on), ref_abs(on);
        const avgpool::detail::tile_kernel<T, R> k(d, op);
        k.run(in.data(), whole.data(), 0, items);
        k.run(in.data(), split.data(), cut, items);
        k.run(in.data(), split.data(), 0, cut);
        avgpool::detail::reference_pool<T, R>(d, in.data(), ref.data(), op, 0, items);
        avgpool::detail::reference_pool<T, R>(d, absin.data(), ref_abs.data(), op, 0, items);
        check(whole, ref, ref_abs, what);
        if (::testing::Test::HasFatalFailure()) return;
        ASSERT_EQ(0, std::memcmp(whole.data(), split.data(), on * sizeof(T))) << what << ": split at " << cut;
        // The last plane alone: a tile a vector wide (each_tile narrows tiles of few planes).
        std::fill(split.begin(), split.end(), T(1e30));
        k.run(in.data(), split.data(), items - 1, items);
        k.run(in.data(), split.data(), 0, items - 1);
        ASSERT_EQ(0, std::memcmp(whole.data(), split.data(), on * sizeof(T))) << what << ": last plane alone";
    }
    std::vector<T> g(on), absg(on);
    fill(g, absg);
    std::vector<T> whole(xn, T(1e30)), split(xn, T(1e30)), ref(xn), ref_abs(xn);
    const avgpool::detail::tile_kernel<T, R> k(d, avgpool::detail::pool_op::average);
    k.run_backward(g.data(), whole.data(), 0, items);
    k.run_backward(g.data(), split.data(), cut, items);
    k.run_backward(g.data(), split.data(), 0, cut);
    avgpool::detail::reference_backward<T, R>(d, g.data(), ref.data(), 0, items);
    avgpool::detail::reference_backward<T, R>(d, absg.data(), ref_abs.data(), 0, items);
    check(whole, ref, ref_abs, "backward input");
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_EQ(0, std::memcmp(whole.data(), split.data(), xn * sizeof(T))) << "backward: split at " << cut;
    std::fill(split.begin(), split.end(), T(1e30));
    k.run_backward(g.data(), split.data(), items - 1, items);
    k.run_backward(g.data(), split.data(), 0, items - 1);
    ASSERT_EQ(0, std::memcmp(whole.data(), split.data(), xn * sizeof(T))) << "backward: last plane alone";
}

// Small planes, 16 to 70 of them (whole and partial tiles), ranks 1-3, random attributes
// (every pad mode, rounding, divisor, override, dilation, empty windows), and adaptive plans.
template <class T, std::size_t R>
void tile_suite(int cases) {
    int ran = 0;
    for (int c = 0; c < cases; ++c) {
        const std::uint64_t seed = 95000 + 1000 * R + static_cast<std::uint64_t>(c) + (sizeof(T) == 4 ? 0 : 50000);
        std::mt19937_64 gen(seed);
        auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
        avgpool::dims<R + 2> shape{};
        shape[0] = pick(1, 2);
        shape[1] = pick(16, 35);
        const bool large = pick(0, 3) == 0;  // planes only backward takes
        const index_t cap = R == 1 ? (large ? 400 : 40) : R == 2 ? (large ? 30 : 14) : (large ? 9 : 6);
        avgpool::dims<R> spatial{};
        for (std::size_t ax = 0; ax < R; ++ax) spatial[ax] = shape[ax + 2] = pick(1, cap);
        if (pick(0, 4) == 0) {
            avgpool::dims<R> out{};
            for (std::size_t ax = 0; ax < R; ++ax) out[ax] = pick(1, std::min<index_t>(cap, 15));
            auto plan = avgpool::pooling<R>::create_adaptive(shape, out);
            ASSERT_TRUE(plan);
            if (!avgpool::detail::tile_applicable<T, R>(avgpool::detail::plan_access::data(*plan), true)) continue;
            tile_check<T, R>(*plan, gen, "adaptive seed " + std::to_string(seed));
        } else {
            const auto a = random_attrs<R>(gen, spatial);
            auto plan = avgpool::pooling<R>::create(shape, a);
            if (!plan || !avgpool::detail::tile_applicable<T, R>(avgpool::detail::plan_access::data(*plan), true)) continue;
            tile_check<T, R>(*plan, gen, describe<R>(shape, a, "seed " + std::to_string(seed)));
        }
        if (::testing::Test::HasFatalFailure()) return;
        ++ran;
    }
    EXPECT_GT(ran, cases / 2);  // most draws are small enough for the tile kernel
}

TEST(TileKernel, MatchesReferenceForwardAndBackward) {
    tile_suite<float, 1>(120);
    tile_suite<float, 2>(200);
    tile_suite<float, 3>(120);
    tile_suite<double, 1>(40);
    tile_suite<double, 2>(60);
    tile_suite<double, 3>(40);
}

#if AVGPOOL_PERM_KERNEL
int perm_backward_cases = 0;  // plans perm_check ran backward on
int perm_pair_cases = 0;      // of them, rows of 8 gathering at most 8 outputs (two rows a vector)
int perm_sep_cases[4] = {};   // of them, per R, plans backward ran in its separable form

// run_rows over an empty range of rows (at the start and at the end of plane 0) writes nothing.
template <class Kernel>
void expect_empty_ranges_write_nothing(const Kernel& k, const float* src, std::size_t n, index_t rows, const char* what) {
    std::vector<float> none(n, 5.0f);
    k.run_rows(src, none.data(), 0, 0, 0);
    k.run_rows(src, none.data(), 0, rows, rows);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(none[i], 5.0f) << what << ": an empty row range wrote element " << i;
}

// The permute kernel on 16-bit storage M (half_storage_check; bfloat16 rows split into their
// even and odd columns, which the plan's other lane tables address).
template <class M, std::size_t R>
void perm_half_check(const avgpool::detail::plan_data<R>& d, const std::vector<float>& in, index_t rows, std::mt19937_64& gen) {
    namespace dt = avgpool::detail;
    std::size_t on = 1;
    for (index_t e : d.output_shape) on *= static_cast<std::size_t>(e);
    half_storage_check<M>(
        in, on, d.input_shape[0] * d.input_shape[1], rows, gen, [&](dt::pool_op op) { return dt::perm_kernel<R>(d, op); },
        [&](dt::pool_op op) { return dt::perm_kernel<R, M>(d, op); });
}

// The permute kernel (rows of at most 32, output rows of at most 16; AVX-512) on one plan:
// forward average and sum, and backward where it applies, against the reference within the
// accuracy bound; the same bits when planes are split into blocks of rows at a random cut (odd
// cuts break the packed row pairs differently), and through forward() / sum() / backward() of
// the public API (so the dispatch really takes it), also with a thread pool.
template <std::size_t R>
void perm_check(const avgpool::pooling<R>& plan, std::mt19937_64& gen, const std::string& trace) {
    SCOPED_TRACE(trace);
    namespace dt = avgpool::detail;
    const auto& d = dt::plan_access::data(plan);
    ASSERT_TRUE((dt::perm_applicable<float, R>(d))) << "expected the permute kernel";
    const index_t items = d.input_shape[0] * d.input_shape[1];
    index_t rows = 1;
    for (std::size_t ax = 0; ax + 1 < R; ++ax) rows *= d.geometry.output[ax];
    double ksum = 0;
    for (std::size_t ax = 0; ax < R; ++ax) ksum += static_cast<double>(d.geometry.kernel[ax]);
    const std::size_t xn = static_cast<std::size_t>(plan.input_size()), on = static_cast<std::size_t>(plan.output_size());
    avgpool_test::uniform<double> dist(-4.0, 4.0);
    std::vector<float> in(xn), absin(xn);
    for (std::size_t i = 0; i < xn; ++i) {
        in[i] = static_cast<float>(dist(gen));
        absin[i] = std::fabs(in[i]);
    }
    avgpool::thread_pool pool(2);
    for (auto op : {dt::pool_op::average, dt::pool_op::sum}) {
        const char* what = op == dt::pool_op::sum ? "sum output" : "average output";
        std::vector<float> whole(on, 1e30f), parts(on, 1e30f), api(on, 7.0f), threaded(on, 9.0f), ref(on), ref_abs(on);
        const dt::perm_kernel<R> k(d, op);
        k.run(in.data(), whole.data(), 0, items);
        for (index_t item = 0; item < items; ++item) {
            const index_t cut = std::uniform_int_distribution<index_t>(0, rows)(gen);
            k.run_rows(in.data(), parts.data(), item, cut, rows);  // the later rows first
            k.run_rows(in.data(), parts.data(), item, 0, cut);
        }
        dt::reference_pool<float, R>(d, in.data(), ref.data(), op, 0, items);
        dt::reference_pool<float, R>(d, absin.data(), ref_abs.data(), op, 0, items);
        for (std::size_t i = 0; i < on; ++i) {
            if (std::isnan(ref[i])) {
                ASSERT_TRUE(std::isnan(whole[i])) << what << " " << i;
                continue;
            }
            const double bound = 4 * ksum * unit_roundoff<float>() * static_cast<double>(ref_abs[i]) * (1 + 1e-6) +
                                 std::numeric_limits<float>::denorm_min();
            ASSERT_LE(std::fabs(static_cast<double>(whole[i]) - static_cast<double>(ref[i])), bound)
                << what << " " << i << ": permute " << whole[i] << " reference " << ref[i];
        }
        ASSERT_EQ(0, std::memcmp(whole.data(), parts.data(), on * sizeof(float))) << what << ": run_rows split";
        expect_empty_ranges_write_nothing(k, in.data(), on, rows, what);
        // (The public API runs this kernel unless the stride-2 row kernel takes the plan first:
        // 2-D float planes of rows 9 to 128, whose tests check the API.)
        if (dt::s2_applicable<float, R>(d)) continue;
        const bool sum = op == dt::pool_op::sum;
        ASSERT_TRUE((sum ? plan.sum(in.data(), api.data()) : plan.forward(in.data(), api.data())).ok());
        ASSERT_TRUE((sum ? plan.sum(in.data(), threaded.data(), pool) : plan.forward(in.data(), threaded.data(), pool)).ok());
        ASSERT_EQ(0, std::memcmp(whole.data(), api.data(), on * sizeof(float))) << what << ": public API";
        ASSERT_EQ(0, std::memcmp(whole.data(), threaded.data(), on * sizeof(float))) << what << ": thread pool";
    }
    {
        SCOPED_TRACE("bfloat16 storage");
        perm_half_check<avgpool::bfloat16, R>(d, in, rows, gen);
    }
    {
        SCOPED_TRACE("float16 storage");
        perm_half_check<avgpool::float16, R>(d, in, rows, gen);
    }
    if (::testing::Test::HasFatalFailure()) return;
    // Backward, where it applies (rows up to 32, outputs up to 16): the same checks over input rows.
    if (!dt::perm_backward_applicable<float, R>(d)) return;
    index_t in_rows = 1;
    for (std::size_t ax = 0; ax + 1 < R; ++ax) in_rows *= d.geometry.input[ax];
    std::vector<float> g(on), absg(on);
    for (std::size_t i = 0; i < on; ++i) {
        g[i] = static_cast<float>(dist(gen));
        absg[i] = std::fabs(g[i]);
    }
    std::vector<float> whole(xn, 1e30f), parts(xn, 1e30f), api(xn, 7.0f), threaded(xn, 9.0f), ref(xn), ref_abs(xn);
    const dt::perm_backward<R> k(d);
    k.run(g.data(), whole.data(), 0, items);
    for (index_t item = 0; item < items; ++item) {
        const index_t cut = std::uniform_int_distribution<index_t>(0, in_rows)(gen);
        k.run_rows(g.data(), parts.data(), item, cut, in_rows);
        k.run_rows(g.data(), parts.data(), item, 0, cut);
    }
    dt::reference_backward<float, R>(d, g.data(), ref.data(), 0, items);
    dt::reference_backward<float, R>(d, absg.data(), ref_abs.data(), 0, items);
    for (std::size_t i = 0; i < xn; ++i) {
        const double bound = 4 * ksum * unit_roundoff<float>() * static_cast<double>(ref_abs[i]) * (1 + 1e-6) +
                             std::numeric_limits<float>::denorm_min();
        ASSERT_LE(std::fabs(static_cast<double>(whole[i]) - static_cast<double>(ref[i])), bound)
            << "backward input " << i << ": permute " << whole[i] << " reference " << ref[i];
    }
    ASSERT_EQ(0, std::memcmp(whole.data(), parts.data(), xn * sizeof(float))) << "backward: run_rows split";
    expect_empty_ranges_write_nothing(k, g.data(), xn, in_rows, "backward");
    ++perm_backward_cases;
    if (d.geometry.input[R - 1] == 8 && d.geometry.output[R - 1] <= 8) ++perm_pair_cases;
    if (dt::perm_bsep_fits<R>(d)) ++perm_sep_cases[R];
    if (dt::s2_backward_applicable<float, R>(d)) return;  // (the API takes the stride-2 kernel, as forward)
    ASSERT_TRUE(plan.backward(g.data(), api.data()).ok());
    ASSERT_TRUE(plan.backward(g.data(), threaded.data(), pool).ok());
    ASSERT_EQ(0, std::memcmp(whole.data(), api.data(), xn * sizeof(float))) << "backward: public API";
    ASSERT_EQ(0, std::memcmp(whole.data(), threaded.data(), xn * sizeof(float))) << "backward: thread pool";
}

// Random geometries with rows up to 34 or 100 wide (or exactly `row` wide), every mode of
// random_attrs (pads, dilation, rounding, divisors, overrides, empty windows), adaptive plans,
// 1 to 40 planes (few planes go through the split path), ranks 1-3.
template <std::size_t R>
void perm_suite(int cases, index_t row = 0) {
    int ran = 0;
    for (int c = 0; c < cases; ++c) {
        const std::uint64_t seed = 77000 + 1000 * R + static_cast<std::uint64_t>(c) + 100000 * static_cast<std::uint64_t>(row);
        std::mt19937_64 gen(seed);
        auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
        avgpool::dims<R + 2> shape{};
        shape[0] = pick(1, 2);
        shape[1] = pick(1, 20);
        avgpool::dims<R> spatial{};
        // Rows past 32 (a third of the draws): several chunks per output row.
        const index_t last = pick(0, 2) == 0 ? 100 : 34;
        for (std::size_t ax = 0; ax < R; ++ax) spatial[ax] = shape[ax + 2] = pick(1, ax + 1 == R ? last : (R == 3 ? 9 : 20));
        if (row > 0) spatial[R - 1] = shape[R + 1] = row;
        if (pick(0, 4) == 0) {
            avgpool::dims<R> out{};
            for (std::size_t ax = 0; ax < R; ++ax) out[ax] = pick(1, ax + 1 == R ? 17 : 12);
            auto plan = avgpool::pooling<R>::create_adaptive(shape, out);
            ASSERT_TRUE(plan);
            if (!avgpool::detail::perm_applicable<float, R>(avgpool::detail::plan_access::data(*plan))) continue;
            perm_check<R>(*plan, gen, "adaptive seed " + std::to_string(seed));
        } else {
            const auto a = random_attrs<R>(gen, spatial);
            auto plan = avgpool::pooling<R>::create(shape, a);
            if (!plan || !avgpool::detail::perm_applicable<float, R>(avgpool::detail::plan_access::data(*plan))) continue;
            perm_check<R>(*plan, gen, describe<R>(shape, a, "seed " + std::to_string(seed)));
        }
        if (::testing::Test::HasFatalFailure()) return;
        ++ran;
    }
    EXPECT_GT(ran, cases / 4) << "too few draws took the permute kernel";
}
#endif

#if AVGPOOL_PERM_KERNEL
// The whole-plane form (planes of at most 64 inputs, 16 outputs): forward average and sum
// against the reference within the bound, in both orders (horizontal first where it applies,
// and vertical first), and the default order's bits through forward() / sum(), also with a
// thread pool (planes split between threads). Counts the plans that took each order.
struct plane_orders {
    int horizontal = 0, zero_lane = 0, vertical = 0, backward = 0, backward_zero_lane = 0;
};

// The whole-plane backward, where it applies: against the reference within the bound of any
// summation order (as backward_test.cpp), every input written (grad_in starts as garbage), no
// store past the end, -0 gradients giving +0, and public backward() within the same bound.
void perm_plane_backward_check(const avgpool::pooling<2>& plan, std::mt19937_64& gen, plane_orders* orders) {
    namespace dt = avgpool::detail;
    const auto& d = dt::plan_access::data(plan);
    if (!dt::perm_plane_backward::applicable(d)) return;
    ASSERT_TRUE(d.bwd().perm_plane_b != nullptr) << "the plan holds no whole-plane backward";
    const dt::perm_plane_backward k(d);
    if (orders != nullptr) {
        ++orders->backward;
        if (k.zero_lane()) ++orders->backward_zero_lane;
    }
    const index_t items = d.input_shape[0] * d.input_shape[1];
    const std::size_t xn = static_cast<std::size_t>(plan.input_size()), on = static_cast<std::size_t>(plan.output_size());
    avgpool_test::uniform<double> dist(-4.0, 4.0);
    std::vector<float> g(on), gabs(on), ref(xn), ref_abs(xn), got(xn + 16, 1e30f), api(xn, 5.0f);
    for (std::size_t i = 0; i < on; ++i) {
        g[i] = static_cast<float>(dist(gen));
        gabs[i] = std::fabs(g[i]);
    }
    dt::reference_backward<float, 2>(d, g.data(), ref.data(), 0, items);
    dt::reference_backward<float, 2>(d, gabs.data(), ref_abs.data(), 0, items);
    k.run(g.data(), got.data(), 0, items);
    ASSERT_TRUE(plan.backward(g.data(), api.data()).ok());
    for (std::size_t i = xn; i < xn + 16; ++i) ASSERT_EQ(got[i], 1e30f) << "backward: store past the end";
    const double terms = static_cast<double>(std::max<index_t>(1, dt::max_cover<2>(d, 0)) * std::max<index_t>(1, dt::max_cover<2>(d, 1)));
    for (std::size_t i = 0; i < xn; ++i) {
        const double tol = 2 * (terms + 2) * 0x1p-24 * static_cast<double>(ref_abs[i]);
        ASSERT_NEAR(static_cast<double>(got[i]), static_cast<double>(ref[i]), tol) << "backward input " << i;
        ASSERT_NEAR(static_cast<double>(api[i]), static_cast<double>(ref[i]), tol) << "backward() input " << i;
    }
    std::fill(g.begin(), g.end(), -0.0f);
    k.run(g.data(), got.data(), 0, items);
    for (std::size_t i = 0; i < xn; ++i)
        ASSERT_TRUE(got[i] == 0.0f && !std::signbit(got[i])) << "backward of -0 gradients, input " << i << ": " << got[i];
}

void perm_plane_check(const avgpool::pooling<2>& plan, std::mt19937_64& gen, const std::string& trace,
                      plane_orders* orders = nullptr) {
    SCOPED_TRACE(trace);
    namespace dt = avgpool::detail;
    const auto& d = dt::plan_access::data(plan);
    ASSERT_TRUE((dt::perm_plane_applicable<float, 2>(d))) << "expected the whole-plane permute kernel";
    const index_t items = d.input_shape[0] * d.input_shape[1];
    const double ksum = static_cast<double>(d.geometry.kernel[0] + d.geometry.kernel[1]);
    const std::size_t xn = static_cast<std::size_t>(plan.input_size()), on = static_cast<std::size_t>(plan.output_size());
    avgpool_test::uniform<double> dist(-4.0, 4.0);
    std::vector<float> in(xn), absin(xn);
    for (std::size_t i = 0; i < xn; ++i) {
        in[i] = static_cast<float>(dist(gen));
        absin[i] = std::fabs(in[i]);
    }
    avgpool::thread_pool pool(2);
    for (auto op : {dt::pool_op::average, dt::pool_op::sum}) {
        const char* what = op == dt::pool_op::sum ? "sum output" : "average output";
        // Guards past the end: a store must not reach them.
        std::vector<float> whole(on + 16, 1e30f), vfirst(on + 16, 3e30f), api(on, 7.0f), threaded(on, 9.0f), ref(on),
            ref_abs(on);
        const dt::perm_plane_tables vertical(d, false);
        const dt::perm_plane_kernel<float> k(d, op), kv(d, op, vertical);
        ASSERT_FALSE(kv.horizontal_first());
        if (orders != nullptr && op == dt::pool_op::sum) {
            if (k.horizontal_first()) {
                ++orders->horizontal;
                if (k.zero_lane()) ++orders->zero_lane;
            } else {
                ++orders->vertical;
            }
        }
        k.run(in.data(), whole.data(), 0, items);
        kv.run(in.data(), vfirst.data(), 0, items);
        for (std::size_t i = on; i < on + 16; ++i) {
            ASSERT_EQ(whole[i], 1e30f) << what << ": store past the end";
            ASSERT_EQ(vfirst[i], 3e30f) << what << ": store past the end, vertical first";
        }
        dt::reference_pool<float, 2>(d, in.data(), ref.data(), op, 0, items);
        dt::reference_pool<float, 2>(d, absin.data(), ref_abs.data(), op, 0, items);
        for (std::size_t i = 0; i < on; ++i) {
            if (std::isnan(ref[i])) {
                ASSERT_TRUE(std::isnan(whole[i])) << what << " " << i;
                ASSERT_TRUE(std::isnan(vfirst[i])) << what << " " << i << ", vertical first";
                continue;
            }
            const double bound = 4 * ksum * unit_roundoff<float>() * static_cast<double>(ref_abs[i]) * (1 + 1e-6) +
                                 std::numeric_limits<float>::denorm_min();
            ASSERT_LE(std::fabs(static_cast<double>(whole[i]) - static_cast<double>(ref[i])), bound)
                << what << " " << i << ": permute " << whole[i] << " reference " << ref[i];
            ASSERT_LE(std::fabs(static_cast<double>(vfirst[i]) - static_cast<double>(ref[i])), bound)
                << what << " " << i << ": vertical first " << vfirst[i] << " reference " << ref[i];
        }
        const bool sum = op == dt::pool_op::sum;
        ASSERT_TRUE((sum ? plan.sum(in.data(), api.data()) : plan.forward(in.data(), api.data())).ok());
        ASSERT_TRUE((sum ? plan.sum(in.data(), threaded.data(), pool) : plan.forward(in.data(), threaded.data(), pool)).ok());
        // Where the row form also applies the plan runs that, which sums in the vertical-first
        // order.
        const std::vector<float>& served = dt::perm_applicable<float, 2>(d) ? vfirst : whole;
        ASSERT_EQ(0, std::memcmp(served.data(), api.data(), on * sizeof(float))) << what << ": public API";
        ASSERT_EQ(0, std::memcmp(served.data(), threaded.data(), on * sizeof(float))) << what << ": thread pool";
    }
    perm_plane_backward_check(plan, gen, orders);
}

#endif

TEST(PermKernel, WholePlanesMatchReference) {
#if AVGPOOL_PERM_KERNEL
    int ran = 0;
    plane_orders orders;
    for (int c = 0; c < 600; ++c) {
        const std::uint64_t seed = 88000 + static_cast<std::uint64_t>(c);
        std::mt19937_64 gen(seed);
        auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
        const avgpool::dims<2> sp{pick(1, 10), pick(1, 10)};
        const avgpool::dims<4> shape{pick(1, 2), pick(1, 40), sp[0], sp[1]};
        const auto a = random_attrs<2>(gen, sp);
        auto plan = avgpool::pooling<2>::create(shape, a);
        if (!plan || !avgpool::detail::perm_plane_applicable<float, 2>(avgpool::detail::plan_access::data(*plan))) continue;
        perm_plane_check(*plan, gen, describe<2>(shape, a, "seed " + std::to_string(seed)), &orders);
        if (::testing::Test::HasFatalFailure()) return;
        ++ran;
    }
    EXPECT_GT(ran, 100) << "too few draws took the whole-plane form";
    EXPECT_GT(orders.zero_lane, ran / 8) << "too few draws summed horizontally first with a zero lane";
    EXPECT_GT(orders.horizontal - orders.zero_lane, ran / 40) << "too few draws summed horizontally first with masks";
    EXPECT_GT(orders.vertical, ran / 8) << "too few draws summed vertically first";
    EXPECT_GT(orders.backward_zero_lane, ran / 8) << "too few draws took the whole-plane backward with a zero lane";
    EXPECT_GT(orders.backward - orders.backward_zero_lane, 1) << "too few draws took the whole-plane backward with masks";
    // ShuffleNet's 7x7 and an 8x8 plane at stride 2.
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.strides = {2, 2};
    a.pads_begin = a.pads_end = {1, 1};
    std::mt19937_64 gen(9);
    plane_orders hand;
    for (index_t hw : {7, 8}) {
        auto plan = avgpool::pooling<2>::create({1, 37, hw, hw}, a);
        ASSERT_TRUE(plan);
        perm_plane_check(*plan, gen, "shufflenet " + std::to_string(hw), &hand);
    }
    // 32 row sums, so no zero lane: 4x16 and 2x32 at 2x2 stride 2 (with 8x8 above).
    avgpool::pool_attrs<2> two;
    two.kernel = two.strides = {2, 2};
    for (index_t w : {16, 32}) {
        auto plan = avgpool::pooling<2>::create({2, 5, 64 / w, w}, two);
        ASSERT_TRUE(plan);
        perm_plane_check(*plan, gen, "2x2 on " + std::to_string(64 / w) + "x" + std::to_string(w), &hand);
    }
    EXPECT_EQ(hand.backward, 4);
    EXPECT_EQ(hand.backward_zero_lane, 1);
    // ShuffleNet's 576 planes: forward() and backward() give the whole-plane kernels' bits
    // (the dispatch takes them; both horizontal first without masks).
    auto shuffle = avgpool::pooling<2>::create({1, 576, 7, 7}, a);
    ASSERT_TRUE(shuffle);
    const auto& d = avgpool::detail::plan_access::data(*shuffle);
    ASSERT_TRUE(avgpool::detail::perm_plane_backward::applicable(d));
    const avgpool::detail::perm_plane_kernel<float> fk(d, avgpool::detail::pool_op::average);
    const avgpool::detail::perm_plane_backward bk(d);
    EXPECT_TRUE(fk.horizontal_first() && fk.zero_lane() && bk.zero_lane());
    std::vector<float> x(static_cast<std::size_t>(shuffle->input_size())), y(static_cast<std::size_t>(shuffle->output_size()));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 29) * 0.31f - 4.0f;
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 13) * 0.7f - 3.0f;
    std::vector<float> api_y(y.size(), 1.0f), own_y(y.size(), 2.0f), api_x(x.size(), 1.0f), own_x(x.size(), 2.0f);
    ASSERT_TRUE(shuffle->forward(x.data(), api_y.data()).ok());
    fk.run(x.data(), own_y.data(), 0, 576);
    EXPECT_EQ(0, std::memcmp(api_y.data(), own_y.data(), y.size() * sizeof(float))) << "forward()";
    ASSERT_TRUE(shuffle->backward(y.data(), api_x.data()).ok());
    bk.run(y.data(), own_x.data(), 0, 576);
    EXPECT_EQ(0, std::memcmp(api_x.data(), own_x.data(), x.size() * sizeof(float))) << "backward()";
#else
    GTEST_SKIP() << "the permute kernel needs AVX-512 (build with -march=native on such a CPU)";
#endif
}

TEST(PermKernel, MatchesReference) {
#if AVGPOOL_PERM_KERNEL
    perm_backward_cases = 0;
    std::fill(std::begin(perm_sep_cases), std::end(perm_sep_cases), 0);
    perm_suite<1>(sweep(300));
    perm_suite<2>(sweep(400));
    perm_suite<3>(sweep(300));
    EXPECT_GT(perm_backward_cases, sweep(1000) / 10) << "too few plans took the permute kernel backward";
    // Its separable form (per output row spread once, outer axes summed one at a time).
    EXPECT_GT(perm_sep_cases[2], sweep(400) / 20) << "too few 2-D plans took the separable backward";
    EXPECT_GT(perm_sep_cases[3], sweep(300) / 20) << "too few 3-D plans took the separable backward";
    // 3-D rows of exactly 8, which backward packs two to a vector (odd row cuts split the
    // pairs; 2-D planes 8 wide take other kernels).
    perm_pair_cases = 0;
    perm_suite<3>(sweep(200), 8);
    EXPECT_GT(perm_pair_cases, sweep(200) / 5) << "too few plans took the paired rows of 8";
#else
    GTEST_SKIP() << "the permute kernel needs AVX-512 (build with -march=native on such a CPU)";
#endif
}

// The bench shapes it is for take it (ShuffleNet 14x14 to 56x56, DenseNet 2x2 on 14x14, a 3-D
// 16^3, a 1-D row of 100), and those it is not for do not: 7x7 and 8x8 planes, rows of more
// chunks than the limit, several chunks at stride 1 or of whole 2x2 blocks.
TEST(PermKernel, ChosenWhereItPays) {
#if AVGPOOL_PERM_KERNEL
    namespace dt = avgpool::detail;
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.strides = {2, 2};
    a.pads_begin = a.pads_end = {1, 1};
    std::mt19937_64 gen(5);
    for (index_t hw : {14, 28}) {
        auto plan = avgpool::pooling<2>::create({1, 24, hw, hw}, a);
        ASSERT_TRUE(plan);
        perm_check<2>(*plan, gen, "shufflenet " + std::to_string(hw));
    }
    for (index_t hw : {7, 8, 130}) {  // 130: 65 outputs a row, 5 chunks (the limit is 4)
        auto plan = avgpool::pooling<2>::create({1, 24, hw, hw}, a);
        ASSERT_TRUE(plan);
        EXPECT_FALSE((dt::perm_applicable<float, 2>(dt::plan_access::data(*plan)))) << hw;
    }
    // Rows past 32 at stride 2 in chunks (ShuffleNet 56x56, 3 chunks of up to 16 outputs).
    auto wide = avgpool::pooling<2>::create({1, 5, 56, 56}, a);
    ASSERT_TRUE(wide);
    perm_check<2>(*wide, gen, "shufflenet 56");
    // Backward too: 16-column vectors, each from its own 16 outputs.
    EXPECT_TRUE((dt::perm_backward_applicable<float, 2>(dt::plan_access::data(*wide))));
    avgpool::pool_attrs<1> line;
    line.kernel = {3};
    line.strides = {2};
    line.pads_end = {2};
    auto row100 = avgpool::pooling<1>::create({1, 3, 100}, line);  // 51 outputs: 4 chunks
    ASSERT_TRUE(row100);
    perm_check<1>(*row100, gen, "1-D 100");
    EXPECT_TRUE((dt::perm_backward_applicable<float, 1>(dt::plan_access::data(*row100))));
    // Not at stride 1 past 16 outputs, nor for whole 2x2 blocks past 32 (other kernels win).
    avgpool::pool_attrs<2> same;
    same.kernel = {3, 3};
    same.pads_begin = same.pads_end = {1, 1};
    auto s1_20 = avgpool::pooling<2>::create({1, 24, 20, 20}, same);
    ASSERT_TRUE(s1_20);
    EXPECT_FALSE((dt::perm_applicable<float, 2>(dt::plan_access::data(*s1_20))));
    avgpool::pool_attrs<2> two;
    two.kernel = two.strides = {2, 2};
    auto densenet = avgpool::pooling<2>::create({1, 32, 14, 14}, two);
    ASSERT_TRUE(densenet);
    perm_check<2>(*densenet, gen, "densenet 14x14");
    auto densenet56 = avgpool::pooling<2>::create({1, 4, 56, 56}, two);
    ASSERT_TRUE(densenet56);
    EXPECT_FALSE((dt::perm_applicable<float, 2>(dt::plan_access::data(*densenet56))));
    avgpool::pool_attrs<2> s1;
    s1.kernel = {3, 3};
    auto wide_out = avgpool::pooling<2>::create({1, 4, 5, 19}, s1);  // output rows of 17
    ASSERT_TRUE(wide_out);
    EXPECT_FALSE((dt::perm_applicable<float, 2>(dt::plan_access::data(*wide_out))));
    avgpool::pool_attrs<3> c;
    c.kernel = {3, 3, 3};
    c.strides = {2, 2, 2};
    c.pads_end = {1, 1, 1};
    auto cube = avgpool::pooling<3>::create({1, 4, 16, 16, 16}, c);
    ASSERT_TRUE(cube);
    perm_check<3>(*cube, gen, "3-D 16^3");
#else
    GTEST_SKIP() << "the permute kernel needs AVX-512 (build with -march=native on such a CPU)";
#endif
}

// forward() and backward() of a plan through the public API give the bits of the tile kernel
// run directly (so the dispatch really takes it).
template <class T>
void same_bits_as_tile(const avgpool::pooling<2>& plan, bool forward) {
    const auto& d = avgpool::detail::plan_access::data(plan);
    const index_t items = d.input_shape[0] * d.input_shape[1];
    std::vector<T> in(static_cast<std::size_t>(forward ? plan.input_size() : plan.output_size()));
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<T>(static_cast<double>(i % 23) * 0.37 - 3.0);
    const std::size_t n = static_cast<std::size_t>(forward ? plan.output_size() : plan.input_size());
    std::vector<T> api(n, T(7)), direct(n, T(9));
    const avgpool::detail::tile_kernel<T, 2> k(d, avgpool::detail::pool_op::average);
    if (forward) {
        ASSERT_TRUE(plan.forward(in.data(), api.data()).ok());
#if AVGPOOL_PERM_KERNEL
        if constexpr (std::is_same<T, float>::value) {
            // (Where the stride-2 kernel takes the plan, before the permute kernel, the tile
            // kernel's bits: checked below.)
            if (avgpool::detail::perm_applicable<T, 2>(d) && !avgpool::detail::s2_applicable<T, 2>(d)) {  // float planes 9 to 32 wide: that kernel
                avgpool::detail::perm_kernel<2>(d, avgpool::detail::pool_op::average).run(in.data(), direct.data(), 0, items);
                EXPECT_EQ(0, std::memcmp(api.data(), direct.data(), n * sizeof(T))) << "forward (permute kernel)";
                return;
            }
            if (avgpool::detail::perm_plane_applicable<T, 2>(d)) {  // planes up to 64: its whole-plane form
                avgpool::detail::perm_plane_kernel<T>(d, avgpool::detail::pool_op::average).run(in.data(), direct.data(), 0, items);
                EXPECT_EQ(0, std::memcmp(api.data(), direct.data(), n * sizeof(T))) << "forward (whole-plane permute)";
                return;
            }
        }
#endif
        k.run(in.data(), direct.data(), 0, items);
    } else {
        ASSERT_TRUE(plan.backward(in.data(), api.data()).ok());
#if AVGPOOL_STRIDE2_KERNEL
        if constexpr (std::is_same<T, float>::value) {
            if (avgpool::detail::s2_backward_applicable<T, 2>(d)) {  // rows 9 to 64 at stride 2 (backward_cf's bits)
                avgpool::detail::s2_backward<2>(d).run(in.data(), direct.data(), 0, items);
                EXPECT_EQ(0, std::memcmp(api.data(), direct.data(), n * sizeof(T))) << "backward (stride-2 kernel)";
                return;
            }
        }
#endif
#if AVGPOOL_PERM_KERNEL
        if constexpr (std::is_same<T, float>::value) {
            if (avgpool::detail::perm_backward_applicable<T, 2>(d)) {
                avgpool::detail::perm_backward<2>(d).run(in.data(), direct.data(), 0, items);
                EXPECT_EQ(0, std::memcmp(api.data(), direct.data(), n * sizeof(T))) << "backward (permute kernel)";
                return;
            }
            if (avgpool::detail::perm_plane_backward::applicable(d)) {  // planes up to 64: its whole-plane form
                avgpool::detail::perm_plane_backward(d).run(in.data(), direct.data(), 0, items);
                EXPECT_EQ(0, std::memcmp(api.data(), direct.data(), n * sizeof(T))) << "backward (whole-plane permute)";
                return;
            }
        }
#endif
        k.run_backward(in.data(), direct.data(), 0, items);
    }
    EXPECT_EQ(0, std::memcmp(api.data(), direct.data(), n * sizeof(T))) << (forward ? "forward" : "backward");
}

// ShuffleNet's geometry takes the tile kernel through the public API (float 7x7 on AVX-512:
// the whole-plane permute kernels, checked by same_bits_as_tile), and both passes agree with
// the reference; larger planes, long output rows and few planes stay with the row kernels.
TEST(TileKernel, ChosenForManySmallPlanes) {
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.strides = {2, 2};
    a.pads_begin = a.pads_end = {1, 1};
    for (index_t hw : {7, 14}) {
        auto plan = avgpool::pooling<2>::create({1, 40, hw, hw}, a);
        ASSERT_TRUE(plan);
        EXPECT_TRUE((avgpool::detail::tile_applicable<float, 2>(avgpool::detail::plan_access::data(*plan)))) << hw;
        std::mt19937_64 gen(static_cast<std::uint64_t>(hw));
        tile_check<float, 2>(*plan, gen, "shufflenet " + std::to_string(hw));
        same_bits_as_tile<float>(*plan, true);
        same_bits_as_tile<float>(*plan, false);
        same_bits_as_tile<double>(*plan, true);
        same_bits_as_tile<double>(*plan, false);
    }
    // A divisor override past 2^24 (exact in double only): the reciprocal is formed in double.
    avgpool::pool_attrs<2> big = a;
    big.divisor_override = (index_t(1) << 24) + 3;
    auto huge = avgpool::pooling<2>::create({1, 20, 7, 7}, big);
    ASSERT_TRUE(huge);
    std::mt19937_64 gen7(7);
    tile_check<float, 2>(*huge, gen7, "override 2^24 + 3");
    tile_check<double, 2>(*huge, gen7, "override 2^24 + 3, double");

    auto large = avgpool::pooling<2>::create({1, 40, 28, 28}, a);  // 784 inputs a plane
    auto larger = avgpool::pooling<2>::create({1, 40, 34, 34}, a);  // 1156
    auto few = avgpool::pooling<2>::create({1, 15, 7, 7}, a);       // under 16 planes
    avgpool::pool_attrs<2> s1 = a;
    s1.strides = {1, 1};
    auto long_rows = avgpool::pooling<2>::create({1, 40, 3, 17}, s1);  // 51 inputs, rows of 17
    ASSERT_TRUE(large && larger && few && long_rows);
    EXPECT_FALSE((avgpool::detail::tile_applicable<float, 2>(avgpool::detail::plan_access::data(*long_rows), true)));
    s1.strides = {1, 2};
    auto rows_16 = avgpool::pooling<2>::create({1, 40, 8, 31}, s1);  // output rows of 16
    ASSERT_TRUE(rows_16);
    EXPECT_FALSE((avgpool::detail::tile_applicable<float, 2>(avgpool::detail::plan_access::data(*rows_16))));
    EXPECT_TRUE((avgpool::detail::tile_applicable<float, 2>(avgpool::detail::plan_access::data(*rows_16), true)));
    const auto& dl = avgpool::detail::plan_access::data(*large);
    EXPECT_FALSE((avgpool::detail::tile_applicable<float, 2>(dl)));
    // Backward only, where the backward limit reaches 784 (not with 16-float vectors).
    const bool large_backward = avgpool::detail::tile_max_plane_backward >= 28 * 28;
    EXPECT_EQ((avgpool::detail::tile_applicable<float, 2>(dl, true)), large_backward);
    std::mt19937_64 gen(28);
    if (large_backward) tile_check<float, 2>(*large, gen, "shufflenet 28 backward");
    EXPECT_FALSE((avgpool::detail::tile_applicable<float, 2>(avgpool::detail::plan_access::data(*larger), true)));
    EXPECT_FALSE((avgpool::detail::tile_applicable<float, 2>(avgpool::detail::plan_access::data(*few), true)));
}

// Global pooling takes its own path (one contiguous sum per plane).
TEST(FastKernel, GlobalPooling) {
    std::mt19937_64 gen(11);
    avgpool::pool_attrs<2> a;
    a.kernel = {56, 57};
    compare<float, 2>({1, 3, 56, 57}, a, gen, "global 56x57");
    avgpool::pool_attrs<3> b;
    b.kernel = {32, 7, 7};
    compare<float, 3>({1, 2, 32, 7, 7}, b, gen, "global 32x7x7");
    compare<double, 3>({1, 2, 32, 7, 7}, b, gen, "global 32x7x7 double");
    auto plan = avgpool::pooling<3>::create({1, 2, 32, 7, 7}, b);
    ASSERT_TRUE(plan.ok());
    EXPECT_TRUE(avgpool::detail::plan_access::data(*plan).global);
}

// Global pools of small planes go through cf_kernel in groups of one vector's worth of planes
// (each plane's tail read as its last vector with the lanes already counted masked off):
// plane sizes around every multiple of the vector width up to past the grouped path's limit,
// plane counts that leave partial groups, both types and ranks 1-3; against the reference,
// the same bits however the planes are split between calls, and nothing read across planes.
template <class T, std::size_t R>
void global_groups_case(const avgpool::dims<R + 2>& shape, std::mt19937_64& gen, const std::string& t) {
    avgpool::pool_attrs<R> a;
    for (std::size_t ax = 0; ax < R; ++ax) a.kernel[ax] = shape[ax + 2];
    compare<T, R>(shape, a, gen, t);
    auto plan = avgpool::pooling<R>::create(shape, a);
    ASSERT_TRUE(plan.ok()) << t;
    const auto& d = avgpool::detail::plan_access::data(*plan);
    ASSERT_TRUE(d.global) << t;
    const index_t items = shape[0] * shape[1], n = plan->input_size() / items;
    avgpool_test::uniform<double> dist(-4.0, 4.0);
    std::vector<T> in(static_cast<std::size_t>(plan->input_size()));
    for (T& x : in) x = static_cast<T>(dist(gen));
    const avgpool::detail::cf_kernel<T, R> k(d, avgpool::detail::pool_op::average);
    std::vector<T> whole(static_cast<std::size_t>(items)), split(whole.size(), T(-7)), rows(whole.size(), T(-7));
    k.run(in.data(), whole.data(), 0, items);
    for (index_t cut : {index_t(1), index_t(3), items / 2, items - 1}) {
        if (cut <= 0 || cut >= items) continue;
        std::fill(split.begin(), split.end(), T(-7));
        k.run(in.data(), split.data(), cut, items);
        k.run(in.data(), split.data(), 0, cut);
        EXPECT_EQ(0, std::memcmp(whole.data(), split.data(), whole.size() * sizeof(T))) << t << " cut " << cut;
    }
    for (index_t i = 0; i < items; ++i) k.run_rows(in.data(), rows.data(), i, 0, 1);
    EXPECT_EQ(0, std::memcmp(whole.data(), rows.data(), whole.size() * sizeof(T))) << t << " run_rows";
    std::vector<T> via_api(whole.size(), T(-7));
    ASSERT_TRUE(plan->forward(in.data(), via_api.data())) << t;
    EXPECT_EQ(0, std::memcmp(whole.data(), via_api.data(), whole.size() * sizeof(T))) << t << " forward()";
    // Ones with a NaN at the end of every third plane and an infinity at the start of the
    // plane after it: each mean is exactly 1 (a lane counted twice or read from a neighbour
    // would show), NaN or infinity only where the plane holds one.
    std::fill(in.begin(), in.end(), T(1));
    for (index_t i = 0; i + 1 < items; i += 3) {
        in[static_cast<std::size_t>(i * n + n - 1)] = std::numeric_limits<T>::quiet_NaN();
        in[static_cast<std::size_t>((i + 1) * n)] = std::numeric_limits<T>::infinity();
    }
    k.run(in.data(), whole.data(), 0, items);
    for (index_t i = 0; i < items; ++i) {
        const T y = whole[static_cast<std::size_t>(i)];
        if (i % 3 == 0 && i + 1 < items) {
            EXPECT_TRUE(std::isnan(y)) << t << " plane " << i;
        } else if (i % 3 == 1) {
            EXPECT_TRUE(std::isinf(y)) << t << " plane " << i;
        } else {
            EXPECT_EQ(y, T(1)) << t << " plane " << i;
        }
    }
}

template <class T>
void global_groups_suite() {
    constexpr index_t L = static_cast<index_t>(avgpool::detail::vec<T>::width);
    const index_t most = avgpool::detail::global_group_max * L;
    std::mt19937_64 gen(77 + sizeof(T));
    for (index_t n : {L - 1, L, L + 1, 2 * L - 1, 3 * L + 1, most - 1, most, most + 1}) {
        if (n < 1) continue;
        global_groups_case<T, 1>({2, 2 * L + 3, n}, gen, "1-D n " + std::to_string(n));
        if (::testing::Test::HasFatalFailure()) return;
    }
    global_groups_case<T, 2>({1, 3 * L + 5, 7, 7}, gen, "7x7");
    global_groups_case<T, 2>({2, L + 1, 8, 8}, gen, "8x8");
    global_groups_case<T, 2>({1, 2 * L - 1, 13, 13}, gen, "13x13");
    global_groups_case<T, 2>({1, 5, 14, 14}, gen, "14x14");
    global_groups_case<T, 3>({1, L + 2, 2, 7, 7}, gen, "2x7x7");
    global_groups_case<T, 3>({1, 3, 3, 5, 3}, gen, "3x5x3");
}

TEST(FastKernel, GlobalSmallPlanesInGroups) {
    global_groups_suite<float>();
    global_groups_suite<double>();
}

}  // namespace

namespace {

// A window (or a gradient) of -0 values gives +0: the reference sums from 0 (as PyTorch's,
// oneDNN's and OpenVINO's CPU kernels do), and every fast kernel ends in plus_zero where its
// sum starts from the first tap. All -0 in, through average, sum and backward, both layouts,
// on geometries that reach every kernel family (same-grid, pair, permute, tile, block, row,
// global, channels-last register, ring and slice paths, both backward forms) and adaptive plans.
template <class T, std::size_t R, class Make>
void signed_zero_plans(const char* name, Make&& make) {
    for (auto layout : {avgpool::layout::channels_first, avgpool::layout::channels_last}) {
        SCOPED_TRACE(std::string(name) + (layout == avgpool::layout::channels_first ? " channels-first" : " channels-last"));
        auto plan = make(layout);
        ASSERT_TRUE(plan.ok());
        const std::size_t n_in = static_cast<std::size_t>(plan->input_size()), n_out = static_cast<std::size_t>(plan->output_size());
        const std::vector<T> in(n_in, T(-0.0f)), g(n_out, T(-0.0f));
        std::vector<T> out(n_out, T(7.0f)), sums(n_out, T(7.0f)), gi(n_in, T(7.0f));
        ASSERT_TRUE(plan->forward(in.data(), out.data()).ok());
        ASSERT_TRUE(plan->sum(in.data(), sums.data()).ok());
        ASSERT_TRUE(plan->backward(g.data(), gi.data()).ok());
        auto plus_zero = [](T v) {
            const double x = avgpool::detail::to_double(v);
            return x == 0.0 && !std::signbit(x);
        };
        for (std::size_t i = 0; i < n_out; ++i) {
            ASSERT_TRUE(plus_zero(out[i])) << "average, output " << i << ": " << avgpool::detail::to_double(out[i]);
            ASSERT_TRUE(plus_zero(sums[i])) << "sum, output " << i << ": " << avgpool::detail::to_double(sums[i]);
        }
        for (std::size_t i = 0; i < n_in; ++i)
            ASSERT_TRUE(plus_zero(gi[i])) << "backward, input " << i << ": " << avgpool::detail::to_double(gi[i]);
    }
}

template <class T, std::size_t R>
void signed_zero(const char* name, const avgpool::dims<R + 2>& s, const avgpool::pool_attrs<R>& a) {
    signed_zero_plans<T, R>(name, [&](avgpool::layout layout) { return avgpool::pooling<R>::create(s, a, layout); });
}

template <class T, std::size_t R>
void signed_zero_adaptive(const char* name, const avgpool::dims<R + 2>& s, const avgpool::dims<R>& o) {
    signed_zero_plans<T, R>(name, [&](avgpool::layout layout) { return avgpool::pooling<R>::create_adaptive(s, o, layout); });
}

// R-D attributes with the same kernel, stride and pads on every axis.
template <std::size_t R>
avgpool::pool_attrs<R> even_attrs(index_t k, index_t s, index_t pb, index_t pe) {
    avgpool::pool_attrs<R> a;
    a.kernel.fill(k);
    a.strides.fill(s);
    a.pads_begin.fill(pb);
    a.pads_end.fill(pe);
    return a;
}

template <class T>
void signed_zero_all() {
    signed_zero<T, 2>("3x3 stride 2 on 7x7", {1, 64, 7, 7}, even_attrs<2>(3, 2, 1, 1));
    signed_zero<T, 2>("3x3 stride 2 on 14x14", {1, 40, 14, 14}, even_attrs<2>(3, 2, 1, 1));
    signed_zero<T, 2>("3x3 stride 2 on 56x56", {1, 24, 56, 56}, even_attrs<2>(3, 2, 1, 1));
    signed_zero<T, 2>("3x3 stride 1 on 8x8", {1, 32, 8, 8}, even_attrs<2>(3, 1, 1, 1));
    signed_zero<T, 2>("3x3 stride 1 on 35x35", {1, 32, 35, 35}, even_attrs<2>(3, 1, 1, 1));
    signed_zero<T, 2>("3x3 stride 1 on 120x120", {1, 3, 120, 120}, even_attrs<2>(3, 1, 1, 1));
    signed_zero<T, 2>("2x2 stride 2 on 28x28", {1, 32, 28, 28}, even_attrs<2>(2, 2, 0, 0));
    signed_zero<T, 2>("2x2 stride 2 on 14x14", {1, 64, 14, 14}, even_attrs<2>(2, 2, 0, 0));
    signed_zero<T, 2>("global 7x7", {1, 64, 7, 7}, even_attrs<2>(7, 1, 0, 0));
    signed_zero<T, 2>("global 56x56", {1, 8, 56, 56}, even_attrs<2>(56, 1, 0, 0));
    signed_zero<T, 2>("7x7 stride 1 on 40x40", {1, 16, 40, 40}, even_attrs<2>(7, 1, 3, 3));
    signed_zero<T, 2>("5x5 stride 3 on 50x50", {1, 16, 50, 50}, even_attrs<2>(5, 3, 2, 2));
    signed_zero<T, 1>("1-D 3 stride 2 on 32", {1, 64, 32}, even_attrs<1>(3, 2, 0, 1));
    signed_zero<T, 1>("1-D 25 stride 1 on 120", {1, 16, 120}, even_attrs<1>(25, 1, 12, 12));
    signed_zero<T, 3>("3x3x3 stride 2 on 16^3", {1, 8, 16, 16, 16}, even_attrs<3>(3, 2, 0, 1));
    avgpool::pool_attrs<3> t = even_attrs<3>(2, 2, 1, 0);
    t.kernel = {2, 4, 3};
    t.pads_end = {0, 1, 0};
    signed_zero<T, 3>("2x4x3 stride 2 on 12x30x42", {1, 9, 12, 30, 42}, t);
    signed_zero_adaptive<T, 2>("adaptive 60x60 to 6x6", {1, 32, 60, 60}, {6, 6});
    signed_zero_adaptive<T, 2>("adaptive 5x5 to 9x9", {1, 16, 5, 5}, {9, 9});
    signed_zero_adaptive<T, 1>("adaptive 100 to 7", {1, 16, 100}, {7});
    signed_zero_adaptive<T, 3>("adaptive 8x14x14 to 2x3x3", {1, 16, 8, 14, 14}, {2, 3, 3});
}

}  // namespace

TEST(FastKernel, NegativeZeroWindowsGivePlusZero) {
    signed_zero_all<float>();
    signed_zero_all<double>();
    signed_zero_all<avgpool::bfloat16>();
    signed_zero_all<avgpool::float16>();
}
