// Randomized tests: pooling<R>::create + forward / sum / divisor (float and double, both
// layouts, R = 1..4) against the brute-force oracle in support/brute_force.hpp, which is written
// from DESIGN.md section 1 alone.
//
// Coverage is by construction, not by luck: for every combination of pad_type x rounding_type x
// divisor_type x (divisor_override on/off) x (empty_window_nan on/off) we draw random geometries
// until kValidPerMode of them are valid (invalid ones met on the way are checked too: create
// must reject them). Each geometry is drawn from its own std::mt19937_64 seeded with a number
// printed in every failure (SCOPED_TRACE), together with the whole geometry, so a failure can be
// replayed alone: AVGPOOL_RANDOM_REPLAY="<R> <suite> <seed> <mode_index>" (environment) runs just
// that case in the ReplayFromEnvironment test. AVGPOOL_RANDOM_SEED (environment) changes the
// base seed for exploratory runs; the default is fixed.
//
// Accuracy bar (DESIGN.md section 3), per output:
//   |got - ref| <= 4 * (k_1 + ... + k_R) * eps * (sum of |x| over the window's taps) / divisor
// with ref computed in long double from the very values given to the library. A window whose
// divisor is 0 must give exactly 0, or NaN with empty_window_nan. sum() must be within
// 4 * (k_1 + ... + k_R) * eps * (sum of |x|). divisor() must be exact.
#include "support/brute_force.hpp"
#include "support/random.hpp"

#include <avgpool/avgpool.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace {

namespace bf = avgpool_test;
using avgpool::divisor_type;
using avgpool::index_t;
using avgpool::layout;
using avgpool::pad_type;
using avgpool::rounding_type;

constexpr int kValidPerMode = 5;       // valid geometries per mode combination and rank
constexpr int kValidPerModeWide = 1;   // the same for the "wide" suite (bigger tensors)
constexpr int kMaxAttemptsPerMode = 400;  // guard against a generator that cannot hit a mode
constexpr int kMaxReportsPerCheck = 5;    // detailed mismatch messages per tensor

// ---------------------------------------------------------------------------------------------
// Modes

struct mode {
    pad_type pad;
    rounding_type rounding;
    divisor_type divisor;
    bool use_override;
    bool empty_nan;
};

std::vector<mode> all_modes() {
    std::vector<mode> m;
    for (pad_type p : {pad_type::explicit_pads, pad_type::same_upper, pad_type::same_lower,
                       pad_type::valid})
        for (rounding_type r : {rounding_type::floor, rounding_type::ceil,
                                rounding_type::ceil_torch})
            for (divisor_type d : {divisor_type::exclude_pad, divisor_type::include_pad,
                                   divisor_type::full_kernel,
                                   divisor_type::full_kernel_if_padded})
                for (bool ov : {false, true})
                    for (bool nan : {false, true}) m.push_back(mode{p, r, d, ov, nan});
    return m;
}

const char* name(pad_type p) {
    switch (p) {
        case pad_type::explicit_pads: return "explicit_pads";
        case pad_type::same_upper: return "same_upper";
        case pad_type::same_lower: return "same_lower";
        case pad_type::valid: return "valid";
    }
    return "?";
}
const char* name(rounding_type r) {
    switch (r) {
        case rounding_type::floor: return "floor";
        case rounding_type::ceil: return "ceil";
        case rounding_type::ceil_torch: return "ceil_torch";
    }
    return "?";
}
const char* name(divisor_type d) {
    switch (d) {
        case divisor_type::exclude_pad: return "exclude_pad";
        case divisor_type::include_pad: return "include_pad";
        case divisor_type::full_kernel: return "full_kernel";
        case divisor_type::full_kernel_if_padded: return "full_kernel_if_padded";
    }
    return "?";
}
const char* name(layout l) {
    return l == layout::channels_first ? "channels_first" : "channels_last";
}

// ---------------------------------------------------------------------------------------------
// Per-rank ranges. Kept tiny so the whole file runs in a few seconds under ASan; `budget` caps
// the brute-force work N*C*prod(out)*prod(k) of one geometry (bigger draws are re-drawn).
//
// Two suites: `small` (N 1..2, C 1..3, extents 1..9, kernel 1..5, ...: every mode on tiny
// tensors) and `wide` (R = 1, 2 only): the last axis up to 48 long with kernels up to 13 and
// pads up to 8, and C up to 19, so that row-vectorized, blocked (large-kernel) and
// SIMD-over-channels code paths meet full vectors plus odd tails, not only remainders.

enum class suite { small, wide };

struct ranges {
    index_t max_C;
    index_t max_extent, max_kernel, max_stride, max_dilation, max_pad;
    index_t max_last_extent, max_last_kernel, max_last_pad;  // the last spatial axis
    index_t budget;
};

