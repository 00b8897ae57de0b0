// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The few vector operations the kernels need, over xsimd when it is available (any version
// from 8 on: only load/store/arithmetic/broadcast are used, which kept their names), and
// over plain scalars otherwise, so the library is complete without xsimd.
#ifndef AVGPOOL_DETAIL_SIMD_HPP
#define AVGPOOL_DETAIL_SIMD_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "../config.hpp"

#if AVGPOOL_HAS_XSIMD
#include <xsimd/xsimd.hpp>
#endif

#if defined(__SSE2__) || defined(_M_X64)
#include <immintrin.h>
#endif

// Small helpers of the kernels' inner loops: GCC does not always inline them on its own.
// Forced only in optimized builds: at -O0 (the sanitizer builds) forced inlining bought no
// speed and cost compile time (the backward tests under ASan + UBSan: 298 -> 219 s to compile,
// 68.5 s to run either way).
#ifndef AVGPOOL_ALWAYS_INLINE
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__OPTIMIZE__)
#define AVGPOOL_ALWAYS_INLINE inline
#elif defined(__GNUC__) || defined(__clang__)
#define AVGPOOL_ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define AVGPOOL_ALWAYS_INLINE __forceinline
#else
#define AVGPOOL_ALWAYS_INLINE inline
#endif
#endif
// The loop that follows unrolled whole (its trip count a small constant): GCC at -O2 left
// such loops over arrays of vectors rolled, the vectors in memory (the channels-last sliding
// window, 3x3 stride 2: 0.72-0.85x its -O2 time; unchanged at -O3).
#ifndef AVGPOOL_UNROLL
#if defined(__clang__)
#define AVGPOOL_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define AVGPOOL_UNROLL _Pragma("GCC unroll 16")
#else
#define AVGPOOL_UNROLL
#endif
#endif
// A kernel's inner loop kept out of its caller: inlined into the large dispatch functions, its
// loop-invariant values were spilled and reloaded from the stack every iteration.
#ifndef AVGPOOL_NOINLINE
#if defined(__GNUC__) || defined(__clang__)
#define AVGPOOL_NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define AVGPOOL_NOINLINE __declspec(noinline)
#else
#define AVGPOOL_NOINLINE
#endif
#endif
// The same for a lambda (after its parameter list).
#ifndef AVGPOOL_INLINE_LAMBDA
#if (defined(__GNUC__) || defined(__clang__)) && defined(__OPTIMIZE__)
#define AVGPOOL_INLINE_LAMBDA __attribute__((always_inline))
#else
#define AVGPOOL_INLINE_LAMBDA
#endif
#endif

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

// Keeps a loaded vector in its register: compilers otherwise fold the load into each shuffle
// that reads it, a memory operand per use, and loads of rows at any offset mostly straddle
// two cache lines (AVX-512 permute kernel, 1-D rows of 100 floats, 3 taps at stride 2: 290
// -> 200 ns for 32 rows). An empty asm the value passes through; no code of its own.
template <class V>
AVGPOOL_ALWAYS_INLINE void hold_in_register(V& v) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __asm__("" : "+v"(v));
#else
    (void)v;
#endif
}

