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
// are bit-identical for every executor. AVX-512 (BW, VL) builds, and AVX2 ones with 8-lane
// vectors (2-4 channels), the forward pass only: there the two-source permute is two
// one-source ones and a blend (an RGB image's 2x2 stride-2 pool ran at 7x the time of the
// same pool channels-first, with 5 of 8 lanes idle in the channels-last kernel).
#ifndef AVGPOOL_DETAIL_KERNEL_PIXELS_HPP
#define AVGPOOL_DETAIL_KERNEL_PIXELS_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../shape.hpp"
#include "convert.hpp"
#include "kernel_cl.hpp"
#include "kernel_perm.hpp"
#include "plan.hpp"
#include "reference.hpp"
#include "simd.hpp"

// Where the forward kernel is compiled: with AVX-512's 16 lanes (and the backward kernel),
// or AVX2's 8 (an AVX-512 build without BW and VL has neither).
#if AVGPOOL_PERM_KERNEL
#define AVGPOOL_PIXEL_KERNEL 1
#elif AVGPOOL_HAS_XSIMD && defined(__AVX2__) && !defined(__AVX512F__)
#define AVGPOOL_PIXEL_KERNEL 1
#else
#define AVGPOOL_PIXEL_KERNEL 0
#endif

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

// Lanes of the forward kernel's vectors.
constexpr index_t px_lanes = AVGPOOL_PERM_KERNEL ? 16 : 8;
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
    // P pixels, stride s apart, of one tap within the values of two vectors; P * C <= a vector.
    const index_t P = std::min<index_t>(px_lanes / C, (2 * px_lanes - C) / (s * C) + 1);
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
    if (!AVGPOOL_PIXEL_KERNEL || R > 3 || p.memory_layout != layout::channels_last || p.adaptive || p.global)
        return false;
    if (p.max_divisor > exact_integer_limit<float>()) return false;
    if (px_measure<R>(p).pixels == 0 || !p.cl_ext.fits_rows) return false;
    const pool_geometry<R>& g = p.geometry;
    const index_t W = g.input[R - 1], s = g.strides[R - 1], d = g.dilations[R - 1], k = g.kernel[R - 1];
    const index_t pb = g.pads_begin[R - 1];
    const window* w = p.axis(R - 1);
    // (Taps t0 .. t1 of output o lie inside the input: O(1) per output, as long 1-D signals
    // may have millions.)
    for (index_t o = 0; o < g.output[R - 1]; ++o) {
        const index_t x0 = o * s - pb;
        const index_t t0 = std::max<index_t>(0, ceil_div(-x0, d)), t1 = std::min(k - 1, floor_div(W - 1 - x0, d));
        const index_t count = std::max<index_t>(0, t1 - t0 + 1);
        if (w[o].count != count || (count > 0 && w[o].first != x0 + t0 * d)) return false;
    }
    return true;
}

template <std::size_t R>
bool px_applicable(const plan_data<R>& p) noexcept {
    return AVGPOOL_PIXEL_KERNEL && p.pixel_kernel && p.memory_layout == layout::channels_last;
}

// Floats of one output row's divided gradients (with its zero margins) in the backward kernel.
constexpr index_t px_bbuffer = 8192;
// Longest last-axis kernel of the backward kernel (its tables: taps x phases lane lists).
constexpr index_t px_bmax_taps = 64;
// px_backward's merged tables: up to this many phases and taps (permutes) per phase.
constexpr index_t px_merge_phases = 3;
constexpr index_t px_merge_max = 5;

/// One lane table of the backward kernel: for phase f and tap t, input vector lane l (value
/// 16 f + l of a cycle) reads buffer value base + idx[l] (buffer values of the cycle's first
/// output onwards, margin included), where keep has it.
struct px_btap {
    index_t base = 0;
    std::int32_t idx[16] = {};
    std::uint16_t keep = 0;
};

/// The backward kernel's layout: input rows in 16-value vectors, `phases` of them a cycle
/// (the least whole number of strides of pixels: each cycle has the same lane tables), a
/// cycle's outputs `cycle_out` values on; the zero margin (output pixels) before the row's
/// divided gradients and the buffer's length; empty tables when the kernel does not apply.
struct px_bshape {
    index_t phases = 0, cycle_out = 0, margin = 0, floats = 0;
    std::vector<px_btap> taps;  // [f * kernel + t]
    // 1 / last_bdiv_f of output o at o * C + c, as the output row lays its values (+ 16 ones).
    std::vector<float> rdiv;
};

