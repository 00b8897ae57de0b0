// Adaptive average pooling: windows [floor(o*X/O), ceil((o+1)*X/O)), divisor = window length.
#include <gtest/gtest.h>

#include <avgpool/avgpool.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "support/conformance.hpp"
#include "support/random.hpp"

namespace {

using avgpool::index_t;
using V = std::vector<double>;

template <std::size_t R, class T = double>
std::vector<T> adaptive(const avgpool::dims<R + 2>& shape, const avgpool::dims<R>& out_spatial,
                        const std::vector<T>& in, avgpool::layout lay = avgpool::layout::channels_first) {
    auto plan = avgpool::pooling<R>::create_adaptive(shape, out_spatial, lay);
    EXPECT_TRUE(plan.ok()) << plan.error().message();
    if (!plan) return {};
    std::vector<T> out(static_cast<std::size_t>(plan->output_size()), T(-999));
    EXPECT_TRUE(plan->forward(in.data(), out.data()).ok());
    return out;
}

// The hand cases. X = 5, O = 3: [0,2) [1,4) [3,5). X = 3, O = 5 (upsampling):
// [0,1) [0,2) [1,2) [1,3) [2,3).
TEST(Adaptive, HandWorkedWindows) {
    const V x{1, 2, 3, 4, 5};
    EXPECT_EQ((adaptive<1>({1, 1, 5}, {3}, x)), (V{1.5, 3, 4.5}));
    const V y{10, 20, 30};
    EXPECT_EQ((adaptive<1>({1, 1, 3}, {5}, y)), (V{10, 15, 20, 25, 30}));
    // 2-D: separable, divisor = product of the window lengths.
    const V z{1, 2, 3, 4, 5, 6, 7, 8, 9};  // 3x3 -> 2x2: windows [0,2) [1,3) per axis
    EXPECT_EQ((adaptive<2>({1, 1, 3, 3}, {2, 2}, z)), (V{3, 4, 6, 7}));
    auto plan = avgpool::pooling<1>::create_adaptive({1, 1, 5}, {3});
    ASSERT_TRUE(plan.ok());
    std::vector<float> d(3);
    plan->divisor(d.data());
    EXPECT_EQ(d, (std::vector<float>{2, 3, 2}));
    EXPECT_EQ(plan->geometry().kernel[0], 3);  // the largest window
}

// Integer arithmetic stays exact past 2^24 (float) and 2^53 (double) and past 64-bit products.
TEST(Adaptive, WindowsAreExactOnHugeExtents) {
    const index_t X = (index_t(1) << 40) + 3, O = 7;
    for (index_t o = 0; o < O; ++o) {
        const auto w = avgpool::detail::adaptive_window(o, X, O);
        __extension__ using wide = __int128;
        const index_t first = static_cast<index_t>(static_cast<wide>(o) * X / O);
        const wide end_num = static_cast<wide>(o + 1) * X;
        const index_t end = static_cast<index_t>((end_num + O - 1) / O);
        EXPECT_EQ(w.first, first) << o;
        EXPECT_EQ(w.count, end - first) << o;
    }
    // The portable 128-bit path (compilers without __int128) against __int128.
    std::mt19937_64 gen(5);
    for (int i = 0; i < 200000; ++i) {
        const index_t c = static_cast<index_t>(gen() >> (1 + gen() % 62)) | 1;
        const index_t a = static_cast<index_t>(gen() % static_cast<unsigned long long>(c));
        const index_t b = static_cast<index_t>(gen() >> (1 + gen() % 62));
        const auto p = avgpool::detail::mul_div_portable(a, b, c);
        const auto q = avgpool::detail::mul_div(a, b, c);
        ASSERT_EQ(p.value, q.value) << a << " * " << b << " / " << c;
        ASSERT_EQ(p.exact, q.exact) << a << " * " << b << " / " << c;
    }
}

// Brute force: windows by the definition in integer arithmetic, every tap visited.
template <std::size_t R>
V brute(const avgpool::dims<R + 2>& s, const avgpool::dims<R>& O, const V& in) {
    index_t in_vol = 1, out_vol = 1;
    for (std::size_t a = 0; a < R; ++a) in_vol *= s[a + 2], out_vol *= O[a];
    V out(static_cast<std::size_t>(s[0] * s[1] * out_vol));
    for (index_t p = 0; p < s[0] * s[1]; ++p) {
        for (index_t f = 0; f < out_vol; ++f) {
            index_t rem = f;
            avgpool::dims<R> o{}, lo{}, hi{};
            for (std::size_t a = R; a-- > 0;) {
                o[a] = rem % O[a];
                rem /= O[a];
                const index_t X = s[a + 2];
                lo[a] = o[a] * X / O[a];
                hi[a] = ((o[a] + 1) * X + O[a] - 1) / O[a];
            }
            long double sum = 0;
            index_t count = 0;
            for (index_t g = 0; g < in_vol; ++g) {
                index_t r2 = g;
                bool inside = true;
                for (std::size_t a = R; a-- > 0;) {
                    const index_t x = r2 % s[a + 2];
                    r2 /= s[a + 2];
                    inside = inside && x >= lo[a] && x < hi[a];
                }
                if (inside) {
                    sum += in[static_cast<std::size_t>(p * in_vol + g)];
                    ++count;
                }
            }
            out[static_cast<std::size_t>(p * out_vol + f)] = static_cast<double>(sum / count);
        }
    }
    return out;
}

template <std::size_t R>
void random_adaptive(int cases) {
    std::mt19937_64 gen(900 + R);
    auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
    for (int c = 0; c < cases; ++c) {
        avgpool::dims<R + 2> s{};
        avgpool::dims<R> O{};
        s[0] = pick(1, 2);
        s[1] = pick(1, 3);
        for (std::size_t a = 0; a < R; ++a) {
            s[a + 2] = pick(1, R == 1 ? 70 : 12);
            O[a] = pick(1, R == 1 ? 80 : 14);  // also larger than the input
        }
        index_t n = s[0] * s[1];
        for (std::size_t a = 0; a < R; ++a) n *= s[a + 2];
        V x(static_cast<std::size_t>(n));
        avgpool_test::uniform<double> dist(-2, 2);
        for (double& v : x) v = dist(gen);
        const V want = brute<R>(s, O, x);
        std::string trace = "case " + std::to_string(c) + " shape";
        for (index_t v : s) trace += " " + std::to_string(v);
        trace += " out";
        for (index_t v : O) trace += " " + std::to_string(v);
        SCOPED_TRACE(trace);
        const V got = adaptive<R>(s, O, x);
        ASSERT_EQ(got.size(), want.size());
        const std::vector<float> xf(x.begin(), x.end());
        const std::vector<float> gotf = adaptive<R, float>(s, O, xf);
        std::vector<index_t> shape(s.begin(), s.end()), out_shape(s.begin(), s.begin() + 2);
        out_shape.insert(out_shape.end(), O.begin(), O.end());
        const V got_last = adaptive<R>(s, O, avgpool_test::to_channels_last(x, shape), avgpool::layout::channels_last);
        const V want_last = avgpool_test::to_channels_last(want, out_shape);
        for (std::size_t i = 0; i < want.size(); ++i) {
            // Inputs in [-2, 2]: |error| <= 4 * (sum of window lengths) * eps * 2.
            ASSERT_NEAR(got[i], want[i], 1e-12) << i;
            ASSERT_NEAR(gotf[i], want[i], 4 * 40 * 0x1p-24 * 2) << i;
            ASSERT_NEAR(got_last[i], want_last[i], 1e-12) << i;
        }
    }
}

TEST(Adaptive, RandomRank1) { random_adaptive<1>(300); }
TEST(Adaptive, RandomRank2) { random_adaptive<2>(150); }
TEST(Adaptive, RandomRank3) { random_adaptive<3>(60); }

// Rows longer than the channels-first kernel's stack buffer (cf_buffer) take a scratch row
// there, and long windows vector sums (they ran the reference: 1x64x16000 to 100 took 4x the
// channels-last time). Against brute force, float and double, with the kernel asserted.
template <std::size_t R>
void long_rows(const avgpool::dims<R + 2>& s, const avgpool::dims<R>& O) {
    namespace dt = avgpool::detail;
    auto plan = avgpool::pooling<R>::create_adaptive(s, O);
    ASSERT_TRUE(plan.ok());
    ASSERT_GT(s[R + 1], dt::cf_buffer);
    ASSERT_TRUE((dt::cf_applicable<float, R>(dt::plan_access::data(*plan))));
    std::mt19937_64 gen(static_cast<std::uint64_t>(s[R + 1] + O[R - 1]));
    avgpool_test::uniform<double> dist(-2, 2);
    V x(static_cast<std::size_t>(plan->input_size()));
    for (double& v : x) v = dist(gen);
    const V want = brute<R>(s, O, x);
    const V got = adaptive<R>(s, O, x);
    const std::vector<float> gotf = adaptive<R, float>(s, O, std::vector<float>(x.begin(), x.end()));
    ASSERT_EQ(got.size(), want.size());
    // The longest window's taps bound the summation error (inputs in [-2, 2], rounded to float).
    double taps = 1;
    for (std::size_t a = 0; a < R; ++a) taps *= static_cast<double>((s[a + 2] + O[a] - 1) / O[a] + 1);
    for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-12) << i;
        ASSERT_NEAR(gotf[i], want[i], 4 * (taps + 2) * 0x1p-24 * 2) << i;
    }
}