// f(std::integral_constant<int, I>{}) for I = 0 .. N - 1, unrolled at compile time: at -O2
// GCC leaves short loops over arrays of vectors rolled, with the vectors on the stack.
template <class F, int... I>
AVGPOOL_ALWAYS_INLINE void unrolled(F&& f, std::integer_sequence<int, I...>) {
    (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
AVGPOOL_ALWAYS_INLINE void unrolled(F&& f) {
    unrolled(f, std::make_integer_sequence<int, N>{});
}

// f(Lo) + .. + f(Hi - 1) as a tree: the first four in pairs, ((f0 + f1) + (f2 + f3)), then the
// rest the same way, so seven taps are three dependent adds, not six (a chain of six was 24
// cycles of latency a vector in the 7-tap horizontal pass). Up to three terms it is the plain
// left-to-right sum.
template <int Lo, int Hi, class F>
AVGPOOL_ALWAYS_INLINE auto tree_sum(F& f) {
    static_assert(Hi > Lo, "an empty sum");
    if constexpr (Hi - Lo == 1) {
        return f(Lo);
    } else if constexpr (Hi - Lo == 2) {
        return f(Lo) + f(Lo + 1);
    } else {
        constexpr int mid = Lo + (Hi - Lo > 4 ? 4 : 2);
        return tree_sum<Lo, mid>(f) + tree_sum<mid, Hi>(f);
    }
}

#if AVGPOOL_HAS_XSIMD

template <class T>
struct vec {
    using batch = xsimd::batch<T>;
    static constexpr std::size_t width = batch::size;
    batch v;

    static vec load(const T* p) noexcept { return {batch::load_unaligned(p)}; }
    static vec splat(T x) noexcept { return {batch(x)}; }
    void store(T* p) const noexcept { v.store_unaligned(p); }
    friend vec operator+(vec a, vec b) noexcept { return {a.v + b.v}; }
    friend vec operator*(vec a, vec b) noexcept { return {a.v * b.v}; }
    friend vec operator/(vec a, vec b) noexcept { return {a.v / b.v}; }
    // Bitwise AND with a mask of all-ones / all-zeros lanes: keeps or zeroes a lane, and unlike
    // a multiply by 0 it also zeroes an Inf or NaN.
    vec bit_and(vec mask) const noexcept { return {v & mask.v}; }
    // Lanes [0, k) from a, the rest from b.
    static vec front_blend(vec a, vec b, std::size_t k) noexcept {
        alignas(64) static constexpr T iota[] = {0, 1, 2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                                                 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
        static_assert(width <= sizeof(iota) / sizeof(T), "vec: wider than the lane table");
        return {xsimd::select(batch::load_aligned(iota) < batch(static_cast<T>(k)), a.v, b.v)};
    }
};

#else

template <class T>
struct vec {
    static constexpr std::size_t width = 1;
    T v;

    static vec load(const T* p) noexcept { return {*p}; }
    static vec splat(T x) noexcept { return {x}; }
    void store(T* p) const noexcept { *p = v; }
    friend vec operator+(vec a, vec b) noexcept { return {a.v + b.v}; }
    friend vec operator*(vec a, vec b) noexcept { return {a.v * b.v}; }
    friend vec operator/(vec a, vec b) noexcept { return {a.v / b.v}; }
    vec bit_and(vec mask) const noexcept {
        using U = typename std::conditional<sizeof(T) == 4, std::uint32_t, std::uint64_t>::type;
        U a, m;
        std::memcpy(&a, &v, sizeof(T));
        std::memcpy(&m, &mask.v, sizeof(T));
        a &= m;
        T r;
        std::memcpy(&r, &a, sizeof(T));
        return {r};
    }
    static vec front_blend(vec a, vec b, std::size_t k) noexcept { return k > 0 ? a : b; }
};

#endif

/// Whether fused_mul_add<T> is one fused instruction on this target. (xsimd 8's fma has no
/// AVX-512 kernel: it falls back to a * b + c, which GCC's default contraction fuses and
/// clang's does not, so the kernels that need one rounding call the intrinsics themselves.)
template <class T>
constexpr bool has_fused_mul_add() noexcept {
    constexpr std::size_t W = vec<T>::width;
    constexpr bool f = std::is_same<T, float>::value, d = std::is_same<T, double>::value;
    (void)W;
    (void)f;
    (void)d;
#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
    if constexpr ((f && W == 16) || (d && W == 8)) return true;
#endif
#if AVGPOOL_HAS_XSIMD && defined(__FMA__)
    if constexpr ((f && (W == 8 || W == 4)) || (d && (W == 4 || W == 2))) return true;
#endif
#if !AVGPOOL_HAS_XSIMD && defined(__FMA__)
    if constexpr (f || d) return true;
#endif
    return false;
}

#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
/// Lanes S .. 15 of lo, then lanes 0 .. S - 1 of hi (valignd). maskz with every lane: the plain
/// _mm512_alignr_epi32 passes an undefined vector that GCC 12 reports as maybe-uninitialized.
template <int S>
AVGPOOL_ALWAYS_INLINE __m512 lane_shift(__m512 lo, __m512 hi) noexcept {
    return _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(0xffff, _mm512_castps_si512(hi), _mm512_castps_si512(lo), S));
}
#endif

/// a * b + c rounded once; requires has_fused_mul_add<T>().
template <class T>
inline vec<T> fused_mul_add(const vec<T>& a, const vec<T>& b, const vec<T>& c) noexcept {
    static_assert(has_fused_mul_add<T>(), "fused_mul_add: no fused multiply-add for this target");
    constexpr std::size_t W = vec<T>::width;
    constexpr bool f = std::is_same<T, float>::value;
    (void)W;
    (void)f;
#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
    if constexpr (W == 16 && f) return {_mm512_fmadd_ps(a.v, b.v, c.v)};
    if constexpr (W == 8 && !f) return {_mm512_fmadd_pd(a.v, b.v, c.v)};
#endif
#if AVGPOOL_HAS_XSIMD && defined(__FMA__)
    if constexpr (W == 8 && f) return {_mm256_fmadd_ps(a.v, b.v, c.v)};
    if constexpr (W == 4 && !f) return {_mm256_fmadd_pd(a.v, b.v, c.v)};
    if constexpr (W == 4 && f) return {_mm_fmadd_ps(a.v, b.v, c.v)};
    if constexpr (W == 2 && !f) return {_mm_fmadd_pd(a.v, b.v, c.v)};
#endif
#if !AVGPOOL_HAS_XSIMD && defined(__FMA__)
    if constexpr (true) return {f ? static_cast<T>(__builtin_fmaf(a.v, b.v, c.v)) : static_cast<T>(__builtin_fma(a.v, b.v, c.v))};
#endif
    return {a.v * b.v + c.v};  // not reached: the static_assert admits only the cases above
}

/// x clamped to [-lim, lim] (lim > 0): infinities become +-lim; a NaN stays NaN or becomes
/// +-lim (x86 min/max return their second operand on a NaN), which callers must allow.
template <class T>
inline vec<T> clamp_symmetric(const vec<T>& x, const vec<T>& lim, const vec<T>& neg_lim) noexcept {
#if AVGPOOL_HAS_XSIMD
    constexpr std::size_t W = vec<T>::width;
    constexpr bool f = std::is_same<T, float>::value, d = std::is_same<T, double>::value;
    (void)W;
    (void)f;
    (void)d;
#if defined(__AVX512F__)
    // The masked forms with every lane kept: GCC 12 warns -Wmaybe-uninitialized inside the
    // plain _mm512_max_ps / _mm512_min_ps (and folds the mask away).
    if constexpr (f && W == 16) {
        const __mmask16 all = 0xFFFF;
        return {_mm512_maskz_min_ps(all, _mm512_maskz_max_ps(all, x.v, neg_lim.v), lim.v)};
    }
    if constexpr (d && W == 8) {
        const __mmask8 all = 0xFF;
        return {_mm512_maskz_min_pd(all, _mm512_maskz_max_pd(all, x.v, neg_lim.v), lim.v)};
    }
#endif
    return {xsimd::min(xsimd::max(x.v, neg_lim.v), lim.v)};
#else
    const T lo = x.v < neg_lim.v ? neg_lim.v : x.v;
    return {lo > lim.v ? lim.v : lo};
#endif
}

/// Whether div is a power of two, a normal number whose reciprocal r is exact: then a * r is
/// a / div, correctly rounded, in one multiply (2x2 and 2x2x2 windows). A bit test, not
/// std::frexp: a library call per rebuilt quotient cost short rows (4-output rows of 3-D pools)
/// about a tenth of their time.
template <class T>
inline bool power_of_two(T div) noexcept {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "power_of_two: float or double");
    using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    if (!(div > T(0)) || div > std::numeric_limits<T>::max()) return false;
    U bits;
    std::memcpy(&bits, &div, sizeof bits);
    constexpr int frac_bits = std::numeric_limits<T>::digits - 1;
    // A normal number with a zero fraction (subnormals have no implicit bit: not exact).
    return (bits & ((U(1) << frac_bits) - 1)) == 0 && (bits >> frac_bits) != 0;
}

/// x + 0: -0 becomes +0, every other value stays. A window of -0 inputs then gives +0, as
/// the reference's sum from 0 does (and PyTorch's, oneDNN's and OpenVINO's CPU kernels'), where
/// a sum started from its first tap would keep -0.
template <class T>
AVGPOOL_ALWAYS_INLINE vec<T> plus_zero(const vec<T>& x) noexcept {
    return x + vec<T>::splat(T(0));
}

/// x * r + 0 (plus_zero of the product), one fused instruction where the target has one (the
/// product is rounded once either way, so it equals x * r but for the sign of a zero).
template <class T>
AVGPOOL_ALWAYS_INLINE vec<T> scale_plus_zero(const vec<T>& x, const vec<T>& r) noexcept {
    if constexpr (has_fused_mul_add<T>()) {
        return fused_mul_add(x, r, vec<T>::splat(T(0)));
    } else {
        return x * r + vec<T>::splat(T(0));
    }
}

/// a / d given r = 1 / d rounded to nearest in T: with a fused multiply-add, the reciprocal's
/// product q then q + (a - q d) r with the residual exact (Markstein's correction), which
/// costs less than a vector division and is the correctly rounded quotient for every normal
/// result (a subnormal one can be an ulp off, inside any accuracy bound); without one, the
/// division itself. An infinite sum would make the residual inf - inf = NaN, so q is first
/// clamped to the finite range: the residual is then +-inf and so is the result (a NaN sum
/// stays NaN either way; a 0 divisor with r = inf gives a / 0's inf or NaN).
template <class T>
inline vec<T> divide_rounded(const vec<T>& a, const vec<T>& d, const vec<T>& r) noexcept {
    if constexpr (has_fused_mul_add<T>()) {
        constexpr T big = std::numeric_limits<T>::max();
        const vec<T> q = clamp_symmetric(a * r, vec<T>::splat(big), vec<T>::splat(-big));
        const vec<T> e = fused_mul_add(q, d * vec<T>::splat(T(-1)), a);  // (-d exactly)
        return fused_mul_add(e, r, q);
    } else {
        (void)r;
        return plus_zero(a / d);  // as the fused form gives: -0 / d is +0 there
    }
}

/// Splits 2 * width consecutive values a, b (a first) into the even-indexed and the
/// odd-indexed ones: the stride-2 de-interleave, done in registers where the ISA allows.
template <class T>
inline void deinterleave2_portable(const vec<T>& a, const vec<T>& b, vec<T>& even, vec<T>& odd) noexcept {
    constexpr std::size_t W = vec<T>::width;
    T buf[2 * W], e[W], o[W];
    a.store(buf);
    b.store(buf + W);
    for (std::size_t i = 0; i < W; ++i) {
        e[i] = buf[2 * i];
        o[i] = buf[2 * i + 1];
    }
    even = vec<T>::load(e);
    odd = vec<T>::load(o);
}

/// The inverse: even, odd -> the 2 * width values e0 o0 e1 o1 ... as lo, hi. (xsimd's
/// zip_lo / zip_hi work within 128-bit lanes, hence the ISA-specific code.)
template <class T>
inline void interleave2_portable(const vec<T>& even, const vec<T>& odd, vec<T>& lo, vec<T>& hi) noexcept {
    constexpr std::size_t W = vec<T>::width;
    T e[W], o[W], buf[2 * W];
    even.store(e);
    odd.store(o);
    for (std::size_t i = 0; i < W; ++i) {
        buf[2 * i] = e[i];
        buf[2 * i + 1] = o[i];
    }
    lo = vec<T>::load(buf);
    hi = vec<T>::load(buf + W);
}

template <class T>
inline void deinterleave2(const vec<T>& a, const vec<T>& b, vec<T>& even, vec<T>& odd) noexcept;

/// deinterleave2 without the final reordering of 128-bit halves that AVX2 needs: even and odd
/// come out with their lanes in one fixed order, which in_order() restores. Lane-wise sums of
/// such vectors, restored once, are the sums of deinterleave2's (one permute instead of one per
/// vector).
template <class T>
AVGPOOL_ALWAYS_INLINE void deinterleave2_unordered(const vec<T>& a, const vec<T>& b, vec<T>& even, vec<T>& odd) noexcept {
#if AVGPOOL_HAS_XSIMD && defined(__AVX2__)
    if constexpr (std::is_same<T, float>::value && vec<T>::width == 8) {
        even.v = _mm256_shuffle_ps(a.v, b.v, _MM_SHUFFLE(2, 0, 2, 0));  // a0 a2 b0 b2 | a4 a6 b4 b6
        odd.v = _mm256_shuffle_ps(a.v, b.v, _MM_SHUFFLE(3, 1, 3, 1));
        return;
    } else if constexpr (std::is_same<T, double>::value && vec<T>::width == 4) {
        even.v = _mm256_unpacklo_pd(a.v, b.v);  // a0 b0 a2 b2
        odd.v = _mm256_unpackhi_pd(a.v, b.v);
        return;
    }
#endif
    deinterleave2(a, b, even, odd);  // (ordered already)
}

/// The lanes of deinterleave2_unordered's outputs (or of lane-wise results of them) in order.
template <class T>
AVGPOOL_ALWAYS_INLINE vec<T> in_order(const vec<T>& v) noexcept {
#if AVGPOOL_HAS_XSIMD && defined(__AVX2__)
    if constexpr (std::is_same<T, float>::value && vec<T>::width == 8) {
        return {_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v.v), _MM_SHUFFLE(3, 1, 2, 0)))};
    } else if constexpr (std::is_same<T, double>::value && vec<T>::width == 4) {
        return {_mm256_permute4x64_pd(v.v, _MM_SHUFFLE(3, 1, 2, 0))};
    }
