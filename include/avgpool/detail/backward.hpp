// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The backward pass (PyTorch's semantics): every output gradient, divided by exactly the
// forward divisor, is added to each input tap of its window; padding receives nothing; inputs
// no window covers get 0; grad_in is overwritten. It is the transpose of the forward sum and
// runs on the same window tables: the reference scatters tap by tap (any rank, either layout),
// the channels-first kernel transposes the separable sum (a horizontal scatter into a padded
// row buffer, then that row added to every input row of the window).
#ifndef AVGPOOL_DETAIL_BACKWARD_HPP
#define AVGPOOL_DETAIL_BACKWARD_HPP

#include <algorithm>
#include <cstddef>

#include "kernel_cf.hpp"
#include "plan.hpp"
#include "simd.hpp"

namespace avgpool {
namespace detail {

// The divisor the forward pass used for an output, as T; 0 for an empty window (its gradient
// goes nowhere: the window has no taps).
template <class T, std::size_t R>
T backward_divisor(const plan_data<R>& p, const window* const* w) noexcept {
    bool empty = false;
    const double div = window_divisor<R>(p, w, empty);
    return empty ? T(0) : static_cast<T>(div);
}

/// Reference: zero the planes, then scatter each output's share tap by tap.
template <class T, std::size_t R>
void reference_backward(const plan_data<R>& p, const T* grad_out, T* grad_in, index_t item_begin,
                        index_t item_end) {
    const dims<R + 2> in_st = element_strides<R>(p.input_shape, p.memory_layout);
    const dims<R + 2> out_st = element_strides<R>(p.output_shape, p.memory_layout);
    const index_t C = p.input_shape[1];
    const index_t in_volume = p.input_spatial_volume(), out_volume = p.output_spatial_volume();
    const dims<R>& dil = p.geometry.dilations;
    for (index_t item = item_begin; item < item_end; ++item) {
        const index_t n = item / C, c = item % C;
        T* gi = grad_in + n * in_st[0] + c * in_st[1];
        const T* go = grad_out + n * out_st[0] + c * out_st[1];
        // Zero this (n, c): its elements sit at multiples of the innermost spatial stride.
        const index_t step = in_st[R + 1];
        for (index_t i = 0; i < in_volume; ++i) gi[i * step] = T(0);

        dims<R> o{};
        for (index_t flat = 0; flat < out_volume; ++flat) {
            const window* w[R];
            bool any_empty = false;
            index_t out_off = 0;
            for (std::size_t a = 0; a < R; ++a) {
                w[a] = p.axis(a) + o[a];
                any_empty = any_empty || w[a]->count == 0;
                out_off += o[a] * out_st[a + 2];
            }
            const T div = backward_divisor<T, R>(p, w);
            if (!any_empty && div != T(0)) {
                const T share = go[out_off] / div;
                dims<R> t{};
                for (;;) {
                    index_t off = 0;
                    for (std::size_t a = 0; a < R; ++a) off += (w[a]->first + t[a] * dil[a]) * in_st[a + 2];
                    gi[off] += share;
                    std::size_t a = R;
                    while (a-- > 0) {
                        if (++t[a] < w[a]->count) break;
                        t[a] = 0;
                    }
                    if (a == static_cast<std::size_t>(-1)) break;  // every counter wrapped
                }
            }
            for (std::size_t a = R; a-- > 0;) {
                if (++o[a] < p.output_shape[a + 2]) break;
                o[a] = 0;
            }
        }
    }
}

/// Whether the channels-first transposed kernel covers this plan for element type T.
template <class T, std::size_t R>
bool backward_cf_applicable(const plan_data<R>& p) noexcept {
    if (R > 3 || p.memory_layout != layout::channels_first) return false;
    if (p.max_divisor > exact_integer_limit<T>()) return false;
    const pool_geometry<R>& g = p.geometry;
    if (!outer_rows_fit<R>(g)) return false;
    if (p.adaptive) return g.input[R - 1] <= cf_buffer;
    return (g.output[R - 1] - 1) * g.strides[R - 1] + (g.kernel[R - 1] - 1) * g.dilations[R - 1] + 1 <= cf_buffer;
}

template <class T, std::size_t R>
class backward_cf {
    using V = vec<T>;
    static constexpr index_t L = static_cast<index_t>(V::width);

public:
    explicit backward_cf(const plan_data<R>& p) : p_(p) {
        const pool_geometry<R>& g = p.geometry;
        W_ = g.input[R - 1];
        Wo_ = g.output[R - 1];
        s_ = g.strides[R - 1];
        d_ = g.dilations[R - 1];
        k_ = g.kernel[R - 1];
        pb_ = p.adaptive ? 0 : g.pads_begin[R - 1];
        len_ = p.adaptive ? W_ : (Wo_ - 1) * s_ + (k_ - 1) * d_ + 1;
        cols_ = std::clamp<index_t>(len_ - pb_, 0, W_);  // input columns a window reaches
    }

