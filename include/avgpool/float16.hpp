// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// 16-bit storage types: avgpool::float16 (IEEE 754 binary16) and avgpool::bfloat16 (the upper
// half of a binary32). They only store values; arithmetic happens in float after conversion.
//
// Conversions from float round to nearest, ties to even, and never depend on the floating-point
// environment (rounding mode, FTZ/DAZ). NaN stays NaN and comes out quiet (the quiet bit set,
// the top payload bits and the sign kept), which is also what x86 F16C does in both directions,
// so every path here (constexpr, portable, SSE2, F16C, AVX2) gives bit-identical results.
// Round trips float16/bfloat16 -> float -> same type keep every bit pattern except signaling
// NaNs, which come back quiet.
//
// Configuration (set before the first include):
//   AVGPOOL_FLOAT16_NO_SIMD   use only the portable code, even when F16C/AVX2 are enabled.
#ifndef AVGPOOL_FLOAT16_HPP
#define AVGPOOL_FLOAT16_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "config.hpp"

#if defined(__has_include)
#if __has_include(<version>)
#include <version>
#endif
#endif

#if defined(__cpp_lib_bit_cast) && defined(__cpp_lib_is_constant_evaluated)
#if __cpp_lib_bit_cast >= 201806L && __cpp_lib_is_constant_evaluated >= 201811L
#include <bit>
#define AVGPOOL_FLOAT16_CONSTEXPR_CONVERSIONS 1
#endif
#endif
#ifndef AVGPOOL_FLOAT16_CONSTEXPR_CONVERSIONS
#define AVGPOOL_FLOAT16_CONSTEXPR_CONVERSIONS 0  // C++17: float <-> bits needs memcpy
#endif

#if AVGPOOL_FLOAT16_CONSTEXPR_CONVERSIONS
#define AVGPOOL_FLOAT16_CONSTEXPR constexpr
#else
#define AVGPOOL_FLOAT16_CONSTEXPR inline
#endif

#if !defined(AVGPOOL_FLOAT16_NO_SIMD) && defined(__F16C__)
#define AVGPOOL_FLOAT16_F16C 1
#else
#define AVGPOOL_FLOAT16_F16C 0
#endif
#if !defined(AVGPOOL_FLOAT16_NO_SIMD) && defined(__AVX2__)
#define AVGPOOL_FLOAT16_AVX2 1
#else
#define AVGPOOL_FLOAT16_AVX2 0
#endif
// SSE2 is the x86-64 baseline: without it a default build would convert one value at a time.
#if !defined(AVGPOOL_FLOAT16_NO_SIMD) && (defined(__SSE2__) || defined(_M_X64))
#define AVGPOOL_FLOAT16_SSE2 1
#else
#define AVGPOOL_FLOAT16_SSE2 0
#endif
#if AVGPOOL_FLOAT16_F16C || AVGPOOL_FLOAT16_AVX2 || AVGPOOL_FLOAT16_SSE2
#include <immintrin.h>
#endif

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

// ---- Bit-level conversions: constexpr, integer only, the definition of the results. ----

/// binary32 bits -> binary16 bits, round to nearest even.
constexpr std::uint16_t half_bits_from_float_bits(std::uint32_t x) noexcept {
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u)  // NaN: set the quiet bit, keep the top 9 payload bits
        return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u)  // Inf, or at least 65520 (halfway 65504 .. 65536): rounds to Inf
        return static_cast<std::uint16_t>(sign | 0x7c00u);
    if (a >= 0x38800000u) {  // normal half: rebias by 127 - 15; a mantissa carry bumps the exponent
        const std::uint32_t r = a - 0x38000000u;
        return static_cast<std::uint16_t>(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
    }
    if (a < 0x33000000u)  // below 2^-25 (half the smallest subnormal): rounds to zero
        return static_cast<std::uint16_t>(sign);
    // Subnormal half: the result is |x| / 2^-24 rounded, i.e. the full significand shifted
    // right by 126 - exponent (14 .. 24), with round-half-even on the dropped bits.
    const std::uint32_t shift = 126u - (a >> 23);
    const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const std::uint32_t q = m >> shift;
    const std::uint32_t rest = m & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1u);
    const std::uint32_t up = (rest > halfway || (rest == halfway && (q & 1u))) ? 1u : 0u;
    // q + up may reach 0x400, which is the encoding of the smallest normal: still right.
    return static_cast<std::uint16_t>(sign | (q + up));
}