#endif
    return v;
}

// The ISA paths are chosen by the batch's actual width and the macros that provide their
// intrinsics; inside these templates the branches not taken are never instantiated, so a
// batch of another width (AVX without AVX2, NEON, ...) just takes the portable path.
template <class T>
inline void deinterleave2(const vec<T>& a, const vec<T>& b, vec<T>& even, vec<T>& odd) noexcept {
    constexpr std::size_t W = vec<T>::width;
    constexpr bool f = std::is_same<T, float>::value;
    (void)W;
    (void)f;
#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
    if constexpr (f && W == 16) {
        const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        even.v = _mm512_permutex2var_ps(a.v, ie, b.v);
        odd.v = _mm512_permutex2var_ps(a.v, io, b.v);
        return;
    } else if constexpr (!f && W == 8) {
        const __m512i ie = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
        const __m512i io = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
        even.v = _mm512_permutex2var_pd(a.v, ie, b.v);
        odd.v = _mm512_permutex2var_pd(a.v, io, b.v);
        return;
    }
#endif
#if AVGPOOL_HAS_XSIMD && defined(__AVX2__)
    if constexpr ((f && W == 8) || (!f && W == 4)) {
        // Within 128-bit lanes, then the lane order fixed: [a0 a2 b0 b2 | a4 a6 b4 b6] -> sorted.
        vec<T> e, o;
        deinterleave2_unordered(a, b, e, o);
        even = in_order(e);
        odd = in_order(o);
        return;
    }
#endif
#if AVGPOOL_HAS_XSIMD && defined(__SSE2__)
    if constexpr (f && W == 4) {
        even.v = _mm_shuffle_ps(a.v, b.v, _MM_SHUFFLE(2, 0, 2, 0));
        odd.v = _mm_shuffle_ps(a.v, b.v, _MM_SHUFFLE(3, 1, 3, 1));
        return;
    } else if constexpr (!f && W == 2) {
        even.v = _mm_unpacklo_pd(a.v, b.v);
        odd.v = _mm_unpackhi_pd(a.v, b.v);
        return;
    }
#endif
    deinterleave2_portable(a, b, even, odd);
}

