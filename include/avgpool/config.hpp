// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// Configuration macros. Each can be set by the user before the first include.
//   AVGPOOL_NO_EXCEPTIONS  never throw, even when the compiler has exceptions on;
//                          errors come back only as values (result<T>, status).
//   AVGPOOL_NO_XSIMD       do not use xsimd even when <xsimd/xsimd.hpp> is reachable.
//   AVGPOOL_EXTERN_TEMPLATES  the kernels of float, double, float16 and bfloat16 at ranks 1-3
//                          are compiled elsewhere, by AVGPOOL_INSTANTIATE (pooling.hpp).
//   AVGPOOL_ABI_TAG        the name of the inline namespace around everything (below).
#ifndef AVGPOOL_CONFIG_HPP
#define AVGPOOL_CONFIG_HPP

#include "version.hpp"

#if !defined(AVGPOOL_NO_EXCEPTIONS) && \
    (defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND))
#define AVGPOOL_HAS_EXCEPTIONS 1
#else
#define AVGPOOL_HAS_EXCEPTIONS 0
#endif

#if !defined(AVGPOOL_NO_XSIMD) && defined(__has_include)
#if __has_include(<xsimd/xsimd.hpp>)
#define AVGPOOL_HAS_XSIMD 1
#endif
#endif
#ifndef AVGPOOL_HAS_XSIMD
#define AVGPOOL_HAS_XSIMD 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define AVGPOOL_LIKELY(x) __builtin_expect(!!(x), 1)
#define AVGPOOL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define AVGPOOL_RESTRICT __restrict__
#else
#define AVGPOOL_LIKELY(x) (x)
#define AVGPOOL_UNLIKELY(x) (x)
#define AVGPOOL_RESTRICT
#endif

// Every declaration lives in an inline namespace named after what the translation unit is
// compiled for: xsimd or not, exceptions or not, and each instruction-set extension the code
// reads. Kernels are inline functions and templates, so two translation units built for
// different targets (a runtime-dispatch build: one per instruction set) would otherwise emit
// the same symbols with different bodies, and the linker would keep one of them: the SSE2
// path could end up calling an AVX-512 body. With the tag the symbols differ, and so do the
// types: pass data, not avgpool objects, between such translation units. The names are
// unchanged in source (avgpool::pooling<2> and so on); the tag shows only in symbols, e.g.
// avgpool::abi_xe_2_3_s_41_42_a_f_a2_h (xsimd, exceptions, SSE2 to AVX2 with FMA and F16C).
// AVGPOOL_ABI_TAG can be set by the user to a name of their own instead.
#define AVGPOOL_CAT_I(a, b) a##b
#define AVGPOOL_CAT(a, b) AVGPOOL_CAT_I(a, b)
#if AVGPOOL_HAS_XSIMD && AVGPOOL_HAS_EXCEPTIONS
#define AVGPOOL_ABI_T0 abi_xe
#elif AVGPOOL_HAS_XSIMD
#define AVGPOOL_ABI_T0 abi_xn
#elif AVGPOOL_HAS_EXCEPTIONS
#define AVGPOOL_ABI_T0 abi_se
#else
#define AVGPOOL_ABI_T0 abi_sn
#endif
#if defined(__SSE2__)
#define AVGPOOL_ABI_T1 _2
#else
#define AVGPOOL_ABI_T1
#endif
#if defined(__SSE3__)
#define AVGPOOL_ABI_T2 _3
#else
#define AVGPOOL_ABI_T2
#endif
#if defined(__SSSE3__)
#define AVGPOOL_ABI_T3 _s
#else
#define AVGPOOL_ABI_T3
#endif
#if defined(__SSE4_1__)
#define AVGPOOL_ABI_T4 _41
#else
#define AVGPOOL_ABI_T4
#endif
#if defined(__SSE4_2__)
#define AVGPOOL_ABI_T5 _42
#else
#define AVGPOOL_ABI_T5
#endif
#if defined(__AVX__)
#define AVGPOOL_ABI_T6 _a
#else
#define AVGPOOL_ABI_T6
#endif
#if defined(__FMA__)
#define AVGPOOL_ABI_T7 _f
#else
#define AVGPOOL_ABI_T7
#endif
#if defined(__AVX2__)
#define AVGPOOL_ABI_T8 _a2
#else
#define AVGPOOL_ABI_T8
#endif
#if defined(__F16C__)
#define AVGPOOL_ABI_T9 _h
#else
#define AVGPOOL_ABI_T9
#endif
#if defined(__AVX512F__)
#define AVGPOOL_ABI_T10 _z
#else
#define AVGPOOL_ABI_T10
#endif
#if defined(__AVX512CD__)
#define AVGPOOL_ABI_T11 _cd
#else
#define AVGPOOL_ABI_T11
#endif
#if defined(__AVX512DQ__)
#define AVGPOOL_ABI_T12 _dq
#else
#define AVGPOOL_ABI_T12
#endif
#if defined(__AVX512BW__)
#define AVGPOOL_ABI_T13 _bw
#else
#define AVGPOOL_ABI_T13
#endif
#if defined(__AVX512VL__)
#define AVGPOOL_ABI_T14 _vl
#else
#define AVGPOOL_ABI_T14
#endif
#if defined(__AVX512BF16__)
#define AVGPOOL_ABI_T15 _bf
#else
#define AVGPOOL_ABI_T15
#endif
#if defined(__ARM_NEON) || defined(__ARM_NEON__)
#define AVGPOOL_ABI_T16 _n
#else
#define AVGPOOL_ABI_T16
#endif
#if defined(__aarch64__)
#define AVGPOOL_ABI_T17 _n64
#else
#define AVGPOOL_ABI_T17
#endif
#if defined(__ARM_FEATURE_SVE)
#define AVGPOOL_ABI_T18 _sve
#else
#define AVGPOOL_ABI_T18
#endif
#ifndef AVGPOOL_ABI_TAG
#define AVGPOOL_ABI_TAG                                                                                            \
    AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(   \
    AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(AVGPOOL_CAT(   \
    AVGPOOL_ABI_T0, AVGPOOL_ABI_T1), AVGPOOL_ABI_T2), AVGPOOL_ABI_T3), AVGPOOL_ABI_T4), AVGPOOL_ABI_T5),            \
    AVGPOOL_ABI_T6), AVGPOOL_ABI_T7), AVGPOOL_ABI_T8), AVGPOOL_ABI_T9), AVGPOOL_ABI_T10), AVGPOOL_ABI_T11),         \
    AVGPOOL_ABI_T12), AVGPOOL_ABI_T13), AVGPOOL_ABI_T14), AVGPOOL_ABI_T15), AVGPOOL_ABI_T16), AVGPOOL_ABI_T17),     \
    AVGPOOL_ABI_T18)
#endif
#define AVGPOOL_BEGIN_NAMESPACE \
    namespace avgpool {         \
    inline namespace AVGPOOL_ABI_TAG {
#define AVGPOOL_END_NAMESPACE \
    }                         \
    }

#endif  // AVGPOOL_CONFIG_HPP