template <std::size_t R>
px_bshape px_bmeasure(const plan_data<R>& p) {
    px_bshape sh;
    const pool_geometry<R>& g = p.geometry;
    const index_t C = p.input_shape[1], s = g.strides[R - 1], d = g.dilations[R - 1], k = g.kernel[R - 1];
    const index_t pb = g.pads_begin[R - 1], W = g.input[R - 1], Wo = g.output[R - 1];
    if (k > px_bmax_taps || s > 16 || d > px_bbuffer || pb > px_bbuffer || pb < -px_bbuffer) return sh;
    index_t g16 = 16;  // gcd(16, s * C)
    while ((s * C) % g16 != 0) g16 /= 2;
    const index_t phases = s * C / g16;
    if (phases > 16) return sh;
    // Lane l of phase f holds value 16 f + l of its cycle: pixel x = (16 f + l) / C, channel
    // (16 f + l) % C; tap t reads output (x + pb - t * d) / s when that divides exactly.
    std::vector<px_btap> taps(static_cast<std::size_t>(phases * k));
    index_t lo = 0, hi = 0;
    for (index_t f = 0; f < phases; ++f)
        for (index_t t = 0; t < k; ++t) {
            px_btap& tp = taps[static_cast<std::size_t>(f * k + t)];
            index_t first = 0, last = 0;
            bool any = false;
            for (index_t l = 0; l < 16; ++l) {
                const index_t e = (16 * f + l) / C + pb - t * d;
                if (floor_div(e, s) * s != e) continue;
                first = any ? std::min(first, e / s) : e / s;
                last = any ? std::max(last, e / s) : e / s;
                any = true;
            }
            if (!any) continue;
            if ((last - first + 1) * C > 32) return sh;  // one tap's outputs in two vectors
            tp.base = first;
            for (index_t l = 0; l < 16; ++l) {
                const index_t e = (16 * f + l) / C + pb - t * d;
                if (floor_div(e, s) * s != e) continue;
                tp.idx[l] = static_cast<std::int32_t>((e / s - first) * C + (16 * f + l) % C);
                tp.keep = static_cast<std::uint16_t>(tp.keep | (1u << l));
            }
            lo = std::min(lo, first);
            hi = std::max(hi, last);
        }
    const index_t margin = -lo;
    const index_t cycle_px = 16 * phases / C, cycle_out = cycle_px / s * C;
    const index_t cycles = (W * C + 16 * phases - 1) / (16 * phases);
    const index_t floats = std::max((cycles - 1) * cycle_out + (hi + margin) * C + 32, (Wo + margin) * C + 16);
    if (floats > px_bbuffer) return sh;
    for (px_btap& tp : taps) tp.base = (tp.base + margin) * C;
    // The output rows covering one input row, listed on the stack.
    index_t rows = 1;
    for (std::size_t a = 0; a + 1 < R; ++a) {
        rows *= p.cover_max[a];
        if (rows > cl_max_outer_rows) return sh;
    }
    sh.phases = phases;
    sh.cycle_out = cycle_out;
    sh.margin = margin;
    sh.floats = floats;
    sh.taps = std::move(taps);
    sh.rdiv.assign(static_cast<std::size_t>(Wo * C + 16), 1.0f);
    for (index_t o = 0; o < Wo; ++o)
        for (index_t c = 0; c < C; ++c)
            sh.rdiv[static_cast<std::size_t>(o * C + c)] = 1.0f / p.template last_backward_divisor<float>()[o];
    return sh;
}