    void run(const T* grad_out, T* grad_in, index_t item_begin, index_t item_end) const {
        const pool_geometry<R>& g = p_.geometry;
        const index_t in_plane = p_.input_spatial_volume(), out_plane = p_.output_spatial_volume();
        alignas(64) T hb[cf_buffer + L];
        T* rows[cf_max_outer_rows];
        for (index_t item = item_begin; item < item_end; ++item) {
            T* gi = grad_in + item * in_plane;
            const T* go = grad_out + item * out_plane;
            std::fill(gi, gi + in_plane, T(0));
            if constexpr (R == 1) {
                rows[0] = gi;
                row(hb, go, rows, 1, 1.0);
            } else if constexpr (R == 2) {
                for (index_t oh = 0; oh < g.output[0]; ++oh) {
                    const window& wh = p_.axis(0)[oh];
                    for (index_t j = 0; j < wh.count; ++j) rows[j] = gi + (wh.first + j * g.dilations[0]) * W_;
                    row(hb, go + oh * Wo_, rows, wh.count, static_cast<double>(wh.divisor));
                }
            } else {
                const index_t HW = g.input[1] * W_;
                for (index_t od = 0; od < g.output[0]; ++od) {
                    const window& wd = p_.axis(0)[od];
                    for (index_t oh = 0; oh < g.output[1]; ++oh) {
                        const window& wh = p_.axis(1)[oh];
                        index_t n = 0;
                        for (index_t i = 0; i < wd.count; ++i)
                            for (index_t j = 0; j < wh.count; ++j)
                                rows[n++] = gi + (wd.first + i * g.dilations[0]) * HW + (wh.first + j * g.dilations[1]) * W_;
                        row(hb, go + (od * g.output[1] + oh) * Wo_, rows, n,
                            static_cast<double>(wd.divisor) * static_cast<double>(wh.divisor));
                    }
                }
            }
        }
    }

private:
    // One output row: shares scattered into the padded row hb, then hb's input columns added
    // to every input row of the outer window.
    void row(T* hb, const T* go, T* const* rows, index_t n, double outer) const {
        if (n == 0) return;  // the outer window has no taps: nothing receives anything
        const bool fixed = p_.divisor_override > 0;
        if (!fixed && outer == 0.0) return;
        std::fill(hb, hb + len_, T(0));
        const window* w = p_.axis(R - 1);
        const T outer_t = static_cast<T>(fixed ? static_cast<double>(p_.divisor_override) : outer);
        for (index_t ow = 0; ow < Wo_; ++ow) {
            if (w[ow].count == 0) continue;  // taps only in padding
            const T div = fixed ? outer_t : outer_t * static_cast<T>(w[ow].divisor);
            if (div == T(0)) continue;
            const T share = go[ow] / div;
            if (p_.adaptive) {
                for (index_t i = 0; i < w[ow].count; ++i) hb[w[ow].first + i] += share;
            } else {
                T* at = hb + ow * s_;
                for (index_t j = 0; j < k_; ++j) at[j * d_] += share;
            }
        }
        const T* src = hb + pb_;  // input column x is padded position pb + x
        for (index_t r = 0; r < n; ++r) {
            T* dst = rows[r];
            index_t x = 0;
            for (; x + L <= cols_; x += L) (V::load(dst + x) + V::load(src + x)).store(dst + x);
            for (; x < cols_; ++x) dst[x] += src[x];
        }
    }

    const plan_data<R>& p_;
    index_t W_ = 0, Wo_ = 0, s_ = 1, d_ = 1, k_ = 1, pb_ = 0, len_ = 0, cols_ = 0;
};

}  // namespace detail
}  // namespace avgpool

#endif  // AVGPOOL_DETAIL_BACKWARD_HPP
