// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// Element access for kernels whose storage type S differs from the type they compute in:
// float16 and bfloat16 storage computes in float. A vector load of S gives a vec of the
// compute type (converted in registers), a vector store rounds once, to nearest even, with
// the same bits as the scalar conversions of float16.hpp. For S == T these are the plain
// vec loads and stores, so a kernel written against them is unchanged for float and double.
#ifndef AVGPOOL_DETAIL_CONVERT_HPP
#define AVGPOOL_DETAIL_CONVERT_HPP

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "../float16.hpp"
#include "../types.hpp"
#include "simd.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

template <class S>
struct is_half : std::integral_constant<bool, std::is_same<S, float16>::value || std::is_same<S, bfloat16>::value> {};

/// The type a kernel computes in for storage S.
template <class S>
using compute_t = typename std::conditional<is_half<S>::value, float, S>::type;

template <class T>
inline vec<T> vload(const T* p) noexcept {
    return vec<T>::load(p);
}
template <class T>
inline void vstore(const vec<T>& v, T* p) noexcept {
    v.store(p);
}
template <class T>
inline T sload(const T& x) noexcept {
    return x;
}
template <class T>
inline void sstore(T x, T* p) noexcept {
    *p = x;
}

inline float sload(const bfloat16& x) noexcept { return static_cast<float>(x); }
inline float sload(const float16& x) noexcept { return static_cast<float>(x); }
inline void sstore(float x, bfloat16* p) noexcept { *p = bfloat16(x); }
inline void sstore(float x, float16* p) noexcept { *p = float16(x); }

#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_AVX2 && defined(__AVX512F__)
constexpr __mmask16 all16 = 0xffff;

// bfloat_bits_from_float_bits on 16 lanes: NaNs quieted, the rest rounded to nearest even;
// the bits in the low half of each 32-bit lane.
inline __m512i bfloat_lanes_avx512_int(__m512 v) noexcept {
    const __m512i x = _mm512_castps_si512(v);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512i hi = _mm512_maskz_srli_epi32(all16, x, 16);
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r = _mm512_maskz_srli_epi32(all16, _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
    return _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
}
inline __m256i bfloat_bits_avx512_int(__m512 v) noexcept {
    return _mm512_maskz_cvtepi32_epi16(all16, bfloat_lanes_avx512_int(v));
}

inline __m256i bfloat_bits_avx512(__m512 v) noexcept {
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
    // The conversion instruction rounds and quiets NaNs the same way, but flushes float
    // subnormals to zero: lanes holding one (rare in data; class 0x20) take the integer rule.
    __m256i r = (__m256i)_mm512_cvtneps_pbh(v);
    const __mmask16 sub = _mm512_fpclass_ps_mask(v, 0x20);
    if (AVGPOOL_UNLIKELY(sub != 0)) r = _mm256_mask_mov_epi16(r, sub, bfloat_bits_avx512_int(v));
    return r;
#else
    return bfloat_bits_avx512_int(v);
#endif
}
#endif

// Any width without intrinsics below: through a small array and the batch conversions.
template <class S>
inline vec<float> vload_portable(const S* p) noexcept {
    constexpr std::size_t W = vec<float>::width;
    float f[W];
    to_float(p, f, W);
    return vec<float>::load(f);
}
template <class S>
inline void vstore_portable(const vec<float>& v, S* p) noexcept {
    constexpr std::size_t W = vec<float>::width;
    float f[W];
    v.store(f);
    from_float(f, p, W);
}

template <class F>
inline vec<F> vload_bf16(const bfloat16* p) noexcept {
    constexpr std::size_t W = vec<F>::width;
    (void)W;
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_AVX2 && defined(__AVX512F__)
    if constexpr (W == 16) {
        // (The maskz forms with every lane kept: the plain ones pass an undefined vector
        // through, which GCC 12 reports as maybe-uninitialized.)
        const __m512i w = _mm512_maskz_cvtepu16_epi32(all16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return vec<F>{_mm512_castsi512_ps(_mm512_maskz_slli_epi32(all16, w, 16))};
    }
#endif
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_AVX2
    if constexpr (W == 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return vec<F>{_mm256_castsi256_ps(_mm256_slli_epi32(w, 16))};
    }
#endif
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_SSE2 && defined(__SSE2__)
    if constexpr (W == 4) {
        // Interleaving zeros below each value is the shift into the upper half.
        const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
        return vec<F>{_mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), b))};
    }
