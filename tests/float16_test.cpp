// avgpool::float16 and avgpool::bfloat16: every bit pattern, every tie, random values against an
// independent reference in double arithmetic, and the batch converters against the scalar ones.
#include <gtest/gtest.h>

#include <avgpool/detail/convert.hpp>
#include <avgpool/float16.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using avgpool::bfloat16;
using avgpool::float16;

// ---- Static properties ----

template <class T>
constexpr bool plain_storage() {
    return sizeof(T) == 2 && alignof(T) <= 2 && std::is_trivially_copyable<T>::value &&
           std::is_standard_layout<T>::value && std::is_trivially_default_constructible<T>::value &&
           std::is_nothrow_constructible<T, float>::value &&
           !std::is_convertible<float, T>::value &&  // explicit both ways
           !std::is_convertible<T, float>::value && std::is_constructible<float, T>::value;
}
static_assert(plain_storage<float16>(), "float16 storage");
static_assert(plain_storage<bfloat16>(), "bfloat16 storage");

static_assert(float16::from_bits(0x3c00).bits() == 0x3c00, "from_bits/bits are constexpr");
static_assert(bfloat16::from_bits(0x3f80).bits() == 0x3f80, "from_bits/bits are constexpr");
static_assert(avgpool::detail::half_bits_from_float_bits(0x3f800000u) == 0x3c00, "1.0f");
static_assert(avgpool::detail::half_bits_from_float_bits(0x477ff000u) == 0x7c00, "65520 -> Inf");
static_assert(avgpool::detail::float_bits_from_half_bits(0x0001) == 0x33800000u, "2^-24");
static_assert(avgpool::detail::bfloat_bits_from_float_bits(0x3f808000u) == 0x3f80, "tie to even");
static_assert(avgpool::detail::float_bits_from_bfloat_bits(0x4049) == 0x40490000u, "exact");
#if AVGPOOL_FLOAT16_CONSTEXPR_CONVERSIONS
static_assert(float16(1.0f).bits() == 0x3c00 && float16(-65520.0f).bits() == 0xfc00, "C++20");
static_assert(static_cast<float>(float16::from_bits(0x0001)) == 0x1p-24f, "C++20");
static_assert(bfloat16(3.14159f).bits() == 0x4049, "C++20");
static_assert(static_cast<float>(bfloat16::from_bits(0xc040)) == -3.0f, "C++20");
#endif

