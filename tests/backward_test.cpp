// The backward pass: the transpose of forward (PyTorch's semantics).
#include <gtest/gtest.h>

#include <avgpool/avgpool.hpp>

#include "support/geometry.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "support/conformance.hpp"
#include "support/random.hpp"

namespace {

using avgpool::index_t;
using avgpool_test::describe;
using V = std::vector<double>;

template <std::size_t R>
avgpool::pool_attrs<R> random_attrs(std::mt19937_64& gen) {
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    avgpool::pool_attrs<R> a;
    for (std::size_t ax = 0; ax < R; ++ax) {
        a.kernel[ax] = pick(1, 4);
        a.strides[ax] = pick(1, 3);
        a.dilations[ax] = pick(0, 3) == 0 ? 2 : 1;
        a.pads_begin[ax] = pick(0, 3);
        a.pads_end[ax] = pick(0, 3);
    }
    a.auto_pad = static_cast<avgpool::pad_type>(pick(0, 3));
    a.rounding = static_cast<avgpool::rounding_type>(pick(0, 2));
    a.divisor = static_cast<avgpool::divisor_type>(pick(0, 3));
    a.divisor_override = pick(0, 4) == 0 ? pick(1, 9) : 0;
    a.empty_window_nan = false;  // NaN outputs have no meaningful adjoint product
    a.oversized_kernel = pick(0, 1) == 1;
    return a;
}

// grad_in[i] = sum_o g[o] * d forward(x)[o] / d x[i]: forward is linear, so its column i is
// forward(e_i). Independent of the backward code; fine for tiny tensors.
template <std::size_t R>
V gradient_by_forward(const avgpool::pooling<R>& plan, const V& g) {
    const std::size_t n_in = static_cast<std::size_t>(plan.input_size());
    V e(n_in, 0.0), col(static_cast<std::size_t>(plan.output_size())), grad(n_in, 0.0);
    for (std::size_t i = 0; i < n_in; ++i) {
        e[i] = 1.0;
        plan.forward(e.data(), col.data());
        e[i] = 0.0;
        long double acc = 0;
        for (std::size_t o = 0; o < col.size(); ++o) acc += static_cast<long double>(g[o]) * col[o];
        grad[i] = static_cast<double>(acc);
    }
    return grad;
}

template <std::size_t R, class T>
void check_case(const avgpool::pooling<R>& plan, std::mt19937_64& gen) {
    avgpool_test::uniform<double> dist(-1, 1);
    const std::size_t n_in = static_cast<std::size_t>(plan.input_size()), n_out = static_cast<std::size_t>(plan.output_size());
    std::vector<T> x(n_in), g(n_out), y(n_out), gx(n_in, T(123));  // grad_in is overwritten
    for (T& v : x) v = static_cast<T>(dist(gen));
    for (T& v : g) v = static_cast<T>(dist(gen));
    ASSERT_TRUE(plan.forward(x.data(), y.data()).ok());
    ASSERT_TRUE(plan.backward(g.data(), gx.data()).ok());
    // Adjoint identity, to rounding: sum |terms| scales the tolerance.
    long double lhs = 0, rhs = 0, scale = 0;
    for (std::size_t o = 0; o < n_out; ++o) {
        lhs += static_cast<long double>(y[o]) * g[o];
        scale += std::fabs(static_cast<long double>(y[o]) * g[o]);
    }
    for (std::size_t i = 0; i < n_in; ++i) {
        rhs += static_cast<long double>(x[i]) * gx[i];
        scale += std::fabs(static_cast<long double>(x[i]) * gx[i]);
    }
    const double eps = sizeof(T) == 4 ? 0x1p-24 : 0x1p-53;
    EXPECT_LE(std::fabs(static_cast<double>(lhs - rhs)), 64 * eps * static_cast<double>(scale) + 1e-300)
        << "<forward(x), g> = " << static_cast<double>(lhs) << ", <x, backward(g)> = " << static_cast<double>(rhs);
    // Every element against the gradient built from forward passes.
    if (n_in <= 400) {
        const V gd(g.begin(), g.end());
        const V want = gradient_by_forward<R>(plan, gd);
        for (std::size_t i = 0; i < n_in; ++i)
            ASSERT_NEAR(static_cast<double>(gx[i]), want[i], 64 * eps * (1 + std::fabs(want[i])) * 16) << "input " << i;
    }
}

template <std::size_t R>
void random_backward(int cases, index_t max_extent) {
    std::mt19937_64 gen(4242 + R);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    int ran = 0;
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> s{};
        s[0] = pick(1, 2);
        s[1] = pick(1, 2);
        for (std::size_t a = 0; a < R; ++a) s[a + 2] = pick(1, max_extent);
        const auto a = random_attrs<R>(gen);
        const auto lay = pick(0, 1) == 0 ? avgpool::layout::channels_first : avgpool::layout::channels_last;
        auto plan = avgpool::pooling<R>::create(s, a, lay);
        if (!plan) continue;
        SCOPED_TRACE(describe<R>(s, a, "case " + std::to_string(c)) + (lay == avgpool::layout::channels_last ? " channels_last" : ""));
        check_case<R, float>(*plan, gen);
        check_case<R, double>(*plan, gen);
        if (::testing::Test::HasFatalFailure()) return;
        ++ran;
    }
    EXPECT_GT(ran, cases / 3);
}

TEST(Backward, AdjointRank1) { random_backward<1>(400, 40); }
TEST(Backward, AdjointRank2) { random_backward<2>(300, 9); }
TEST(Backward, AdjointRank3) { random_backward<3>(150, 5); }

TEST(Backward, AdjointAdaptive) {
    std::mt19937_64 gen(31);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    for (int c = 0; c < 100; ++c) {
        const avgpool::dims<4> s{1, pick(1, 2), pick(1, 9), pick(1, 9)};
        const avgpool::dims<2> o{pick(1, 11), pick(1, 11)};
        auto plan = avgpool::pooling<2>::create_adaptive(
            s, o, c % 2 ? avgpool::layout::channels_last : avgpool::layout::channels_first);
        ASSERT_TRUE(plan.ok());
        SCOPED_TRACE(c);
        check_case<2, float>(*plan, gen);
        check_case<2, double>(*plan, gen);
    }
}

// Hand cases (PyTorch's semantics).
TEST(Backward, HandWorked) {
    // avg_pool1d(k=2, s=1) on 3 inputs, grad ones: [0.5, 1, 0.5].
    avgpool::pool_attrs<1> a;
    a.kernel = {2};
    auto p = avgpool::pooling<1>::create({1, 1, 3}, a);
    ASSERT_TRUE(p.ok());
    V g{1, 1}, gi(3, 99);
    p->backward(g.data(), gi.data());
    EXPECT_EQ(gi, (V{0.5, 1, 0.5}));
    // k=2, s=2 on 5 inputs: input 4 lies in no window (floor) and gets 0.
    a.strides = {2};
    p = avgpool::pooling<1>::create({1, 1, 5}, a);
    V g2{2, 4}, gi2(5, 99);
    p->backward(g2.data(), gi2.data());
    EXPECT_EQ(gi2, (V{1, 1, 2, 2, 0}));
    // count_include_pad with pad 1, k=3: each window divides by 3; padding receives nothing.
    avgpool::pool_attrs<1> b;
    b.kernel = {3};
    b.pads_begin = b.pads_end = {1};
    b.divisor = avgpool::divisor_type::include_pad;
    p = avgpool::pooling<1>::create({1, 1, 2}, b);
    V g3{3, 6}, gi3(2, 99);
    p->backward(g3.data(), gi3.data());
    EXPECT_EQ(gi3, (V{3, 3}));  // each input is in both windows: 1 + 2
    // exclude_pad: divisors 2 and 2.
    b.divisor = avgpool::divisor_type::exclude_pad;
    p = avgpool::pooling<1>::create({1, 1, 2}, b);
    p->backward(g3.data(), gi3.data());
    EXPECT_EQ(gi3, (V{4.5, 4.5}));
    // divisor_override replaces the divisor.
    b.divisor_override = 3;
    p = avgpool::pooling<1>::create({1, 1, 2}, b);
    p->backward(g3.data(), gi3.data());
    EXPECT_EQ(gi3, (V{3, 3}));
}

TEST(Backward, NullPointersAndUntouched) {
    avgpool::pool_attrs<2> a;
    a.kernel = {2, 2};
    auto p = avgpool::pooling<2>::create({1, 1, 3, 3}, a);
    ASSERT_TRUE(p.ok());
    std::vector<float> g(4, 1.0f), gi(9, -3.0f);
    EXPECT_EQ(p->backward(static_cast<const float*>(nullptr), gi.data()).error().message(), "grad_out: null pointer");
    EXPECT_EQ(p->backward(g.data(), static_cast<float*>(nullptr)).error_code(), avgpool::errc::null_pointer);
    for (float v : gi) EXPECT_EQ(v, -3.0f);
}

// The fast channels-first kernel against the reference on larger random cases.