#endif
    return vload_portable(p);
}

template <class F>
inline void vstore_bf16(const vec<F>& v, bfloat16* p) noexcept {
    constexpr std::size_t W = vec<F>::width;
    (void)W;
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_AVX2 && defined(__AVX512F__)
    if constexpr (W == 16) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bfloat_bits_avx512(v.v));
        return;
    }
#endif
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_AVX2
    if constexpr (W == 8) {
        const __m256i r = bfloat_bits_avx2(_mm256_castps_si256(v.v));
        const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
        return;
    }
#endif
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_SSE2 && defined(__SSE2__)
    if constexpr (W == 4) {
        const __m128i r = bfloat_bits_sse2(_mm_castps_si128(v.v));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(p), pack_low16_sse2(r, r));
        return;
    }
#endif
    vstore_portable(v, p);
}

template <class F>
inline vec<F> vload_f16(const float16* p) noexcept {
    constexpr std::size_t W = vec<F>::width;
    (void)W;
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_AVX2 && defined(__AVX512F__)
    if constexpr (W == 16) return vec<F>{_mm512_maskz_cvtph_ps(all16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
#endif
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_F16C
    if constexpr (W == 8) return vec<F>{_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
    if constexpr (W == 4) return vec<F>{_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))};
#endif
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_SSE2 && defined(__SSE2__)
    if constexpr (W == 4) {
        const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
        return vec<F>{float_from_half_sse2(_mm_unpacklo_epi16(h, _mm_setzero_si128()))};
    }
#endif
    return vload_portable(p);
}

template <class F>
inline void vstore_f16(const vec<F>& v, float16* p) noexcept {
    constexpr std::size_t W = vec<F>::width;
    (void)W;
    // Immediate rounding (not MXCSR's), as the scalar F16C conversion.
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_AVX2 && defined(__AVX512F__)
    if constexpr (W == 16) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_maskz_cvtps_ph(all16, v.v, _MM_FROUND_TO_NEAREST_INT));
        return;
    }
#endif
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_F16C
    if constexpr (W == 8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v.v, _MM_FROUND_TO_NEAREST_INT));
        return;
    }
    if constexpr (W == 4) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_cvtps_ph(v.v, _MM_FROUND_TO_NEAREST_INT));
        return;
    }
#endif
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_SSE2 && defined(__SSE2__)
    if constexpr (W == 4) {
        const __m128i h = half_bits_sse2(v.v);
        _mm_storel_epi64(reinterpret_cast<__m128i*>(p), pack_low16_sse2(h, h));
        return;
    }
#endif
    vstore_portable(v, p);
}

/// dst[i] = src[i] (rounded once to M), i < n.
template <class T, class M>
inline void store_n(const T* src, M* dst, std::size_t n) noexcept {
    if constexpr (std::is_same<T, M>::value) {
        std::memcpy(dst, src, n * sizeof(T));
    } else {
        from_float(src, dst, n);
    }
}

// Written as templates (F = float) so that the branches for other vector widths are discarded.
inline vec<float> vload(const bfloat16* p) noexcept { return vload_bf16<float>(p); }
inline void vstore(const vec<float>& v, bfloat16* p) noexcept { vstore_bf16<float>(v, p); }
inline vec<float> vload(const float16* p) noexcept { return vload_f16<float>(p); }
inline void vstore(const vec<float>& v, float16* p) noexcept { vstore_f16<float>(v, p); }

#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
// 16 lanes under a mask, as float (lanes outside it read as 0 and are not written): the
// partial vector at a plane's or row's end, for the AVX-512 kernels.
AVGPOOL_ALWAYS_INLINE __m512 masked_load(__mmask16 k, const float* p) noexcept { return _mm512_maskz_loadu_ps(k, p); }
AVGPOOL_ALWAYS_INLINE void masked_store(float* p, __mmask16 k, __m512 v) noexcept { _mm512_mask_storeu_ps(p, k, v); }
#endif

