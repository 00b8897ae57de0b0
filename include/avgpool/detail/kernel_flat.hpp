// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The block kernel for the common memory-bound shapes: R = 1 to 3, last axis with dilation 1,
// stride s = 1 or 2 and a kernel of at most 5 taps. Vertical sums of a block of rows go to a
// buffer whose rows keep their zero padding between them (written once per call),
// de-interleaved into even / odd phases at stride 2, so the horizontal pass has no edge cases:
// output ow of a row reads phase j % s at ow + j / s for tap j, in padded coordinates. That
// removes the per-row costs that dominate narrow rows (56 wide: 7 AVX2 vectors a row).
// Divisors come from a per-plan grid. The summation order is the separable kernel's: sum over
// w of sum over h. 1-D pools, one row a plane, take a path of their own (run_1d).
#ifndef AVGPOOL_DETAIL_KERNEL_FLAT_HPP
#define AVGPOOL_DETAIL_KERNEL_FLAT_HPP

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "kernel_cf.hpp"
#include "plan.hpp"
#include "simd.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

// Elements of padded vertical-sum rows per block (both phases together).
constexpr index_t flat_block = 4096;
constexpr index_t flat_max_kernel = 5;
// The divisor grid covers one plane's outputs (R = 2) or one block of rows (R = 1).
constexpr index_t flat_max_grid = index_t(1) << 18;
// Few planes split into blocks of rows take this kernel on input rows up to this wide, the
// row kernel on wider ones. Measured per plane, block / row kernel: 0.4-0.5 on 30-56 wide
// stride-2 rows, 0.8 on 56 wide stride 1, 1.03 at 112, 1.34 at 224 (3x3 stride 1).
constexpr index_t flat_split_max_width = 128;

/// Whether the geometry suits the flattened kernel (independent of the element type).
template <std::size_t R>
bool flat_geometry(const plan_data<R>& p) noexcept {
    if (R > 3 || p.memory_layout != layout::channels_first || p.global || p.adaptive) return false;
    const pool_geometry<R>& g = p.geometry;
    const index_t Wo = g.output[R - 1], s = g.strides[R - 1];
    if (g.dilations[R - 1] != 1 || (s != 1 && s != 2) || g.kernel[R - 1] > flat_max_kernel) return false;
    if ((Wo - 1) * s + g.kernel[R - 1] > flat_block / 2) return false;  // a padded row fits
    if (R >= 2) {
        // Every outer axis's window rows in one list; the divisor grid covers a plane.
        index_t taps = 1, outputs = Wo;
        for (std::size_t a = 0; a + 1 < R; ++a) {
            taps *= g.kernel[a];
            outputs *= g.output[a];
            if (taps > cf_max_outer_rows || outputs > flat_max_grid) return false;
        }
    }
    return true;
}

template <class T, std::size_t R>
bool flat_applicable(const plan_data<R>& p) noexcept {
    return p.max_divisor <= exact_integer_limit<T>() && !p.flat_div_f.empty() && flat_geometry<R>(p);
}

/// Whether few planes split into blocks of rows run through this kernel (else the row kernel).
template <class T, std::size_t R>
bool flat_split_applicable(const plan_data<R>& p) noexcept {
    return flat_applicable<T, R>(p) && p.geometry.input[R - 1] <= flat_split_max_width;
}

// M: the memory type of in and out (T, or float16 / bfloat16 for T = float, converted as the
// rows are read and as a block's outputs are copied out).
template <class T, std::size_t R, class M = T>
class flat_kernel {
    using V = vec<T>;
    static constexpr index_t L = static_cast<index_t>(V::width);

public:
    flat_kernel(const plan_data<R>& p, pool_op op) : p_(p), op_(op) {
        const pool_geometry<R>& g = p.geometry;
        W_ = g.input[R - 1];
        Wo_ = g.output[R - 1];
        s_ = g.strides[R - 1];
        k_ = g.kernel[R - 1];
        pb_ = g.pads_begin[R - 1];
        // A padded row: pb zeros, W values, zeros up to (Wo - 1) * s + k, rounded up to a whole
        // number of s-phases; plus L so a row's last vector never reads the next row's data.
        const index_t span = (Wo_ - 1) * s_ + k_;  // padded columns the windows reach
        const index_t padded = (span + s_ - 1) / s_ * s_;
        row_len_ = padded / s_ + L;  // per phase
        // Input columns that any window reads (floor rounding may leave a tail unread).
        Wd_ = std::clamp<index_t>(span - pb_, 0, W_);
        // 1-D pools whose padded row (pb + Wd <= span columns) fits run_1d()'s.
        direct1d_ = R == 1 && pb_ >= 0 && pb_ <= span;
        rows_per_block_ = std::max<index_t>(1, flat_block / (row_len_ * s_));
        grid_ = p.template flat_divisor<T>();
        for (std::size_t a = 0; a + 1 < R; ++a) outer_ *= g.output[a];
        in_plane_ = p.input_spatial_volume();
    }