#if AVGPOOL_PIXEL_KERNEL
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
        // The run of outputs around the middle whose last-axis divisor is the middle's (all but
        // the clipped windows at the ends).
        const float* ldiv = p.template last_divisor<float>();
        const index_t mid = Wo_ / 2;
        ulast_ = ldiv[mid];
        urec_ = p.px_rdiv[static_cast<std::size_t>(mid)];
        u0_ = mid;
        u1_ = mid + 1;
        while (u0_ > 0 && ldiv[u0_ - 1] == ulast_) --u0_;
        while (u1_ < Wo_ && ldiv[u1_] == ulast_) ++u1_;
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
    // Whole vectors of the N0 x N1 rows summed from x0 on (the row pointers in registers:
    // vsum() / nested_vsum() read them from the list for every vector, in a loop), into out:
    // returns the values done. The same sums in the same order.
    template <int N0, int N1>
    static index_t vsum_fixed(const M* const* rows, index_t x0, index_t m, float* out) noexcept {
        constexpr index_t L = static_cast<index_t>(vec<float>::width);
        const M* r[N0 * N1];
        for (int j = 0; j < N0 * N1; ++j) r[j] = rows[j] + x0;
        index_t i = 0;
        for (; i + L <= m; i += L) fixed_nested_vsum<float, N0, N1>(r, i).store(out + i);
        return i;
    }

    // Outputs o0 .. o1 - 1 read input pixels [x0, x1): their vertical sums (n0 x n1 rows) into
    // buf[0, (x1 - x0) C), zeros where a pixel lies outside the input (padding, or a tap past
    // it), and px_slack zeros after. A chunk wholly past the input (ceil rounding) or wholly in
    // the padding before it has no input part: its bounds clamped to the chunk, all zeros.
    void chunk(float* buf, const M* const* rows, index_t n0, index_t n1, index_t o0, index_t o1) const noexcept {
        const index_t C = C_;
        const index_t x0 = o0 * s_ - pb_, x1 = (o1 - 1) * s_ - pb_ + ke_;
        const index_t xa = std::clamp<index_t>(x0, 0, W_), xb = std::clamp<index_t>(x1, xa, W_);
        const index_t len = (x1 - x0) * C;
        const index_t in_lo = std::clamp<index_t>((xa - x0) * C, 0, len);
        const index_t in_hi = std::clamp<index_t>((xb - x0) * C, in_lo, len);
        for (index_t i = 0; i < in_lo; ++i) buf[i] = 0.0f;
        for (index_t i = in_hi; i < len + px_slack; ++i) buf[i] = 0.0f;
        const index_t m = in_hi - in_lo, x = xa * C;
        float* const vb = buf + in_lo;
        if (n0 * n1 == 0) {
            for (index_t i = 0; i < m; ++i) vb[i] = 0.0f;  // include-pad rows wholly in padding
            return;
        }
        index_t i = 0;
        if (n0 == 1 && n1 <= 3) {
            if (n1 == 1) i = vsum_fixed<1, 1>(rows, x, m, vb);
            else if (n1 == 2) i = vsum_fixed<1, 2>(rows, x, m, vb);
            else i = vsum_fixed<1, 3>(rows, x, m, vb);
        } else if (n0 == n1 && n0 <= 3) {  // (R = 3: the cubic 2x2x2 and 3x3x3 pools)
            if (n0 == 2) i = vsum_fixed<2, 2>(rows, x, m, vb);
            else i = vsum_fixed<3, 3>(rows, x, m, vb);
        }
#if AVGPOOL_PERM_KERNEL
        for (; i + 16 <= m; i += 16) _mm512_storeu_ps(vb + i, vsum(rows, n0, n1, x + i, all16));
        if (i < m) {
            const __mmask16 tail = static_cast<__mmask16>((1u << (m - i)) - 1u);
            _mm512_mask_storeu_ps(vb + i, tail, vsum(rows, n0, n1, x + i, tail));
        }
#else
        for (; i + 8 <= m; i += 8) nested_vsum<float, 0>(rows, n0, n1, x + i).store(vb + i);
        // The tail value by value: the same sums in the same order, reading no further.
        for (; i < m; ++i) vb[i] = nested_vsum1(rows, n0, n1, x + i);
#endif
    }

