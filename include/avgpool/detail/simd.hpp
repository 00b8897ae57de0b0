// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The few vector operations the kernels need, over xsimd when it is available (any version
// from 8 on: only load/store/arithmetic/broadcast are used, which kept their names), and
// over plain scalars otherwise, so the library is complete without xsimd.
#ifndef AVGPOOL_DETAIL_SIMD_HPP
#define AVGPOOL_DETAIL_SIMD_HPP

#include <cstddef>

#include "../config.hpp"

#if AVGPOOL_HAS_XSIMD
#include <xsimd/xsimd.hpp>
#endif

#if defined(__SSE2__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace avgpool {
namespace detail {

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
};

#endif

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

template <class T>
inline void deinterleave2(const vec<T>& a, const vec<T>& b, vec<T>& even, vec<T>& odd) noexcept {
    deinterleave2_portable(a, b, even, odd);
}

#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
template <>
inline void deinterleave2<float>(const vec<float>& a, const vec<float>& b, vec<float>& even,
                                 vec<float>& odd) noexcept {
    if constexpr (vec<float>::width == 16) {
        const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        even.v = _mm512_permutex2var_ps(a.v, ie, b.v);
        odd.v = _mm512_permutex2var_ps(a.v, io, b.v);
    } else {
        deinterleave2_portable(a, b, even, odd);
    }
}
template <>
inline void deinterleave2<double>(const vec<double>& a, const vec<double>& b, vec<double>& even,
                                  vec<double>& odd) noexcept {
    if constexpr (vec<double>::width == 8) {
        const __m512i ie = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
        const __m512i io = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
        even.v = _mm512_permutex2var_pd(a.v, ie, b.v);
        odd.v = _mm512_permutex2var_pd(a.v, io, b.v);
    } else {
        deinterleave2_portable(a, b, even, odd);
    }
}
#elif AVGPOOL_HAS_XSIMD && defined(__AVX2__)
template <>
inline void deinterleave2<float>(const vec<float>& a, const vec<float>& b, vec<float>& even,
                                 vec<float>& odd) noexcept {
    if constexpr (vec<float>::width == 8) {
        // Within 128-bit lanes, then fix the lane order: [a0 a2 b0 b2 | a4 a6 b4 b6] -> sorted.
        const __m256 e = _mm256_shuffle_ps(a.v, b.v, _MM_SHUFFLE(2, 0, 2, 0));
        const __m256 o = _mm256_shuffle_ps(a.v, b.v, _MM_SHUFFLE(3, 1, 3, 1));
        even.v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
        odd.v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
    } else {
        deinterleave2_portable(a, b, even, odd);
    }
}
template <>
inline void deinterleave2<double>(const vec<double>& a, const vec<double>& b, vec<double>& even,
                                  vec<double>& odd) noexcept {
    if constexpr (vec<double>::width == 4) {
        const __m256d e = _mm256_unpacklo_pd(a.v, b.v);  // a0 b0 a2 b2
        const __m256d o = _mm256_unpackhi_pd(a.v, b.v);  // a1 b1 a3 b3
        even.v = _mm256_permute4x64_pd(e, _MM_SHUFFLE(3, 1, 2, 0));
        odd.v = _mm256_permute4x64_pd(o, _MM_SHUFFLE(3, 1, 2, 0));
    } else {
        deinterleave2_portable(a, b, even, odd);
    }
}
#elif AVGPOOL_HAS_XSIMD && defined(__SSE2__)
template <>
inline void deinterleave2<float>(const vec<float>& a, const vec<float>& b, vec<float>& even,
                                 vec<float>& odd) noexcept {
    if constexpr (vec<float>::width == 4) {
        even.v = _mm_shuffle_ps(a.v, b.v, _MM_SHUFFLE(2, 0, 2, 0));
        odd.v = _mm_shuffle_ps(a.v, b.v, _MM_SHUFFLE(3, 1, 3, 1));
    } else {
        deinterleave2_portable(a, b, even, odd);
    }
}
template <>
inline void deinterleave2<double>(const vec<double>& a, const vec<double>& b, vec<double>& even,
                                  vec<double>& odd) noexcept {
    if constexpr (vec<double>::width == 2) {
        even.v = _mm_unpacklo_pd(a.v, b.v);
        odd.v = _mm_unpackhi_pd(a.v, b.v);
    } else {
        deinterleave2_portable(a, b, even, odd);
    }
}
#endif

}  // namespace detail
}  // namespace avgpool

#endif  // AVGPOOL_DETAIL_SIMD_HPP