template <std::size_t R>
ranges ranges_for(suite su) {
    if (su == suite::wide) return ranges{19, 6, 3, 3, 2, 2, 48, 13, 8, R == 1 ? 40000 : 12000};
    if (R <= 2) return ranges{3, 9, 5, 4, 3, 4, 9, 5, 4, 30000};
    if (R == 3) return ranges{3, 7, 4, 4, 3, 4, 7, 4, 4, 15000};
    return ranges{3, 5, 3, 3, 2, 3, 5, 3, 3, 10000};
}

const char* name(suite su) { return su == suite::wide ? "suite::wide" : "suite::small"; }

// ---------------------------------------------------------------------------------------------
// One random case

template <std::size_t R>
struct random_case {
    index_t N = 1, C = 1;
    avgpool::dims<R> spatial{};
    avgpool::pool_attrs<R> attrs{};
    int value_kind = 0;
};

std::string value_kind_name(int k) {
    switch (k) {
        case 0: return "uniform[-1,1]";
        case 1: return "small integers";
        case 2: return "mixed magnitudes 2^[-30,30]";
        case 3: return "mostly zeros";
    }
    return "?";
}

template <std::size_t N>
std::string str(const avgpool::dims<N>& d) {
    std::string s = "{";
    for (std::size_t i = 0; i < N; ++i) s += (i ? "," : "") + std::to_string(d[i]);
    return s + "}";
}
std::string str(const bf::bf_dims& d) {
    std::string s = "{";
    for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
    return s + "}";
}

template <std::size_t R>
std::string describe(const random_case<R>& c) {
    const auto& a = c.attrs;
    std::ostringstream os;
    os << "N=" << c.N << " C=" << c.C << " spatial=" << str(c.spatial)
       << " kernel=" << str(a.kernel) << " strides=" << str(a.strides)
       << " dilations=" << str(a.dilations) << " pads_begin=" << str(a.pads_begin)
       << " pads_end=" << str(a.pads_end) << " auto_pad=" << name(a.auto_pad)
       << " rounding=" << name(a.rounding) << " divisor=" << name(a.divisor)
       << " divisor_override=" << a.divisor_override
       << " empty_window_nan=" << (a.empty_window_nan ? "true" : "false")
       << " oversized_kernel=" << (a.oversized_kernel ? "true" : "false")
       << " values=" << value_kind_name(c.value_kind);
    return os.str();
}

index_t uniform(std::mt19937_64& rng, index_t lo, index_t hi) {
    return std::uniform_int_distribution<index_t>(lo, hi)(rng);
}

template <std::size_t R>
random_case<R> draw_case(std::mt19937_64& rng, const mode& m, suite su) {
    const ranges rg = ranges_for<R>(su);
    random_case<R> c;
    c.N = uniform(rng, 1, 2);
    c.C = uniform(rng, 1, rg.max_C);
    for (std::size_t ax = 0; ax < R; ++ax) {
        const bool last = ax + 1 == R;
        c.spatial[ax] = uniform(rng, 1, last ? rg.max_last_extent : rg.max_extent);
        c.attrs.kernel[ax] = uniform(rng, 1, last ? rg.max_last_kernel : rg.max_kernel);
        c.attrs.strides[ax] = uniform(rng, 1, rg.max_stride);
        c.attrs.dilations[ax] = uniform(rng, 1, rg.max_dilation);
        // Drawn for every pad_type: the library must ignore them unless explicit_pads.
        const index_t max_pad = last ? rg.max_last_pad : rg.max_pad;
        c.attrs.pads_begin[ax] = uniform(rng, 0, max_pad);
        c.attrs.pads_end[ax] = uniform(rng, 0, max_pad);
    }
    // Symmetric zero pads now and then, so full_kernel_if_padded also meets explicit
    // geometries with no padding at all.
    if (uniform(rng, 0, 5) == 0)
        for (std::size_t ax = 0; ax < R; ++ax) c.attrs.pads_begin[ax] = c.attrs.pads_end[ax] = 0;
    c.attrs.auto_pad = m.pad;
    c.attrs.rounding = m.rounding;  // for every pad type (same_* and valid round too)
    c.attrs.divisor = m.divisor;
    c.attrs.divisor_override = m.use_override ? uniform(rng, 1, 12) : 0;
    c.attrs.empty_window_nan = m.empty_nan;
    c.attrs.oversized_kernel = uniform(rng, 0, 1) == 1;  // matters under ceil rounding only
    c.value_kind = static_cast<int>(uniform(rng, 0, 3));
    return c;
}