// Geometry for the fast kernel's paths: long kernels (k up to 30 on the last axis), strides
// 1..5 (gather at 1 and 2, scatter above), dilation, padding and every rounding, divisor and
// override; sometimes the window spans the whole axis (global along it).
template <std::size_t R>
avgpool::pool_attrs<R> random_fast_attrs(std::mt19937_64& gen, const avgpool::dims<R + 2>& s) {
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    avgpool::pool_attrs<R> a;
    for (std::size_t ax = 0; ax < R; ++ax) {
        const bool last = ax + 1 == R;
        const int kind = static_cast<int>(pick(0, 5));
        a.kernel[ax] = kind == 0 ? s[ax + 2] : kind == 1 && last ? pick(5, 30) : pick(1, 4);
        a.strides[ax] = pick(0, 2) == 0 ? pick(3, 5) : pick(1, 2);
        a.dilations[ax] = pick(0, 3) == 0 ? pick(2, 3) : 1;
        a.pads_begin[ax] = pick(0, 3);
        a.pads_end[ax] = pick(0, 3);
    }
    a.auto_pad = pick(0, 3) == 0 ? static_cast<avgpool::pad_type>(pick(1, 3)) : avgpool::pad_type::explicit_pads;
    a.rounding = static_cast<avgpool::rounding_type>(pick(0, 2));
    a.divisor = static_cast<avgpool::divisor_type>(pick(0, 3));
    a.divisor_override = pick(0, 4) == 0 ? pick(1, 9) : 0;
    a.empty_window_nan = pick(0, 3) == 0;  // backward ignores it: empty windows tap nothing
    return a;
}

// Runs the fast kernel in each order (best, slots, ring, per row) and the public backward() against the
// reference; grad_in starts as garbage to check every element is written.
template <class T, std::size_t R>
void expect_fast_matches(const avgpool::pooling<R>& plan, std::mt19937_64& gen, bool require_fast) {
    const auto& d = avgpool::detail::plan_access::data(plan);
    const bool fast = avgpool::detail::backward_cf_applicable<T, R>(d);
    if (require_fast) {
        ASSERT_TRUE(fast);
    }
    avgpool_test::uniform<double> dist(-1, 1);
    const std::size_t n_in = static_cast<std::size_t>(plan.input_size());
    std::vector<T> g(static_cast<std::size_t>(plan.output_size())), ref(n_in), got(n_in);
    for (T& v : g) v = static_cast<T>(dist(gen));
    const index_t items = plan.input_shape()[0] * plan.input_shape()[1];
    avgpool::detail::reference_backward<T, R>(d, g.data(), ref.data(), 0, items);
    // The error bound of any summation order: an input sums at most `terms` shares t (the
    // product of the most outputs covering one input, per axis), each rounded at most twice,
    // so |error| <= (terms + 2) * eps * sum |t|; sum |t| is the reference on |g| (the
    // divisors are positive). Twice that, for the rounding of the bound itself.
    std::vector<T> g_abs(g.size()), abs_ref(n_in);
    for (std::size_t i = 0; i < g.size(); ++i) g_abs[i] = std::abs(g[i]);
    avgpool::detail::reference_backward<T, R>(d, g_abs.data(), abs_ref.data(), 0, items);
    double terms = 1;
    for (std::size_t ax = 0; ax < R; ++ax)
        terms *= static_cast<double>(std::max<index_t>(1, avgpool::detail::max_cover<R>(d, ax)));
    const double eps = sizeof(T) == 4 ? 0x1p-24 : 0x1p-53;
    auto compare = [&](const char* what) {
        for (std::size_t i = 0; i < n_in; ++i) {
            const double tol = 2 * (terms + 2) * eps * static_cast<double>(abs_ref[i]);
            ASSERT_NEAR(static_cast<double>(got[i]), static_cast<double>(ref[i]), tol) << what << " input " << i;
        }
    };
    std::fill(got.begin(), got.end(), static_cast<T>(1e30));
    ASSERT_TRUE(plan.backward(g.data(), got.data()).ok());
    compare("backward()");
    if (d.memory_layout == avgpool::layout::channels_last && avgpool::detail::backward_cl_applicable<T, R>(d)) {
        // The gathering kernel with and without its expanded rows (public backward() may take
        // another kernel), in two calls over halves of its rows, each into its own buffer (a
        // call may copy only rows it wrote itself).
        for (bool expand : {true, false}) {
            const avgpool::detail::backward_cl<T, R> k(d, expand);
            const index_t half = k.items() / 2;
            const std::size_t cut = n_in / static_cast<std::size_t>(k.items()) * static_cast<std::size_t>(half);
            std::vector<T> second(n_in, static_cast<T>(-7));
            std::fill(got.begin(), got.end(), static_cast<T>(-7));
            k.run(g.data(), got.data(), 0, half);
            k.run(g.data(), second.data(), half, k.items());
            for (std::size_t i = 0; i < n_in; ++i) {  // nothing written outside each call's rows
                const T untouched = i < cut ? second[i] : got[i];
                ASSERT_EQ(untouched, static_cast<T>(-7)) << (expand ? "expanded" : "per row") << ": a call wrote input " << i;
            }
            std::copy(second.begin() + static_cast<std::ptrdiff_t>(cut), second.end(), got.begin() + static_cast<std::ptrdiff_t>(cut));
            compare(expand ? "gathering, expanded rows" : "gathering, per row");
        }
    }
    if (!fast) return;
    using order = avgpool::detail::backward_order;
    auto name = [](order o) { return o == order::best ? "best" : o == order::slots ? "slots" : o == order::ring ? "ring" : "per row"; };
    for (order o : {order::best, order::slots, order::ring, order::per_row}) {
        std::fill(got.begin(), got.end(), static_cast<T>(-7));
        // Two calls over halves of the items: a call must not write outside its planes.
        const avgpool::detail::backward_cf<T, R> k(d, o);
        k.run(g.data(), got.data(), 0, items / 2);
        k.run(g.data(), got.data(), items / 2, items);
        compare(name(o));
        if (d.global) continue;  // a fill; no row split
        // Row ranges (the few-plane split): each on its own sentinel-filled copy, which must
        // change in that range's rows of that plane only.
        const index_t rows = k.outer_rows();
        const index_t a = std::uniform_int_distribution<index_t>(0, rows)(gen);
        const index_t b = std::uniform_int_distribution<index_t>(a, rows)(gen);
        const std::size_t row_len = n_in / static_cast<std::size_t>(items * rows);
        std::vector<T> one(n_in);
        for (index_t item = 0; item < items; ++item) {
            for (auto range : {std::make_pair(index_t(0), a), std::make_pair(a, b), std::make_pair(b, rows)}) {
                if (range.first == range.second) continue;
                std::fill(one.begin(), one.end(), static_cast<T>(-7));
                k.run_rows(g.data(), one.data(), item, range.first, range.second);
                const std::size_t lo = static_cast<std::size_t>(item * rows + range.first) * row_len;
                const std::size_t hi = static_cast<std::size_t>(item * rows + range.second) * row_len;
                for (std::size_t i = 0; i < n_in; ++i) {
                    if (i >= lo && i < hi) {
                        got[i] = one[i];
                    } else {
                        ASSERT_EQ(one[i], static_cast<T>(-7)) << "rows [" << range.first << ", " << range.second
                                                            << ") of plane " << item << " wrote input " << i;
                    }
                }
            }
        }
        compare((std::string(name(o)) + ", row ranges").c_str());
        // Bit-identical to the whole planes of the same order.
        std::vector<T> whole(n_in);
        k.run(g.data(), whole.data(), 0, items);
        ASSERT_EQ(0, std::memcmp(whole.data(), got.data(), n_in * sizeof(T))) << "row ranges differ from whole planes";
    }
}

template <class T, std::size_t R>
void fast_vs_reference(int cases, index_t max_extent, index_t max_last) {
    std::mt19937_64 gen(777 + R + sizeof(T));
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    int ran = 0;
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> s{};
        s[0] = pick(1, 2);
        s[1] = pick(1, 3);
        for (std::size_t a = 0; a < R; ++a) s[a + 2] = pick(1, a + 1 == R ? max_last : max_extent);
        const auto a = random_fast_attrs<R>(gen, s);
        auto plan = avgpool::pooling<R>::create(s, a);
        if (!plan) continue;
        SCOPED_TRACE(describe<R>(s, a, "case " + std::to_string(c)));
        expect_fast_matches<T, R>(*plan, gen, true);
        if (::testing::Test::HasFatalFailure()) return;
        ++ran;
    }
    EXPECT_GT(ran, cases / 3);
}

TEST(Backward, FastMatchesReference) {
    fast_vs_reference<float, 1>(300, 0, 300);
    fast_vs_reference<double, 1>(200, 0, 120);
    fast_vs_reference<float, 2>(300, 12, 40);
    fast_vs_reference<double, 2>(200, 12, 40);
    fast_vs_reference<float, 3>(150, 7, 20);
    fast_vs_reference<double, 3>(100, 7, 20);
}

