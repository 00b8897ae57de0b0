// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// 2x2 windows at stride 2 with every window whole (DenseNet / ResNet-D transitions): each output
// row is one pair of input rows, so a row is four loads, two adds, a de-interleave, an add and
// a scale, with no buffer and no per-window table. The general kernels spend more on per-row
// bookkeeping than on this arithmetic when planes are 14x14 or 28x28. Backward is the same walk
// transposed: each scaled gradient, interleaved with itself, written to both input rows.
#ifndef AVGPOOL_DETAIL_KERNEL_PAIR_HPP
#define AVGPOOL_DETAIL_KERNEL_PAIR_HPP

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "kernel_cf.hpp"
#include "plan.hpp"
#include "simd.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

/// Whether every window is the whole 2x2 block at (2 oh, 2 ow) with both axis factors 2.
template <std::size_t R>
bool pair_geometry(const plan_data<R>& p) noexcept {
    if constexpr (R != 2) {
        return false;
    } else {
        if (p.memory_layout != layout::channels_first || p.adaptive || p.global) return false;
        const pool_geometry<R>& g = p.geometry;
        for (std::size_t a = 0; a < R; ++a) {
            if (g.strides[a] != 2 || g.dilations[a] != 1 || 2 * g.output[a] > g.input[a]) return false;
            const window* w = p.axis(a);
            for (index_t o = 0; o < g.output[a]; ++o)
                if (w[o].first != 2 * o || w[o].count != 2 || w[o].divisor != 2) return false;
        }
        return true;
    }
}

template <class T, std::size_t R>
bool pair_applicable(const plan_data<R>& p) noexcept {
    return p.max_divisor <= exact_integer_limit<T>() && pair_geometry<R>(p);
}

// M: the memory type of the forward pass's input and output (T, or float16 / bfloat16 for
// T = float, converted in registers). Backward runs in T only.
template <class T, std::size_t R, class M = T>
class pair_kernel {
    using V = vec<T>;
    static constexpr index_t L = static_cast<index_t>(V::width);

public:
    pair_kernel(const plan_data<R>& p, pool_op op) : p_(p) {
        const pool_geometry<R>& g = p.geometry;
        H_ = g.input[0];
        W_ = g.input[1];
        Ho_ = g.output[0];
        Wo_ = g.output[1];
        const double div = p.divisor_override > 0 ? static_cast<double>(p.divisor_override) : 4.0;
        // 1/4 is exact; an override's reciprocal is within an ulp, inside the accuracy bound.
        scale_ = op == pool_op::sum ? T(1) : static_cast<T>(1.0 / div);
        bscale_ = static_cast<T>(1.0 / div);
    }

    /// Planes item_begin .. item_end - 1 (item = n * C + c).
    /// A row pair's vector reads reach up to 2 vectors past its end while they stay inside the input.
    void run(const M* in, M* out, index_t item_begin, index_t item_end) const {
        const M* const in_end = in + p_.input_shape[0] * p_.input_shape[1] * H_ * W_;
        M* const out_end = out + item_end * Ho_ * Wo_;
        for (index_t item = item_begin; item < item_end; ++item)
            rows(in + item * H_ * W_, in_end, out + item * Ho_ * Wo_, out_end, 0, Ho_);
    }

    /// Output rows row_begin .. row_end - 1 of plane `item`, for splitting few planes across
    /// threads. Each output comes from its own two input rows, so the bits are run()'s
    /// whatever the split.
    void run_rows(const M* in, M* out, index_t item, index_t row_begin, index_t row_end) const {
        if (row_begin >= row_end) return;
        const M* const in_end = in + p_.input_shape[0] * p_.input_shape[1] * H_ * W_;
        M* const dst = out + item * Ho_ * Wo_;
        rows(in + item * H_ * W_, in_end, dst, dst + row_end * Wo_, row_begin, row_end);
    }

private:
    // Output rows [r0, r1) of the plane at src / dst; vector reads stay before in_end and
    // writes before out_end (the end of the caller's outputs: another thread may own the rest).
    void rows(const M* src, const M* in_end, M* dst0, M* out_end, index_t r0, index_t r1) const {
        // Everything in locals: the vector stores may alias members, which would reload them
        // for every row (14x14 planes: 72 instructions a row, 40 of them bookkeeping).
        const index_t W = W_, Wo = Wo_;
        const T scale = scale_;
        const V sc = V::splat(scale);
        const M* top = src + 2 * r0 * W;
        M* dst = dst0 + r0 * Wo;
        for (index_t r = r0; r < r1; ++r, top += 2 * W, dst += Wo) {
            const M* const bot = top + W;
            index_t u = 0;
            for (; u < Wo; u += L) {
                const index_t x = 2 * u;
                if (in_end - (bot + x) < 2 * L) break;  // over-reads must stay in the input
                V e, o;
                deinterleave2(vload(top + x) + vload(bot + x), vload(top + x + L) + vload(bot + x + L), e, o);
                const V v = scale_plus_zero(e + o, sc);  // (+ 0: see plus_zero)
                if (dst + u + L <= out_end) {
                    vstore(v, dst + u);  // a spill past the row is overwritten by later rows
                } else {  // never past this call's outputs
                    vstore_n(v, dst + u, Wo - u);
                }
            }
            for (; u < Wo; ++u) {
                const T a = sload(top[2 * u]) + sload(bot[2 * u]), b = sload(top[2 * u + 1]) + sload(bot[2 * u + 1]);
                sstore((a + b) * scale + T(0), dst + u);
            }
        }
    }

public:
    /// grad_in of planes item_begin .. item_end - 1: grad_out / divisor on the four inputs of
    /// each window; rows and columns no window reaches (odd extents) get 0.
    void run_backward(const T* grad_out, T* grad_in, index_t item_begin, index_t item_end) const {
        for (index_t item = item_begin; item < item_end; ++item) {
            T* const plane = grad_in + item * H_ * W_;
            backward_rows(grad_out, grad_out + item * Ho_ * Wo_, plane, plane + H_ * W_, 0, H_);
        }
    }