// The 16-bit forms need BW and VL (masked 16-bit loads and stores).
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_AVX2 && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define AVGPOOL_MASKED_HALF 1
AVGPOOL_ALWAYS_INLINE __m512 masked_load(__mmask16 k, const bfloat16* p) noexcept {
    // maskz with every lane: the plain forms trip GCC 12's -Wmaybe-uninitialized in its header.
    const __m512i w = _mm512_maskz_cvtepu16_epi32(all16, _mm256_maskz_loadu_epi16(k, p));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all16, w, 16));
}
AVGPOOL_ALWAYS_INLINE void masked_store(bfloat16* p, __mmask16 k, __m512 v) noexcept {
    _mm256_mask_storeu_epi16(p, k, bfloat_bits_avx512(v));
}
AVGPOOL_ALWAYS_INLINE __m512 masked_load(__mmask16 k, const float16* p) noexcept {
    return _mm512_maskz_cvtph_ps(all16, _mm256_maskz_loadu_epi16(k, p));
}
AVGPOOL_ALWAYS_INLINE void masked_store(float16* p, __mmask16 k, __m512 v) noexcept {
    // Immediate rounding (not MXCSR's), as the scalar conversion.
    _mm256_mask_storeu_epi16(p, k, _mm512_maskz_cvtps_ph(all16, v, _MM_FROUND_TO_NEAREST_INT));
}
// 16 lanes, all read: for kernels that know the whole vector lies inside the tensor (a
// masked load costs more than a plain one where the loads are the bottleneck).
AVGPOOL_ALWAYS_INLINE __m512 full_load(const float* p) noexcept { return _mm512_loadu_ps(p); }
AVGPOOL_ALWAYS_INLINE __m512 full_load(const bfloat16* p) noexcept {
    // (maskz with every lane, as masked_load.)
    const __m512i w = _mm512_maskz_cvtepu16_epi32(all16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all16, w, 16));
}
AVGPOOL_ALWAYS_INLINE __m512 full_load(const float16* p) noexcept {
    return _mm512_maskz_cvtph_ps(all16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
#else
#define AVGPOOL_MASKED_HALF 0
#endif

/// Stores lanes 0 .. n - 1 of v at p (the partial vector at a row's end). With AVX-512 one
/// masked store (lanes past n are neither written nor faulted on): element copies compiled to
/// a `rep movs`, tens of cycles at each row's end (a tenth of a 9-channel channels-last row's
/// time). Otherwise element copies, not memcpy: a call inside a row or column loop made the
/// loop spill its vectors and counters around it (the 2x2 kernel's row loop: 0.52x the cycles
/// without it).
template <class T, class M>
inline void vstore_n(const vec<T>& v, M* p, index_t n) noexcept {
#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
    if constexpr (vec<T>::width == 16 && std::is_same<T, float>::value &&
                  (std::is_same<M, float>::value || (AVGPOOL_MASKED_HALF && sizeof(M) == 2))) {
        masked_store(p, static_cast<__mmask16>((1u << n) - 1u), v.v);  // 16-bit: converted, as vstore
        return;
    } else if constexpr (vec<T>::width == 8 && std::is_same<T, double>::value && std::is_same<M, double>::value) {
        _mm512_mask_storeu_pd(p, static_cast<__mmask8>((1u << n) - 1u), v.v);
        return;
    }
#endif
    M tmp[vec<T>::width];
    vstore(v, tmp);
    for (index_t i = 0; i < n; ++i) p[i] = tmp[i];
}

/// Two vectors' worth of consecutive values, for kernels whose arithmetic is lane-wise
/// between values at the same offset (channels-last: SIMD over channels). Which value sits in
/// which lane is the business of vload_pair and vstore_pair alone, which agree on it: the two
/// halves in order, except bfloat16 on AVX2 and AVX-512, where one load of a vector's width
/// splits into the even and the odd values with one shift and one AND (no widening shuffles),
/// and a store joins them again with one shift and one OR (no packs). Buffers written from
/// pairs must be read back as the same pairs.
template <class T>
struct vpair {
    vec<T> a, b;
    friend vpair operator+(const vpair& x, const vpair& y) noexcept { return {x.a + y.a, x.b + y.b}; }
};

#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_AVX2 && defined(__AVX512BW__)
/// 32 bfloat16 values as floats: those at even positions (even) and at odd ones (odd), one
/// shift and one AND (no widening shuffles). Value 2i is the low half of 32-bit lane i, value
/// 2i + 1 its high half, and a float is its bfloat16 bits in the high half.
AVGPOOL_ALWAYS_INLINE void split_bf16(__m512i w, __m512& even, __m512& odd) noexcept {
    even = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all16, w, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}
#endif

template <class M>
inline vpair<compute_t<M>> vload_pair(const M* p) noexcept {
    using T = compute_t<M>;
    constexpr std::size_t W = vec<T>::width;
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_AVX2 && defined(__AVX512BW__)
    if constexpr (std::is_same<M, bfloat16>::value && W == 16) {
        __m512 e, o;
        split_bf16(_mm512_loadu_si512(p), e, o);
        return {vec<T>{e}, vec<T>{o}};
    }
#endif
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_AVX2
    if constexpr (std::is_same<M, bfloat16>::value && W == 8) {
        // As above, on 8 lanes: the two 128-bit widenings and their shuffles are gone.
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        return {vec<T>{_mm256_castsi256_ps(_mm256_slli_epi32(x, 16))},
                vec<T>{_mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(static_cast<int>(0xffff0000u))))}};
    }
#endif
    return {vload(p), vload(p + W)};
}