#if AVGPOOL_PERM_KERNEL
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
        // Blocks inside [u0_, u1_) share one last-axis factor: the per-lane products there,
        // formed once (the same roundings, so the same values).
        const __m512 du = _mm512_mul_ps(dsplat, _mm512_set1_ps(ulast_)), ru = _mm512_mul_ps(rsplat, _mm512_set1_ps(urec_));
        // Power-of-two divisors (2x2 windows: 4) have exact reciprocals, so one multiply gives
        // the rounded quotient (the channels-last kernel's quotient_by does the same): for
        // blocks dividing by dout alone, and for the uniform ones (integer factors: their
        // product is a power of two only if both are, so ru is exact too).
        const bool exact_out = power_of_two(dout), exact_u = power_of_two(dout * ulast_);
        const __mmask16 whole = static_cast<__mmask16>((1u << (P * C)) - 1u);
        for (index_t o0 = 0; o0 < Wo_; o0 += Q_) {
            const index_t o1 = std::min(Wo_, o0 + Q_);
            chunk(buf, rows, n0, n1, o0, o1);
            for (index_t o = o0; o < o1; o += P) {
                const float* b = buf + (o - o0) * s * C;
                __m512 acc = _mm512_permutex2var_ps(_mm512_loadu_ps(b), idx, _mm512_loadu_ps(b + 16));
                for (index_t t = 1; t < k; ++t) {
                    const float* bt = b + t * dc;
                    acc = _mm512_add_ps(acc, _mm512_permutex2var_ps(_mm512_loadu_ps(bt), idx, _mm512_loadu_ps(bt + 16)));
                }
                if (average_) {
                    const bool uniform = per_lane && o >= u0_ && o + P <= u1_;
                    if (uniform ? exact_u : !per_lane && exact_out) {
                        acc = scale_plus_zero(vec<float>{acc}, vec<float>{uniform ? ru : rsplat}).v;
                    } else {
                        __m512 dv = dsplat, rv = rsplat;
                        if (uniform) {
                            dv = du;
                            rv = ru;
                        } else if (per_lane) {
                            // (maskz with every lane: the plain form trips GCC 12's -Wmaybe-uninitialized.)
                            dv = _mm512_mul_ps(dv, _mm512_maskz_permutexvar_ps(all16, pix, _mm512_loadu_ps(ldiv + o)));
                            rv = _mm512_mul_ps(rv, _mm512_maskz_permutexvar_ps(all16, pix, _mm512_loadu_ps(lrec + o)));
                        }
                        acc = divide_rounded(vec<float>{acc}, vec<float>{dv}, vec<float>{rv}).v;
                    }
                } else {
                    acc = _mm512_add_ps(acc, _mm512_setzero_ps());  // a sum of -0s is +0, as elsewhere
                }
                masked_store(dst + o * C, o + P <= o1 ? whole : static_cast<__mmask16>((1u << ((o1 - o) * C)) - 1u), acc);
            }
        }
    }
#else
    // AVX2. The k taps of P output pixels: lane l takes buffer value b + t * dc + idx[l]
    // (idx[l] < 16), from the vector at b + t * dc or the one 8 on (lanes whose index is 8 or
    // more: `second`). Every tap uses the same table, so the taps' vectors are summed first
    // and permuted once: lane for lane the same additions in the same order as a permute per
    // tap (K: k when known, 0 when not).
    template <int K>
    static AVGPOOL_ALWAYS_INLINE __m256 taps(const float* b, index_t k, index_t dc, __m256i idx, __m256 second) noexcept {
        __m256 lo = _mm256_loadu_ps(b), hi = _mm256_loadu_ps(b + 8);
        const index_t n = K > 0 ? K : k;
        for (index_t t = 1; t < n; ++t) {
            lo = _mm256_add_ps(lo, _mm256_loadu_ps(b + t * dc));
            hi = _mm256_add_ps(hi, _mm256_loadu_ps(b + t * dc + 8));
        }
        return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx), second);
    }

    void row(float* buf, const M* const* rows, index_t n0, index_t n1, double outer, M* dst) const {
        using V = vec<float>;
        static_assert(V::width == 8, "px_kernel: AVX2's 8 lanes");
        const index_t over = p_.divisor_override;
        if (average_ && over == 0 && outer == 0.0) {
            // The outer window counts no tap: every output of the row is empty.
            std::fill(dst, dst + row_out_, M(empty_window_value<float>(p_.empty_window_nan)));
            return;
        }
        const index_t C = C_, s = s_, dc = dc_, k = k_, P = P_;
        const __m256i idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(idx_));
        const __m256 second = _mm256_castsi256_ps(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(7)));
        const __m256i pix = _mm256_load_si256(reinterpret_cast<const __m256i*>(pix_));
        // The divisors as in the AVX-512 form above: the override's or the outer factor's,
        // times the last axis's per lane; a shared factor's products formed once; a power of
        // two's reciprocal exact, so one multiply.
        const float dout = over > 0 ? static_cast<float>(over) : static_cast<float>(outer);
        const V dsplat = V::splat(dout), rsplat = V::splat(1.0f / dout);
        const float* const ldiv = p_.template last_divisor<float>();
        const float* const lrec = p_.px_rdiv.data();
        const bool per_lane = average_ && over == 0;
        const V du = dsplat * V::splat(ulast_), ru = rsplat * V::splat(urec_);
        const bool exact_out = power_of_two(dout), exact_u = power_of_two(dout * ulast_);
        const index_t Wc = Wo_ * C;
        for (index_t o0 = 0; o0 < Wo_; o0 += Q_) {
            const index_t o1 = std::min(Wo_, o0 + Q_);
            chunk(buf, rows, n0, n1, o0, o1);
            // The output blocks, with the tap count fixed for the common kernels.
            auto blocks = [&](auto kc) AVGPOOL_INLINE_LAMBDA {
                constexpr int K = decltype(kc)::value;
                auto sum_at = [&](index_t o) AVGPOOL_INLINE_LAMBDA {
                    return V{taps<K>(buf + (o - o0) * s * C, k, dc, idx, second)};
                };
                auto one = [&](index_t o) AVGPOOL_INLINE_LAMBDA {
                    V acc = sum_at(o);
                    if (average_) {
                        const bool uniform = per_lane && o >= u0_ && o + P <= u1_;
                        if (uniform ? exact_u : !per_lane && exact_out) {
                            acc = scale_plus_zero(acc, uniform ? ru : rsplat);
                        } else {
                            V dv = dsplat, rv = rsplat;
                            if (uniform) {
                                dv = du;
                                rv = ru;
                            } else if (per_lane) {  // (ldiv and lrec are padded past Wo by a vector)
                                dv = dv * V{_mm256_permutevar8x32_ps(_mm256_loadu_ps(ldiv + o), pix)};
                                rv = rv * V{_mm256_permutevar8x32_ps(_mm256_loadu_ps(lrec + o), pix)};
                            }
                            acc = divide_rounded(acc, dv, rv);
                        }
                    } else {
                        acc = plus_zero(acc);  // a sum of -0s is +0, as elsewhere
                    }
                    // A whole vector wherever it stays inside the row: its lanes past P * C are
                    // rewritten by the blocks after (this work item's own); else just the block's.
                    if (o * C + 8 <= Wc) vstore(acc, dst + o * C);
                    else vstore_n(acc, dst + o * C, (std::min(o1, o + P) - o) * C);
                };
                index_t o = o0;
                if (per_lane) {
                    // The blocks inside [u0_, u1_) that are stored whole, in a loop of their
                    // own: one() takes the same branches for each of them (same bits).
                    for (; o < o1 && o < u0_; o += P) one(o);
                    const index_t lim = std::min(u1_, o1);
                    const index_t by_div = lim >= o + P ? (lim - o - P) / P + 1 : 0;
                    const index_t by_row = Wc >= o * C + 8 ? ((Wc - 8) / C - o) / P + 1 : 0;
                    const index_t e = o + std::min(by_div, by_row) * P;
                    if (exact_u)
                        for (; o < e; o += P) vstore(scale_plus_zero(sum_at(o), ru), dst + o * C);
                    else
                        for (; o < e; o += P) vstore(divide_rounded(sum_at(o), du, ru), dst + o * C);
                }
                for (; o < o1; o += P) one(o);
            };
            switch (k) {
                case 1: blocks(std::integral_constant<int, 1>{}); break;
                case 2: blocks(std::integral_constant<int, 2>{}); break;
                case 3: blocks(std::integral_constant<int, 3>{}); break;
                default: blocks(std::integral_constant<int, 0>{}); break;
            }
        }
    }