// The original geometry mix (small kernels, strides 1..3), on larger extents.
template <class T, std::size_t R>
void fast_vs_reference_small(int cases, index_t max_extent) {
    std::mt19937_64 gen(4711 + R);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> s{};
        s[0] = 1;
        s[1] = pick(1, 3);
        for (std::size_t a = 0; a < R; ++a) s[a + 2] = pick(1, max_extent);
        const auto a = random_attrs<R>(gen);
        auto plan = avgpool::pooling<R>::create(s, a);
        if (!plan) continue;
        SCOPED_TRACE(describe<R>(s, a, "case " + std::to_string(c)));
        expect_fast_matches<T, R>(*plan, gen, true);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(Backward, FastMatchesReferenceSmallKernels) {
    fast_vs_reference_small<float, 1>(200, 300);
    fast_vs_reference_small<double, 2>(150, 40);
    fast_vs_reference_small<float, 3>(80, 12);
}

// Kernel k's rows split at `cut` give one call's bytes, and storage H gives plan.backward's
// float result on the rounded gradients, rounded once.
template <class H, class T, std::size_t R, class Kernel>
void expect_split_and_storage(const avgpool::pooling<R>& plan, const Kernel& k, const std::vector<T>& g, index_t cut) {
    const std::size_t n_in = static_cast<std::size_t>(plan.input_size());
    std::vector<T> whole(n_in, T(-7)), halves(n_in, T(-7));
    k.run(g.data(), whole.data(), 0, k.items());
    k.run(g.data(), halves.data(), 0, cut);
    k.run(g.data(), halves.data(), cut, k.items());
    ASSERT_EQ(0, std::memcmp(whole.data(), halves.data(), n_in * sizeof(T))) << "split at row " << cut;
    if constexpr (std::is_same<T, float>::value) {
        std::vector<H> gh(g.size()), gih(n_in);
        std::vector<float> gr(g.size()), want(n_in);
        for (std::size_t i = 0; i < g.size(); ++i) {
            gh[i] = H(g[i]);
            gr[i] = static_cast<float>(gh[i]);
        }
        ASSERT_TRUE(plan.backward(gh.data(), gih.data()).ok());
        ASSERT_TRUE(plan.backward(gr.data(), want.data()).ok());
        for (std::size_t i = 0; i < n_in; ++i) ASSERT_EQ(H(want[i]).bits(), gih[i].bits()) << "16-bit input " << i;
    }
}

// expect_split_and_storage (float16 storage), then backward() through a thread pool equal
// to the sequential call bit for bit.
template <class T, std::size_t R, class Kernel>
void expect_split_storage_and_pool(const avgpool::pooling<R>& plan, const Kernel& k, const std::vector<T>& g, index_t cut,
                                   const avgpool::thread_pool& pool) {
    expect_split_and_storage<avgpool::float16>(plan, k, g, cut);
    if (::testing::Test::HasFatalFailure()) return;
    const std::size_t n_in = static_cast<std::size_t>(plan.input_size());
    std::vector<T> seq(n_in, T(-7)), pooled(n_in, T(-7));
    ASSERT_TRUE(plan.backward(g.data(), seq.data()).ok());
    ASSERT_TRUE(plan.backward(g.data(), pooled.data(), pool).ok());
    ASSERT_EQ(0, std::memcmp(seq.data(), pooled.data(), n_in * sizeof(T))) << "thread_pool(2)";
}

// The channels-last kernel against the reference: random geometries of every mode (dilation,
// adaptive, overrides, global windows), channel counts below, at and past a vector's width
// and not multiples of it, float, double and 16-bit storage (which must equal float's result
// rounded once); two calls over halves of the rows match one call bit for bit.
template <class T, std::size_t R>
void cl_vs_reference(int cases, index_t max_extent, index_t max_last) {
    std::mt19937_64 gen(5150 + R + sizeof(T));
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    // 260: rows too long to keep their shares (the uncached path).
    const index_t channels[] = {1, 3, 8, 16, 17, 33, 40, 64, 100, 260};
    int expanded = 0, ran = 0;  // plans whose short rows take the expanded (or fused) rows, of those run
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> s{};
        s[0] = pick(1, 2);
        s[1] = channels[static_cast<std::size_t>(c + c / 10) % 10];
        for (std::size_t a = 0; a < R; ++a) s[a + 2] = pick(1, a + 1 == R ? max_last : max_extent);
        avgpool::dims<R> out{};
        for (std::size_t a = 0; a < R; ++a) out[a] = pick(1, s[a + 2] + 2);
        const bool adaptive = c % 5 == 4;
        const auto a = random_fast_attrs<R>(gen, s);
        auto plan = adaptive ? avgpool::detail::plan_access::create_adaptive_exact<R>(s, out, avgpool::layout::channels_last)
                             : avgpool::detail::plan_access::create_exact<R>(s, a, avgpool::layout::channels_last);
        if (!plan) continue;
        SCOPED_TRACE(describe<R>(s, a, "case " + std::to_string(c)) + (adaptive ? " adaptive" : ""));
        const auto& d = avgpool::detail::plan_access::data(*plan);
        ASSERT_TRUE((avgpool::detail::backward_cl_applicable<T, R>(d)));
        expect_fast_matches<T, R>(*plan, gen, false);
        if (::testing::Test::HasFatalFailure()) return;
        std::vector<T> g(static_cast<std::size_t>(plan->output_size()));
        avgpool_test::uniform<double> dist(-1, 1);
        for (T& v : g) v = static_cast<T>(dist(gen));
        const avgpool::detail::backward_cl<T, R> k(d);
        expect_split_and_storage<avgpool::bfloat16>(*plan, k, g, pick(0, k.items()));
        if (::testing::Test::HasFatalFailure()) return;
        ++ran;
        if (k.expanded() || k.fused()) ++expanded;  // (fused: 2-D short rows that pair)
    }
    if (R >= 2) {  // (expect_fast_matches also runs the per-row path on every plan)
        EXPECT_GE(expanded, ran / 4) << "too few plans took the expanded rows: " << expanded << " of " << ran;
    }
}

// Windows that do not overlap, channels-last (the gathering kernel's direct path, and the
// expanded rows that such short rows take by default): every input
// gets exactly its window's gradient divided by the window's divisor, added to zero (PyTorch
// adds into a zeroed grad_input: a -0 gradient gives +0), bit for bit, for special values
// too: signed zeros, infinities, NaN, the largest finite value, subnormals.
// 2x2 stride 2 with ceil rounding on 7 columns (the last window one column wide), so
// divisors 4 and 2, which the kernel divides by a multiply; channels past a whole vector, and
// past two of the blocks of vectors that the direct path stores to every tap at once; the
// rows split anywhere.
template <class T>
void non_overlapping_exact(index_t C) {
    constexpr index_t H = 6, W = 7;
    avgpool::pool_attrs<2> a;
    a.kernel = {2, 2};
    a.strides = {2, 2};
    a.rounding = avgpool::rounding_type::ceil;
    auto plan = avgpool::detail::plan_access::create_exact<2>({1, C, H, W}, a, avgpool::layout::channels_last);
    ASSERT_TRUE(plan.ok());
    const auto& d = avgpool::detail::plan_access::data(*plan);
    ASSERT_TRUE((avgpool::detail::backward_cl_applicable<T, 2>(d)));
    const index_t Ho = plan->output_shape()[2], Wo = plan->output_shape()[3];
    ASSERT_EQ(Wo, 4);
    const T special[] = {T(-0.0), T(0), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
                         std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::max(),
                         std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::min(), T(-3)};
    std::mt19937_64 gen(77);
    avgpool_test::uniform<double> dist(-5, 5);
    std::vector<T> g(static_cast<std::size_t>(Ho * Wo * C));
    for (std::size_t i = 0; i < g.size(); ++i)
        g[i] = i % 3 == 0 ? special[(i / 3) % (sizeof(special) / sizeof(special[0]))] : static_cast<T>(dist(gen));
    for (const bool expand : {true, false}) {  // short rows: expanded, or the direct path
        SCOPED_TRACE(expand ? "expanded rows" : "direct path");
        std::vector<T> gi(static_cast<std::size_t>(H * W * C), T(99));
        const avgpool::detail::backward_cl<T, 2> k(d, expand);
        if (!expand) {
            ASSERT_FALSE(k.expanded());
        }
        k.run(g.data(), gi.data(), 0, k.items());
        for (index_t y = 0; y < H; ++y)
            for (index_t x = 0; x < W; ++x)
                for (index_t c = 0; c < C; ++c) {
                    const index_t o = ((y / 2) * Wo + x / 2) * C + c;
                    const T div = T(2 * (x == W - 1 ? 1 : 2));
                    const T want = T(0) + g[static_cast<std::size_t>(o)] / div;
                    const T got = gi[static_cast<std::size_t>((y * W + x) * C + c)];
                    if (std::isnan(want)) {
                        EXPECT_TRUE(std::isnan(got)) << y << " " << x << " " << c;
                    } else {
                        EXPECT_EQ(0, std::memcmp(&want, &got, sizeof(T)))
                            << "input (" << y << ", " << x << ") channel " << c << ": " << got << ", expected " << want;
                    }
                }
        // Rows split at every point, between the two rows of a window too (which one call writes
        // together), give the same bits, and a call writes no row past its range.
        for (index_t cut = 0; cut <= k.items(); ++cut) {
            std::vector<T> halves(gi.size(), T(99));
            k.run(g.data(), halves.data(), 0, cut);
            for (std::size_t i = static_cast<std::size_t>(cut * W * C); i < halves.size(); ++i)
                ASSERT_EQ(T(99), halves[i]) << "rows 0 .. " << cut - 1 << " wrote value " << i;
            k.run(g.data(), halves.data(), cut, k.items());
            ASSERT_EQ(0, std::memcmp(gi.data(), halves.data(), gi.size() * sizeof(T))) << "split at row " << cut;
        }
    }
}

TEST(Backward, NonOverlappingQuotientsExact) {
    namespace dt = avgpool::detail;
    for (const index_t blocks : {0, 2}) {
        SCOPED_TRACE(std::to_string(blocks) + " blocks of vectors");
        non_overlapping_exact<float>((2 + blocks * dt::bw_cl_spread_block) * static_cast<index_t>(dt::vec<float>::width) + 3);
        non_overlapping_exact<double>((2 + blocks * dt::bw_cl_spread_block) * static_cast<index_t>(dt::vec<double>::width) + 3);
    }
}

TEST(Backward, ChannelsLastMatchesReference) {
    cl_vs_reference<float, 1>(120, 0, 60);
    cl_vs_reference<double, 1>(60, 0, 60);
    cl_vs_reference<float, 2>(150, 10, 30);
    cl_vs_reference<double, 2>(60, 10, 30);
    cl_vs_reference<float, 3>(80, 6, 12);
    cl_vs_reference<double, 3>(40, 6, 12);
}