    /// Planes item_begin .. item_end - 1 (item = n * C + c). Blocks of output rows run across
    /// plane boundaries, so small planes (7x7) share the per-block costs.
    /// Narrow rows over-read up to 2 vectors past a plane's end while they stay inside the input.
    void run(const M* in, M* out, index_t item_begin, index_t item_end) const {
        if constexpr (R == 1) {
            if (direct1d_) {
                run_1d(in_end(in), in, out, item_begin, item_end);
                return;
            }
        }
        run_span(in_end(in), in, out, item_begin * outer_, item_end * outer_);
    }

    /// Outer output rows row_begin .. row_end - 1 of plane `item` (row r is the flat index over
    /// every axis but the last: oh for R = 2, od * Ho + oh for R = 3; R = 1 has the one row 0),
    /// for splitting few planes across threads. Each output row is computed on its own (its
    /// vertical sum, then its horizontal taps), so the bits are run()'s whatever the split.
    void run_rows(const M* in, M* out, index_t item, index_t row_begin, index_t row_end) const {
        if (row_begin >= row_end) return;
        if constexpr (R == 1) {
            if (direct1d_) {
                run_1d(in_end(in), in, out, item, item + 1);  // (a plane is its one row)
                return;
            }
        }
        run_span(in_end(in), in, out, item * outer_ + row_begin, item * outer_ + row_end);
    }

private:
    // 1-D: each plane is one row, so the blocks' phase buffers (zeroed, filled, summed, then
    // copied out) are three passes over data that two can do. A block of planes is copied
    // into rows with their zero padding (rows this short are mostly edge), then each output
    // vector's taps are read from them: at stride 2 de-interleaved from pairs of vectors, taps
    // 2m and 2m + 1 from the pair at 2m. The whole block is copied before any of it is read:
    // reading a row right after its stores, at other offsets than theirs, stalls on the store
    // buffer. The taps are added in the blocks' order (j = 0, 1, ...) and divided by the same
    // grid, so the bits are run_span()'s. (Zen 3, AVX2, 64 planes of 32 at k3 s2: 0.74x the
    // time of run_span(); bench/README.md, session 43.)
    const M* in_end(const M* in) const noexcept { return in + p_.input_shape[0] * p_.input_shape[1] * in_plane_; }

    void run_1d(const M* in_end, const M* in, M* out, index_t item_begin, index_t item_end) const {
        if (s_ == 1) {
            run_1d_s<1>(in_end, in, out, item_begin, item_end);
        } else {
            run_1d_s<2>(in_end, in, out, item_begin, item_end);
        }
    }

    template <int S>
    void run_1d_s(const M* in_end, const M* in, M* out, index_t item_begin, index_t item_end) const {
        switch (k_) {
            case 1: run_1d_k<1, S>(in_end, in, out, item_begin, item_end); break;
            case 2: run_1d_k<2, S>(in_end, in, out, item_begin, item_end); break;
            case 3: run_1d_k<3, S>(in_end, in, out, item_begin, item_end); break;
            case 4: run_1d_k<4, S>(in_end, in, out, item_begin, item_end); break;
            default: run_1d_k<5, S>(in_end, in, out, item_begin, item_end); break;
        }
    }