#endif

    const plan_data<R>& p_;
    bool average_;
    index_t C_ = 0, W_ = 0, Wo_ = 0, s_ = 1, dc_ = 1, k_ = 1, pb_ = 0, ke_ = 1, P_ = 1, Q_ = 1;
    index_t rows_per_n_ = 1, in_n_ = 0, row_out_ = 0;
    index_t u0_ = 0, u1_ = 0;
    float ulast_ = 1.0f, urec_ = 1.0f;
    alignas(64) std::int32_t idx_[16] = {};
    alignas(64) std::int32_t pix_[16] = {};
};
#endif

#if AVGPOOL_PERM_KERNEL
// The transpose, for backward (PyTorch's rule: each output gradient divided by its forward
// divisor, added to every input tap of its window; inputs no window taps get 0). One input row
// per work item:
//   1. the divided gradients of the output rows covering it, summed, into a buffer with zero
//      margins (outputs before 0 and past the row), laid out as the output row;
//   2. the input row 16 values at a time, each vector one two-source permute of the buffer
//      per tap, lanes the tap does not reach zeroed. Whole vectors, stored whole: the lane
//      tables repeat every `phases` vectors (the least whole number of strides of pixels).
template <std::size_t R, class M = float>
class px_backward {
    static_assert(std::is_same<compute_t<M>, float>::value, "px_backward: float or 16-bit storage");

public:
    /// Requires p.bwd().px_b. merge = false keeps expand()'s per-tap tables (tests compare the two).
    explicit px_backward(const plan_data<R>& p, bool merge = true) : p_(p), sh_(*p.bwd().px_b) {
        const pool_geometry<R>& g = p.geometry;
        C_ = p.input_shape[1];
        W_ = g.input[R - 1];
        Wo_ = g.output[R - 1];
        k_ = g.kernel[R - 1];
        in_rows_ = 1;
        for (std::size_t a = 0; a + 1 < R; ++a) in_rows_ *= g.input[a];
        out_rows_ = 1;
        for (std::size_t a = 0; a + 1 < R; ++a) out_rows_ *= g.output[a];
        expand_ = pick_expand(merge);
    }