template <class T>
inline void interleave2(const vec<T>& even, const vec<T>& odd, vec<T>& lo, vec<T>& hi) noexcept {
    constexpr std::size_t W = vec<T>::width;
    constexpr bool f = std::is_same<T, float>::value;
    (void)W;
    (void)f;
#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
    if constexpr (f && W == 16) {
        const __m512i il = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const __m512i ih = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        lo.v = _mm512_permutex2var_ps(even.v, il, odd.v);
        hi.v = _mm512_permutex2var_ps(even.v, ih, odd.v);
        return;
    } else if constexpr (!f && W == 8) {
        const __m512i il = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
        const __m512i ih = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
        lo.v = _mm512_permutex2var_pd(even.v, il, odd.v);
        hi.v = _mm512_permutex2var_pd(even.v, ih, odd.v);
        return;
    }
#endif
#if AVGPOOL_HAS_XSIMD && defined(__AVX__)
    if constexpr (f && W == 8) {
        const __m256 u = _mm256_unpacklo_ps(even.v, odd.v);  // e0 o0 e1 o1 | e4 o4 e5 o5
        const __m256 v = _mm256_unpackhi_ps(even.v, odd.v);  // e2 o2 e3 o3 | e6 o6 e7 o7
        lo.v = _mm256_permute2f128_ps(u, v, 0x20);
        hi.v = _mm256_permute2f128_ps(u, v, 0x31);
        return;
    } else if constexpr (!f && W == 4) {
        const __m256d u = _mm256_unpacklo_pd(even.v, odd.v);  // e0 o0 | e2 o2
        const __m256d v = _mm256_unpackhi_pd(even.v, odd.v);  // e1 o1 | e3 o3
        lo.v = _mm256_permute2f128_pd(u, v, 0x20);
        hi.v = _mm256_permute2f128_pd(u, v, 0x31);
        return;
    }
#endif
#if AVGPOOL_HAS_XSIMD && defined(__SSE2__)
    if constexpr (f && W == 4) {
        lo.v = _mm_unpacklo_ps(even.v, odd.v);
        hi.v = _mm_unpackhi_ps(even.v, odd.v);
        return;
    } else if constexpr (!f && W == 2) {
        lo.v = _mm_unpacklo_pd(even.v, odd.v);
        hi.v = _mm_unpackhi_pd(even.v, odd.v);
        return;
    }
#endif
    interleave2_portable(even, odd, lo, hi);
}