/// binary16 bits -> binary32 bits, exact (a NaN gets its quiet bit set, as F16C does).
constexpr std::uint32_t float_bits_from_half_bits(std::uint16_t h) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t e = (h >> 10) & 0x1fu;
    const std::uint32_t m = h & 0x3ffu;
    if (e == 0x1fu) return sign | 0x7f800000u | (m != 0 ? 0x400000u : 0u) | (m << 13);
    if (e != 0) return sign | ((e + 112u) << 23) | (m << 13);
    if (m == 0) return sign;
    std::uint32_t exponent = 113u, mm = m;  // normalize the subnormal: 2^-14 * 0.m
    while ((mm & 0x400u) == 0) {
        mm <<= 1;
        --exponent;
    }
    return sign | (exponent << 23) | ((mm & 0x3ffu) << 13);
}

/// binary32 bits -> bfloat16 bits, round to nearest even on the upper 16 bits.
constexpr std::uint16_t bfloat_bits_from_float_bits(std::uint32_t x) noexcept {
    // A NaN must not round into Inf (or wrap): quiet it instead. Finite values at or above the
    // halfway point past the largest bfloat16 carry into the exponent and become Inf, as RNE says.
    return (x & 0x7fffffffu) > 0x7f800000u
               ? static_cast<std::uint16_t>((x >> 16) | 0x40u)
               : static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/// bfloat16 bits -> binary32 bits, exact.
constexpr std::uint32_t float_bits_from_bfloat_bits(std::uint16_t b) noexcept {
    return static_cast<std::uint32_t>(b) << 16;
}

inline std::uint32_t bits_of(float f) noexcept {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

inline float float_of(std::uint32_t u) noexcept {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// ---- Branch-free scalar forms: the portable batch loops (which compilers may vectorize) and
// the lane-by-lane model of the SSE2 code. Only exact float operations are used (power-of-two
// scaling, int <-> float of small integers, subtracting a value's integer part), so the
// results do not depend on the rounding mode or FTZ/DAZ either. ----

inline std::uint16_t half_bits_from_float_branchless(float f) noexcept {
    const std::uint32_t x = bits_of(f);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t a = x & 0x7fffffffu;
    const std::uint32_t r = a - 0x38000000u;  // wraps for tiny a; that lane is not selected
    const std::uint32_t normal = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
    // Subnormal: y = |x| * 2^24 is exact and at most 1024; round it half-even by hand.
    const float y = float_of(a < 0x38800000u ? a : 0x38800000u) * 0x1p24f;
    const std::int32_t q = static_cast<std::int32_t>(y);
    const float frac = y - static_cast<float>(q);
    const std::uint32_t up = (frac > 0.5f) | ((frac == 0.5f) & ((q & 1) != 0));
    std::uint32_t res = a < 0x38800000u ? static_cast<std::uint32_t>(q) + up : normal;
    res = a >= 0x477ff000u ? 0x7c00u : res;
    res = a > 0x7f800000u ? (0x7e00u | ((a >> 13) & 0x3ffu)) : res;
    return static_cast<std::uint16_t>(sign | res);
}

inline float float_from_half_bits_branchless(std::uint16_t h) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t a = h & 0x7fffu;
    const std::uint32_t normal = (a << 13) + 0x38000000u;
    const std::uint32_t special = ((a << 13) + 0x70000000u) | (a > 0x7c00u ? 0x400000u : 0u);
    const std::uint32_t sub = bits_of(static_cast<float>(static_cast<std::int32_t>(a)) * 0x1p-24f);
    std::uint32_t res = a >= 0x7c00u ? special : normal;
    res = a < 0x400u ? sub : res;
    return float_of(sign | res);
}

#if AVGPOOL_FLOAT16_F16C
inline std::uint16_t half_bits_from_float_f16c(float f) noexcept {
    // Immediate rounding (not MXCSR's): F16C then ignores the FP environment entirely.
    return static_cast<std::uint16_t>(
        _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}

inline float float_from_half_bits_f16c(std::uint16_t h) noexcept {
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}
#endif

inline std::uint16_t half_bits_from_float(float f) noexcept {
#if AVGPOOL_FLOAT16_F16C
    return half_bits_from_float_f16c(f);
#else
    return half_bits_from_float_bits(bits_of(f));
#endif
}

inline float float_from_half_bits(std::uint16_t h) noexcept {
#if AVGPOOL_FLOAT16_F16C
    return float_from_half_bits_f16c(h);
#else
    return float_of(float_bits_from_half_bits(h));
#endif
}

struct from_bits_tag {};

}  // namespace detail

/// IEEE 754 binary16 storage type: 2 bytes, trivially copyable, no arithmetic.
/// Converts explicitly to and from float (round to nearest even; exact to float).
///
///     avgpool::float16 h(0.1f);                     // nearest binary16: 0x2e66
///     float f = static_cast<float>(h);               // 0.0999755859375f
///     auto one = avgpool::float16::from_bits(0x3c00);
///
/// Constructing from a double converts it to float first (two roundings); convert it yourself
/// if that matters. Compare values through float: bits() differ for +0/-0 and NaNs.
class float16 {
public:
    float16() = default;  // trivial: uninitialized, like float

    /// Nearest binary16 to f, ties to even; overflow gives +-Inf, NaN gives a quiet NaN.
    AVGPOOL_FLOAT16_CONSTEXPR explicit float16(float f) noexcept : bits_(convert(f)) {}

    /// The exact value as a float.
    AVGPOOL_FLOAT16_CONSTEXPR explicit operator float() const noexcept {
#if AVGPOOL_FLOAT16_CONSTEXPR_CONVERSIONS
        if (std::is_constant_evaluated())
            return std::bit_cast<float>(detail::float_bits_from_half_bits(bits_));
#endif
        return detail::float_from_half_bits(bits_);
    }

    /// The value with this bit pattern: `float16::from_bits(0x7c00)` is +Inf.
    static constexpr float16 from_bits(std::uint16_t b) noexcept {
        return float16(detail::from_bits_tag{}, b);
    }
    /// The bit pattern: sign, 5 exponent bits, 10 mantissa bits.
    constexpr std::uint16_t bits() const noexcept { return bits_; }

private:
    constexpr float16(detail::from_bits_tag, std::uint16_t b) noexcept : bits_(b) {}

    static AVGPOOL_FLOAT16_CONSTEXPR std::uint16_t convert(float f) noexcept {
#if AVGPOOL_FLOAT16_CONSTEXPR_CONVERSIONS
        if (std::is_constant_evaluated())
            return detail::half_bits_from_float_bits(std::bit_cast<std::uint32_t>(f));
#endif
        return detail::half_bits_from_float(f);
    }

    std::uint16_t bits_;
};

/// bfloat16 storage type (the upper 16 bits of a float): 2 bytes, trivially copyable, no
/// arithmetic. Converts explicitly to and from float (round to nearest even; exact to float).
///
///     avgpool::bfloat16 b(3.14159f);                 // 0x4049: 3.140625
///     float f = static_cast<float>(b);
///     auto inf = avgpool::bfloat16::from_bits(0x7f80);
class bfloat16 {
public:
    bfloat16() = default;  // trivial: uninitialized, like float

    /// Nearest bfloat16 to f, ties to even; overflow gives +-Inf, NaN gives a quiet NaN.
    AVGPOOL_FLOAT16_CONSTEXPR explicit bfloat16(float f) noexcept : bits_(convert(f)) {}

    /// The exact value as a float.
    AVGPOOL_FLOAT16_CONSTEXPR explicit operator float() const noexcept {
#if AVGPOOL_FLOAT16_CONSTEXPR_CONVERSIONS
        if (std::is_constant_evaluated())
            return std::bit_cast<float>(detail::float_bits_from_bfloat_bits(bits_));
#endif
        return detail::float_of(detail::float_bits_from_bfloat_bits(bits_));
    }

    /// The value with this bit pattern: `bfloat16::from_bits(0x3f80)` is 1.
    static constexpr bfloat16 from_bits(std::uint16_t b) noexcept {
        return bfloat16(detail::from_bits_tag{}, b);
    }
    /// The bit pattern: sign, 8 exponent bits, 7 mantissa bits.
    constexpr std::uint16_t bits() const noexcept { return bits_; }

private:
    constexpr bfloat16(detail::from_bits_tag, std::uint16_t b) noexcept : bits_(b) {}

    static AVGPOOL_FLOAT16_CONSTEXPR std::uint16_t convert(float f) noexcept {
#if AVGPOOL_FLOAT16_CONSTEXPR_CONVERSIONS
        if (std::is_constant_evaluated())
            return detail::bfloat_bits_from_float_bits(std::bit_cast<std::uint32_t>(f));
#endif
        return detail::bfloat_bits_from_float_bits(detail::bits_of(f));
    }

    std::uint16_t bits_;
};

static_assert(sizeof(float16) == 2 && sizeof(bfloat16) == 2, "16-bit storage");
static_assert(std::is_trivially_copyable<float16>::value && std::is_standard_layout<float16>::value,
              "float16 must be a plain 2-byte value");
static_assert(std::is_trivially_copyable<bfloat16>::value &&
                  std::is_standard_layout<bfloat16>::value,
              "bfloat16 must be a plain 2-byte value");

namespace detail {

// ---- Batch conversions for the kernels. Every path gives the scalar results bit for bit. ----

inline void to_float_portable(const float16* src, float* dst, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) dst[i] = float_from_half_bits_branchless(src[i].bits());
}

inline void from_float_portable(const float* src, float16* dst, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        dst[i] = float16::from_bits(half_bits_from_float_branchless(src[i]));
}

inline void to_float_portable(const bfloat16* src, float* dst, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        dst[i] = float_of(float_bits_from_bfloat_bits(src[i].bits()));
}

inline void from_float_portable(const float* src, bfloat16* dst, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        dst[i] = bfloat16::from_bits(bfloat_bits_from_float_bits(bits_of(src[i])));
}

#if AVGPOOL_FLOAT16_F16C
inline void to_float_f16c(const float16* src, float* dst, std::size_t n) noexcept {
    const std::size_t body = n - n % 8;  // not `i + 8 <= n`: GCC would warn the tail is unbounded
    for (std::size_t i = 0; i < body; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (std::size_t i = body; i < n; ++i) dst[i] = float_from_half_bits_f16c(src[i].bits());
}

inline void from_float_f16c(const float* src, float16* dst, std::size_t n) noexcept {
    const std::size_t body = n - n % 8;
    for (std::size_t i = 0; i < body; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    }
    for (std::size_t i = body; i < n; ++i)
        dst[i] = float16::from_bits(half_bits_from_float_f16c(src[i]));
}
#endif

#if AVGPOOL_FLOAT16_AVX2
inline void to_float_avx2(const bfloat16* src, float* dst, std::size_t n) noexcept {
    const std::size_t body = n - n % 8;
    for (std::size_t i = 0; i < body; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(w));
    }
    for (std::size_t i = body; i < n; ++i)
        dst[i] = float_of(float_bits_from_bfloat_bits(src[i].bits()));
}

// Eight floats -> eight bfloat16 in the low halves of 32-bit lanes; same rule as the scalar.
inline __m256i bfloat_bits_avx2(__m256i x) noexcept {
    // (An unordered float compare: one instruction and no constants, where an integer test
    // of the magnitude takes two and two constant registers the kernels need.)
    const __m256 f = _mm256_castsi256_ps(x);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    const __m256i hi = _mm256_srli_epi32(x, 16);
    const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i quiet = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(rounded, quiet, nan);
}

inline void from_float_avx2(const float* src, bfloat16* dst, std::size_t n) noexcept {
    const std::size_t body = n - n % 16;
    for (std::size_t i = 0; i < body; i += 16) {
        const __m256i lo = bfloat_bits_avx2(_mm256_castps_si256(_mm256_loadu_ps(src + i)));
        const __m256i hi = bfloat_bits_avx2(_mm256_castps_si256(_mm256_loadu_ps(src + i + 8)));
        // packus works per 128-bit lane: lo0-3 hi0-3 lo4-7 hi4-7; put the quarters in order.
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), packed);
    }
    for (std::size_t i = body; i < n; ++i)
        dst[i] = bfloat16::from_bits(bfloat_bits_from_float_bits(bits_of(src[i])));
}
#endif

