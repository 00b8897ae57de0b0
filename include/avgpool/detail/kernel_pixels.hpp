// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The pixel kernel: channels-last float (and 16-bit) pools of 2 to 8 channels whose last axis
// the flattened plan cannot take (a stride there: an RGB image halved by 2x2 stride-2
// averaging). The channels-last kernel runs its vectors over the channels, so three channels
// left 13 of 16 lanes idle (224x224x3, 2x2 s2: 66 us against 13 for the same bytes
// channels-first). Here a vector holds P whole pixels (P x C lanes). Per output row:
//   1. Vertical pass: the window's input rows are summed along the row, W x C values at full
//      width, into a buffer with zeros where the last axis's taps fall in padding; so every
//      window of that axis is a fixed pattern in the buffer, whatever its clipping.
//   2. Horizontal pass: P output pixels at a time, one two-source permute per tap of two
//      vectors loaded at that tap's offset; the same lane table serves every tap and block
//      (lane p * C + c takes buffer value p * stride * C + c).
// Divisors come from the plan's tables (outer factor times the last axis's, exact in float),
// so every divisor rule and ceil mode holds; the quotient is divide_rounded's. Sums are nested
// per axis as in the other kernels, and each output depends only on its position, so results
// are bit-identical for every executor. AVX-512 (BW, VL) builds only.
#ifndef AVGPOOL_DETAIL_KERNEL_PIXELS_HPP
#define AVGPOOL_DETAIL_KERNEL_PIXELS_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "convert.hpp"
#include "kernel_cl.hpp"
#include "kernel_perm.hpp"
#include "plan.hpp"
#include "reference.hpp"
#include "simd.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

// Floats of vertical sums per chunk of a row (L1-resident with the rows it reads).
constexpr index_t px_buffer = 4096;
// Whole-vector reads of a chunk's last block reach up to this far past its span.
constexpr index_t px_slack = 32;
// At most this many channels: at least two pixels per vector, else the channels-last
// kernel's own vectors waste no more lanes than this one's.
constexpr index_t px_max_channels = 8;

/// Pixels per vector and output pixels per chunk of a row (a multiple of the former); zero
/// when the kernel does not fit the plan's last axis.
struct px_shape {
    index_t pixels = 0;
    index_t chunk = 0;
};

template <std::size_t R>
px_shape px_measure(const plan_data<R>& p) noexcept {
    px_shape sh;
    const pool_geometry<R>& g = p.geometry;
    const index_t C = p.input_shape[1], s = g.strides[R - 1], d = g.dilations[R - 1], k = g.kernel[R - 1];
    if (C < 2 || C > px_max_channels || s > 32 || k > px_buffer || d > px_buffer) return sh;
    const index_t ke = (k - 1) * d + 1;  // pixels from a window's first tap to its last
    if (ke * C > px_buffer / 2) return sh;
    // P pixels, stride s apart, of one tap within the 32 values of two vectors; P * C <= 16.
    const index_t P = std::min<index_t>(16 / C, (32 - C) / (s * C) + 1);
    if (P < 2) return sh;
    index_t Q = ((px_buffer - px_slack) / C - ke) / s + 1;
    Q = Q / P * P;
    if (Q < P) return sh;
    const index_t Wo = g.output[R - 1];
    sh.pixels = P;
    sh.chunk = std::min(Q, (Wo + P - 1) / P * P);
    return sh;
}

/// Whether the pixel kernel can run the plan: channels-last, 2-8 channels, regular last-axis
/// windows (tap t of output o at o * stride - pad + t * dilation, the table's window being
/// those taps inside the input), outer windows of boundable rows, float divisors exact.
template <std::size_t R>
bool px_geometry(const plan_data<R>& p) noexcept {
    if (!AVGPOOL_PERM_KERNEL || R > 3 || p.memory_layout != layout::channels_last || p.adaptive || p.global)
        return false;
    if (p.max_divisor > exact_integer_limit<float>()) return false;
    if (px_measure<R>(p).pixels == 0 || !cl_measure<R>(p).fits_rows) return false;
    const pool_geometry<R>& g = p.geometry;
    const index_t W = g.input[R - 1], s = g.strides[R - 1], d = g.dilations[R - 1], k = g.kernel[R - 1];
    const index_t pb = g.pads_begin[R - 1];
    const window* w = p.axis(R - 1);
    for (index_t o = 0; o < g.output[R - 1]; ++o) {
        index_t first = -1, count = 0;
        for (index_t t = 0; t < k; ++t) {
            const index_t x = o * s - pb + t * d;
            if (x < 0 || x >= W) continue;
            if (count == 0) first = x;
            ++count;
        }
        if (w[o].count != count || (count > 0 && w[o].first != first)) return false;
    }
    return true;
}