/// Scratch blocks kept per thread between calls: line_buffer takes the smallest cached block
/// that is large enough and gives it back, so that once a thread has run a plan the runs after
/// it allocate nothing (the API's allocation-free runs; the cache may allocate while it warms
/// up or grows). At most `slots` blocks are kept, none over keep_max bytes; the thread's exit
/// frees them.
class scratch_cache {
public:
    static constexpr int slots = 6;
    static constexpr std::size_t keep_max = std::size_t(64) << 20;

    explicit scratch_cache(int& state) noexcept : state_(state) { state_ = 1; }
    ~scratch_cache() {
        clear();
        state_ = 2;
    }
    scratch_cache(const scratch_cache&) = delete;
    scratch_cache& operator=(const scratch_cache&) = delete;

    // A block of at least `bytes` bytes; its size goes to cap.
    void* take(std::size_t bytes, std::size_t& cap) {
        int best = -1;
        for (int i = 0; i < slots; ++i) {
            const bool fits = block_[i].p != nullptr && block_[i].cap >= bytes;
            if (fits && (best < 0 || block_[i].cap < block_[best].cap)) best = i;
        }
        if (best < 0) {
            cap = bytes;
            return ::operator new(bytes);
        }
        void* const p = block_[best].p;
        cap = block_[best].cap;
        block_[best] = block{};
        return p;
    }