std::uint32_t bits_of(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

float float_of(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// ---- An independent description of each format, in double arithmetic ----

struct float16_format {
    using type = float16;
    static constexpr int mantissa_bits = 10, exponent_bits = 5, bias = 15;
};
struct bfloat16_format {
    using type = bfloat16;
    static constexpr int mantissa_bits = 7, exponent_bits = 8, bias = 127;
};

template <class Fmt>
constexpr std::uint16_t inf_bits() {
    return static_cast<std::uint16_t>(((1u << Fmt::exponent_bits) - 1u) << Fmt::mantissa_bits);
}
template <class Fmt>
constexpr std::uint16_t quiet_bit() {
    return static_cast<std::uint16_t>(1u << (Fmt::mantissa_bits - 1));
}

template <class Fmt>
bool is_nan_bits(std::uint16_t b) {
    return (b & 0x7fffu) > inf_bits<Fmt>();
}

// Value of a non-NaN bit pattern. The Inf pattern decodes to 2^(emax + 1), the value that
// rounding past the largest finite number reaches, which the tie tests rely on.
template <class Fmt>
double decode(std::uint16_t b) {
    const int m = b & ((1 << Fmt::mantissa_bits) - 1);
    const int e = (b >> Fmt::mantissa_bits) & ((1 << Fmt::exponent_bits) - 1);
    const double mag =
        e == 0 ? std::ldexp(m, 1 - Fmt::bias - Fmt::mantissa_bits)
               : std::ldexp((1 << Fmt::mantissa_bits) + m, e - Fmt::bias - Fmt::mantissa_bits);
    return (b & 0x8000u) ? -mag : mag;
}

template <class Fmt>
double max_finite() {
    return decode<Fmt>(static_cast<std::uint16_t>(inf_bits<Fmt>() - 1));
}

// Nearest representable value to a finite x, ties to even, +-Inf past the range.
template <class Fmt>
double reference_round(double x) {
    const int emin = 1 - Fmt::bias;
    const double ax = std::fabs(x);
    int e = 0;
    std::frexp(ax, &e);  // ax = f * 2^e with f in [0.5, 1): the leading bit weighs 2^(e - 1)
    const int lead = ax == 0 ? emin : std::max(e - 1, emin);
    const double quantum = std::ldexp(1.0, lead - Fmt::mantissa_bits);
    const double n = ax / quantum;  // exact: a power-of-two scaling of a float
    double k = std::floor(n);
    const double frac = n - k;
    if (frac > 0.5 || (frac == 0.5 && std::fmod(k, 2.0) != 0)) k += 1;
    double r = k * quantum;
    if (r > max_finite<Fmt>()) r = std::numeric_limits<double>::infinity();
    return std::copysign(r, x);
}

template <class Fmt>
std::uint16_t convert(float f) {
    return typename Fmt::type(f).bits();
}

template <class Fmt>
float widen(std::uint16_t b) {
    return static_cast<float>(Fmt::type::from_bits(b));
}

// Checks T(f) against the reference; returns an empty string when it matches.
template <class Fmt>
std::string check_from_float(float f) {
    const std::uint16_t got = convert<Fmt>(f);
    if (std::isnan(f)) {
        if (!is_nan_bits<Fmt>(got) || !(got & quiet_bit<Fmt>()) ||
            ((got & 0x8000u) != 0) != std::signbit(f))
            return "NaN input " + std::to_string(bits_of(f)) + " gave " + std::to_string(got);
        return {};
    }
    const double want = reference_round<Fmt>(f);
    const double have = is_nan_bits<Fmt>(got) ? std::nan("") : decode<Fmt>(got);
    const bool same_inf = std::isinf(want) && (got & 0x7fffu) == inf_bits<Fmt>() &&
                          std::signbit(want) == ((got & 0x8000u) != 0);
    if (same_inf || (!std::isinf(want) && (got & 0x7fffu) < inf_bits<Fmt>() && have == want &&
                     std::signbit(have) == std::signbit(want)))
        return {};
    return "input bits " + std::to_string(bits_of(f)) + " gave bits " + std::to_string(got);
}

template <class Fmt>
void exhaustive_round_trip() {
    for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
        const auto bits = static_cast<std::uint16_t>(b);
        const float f = widen<Fmt>(bits);
        const std::uint16_t back = convert<Fmt>(f);
        if (is_nan_bits<Fmt>(bits)) {
            ASSERT_TRUE(std::isnan(f)) << b;
            ASSERT_EQ(std::signbit(f), (b & 0x8000u) != 0) << b;
            // A signaling NaN comes back quiet; otherwise payload and sign survive.
            ASSERT_EQ(back, bits | quiet_bit<Fmt>()) << b;
        } else {
            ASSERT_EQ(back, bits) << b;
            if ((b & 0x7fffu) == inf_bits<Fmt>())
                ASSERT_TRUE(std::isinf(f)) << b;
            else
                ASSERT_EQ(static_cast<double>(f), decode<Fmt>(bits)) << b;
            ASSERT_EQ(std::signbit(f), (b & 0x8000u) != 0) << b;
        }
    }
}

TEST(Float16, ExhaustiveRoundTrip) { exhaustive_round_trip<float16_format>(); }
TEST(Bfloat16, ExhaustiveRoundTrip) { exhaustive_round_trip<bfloat16_format>(); }

// Every pair of neighbours, both signs: the float exactly halfway must go to the even bit
// pattern, and the floats just either side of it to the nearer neighbour. Covers the
// subnormal/normal boundary and the overflow boundary (largest finite -> Inf) on the way.
template <class Fmt>
void every_tie() {
    for (std::uint32_t h = 0; h < inf_bits<Fmt>(); ++h) {
        for (std::uint32_t sign : {0u, 0x8000u}) {
            const auto lo = static_cast<std::uint16_t>(sign | h);
            const auto hi = static_cast<std::uint16_t>(sign | (h + 1));
            const double mid_d = (decode<Fmt>(lo) + decode<Fmt>(hi)) / 2;
            const auto mid = static_cast<float>(mid_d);
            ASSERT_EQ(static_cast<double>(mid), mid_d) << "midpoint not a float: " << h;
            ASSERT_EQ(convert<Fmt>(mid), (h & 1u) ? hi : lo) << "tie above " << h;
            const float toward_lo = std::nextafter(mid, static_cast<float>(decode<Fmt>(lo)));
            const float toward_hi = std::nextafter(mid, sign ? -INFINITY : INFINITY);
            ASSERT_EQ(convert<Fmt>(toward_lo), lo) << h;
            ASSERT_EQ(convert<Fmt>(toward_hi), hi) << h;
        }
    }
}

TEST(Float16, EveryTieRoundsToEven) { every_tie<float16_format>(); }
TEST(Bfloat16, EveryTieRoundsToEven) { every_tie<bfloat16_format>(); }

TEST(Float16, NamedBoundaries) {
    EXPECT_EQ(float16(65504.0f).bits(), 0x7bff);
    EXPECT_EQ(float16(65519.996f).bits(), 0x7bff);  // just below the tie
    EXPECT_EQ(float16(65520.0f).bits(), 0x7c00);    // tie: 0x7bff is odd, so up to Inf
    EXPECT_EQ(float16(-65520.0f).bits(), 0xfc00);
    EXPECT_EQ(float16(1e6f).bits(), 0x7c00);
    EXPECT_EQ(float16(std::numeric_limits<float>::max()).bits(), 0x7c00);
    EXPECT_EQ(float16(0x1p-14f).bits(), 0x0400);         // smallest normal
    EXPECT_EQ(float16(0x1.ff8p-15f).bits(), 0x03ff);     // largest subnormal
    EXPECT_EQ(float16(0x1.ffcp-15f).bits(), 0x0400);     // tie 0x03ff | 0x0400: even
    EXPECT_EQ(float16(0x1.ffbffep-15f).bits(), 0x03ff);  // one float below the tie
    EXPECT_EQ(float16(0x1p-24f).bits(), 0x0001);         // smallest subnormal
    EXPECT_EQ(float16(0x1p-25f).bits(), 0x0000);         // tie 0 | 1: even is zero
    EXPECT_EQ(float16(0x1.000002p-25f).bits(), 0x0001);
    EXPECT_EQ(float16(0x1.8p-24f).bits(), 0x0002);  // tie 1 | 2
    EXPECT_EQ(float16(0x1.4p-23f).bits(), 0x0002);  // tie 2 | 3
    EXPECT_EQ(float16(-0x1p-26f).bits(), 0x8000);   // underflow keeps the sign
    EXPECT_EQ(float16(std::numeric_limits<float>::denorm_min()).bits(), 0x0000);
    EXPECT_EQ(float16(1.0f + 0x1p-11f).bits(), 0x3c00);    // tie 1 | 1+2^-10: even
    EXPECT_EQ(float16(1.0f + 0x1.8p-10f).bits(), 0x3c02);  // tie 1+2^-10 | 1+2^-9
    EXPECT_EQ(float16(0.1f).bits(), 0x2e66);
    EXPECT_EQ(static_cast<float>(float16::from_bits(0x7bff)), 65504.0f);
    EXPECT_EQ(static_cast<float>(float16::from_bits(0x0001)), 0x1p-24f);
    EXPECT_EQ(static_cast<float>(float16::from_bits(0x3555)), 0x1.554p-2f);
}

TEST(Bfloat16, NamedBoundaries) {
    EXPECT_EQ(bfloat16(1.0f).bits(), 0x3f80);
    EXPECT_EQ(bfloat16(float_of(0x3f808000u)).bits(), 0x3f80);  // tie, even stays
    EXPECT_EQ(bfloat16(float_of(0x3f818000u)).bits(), 0x3f82);  // tie, odd rounds up
    EXPECT_EQ(bfloat16(float_of(0x3f808001u)).bits(), 0x3f81);
    EXPECT_EQ(bfloat16(float_of(0x7f7f7fffu)).bits(), 0x7f7f);  // below the overflow tie
    EXPECT_EQ(bfloat16(float_of(0x7f7f8000u)).bits(), 0x7f80);  // tie past the largest: Inf
    EXPECT_EQ(bfloat16(std::numeric_limits<float>::max()).bits(), 0x7f80);
    EXPECT_EQ(bfloat16(-std::numeric_limits<float>::max()).bits(), 0xff80);
    EXPECT_EQ(bfloat16(float_of(0x00008000u)).bits(), 0x0000);  // float subnormal tie
    EXPECT_EQ(bfloat16(float_of(0x00018000u)).bits(), 0x0002);
    EXPECT_EQ(bfloat16(float_of(0x007fffffu)).bits(), 0x0080);  // up into the normals
    EXPECT_EQ(bfloat16(3.14159f).bits(), 0x4049);
}

template <class T>
void specials() {
    const float inf = std::numeric_limits<float>::infinity();
    const std::uint16_t inf_b = std::is_same<T, float16>::value ? 0x7c00 : 0x7f80;
    EXPECT_EQ(T(inf).bits(), inf_b);
    EXPECT_EQ(T(-inf).bits(), inf_b | 0x8000);
    EXPECT_EQ(static_cast<float>(T::from_bits(inf_b)), inf);
    EXPECT_EQ(static_cast<float>(T::from_bits(inf_b | 0x8000)), -inf);

    EXPECT_EQ(T(0.0f).bits(), 0x0000);
    EXPECT_EQ(T(-0.0f).bits(), 0x8000);
    EXPECT_FALSE(std::signbit(static_cast<float>(T::from_bits(0x0000))));
    EXPECT_TRUE(std::signbit(static_cast<float>(T::from_bits(0x8000))));
    EXPECT_EQ(static_cast<float>(T::from_bits(0x8000)), 0.0f);

    // NaNs of every kind stay NaN, come out quiet, and keep their sign: a payload only in the
    // low float bits must not truncate to the Inf pattern.
    for (std::uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fa00000u, 0x7fffffffu, 0x7f802000u}) {
        for (std::uint32_t sign : {0u, 0x80000000u}) {
            const T t(float_of(nan | sign));
            EXPECT_TRUE(std::isnan(static_cast<float>(t))) << std::hex << (nan | sign);
            EXPECT_EQ((t.bits() & 0x7fffu) & inf_b, inf_b);
            EXPECT_NE(t.bits() & 0x7fffu, inf_b);
            EXPECT_NE(t.bits() & (std::is_same<T, float16>::value ? 0x0200 : 0x0040), 0);
            EXPECT_EQ((t.bits() & 0x8000u) != 0, sign != 0);
        }
    }
    EXPECT_TRUE(std::isnan(static_cast<float>(T(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Float16, InfNanSignedZero) {
    specials<float16>();
    EXPECT_EQ(float16(float_of(0x7f800001u)).bits(), 0x7e00);
    EXPECT_EQ(float16(float_of(0xffc02000u)).bits(), 0xfe01);  // payload's top bits kept
    EXPECT_EQ(float16(std::numeric_limits<float>::quiet_NaN()).bits() & 0x7fffu, 0x7e00);
    // float16 -> float sets the quiet bit too (as F16C does) and keeps the payload.
    EXPECT_EQ(bits_of(static_cast<float>(float16::from_bits(0x7c01))), 0x7fc02000u);
    EXPECT_EQ(bits_of(static_cast<float>(float16::from_bits(0xfe00))), 0xffc00000u);
}

TEST(Bfloat16, InfNanSignedZero) {
    specials<bfloat16>();
    EXPECT_EQ(bfloat16(float_of(0x7f800001u)).bits(), 0x7fc0);
    EXPECT_EQ(bfloat16(float_of(0xff810000u)).bits(), 0xffc1);
    EXPECT_EQ(bits_of(static_cast<float>(bfloat16::from_bits(0x7f81))), 0x7f810000u);  // exact
}

// Random floats: uniform bit patterns (every exponent), and values spread over the format's own
// range (where all the rounding happens), each checked against reference_round.
template <class Fmt>
void random_against_reference(std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::uint32_t> any_bits;
    const int lo_exp = 1 - Fmt::bias - Fmt::mantissa_bits - 3;  // below the smallest subnormal
    const int hi_exp = Fmt::bias + 2;                           // past the largest finite
    std::uniform_int_distribution<int> exponent(lo_exp, hi_exp);
    std::uniform_int_distribution<std::uint32_t> mantissa(0, (1u << 23) - 1);
    int failures = 0;
    for (int i = 0; i < 1000000 && failures < 10; ++i) {
        const float a = float_of(any_bits(rng));
        const float b =
            std::ldexp(1.0f + static_cast<float>(mantissa(rng)) * 0x1p-23f, exponent(rng)) *
            ((any_bits(rng) & 1u) ? -1.0f : 1.0f);
        for (float f : {a, b}) {
            const std::string err = check_from_float<Fmt>(f);
            if (!err.empty()) {
                ADD_FAILURE() << err;
                ++failures;
            }
        }
    }
}

TEST(Float16, RandomAgainstDoubleReference) { random_against_reference<float16_format>(1); }
TEST(Bfloat16, RandomAgainstDoubleReference) { random_against_reference<bfloat16_format>(2); }

// The scalar forms must agree with each other wherever they differ in code.
TEST(Float16, ScalarPathsAgree) {
    using namespace avgpool::detail;
    std::mt19937 rng(3);
    std::uniform_int_distribution<std::uint32_t> any_bits;
    for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
        const auto b = static_cast<std::uint16_t>(h);
        const std::uint32_t want = float_bits_from_half_bits(b);
        ASSERT_EQ(bits_of(float_from_half_bits(b)), want) << h;
        ASSERT_EQ(bits_of(float_from_half_bits_branchless(b)), want) << h;
    }
    for (int i = 0; i < 2000000; ++i) {
        // Every other pattern near the half range, where the paths have their cases.
        std::uint32_t x = any_bits(rng);
        if (i & 1) x = (x & 0x80ffffffu) | ((0x30u + (x >> 24) % 0x20u) << 24);
        const std::uint16_t want = half_bits_from_float_bits(x);
        ASSERT_EQ(half_bits_from_float(float_of(x)), want) << x;
        ASSERT_EQ(half_bits_from_float_branchless(float_of(x)), want) << x;
    }
}

// ---- Batch converters: every compiled path against the scalar conversion ----

template <class T>
using to_float_fn = void (*)(const T*, float*, std::size_t);
template <class T>
using from_float_fn = void (*)(const float*, T*, std::size_t);

template <class T>
struct batch_paths {
    std::vector<std::pair<const char*, to_float_fn<T>>> to;
    std::vector<std::pair<const char*, from_float_fn<T>>> from;
};

template <class T>
batch_paths<T> all_paths();

// The kernels' conversions in registers (detail::vload / vstore, one vector at a time; the
// scalar forms for the rest), as batch converters.
template <class T>
void to_float_vectors(const T* src, float* dst, std::size_t n) {
    namespace d = avgpool::detail;
    constexpr std::size_t W = d::vec<float>::width;
    std::size_t i = 0;
    for (; i + W <= n; i += W) d::vload(src + i).store(dst + i);
    for (; i < n; ++i) dst[i] = d::sload(src[i]);
}
template <class T>
void from_float_vectors(const float* src, T* dst, std::size_t n) {
    namespace d = avgpool::detail;
    constexpr std::size_t W = d::vec<float>::width;
    std::size_t i = 0;
    for (; i + W <= n; i += W) d::vstore(d::vec<float>::load(src + i), dst + i);
    for (; i < n; ++i) d::sstore(src[i], dst + i);
}

template <>
batch_paths<float16> all_paths<float16>() {
    namespace d = avgpool::detail;
    batch_paths<float16> p;
    p.to.push_back({"dispatch", static_cast<to_float_fn<float16>>(&d::to_float)});
    p.to.push_back({"kernel vectors", &to_float_vectors<float16>});
    p.from.push_back({"kernel vectors", &from_float_vectors<float16>});
    p.from.push_back({"dispatch", static_cast<from_float_fn<float16>>(&d::from_float)});
    p.to.push_back({"portable", static_cast<to_float_fn<float16>>(&d::to_float_portable)});
    p.from.push_back({"portable", static_cast<from_float_fn<float16>>(&d::from_float_portable)});
#if AVGPOOL_FLOAT16_SSE2
    p.to.push_back({"sse2", static_cast<to_float_fn<float16>>(&d::to_float_sse2)});
    p.from.push_back({"sse2", static_cast<from_float_fn<float16>>(&d::from_float_sse2)});
#endif
#if AVGPOOL_FLOAT16_F16C
    p.to.push_back({"f16c", &d::to_float_f16c});
    p.from.push_back({"f16c", &d::from_float_f16c});
#endif
    return p;
}

template <>
batch_paths<bfloat16> all_paths<bfloat16>() {
    namespace d = avgpool::detail;
    batch_paths<bfloat16> p;
    p.to.push_back({"dispatch", static_cast<to_float_fn<bfloat16>>(&d::to_float)});
    p.to.push_back({"kernel vectors", &to_float_vectors<bfloat16>});
    p.from.push_back({"kernel vectors", &from_float_vectors<bfloat16>});
    p.from.push_back({"dispatch", static_cast<from_float_fn<bfloat16>>(&d::from_float)});
    p.to.push_back({"portable", static_cast<to_float_fn<bfloat16>>(&d::to_float_portable)});
    p.from.push_back({"portable", static_cast<from_float_fn<bfloat16>>(&d::from_float_portable)});
#if AVGPOOL_FLOAT16_SSE2
    p.to.push_back({"sse2", static_cast<to_float_fn<bfloat16>>(&d::to_float_sse2)});
    p.from.push_back({"sse2", static_cast<from_float_fn<bfloat16>>(&d::from_float_sse2)});
#endif
#if AVGPOOL_FLOAT16_AVX2
    p.to.push_back({"avx2", &d::to_float_avx2});
    p.from.push_back({"avx2", &d::from_float_avx2});
#endif
    return p;
}

// Floats that exercise every case: specials, ties, subnormal results, and random values.
std::vector<float> interesting_floats(std::size_t n, std::mt19937& rng) {
    const std::uint32_t fixed[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                   0x7f800001u, 0xffa00000u, 0x477ff000u, 0x477fefffu, 0x33000000u,
                                   0x33000001u, 0x387fc000u, 0x38800000u, 0x3f808000u, 0x3f818000u,
                                   0x7f7f8000u, 0x00000001u, 0x3f800000u, 0xb3c00000u, 0x3e000000u};
    std::uniform_int_distribution<std::uint32_t> any_bits;
    std::uniform_int_distribution<int> pick(0, 3);
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t x = any_bits(rng);
        switch (pick(rng)) {
            case 0:
                v[i] = float_of(fixed[x % (sizeof fixed / sizeof fixed[0])]);
                break;
            case 1:
                v[i] = float_of(x);
                break;
            case 2:
                v[i] = float_of((x & 0x80ffffffu) | ((0x30u + (x >> 24) % 0x18u) << 24));
                break;
            default:
                v[i] = static_cast<float>(static_cast<std::int32_t>(x)) * 0x1p-28f;
                break;
        }
    }
    return v;
}

template <class T>
void batch_matches_scalar() {
    const batch_paths<T> paths = all_paths<T>();
    std::vector<std::size_t> lengths;
    for (std::size_t n = 0; n <= 100; ++n) lengths.push_back(n);
    for (std::size_t n : {127u, 128u, 129u, 255u, 256u, 257u, 1000u, 4099u}) lengths.push_back(n);
    std::mt19937 rng(4);
    const float canary_f = -12345.0f;
    const T canary_t = T::from_bits(0x5a5a);
    for (std::size_t n : lengths) {
        for (std::size_t offset : {0u, 1u, 3u}) {  // misaligned starts too
            const std::vector<float> f = interesting_floats(n + offset + 1, rng);
            std::vector<T> h(n + offset + 1);
            for (std::size_t i = 0; i < h.size(); ++i) h[i] = T(f[i]);

            for (const auto& path : paths.from) {
                std::vector<T> out(n + offset + 1, canary_t);
                path.second(f.data() + offset, out.data() + offset, n);
                for (std::size_t i = 0; i < n; ++i)
                    ASSERT_EQ(out[offset + i].bits(), T(f[offset + i]).bits())
                        << path.first << " from_float n=" << n << " i=" << i;
                ASSERT_EQ(out[offset + n].bits(), canary_t.bits()) << path.first << " wrote past n";
                for (std::size_t i = 0; i < offset; ++i) ASSERT_EQ(out[i].bits(), canary_t.bits());
            }
            for (const auto& path : paths.to) {
                std::vector<float> out(n + offset + 1, canary_f);
                path.second(h.data() + offset, out.data() + offset, n);
                for (std::size_t i = 0; i < n; ++i)
                    ASSERT_EQ(bits_of(out[offset + i]), bits_of(static_cast<float>(h[offset + i])))
                        << path.first << " to_float n=" << n << " i=" << i;
                ASSERT_EQ(out[offset + n], canary_f) << path.first << " wrote past n";
                for (std::size_t i = 0; i < offset; ++i) ASSERT_EQ(out[i], canary_f);
            }
        }
    }
}

TEST(Float16, BatchMatchesScalarAnyLength) { batch_matches_scalar<float16>(); }
TEST(Bfloat16, BatchMatchesScalarAnyLength) { batch_matches_scalar<bfloat16>(); }

// All 65536 patterns through each to_float path, and a wide spread of floats through each
// from_float path, compared with the constexpr bit-level definition.
template <class T>
void batch_exhaustive(std::uint32_t (*widen_bits)(std::uint16_t),
                      std::uint16_t (*narrow_bits)(std::uint32_t)) {
    const batch_paths<T> paths = all_paths<T>();
    std::vector<T> all(65536);
    for (std::uint32_t b = 0; b <= 0xffffu; ++b)
        all[b] = T::from_bits(static_cast<std::uint16_t>(b));
    std::vector<float> out(all.size());
    for (const auto& path : paths.to) {
        path.second(all.data(), out.data(), all.size());
        for (std::uint32_t b = 0; b <= 0xffffu; ++b)
            ASSERT_EQ(bits_of(out[b]), widen_bits(static_cast<std::uint16_t>(b)))
                << path.first << b;
    }
    // Every upper half (sign, exponent, top mantissa bits) with 16 lower halves that put the
    // float just below, on and just above the rounding points of both formats, with both
    // parities of the float16 result's last bit: 2^20 floats.
    const std::uint32_t lows[] = {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x2000u, 0x2fffu,
                                  0x3000u, 0x3001u, 0x7fffu, 0x8000u, 0x8001u, 0x9000u,
                                  0xb000u, 0xe000u, 0xf000u, 0xffffu};
    std::vector<float> in;
    in.reserve(std::size_t(1) << 20);
    for (std::uint32_t top = 0; top <= 0xffffu; ++top)
        for (std::uint32_t low : lows) in.push_back(float_of((top << 16) | low));
    std::vector<T> got(in.size());
    for (const auto& path : paths.from) {
        path.second(in.data(), got.data(), in.size());
        for (std::size_t i = 0; i < in.size(); ++i)
            ASSERT_EQ(got[i].bits(), narrow_bits(bits_of(in[i])))
                << path.first << " " << bits_of(in[i]);
    }
}

TEST(Float16, BatchPathsExhaustive) {
    batch_exhaustive<float16>(&avgpool::detail::float_bits_from_half_bits,
                              &avgpool::detail::half_bits_from_float_bits);
}
TEST(Bfloat16, BatchPathsExhaustive) {
    batch_exhaustive<bfloat16>(&avgpool::detail::float_bits_from_bfloat_bits,
                               &avgpool::detail::bfloat_bits_from_float_bits);
}

TEST(Float16, DocExamples) {
    avgpool::float16 h(0.1f);
    EXPECT_EQ(h.bits(), 0x2e66);
    EXPECT_EQ(static_cast<float>(h), 0.0999755859375f);
    EXPECT_EQ(static_cast<float>(avgpool::float16::from_bits(0x3c00)), 1.0f);
    avgpool::bfloat16 b(3.14159f);
    EXPECT_EQ(static_cast<float>(b), 3.140625f);
    EXPECT_EQ(static_cast<float>(avgpool::bfloat16::from_bits(0x7f80)),
              std::numeric_limits<float>::infinity());
    // Value-initialized arrays are zeros, as the plain storage types promise.
    avgpool::float16 zeros[4] = {};
    for (auto z : zeros) EXPECT_EQ(z.bits(), 0);
}

}  // namespace