template <std::size_t R>
bool px_applicable(const plan_data<R>& p) noexcept {
    return AVGPOOL_PERM_KERNEL && p.pixel_kernel && p.memory_layout == layout::channels_last;
}

#if AVGPOOL_PERM_KERNEL
// M: float, or a 16-bit storage type converted as it is loaded and rounded once on store.
template <std::size_t R, class M = float>
class px_kernel {
    static_assert(std::is_same<compute_t<M>, float>::value, "px_kernel: float or 16-bit storage");

public:
    /// Requires px_applicable<R>(p).
    px_kernel(const plan_data<R>& p, pool_op op) : p_(p), average_(op == pool_op::average) {
        const pool_geometry<R>& g = p.geometry;
        const px_shape sh = px_measure<R>(p);
        C_ = p.input_shape[1];
        W_ = g.input[R - 1];
        Wo_ = g.output[R - 1];
        s_ = g.strides[R - 1];
        dc_ = g.dilations[R - 1] * C_;
        k_ = g.kernel[R - 1];
        pb_ = g.pads_begin[R - 1];
        ke_ = (k_ - 1) * g.dilations[R - 1] + 1;
        P_ = sh.pixels;
        Q_ = sh.chunk;
        const index_t lanes = P_ * C_;
        for (index_t l = 0; l < 16; ++l) {
            idx_[l] = static_cast<std::int32_t>(l < lanes ? (l / C_) * s_ * C_ + l % C_ : 0);
            pix_[l] = static_cast<std::int32_t>(l < lanes ? l / C_ : 0);
        }
        rows_per_n_ = 1;
        for (std::size_t a = 0; a + 1 < R; ++a) rows_per_n_ *= g.output[a];
        in_n_ = p.input_spatial_volume() * C_;
        row_out_ = Wo_ * C_;
    }

    /// Output rows of the whole batch: the executor's work items.
    index_t items() const noexcept { return p_.input_shape[0] * rows_per_n_; }

    /// Output rows item_begin .. item_end - 1 (item = n * rows_per_n + outer output index).
    void run(const M* in, M* out, index_t item_begin, index_t item_end) const {
        alignas(64) float buf[px_buffer + px_slack];
        const M* rows[cl_max_outer_rows];
        const pool_geometry<R>& g = p_.geometry;
        const index_t WC = W_ * C_;
        for (index_t item = item_begin; item < item_end; ++item) {
            const index_t n = item / rows_per_n_, r = item % rows_per_n_;
            const M* const img = in + n * in_n_;
            M* const dst = out + item * row_out_;
            if constexpr (R == 1) {
                (void)r;
                (void)g;
                rows[0] = img;
                row(buf, rows, 1, 1, 1.0, dst);
            } else if constexpr (R == 2) {
                const window& wh = p_.axis(0)[r];
                for (index_t j = 0; j < wh.count; ++j) rows[j] = img + (wh.first + j * g.dilations[0]) * WC;
                row(buf, rows, 1, wh.count, static_cast<double>(wh.divisor), dst);
            } else {
                const index_t Ho = g.output[1], H = g.input[1];
                const window& wd = p_.axis(0)[r / Ho];
                const window& wh = p_.axis(1)[r % Ho];
                for (index_t i = 0; i < wd.count; ++i)
                    for (index_t j = 0; j < wh.count; ++j)
                        rows[i * wh.count + j] =
                            img + ((wd.first + i * g.dilations[0]) * H + wh.first + j * g.dilations[1]) * WC;
                row(buf, rows, wd.count, wh.count,
                    static_cast<double>(wd.divisor) * static_cast<double>(wh.divisor), dst);
            }
        }
    }

private:
    // Values x .. x + 15 (lanes under k) summed over the n0 x n1 rows, nested as nested_vsum.
    static AVGPOOL_ALWAYS_INLINE __m512 vsum(const M* const* rows, index_t n0, index_t n1, index_t x,
                                             __mmask16 k) noexcept {
        __m512 acc = _mm512_setzero_ps();
        for (index_t i = 0; i < n0; ++i) {
            const M* const* r = rows + i * n1;
            __m512 inner = masked_load(k, r[0] + x);
            for (index_t j = 1; j < n1; ++j) inner = _mm512_add_ps(inner, masked_load(k, r[j] + x));
            acc = i == 0 ? inner : _mm512_add_ps(acc, inner);
        }
        return acc;
    }