#if AVGPOOL_FLOAT16_SSE2
// SSE2 has no blendv, no unsigned 32-bit min and no unsigned 32 -> 16 pack; these stand in.
inline __m128i select_sse2(__m128i mask, __m128i yes, __m128i no) noexcept {
    return _mm_or_si128(_mm_and_si128(mask, yes), _mm_andnot_si128(mask, no));
}

// Two vectors of 32-bit lanes holding 16-bit values -> eight 16-bit values, in order.
// Sign-extending first makes the signed-saturating pack keep the low halves unchanged.
inline __m128i pack_low16_sse2(__m128i lo, __m128i hi) noexcept {
    return _mm_packs_epi32(_mm_srai_epi32(_mm_slli_epi32(lo, 16), 16),
                           _mm_srai_epi32(_mm_slli_epi32(hi, 16), 16));
}

// The lane-wise form of half_bits_from_float_branchless. Lanes that are zero or round to a
// normal half take a short path; the rest (subnormal, Inf, NaN, overflow) are rare in data, so
// they are computed only when a vector holds one.
inline __m128i half_bits_sse2(__m128 f) noexcept {
    const __m128i x = _mm_castps_si128(f);
    const __m128i sign = _mm_and_si128(_mm_srli_epi32(x, 16), _mm_set1_epi32(0x8000));
    const __m128i a = _mm_and_si128(x, _mm_set1_epi32(0x7fffffff));
    const __m128i r = _mm_sub_epi32(a, _mm_set1_epi32(0x38000000));
    const __m128i lsb = _mm_and_si128(_mm_srli_epi32(r, 13), _mm_set1_epi32(1));
    const __m128i normal =
        _mm_srli_epi32(_mm_add_epi32(_mm_add_epi32(r, _mm_set1_epi32(0xfff)), lsb), 13);
    const __m128i min_normal = _mm_set1_epi32(0x38800000);
    const __m128i is_zero = _mm_cmpeq_epi32(a, _mm_setzero_si128());
    const __m128i is_sub = _mm_cmplt_epi32(a, min_normal);  // signed compare is fine: a < 2^31
    const __m128i is_big = _mm_cmpgt_epi32(a, _mm_set1_epi32(0x477fefff));
    __m128i res = _mm_andnot_si128(is_zero, normal);
    if (AVGPOOL_UNLIKELY(
            _mm_movemask_epi8(_mm_or_si128(_mm_andnot_si128(is_zero, is_sub), is_big)) != 0)) {
        const __m128 y =
            _mm_mul_ps(_mm_castsi128_ps(select_sse2(is_sub, a, min_normal)), _mm_set1_ps(0x1p24f));
        const __m128i q = _mm_cvttps_epi32(y);
        const __m128 frac = _mm_sub_ps(y, _mm_cvtepi32_ps(q));
        const __m128i odd = _mm_cmpeq_epi32(_mm_and_si128(q, _mm_set1_epi32(1)), _mm_set1_epi32(1));
        const __m128 up =
            _mm_or_ps(_mm_cmpgt_ps(frac, _mm_set1_ps(0.5f)),
                      _mm_and_ps(_mm_cmpeq_ps(frac, _mm_set1_ps(0.5f)), _mm_castsi128_ps(odd)));
        res = select_sse2(is_sub, _mm_sub_epi32(q, _mm_castps_si128(up)), res);  // up: 0 or -1
        res = select_sse2(is_big, _mm_set1_epi32(0x7c00), res);
        const __m128i nan = _mm_or_si128(
            _mm_set1_epi32(0x7e00), _mm_and_si128(_mm_srli_epi32(a, 13), _mm_set1_epi32(0x3ff)));
        res = select_sse2(_mm_cmpgt_epi32(a, _mm_set1_epi32(0x7f800000)), nan, res);
    }
    return _mm_or_si128(res, sign);
}