    template <int K, int S>
    void run_1d_k(const M* in_end, const M* in, M* out, index_t item_begin, index_t item_end) const {
        // A padded row: pb zeros, the Wd columns any window reads, zeros to the last vector's
        // reach, S * (Wo rounded up to L) + 2 L + K columns, which flat_geometry() bounds
        // ((Wo - 1) * S + K <= flat_block / 2); rows a whole number of vectors apart.
        alignas(64) T buf[flat_block + 8 * L];
        const index_t W = W_, Wo = Wo_, pb = pb_, Wd = Wd_;
        const index_t reach = S * ((Wo + L - 1) / L * L) + 2 * L + K;
        const index_t rs = (reach + L - 1) / L * L;
        const index_t nb = std::max<index_t>(1, (flat_block + 8 * L) / rs);
        // The padding, once per call, in the rows the blocks use (the copies never touch it).
        for (index_t r = 0; r < std::min(nb, item_end - item_begin); ++r) {
            T* row = buf + r * rs;
            std::fill(row, row + pb, T(0));
            std::fill(row + pb + Wd, row + rs, T(0));
        }
        const bool average = op_ == pool_op::average;
        const T* const div = grid_;
        for (index_t b0 = item_begin; b0 < item_end; b0 += nb) {
            const index_t n = std::min(nb, item_end - b0);
            for (index_t r = 0; r < n; ++r) {
                const M* src = in + (b0 + r) * W;
                T* x = buf + r * rs + pb;
                // (+ 0 changes no output, each of which ends in + 0 whatever its taps' zero
                // signs, and keeps GCC from making the loop a memcpy call per row.)
                index_t c = 0;
                for (; c + L <= Wd; c += L) plus_zero(vload(src + c)).store(x + c);
                if (c < Wd && in_end - (src + c) >= L) {
                    // A whole vector past the columns read (still inside the input), then the
                    // padding it overwrote put back.
                    plus_zero(vload(src + c)).store(x + c);
                    V::splat(T(0)).store(x + Wd);
                    c = Wd;
                }
                for (; c < Wd; ++c) x[c] = sload(src[c]);
            }
            for (index_t r = 0; r < n; ++r) {
                const T* row = buf + r * rs;
                M* dst = out + (b0 + r) * Wo;
                const index_t room = (item_end - b0 - r) * Wo;  // outputs of this call from dst on
                for (index_t u = 0; u < Wo; u += L) {
                    V acc;
                    if constexpr (S == 1) {
                        acc = V::load(row + u);
                        for (int j = 1; j < K; ++j) acc = acc + V::load(row + u + j);
                    } else {
                        V t[K + 1];
                        for (int m = 0; 2 * m < K; ++m)
                            deinterleave2_unordered(V::load(row + 2 * u + 2 * m), V::load(row + 2 * u + 2 * m + L), t[2 * m],
                                                    t[2 * m + 1]);
                        acc = t[0];
                        for (int j = 1; j < K; ++j) acc = acc + t[j];
                        acc = in_order(acc);
                    }
                    const V v = plus_zero(average ? acc / V::load(div + u) : acc);
                    if (u + L <= room) {
                        vstore(v, dst + u);  // (a spill past the plane: the next plane's, written after)
                    } else {
                        vstore_n(v, dst + u, Wo - u);
                    }
                }
            }
        }
    }