template <std::size_t R>
bf::bf_attrs to_bf(const avgpool::pool_attrs<R>& a) {
    bf::bf_attrs b;
    b.kernel.assign(a.kernel.begin(), a.kernel.end());
    b.strides.assign(a.strides.begin(), a.strides.end());
    b.dilations.assign(a.dilations.begin(), a.dilations.end());
    b.pads_begin.assign(a.pads_begin.begin(), a.pads_begin.end());
    b.pads_end.assign(a.pads_end.begin(), a.pads_end.end());
    b.auto_pad = a.auto_pad;
    b.rounding = a.rounding;
    b.divisor = a.divisor;
    b.divisor_override = a.divisor_override;
    b.empty_window_nan = a.empty_window_nan;
    b.oversized_kernel = a.oversized_kernel;
    return b;
}

double draw_value(std::mt19937_64& rng, int kind) {
    avgpool_test::uniform<double> u(-1.0, 1.0);
    switch (kind) {
        case 1: return static_cast<double>(uniform(rng, -8, 8));
        case 2: return std::ldexp(u(rng), static_cast<int>(uniform(rng, -30, 30)));
        case 3: return uniform(rng, 0, 6) == 0 ? u(rng) : 0.0;
        default: return u(rng);
    }
}

// Logical channels_first tensor -> memory order of `lay`.
std::vector<double> to_layout(const std::vector<double>& cf, index_t N, index_t C,
                              index_t spatial_volume, layout lay) {
    if (lay == layout::channels_first) return cf;
    std::vector<double> out(cf.size());
    for (index_t n = 0; n < N; ++n)
        for (index_t c = 0; c < C; ++c)
            for (index_t p = 0; p < spatial_volume; ++p)
                out[static_cast<std::size_t>(bf::bf_offset(lay, N, C, spatial_volume, n, c, p))] =
                    cf[static_cast<std::size_t>((n * C + c) * spatial_volume + p)];
    return out;
}

// ---------------------------------------------------------------------------------------------
// Comparisons

template <class T>
constexpr long double eps_of() {
    return std::is_same<T, float>::value ? std::ldexp(1.0L, -24) : std::ldexp(1.0L, -53);
}

template <class T>
const char* type_name() {
    return std::is_same<T, float>::value ? "float" : "double";
}

// "n=.. c=.. out=(..)" for a memory offset of the output tensor.
std::string where(const bf::bf_dims& out_shape, layout lay, std::size_t offset) {
    const index_t N = out_shape[0], C = out_shape[1];
    index_t vol = 1;
    for (std::size_t i = 2; i < out_shape.size(); ++i) vol *= out_shape[i];
    const index_t off = static_cast<index_t>(offset);
    index_t n, c, p;
    if (lay == layout::channels_first) {
        p = off % vol;
        c = (off / vol) % C;
        n = off / vol / C;
    } else {
        c = off % C;
        p = (off / C) % vol;
        n = off / C / vol;
    }
    (void)N;
    std::string s = "n=" + std::to_string(n) + " c=" + std::to_string(c) + " out=(";
    std::vector<index_t> idx(out_shape.size() - 2);
    for (std::size_t i = idx.size(); i-- > 0;) {
        idx[i] = p % out_shape[i + 2];
        p /= out_shape[i + 2];
    }
    for (std::size_t i = 0; i < idx.size(); ++i) s += (i ? "," : "") + std::to_string(idx[i]);
    return s + ")";
}

struct counters {
    long geometries_valid = 0;
    long geometries_invalid = 0;
    long redrawn_over_budget = 0;
    long outputs_checked = 0;
};

template <class T>
void check_forward(const std::vector<T>& got, const bf::bf_result& ref, index_t sum_k,
                   layout lay, counters& cnt) {
    ASSERT_EQ(got.size(), ref.average.size());
    int reports = 0;
    long bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const long double g = static_cast<long double>(got[i]);
        const index_t div = ref.divisor[i];
        bool ok;
        long double bound = 0;
        if (div == 0) {
            // Divisor counts no tap: exactly 0, or NaN when empty_window_nan.
            ok = std::isnan(ref.average[i]) ? std::isnan(g) : (g == 0.0L);
        } else if (std::isnan(g)) {
            ok = false;
        } else {
            bound = 4.0L * static_cast<long double>(sum_k) * eps_of<T>() * ref.abs_sum[i] /
                    static_cast<long double>(div);
            ok = std::fabs(g - ref.average[i]) <= bound;
        }
        ++cnt.outputs_checked;
        if (!ok) {
            ++bad;
            if (reports++ < kMaxReportsPerCheck)
                ADD_FAILURE() << "forward<" << type_name<T>() << "> mismatch at "
                              << where(ref.output_shape, lay, i) << ": expected "
                              << static_cast<double>(ref.average[i]) << ", got "
                              << static_cast<double>(g) << " (divisor " << div << ", tap sum "
                              << static_cast<double>(ref.sum[i]) << ", sum|x| "
                              << static_cast<double>(ref.abs_sum[i]) << ", bound "
                              << static_cast<double>(bound) << ")";
        }
    }
    EXPECT_EQ(bad, 0) << "forward<" << type_name<T>() << ">: mismatching outputs";
}

