// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The backward pass (PyTorch's semantics): every output gradient, divided by exactly the
// forward divisor, is added to each input tap of its window; padding receives nothing; inputs
// no window covers get 0; grad_in is overwritten. It is the transpose of the forward sum and
// runs on the same window tables: the reference gathers each input's shares through the
// transposed (cover) tables (any rank, either layout, any element type), the channels-first
// kernel transposes the separable sum (a horizontal scatter into a padded
// row buffer, then that row added to every input row of the window).
#ifndef AVGPOOL_DETAIL_BACKWARD_HPP
#define AVGPOOL_DETAIL_BACKWARD_HPP

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "kernel_cf.hpp"
#include "plan.hpp"
#include "simd.hpp"

namespace avgpool {
namespace detail {

/// Reference: gathers, for each input, the shares of the outputs whose windows tap it
/// (through the per-axis cover tables), summed in double and stored once. Any rank, either
/// layout, any element type (16-bit storage is rounded once).
template <class T, std::size_t R>
void reference_backward(const plan_data<R>& p, const T* grad_out, T* grad_in, index_t item_begin,
                        index_t item_end) {
    const dims<R + 2> in_st = element_strides<R>(p.input_shape, p.memory_layout);
    const dims<R + 2> out_st = element_strides<R>(p.output_shape, p.memory_layout);
    const index_t C = p.input_shape[1];
    const index_t in_volume = p.input_spatial_volume();
    const dims<R>& dil = p.geometry.dilations;
    for (index_t item = item_begin; item < item_end; ++item) {
        const index_t n = item / C, c = item % C;
        T* gi = grad_in + n * in_st[0] + c * in_st[1];
        const T* go = grad_out + n * out_st[0] + c * out_st[1];
        dims<R> x{};  // input position, odometer order
        for (index_t flat = 0; flat < in_volume; ++flat) {
            const window* cv[R];
            bool none = false;
            index_t in_off = 0;
            for (std::size_t a = 0; a < R; ++a) {
                cv[a] = p.covers(a) + x[a];
                none = none || cv[a]->count == 0;
                in_off += x[a] * in_st[a + 2];
            }
            double acc = 0.0;
            if (!none) {
                dims<R> t{};  // offsets into each axis's candidate outputs
                for (;;) {
                    // Output (cv[a]->first + t[a])_a takes this input if it has a tap at x on
                    // every axis.
                    const window* w[R];
                    bool tap = true;
                    index_t out_off = 0;
                    for (std::size_t a = 0; a < R && tap; ++a) {
                        const index_t o = cv[a]->first + t[a];
                        w[a] = p.axis(a) + o;
                        const index_t rel = x[a] - w[a]->first;
                        tap = rel >= 0 && rel % dil[a] == 0 && rel / dil[a] < w[a]->count;
                        out_off += o * out_st[a + 2];
                    }
                    if (tap) {
                        bool empty = false;
                        const double div = window_divisor<R>(p, w, empty);
                        if (!empty) acc += to_double(go[out_off]) / div;
                    }
                    std::size_t a = R;
                    while (a-- > 0) {
                        if (++t[a] < cv[a]->count) break;
                        t[a] = 0;
                    }
                    if (a == static_cast<std::size_t>(-1)) break;  // every counter wrapped
                }
            }
            gi[in_off] = from_double<T>(acc);
            for (std::size_t a = R; a-- > 0;) {
                if (++x[a] < p.input_shape[a + 2]) break;
                x[a] = 0;
            }
        }
    }
}

// Largest last-axis kernel the vectorized transpose handles (its zero guard before the shares).
constexpr index_t cf_max_gather_taps = 16;

/// Whether the channels-first transposed kernel covers this plan for element type T.
template <class T, std::size_t R>
bool backward_cf_applicable(const plan_data<R>& p) noexcept {
    if (!std::is_floating_point<T>::value) return false;
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
        gather_ = !p.adaptive && d_ == 1 && (s_ == 1 || s_ == 2) && k_ <= cf_max_gather_taps;
        bdiv_ = p.template last_backward_divisor<T>();
    }