    // Rows g_begin .. g_end - 1 of all planes' outer output rows in order (row g is row g % outer_
    // of plane g / outer_), in blocks of rows_per_block_ that run across plane boundaries.
    void run_span(const M* in_end, const M* in, M* out, index_t g_begin, index_t g_end) const {
        alignas(64) T buf[flat_block + 4 * L];
        alignas(64) T obuf[flat_block + 2 * L];  // a block's outputs, copied out at once
        T* P[2] = {buf, buf + rows_per_block_ * row_len_};
        // The padding, once: only the rows this call's blocks use, plus the L past them that a
        // row's last vector may read (zeroing the whole buffer took about 70% of the cycles of
        // a one-plane 1-D call).
        const index_t used = std::min(rows_per_block_, g_end - g_begin) * row_len_ + L;
        for (index_t ph = 0; ph < s_; ++ph) std::fill(P[ph], P[ph] + used, T(0));
        const pool_geometry<R>& g = p_.geometry;
        const index_t Ho = outer_, in_plane = in_plane_;
        const M* rows[cf_max_outer_rows];
        const M* src = in + g_begin / Ho * in_plane;  // plane of the next row to fill
        index_t oh = g_begin % Ho;                    // its outer output row in that plane
        for (index_t g0 = g_begin; g0 < g_end; g0 += rows_per_block_) {
            const index_t nr = std::min(rows_per_block_, g_end - g0), oh0 = oh;
            for (index_t r = 0; r < nr; ++r) {
                if constexpr (R == 1) {
                    rows[0] = src;
                    vertical(P, r, rows, 1, in_end);
                } else if constexpr (R == 2) {
                    const window& wh = p_.axis(0)[oh];
                    for (index_t i = 0; i < wh.count; ++i) rows[i] = src + (wh.first + i * g.dilations[0]) * W_;
                    vertical(P, r, rows, wh.count, in_end);
                } else {
                    // The window's (d, h) rows, d outer: the order the other kernels sum in.
                    const index_t H = g.input[1], Ho1 = g.output[1];
                    const window& wd = p_.axis(0)[oh / Ho1];
                    const window& wh = p_.axis(1)[oh % Ho1];
                    index_t n = 0;
                    for (index_t i = 0; i < wd.count; ++i)
                        for (index_t j = 0; j < wh.count; ++j)
                            rows[n++] = src + ((wd.first + i * g.dilations[0]) * H + wh.first + j * g.dilations[1]) * W_;
                    vertical(P, r, rows, n, in_end);
                }
                if (++oh == Ho) {
                    oh = 0;
                    src += in_plane;
                }
            }
            horizontal(P, nr, oh0, Ho, obuf);
            store_n(obuf, out + g0 * Wo_, static_cast<std::size_t>(nr * Wo_));
        }
    }

    // Vertical sum of N rows at column x, unrolled (N = 0: n rows at run time).
    template <int N>
    static V vsum(const M* const* rows, index_t n, index_t x) noexcept {
        V acc = vload(rows[0] + x);
        if constexpr (N > 0) {
            for (int i = 1; i < N; ++i) acc = acc + vload(rows[i] + x);
        } else {
            for (index_t i = 1; i < n; ++i) acc = acc + vload(rows[i] + x);
        }
        return acc;
    }
    static T vsum1(const M* const* rows, index_t n, index_t x) noexcept {
        T acc = sload(rows[0][x]);
        for (index_t i = 1; i < n; ++i) acc += sload(rows[i][x]);
        return acc;
    }

    void vertical(T* const* P, index_t r, const M* const* rows, index_t n, const M* in_end) const {
        switch (n) {
            case 0: vzero(P, r); break;
            case 1: vrow<1>(P, r, rows, n, in_end); break;
            case 2: vrow<2>(P, r, rows, n, in_end); break;
            case 3: vrow<3>(P, r, rows, n, in_end); break;
            case 9: vrow<9>(P, r, rows, n, in_end); break;  // 3x3 outer taps (3-D)
            default: vrow<0>(P, r, rows, n, in_end); break;
        }
    }

    // Input column x sits at padded position pb + x: phase (pb + x) % s, index (pb + x) / s.
    void vzero(T* const* P, index_t r) const {
        for (index_t x = 0; x < Wd_; ++x) P[(pb_ + x) % s_][r * row_len_ + (pb_ + x) / s_] = T(0);
    }

