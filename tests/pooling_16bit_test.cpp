// float16 and bfloat16 through forward, sum and backward: each 16-bit output within one of its
// own ulps of the float result on the same (16-bit) inputs (DESIGN.md section 3).
#include <gtest/gtest.h>

#include <avgpool/avgpool.hpp>

#include "support/geometry.hpp"
#include "support/random.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
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
    avgpool_test::uniform<float> dist(-3.0f, 3.0f);
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
void conversion_suite() {
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

TEST(SixteenBit, Float16) { conversion_suite<avgpool::float16>(); }
TEST(SixteenBit, BFloat16) { conversion_suite<avgpool::bfloat16>(); }

// The next 16-bit value's distance from h (away from zero): one ulp of h.
template <class H>
double ulp_of(H h) {
    const std::uint16_t b = static_cast<std::uint16_t>(h.bits() & 0x7fff);
    return static_cast<double>(static_cast<float>(H::from_bits(static_cast<std::uint16_t>(b + 1)))) -
           static_cast<double>(static_cast<float>(H::from_bits(b)));
}

// DESIGN.md section 3 for 16-bit: within one of its own ulps of a float result that is itself
// within 4 * (k_1 + ... + k_R) * eps * scale of the exact one (scale: the same operation on
// |values|, computed in double). A near-zero cancelling sum may come out of two float
// summation orders as 0 and as -7e-9, so ulps against one float result are not the test.
template <class H, std::size_t R>
void expect_within_bound(const avgpool::pooling<R>& plan, const std::vector<H>& got, const std::vector<double>& exact,
                         const std::vector<double>& scale, double ksum, const char* what) {
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double g = static_cast<double>(static_cast<float>(got[i]));
        if (std::isnan(exact[i])) {  // an empty window in NaN mode
            ASSERT_TRUE(std::isnan(g)) << what << " " << i;
            continue;
        }
        const double bound = 4.0 * ksum * std::ldexp(1.0, -24) * scale[i] + ulp_of(got[i]);
        ASSERT_LE(std::fabs(g - exact[i]), bound) << what << " " << i << ": " << g << " vs " << exact[i];
    }
    (void)plan;
}

// 16-bit through every kernel path (forward: the float kernels converting in registers;
// channels-first backward: staged float copies of chunks of planes). Geometries that reach each
// kernel, plane counts that make short last groups, both layouts, R = 1-3: each result within
// the accuracy bound, and bit-identical whatever the executor (chunks start at different planes).
template <class H, std::size_t R>
void kernel_case(const avgpool::dims<R + 2>& shape, const avgpool::pool_attrs<R>& a, avgpool::layout lay,
                 std::mt19937_64& gen) {
    auto plan = avgpool::pooling<R>::create(shape, a, lay);
    if (!plan) return;
    SCOPED_TRACE(avgpool_test::describe<R>(shape, a, lay == avgpool::layout::channels_last ? "cl" : "cf"));
    avgpool_test::uniform<float> dist(-3.0f, 3.0f);
    const std::size_t n_in = static_cast<std::size_t>(plan->input_size()), n_out = static_cast<std::size_t>(plan->output_size());
    std::vector<H> x(n_in), g(n_out);
    std::vector<double> xd(n_in), xa(n_in), gd(n_out), ga(n_out);
    for (std::size_t i = 0; i < n_in; ++i) {
        x[i] = H(dist(gen));
        xd[i] = static_cast<float>(x[i]);
        xa[i] = std::fabs(xd[i]);
    }
    for (std::size_t i = 0; i < n_out; ++i) {
        g[i] = H(dist(gen));
        gd[i] = static_cast<float>(g[i]);
        ga[i] = std::fabs(gd[i]);
    }
    double ksum = 0;
    for (std::size_t ax = 0; ax < R; ++ax) ksum += static_cast<double>(plan->geometry().kernel[ax]);
    std::vector<double> exact_y(n_out), scale_y(n_out), exact_s(n_out), scale_s(n_out), exact_b(n_in), scale_b(n_in);
    ASSERT_TRUE(plan->forward(xd.data(), exact_y.data()).ok());
    ASSERT_TRUE(plan->forward(xa.data(), scale_y.data()).ok());
    ASSERT_TRUE(plan->sum(xd.data(), exact_s.data()).ok());
    ASSERT_TRUE(plan->sum(xa.data(), scale_s.data()).ok());
    ASSERT_TRUE(plan->backward(gd.data(), exact_b.data()).ok());
    ASSERT_TRUE(plan->backward(ga.data(), scale_b.data()).ok());
    std::vector<H> y1(n_out), y2(n_out), y3(n_out), s1(n_out), b1(n_in), b2(n_in), b3(n_in);
    ASSERT_TRUE(plan->sum(x.data(), s1.data()).ok());
    avgpool::thread_pool pool(3);
    // Uneven chunks, one at a time: 1 item, then 2, then 3, ...
    auto uneven = [](avgpool::index_t count, const auto& fn) {
        for (avgpool::index_t b = 0, step = 1; b < count; b += step, ++step) fn(b, std::min(count, b + step));
    };
    ASSERT_TRUE(plan->forward(x.data(), y1.data()).ok());
    ASSERT_TRUE(plan->forward(x.data(), y2.data(), pool).ok());
    ASSERT_TRUE(plan->forward(x.data(), y3.data(), uneven).ok());
    ASSERT_TRUE(plan->backward(g.data(), b1.data()).ok());
    ASSERT_TRUE(plan->backward(g.data(), b2.data(), pool).ok());
    ASSERT_TRUE(plan->backward(g.data(), b3.data(), uneven).ok());
    expect_within_bound(*plan, y1, exact_y, scale_y, ksum, "forward");
    expect_within_bound(*plan, s1, exact_s, scale_s, ksum, "sum");
    expect_within_bound(*plan, b1, exact_b, scale_b, ksum, "backward");
    EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), n_out * sizeof(H))) << "forward: pool(3) differs";
    EXPECT_EQ(0, std::memcmp(y1.data(), y3.data(), n_out * sizeof(H))) << "forward: uneven chunks differ";
    EXPECT_EQ(0, std::memcmp(b1.data(), b2.data(), n_in * sizeof(H))) << "backward: pool(3) differs";
    EXPECT_EQ(0, std::memcmp(b1.data(), b3.data(), n_in * sizeof(H))) << "backward: uneven chunks differ";
}