    // Keeps p in an empty slot, else in place of the smallest block if that is smaller; else
    // frees it.
    void give(void* p, std::size_t cap) noexcept {
        int at = 0;  // the first empty slot, else the smallest block
        for (int i = 0; i < slots && block_[at].p != nullptr; ++i)
            if (block_[i].p == nullptr || block_[i].cap < block_[at].cap) at = i;
        if (cap > keep_max || (block_[at].p != nullptr && block_[at].cap >= cap)) {
            ::operator delete(p);
            return;
        }
        if (block_[at].p != nullptr) ::operator delete(block_[at].p);
        block_[at] = block{p, cap};
    }

    // Frees every block kept; returns their bytes.
    std::size_t clear() noexcept {
        std::size_t bytes = 0;
        for (block& b : block_) {
            if (b.p == nullptr) continue;
            ::operator delete(b.p);
            bytes += b.cap;
            b = block{};
        }
        return bytes;
    }

private:
    struct block {
        void* p = nullptr;
        std::size_t cap = 0;
    };
    block block_[slots];
    int& state_;
};

/// This thread's scratch_cache, or null once it has been destroyed (the thread is exiting).
inline scratch_cache* thread_scratch() noexcept {
    // 0: not made yet, 1: alive, 2: destroyed. A plain int, readable after the cache's end.
    thread_local int state = 0;
    if (state == 2) return nullptr;
    thread_local scratch_cache cache(state);
    return &cache;
}