    /// Whether rows run through the merged tables (expand_merged).
    bool merged() const noexcept { return merged_ok_; }

    /// Input rows of the whole batch: the executor's work items.
    index_t items() const noexcept { return p_.input_shape[0] * in_rows_; }

    /// Input rows item_begin .. item_end - 1 (item = n * input rows per image + outer index).
    void run(const M* grad_out, M* grad_in, index_t item_begin, index_t item_end) const {
        alignas(64) float gbuf[px_bbuffer + 16];
        const M* rows[cl_max_outer_rows];
        float factor[cl_max_outer_rows];
        const index_t row_in = W_ * C_, row_out = Wo_ * C_;
        for (index_t item = item_begin; item < item_end; ++item) {
            const index_t n = item / in_rows_, r = item % in_rows_;
            M* const dst = grad_in + item * row_in;
            // A row that the same outputs tap as an earlier row of this range (the next slice,
            // or the next row, of a window stride as long as the window) is a copy of it: the
            // same sums, so the same bits.
            if (const index_t back = repeats(r); back > 0 && item - back >= item_begin) {
                std::memcpy(dst, dst - back * row_in, static_cast<std::size_t>(row_in) * sizeof(M));
                continue;
            }
            const M* const g_img = grad_out + n * out_rows_ * row_out;
            index_t nr = 0;
            // The output rows whose windows tap input row r, with their outer divisor factors.
            auto covering = [&](std::size_t a, index_t x, auto&& each) {
                const window* w = p_.axis(a);
                const window cv = p_.cover(a, x);
                const index_t d = p_.geometry.dilations[a];
                for (index_t o = cv.first; o < cv.first + cv.count; ++o) {
                    const index_t off = x - w[o].first;
                    if (w[o].count > 0 && off >= 0 && off % d == 0 && off / d < w[o].count) each(o, w[o].divisor);
                }
            };
            if constexpr (R == 1) {
                (void)covering;
                (void)r;
                rows[nr] = g_img;
                factor[nr++] = 1.0f;
            } else if constexpr (R == 2) {
                covering(0, r, [&](index_t o, index_t dv) {
                    rows[nr] = g_img + o * row_out;
                    factor[nr++] = static_cast<float>(dv);
                });
            } else {
                const index_t H = p_.geometry.input[1], Ho = p_.geometry.output[1];
                covering(0, r / H, [&](index_t o0, index_t d0) {
                    covering(1, r % H, [&](index_t o1, index_t d1) {
                        rows[nr] = g_img + (o0 * Ho + o1) * row_out;
                        factor[nr++] = static_cast<float>(static_cast<double>(d0) * static_cast<double>(d1));
                    });
                });
            }
            gather(gbuf, rows, factor, nr);
            (this->*expand_)(gbuf, dst);
        }
    }

private:
    // How many rows back input row r (outer index) has an earlier row with the same covering
    // outputs, or 0: the previous slice (R = 3), else the previous row.
    index_t repeats(index_t r) const noexcept {
        if constexpr (R == 2) {
            return same_taps_as_previous<R>(p_, 0, r) ? 1 : 0;
        } else if constexpr (R == 3) {
            const index_t H = p_.geometry.input[1];
            if (same_taps_as_previous<R>(p_, 0, r / H)) return H;
            return same_taps_as_previous<R>(p_, 1, r % H) ? 1 : 0;
        } else {
            (void)r;
            return 0;
        }
    }