// The lane-wise form of float_from_half_bits_branchless; h holds one half per 32-bit lane.
inline __m128 float_from_half_sse2(__m128i h) noexcept {
    const __m128i sign = _mm_slli_epi32(_mm_and_si128(h, _mm_set1_epi32(0x8000)), 16);
    const __m128i a = _mm_and_si128(h, _mm_set1_epi32(0x7fff));
    const __m128i normal = _mm_add_epi32(_mm_slli_epi32(a, 13), _mm_set1_epi32(0x38000000));
    // Inf/NaN: rebias once more so the exponent is all ones; a NaN also gets the quiet bit.
    const __m128i nan_quiet =
        _mm_and_si128(_mm_cmpgt_epi32(a, _mm_set1_epi32(0x7c00)), _mm_set1_epi32(0x400000));
    const __m128i special =
        _mm_or_si128(_mm_add_epi32(normal, _mm_set1_epi32(0x38000000)), nan_quiet);
    const __m128i sub = _mm_castps_si128(_mm_mul_ps(_mm_cvtepi32_ps(a), _mm_set1_ps(0x1p-24f)));
    __m128i res = select_sse2(_mm_cmpgt_epi32(a, _mm_set1_epi32(0x7bff)), special, normal);
    res = select_sse2(_mm_cmplt_epi32(a, _mm_set1_epi32(0x400)), sub, res);
    return _mm_castsi128_ps(_mm_or_si128(res, sign));
}