    template <int N>
    void vrow(T* const* P, index_t r, const M* const* rows, index_t n, const M* in_end) const {
        if (s_ == 1) {
            T* dst = P[0] + r * row_len_ + pb_;
            index_t x = 0;
            for (; x + L <= Wd_; x += L) vsum<N>(rows, n, x).store(dst + x);
            if (x < Wd_ && in_end - (rows[n - 1] + x) >= L) {
                // Narrow rows (7 to 14 wide) would otherwise be mostly scalar: read a whole
                // vector past the row (still inside the input), then restore the right padding
                // the extra lanes overwrote. row_len_ has L slack for both stores.
                vsum<N>(rows, n, x).store(dst + x);
                V::splat(T(0)).store(dst + Wd_);
                return;
            }
            for (; x < Wd_; ++x) dst[x] = vsum1(rows, n, x);
            return;
        }
        // Stride 2: even columns go to phase pb % 2, odd ones to the other, from index
        // (pb + parity) / 2 on.
        const index_t q = pb_ % 2;
        T* even_x = P[q] + r * row_len_ + pb_ / 2;
        T* odd_x = P[1 - q] + r * row_len_ + (pb_ + 1) / 2;
        if (Wd_ <= L && in_end - rows[n - 1] >= L) {
            // Rows of at most one vector (3-D pools on 8 to 16 wide planes): one vertical sum,
            // its upper half of the pair zero; the phases are re-zeroed past their last value.
            V e, o;
            deinterleave2(vsum<N>(rows, n, 0), V::splat(T(0)), e, o);
            e.store(even_x);
            o.store(odd_x);
            V::splat(T(0)).store(even_x + (Wd_ + 1) / 2);
            V::splat(T(0)).store(odd_x + Wd_ / 2);
            return;
        }
        index_t m = 0;
        for (; 2 * (m + L) <= Wd_; m += L) {
            V e, o;
            deinterleave2(vsum<N>(rows, n, 2 * m), vsum<N>(rows, n, 2 * m + L), e, o);
            e.store(even_x + m);
            o.store(odd_x + m);
        }
        if (2 * m < Wd_ && in_end - (rows[n - 1] + 2 * m) >= 2 * L) {
            V e, o;  // as at stride 1: over-read, then re-zero each phase past its last value
            deinterleave2(vsum<N>(rows, n, 2 * m), vsum<N>(rows, n, 2 * m + L), e, o);
            e.store(even_x + m);
            o.store(odd_x + m);
            V::splat(T(0)).store(even_x + (Wd_ + 1) / 2);
            V::splat(T(0)).store(odd_x + Wd_ / 2);
            return;
        }
        for (index_t x = 2 * m; x < Wd_; ++x) (x % 2 == 0 ? even_x : odd_x)[x / 2] = vsum1(rows, n, x);
    }

    void horizontal(T* const* P, index_t nr, index_t oh0, index_t Ho, T* dst) const {
        if (s_ == 1) {
            horizontal_s<1>(P, nr, oh0, Ho, dst);
        } else {
            horizontal_s<2>(P, nr, oh0, Ho, dst);
        }
    }
    template <int S>
    void horizontal_s(T* const* P, index_t nr, index_t oh0, index_t Ho, T* dst) const {
        switch (k_) {
            case 1: hrows<1, S>(P, nr, oh0, Ho, dst); break;
            case 2: hrows<2, S>(P, nr, oh0, Ho, dst); break;
            case 3: hrows<3, S>(P, nr, oh0, Ho, dst); break;
            case 4: hrows<4, S>(P, nr, oh0, Ho, dst); break;
            default: hrows<5, S>(P, nr, oh0, Ho, dst); break;
        }
    }

    // Output ow of a row = sum over taps j of phase j % s at ow + j / s, divided. Rows are
    // written to dst (the block's output buffer) in whole vectors: a row's last vector spills
    // into the next row, which overwrites it, or into dst's slack.
    template <int K, int S>
    void hrows(T* const* P, index_t nr, index_t oh0, index_t Ho, T* dst) const {
        const bool average = op_ == pool_op::average;
        index_t oh = oh0;
        for (index_t r = 0; r < nr; ++r) {
            const T* src[K];
            for (int j = 0; j < K; ++j) src[j] = P[j % S] + r * row_len_ + j / S;
            const T* div = grid_ + oh * Wo_;  // the grid has slack for the spill too
            T* out = dst + r * Wo_;
            for (index_t u = 0; u < Wo_; u += L) {
                V acc = V::load(src[0] + u);
                for (int j = 1; j < K; ++j) acc = acc + V::load(src[j] + u);
                plus_zero(average ? acc / V::load(div + u) : acc).store(out + u);
            }
            if (++oh == Ho) oh = 0;
        }
    }

    const plan_data<R>& p_;
    pool_op op_;
    index_t W_ = 0, Wo_ = 0, s_ = 1, k_ = 1, pb_ = 0, row_len_ = 1, rows_per_block_ = 1, Wd_ = 0;
    index_t outer_ = 1, in_plane_ = 1;  // outer output rows and input values per plane
    bool direct1d_ = false;             // run() and run_rows() take run_1d()
    const T* grid_ = nullptr;
};

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_KERNEL_FLAT_HPP