template <class H>
void kernel_suite() {
    using avgpool::layout;
    std::mt19937_64 gen(sizeof(H) * 77 + 1);
    for (layout lay : {layout::channels_first, layout::channels_last}) {
        avgpool::pool_attrs<2> pair;  // 2x2 stride 2
        pair.kernel = {2, 2};
        pair.strides = {2, 2};
        kernel_case<H, 2>({1, 37, 16, 16}, pair, lay, gen);
        avgpool::pool_attrs<2> same;  // 3x3 stride 1 same grid, and 7x7
        same.kernel = {3, 3};
        same.pads_begin = same.pads_end = {1, 1};
        kernel_case<H, 2>({2, 9, 13, 11}, same, lay, gen);
        same.kernel = {7, 7};
        same.pads_begin = same.pads_end = {3, 3};
        kernel_case<H, 2>({1, 5, 20, 70}, same, lay, gen);  // wider rows than a segment
        avgpool::pool_attrs<2> narrow;  // narrow rows at stride 2
        narrow.kernel = {3, 3};
        narrow.strides = {2, 2};
        narrow.pads_begin = narrow.pads_end = {1, 1};
        kernel_case<H, 2>({1, 300, 7, 9}, narrow, lay, gen);  // many tiny planes: the tile kernel
        kernel_case<H, 2>({1, 12, 7, 9}, narrow, lay, gen);   // under 16 planes: the flat kernel
        kernel_case<H, 2>({1, 40, 20, 21}, narrow, lay, gen);  // planes over 256: the flat kernel
        avgpool::pool_attrs<2> global;
        global.kernel = {14, 14};
        kernel_case<H, 2>({1, 40, 14, 14}, global, lay, gen);
        avgpool::pool_attrs<3> cube;
        cube.kernel = {2, 3, 3};
        cube.strides = {1, 2, 1};
        cube.pads_begin = {0, 1, 1};
        kernel_case<H, 3>({1, 6, 5, 12, 10}, cube, lay, gen);
        // Large images: many rows, overlapping windows.
        kernel_case<H, 2>({1, 64, 40, 50}, same, lay, gen);
        cube.strides = {1, 1, 2};
        kernel_case<H, 3>({1, 16, 6, 20, 30}, cube, lay, gen);
        avgpool::pool_attrs<1> line;
        line.kernel = {25};
        line.pads_begin = line.pads_end = {12};
        kernel_case<H, 1>({2, 7, 100}, line, lay, gen);
        for (int c = 0; c < 40; ++c) {
            auto pick = [&](avgpool::index_t lo, avgpool::index_t hi) {
                return std::uniform_int_distribution<avgpool::index_t>(lo, hi)(gen);
            };
            const avgpool::dims<2> sp{pick(1, 30), pick(1, 40)};
            kernel_case<H, 2>({pick(1, 2), pick(1, 40), sp[0], sp[1]}, avgpool_test::random_attrs<2>(gen, sp), lay, gen);
            const avgpool::dims<1> s1{pick(1, 200)};
            kernel_case<H, 1>({1, pick(1, 20), s1[0]}, avgpool_test::random_attrs<1>(gen, s1), lay, gen);
            const avgpool::dims<3> s3{pick(1, 6), pick(1, 9), pick(1, 9)};
            kernel_case<H, 3>({1, pick(1, 9), s3[0], s3[1], s3[2]}, avgpool_test::random_attrs<3>(gen, s3), lay, gen);
            if (::testing::Test::HasFatalFailure()) return;
        }
    }
}