// The lane-wise form of bfloat_bits_from_float_bits.
inline __m128i bfloat_bits_sse2(__m128i x) noexcept {
    const __m128i nan =
        _mm_cmpgt_epi32(_mm_and_si128(x, _mm_set1_epi32(0x7fffffff)), _mm_set1_epi32(0x7f800000));
    const __m128i hi = _mm_srli_epi32(x, 16);
    const __m128i lsb = _mm_and_si128(hi, _mm_set1_epi32(1));
    const __m128i rounded =
        _mm_srli_epi32(_mm_add_epi32(_mm_add_epi32(x, _mm_set1_epi32(0x7fff)), lsb), 16);
    return select_sse2(nan, _mm_or_si128(hi, _mm_set1_epi32(0x40)), rounded);
}

inline void to_float_sse2(const float16* src, float* dst, std::size_t n) noexcept {
    const std::size_t body = n - n % 8;
    const __m128i zero = _mm_setzero_si128();
    for (std::size_t i = 0; i < body; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        _mm_storeu_ps(dst + i, float_from_half_sse2(_mm_unpacklo_epi16(h, zero)));
        _mm_storeu_ps(dst + i + 4, float_from_half_sse2(_mm_unpackhi_epi16(h, zero)));
    }
    for (std::size_t i = body; i < n; ++i) dst[i] = float_from_half_bits_branchless(src[i].bits());
}