    void row(float* buf, const M* const* rows, index_t n0, index_t n1, double outer, M* dst) const {
        const index_t over = p_.divisor_override;
        if (average_ && over == 0 && outer == 0.0) {
            // The outer window counts no tap: every output of the row is empty.
            std::fill(dst, dst + row_out_, M(empty_window_value<float>(p_.empty_window_nan)));
            return;
        }
        const index_t C = C_, s = s_, dc = dc_, k = k_, P = P_;
        const __m512i idx = _mm512_loadu_si512(idx_);
        const __m512i pix = _mm512_loadu_si512(pix_);
        // Divisor and reciprocal: the override's, or the outer factor's (times the last axis's
        // per lane below). Both factors are exact in float (px_geometry), so is their product.
        const float dout = over > 0 ? static_cast<float>(over) : static_cast<float>(outer);
        const __m512 dsplat = _mm512_set1_ps(dout), rsplat = _mm512_set1_ps(1.0f / dout);
        const float* const ldiv = p_.template last_divisor<float>();
        const float* const lrec = p_.px_rdiv.data();
        const bool per_lane = average_ && over == 0;
        const index_t nrows = n0 * n1;
        for (index_t o0 = 0; o0 < Wo_; o0 += Q_) {
            const index_t o1 = std::min(Wo_, o0 + Q_);
            // Input pixels [x0, x1) hold every tap of outputs o0 .. o1 - 1.
            const index_t x0 = o0 * s - pb_, x1 = (o1 - 1) * s - pb_ + ke_;
            const index_t xa = std::clamp<index_t>(x0, 0, W_), xb = std::clamp<index_t>(x1, xa, W_);
            const index_t len = (x1 - x0) * C;
            // Zeros before and after the input's part (padding, or a tap past the input).
            const index_t in_lo = (xa - x0) * C, in_hi = (xb - x0) * C;
            for (index_t i = 0; i < in_lo; ++i) buf[i] = 0.0f;
            for (index_t i = in_hi; i < len + px_slack; ++i) buf[i] = 0.0f;
            const index_t m = in_hi - in_lo;
            if (nrows == 0) {
                for (index_t i = 0; i < m; ++i) buf[in_lo + i] = 0.0f;  // include-pad rows wholly in padding
            } else {
                index_t i = 0;
                for (; i + 16 <= m; i += 16) _mm512_storeu_ps(buf + in_lo + i, vsum(rows, n0, n1, xa * C + i, all16));
                if (i < m) {
                    const __mmask16 tail = static_cast<__mmask16>((1u << (m - i)) - 1u);
                    _mm512_mask_storeu_ps(buf + in_lo + i, tail, vsum(rows, n0, n1, xa * C + i, tail));
                }
            }
            for (index_t o = o0; o < o1; o += P) {
                const float* b = buf + (o - o0) * s * C;
                __m512 acc = _mm512_permutex2var_ps(_mm512_loadu_ps(b), idx, _mm512_loadu_ps(b + 16));
                for (index_t t = 1; t < k; ++t) {
                    const float* bt = b + t * dc;
                    acc = _mm512_add_ps(acc, _mm512_permutex2var_ps(_mm512_loadu_ps(bt), idx, _mm512_loadu_ps(bt + 16)));
                }
                if (average_) {
                    __m512 dv = dsplat, rv = rsplat;
                    if (per_lane) {
                        // (maskz with every lane: the plain form trips GCC 12's -Wmaybe-uninitialized.)
                        dv = _mm512_mul_ps(dv, _mm512_maskz_permutexvar_ps(all16, pix, _mm512_loadu_ps(ldiv + o)));
                        rv = _mm512_mul_ps(rv, _mm512_maskz_permutexvar_ps(all16, pix, _mm512_loadu_ps(lrec + o)));
                    }
                    acc = divide_rounded(vec<float>{acc}, vec<float>{dv}, vec<float>{rv}).v;
                } else {
                    acc = _mm512_add_ps(acc, _mm512_setzero_ps());  // a sum of -0s is +0, as elsewhere
                }
                const index_t npx = std::min(P, o1 - o);
                masked_store(dst + o * C, static_cast<__mmask16>((1u << (npx * C)) - 1u), acc);
            }
        }
    }

    const plan_data<R>& p_;
    bool average_;
    index_t C_ = 0, W_ = 0, Wo_ = 0, s_ = 1, dc_ = 1, k_ = 1, pb_ = 0, ke_ = 1, P_ = 1, Q_ = 1;
    index_t rows_per_n_ = 1, in_n_ = 0, row_out_ = 0;
    alignas(64) std::int32_t idx_[16] = {};
    alignas(64) std::int32_t pix_[16] = {};
};
#endif

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_KERNEL_PIXELS_HPP