    // Step 1: the covering rows' gradients, each divided (times 1 / divisor), summed.
    void gather(float* gbuf, const M* const* rows, const float* factor, index_t nr) const {
        const index_t lo = sh_.margin * C_, len = Wo_ * C_;
        const index_t over = p_.divisor_override;
        for (index_t i = 0; i < lo; ++i) gbuf[i] = 0.0f;
        for (index_t i = lo + len; i < sh_.floats; ++i) gbuf[i] = 0.0f;
        if (nr == 0) {
            for (index_t i = 0; i < len; ++i) gbuf[lo + i] = 0.0f;
            return;
        }
        const float* const lrec = sh_.rdiv.data();
        for (index_t q = 0; q < nr; ++q) {
            // 1 / divisor: the override's, or the row's outer factor times the column's.
            const __m512 rq = _mm512_set1_ps(over > 0 ? 1.0f / static_cast<float>(over) : 1.0f / factor[q]);
            const M* g = rows[q];
            for (index_t i = 0; i < len; i += 16) {
                const __mmask16 k = len - i >= 16 ? all16 : static_cast<__mmask16>((1u << (len - i)) - 1u);
                const __m512 r = over == 0 ? _mm512_mul_ps(rq, _mm512_loadu_ps(lrec + i)) : rq;
                const __m512 v = _mm512_mul_ps(masked_load(k, g + i), r);
                float* b = gbuf + lo + i;
                _mm512_mask_storeu_ps(b, k, q == 0 ? v : _mm512_add_ps(_mm512_maskz_loadu_ps(k, b), v));
            }
        }
    }

    // Step 2 for K taps (0: k_, looped).
    template <int K>
    void expand(const float* gbuf, M* dst) const {
        const index_t n = W_ * C_, phases = sh_.phases, cyc = sh_.cycle_out, k = K > 0 ? K : k_;
        const px_btap* const taps = sh_.taps.data();
        const __m512 zero = _mm512_setzero_ps();
        for (index_t j0 = 0, out0 = 0; j0 < n; j0 += 16 * phases, out0 += cyc) {
            for (index_t f = 0; f < phases; ++f) {
                const index_t j = j0 + 16 * f;
                if (j >= n) break;
                const px_btap* tp = taps + f * k;
                __m512 acc = zero;
                for (index_t t = 0; t < k; ++t) {
                    const float* b = gbuf + out0 + tp[t].base;
                    const __m512 v = _mm512_maskz_permutex2var_ps(tp[t].keep, _mm512_loadu_ps(b), _mm512_loadu_si512(tp[t].idx),
                                                                  _mm512_loadu_ps(b + 16));
                    acc = t == 0 ? v : _mm512_add_ps(acc, v);
                }
                acc = _mm512_add_ps(acc, zero);  // (+ 0: a sum of -0 shares is +0, as elsewhere)
                if (j + 16 <= n) {
                    vstore(vec<float>{acc}, dst + j);
                } else {
                    masked_store(dst + j, static_cast<__mmask16>((1u << (n - j)) - 1u), acc);
                }
            }
        }
    }

    using expand_fn = void (px_backward::*)(const float*, M*) const;

    // Step 2's form for this plan: expand_merged where it has an instance for the phases and
    // width (at most one permute a tap, so K bounds each phase's count) and merge_taps()
    // succeeds, else expand() with the common widths unrolled.
    expand_fn pick_expand(bool merge) noexcept {
        expand_fn m = nullptr;
        if (sh_.phases == 1) {
            switch (k_) {
                case 1: m = &px_backward::expand_merged<1, 1>; break;
                case 2: m = &px_backward::expand_merged<2, 1>; break;
                case 3: m = &px_backward::expand_merged<3, 1>; break;
                case 4: m = &px_backward::expand_merged<4, 1>; break;
                case 5: m = &px_backward::expand_merged<5, 1>; break;
                default: break;
            }
        } else if (sh_.phases == 3) {
            switch (k_) {
                case 2: m = &px_backward::expand_merged<2, 3>; break;
                case 3: m = &px_backward::expand_merged<3, 3>; break;
                default: break;
            }
        }
        merged_ok_ = merge && m != nullptr && merge_taps();
        if (merged_ok_) return m;
        switch (k_) {
            case 1: return &px_backward::expand<1>;
            case 2: return &px_backward::expand<2>;
            case 3: return &px_backward::expand<3>;
            case 4: return &px_backward::expand<4>;
            case 5: return &px_backward::expand<5>;
            default: return &px_backward::expand<0>;
        }
    }

    // Merged lane tables (see merge_taps): per phase, `count` permutes of the two vectors at
    // `low` past the cycle's first output.
    struct merged_phase {
        index_t low = 0;
        int count = 0;
        alignas(64) std::int32_t idx[px_merge_max][16] = {};
        std::uint16_t keep[px_merge_max] = {};
    };