// Channels-last with strides up to the kernel, where backward is the forward kernel's sum over
// the flipped windows of the divided gradients (backward_cl_flip; half the cases stride 1,
// half strided below the kernel, whose flipped windows come from the cover tables): pads from 0 to kernel - 1 on each side, every
// divisor type and the override, channel counts at, past and not multiples of a vector, one
// and two images. Against the reference; the rows split at a random point match one call bit
// for bit, as do a thread pool's; 16-bit storage gives float's result on the rounded values,
// rounded once.
template <class T, std::size_t R>
void cl_flipped(int cases) {
    std::mt19937_64 gen(4242 + R + sizeof(T));
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    const index_t channels[] = {16, 17, 40, 64, 100};
    const index_t channels_strided[] = {64, 65, 100, 130};  // (fewer keep the gathering kernel)
    avgpool::thread_pool pool(2);
    int declined = 0, uncovered = 0;
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> s{};
        s[0] = pick(1, 2);
        const bool strided = c % 2 == 1;
        s[1] = strided ? channels_strided[static_cast<std::size_t>(c / 2) % 4] : channels[static_cast<std::size_t>(c / 2) % 5];
        avgpool::pool_attrs<R> a;
        for (std::size_t ax = 0; ax < R; ++ax) {
            const index_t k = pick(1, R == 1 ? 9 : R == 2 ? 5 : 3);
            a.kernel[ax] = k;
            a.strides[ax] = strided ? pick(1, std::max<index_t>(1, k - 1)) : 1;  // overlapping windows
            a.pads_begin[ax] = pick(0, k - 1);
            a.pads_end[ax] = pick(0, k - 1);
            s[ax + 2] = pick(2 * k - 1, 2 * k + (R == 3 ? 4 : 12));  // at least k outputs
        }
        const index_t mode = pick(0, 3);
        a.divisor = mode == 0 ? avgpool::divisor_type::include_pad : avgpool::divisor_type::exclude_pad;
        if (mode == 3) a.divisor_override = pick(1, 9);
        auto plan = avgpool::detail::plan_access::create_exact<R>(s, a, avgpool::layout::channels_last);
        ASSERT_TRUE(plan.ok());
        SCOPED_TRACE(describe<R>(s, a, "case " + std::to_string(c)));
        const auto& d = avgpool::detail::plan_access::data(*plan);
        if (strided && !avgpool::detail::backward_flip_applicable<T, R>(d)) {
            ++uncovered;  // some input no window taps (floor rounding at stride > 1)
            continue;
        }
        ASSERT_TRUE((avgpool::detail::backward_flip_applicable<T, R>(d)));
        const avgpool::detail::backward_cl_flip<T, R> k(d);
        if (!k.usable()) {  // the flipped sum would read whole slices (1-wide inner axes)
            ++declined;
            continue;
        }
        expect_fast_matches<T, R>(*plan, gen, false);
        if (::testing::Test::HasFatalFailure()) return;
        std::vector<T> g(static_cast<std::size_t>(plan->output_size()));
        avgpool_test::uniform<double> dist(-1, 1);
        for (T& v : g) v = static_cast<T>(dist(gen));
        expect_split_storage_and_pool(*plan, k, g, pick(0, k.items()), pool);
        if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_LT(declined, cases / 4);
    EXPECT_LT(uncovered, cases / 4);
}

// Which channels-last backward runs: the flipped sum wherever it applies with vectors narrower
// than 64 bytes; with 64-byte vectors (AVX-512) only where an input column gathers more than
// three output columns (7x7 stride 1), the gathering kernel's sliding path below that (3x3 at
// strides 1 and 2).
TEST(Backward, ChannelsLastFlipPreference) {
    auto plan = [](const avgpool::dims<4>& s, index_t k, index_t stride, index_t pad) {
        avgpool::pool_attrs<2> a;
        a.kernel = {k, k};
        a.strides = {stride, stride};
        a.pads_begin = a.pads_end = {pad, pad};
        return avgpool::detail::plan_access::create_exact<2>(s, a, avgpool::layout::channels_last);
    };
    auto s2 = plan({1, 144, 28, 28}, 3, 2, 1), s1 = plan({1, 192, 35, 35}, 3, 1, 1), k7 = plan({1, 1024, 8, 8}, 7, 1, 3);
    ASSERT_TRUE(s2.ok() && s1.ok() && k7.ok());
    const bool wide = avgpool::detail::vec<float>::width * sizeof(float) >= 64;
    for (const auto* p : {&*s2, &*s1, &*k7}) {
        const auto& d = avgpool::detail::plan_access::data(*p);
        ASSERT_TRUE((avgpool::detail::backward_flip_applicable<float, 2>(d)));
        EXPECT_EQ((avgpool::detail::backward_flip_preferred<float, 2>(d)), !wide || p == &*k7);
    }
}