// The kernels that read 16-bit storage convert in registers as they load and once as they
// store: every output is the float kernel's result on the same values rounded once, bit for
// bit, with NaN, Inf and sums that overflow the 16-bit range. Channels-last: each path of the
// kernel (ring, register sliding, block sums, slices, general; channel tails, C under a
// vector). Channels-first: every kernel (2x2 stride 2, same grid, tile, permute, block, row, global),
// whole planes and few planes split by rows.
template <class H, std::size_t R>
void fused_case(const avgpool::dims<R + 2>& shape, const avgpool::pool_attrs<R>& a, std::mt19937_64& gen,
                avgpool::layout lay = avgpool::layout::channels_last, float tiny = 0.0f) {
    auto plan = avgpool::pooling<R>::create(shape, a, lay);
    if (!plan) return;
    const auto& d = avgpool::detail::plan_access::data(*plan);
    namespace dt = avgpool::detail;
    if (lay == avgpool::layout::channels_last ? !dt::cl_applicable<float, R>(d)
                                              : !(dt::pair_applicable<float, R>(d) || dt::same_applicable<float, R>(d) ||
                                                  dt::tile_applicable<float, R>(d) || dt::flat_applicable<float, R>(d) ||
                                                  dt::cf_applicable<float, R>(d) || dt::perm_applicable<float, R>(d) ||
                                                  dt::perm_plane_applicable<float, R>(d)))
        return;  // the reference path
    SCOPED_TRACE(avgpool_test::describe<R>(shape, a, lay == avgpool::layout::channels_last ? "cl" : "cf"));
    const std::size_t n_in = static_cast<std::size_t>(plan->input_size()), n_out = static_cast<std::size_t>(plan->output_size());
    avgpool_test::uniform<float> dist(-3.0f, 3.0f);
    std::uniform_int_distribution<int> kind(0, 199);
    const float big = std::is_same<H, avgpool::float16>::value ? 60000.0f : 3.0e38f;  // two overflow
    std::vector<H> x(n_in);
    std::vector<float> xf(n_in);
    for (std::size_t i = 0; i < n_in; ++i) {
        const int k = kind(gen);
        // tiny > 0: every value tiny * [-3, 3] (float subnormals: the bfloat16 stores' fallback).
        const float v = tiny > 0.0f ? tiny * dist(gen)
                        : k == 0    ? NAN
                        : k == 1    ? INFINITY
                        : k == 2    ? -INFINITY
                        : k < 6     ? big
                        : k < 9     ? 1e-6f * dist(gen)
                                    : dist(gen);
        x[i] = H(v);
        xf[i] = static_cast<float>(x[i]);
    }
    std::vector<float> yf(n_out);
    std::vector<H> y(n_out), y2(n_out);
    avgpool::thread_pool pool(2);
    for (int op = 0; op < 2; ++op) {
        ASSERT_TRUE((op == 0 ? plan->forward(xf.data(), yf.data()) : plan->sum(xf.data(), yf.data())).ok());
        ASSERT_TRUE((op == 0 ? plan->forward(x.data(), y.data()) : plan->sum(x.data(), y.data())).ok());
        ASSERT_TRUE((op == 0 ? plan->forward(x.data(), y2.data(), pool) : plan->sum(x.data(), y2.data(), pool)).ok());
        for (std::size_t o = 0; o < n_out; ++o) {
            // A NaN's sign and payload depend on operand order, which compilers may swap.
            if (std::isnan(yf[o])) {
                ASSERT_TRUE(std::isnan(static_cast<float>(y[o]))) << o;
            } else {
                ASSERT_EQ(y[o].bits(), H(yf[o]).bits()) << (op == 0 ? "forward " : "sum ") << o << ": " << yf[o];
            }
        }
        // The same bits through a thread pool, but for a NaN's sign: x86 keeps the first
        // operand's NaN, and Inf + -Inf makes a negative one, so a window holding both kinds
        // gives either sign by operand order. g++ -O3 -march=native orders it differently
        // for a short group of the grouped global sums (up to a vector of planes at once,
        // so a split's bounds change the groups): 1x40x13x13, float16, in session 34.
        for (std::size_t o = 0; o < n_out; ++o) {
            if (std::isnan(static_cast<float>(y[o]))) {
                ASSERT_TRUE(std::isnan(static_cast<float>(y2[o]))) << "pool(2) output " << o;
            } else {
                ASSERT_EQ(y[o].bits(), y2[o].bits()) << "pool(2) output " << o;
            }
        }
    }
}