template <class T>
void check_sum(const std::vector<T>& got, const bf::bf_result& ref, index_t sum_k, layout lay) {
    ASSERT_EQ(got.size(), ref.sum.size());
    int reports = 0;
    long bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const long double g = static_cast<long double>(got[i]);
        const long double bound =
            4.0L * static_cast<long double>(sum_k) * eps_of<T>() * ref.abs_sum[i];
        const bool ok = !std::isnan(g) && std::fabs(g - ref.sum[i]) <= bound;
        if (!ok) {
            ++bad;
            if (reports++ < kMaxReportsPerCheck)
                ADD_FAILURE() << "sum<" << type_name<T>() << "> mismatch at "
                              << where(ref.output_shape, lay, i) << ": expected "
                              << static_cast<double>(ref.sum[i]) << ", got "
                              << static_cast<double>(g) << " (sum|x| "
                              << static_cast<double>(ref.abs_sum[i]) << ", bound "
                              << static_cast<double>(bound) << ")";
        }
    }
    EXPECT_EQ(bad, 0) << "sum<" << type_name<T>() << ">: mismatching outputs";
}

template <class T>
void check_divisor(const std::vector<T>& got, const bf::bf_result& ref) {
    ASSERT_EQ(got.size(), ref.spatial_divisor.size());
    int reports = 0;
    long bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const T want = static_cast<T>(ref.spatial_divisor[i]);
        if (!(got[i] == want)) {
            ++bad;
            if (reports++ < kMaxReportsPerCheck)
                ADD_FAILURE() << "divisor<" << type_name<T>() << "> mismatch at spatial offset "
                              << i << ": expected " << ref.spatial_divisor[i] << ", got "
                              << static_cast<double>(got[i]);
        }
    }
    EXPECT_EQ(bad, 0) << "divisor<" << type_name<T>() << ">: mismatching positions";
}

bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// An executor that cuts the work into pieces of one or two items, back to front: results must
// not depend on the executor (API.md).
struct chopping_executor {
    template <class F>
    void operator()(index_t count, F&& fn) const {
        index_t end = count;
        bool two = false;
        while (end > 0) {
            const index_t begin = end - (two && end >= 2 ? 2 : 1);
            fn(begin, end);
            end = begin;
            two = !two;
        }
    }
};

// ---------------------------------------------------------------------------------------------
// Running one geometry

// A value sure to differ from any output: marks outputs the library did not write.
template <class T>
constexpr T sentinel() {
    return static_cast<T>(1e30);
}