inline void from_float_sse2(const float* src, float16* dst, std::size_t n) noexcept {
    const std::size_t body = n - n % 8;
    for (std::size_t i = 0; i < body; i += 8) {
        const __m128i h = pack_low16_sse2(half_bits_sse2(_mm_loadu_ps(src + i)),
                                          half_bits_sse2(_mm_loadu_ps(src + i + 4)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    }
    for (std::size_t i = body; i < n; ++i)
        dst[i] = float16::from_bits(half_bits_from_float_branchless(src[i]));
}

inline void to_float_sse2(const bfloat16* src, float* dst, std::size_t n) noexcept {
    const std::size_t body = n - n % 8;
    const __m128i zero = _mm_setzero_si128();
    for (std::size_t i = 0; i < body; i += 8) {
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        // Interleaving zeros below each value is the shift into the upper half.
        _mm_storeu_ps(dst + i, _mm_castsi128_ps(_mm_unpacklo_epi16(zero, b)));
        _mm_storeu_ps(dst + i + 4, _mm_castsi128_ps(_mm_unpackhi_epi16(zero, b)));
    }
    for (std::size_t i = body; i < n; ++i)
        dst[i] = float_of(float_bits_from_bfloat_bits(src[i].bits()));
}

inline void from_float_sse2(const float* src, bfloat16* dst, std::size_t n) noexcept {
    const std::size_t body = n - n % 8;
    for (std::size_t i = 0; i < body; i += 8) {
        const __m128i lo = bfloat_bits_sse2(_mm_castps_si128(_mm_loadu_ps(src + i)));
        const __m128i hi = bfloat_bits_sse2(_mm_castps_si128(_mm_loadu_ps(src + i + 4)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), pack_low16_sse2(lo, hi));
    }
    for (std::size_t i = body; i < n; ++i)
        dst[i] = bfloat16::from_bits(bfloat_bits_from_float_bits(bits_of(src[i])));
}
#endif

/// Converts n float16 values to float: `detail::to_float(h, f, n)`.
inline void to_float(const float16* src, float* dst, std::size_t n) noexcept {
#if AVGPOOL_FLOAT16_F16C
    to_float_f16c(src, dst, n);
#elif AVGPOOL_FLOAT16_SSE2
    to_float_sse2(src, dst, n);
#else
    to_float_portable(src, dst, n);
#endif
}

/// Converts n floats to float16, rounding to nearest even.
inline void from_float(const float* src, float16* dst, std::size_t n) noexcept {
#if AVGPOOL_FLOAT16_F16C
    from_float_f16c(src, dst, n);
#elif AVGPOOL_FLOAT16_SSE2
    from_float_sse2(src, dst, n);
#else
    from_float_portable(src, dst, n);
#endif
}

/// Converts n bfloat16 values to float.
inline void to_float(const bfloat16* src, float* dst, std::size_t n) noexcept {
#if AVGPOOL_FLOAT16_AVX2
    to_float_avx2(src, dst, n);
#elif AVGPOOL_FLOAT16_SSE2
    to_float_sse2(src, dst, n);
#else
    to_float_portable(src, dst, n);
#endif
}

/// Converts n floats to bfloat16, rounding to nearest even.
inline void from_float(const float* src, bfloat16* dst, std::size_t n) noexcept {
#if AVGPOOL_FLOAT16_AVX2
    from_float_avx2(src, dst, n);
#elif AVGPOOL_FLOAT16_SSE2
    from_float_sse2(src, dst, n);
#else
    from_float_portable(src, dst, n);
#endif
}

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_FLOAT16_HPP