/// A block of at least `bytes` bytes from this thread's cache (from new while the thread is
/// exiting); its size goes to cap. scratch_give returns it, on any thread.
inline void* scratch_take(std::size_t bytes, std::size_t& cap) {
    if (scratch_cache* const cache = thread_scratch()) return cache->take(bytes, cap);
    cap = bytes;
    return ::operator new(bytes);
}
inline void scratch_give(void* p, std::size_t cap) noexcept {
    if (scratch_cache* const cache = thread_scratch()) {
        cache->give(p, cap);
    } else {
        ::operator delete(p);
    }
}

/// A standard allocator over the thread's scratch_cache, for containers a call builds and
/// drops (reserved once to their bound: one block each). A block goes back to the cache of the
/// thread that frees it, recorded at the size asked for.
template <class T>
struct scratch_allocator {
    using value_type = T;
    scratch_allocator() noexcept = default;
    template <class U>
    scratch_allocator(const scratch_allocator<U>&) noexcept {}
    T* allocate(std::size_t n) {
        std::size_t cap = 0;
        return static_cast<T*>(scratch_take(n * sizeof(T), cap));  // (n <= max_size(): the containers check)
    }
    void deallocate(T* p, std::size_t n) noexcept { scratch_give(p, n * sizeof(T)); }
    template <class U>
    bool operator==(const scratch_allocator<U>&) const noexcept {
        return true;
    }
    template <class U>
    bool operator!=(const scratch_allocator<U>&) const noexcept {
        return false;
    }
};

/// An array of n T (uninitialized unless zero) starting on a 64-byte line: kernels' per-call
/// scratch, whose vector loads and stores then split no lines wherever the block lies (the
/// permute backward's scaled planes: 13.1 us aligned against 16.1-17.5 us at the other 16-byte
/// offsets, 32x16^3 3x3x3 stride 2 on AVX-512). Its block comes from the thread's
/// scratch_cache and goes back to the cache of the thread that destroys it.
template <class T>
class line_buffer {
    static_assert(std::is_trivially_copyable<T>::value && std::is_trivially_destructible<T>::value,
                  "line_buffer holds raw values");

public:
    line_buffer() noexcept = default;  // no array: get() is null
    explicit line_buffer(std::size_t n, bool zero = false) {
        raw_ = scratch_take((n + line) * sizeof(T), cap_);
        // (new's blocks are aligned for T at least.)
        const std::size_t skew = reinterpret_cast<std::uintptr_t>(raw_) / sizeof(T) % line;
        data_ = static_cast<T*>(raw_) + (skew == 0 ? 0 : line - skew);
        if (zero) std::fill(data_, data_ + n, T(0));
    }
    line_buffer(line_buffer&& o) noexcept
        : raw_(std::exchange(o.raw_, nullptr)), cap_(o.cap_), data_(std::exchange(o.data_, nullptr)) {}
    line_buffer& operator=(line_buffer&& o) noexcept {
        if (this != &o) {
            release();
            raw_ = std::exchange(o.raw_, nullptr);
            cap_ = o.cap_;
            data_ = std::exchange(o.data_, nullptr);
        }
        return *this;
    }
    line_buffer(const line_buffer&) = delete;
    line_buffer& operator=(const line_buffer&) = delete;
    ~line_buffer() { release(); }

    T* get() const noexcept { return data_; }

private:
    static constexpr std::size_t line = 64 / sizeof(T) > 0 ? 64 / sizeof(T) : 1;
    void release() noexcept {
        if (raw_ != nullptr) scratch_give(raw_, cap_);
        raw_ = nullptr;
    }
    void* raw_ = nullptr;
    std::size_t cap_ = 0;
    T* data_ = nullptr;
};

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_SIMD_HPP
