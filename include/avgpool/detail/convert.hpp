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
#include "simd.hpp"

namespace avgpool {
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

// bfloat_bits_from_float_bits on 16 lanes: NaNs quieted, the rest rounded to nearest even.
inline __m256i bfloat_bits_avx512_int(__m512 v) noexcept {
    const __m512i x = _mm512_castps_si512(v);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512i hi = _mm512_maskz_srli_epi32(all16, x, 16);
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r = _mm512_maskz_srli_epi32(all16, _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
    r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
    return _mm512_maskz_cvtepi32_epi16(all16, r);
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

}  // namespace detail
}  // namespace avgpool

#endif  // AVGPOOL_DETAIL_CONVERT_HPP