template <class M>
inline void vstore_pair(const vpair<compute_t<M>>& v, M* p) noexcept {
    using T = compute_t<M>;
    constexpr std::size_t W = vec<T>::width;
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_AVX2 && defined(__AVX512BW__)
    if constexpr (std::is_same<M, bfloat16>::value && W == 16) {
        __m512i r;
#if defined(__AVX512BF16__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
        // Both halves rounded by one instruction (a's 16 values, then b's), then woven back
        // into value order. The instruction flushes subnormals: pairs with one take the
        // integer rule (rare).
        const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(v.b.v, v.a.v);
        const __m512i weave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                               6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        r = _mm512_permutexvar_epi16(weave, both);
        const __mmask16 sub = _mm512_fpclass_ps_mask(v.a.v, 0x20) | _mm512_fpclass_ps_mask(v.b.v, 0x20);
        if (AVGPOOL_UNLIKELY(sub != 0))
            r = _mm512_or_si512(bfloat_lanes_avx512_int(v.a.v), _mm512_maskz_slli_epi32(all16, bfloat_lanes_avx512_int(v.b.v), 16));
#else
        r = _mm512_or_si512(bfloat_lanes_avx512_int(v.a.v), _mm512_maskz_slli_epi32(all16, bfloat_lanes_avx512_int(v.b.v), 16));
#endif
        _mm512_storeu_si512(p, r);
        return;
    }
#endif
#if AVGPOOL_HAS_XSIMD && AVGPOOL_FLOAT16_AVX2
    if constexpr (std::is_same<M, bfloat16>::value && W == 8) {
        // Each lane's rounded bits, b's moved to the high half: no packs, no lane crossing.
        const __m256i lo = bfloat_bits_avx2(_mm256_castps_si256(v.a.v));
        const __m256i hi = _mm256_slli_epi32(bfloat_bits_avx2(_mm256_castps_si256(v.b.v)), 16);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_or_si256(lo, hi));
        return;
    }
#endif
    vstore(v.a, p);
    vstore(v.b, p + W);
}

/// vload of a vec or a vpair.
template <class Vt, class S>
inline Vt vload_as(const S* p) noexcept {
    if constexpr (std::is_same<Vt, vpair<compute_t<S>>>::value) {
        return vload_pair(p);
    } else {
        return vload(p);
    }
}

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_CONVERT_HPP
