// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The block kernel for the common memory-bound shapes: R = 1 or 2, last axis with dilation 1,
// stride s = 1 or 2, a kernel of at most 5 taps, and W == s * Wo (same padding at stride 1, a 2x
// or 3x3 stride-2 downsample). Vertical sums of a block of rows go to a buffer whose rows keep
// their zero padding between them (written once per call), de-interleaved into even / odd
// phases at stride 2, so the horizontal pass has no edge cases: output ow of a row reads phase
// j % s at ow + j / s for tap j, in padded coordinates. That removes the per-row costs that
// dominate narrow rows (56 wide: 7 AVX2 vectors a row). Divisors come from a per-plan grid.
// The summation order is the separable kernel's: sum over w of sum over h.
#ifndef AVGPOOL_DETAIL_KERNEL_FLAT_HPP
#define AVGPOOL_DETAIL_KERNEL_FLAT_HPP

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "kernel_cf.hpp"
#include "plan.hpp"
#include "simd.hpp"

namespace avgpool {
namespace detail {

// Elements of padded vertical-sum rows per block (both phases together).
constexpr index_t flat_block = 4096;
constexpr index_t flat_max_kernel = 5;
// The divisor grid covers one plane's outputs (R = 2) or one block of rows (R = 1).
constexpr index_t flat_max_grid = index_t(1) << 18;

/// Whether the geometry suits the flattened kernel (independent of the element type).
template <std::size_t R>
bool flat_geometry(const plan_data<R>& p) noexcept {
    if (R > 2 || p.memory_layout != layout::channels_first || p.global) return false;
    const pool_geometry<R>& g = p.geometry;
    const index_t W = g.input[R - 1], Wo = g.output[R - 1], s = g.strides[R - 1];
    if (g.dilations[R - 1] != 1 || (s != 1 && s != 2) || W != s * Wo) return false;
    if (g.kernel[R - 1] > flat_max_kernel || g.pads_begin[R - 1] > flat_max_kernel) return false;
    if (W > flat_block / 2) return false;
    if (R == 2) {
        if (g.kernel[0] > cf_max_outer_rows || g.output[0] * Wo > flat_max_grid) return false;
    }
    return true;
}

template <class T, std::size_t R>
bool flat_applicable(const plan_data<R>& p) noexcept {
    return p.max_divisor <= exact_integer_limit<T>() && !p.flat_div_f.empty() && flat_geometry<R>(p);
}

template <class T, std::size_t R>
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
        const index_t padded = ((Wo_ - 1) * s_ + k_ + s_ - 1) / s_ * s_;
        row_len_ = padded / s_ + L;  // per phase
        rows_per_block_ = std::max<index_t>(1, flat_block / (row_len_ * s_));
        grid_ = p.template flat_divisor<T>();
    }

    /// Planes item_begin .. item_end - 1 (item = n * C + c).
    void run(const T* in, T* out, index_t item_begin, index_t item_end) const {
        alignas(64) T buf[flat_block + 4 * L];
        T* P[2] = {buf, buf + rows_per_block_ * row_len_};
        std::fill(buf, buf + rows_per_block_ * row_len_ * s_ + L, T(0));  // the padding, once
        if constexpr (R == 1) {
            // Rows are whole planes: blocks of rows_per_block planes.
            for (index_t r0 = item_begin; r0 < item_end; r0 += rows_per_block_) {
                const index_t nr = std::min(rows_per_block_, item_end - r0);
                const T* src = in + r0 * W_;
                for (index_t r = 0; r < nr; ++r) {
                    const T* one[1] = {src + r * W_};
                    vertical(P, r, one, 1);
                }
                horizontal(P, nr, out + r0 * Wo_, grid_, false);
            }
        } else {
            const pool_geometry<R>& g = p_.geometry;
            const index_t Ho = g.output[0], in_plane = g.input[0] * W_;
            const T* rows[cf_max_outer_rows];
            for (index_t item = item_begin; item < item_end; ++item) {
                const T* src = in + item * in_plane;
                T* dst = out + item * Ho * Wo_;
                for (index_t r0 = 0; r0 < Ho; r0 += rows_per_block_) {
                    const index_t nr = std::min(rows_per_block_, Ho - r0);
                    for (index_t r = 0; r < nr; ++r) {
                        const window& wh = p_.axis(0)[r0 + r];
                        for (index_t i = 0; i < wh.count; ++i) rows[i] = src + (wh.first + i * g.dilations[0]) * W_;
                        vertical(P, r, rows, wh.count);
                    }
                    // Rows but the plane's last may store whole vectors past their end: the
                    // next row of the same plane overwrites them.
                    horizontal(P, nr, dst + r0 * Wo_, grid_ + r0 * Wo_, r0 + nr < Ho);
                }
            }
        }
    }

private:
    // Vertical sum of N rows at column x, unrolled (N = 0: n rows at run time).
    template <int N>
    static V vsum(const T* const* rows, index_t n, index_t x) noexcept {
        V acc = V::load(rows[0] + x);
        if constexpr (N > 0) {
            for (int i = 1; i < N; ++i) acc = acc + V::load(rows[i] + x);
        } else {
            for (index_t i = 1; i < n; ++i) acc = acc + V::load(rows[i] + x);
        }
        return acc;
    }
    static T vsum1(const T* const* rows, index_t n, index_t x) noexcept {
        T acc = rows[0][x];
        for (index_t i = 1; i < n; ++i) acc += rows[i][x];
        return acc;
    }