    // expand()'s taps merged, where every tap of a phase reads within the same 32 values (from
    // the phase's lowest base): the taps share that phase's two loads, each index moved by the
    // tap's offset from that base, and taps that fill different lanes share one permute. Layer j
    // takes each lane's (j+1)-th tap, so a lane still adds its taps in tap order, with zeros
    // between (exact; the final + 0 makes every zero +0, as in expand()). shapes_3d_1 (8
    // channels, a 4-wide last axis at stride 2) has 4 taps of 8 lanes each: 2 permutes, 2 loads.
    // False (expand() runs) where some phase's taps do not fit.
    bool merge_taps() noexcept {
        const index_t P = sh_.phases, K = k_;
        if (P < 1 || P > px_merge_phases || K < 1 || K > px_merge_max) return false;
        for (index_t f = 0; f < P; ++f) {
            merged_phase& m = merged_[f];
            const px_btap* const taps = sh_.taps.data() + f * K;
            // (The lowest base of the taps that reach a lane: the others are never read.)
            bool any = false;
            for (index_t t = 0; t < K; ++t) {
                if (taps[t].keep == 0) continue;
                m.low = any ? std::min(m.low, taps[t].base) : taps[t].base;
                any = true;
            }
            if (!any) m.low = taps[0].base;
            int seen[16] = {};  // taps so far per lane
            for (index_t t = 0; t < K; ++t) {
                const index_t shift = taps[t].base - m.low;
                int layer = -1;
                for (int l = 0; l < 16; ++l) {
                    if (((taps[t].keep >> l) & 1u) == 0) continue;
                    if (taps[t].idx[l] + shift > 31 || (layer >= 0 && seen[l] != layer)) return false;
                    layer = seen[l];
                }
                if (layer < 0) continue;  // (a tap that reaches no lane of this phase)
                for (int l = 0; l < 16; ++l) {
                    if (((taps[t].keep >> l) & 1u) == 0) continue;
                    m.idx[layer][l] = static_cast<std::int32_t>(taps[t].idx[l] + shift);
                    m.keep[layer] = static_cast<std::uint16_t>(m.keep[layer] | (1u << l));
                    ++seen[l];
                }
                m.count = std::max(m.count, layer + 1);
            }
        }
        return true;
    }

    // Step 2 through the merged tables, K taps and P phases known at compile time: the P * K
    // tables (at most) in registers for the whole row. (expand() reads a tap's 64-byte index
    // vector, mask and offset for every vector, and its loads, most split across cache
    // lines, bounded it.)
    template <int K, int P>
    void expand_merged(const float* gbuf, M* dst) const {
        const index_t n = W_ * C_, cyc = sh_.cycle_out;
        __m512i idx[P][K];
        __mmask16 keep[P][K];
        index_t low[P];
        int count[P];
        for (int f = 0; f < P; ++f) {
            low[f] = merged_[f].low;
            count[f] = merged_[f].count;
            for (int j = 0; j < K; ++j) {
                idx[f][j] = _mm512_load_si512(merged_[f].idx[j]);
                keep[f][j] = merged_[f].keep[j];
            }
        }
        const __m512 zero = _mm512_setzero_ps();
        auto vector_at = [&](int f, index_t out0) {
            const float* b = gbuf + out0 + low[f];
            const __m512 lo = _mm512_loadu_ps(b), hi = _mm512_loadu_ps(b + 16);
            __m512 acc = zero;
            for (int j = 0; j < K; ++j) {  // (a constant bound: the loop unrolls)
                if (j == count[f]) break;
                const __m512 v = _mm512_maskz_permutex2var_ps(keep[f][j], lo, idx[f][j], hi);
                acc = j == 0 ? v : _mm512_add_ps(acc, v);
            }
            return _mm512_add_ps(acc, zero);  // (+ 0: as expand())
        };
        index_t j0 = 0, out0 = 0;
        for (; j0 + 16 * P <= n; j0 += 16 * P, out0 += cyc)
            for (int f = 0; f < P; ++f) vstore(vec<float>{vector_at(f, out0)}, dst + j0 + 16 * f);
        for (int f = 0; f < P; ++f) {  // the last, partial cycle
            const index_t j = j0 + 16 * f;
            if (j >= n) break;
            const __m512 acc = vector_at(f, out0);
            if (j + 16 <= n) {
                vstore(vec<float>{acc}, dst + j);
            } else {
                masked_store(dst + j, static_cast<__mmask16>((1u << (n - j)) - 1u), acc);
            }
        }
    }

    const plan_data<R>& p_;
    const px_bshape& sh_;
    index_t C_ = 0, W_ = 0, Wo_ = 0, k_ = 1;
    index_t in_rows_ = 1, out_rows_ = 1;
    merged_phase merged_[px_merge_phases];
    bool merged_ok_ = false;
    expand_fn expand_ = nullptr;
};
#endif

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_KERNEL_PIXELS_HPP