template <class T, std::size_t R>
void run_type(const random_case<R>& c, const bf::bf_plan& oracle, layout lay,
              const std::vector<double>& logical_values, counters& cnt) {
    SCOPED_TRACE(std::string("T=") + type_name<T>() + " layout=" + name(lay));
    index_t in_vol = 1;
    for (index_t x : c.spatial) in_vol *= x;

    // The values the library sees, exactly: rounded to T first, then widened for the oracle.
    std::vector<double> cf(logical_values.size());
    for (std::size_t i = 0; i < cf.size(); ++i)
        cf[i] = static_cast<double>(static_cast<T>(logical_values[i]));
    const std::vector<double> mem = to_layout(cf, c.N, c.C, in_vol, lay);
    std::vector<T> in(mem.size());
    for (std::size_t i = 0; i < mem.size(); ++i) in[i] = static_cast<T>(mem[i]);

    const bf::bf_result ref = bf::bf_apply(oracle, mem, c.N, c.C, lay);

    avgpool::dims<R + 2> shape{};
    shape[0] = c.N;
    shape[1] = c.C;
    for (std::size_t ax = 0; ax < R; ++ax) shape[ax + 2] = c.spatial[ax];
    const auto plan = avgpool::pooling<R>::create(shape, c.attrs, lay);

    if (!ref.geometry.ok) {
        ASSERT_FALSE(plan.ok()) << "create accepted a geometry with no window that fits ("
                                << ref.geometry.why << "); output_shape "
                                << str(plan->output_shape());
        EXPECT_EQ(plan.error_code(), avgpool::errc::kernel_too_large)
            << plan.error().message();
        return;
    }
    ASSERT_TRUE(plan.ok()) << "create rejected a valid geometry: " << plan.error().message()
                           << " (expected output spatial " << str(ref.geometry.output) << ")";

    // Shapes and resolved geometry.
    const bf::bf_dims got_out(plan->output_shape().begin(), plan->output_shape().end());
    ASSERT_EQ(got_out, ref.output_shape) << "output_shape";
    const auto& geo = plan->geometry();
    EXPECT_EQ(bf::bf_dims(geo.pads_begin.begin(), geo.pads_begin.end()),
              ref.geometry.pads_begin)
        << "geometry().pads_begin";
    EXPECT_EQ(bf::bf_dims(geo.pads_end.begin(), geo.pads_end.end()), ref.geometry.pads_end)
        << "geometry().pads_end";
    EXPECT_EQ(bf::bf_dims(geo.output.begin(), geo.output.end()), ref.geometry.output)
        << "geometry().output";
    const bf::bf_dims got_in(plan->input_shape().begin(), plan->input_shape().end());
    EXPECT_EQ(got_in, bf::bf_dims(shape.begin(), shape.end())) << "input_shape";
    ASSERT_EQ(static_cast<std::size_t>(plan->input_size()), in.size()) << "input_size";
    ASSERT_EQ(static_cast<std::size_t>(plan->output_size()), ref.average.size())
        << "output_size";
    ASSERT_EQ(static_cast<std::size_t>(plan->divisor_size()), ref.spatial_divisor.size())
        << "divisor_size";

    index_t sum_k = 0;
    for (index_t k : c.attrs.kernel) sum_k += k;

    // forward
    std::vector<T> out(ref.average.size(), sentinel<T>());
    ASSERT_TRUE(plan->forward(in.data(), out.data()).ok());
    check_forward(out, ref, sum_k, lay, cnt);

    // forward again through a different executor: identical results (float only, to save
    // time; the executor only partitions N*C).
    if (std::is_same<T, float>::value) {
        std::vector<T> out2(ref.average.size(), sentinel<T>());
        ASSERT_TRUE(plan->forward(in.data(), out2.data(), chopping_executor{}).ok());
        long differ = 0;
        for (std::size_t i = 0; i < out.size(); ++i)
            if (!same_value(static_cast<double>(out[i]), static_cast<double>(out2[i]))) ++differ;
        EXPECT_EQ(differ, 0) << "forward results depend on the executor";
    }

    // sum
    std::vector<T> sums(ref.sum.size(), sentinel<T>());
    ASSERT_TRUE(plan->sum(in.data(), sums.data()).ok());
    check_sum(sums, ref, sum_k, lay);

    // divisor
    std::vector<T> divs(ref.spatial_divisor.size(), sentinel<T>());
    ASSERT_TRUE(plan->divisor(divs.data()).ok());
    check_divisor(divs, ref);
}

// Shape inference on its own (constexpr API), against the oracle.
template <std::size_t R>
void check_infer_geometry(const random_case<R>& c, const bf::bf_geometry& g) {
    const auto r = avgpool::infer_geometry<R>(c.spatial, c.attrs);
    if (!g.ok) {
        EXPECT_FALSE(r.ok()) << "infer_geometry accepted: " << g.why;
        return;
    }
    ASSERT_TRUE(r.ok()) << "infer_geometry rejected: " << r.error().message();
    EXPECT_EQ(bf::bf_dims(r->output.begin(), r->output.end()), g.output) << "infer_geometry output";
    EXPECT_EQ(bf::bf_dims(r->pads_begin.begin(), r->pads_begin.end()), g.pads_begin)
        << "infer_geometry pads_begin";
    EXPECT_EQ(bf::bf_dims(r->pads_end.begin(), r->pads_end.end()), g.pads_end)
        << "infer_geometry pads_end";
}

std::uint64_t base_seed() {
    if (const char* s = std::getenv("AVGPOOL_RANDOM_SEED"))
        return static_cast<std::uint64_t>(std::strtoull(s, nullptr, 0));
    return 20240611u;
}