    void vertical(T* const* P, index_t r, const T* const* rows, index_t n) const {
        switch (n) {
            case 0: vzero(P, r); break;
            case 1: vrow<1>(P, r, rows, n); break;
            case 2: vrow<2>(P, r, rows, n); break;
            case 3: vrow<3>(P, r, rows, n); break;
            default: vrow<0>(P, r, rows, n); break;
        }
    }

    // Input column x sits at padded position pb + x: phase (pb + x) % s, index (pb + x) / s.
    void vzero(T* const* P, index_t r) const {
        for (index_t x = 0; x < W_; ++x) P[(pb_ + x) % s_][r * row_len_ + (pb_ + x) / s_] = T(0);
    }

    template <int N>
    void vrow(T* const* P, index_t r, const T* const* rows, index_t n) const {
        if (s_ == 1) {
            T* dst = P[0] + r * row_len_ + pb_;
            index_t x = 0;
            for (; x + L <= W_; x += L) vsum<N>(rows, n, x).store(dst + x);
            for (; x < W_; ++x) dst[x] = vsum1(rows, n, x);
            return;
        }
        // Stride 2: even columns go to phase pb % 2, odd ones to the other, from index
        // (pb + parity) / 2 on.
        const index_t q = pb_ % 2;
        T* even_x = P[q] + r * row_len_ + pb_ / 2;
        T* odd_x = P[1 - q] + r * row_len_ + (pb_ + 1) / 2;
        index_t m = 0;
        for (; 2 * (m + L) <= W_; m += L) {
            V e, o;
            deinterleave2(vsum<N>(rows, n, 2 * m), vsum<N>(rows, n, 2 * m + L), e, o);
            e.store(even_x + m);
            o.store(odd_x + m);
        }
        for (; m < Wo_; ++m) {
            even_x[m] = vsum1(rows, n, 2 * m);
            odd_x[m] = vsum1(rows, n, 2 * m + 1);
        }
    }

    void horizontal(T* const* P, index_t nr, T* dst, const T* grid, bool overrun_ok) const {
        if (s_ == 1) {
            horizontal_s<1>(P, nr, dst, grid, overrun_ok);
        } else {
            horizontal_s<2>(P, nr, dst, grid, overrun_ok);
        }
    }
    template <int S>
    void horizontal_s(T* const* P, index_t nr, T* dst, const T* grid, bool overrun_ok) const {
        switch (k_) {
            case 1: hrows<1, S>(P, nr, dst, grid, overrun_ok); break;
            case 2: hrows<2, S>(P, nr, dst, grid, overrun_ok); break;
            case 3: hrows<3, S>(P, nr, dst, grid, overrun_ok); break;
            case 4: hrows<4, S>(P, nr, dst, grid, overrun_ok); break;
            default: hrows<5, S>(P, nr, dst, grid, overrun_ok); break;
        }
    }

    // Output ow of a row = sum over taps j of phase j % s at ow + j / s, divided.
    template <int K, int S>
    void hrows(T* const* P, index_t nr, T* dst, const T* grid, bool overrun_ok) const {
        const bool average = op_ == pool_op::average;
        for (index_t r = 0; r < nr; ++r) {
            const T* src[K];
            for (int j = 0; j < K; ++j) src[j] = P[j % S] + r * row_len_ + j / S;
            const T* div = grid + r * Wo_;
            T* out = dst + r * Wo_;
            // Whole vectors; past Wo only into a next row (of the block, or of the plane) that
            // is at least a vector long, so the spill stays inside it and is overwritten later.
            const bool spill = (overrun_ok || r + 1 < nr) && Wo_ >= L;
            const index_t full = spill ? Wo_ : Wo_ - Wo_ % L;
            index_t u = 0;
            for (; u < full; u += L) {
                V acc = V::load(src[0] + u);
                for (int j = 1; j < K; ++j) acc = acc + V::load(src[j] + u);
                if (average) acc = acc / V::load(div + u);
                acc.store(out + u);
            }
            if (u < Wo_) {
                V acc = V::load(src[0] + u);
                for (int j = 1; j < K; ++j) acc = acc + V::load(src[j] + u);
                T tmp[V::width], d[V::width];
                for (index_t l = 0; l < L; ++l) d[l] = u + l < Wo_ ? div[u + l] : T(1);
                if (average) acc = acc / V::load(d);
                acc.store(tmp);
                std::memcpy(out + u, tmp, static_cast<std::size_t>(Wo_ - u) * sizeof(T));
            }
        }
    }

    const plan_data<R>& p_;
    pool_op op_;
    index_t W_ = 0, Wo_ = 0, s_ = 1, k_ = 1, pb_ = 0, row_len_ = 1, rows_per_block_ = 1;
    const T* grid_ = nullptr;
};

}  // namespace detail
}  // namespace avgpool

#endif  // AVGPOOL_DETAIL_KERNEL_FLAT_HPP