    /// Input rows row_begin .. row_end - 1 of grad_in's plane `item` (the units of a backward
    /// split): each value is its one output's share, so the bits are run_backward()'s.
    void run_backward_rows(const T* grad_out, T* grad_in, index_t item, index_t row_begin, index_t row_end) const {
        T* const plane = grad_in + item * H_ * W_;
        backward_rows(grad_out, grad_out + item * Ho_ * Wo_, plane, plane + row_end * W_, row_begin, row_end);
    }

private:
    // Input rows [x0, x1) of a plane from its gradients g_plane; vector writes stay before end.
    void backward_rows(const T* grad_out, const T* g_plane, T* plane, const T* end, index_t x0, index_t x1) const {
        const index_t W = W_, Ho = Ho_, Wo = Wo_;  // locals, as in rows()
        const T bscale = bscale_;
        const V sc = V::splat(bscale);
        const T* const g_end = grad_out + p_.input_shape[0] * p_.input_shape[1] * Ho * Wo;
        for (index_t x = x0; x < x1;) {
            T* const row = plane + x * W;
            if (x >= 2 * Ho) {  // a last odd row: no window reaches it
                std::fill(row, row + W, T(0));
                ++x;
                continue;
            }
            // Both rows of the window row at once where both are in the range.
            const index_t n = x % 2 == 0 && x + 1 < x1 ? 2 : 1;
            T* const last = row + (n - 1) * W;
            const T* const g = g_plane + (x / 2) * Wo;
            // L shares (from output column u) onto 2L columns of each row.
            auto put = [&](index_t u) {
                const V v = scale_plus_zero(V::load(g + u), sc);
                V lo, hi;
                interleave2(v, v, lo, hi);
                lo.store(row + 2 * u);
                hi.store(row + 2 * u + L);
                if (n == 2) {
                    lo.store(last + 2 * u);
                    hi.store(last + 2 * u + L);
                }
            };
            index_t u = 0;
            for (; u + L <= Wo; u += L) put(u);
#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
            // The rest of a row of at least a vector (56x56 planes: 12 outputs, 48 scalar
            // stores a row pair), under masks, in 32-byte stores: odd rows of 56 floats start
            // 32 bytes into a line, and 64-byte stores there, split across lines, made it
            // slower than the scalars (128x56x56, harness: 48 -> 43 us; 64-byte masked
            // stores 48 -> 51).
            if constexpr (std::is_same<T, float>::value && L == 16) {
                if (u < Wo && Wo >= L) {
                    const unsigned k = static_cast<unsigned>(Wo - u), k2 = 2 * k;  // k: 1 .. 15
                    const V v = scale_plus_zero(V{typename V::batch(masked_load(static_cast<__mmask16>((1u << k) - 1), g + u))}, sc);
                    V lo, hi;
                    interleave2(v, v, lo, hi);
                    // (maskz: the plain forms trip GCC 12's -Wmaybe-uninitialized in its header)
                    const __m256 q[4] = {_mm512_maskz_extractf32x8_ps(0xff, lo.v, 0), _mm512_maskz_extractf32x8_ps(0xff, lo.v, 1),
                                         _mm512_maskz_extractf32x8_ps(0xff, hi.v, 0), _mm512_maskz_extractf32x8_ps(0xff, hi.v, 1)};
                    for (T* r : {row, last}) {
                        for (unsigned h = 0; h * 8 < k2; ++h) {
                            const unsigned left = k2 - h * 8;
                            _mm256_mask_storeu_ps(r + 2 * u + 8 * h, static_cast<__mmask8>(left >= 8 ? 0xffu : (1u << left) - 1), q[h]);
                        }
                    }
                    u = Wo;
                }
            }
#endif
            // Narrow rows (Wo < L): one vector, while its reads stay in grad_out and its
            // writes before end; the lanes past 2 Wo land in columns and rows written after it.
            if (Wo < L && g + L <= g_end && last + 2 * L <= end) {
                put(0);
                u = Wo;
            }
            for (; u < Wo; ++u) {
                const T v = g[u] * bscale + T(0);
                row[2 * u] = row[2 * u + 1] = last[2 * u] = last[2 * u + 1] = v;
            }
            for (index_t c = 2 * Wo; c < W; ++c) row[c] = last[c] = T(0);
            x += n;
        }
    }

    const plan_data<R>& p_;
    index_t H_ = 0, W_ = 0, Ho_ = 0, Wo_ = 0;
    T scale_ = T(1), bscale_ = T(1);
};

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_KERNEL_PAIR_HPP