    void run(const T* grad_out, T* grad_in, index_t item_begin, index_t item_end) const {
        const pool_geometry<R>& g = p_.geometry;
        const index_t in_plane = p_.input_spatial_volume(), out_plane = p_.output_spatial_volume();
        alignas(64) T hb[cf_buffer + 4 * L];
        alignas(64) T sp[cf_buffer + 2 * cf_max_gather_taps + 4 * L];  // shares, zero-padded
        std::fill(sp, sp + cf_max_gather_taps, T(0));
        T* rows[cf_max_outer_rows];
        for (index_t item = item_begin; item < item_end; ++item) {
            T* gi = grad_in + item * in_plane;
            const T* go = grad_out + item * out_plane;
            std::fill(gi, gi + in_plane, T(0));
            if constexpr (R == 1) {
                rows[0] = gi;
                row(hb, sp, go, rows, 1, 1.0);
            } else if constexpr (R == 2) {
                for (index_t oh = 0; oh < g.output[0]; ++oh) {
                    const window& wh = p_.axis(0)[oh];
                    for (index_t j = 0; j < wh.count; ++j) rows[j] = gi + (wh.first + j * g.dilations[0]) * W_;
                    row(hb, sp, go + oh * Wo_, rows, wh.count, static_cast<double>(wh.divisor));
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
                        row(hb, sp, go + (od * g.output[1] + oh) * Wo_, rows, n,
                            static_cast<double>(wd.divisor) * static_cast<double>(wh.divisor));
                    }
                }
            }
        }
    }

private:
    // One output row: shares scattered into the padded row hb, then hb's input columns added
    // to every input row of the outer window.
    void row(T* hb, T* sp, const T* go, T* const* rows, index_t n, double outer) const {
        if (n == 0) return;  // the outer window has no taps: nothing receives anything
        const bool fixed = p_.divisor_override > 0;
        if (!fixed && outer == 0.0) return;
        const window* w = p_.axis(R - 1);
        const T outer_t = static_cast<T>(fixed ? static_cast<double>(p_.divisor_override) : outer);
        if (gather_) {
            gather_row(hb, sp, go, fixed, outer_t);
        } else {
            scatter_row(hb, go, w, fixed, outer_t);
        }
        const T* src = hb + pb_;  // input column x is padded position pb + x
        for (index_t r = 0; r < n; ++r) {
            T* dst = rows[r];
            index_t x = 0;
            for (; x + L <= cols_; x += L) (V::load(dst + x) + V::load(src + x)).store(dst + x);
            for (; x < cols_; ++x) dst[x] += src[x];
        }
    }

    // hb[P] = sum over taps j of share[(P - j) / s] (when it divides): the transpose of the
    // forward horizontal pass, as a gather in vector registers (stride 2: even and odd
    // positions separately, interleaved on store). Shares go to sp after its G zeros.
    void gather_row(T* hb, T* sp, const T* go, bool fixed, T outer_t) const {
        constexpr index_t G = cf_max_gather_taps;
        T* sh = sp + G;
        const V scale = V::splat(outer_t);
        index_t u = 0;
        for (; u + L <= Wo_; u += L) (V::load(go + u) / (fixed ? scale : scale * V::load(bdiv_ + u))).store(sh + u);
        for (; u < Wo_; ++u) sh[u] = go[u] / (fixed ? outer_t : outer_t * bdiv_[u]);
        std::fill(sh + Wo_, sh + Wo_ + G + 2 * L, T(0));
        if (s_ == 1) {
            for (index_t P = 0; P < len_; P += L) {
                V acc = V::load(sh + P);
                for (index_t j = 1; j < k_; ++j) acc = acc + V::load(sh + P - j);
                acc.store(hb + P);
            }
        } else {
            // even[m] = sum_{j even} share[m - j/2], odd[m] = sum_{j odd} share[m - (j-1)/2].
            for (index_t m = 0; 2 * m < len_; m += L) {
                V e = V::load(sh + m), o = V::splat(T(0));
                for (index_t j = 2; j < k_; j += 2) e = e + V::load(sh + m - j / 2);
                for (index_t j = 1; j < k_; j += 2) o = (j == 1 ? V::load(sh + m) : o + V::load(sh + m - (j - 1) / 2));
                V lo, hi;
                interleave2(e, o, lo, hi);
                lo.store(hb + 2 * m);
                hi.store(hb + 2 * m + L);
            }
        }
    }

    // Any stride, dilation or adaptive window: scatter each share tap by tap.
    void scatter_row(T* hb, const T* go, const window* w, bool fixed, T outer_t) const {
        std::fill(hb, hb + len_, T(0));
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
    }

    const plan_data<R>& p_;
    index_t W_ = 0, Wo_ = 0, s_ = 1, d_ = 1, k_ = 1, pb_ = 0, len_ = 0, cols_ = 0;
    bool gather_ = false;
    const T* bdiv_ = nullptr;
};

}  // namespace detail
}  // namespace avgpool

#endif  // AVGPOOL_DETAIL_BACKWARD_HPP