std::uint64_t case_seed(std::uint64_t base, std::size_t rank, std::size_t mode_index,
                        int attempt) {
    // splitmix64 of the coordinates: independent, reproducible streams per case.
    std::uint64_t z = base + 0x9E3779B97F4A7C15ull * (rank * 1000003ull + mode_index * 4099ull +
                                                      static_cast<std::uint64_t>(attempt) + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

enum class drawn { valid, invalid, over_budget };

// Draws the case of `seed` for mode `m` and checks it (unless over budget). Replay a failure
// with this function and the seed / mode index printed in the trace.
template <std::size_t R>
drawn check_case(suite su, std::uint64_t seed, std::size_t mode_index, counters& cnt) {
    static const std::vector<mode> modes = all_modes();
    std::mt19937_64 rng(seed);
    const random_case<R> c = draw_case<R>(rng, modes[mode_index], su);

    const bf::bf_dims spatial(c.spatial.begin(), c.spatial.end());
    const bf::bf_attrs ba = to_bf(c.attrs);
    const bf::bf_geometry g = bf::bf_infer(spatial, ba);
    if (g.ok) {
        index_t work = c.N * c.C;
        for (std::size_t ax = 0; ax < R; ++ax) work *= g.output[ax] * c.attrs.kernel[ax];
        if (work > ranges_for<R>(su).budget) return drawn::over_budget;
    }

    SCOPED_TRACE("replay: AVGPOOL_RANDOM_REPLAY=\"" + std::to_string(R) +
                 (su == suite::wide ? " wide " : " small ") + std::to_string(seed) + " " +
                 std::to_string(mode_index) + "\" --gtest_filter=*Replay*  case: " + describe(c));
    check_infer_geometry(c, g);

    index_t in_vol = 1;
    for (index_t x : c.spatial) in_vol *= x;
    std::vector<double> values(static_cast<std::size_t>(c.N * c.C * in_vol));
    for (double& v : values) v = draw_value(rng, c.value_kind);

    // The oracle's windows (every tap enumerated) depend on neither values nor layout.
    const bf::bf_plan oracle = bf::bf_make_plan(spatial, ba);
    for (layout lay : {layout::channels_first, layout::channels_last}) {
        run_type<float, R>(c, oracle, lay, values, cnt);
        run_type<double, R>(c, oracle, lay, values, cnt);
    }
    return g.ok ? drawn::valid : drawn::invalid;
}

template <std::size_t R>
void run_rank(suite su) {
    const int per_mode = su == suite::wide ? kValidPerModeWide : kValidPerMode;
    const std::uint64_t base = base_seed() + (su == suite::wide ? 0x5EED0000u : 0u);
    const std::vector<mode> modes = all_modes();
    counters cnt;
    for (std::size_t mi = 0; mi < modes.size(); ++mi) {
        int valid = 0;
        int attempt = 0;
        for (; valid < per_mode && attempt < kMaxAttemptsPerMode; ++attempt) {
            const std::uint64_t seed = case_seed(base, R, mi, attempt);
            switch (check_case<R>(su, seed, mi, cnt)) {
                case drawn::valid: ++valid; ++cnt.geometries_valid; break;
                case drawn::invalid: ++cnt.geometries_invalid; break;
                case drawn::over_budget: ++cnt.redrawn_over_budget; break;
            }
            if (::testing::Test::HasFatalFailure()) return;
        }
        EXPECT_EQ(valid, per_mode)
            << "generator could not produce enough valid geometries for mode " << mi
            << " (pad " << name(modes[mi].pad) << ", rounding " << name(modes[mi].rounding)
            << ", divisor " << name(modes[mi].divisor) << ")";
    }
    std::printf("[ random   ] %s R=%zu base seed %llu: %ld valid + %ld invalid geometries "
                "(each x 2 layouts x float/double), %ld outputs checked, %ld over-budget "
                "draws skipped\n",
                name(su), R, static_cast<unsigned long long>(base), cnt.geometries_valid,
                cnt.geometries_invalid, cnt.outputs_checked, cnt.redrawn_over_budget);
}

// Replays one case: AVGPOOL_RANDOM_REPLAY="<R> <small|wide> <seed> <mode_index>", the numbers
// printed by a failure's "replay:" trace line. Does nothing when the variable is not set.
TEST(RandomVsBruteForce, ReplayFromEnvironment) {
    const char* spec = std::getenv("AVGPOOL_RANDOM_REPLAY");
    if (spec == nullptr) return;
    std::istringstream is(spec);
    unsigned rank = 0;
    std::string su;
    std::string seed_text;
    std::size_t mode_index = 0;
    is >> rank >> su >> seed_text >> mode_index;
    ASSERT_TRUE(static_cast<bool>(is)) << "AVGPOOL_RANDOM_REPLAY: cannot parse \"" << spec << '"';
    ASSERT_LT(mode_index, all_modes().size());
    const std::uint64_t seed = std::strtoull(seed_text.c_str(), nullptr, 0);
    const suite which = su.find("wide") != std::string::npos ? suite::wide : suite::small;
    counters cnt;
    switch (rank) {
        case 1: check_case<1>(which, seed, mode_index, cnt); break;
        case 2: check_case<2>(which, seed, mode_index, cnt); break;
        case 3: check_case<3>(which, seed, mode_index, cnt); break;
        case 4: check_case<4>(which, seed, mode_index, cnt); break;
        default: FAIL() << "AVGPOOL_RANDOM_REPLAY: rank must be 1..4";
    }
}

TEST(RandomVsBruteForce, Rank1) { run_rank<1>(suite::small); }
TEST(RandomVsBruteForce, Rank2) { run_rank<2>(suite::small); }
TEST(RandomVsBruteForce, Rank3) { run_rank<3>(suite::small); }
TEST(RandomVsBruteForce, Rank4) { run_rank<4>(suite::small); }
TEST(RandomVsBruteForce, WideRank1) { run_rank<1>(suite::wide); }
TEST(RandomVsBruteForce, WideRank2) { run_rank<2>(suite::wide); }

// ---------------------------------------------------------------------------------------------
// Hand-checked oracle sanity: the brute force itself against numbers worked out by hand from
// DESIGN.md, so that an oracle bug cannot silently agree with a library bug.

TEST(BruteForceOracle, HandWorkedShapes) {
    bf::bf_attrs a;
    a.kernel = {3};
    a.strides = {2};
    a.dilations = {1};
    a.pads_begin = {1};
    a.pads_end = {1};
    // X=6, k=3, s=2, pads 1/1: padded length 8; floor: (8-3)/2+1 = 3; ceil: ceil(5/2)+1 = 4;
    // ceil_torch: 4, last start (4-1)*2 = 6 >= X + pb = 7? no -> 4.
    a.rounding = rounding_type::floor;
    EXPECT_EQ(bf::bf_infer({6}, a).output, bf::bf_dims{3});
    a.rounding = rounding_type::ceil;
    EXPECT_EQ(bf::bf_infer({6}, a).output, bf::bf_dims{4});
    a.rounding = rounding_type::ceil_torch;
    EXPECT_EQ(bf::bf_infer({6}, a).output, bf::bf_dims{4});
    // X=5, k=2, s=2, pads 0/1: padded 6; ceil: ceil(4/2)+1 = 3, last start 4 < 5 -> kept.
    // X=4, k=2, s=2, pads 0/1: padded 5; ceil: ceil(3/2)+1 = 3, last start 4 >= 4 -> torch 2.
    a.kernel = {2};
    a.pads_begin = {0};
    a.rounding = rounding_type::ceil;
    EXPECT_EQ(bf::bf_infer({4}, a).output, bf::bf_dims{3});
    a.rounding = rounding_type::ceil_torch;
    EXPECT_EQ(bf::bf_infer({4}, a).output, bf::bf_dims{2});
    EXPECT_EQ(bf::bf_infer({5}, a).output, bf::bf_dims{3});
    // same_upper, X=5, k=3, d=2 (ke=5), s=2: out = 3, total = 2*2 + 5 - 5 = 4 -> 2/2.
    // X=6: out 3, total = 4 + 5 - 6 = 3 -> upper 1/2, lower 2/1.
    a.kernel = {3};
    a.dilations = {2};
    a.auto_pad = pad_type::same_upper;
    bf::bf_geometry g = bf::bf_infer({5}, a);
    EXPECT_EQ(g.output, bf::bf_dims{3});
    EXPECT_EQ(g.pads_begin, bf::bf_dims{2});
    EXPECT_EQ(g.pads_end, bf::bf_dims{2});
    g = bf::bf_infer({6}, a);
    EXPECT_EQ(g.pads_begin, bf::bf_dims{1});
    EXPECT_EQ(g.pads_end, bf::bf_dims{2});
    a.auto_pad = pad_type::same_lower;
    g = bf::bf_infer({6}, a);
    EXPECT_EQ(g.pads_begin, bf::bf_dims{2});
    EXPECT_EQ(g.pads_end, bf::bf_dims{1});
    // valid, X=6, ke=5, s=2, floor: windows at 0 only ((6-5)/2+1 = 1); ceil_torch: ceil(1/2)+1 = 2
    // (the last starts at 2 < 6: kept); X=4 < 5: invalid.
    a.auto_pad = pad_type::valid;
    a.rounding = rounding_type::floor;
    EXPECT_EQ(bf::bf_infer({6}, a).output, bf::bf_dims{1});
    a.rounding = rounding_type::ceil_torch;
    EXPECT_EQ(bf::bf_infer({6}, a).output, bf::bf_dims{2});
    EXPECT_FALSE(bf::bf_infer({4}, a).ok);
    // ... unless oversized_kernel, under ceil, where ke - X = 1 < s: one window.
    a.oversized_kernel = true;
    EXPECT_EQ(bf::bf_infer({4}, a).output, bf::bf_dims{1});
    EXPECT_FALSE(bf::bf_infer({3}, a).ok);  // ke - X = 2 = s
    a.oversized_kernel = false;
    // explicit, X=2, k=3, d=2 (ke=5), pads 1/1: padded 4 < 5: invalid; pads 1/2: fits.
    a.auto_pad = pad_type::explicit_pads;
    a.pads_begin = {1};
    a.pads_end = {1};
    EXPECT_FALSE(bf::bf_infer({2}, a).ok);
    a.pads_end = {2};
    EXPECT_EQ(bf::bf_infer({2}, a).output, bf::bf_dims{1});
}

TEST(BruteForceOracle, HandWorkedValues) {
    // 1-D, x = {1, 2, 3, 4}, k=3, s=2, pads 1/1, ceil: padded length 6, out = ceil(3/2)+1 = 3.
    // Windows (input coordinates): {-1,0,1}, {1,2,3}, {3,4,5}.
    // exclude: 3/2, 9/3, 4/1; include ([-1, 5)): 3/3, 9/3, 4/2; full: 3/3, 9/3, 4/3.
    const std::vector<double> x = {1, 2, 3, 4};
    bf::bf_attrs a;
    a.kernel = {3};
    a.strides = {2};
    a.dilations = {1};
    a.pads_begin = {1};
    a.pads_end = {1};
    a.rounding = rounding_type::ceil;
    auto run = [&](divisor_type d) {
        a.divisor = d;
        return bf::bf_pool(x, 1, 1, {4}, a, layout::channels_first);
    };
    bf::bf_result r = run(divisor_type::exclude_pad);
    EXPECT_EQ(r.spatial_divisor, (std::vector<index_t>{2, 3, 1}));
    EXPECT_EQ(r.average[0], 1.5L);
    EXPECT_EQ(r.average[1], 3.0L);
    EXPECT_EQ(r.average[2], 4.0L);
    r = run(divisor_type::include_pad);
    EXPECT_EQ(r.spatial_divisor, (std::vector<index_t>{3, 3, 2}));
    r = run(divisor_type::full_kernel);
    EXPECT_EQ(r.spatial_divisor, (std::vector<index_t>{3, 3, 3}));
    r = run(divisor_type::full_kernel_if_padded);
    EXPECT_EQ(r.spatial_divisor, (std::vector<index_t>{3, 3, 3}));
    a.divisor_override = 7;
    r = run(divisor_type::exclude_pad);
    EXPECT_EQ(r.spatial_divisor, (std::vector<index_t>{7, 7, 7}));
    EXPECT_EQ(r.sum[1], 9.0L);
    a.divisor_override = 0;

    // Empty windows: X=1, k=1, pads 0/3, floor: out 4; windows at 0, 1, 2, 3; only the first
    // sees the input. exclude: 1, 0, 0, 0; include ([0, 4)): 1, 1, 1, 1.
    a.kernel = {1};
    a.strides = {1};
    a.pads_begin = {0};
    a.pads_end = {3};
    a.rounding = rounding_type::floor;
    a.empty_window_nan = true;
    a.divisor = divisor_type::full_kernel_if_padded;  // padded: prod(k) = 1 everywhere
    r = bf::bf_pool({5.0}, 1, 1, {1}, a, layout::channels_first);
    EXPECT_EQ(r.spatial_divisor, (std::vector<index_t>{1, 1, 1, 1}));
    a.divisor = divisor_type::exclude_pad;
    r = bf::bf_pool({5.0}, 1, 1, {1}, a, layout::channels_first);
    EXPECT_EQ(r.spatial_divisor, (std::vector<index_t>{1, 0, 0, 0}));
    EXPECT_EQ(r.average[0], 5.0L);
    EXPECT_TRUE(std::isnan(r.average[1]));
    EXPECT_EQ(r.sum[1], 0.0L);
    // include_pad with a ceil overhang past the end padding: X=1, k=1, s=3, pads 0/1, ceil:
    // padded 2, out = ceil(1/3)+1 = 2; window 1 is at coordinate 3, past [0, 2): divisor 0.
    a.divisor = divisor_type::include_pad;
    a.strides = {3};
    a.pads_end = {1};
    a.rounding = rounding_type::ceil;
    r = bf::bf_pool({5.0}, 1, 1, {1}, a, layout::channels_first);
    EXPECT_EQ(r.spatial_divisor, (std::vector<index_t>{1, 0}));

    // 2-D channels_last with C=2: x(h, w, c) = 10*h + w + 100*c, 2x2 input, k=2x2 valid:
    // channel 0: (0+1+10+11)/4 = 5.5; channel 1: 105.5.
    bf::bf_attrs b;
    b.kernel = {2, 2};
    b.strides = {1, 1};
    b.dilations = {1, 1};
    b.pads_begin = {0, 0};
    b.pads_end = {0, 0};
    b.auto_pad = pad_type::valid;
    const std::vector<double> hwc = {0, 100, 1, 101, 10, 110, 11, 111};
    r = bf::bf_pool(hwc, 1, 2, {2, 2}, b, layout::channels_last);
    ASSERT_EQ(r.average.size(), 2u);
    EXPECT_EQ(r.average[0], 5.5L);
    EXPECT_EQ(r.average[1], 105.5L);
}

}  // namespace