TEST(Adaptive, LongRowsChannelsFirst) {
    for (index_t o : {index_t(1), index_t(3), index_t(20), index_t(1500), index_t(5000)}) {
        SCOPED_TRACE("1-D 2200 to " + std::to_string(o));
        long_rows<1>({1, 2, 2200}, {o});
    }
    SCOPED_TRACE("2-D 3x3000 to 2x7");
    long_rows<2>({1, 2, 3, 3000}, {2, 7});
}

// Output 1 on every axis is global pooling and takes that path.
TEST(Adaptive, OutputOneIsGlobal) {
    auto plan = avgpool::pooling<2>::create_adaptive({1, 4, 60, 60}, {1, 1});
    ASSERT_TRUE(plan.ok());
    EXPECT_TRUE(avgpool::detail::plan_access::data(*plan).global);
    std::vector<float> x(4 * 3600, 2.0f), y(4);
    plan->forward(x.data(), y.data());
    EXPECT_EQ(y, (std::vector<float>{2, 2, 2, 2}));
}

TEST(Adaptive, Errors) {
    auto p = avgpool::pooling<2>::create_adaptive({1, 4, 60, 60}, {6, 0});
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error().message(), "output_spatial[1] = 0: must be >= 1");
    p = avgpool::pooling<2>::create_adaptive({1, 0, 60, 60}, {6, 6});
    EXPECT_EQ(p.error().message(), "input_shape[1] = 0: channels C must be >= 1");
    // Extents past a plan's per-axis tables: errors, not failed allocations of the tables.
    p = avgpool::pooling<2>::create_adaptive({1, 1, 60, avgpool::index_t(1) << 62}, {6, 3});
    EXPECT_EQ(p.error().message(), "input_shape[3] = 4611686018427387904: must be <= 4294967296 (a plan's per-axis tables)");
    p = avgpool::pooling<2>::create_adaptive({1, 1, 60, 60}, {avgpool::index_t(1) << 40, 3});
    EXPECT_EQ(p.error().message(), "output_shape[2] = 1099511627776: must be <= 4294967296 (a plan's per-axis tables)");
    std::vector<float> x(3600, 1.0f), y(36, -1.0f);