// 3x3 stride 1 channels-last over more than 256 bytes of channels, where backward may take the
// flipped sum in pairs of output rows (AVX-512, every plan here: with one divisor the gradients
// read in place, else weighed as they are read): heights 5-24 (pairs, a row
// left alone), pads 0-2 on each side, every divisor mode, one and two images. Against the
// reference; the kernel's rows split at a random point match one call bit for bit (pairs on
// either side of the cut), a thread pool's result is the sequential one, and float16 storage
// gives float's result on the rounded gradients, rounded once.
TEST(Backward, ChannelsLastFlipPairs) {
    std::mt19937_64 gen(9191);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    const index_t channels[] = {65, 100, 144};
    const bool wide = avgpool::detail::vec<float>::width * sizeof(float) == 64;
    avgpool::thread_pool pool(2);
    const int cases = avgpool_test::under_asan ? 20 : 40;
    int paired = 0;
    for (int c = 0; c < cases; ++c) {
        const avgpool::dims<4> s{pick(1, 2), channels[static_cast<std::size_t>(c) % 3], pick(5, 24), pick(5, 14)};
        avgpool::pool_attrs<2> a;
        a.kernel = {3, 3};
        a.pads_begin = {pick(0, 2), pick(0, 2)};
        a.pads_end = {pick(0, 2), pick(0, 2)};
        const index_t mode = pick(0, 3);
        a.divisor = mode == 0 ? avgpool::divisor_type::include_pad : avgpool::divisor_type::exclude_pad;
        if (mode == 3) a.divisor_override = pick(1, 9);
        auto plan = avgpool::detail::plan_access::create_exact<2>(s, a, avgpool::layout::channels_last);
        ASSERT_TRUE(plan.ok());
        SCOPED_TRACE(describe<2>(s, a, "case " + std::to_string(c)));
        const auto& d = avgpool::detail::plan_access::data(*plan);
        ASSERT_TRUE((avgpool::detail::backward_flip_applicable<float, 2>(d)));
        EXPECT_EQ((avgpool::detail::backward_flip_pairs_candidate<float, 2>(d)), wide);
        const avgpool::detail::backward_cl_flip<float, 2> k(d);
        ASSERT_TRUE(k.usable());
        if (k.pairs_win()) ++paired;
        expect_fast_matches<float, 2>(*plan, gen, false);
        if (::testing::Test::HasFatalFailure()) return;
        std::vector<float> g(static_cast<std::size_t>(plan->output_size()));
        avgpool_test::uniform<double> dist(-1, 1);
        for (float& v : g) v = static_cast<float>(dist(gen));
        expect_split_storage_and_pool(*plan, k, g, pick(0, k.items()), pool);
        if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_EQ(paired, wide ? cases : 0);
}

// The flipped kernel k of a 2-D channels-last plan (backward() may pick the gathering kernel)
// on random gradients: against the reference within the bound; the rows split at a random
// point match one call bit for bit, as do a thread pool's; 16-bit storage gives float's
// result on the rounded gradients, rounded once; all gradients -0 give +0, and an infinite
// gradient at the first output (a corner, where pads are) reaches every input its window
// holds, the others 0.
template <class T>
void expect_flip_kernel(const avgpool::pooling<2>& plan, const avgpool::detail::backward_cl_flip<T, 2>& k,
                        std::mt19937_64& gen, const avgpool::thread_pool& pool) {
    const auto& d = avgpool::detail::plan_access::data(plan);
    const index_t planes = plan.input_shape()[0] * plan.input_shape()[1];
    const std::size_t n_in = static_cast<std::size_t>(plan.input_size()), n_out = static_cast<std::size_t>(plan.output_size());
    std::vector<T> g(n_out);
    avgpool_test::uniform<double> dist(-1, 1);
    for (T& v : g) v = static_cast<T>(dist(gen));
    std::vector<T> ref(n_in), abs_ref(n_in), g_abs(n_out), got(n_in, T(-7));
    avgpool::detail::reference_backward<T, 2>(d, g.data(), ref.data(), 0, planes);
    for (std::size_t i = 0; i < n_out; ++i) g_abs[i] = std::abs(g[i]);
    avgpool::detail::reference_backward<T, 2>(d, g_abs.data(), abs_ref.data(), 0, planes);
    k.run(g.data(), got.data(), 0, k.items());
    const double terms = static_cast<double>(d.geometry.kernel[0] * d.geometry.kernel[1]);
    const double eps = sizeof(T) == 4 ? 0x1p-24 : 0x1p-53;
    for (std::size_t i = 0; i < n_in; ++i) {
        const double tol = 2 * (terms + 2) * eps * static_cast<double>(abs_ref[i]);
        ASSERT_NEAR(static_cast<double>(got[i]), static_cast<double>(ref[i]), tol) << "input " << i;
    }
    expect_split_storage_and_pool(plan, k, g, std::uniform_int_distribution<index_t>(0, k.items())(gen), pool);
    if (::testing::Test::HasFatalFailure()) return;
    std::fill(g.begin(), g.end(), T(-0.0));
    k.run(g.data(), got.data(), 0, k.items());
    for (std::size_t i = 0; i < n_in; ++i) {
        ASSERT_EQ(got[i], T(0)) << "-0 gradients, input " << i;
        ASSERT_FALSE(std::signbit(got[i])) << "-0 gradients, input " << i;
    }
    g[0] = std::numeric_limits<T>::infinity();
    k.run(g.data(), got.data(), 0, k.items());
    avgpool::detail::reference_backward<T, 2>(d, g.data(), ref.data(), 0, planes);
    for (std::size_t i = 0; i < n_in; ++i) ASSERT_EQ(got[i], ref[i]) << "infinite gradient, input " << i;
}

// 2-D stride 1 channels-last whose windows all share the largest divisor but on the border
// (exclude-pad, at most an eighth of the outputs on it, 256 bytes of channels or more): the
// flipped sum divides by that divisor and each input then adds its border outputs'
// corrections (border_divisor). Kernels 1-5 per axis, pads 0 to kernel - 1, planes of 24-48,
// channel counts at, past and not multiples of a vector, one and two images, float and
// double: expect_flip_kernel.
template <class T>
void cl_flip_borders(int cases) {
    std::mt19937_64 gen(7373 + sizeof(T));
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    const index_t channels[] = {64, 65, 80, 100, 144, 200};
    avgpool::thread_pool pool(2);
    int corrected = 0;
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<4> s{pick(1, 2), channels[static_cast<std::size_t>(c) % 6], pick(24, 48), pick(24, 48)};
        avgpool::pool_attrs<2> a;
        for (std::size_t ax = 0; ax < 2; ++ax) {
            a.kernel[ax] = pick(1, 5);
            a.pads_begin[ax] = pick(0, a.kernel[ax] - 1);
            a.pads_end[ax] = pick(0, a.kernel[ax] - 1);
        }
        a.divisor = avgpool::divisor_type::exclude_pad;
        auto plan = avgpool::detail::plan_access::create_exact<2>(s, a, avgpool::layout::channels_last);
        ASSERT_TRUE(plan.ok());
        SCOPED_TRACE(describe<2>(s, a, "case " + std::to_string(c)));
        const auto& d = avgpool::detail::plan_access::data(*plan);
        if (!avgpool::detail::backward_flip_applicable<T, 2>(d)) continue;
        const avgpool::detail::backward_cl_flip<T, 2> k(d);
        if (!k.usable() || !k.border_corrected()) continue;
        ++corrected;
        expect_flip_kernel<T>(*plan, k, gen, pool);
        if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_GT(corrected, cases / 4);
}

// 3x3 stride 1 exclude-pad channels-last whose border holds more than an eighth of the outputs
// (planes of 3-20 rows): with AVX-512 the flipped sum pairs output rows and weighs each
// gradient by its divisor's reciprocal as it reads it (weighs_sources); elsewhere it never
// does. Pads 0-2 on each side, channel counts past 256 bytes and not multiples of a vector,
// one and two images, float and double: expect_flip_kernel.
template <class T>
void cl_flip_weighted(int cases) {
    std::mt19937_64 gen(4242 + sizeof(T));
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    const index_t channels[] = {65, 100, 144, 200, 300};
    const bool wide = avgpool::detail::vec<T>::width * sizeof(T) == 64;
    avgpool::thread_pool pool(2);
    int weighted = 0;
    for (int c = 0; c < cases; ++c) {
        const avgpool::dims<4> s{pick(1, 2), channels[static_cast<std::size_t>(c) % 5], pick(3, 20), pick(3, 14)};
        avgpool::pool_attrs<2> a;
        a.kernel = {3, 3};
        a.pads_begin = {pick(0, 2), pick(0, 2)};
        a.pads_end = {pick(0, 2), pick(0, 2)};
        a.divisor = avgpool::divisor_type::exclude_pad;
        auto plan = avgpool::detail::plan_access::create_exact<2>(s, a, avgpool::layout::channels_last);
        if (!plan) continue;  // (a 3-row input with no pads and ceil: no output)
        SCOPED_TRACE(describe<2>(s, a, "case " + std::to_string(c)));
        const auto& d = avgpool::detail::plan_access::data(*plan);
        if (!avgpool::detail::backward_flip_applicable<T, 2>(d)) continue;
        const avgpool::detail::backward_cl_flip<T, 2> k(d);
        if (!k.usable()) continue;
        if (!wide) {
            ASSERT_FALSE(k.weighs_sources());
        } else if (!k.weighs_sources()) {
            continue;  // one divisor (no pads), or the border form
        }
        weighted += k.weighs_sources();
        expect_flip_kernel<T>(*plan, k, gen, pool);
        if (::testing::Test::HasFatalFailure()) return;
    }
    if (wide) {
        EXPECT_GT(weighted, cases / 3);
    }
}

TEST(Backward, ChannelsLastFlipWeighted) {
    cl_flip_weighted<float>(avgpool_test::under_asan ? 16 : 40);
    cl_flip_weighted<double>(avgpool_test::under_asan ? 8 : 20);
}

// The gathering kernel k on plan: against the reference within the bound and split anywhere
// (expect_fast_matches), then on random gradients split at a random row, with float16
// storage and through a thread pool (expect_split_storage_and_pool).
template <class T, std::size_t R>
void expect_gathering_kernel(const avgpool::pooling<R>& plan, const avgpool::detail::backward_cl<T, R>& k, std::mt19937_64& gen,
                             const avgpool::thread_pool& pool) {
    expect_fast_matches<T, R>(plan, gen, false);
    if (::testing::Test::HasFatalFailure()) return;
    std::vector<T> g(static_cast<std::size_t>(plan.output_size()));
    avgpool_test::uniform<double> dist(-1, 1);
    for (T& v : g) v = static_cast<T>(dist(gen));
    expect_split_storage_and_pool(plan, k, g, std::uniform_int_distribution<index_t>(0, k.items())(gen), pool);
}

// 2-D short rows that pair as 3x3 stride 2's (a row of output rows q - 1 and q, then one of
// q alone), which the gathering kernel makes two at a time from output row q's quotients
// (run_fused): pads 0-2, floor and ceil rounding, both divisors and overrides, channel counts
// at and past a vector's width and not multiples of it, one and two images. Each plan
// against the reference within the bound and split anywhere (expect_fast_matches), split at
// a random row, with float16 storage equal to float's result rounded, and through a thread
// pool: the same bits.
template <class T>
void cl_paired_rows(int cases) {
    std::mt19937_64 gen(9090 + sizeof(T));
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    const index_t channels[] = {16, 17, 24, 32, 33};
    avgpool::thread_pool pool(2);
    int fused = 0;
    for (int c = 0; c < cases; ++c) {
        const index_t C = channels[static_cast<std::size_t>(c) % 5];
        // Output rows of at most 2 KB of quotients (the kernel's limit for this path).
        const index_t most_wo = 2048 / (C * static_cast<index_t>(sizeof(T)));
        const avgpool::dims<4> s{pick(1, 2), C, pick(3, 30), pick(3, std::min<index_t>(40, 2 * most_wo))};
        avgpool::pool_attrs<2> a;
        a.kernel = {3, 3};
        a.strides = {2, 2};
        a.pads_begin = {pick(0, 1), pick(0, 1)};
        a.pads_end = {pick(0, 2), pick(0, 2)};
        if (pick(0, 2) == 0) a.rounding = avgpool::rounding_type::ceil;
        a.divisor = pick(0, 1) ? avgpool::divisor_type::include_pad : avgpool::divisor_type::exclude_pad;
        if (pick(0, 4) == 0) a.divisor_override = pick(1, 9);
        auto plan = avgpool::detail::plan_access::create_exact<2>(s, a, avgpool::layout::channels_last);
        if (!plan) continue;  // (pads past half the kernel, or no output)
        SCOPED_TRACE(describe<2>(s, a, "case " + std::to_string(c)));
        const auto& d = avgpool::detail::plan_access::data(*plan);
        ASSERT_TRUE((avgpool::detail::backward_cl_applicable<T, 2>(d)));
        const avgpool::detail::backward_cl<T, 2> k(d);
        if (!k.fused()) continue;
        ++fused;
        expect_gathering_kernel<T>(*plan, k, gen, pool);
        if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_GT(fused, cases / 2);
}

// 3-D short rows whose planes alternate as 3x3x3 stride 2's do (a plane of first-axis outputs
// p - 1 and p between planes of each alone): the expanded rows make such a row from the rows
// a plane before and after it (bw_halves), once both are written, where the call writes them;
// else from its expansions, summed in the same order. First-axis kernel 3 or 2 at stride 2,
// random windows on the other axes, pads, both divisors and overrides; rows of 1-12 columns,
// channel counts at and past a vector's width: expect_fast_matches, then a random split, float16
// storage and a thread pool, bit for bit (expect_split_storage_and_pool).
template <class T>
void cl_plane_halves(int cases) {
    std::mt19937_64 gen(6060 + sizeof(T));
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    const index_t channels[] = {16, 17, 24, 33};
    avgpool::thread_pool pool(2);
    int between = 0;
    for (int c = 0; c < cases; ++c) {
        const avgpool::dims<5> s{pick(1, 2), channels[static_cast<std::size_t>(c) % 4], pick(5, 14), pick(1, 9), pick(1, 12)};
        avgpool::pool_attrs<3> a;
        a.kernel = {pick(2, 3), pick(1, std::min<index_t>(3, s[3])), pick(1, std::min<index_t>(3, s[4]))};
        a.strides = {2, pick(1, 2), pick(1, 2)};
        for (std::size_t ax = 0; ax < 3; ++ax) {
            a.pads_begin[ax] = pick(0, a.kernel[ax] / 2);
            a.pads_end[ax] = pick(0, a.kernel[ax] / 2 + 1);
        }
        a.divisor = pick(0, 1) ? avgpool::divisor_type::include_pad : avgpool::divisor_type::exclude_pad;
        if (pick(0, 4) == 0) a.divisor_override = pick(1, 9);
        auto plan = avgpool::detail::plan_access::create_exact<3>(s, a, avgpool::layout::channels_last);
        if (!plan) continue;
        SCOPED_TRACE(describe<3>(s, a, "case " + std::to_string(c)));
        const auto& d = avgpool::detail::plan_access::data(*plan);
        ASSERT_TRUE((avgpool::detail::backward_cl_applicable<T, 3>(d)));
        const avgpool::detail::backward_cl<T, 3> k(d);
        const auto& halves = d.bwd().bw_halves;
        if (!k.expanded() || std::none_of(halves.begin(), halves.end(), [](unsigned char h) { return (h & 4) != 0; }))
            continue;
        ++between;
        expect_gathering_kernel<T>(*plan, k, gen, pool);
        if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_GT(between, cases / 3);
}

TEST(Backward, ChannelsLastPlaneHalves) {
    cl_plane_halves<float>(avgpool_test::under_asan ? 20 : 60);
    cl_plane_halves<double>(avgpool_test::under_asan ? 10 : 30);
}

TEST(Backward, ChannelsLastPairedRows) {
    cl_paired_rows<float>(avgpool_test::under_asan ? 20 : 60);
    cl_paired_rows<double>(avgpool_test::under_asan ? 10 : 30);
}

TEST(Backward, ChannelsLastFlipBorders) {
    cl_flip_borders<float>(avgpool_test::under_asan ? 16 : 40);
    cl_flip_borders<double>(avgpool_test::under_asan ? 8 : 20);
}

TEST(Backward, ChannelsLastFlipped) {
    // The ring of divided gradients stays within flip_ring_bytes (16 MiB): a 1-D image is one
    // slab, so rows of 64 floats x 70000 outputs (17.9 MB) keep the gathering kernel.
    avgpool::pool_attrs<1> k3;
    k3.kernel = {3};
    k3.pads_begin = k3.pads_end = {1};
    auto fits = avgpool::detail::plan_access::create_exact<1>({1, 64, 60000}, k3, avgpool::layout::channels_last);
    auto too_long = avgpool::detail::plan_access::create_exact<1>({1, 64, 70000}, k3, avgpool::layout::channels_last);
    ASSERT_TRUE(fits.ok() && too_long.ok());
    EXPECT_TRUE((avgpool::detail::backward_flip_applicable<float, 1>(avgpool::detail::plan_access::data(*fits))));
    EXPECT_FALSE((avgpool::detail::backward_flip_applicable<float, 1>(avgpool::detail::plan_access::data(*too_long))));

    // Half the draws under AddressSanitizer, not sweep()'s quarter: the suites check the share
    // of strided draws that leave inputs uncovered, which needs the larger sample.
    auto draws = [](int n) { return avgpool_test::under_asan ? (n + 1) / 2 : n; };
    cl_flipped<float, 1>(draws(60));
    cl_flipped<double, 1>(draws(30));
    cl_flipped<float, 2>(draws(60));
    cl_flipped<double, 2>(draws(30));
    cl_flipped<float, 3>(draws(40));
    cl_flipped<double, 3>(draws(20));
}

// Long windows at stride 1 on the last axis, whose tapping output columns the channels-last
// kernel sums as block prefixes and suffixes: kernels 6-25 over rows at least three kernels
// long, channel counts at and past a vector's width, both divisor types.
template <class T, std::size_t R>
void cl_long_windows(int cases) {
    std::mt19937_64 gen(2718 + R + sizeof(T));
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    const index_t channels[] = {16, 40, 100};
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> s{};
        s[0] = 1;
        s[1] = channels[static_cast<std::size_t>(c) % 3];
        avgpool::pool_attrs<R> a;
        for (std::size_t ax = 0; ax + 1 < R; ++ax) {
            s[ax + 2] = pick(1, 6);
            a.kernel[ax] = pick(1, std::min<index_t>(3, s[ax + 2]));
            a.strides[ax] = pick(1, 2);
        }
        const index_t k = pick(6, 25);
        a.kernel[R - 1] = k;
        a.strides[R - 1] = 1;
        a.pads_begin[R - 1] = pick(0, k / 2);
        a.pads_end[R - 1] = pick(0, k / 2);
        s[R + 1] = pick(3 * k, 3 * k + 60);
        a.divisor = pick(0, 1) ? avgpool::divisor_type::include_pad : avgpool::divisor_type::exclude_pad;
        auto plan = avgpool::detail::plan_access::create_exact<R>(s, a, avgpool::layout::channels_last);
        ASSERT_TRUE(plan.ok());
        SCOPED_TRACE(describe<R>(s, a, "case " + std::to_string(c)));
        ASSERT_TRUE((avgpool::detail::backward_cl_applicable<T, R>(avgpool::detail::plan_access::data(*plan))));
        expect_fast_matches<T, R>(*plan, gen, false);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(Backward, ChannelsLastLongWindows) {
    cl_long_windows<float, 1>(30);
    cl_long_windows<double, 1>(15);
    cl_long_windows<float, 2>(20);
}

// Global pools (one window over the whole input): the fill path, every divisor type, pads
// (the window may be larger than the input) and the override.
template <class T, std::size_t R>
void global_vs_reference(int cases) {
    std::mt19937_64 gen(99 + R);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    int globals = 0;
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> s{};
        s[0] = pick(1, 2);
        s[1] = pick(1, 4);
        avgpool::pool_attrs<R> a;
        for (std::size_t ax = 0; ax < R; ++ax) {
            s[ax + 2] = pick(1, 12);
            a.pads_begin[ax] = pick(0, 1);
            a.pads_end[ax] = pick(0, 1);
            a.kernel[ax] = s[ax + 2] + a.pads_begin[ax] + a.pads_end[ax] - pick(0, 1);
            a.strides[ax] = pick(1, 3);
        }
        a.divisor = static_cast<avgpool::divisor_type>(pick(0, 3));
        a.divisor_override = pick(0, 3) == 0 ? pick(1, 9) : 0;
        auto plan = avgpool::pooling<R>::create(s, a);
        if (!plan) continue;
        SCOPED_TRACE(describe<R>(s, a, "case " + std::to_string(c)));
        globals += avgpool::detail::plan_access::data(*plan).global;
        expect_fast_matches<T, R>(*plan, gen, false);
        if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_GT(globals, cases / 10);
}

TEST(Backward, GlobalMatchesReference) {
    global_vs_reference<float, 1>(100);
    global_vs_reference<double, 2>(100);
    global_vs_reference<float, 3>(100);
    global_vs_reference<double, 3>(50);
}

// Global pools (backward_cl_global, backward_cf_global): one share per input, so
// bit-identical to the reference: channel counts around a vector's width, channels-last rows
// longer than the pattern (one position of 1 KiB or more, else up to 16 KiB of positions),
// channels-first planes below, at and above a vector
// with grad_in off the vector alignment, every divisor type, pads, the override, -0 gradients
// (+0 out), and split over threads in uneven chunks.
template <class T, std::size_t R>
void global_vs_reference(int cases, avgpool::layout layout) {
    std::mt19937_64 gen(515 + R + 7 * static_cast<int>(layout));
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    avgpool::thread_pool pool(2);
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> s{};
        s[0] = pick(1, 3);
        // c % 8 == 4: positions under 1 KiB, rows longer than the pattern of 16 KiB made of them
        s[1] = c % 8 == 4 ? pick(60, 200) : c % 4 == 0 ? pick(300, 700) : c % 4 == 2 && R >= 2 ? 1 : pick(1, 20);
        avgpool::pool_attrs<R> a;
        for (std::size_t ax = 0; ax < R; ++ax) {
            // c % 4 == 2: one plane past several of the channels-first kernel's work blocks
            s[ax + 2] = ax + 1 == R && c % 8 == 4   ? pick(90, 130)
                        : ax + 1 == R && c % 4 == 0 ? pick(10, 20)
                        : c % 4 == 2 && R >= 2 && ax < 2 ? pick(60, 130)
                                                         : pick(1, 6);
            a.pads_begin[ax] = pick(0, 1);
            a.pads_end[ax] = pick(0, 1);
            a.kernel[ax] = s[ax + 2] + a.pads_begin[ax] + a.pads_end[ax];
        }
        a.divisor = static_cast<avgpool::divisor_type>(pick(0, 3));
        a.divisor_override = pick(0, 3) == 0 ? pick(1, 9) : 0;
        auto plan = avgpool::pooling<R>::create(s, a, layout);
        ASSERT_TRUE(plan.ok());
        SCOPED_TRACE(describe<R>(s, a, "case " + std::to_string(c)));
        const auto& d = avgpool::detail::plan_access::data(*plan);
        ASSERT_TRUE((avgpool::detail::backward_global_applicable<avgpool::detail::compute_t<T>, R>(d)));
        const std::size_t n_in = static_cast<std::size_t>(plan->input_size()), off = c % 3 == 1 ? 1 : 0;
        std::vector<T> g(static_cast<std::size_t>(plan->output_size())), ref(n_in), seq(n_in + 2, T(7)), pooled(n_in + 2, T(7));
        avgpool_test::uniform<double> dist(-1, 1);
        for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<T>(i % 5 == 0 ? -0.0f : static_cast<float>(dist(gen)));
        avgpool::detail::reference_backward<T, R>(d, g.data(), ref.data(), 0, s[0] * s[1]);
        ASSERT_TRUE(plan->backward(g.data(), seq.data() + off).ok());
        ASSERT_TRUE(plan->backward(g.data(), pooled.data() + off, pool).ok());
        for (std::size_t i = 0; i < n_in; ++i) {  // 16-bit: the float quotient, rounded once
            const double want = avgpool::detail::to_double(ref[i]), got = avgpool::detail::to_double(seq[off + i]);
            ASSERT_EQ(std::signbit(want), std::signbit(got)) << "input " << i;
            ASSERT_EQ(want, got) << "input " << i;
        }
        for (std::size_t i : {std::size_t(0), n_in + 1}) {  // no write outside grad_in
            if (i != off) {
                ASSERT_EQ(7.0, avgpool::detail::to_double(seq[i])) << "element " << i << " of the buffer";
            }
        }
        ASSERT_EQ(0, std::memcmp(seq.data(), pooled.data(), (n_in + 2) * sizeof(T))) << "thread_pool(2)";
    }
}

// All gradients -0, channels-last: every input gets +0, as PyTorch's sum into a zeroed
// grad_input gives, through backward() and the gathering kernel with and without its expanded
// rows; rows shorter than a vector (a scalar path) among them.
template <std::size_t R>
void cl_negative_zero(const avgpool::dims<R + 2>& s, const avgpool::pool_attrs<R>& a) {
    auto plan = avgpool::detail::plan_access::create_exact<R>(s, a, avgpool::layout::channels_last);
    ASSERT_TRUE(plan.ok());
    SCOPED_TRACE(describe<R>(s, a, "negative zero"));
    const auto& d = avgpool::detail::plan_access::data(*plan);
    const std::vector<float> g(static_cast<std::size_t>(plan->output_size()), -0.0f);
    std::vector<float> gi(static_cast<std::size_t>(plan->input_size()), 5.0f);
    auto expect_plus_zero = [&](const char* what) {
        for (std::size_t i = 0; i < gi.size(); ++i) {
            ASSERT_EQ(gi[i], 0.0f) << what << " input " << i;
            ASSERT_FALSE(std::signbit(gi[i])) << what << " input " << i;
        }
    };
    ASSERT_TRUE(plan->backward(g.data(), gi.data()).ok());
    expect_plus_zero("backward()");
    ASSERT_TRUE((avgpool::detail::backward_cl_applicable<float, R>(d)));
    for (bool expand : {true, false}) {
        std::fill(gi.begin(), gi.end(), 5.0f);
        const avgpool::detail::backward_cl<float, R> k(d, expand);
        k.run(g.data(), gi.data(), 0, k.items());
        expect_plus_zero(expand ? "expanded rows" : "per row");
    }
}

TEST(Backward, ChannelsLastNegativeZeroGradients) {
    avgpool::pool_attrs<2> a;
    a.kernel = {1, 32};
    cl_negative_zero<2>({1, 1, 4, 32}, a);  // one output column of one channel: rows under a vector
    a.kernel = {2, 8};
    a.strides = {2, 8};
    cl_negative_zero<2>({1, 2, 4, 16}, a);
    a.kernel = {3, 3};
    a.strides = {2, 2};
    a.pads_begin = {1, 1};
    a.pads_end = {1, 1};
    cl_negative_zero<2>({2, 16, 9, 9}, a);
    cl_negative_zero<2>({1, 3, 9, 9}, a);
    avgpool::pool_attrs<3> b;
    b.kernel = {2, 2, 6};
    b.strides = {2, 2, 6};
    cl_negative_zero<3>({1, 3, 4, 4, 12}, b);
    b.kernel = {3, 3, 3};
    b.strides = {2, 2, 2};
    cl_negative_zero<3>({1, 17, 5, 6, 7}, b);
}

void global_suite(avgpool::layout layout) {
    global_vs_reference<float, 1>(40, layout);
    global_vs_reference<double, 2>(40, layout);
    global_vs_reference<float, 3>(40, layout);
    global_vs_reference<float, 4>(12, layout);
    global_vs_reference<avgpool::bfloat16, 2>(20, layout);
    global_vs_reference<avgpool::float16, 1>(20, layout);
}

TEST(Backward, GlobalChannelsLastExact) { global_suite(avgpool::layout::channels_last); }

TEST(Backward, GlobalChannelsFirstExact) { global_suite(avgpool::layout::channels_first); }

// Windows covering every axis but the first whole (i3d's 2x7x7 on 8x7x7): the path that fills
// each first-axis slice with one value. Any first-axis window, pads, every divisor type.
template <class T, std::size_t R>
void whole_inner_vs_reference(int cases) {
    std::mt19937_64 gen(404 + R);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    int whole = 0;
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> s{};
        s[0] = 1;
        s[1] = pick(1, 40);  // up to 40 planes: also the whole-plane (not row-split) calls
        avgpool::pool_attrs<R> a;
        s[2] = pick(1, 12);
        a.kernel[0] = pick(1, 4);
        a.strides[0] = pick(1, 3);
        a.dilations[0] = pick(1, 2);
        a.pads_begin[0] = pick(0, 1);
        a.pads_end[0] = pick(0, 1);
        for (std::size_t ax = 1; ax < R; ++ax) {
            s[ax + 2] = pick(1, 9);
            a.pads_begin[ax] = pick(0, 1);
            a.pads_end[ax] = pick(0, 1);
            a.kernel[ax] = s[ax + 2] + a.pads_begin[ax] + a.pads_end[ax];
        }
        a.divisor = static_cast<avgpool::divisor_type>(pick(0, 3));
        a.divisor_override = pick(0, 4) == 0 ? pick(1, 9) : 0;
        auto plan = avgpool::pooling<R>::create(s, a);
        if (!plan) continue;
        SCOPED_TRACE(describe<R>(s, a, "case " + std::to_string(c)));
        whole += plan->output_shape()[2] > 1;
        expect_fast_matches<T, R>(*plan, gen, false);
        if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_GT(whole, cases / 2);
}

TEST(Backward, WholeInnerAxesMatchReference) {
    whole_inner_vs_reference<float, 2>(60);
    whole_inner_vs_reference<double, 3>(50);
    whole_inner_vs_reference<float, 3>(60);
}

// Adaptive plans (windows of any start and length; upsampling gathers many outputs per
// input), ranks 1 to 3.
template <class T, std::size_t R>
void adaptive_vs_reference(int cases) {
    std::mt19937_64 gen(5150 + R);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> s{};
        avgpool::dims<R> o{};
        s[0] = pick(1, 2);
        s[1] = pick(1, 3);
        for (std::size_t ax = 0; ax < R; ++ax) {
            s[ax + 2] = pick(1, R == 1 ? 200 : 15);
            o[ax] = pick(1, R == 1 ? 250 : 20);
        }
        auto plan = avgpool::pooling<R>::create_adaptive(s, o);
        ASSERT_TRUE(plan.ok());
        SCOPED_TRACE(c);
        expect_fast_matches<T, R>(*plan, gen, false);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(Backward, AdaptiveMatchesReference) {
    adaptive_vs_reference<float, 1>(100);
    adaptive_vs_reference<double, 2>(100);
    adaptive_vs_reference<float, 3>(60);
}

// Plans whose expanded-row ring does not fit (wide outer output planes) still match.
TEST(Backward, WidePlanesMatchReference) {
    std::mt19937_64 gen(8);
    avgpool::pool_attrs<3> a;
    a.kernel = {3, 3, 3};
    a.strides = {2, 2, 2};
    a.pads_begin = a.pads_end = {1, 1, 1};
    auto p3 = avgpool::pooling<3>::create({1, 2, 5, 70, 130}, a);
    ASSERT_TRUE(p3.ok());
    expect_fast_matches<float, 3>(*p3, gen, true);
    avgpool::pool_attrs<2> b;
    b.kernel = {40, 9};
    b.strides = {1, 2};
    auto p2 = avgpool::pooling<2>::create({1, 2, 60, 300}, b);
    ASSERT_TRUE(p2.ok());
    expect_fast_matches<double, 2>(*p2, gen, true);
}

// Rows longer than the kernel's stack buffers (cf_buffer) take scratch share rows: random
// geometries on 1-D rows and 2-D planes up to 3 cf_buffer long, and adaptive rows, against the
// reference (they ran it before, at 15-25x forward's time on 16000-long rows).
TEST(Backward, LongRowsMatchReference) {
    namespace dt = avgpool::detail;
    std::mt19937_64 gen(2052);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    int long_rows = 0, planes = 0;
    auto longer = [&](const avgpool::pool_geometry<1>& g) {
        return (g.output[0] - 1) * g.strides[0] + (g.kernel[0] - 1) * g.dilations[0] + 1 > dt::cf_buffer;
    };
    // Windows dilated to twice the row and more (a whole-row kernel at dilation 2) stay with
    // the reference: their padded rows pass the scratch bound.
    auto spans_past_bound = [](index_t W, index_t Wo, index_t s, index_t k, index_t d) {
        const index_t len = (Wo - 1) * s + (k - 1) * d + 1;
        return len > dt::cf_buffer && len > 2 * (W + Wo);
    };
    for (int c = 0; c < avgpool_test::sweep(16); ++c) {
        const avgpool::dims<3> s{1, pick(1, 2), pick(c % 2 == 0 ? dt::cf_buffer + 8 : dt::cf_buffer / 2, 3 * dt::cf_buffer)};
        const auto a = random_fast_attrs<1>(gen, s);
        auto plan = avgpool::pooling<1>::create(s, a);
        if (!plan) continue;
        SCOPED_TRACE(describe<1>(s, a, "1-D case " + std::to_string(c)));
        const auto& g = plan->geometry();
        if (spans_past_bound(g.input[0], g.output[0], g.strides[0], g.kernel[0], g.dilations[0])) continue;
        long_rows += longer(g) ? 1 : 0;
        expect_fast_matches<float, 1>(*plan, gen, true);
        if (::testing::Test::HasFatalFailure()) return;
    }
    for (int c = 0; c < avgpool_test::sweep(8); ++c) {
        const avgpool::dims<4> s{1, 1, pick(1, 5), pick(dt::cf_buffer, 2 * dt::cf_buffer)};
        const auto a = random_fast_attrs<2>(gen, s);
        auto plan = avgpool::pooling<2>::create(s, a);
        if (!plan) continue;
        SCOPED_TRACE(describe<2>(s, a, "2-D case " + std::to_string(c)));
        const auto& g = plan->geometry();
        if (spans_past_bound(g.input[1], g.output[1], g.strides[1], g.kernel[1], g.dilations[1])) continue;
        ++planes;
        expect_fast_matches<double, 2>(*plan, gen, true);
        if (::testing::Test::HasFatalFailure()) return;
    }
    for (index_t o : {index_t(7), index_t(3000), index_t(9000)}) {
        auto plan = avgpool::pooling<1>::create_adaptive({1, 2, 5000}, {o});
        ASSERT_TRUE(plan.ok());
        SCOPED_TRACE("adaptive 5000 -> " + std::to_string(o));
        expect_fast_matches<float, 1>(*plan, gen, true);
        if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_GE(long_rows, avgpool_test::sweep(16) / 4);  // the point: rows past the stack buffers
    EXPECT_GE(planes, avgpool_test::sweep(8) / 4);
}

// Long kernels at stride 1 gather by blocks (cf_blocks_geometry), from the fewest taps that do
// to kernels past cf_buffer, also dilated, in every order against the reference.
TEST(Backward, LongKernelsGatherByBlocks) {
    namespace dt = avgpool::detail;
    std::mt19937_64 gen(1501);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    for (int c = 0; c < avgpool_test::sweep(24); ++c) {
        const index_t dil = c % 4 == 3 ? pick(2, 5) : 1;  // dilated: per-residue rows
        const index_t kmin = dil == 1 ? dt::cf_block_min_taps<float>() : dt::cf_block_min_dilated_taps<float>();
        const index_t k = c < 3 ? kmin + c : pick(kmin, c % 3 == 0 ? 2 * dt::cf_buffer / dil : 300);
        avgpool::pool_attrs<2> a;
        a.kernel = {pick(1, 3), k};
        a.strides = {pick(1, 2), 1};
        a.dilations = {1, dil};
        a.pads_begin = {0, pick(0, std::min<index_t>(k - 1, 40))};
        a.pads_end = {0, pick(0, k - 1)};
        a.rounding = static_cast<avgpool::rounding_type>(pick(0, 2));
        a.divisor = static_cast<avgpool::divisor_type>(pick(0, 2));
        a.divisor_override = pick(0, 4) == 0 ? pick(1, 9) : 0;
        const index_t span = (k - 1) * dil + 1;
        const avgpool::dims<4> s{1, pick(1, 2), pick(1, 4), pick(std::max<index_t>(1, span - 30), span + (c % 2 == 0 ? 2500 : 300))};
        auto plan = avgpool::pooling<2>::create(s, a);
        if (!plan) continue;
        SCOPED_TRACE(describe<2>(s, a, "case " + std::to_string(c)));
        ASSERT_TRUE((dt::cf_blocks_geometry<float, 2>(dt::plan_access::data(*plan))));
        expect_fast_matches<float, 2>(*plan, gen, true);
        expect_fast_matches<double, 2>(*plan, gen, true);
        if (::testing::Test::HasFatalFailure()) return;
    }
}

// plan_data::cover (computed, no longer tabled) against its definition: the outputs whose
// window span reaches input x, the first of them being the first span ending at or past x
// (or O); for fixed windows of every mode, adaptive ones (also O > X), and the flipped plans
// channels-last backward builds from the covers themselves.
template <std::size_t R>
void check_covers(const avgpool::detail::plan_data<R>& d, const std::string& what) {
    for (std::size_t a = 0; a < R; ++a) {
        const index_t O = d.geometry.output[a], X = d.geometry.input[a];
        const index_t reach = (d.geometry.kernel[a] - 1) * d.geometry.dilations[a];
        auto span = [&](index_t o) {
            const avgpool::detail::window& w = d.axis(a)[o];
            const index_t lo = d.adaptive ? w.first : o * d.geometry.strides[a] - d.geometry.pads_begin[a];
            return std::make_pair(lo, d.adaptive ? w.first + w.count - 1 : lo + reach);
        };
        index_t most = 0;
        for (index_t x = 0; x < X; ++x) {
            index_t first = O;
            for (index_t o = O; o-- > 0;)
                if (span(o).second >= x) first = o;
            index_t count = 0;
            for (index_t o = 0; o < O; ++o) {
                const bool in = span(o).first <= x && x <= span(o).second;
                if (in) {
                    ASSERT_EQ(o, first + count) << what << ": axis " << a << " input " << x << " outputs not consecutive";
                    ++count;
                }
            }
            const avgpool::detail::window c = d.cover(a, x);
            ASSERT_EQ(c.first, first) << what << ": axis " << a << " input " << x;
            ASSERT_EQ(c.count, count) << what << ": axis " << a << " input " << x;
            most = std::max(most, count);
        }
        ASSERT_EQ(d.cover_max[a], most) << what << ": axis " << a;
    }
}

TEST(Backward, CoversMatchSpans) {
    namespace dt = avgpool::detail;
    std::mt19937_64 gen(2053);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    int flipped = 0;
    for (int c = 0; c < 300; ++c) {
        const avgpool::dims<4> s{1, pick(1, 20), pick(1, 30), pick(1, 30)};
        const auto a = random_fast_attrs<2>(gen, s);
        auto plan = avgpool::pooling<2>::create(s, a, avgpool::layout::channels_last);
        if (!plan) continue;
        const std::string what = describe<2>(s, a, "case " + std::to_string(c));
        const auto& d = dt::plan_access::data(*plan);
        check_covers<2>(d, what);
        if (d.bwd().flipped != nullptr) {
            check_covers<2>(*d.bwd().flipped, what + " (flipped)");
            ++flipped;
        }
        if (::testing::Test::HasFatalFailure()) return;
        auto adaptive = avgpool::pooling<1>::create_adaptive({1, 1, pick(1, 40)}, {pick(1, 60)});
        ASSERT_TRUE(adaptive.ok());
        check_covers<1>(dt::plan_access::data(*adaptive), "adaptive, case " + std::to_string(c));
        if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_GT(flipped, 10);
}

// The row tables a plan keeps for backward stay bounded (65536 outer rows of 16x16 covers
// made a 346 MB plan); a plan past the bound builds them per call and still matches.
TEST(Backward, KeptTablesBounded) {
    namespace dt = avgpool::detail;
    avgpool::pool_attrs<3> a;
    a.kernel = {16, 16, 1};
    auto big = avgpool::pooling<3>::create({1, 1, 256, 256, 4}, a);
    ASSERT_TRUE(big.ok());
    const auto& d = dt::plan_access::data(*big);
    EXPECT_TRUE((dt::backward_cf_applicable<float, 3>(d)));
    EXPECT_TRUE(d.bwd().bw_taps.empty());
    EXPECT_LE(static_cast<index_t>(d.bwd().bw_taps.size()), dt::bw_table_taps);
    auto small = avgpool::pooling<3>::create({1, 1, 24, 24, 4}, a);
    ASSERT_TRUE(small.ok());
    EXPECT_FALSE(dt::plan_access::data(*small).bwd().bw_taps.empty());  // kept where it is small
    std::mt19937_64 gen(9);
    avgpool::pool_attrs<3> c;
    c.kernel = {9, 9, 1};
    c.strides = {4, 4, 1};
    auto tall = avgpool::pooling<3>::create({1, 1, 40, 2048, 4}, c);  // 81920 outer rows
    ASSERT_TRUE(tall.ok());
    EXPECT_TRUE(dt::plan_access::data(*tall).bwd().bw_taps.empty());
    expect_fast_matches<float, 3>(*tall, gen, true);
}

// The backward tables wait for the first backward call (plans that only run forward never pay
// for them), are shared by a copy made before it, and give the same bits either way.
TEST(Backward, TablesBuiltByTheFirstBackwardCall) {
    namespace dt = avgpool::detail;
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.strides = {2, 2};
    const auto plan = avgpool::pooling<2>::create({1, 32, 10, 10}, a, avgpool::layout::channels_last);
    ASSERT_TRUE(plan);
    const avgpool::pooling<2> copy = *plan;
    std::vector<float> x(static_cast<std::size_t>(plan->input_size()));
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& v : x) v = dist(rng);
    std::vector<float> y(static_cast<std::size_t>(plan->output_size()));
    ASSERT_TRUE(plan->forward(x.data(), y.data()));
    ASSERT_TRUE(plan->sum(x.data(), y.data()));
    EXPECT_TRUE(dt::plan_access::data_unbuilt(*plan).bwd().bw_col_at.empty()) << "built by forward";
    std::vector<float> g1(x.size(), 7.0f), g2(x.size(), 8.0f);
    ASSERT_TRUE(copy.backward(y.data(), g1.data()));
    EXPECT_FALSE(dt::plan_access::data_unbuilt(*plan).bwd().bw_col_at.empty()) << "not shared with the copy";
    ASSERT_TRUE(plan->backward(y.data(), g2.data()));
    EXPECT_EQ(0, std::memcmp(g1.data(), g2.data(), g1.size() * sizeof(float)));
    std::vector<double> yd(y.begin(), y.end()), want(x.size());
    avgpool::detail::reference_backward<double, 2>(dt::plan_access::data(*plan), yd.data(), want.data(), 0,
                                                   plan->input_shape()[0] * plan->input_shape()[1]);
    for (std::size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(g1[i], want[i], 1e-5 * (1.0 + std::abs(want[i]))) << i;
}

}  // namespace