template <class H>
void fused_suite() {
    std::mt19937_64 gen(sizeof(H) * 31 + 5);
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.strides = {2, 1};
    a.pads_begin = a.pads_end = {1, 1};
    for (avgpool::index_t C : {1, 3, 13, 16, 70, 96}) fused_case<H, 2>({2, C, 11, 9}, a, gen);  // ring, sliding, general
    a.strides = {2, 2};
    fused_case<H, 2>({1, 80, 9, 12}, a, gen);  // the ring path at stride 2
    fused_case<H, 2>({1, 80, 9, 12}, a, gen, avgpool::layout::channels_last, 1e-39f);  // subnormal outputs
    a.kernel = {1, 9};
    a.strides = {1, 1};
    a.pads_begin = a.pads_end = {0, 4};
    fused_case<H, 2>({1, 32, 3, 30}, a, gen);  // block sums
    avgpool::pool_attrs<2> tall;
    tall.kernel = {1030, 2};
    fused_case<H, 2>({1, 33, 1030, 2}, tall, gen);  // slices, many rows
    avgpool::pool_attrs<3> cube;
    cube.kernel = {2, 2, 2};
    cube.strides = {2, 2, 2};
    fused_case<H, 3>({1, 24, 4, 6, 6}, cube, gen);
    const auto cf = avgpool::layout::channels_first;
    avgpool::pool_attrs<2> pair;
    pair.kernel = pair.strides = {2, 2};
    for (avgpool::index_t w : {5, 14, 17, 40}) fused_case<H, 2>({1, 33, 9, w}, pair, gen, cf);
    avgpool::pool_attrs<2> same;
    for (int k : {3, 4, 5, 7}) {  // 4, 5, 7 with AVX-512: vertical first
        same.kernel = {k, k};
        same.pads_begin = {k / 2, k / 2};
        same.pads_end = {k - 1 - k / 2, k - 1 - k / 2};
        for (avgpool::index_t w : {7, 8, 13, 19, 56}) fused_case<H, 2>({2, 20, 8, w}, same, gen, cf);  // k = 3, 8 wide: narrow8
        fused_case<H, 2>({1, 2, 200, 250}, same, gen, cf);  // long rows (k = 3 in row segments without AVX-512)
        fused_case<H, 2>({1, 1, 37, 41}, same, gen, cf);    // one plane: the pool splits it by rows
    }
    avgpool::pool_attrs<2> narrow;  // stride 2 on small planes: the tile kernel
    narrow.kernel = {3, 3};
    narrow.strides = {2, 2};
    narrow.pads_begin = narrow.pads_end = {1, 1};
    for (avgpool::index_t w : {4, 7, 14, 17}) fused_case<H, 2>({1, 70, 7, w}, narrow, gen, cf);  // full and partial tiles
    // Rows 9 to 32 wide with AVX-512: the permute kernel (two rows a vector up to 16 wide).
    for (avgpool::index_t w : {14, 28, 32}) fused_case<H, 2>({1, 20, w, w}, narrow, gen, cf);
    fused_case<H, 2>({1, 20, 14, 14}, narrow, gen, cf, 1e-39f);  // subnormal outputs
    avgpool::pool_attrs<3> cube3;
    cube3.kernel = {3, 3, 3};
    cube3.strides = {2, 2, 2};
    fused_case<H, 3>({1, 40, 5, 6, 7}, cube3, gen, cf);
    for (avgpool::index_t w : {13, 30, 57}) fused_case<H, 2>({1, 40, 20, w}, narrow, gen, cf);  // planes over 256: block
    avgpool::pool_attrs<1> line;
    line.kernel = {3};
    line.strides = {2};
    fused_case<H, 1>({4, 17, 60}, line, gen, cf);
    fused_case<H, 2>({1, 3, 300, 250}, narrow, gen, cf);  // few planes: rows split, block kernel
    line.kernel = {7};
    line.dilations = {2};
    fused_case<H, 1>({1, 5, 3000}, line, gen, cf);  // the row kernel
    avgpool::pool_attrs<2> global;
    for (avgpool::index_t w : {7, 13, 40}) {
        global.kernel = {w, w};
        fused_case<H, 2>({1, 40, w, w}, global, gen, cf);  // grouped and contiguous global sums
    }
    for (int c = 0; c < avgpool_test::sweep(60); ++c) {
        auto pick = [&](avgpool::index_t lo, avgpool::index_t hi) {
            return std::uniform_int_distribution<avgpool::index_t>(lo, hi)(gen);
        };
        const avgpool::dims<2> sp{pick(1, 20), pick(1, 30)};
        fused_case<H, 2>({pick(1, 2), pick(1, 70), sp[0], sp[1]}, avgpool_test::random_attrs<2>(gen, sp), gen);
        const avgpool::dims<1> s1{pick(1, 100)};
        fused_case<H, 1>({1, pick(1, 40), s1[0]}, avgpool_test::random_attrs<1>(gen, s1), gen);
        const avgpool::dims<3> s3{pick(1, 6), pick(1, 8), pick(1, 8)};
        fused_case<H, 3>({1, pick(1, 40), s3[0], s3[1], s3[2]}, avgpool_test::random_attrs<3>(gen, s3), gen);
        fused_case<H, 2>({pick(1, 2), pick(1, 40), sp[0], sp[1]}, avgpool_test::random_attrs<2>(gen, sp), gen, cf);
        fused_case<H, 3>({1, pick(1, 40), s3[0], s3[1], s3[2]}, avgpool_test::random_attrs<3>(gen, s3), gen, cf);
        fused_case<H, 1>({1, pick(1, 40), s1[0]}, avgpool_test::random_attrs<1>(gen, s1), gen, cf);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(SixteenBit, FusedFloat16) { fused_suite<avgpool::float16>(); }
TEST(SixteenBit, FusedBFloat16) { fused_suite<avgpool::bfloat16>(); }

TEST(SixteenBit, KernelsFloat16) { kernel_suite<avgpool::float16>(); }
TEST(SixteenBit, KernelsBFloat16) { kernel_suite<avgpool::bfloat16>(); }

// Few large planes, channels-first backward: float splits them by input rows (the row kernels:
// 2x2 stride 2, same grid, permute, row); 16-bit storage runs those same kernels on the same
// blocks of rows (each staging its gradient plane), so its result is float's on the same
// values rounded once, bit for bit, with any executor. (Before, it ran the whole-plane
// kernels float runs on many planes, a float ulp away: 14 of 16740 values of 1x20x12x9x9
// differed in SSE2 and AVX2 builds.)
template <class H, std::size_t R>
void split_backward_case(const avgpool::dims<R + 2>& shape, const avgpool::pool_attrs<R>& a, std::mt19937_64& gen) {
    auto plan = avgpool::pooling<R>::create(shape, a);
    ASSERT_TRUE(plan.ok());
    SCOPED_TRACE(avgpool_test::describe<R>(shape, a, "cf backward"));
    index_t planes = shape[0] * shape[1], rows = 1;
    for (std::size_t ax = 0; ax + 1 < R; ++ax) rows *= shape[ax + 2];
    ASSERT_TRUE(avgpool::detail::plane_blocks(planes, rows, plan->input_size()).split()) << "not the few-plane regime";
    const std::size_t n_in = static_cast<std::size_t>(plan->input_size()), n_out = static_cast<std::size_t>(plan->output_size());
    avgpool_test::uniform<float> dist(-3.0f, 3.0f);
    std::vector<H> g(n_out), gi(n_in), gi_pool(n_in), gi_uneven(n_in);
    std::vector<float> gf(n_out), gif(n_in);
    for (std::size_t o = 0; o < n_out; ++o) {
        g[o] = H(dist(gen));
        gf[o] = static_cast<float>(g[o]);
    }
    ASSERT_TRUE(plan->backward(gf.data(), gif.data()).ok());
    ASSERT_TRUE(plan->backward(g.data(), gi.data()).ok());
    avgpool::thread_pool pool(2);
    ASSERT_TRUE(plan->backward(g.data(), gi_pool.data(), pool).ok());
    // Uneven chunks (1 item, then 2, 3, ...): blocks of rows that start and end inside planes.
    auto uneven = [](index_t count, const auto& fn) {
        for (index_t b = 0, step = 1; b < count; b += step, ++step) fn(b, std::min(count, b + step));
    };
    ASSERT_TRUE(plan->backward(g.data(), gi_uneven.data(), uneven).ok());
    for (std::size_t i = 0; i < n_in; ++i) {
        ASSERT_EQ(H(gif[i]).bits(), gi[i].bits()) << "input " << i << ": float " << gif[i];
        ASSERT_EQ(gi[i].bits(), gi_pool[i].bits()) << "pool(2), input " << i;
        ASSERT_EQ(gi[i].bits(), gi_uneven[i].bits()) << "uneven chunks, input " << i;
    }
}

template <class H>
void split_backward_suite() {
    std::mt19937_64 gen(sizeof(H) * 17 + 9);
    avgpool::pool_attrs<3> a3;
    a3.kernel = {1, 3, 1};
    a3.strides = {1, 2, 1};
    a3.pads_begin = a3.pads_end = {0, 2, 0};
    split_backward_case<H, 3>({1, 20, 12, 9, 9}, a3, gen);
    a3.pads_begin = a3.pads_end = {0, 0, 0};
    split_backward_case<H, 3>({1, 20, 12, 9, 9}, a3, gen);
    a3.kernel = {3, 3, 3};
    a3.strides = {2, 2, 2};
    a3.pads_begin = a3.pads_end = {1, 1, 1};
    a3.divisor = avgpool::divisor_type::include_pad;
    split_backward_case<H, 3>({1, 4, 16, 17, 18}, a3, gen);
    avgpool::pool_attrs<2> a2;
    a2.kernel = {2, 2};
    a2.strides = {2, 2};
    split_backward_case<H, 2>({1, 3, 96, 100}, a2, gen);  // 2x2 stride 2
    a2.kernel = {3, 3};
    a2.strides = {1, 1};
    a2.pads_begin = a2.pads_end = {1, 1};
    split_backward_case<H, 2>({1, 2, 100, 90}, a2, gen);  // same grid
    a2.strides = {2, 2};
    a2.rounding = avgpool::rounding_type::ceil;
    split_backward_case<H, 2>({2, 5, 64, 70}, a2, gen);
    a2.kernel = {5, 4};
    a2.strides = {3, 2};
    a2.dilations = {1, 2};
    a2.pads_begin = a2.pads_end = {2, 0};
    split_backward_case<H, 2>({1, 7, 80, 61}, a2, gen);
}

TEST(SixteenBit, SplitBackwardFloat16) { split_backward_suite<avgpool::float16>(); }
TEST(SixteenBit, SplitBackwardBFloat16) { split_backward_suite<avgpool::bfloat16>(); }

// Plans no fast kernel takes (rank 4) run the reference kernel on 16-bit values.
template <class H>
void reference_path() {
    std::mt19937_64 gen(sizeof(H) * 5 + 3);
    avgpool::pool_attrs<4> a;
    a.kernel = {2, 1, 3, 2};
    a.strides = {1, 2, 2, 1};
    a.pads_begin = {0, 1, 1, 0};
    a.pads_end = {1, 0, 1, 1};
    auto plan = avgpool::pooling<4>::create({1, 3, 3, 4, 5, 6}, a);
    ASSERT_TRUE(plan.ok());
    check<H>(*plan, gen);
}

TEST(SixteenBit, ReferencePathFloat16) { reference_path<avgpool::float16>(); }
TEST(SixteenBit, ReferencePathBFloat16) { reference_path<avgpool::bfloat16>(); }

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