#if AVGPOOL_HAS_EXCEPTIONS
    EXPECT_THROW((avgpool::adaptive_avg_pool<float, 2>(x.data(), {1, 1, 60, 60}, {6, -1}, y.data())), avgpool::error);
#endif
    for (float v : y) EXPECT_EQ(v, -1.0f);
    avgpool::adaptive_avg_pool<float, 2>(x.data(), {1, 1, 60, 60}, {6, 6}, y.data());
    for (float v : y) EXPECT_EQ(v, 1.0f);
}

// The OpenVINO AdaptiveAvgPool-8 reference vectors with values.
TEST(Adaptive, OpenVinoConformanceVectors) {
    AVGPOOL_REQUIRE_CONFORMANCE(doc, "openvino_tests.json");
    int checked = 0;
    for (const auto& e : doc->as_array()) {
        if (e.at("op").as_string() != "adaptive_avg_pool" || e.at("input").is_null()) continue;
        SCOPED_TRACE(e.at("name").as_string());
        const std::vector<index_t> shape = e.at("input_shape").as_int_vector();
        const std::vector<index_t> size = e.at("output_size").as_int_vector();
        const V x = e.at("input").as_double_vector(), want = e.at("output").as_double_vector();
        V got;
        switch (shape.size()) {
            case 3: got = adaptive<1>({shape[0], shape[1], shape[2]}, {size[0]}, x); break;
            case 4: got = adaptive<2>({shape[0], shape[1], shape[2], shape[3]}, {size[0], size[1]}, x); break;
            default:
                got = adaptive<3>({shape[0], shape[1], shape[2], shape[3], shape[4]}, {size[0], size[1], size[2]}, x);
        }
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < want.size(); ++i)
            EXPECT_NEAR(got[i], want[i], 1e-5 * std::fmax(1.0, std::fabs(want[i]))) << i;
        ++checked;
    }
    EXPECT_EQ(checked, 3);
}

}  // namespace
