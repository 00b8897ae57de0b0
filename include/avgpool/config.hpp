// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// Configuration macros. Each can be set by the user before the first include.
//   AVGPOOL_NO_EXCEPTIONS  never throw, even when the compiler has exceptions on;
//                          errors come back only as values (result<T>, status).
//   AVGPOOL_NO_XSIMD       do not use xsimd even when <xsimd/xsimd.hpp> is reachable.
//   AVGPOOL_EXTERN_TEMPLATES  the kernels of float, double, float16 and bfloat16 at ranks 1-3
//                          are compiled elsewhere, by AVGPOOL_INSTANTIATE (pooling.hpp).
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

#endif  // AVGPOOL_CONFIG_HPP
