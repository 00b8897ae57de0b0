// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The fast channels-first kernel (R = 1, 2, 3; float and double), built on separability:
// for each output row, the input rows of the window's outer taps are summed vertically into a
// zero-padded row buffer at full SIMD width (contiguous loads, no gathers); the buffer is then
// reduced horizontally, one SIMD lane per output. Padding taps are the buffer's zeros, so
// every output of a row takes the same number of adds and only the divisor differs.
// Stride 2 is de-interleaved in registers into even/odd phases instead of wasting lanes.
// Sums are nested per axis (sum over w of sum over h of sum over d), which keeps the rounding
// error within 4 * (k_1 + ... + k_R) * eps * sum|x| (DESIGN.md section 3).
#ifndef AVGPOOL_DETAIL_KERNEL_CF_HPP
#define AVGPOOL_DETAIL_KERNEL_CF_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "convert.hpp"
#include "plan.hpp"
#include "reference.hpp"
#include "simd.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

// Row buffer capacity (elements): a tile of output columns is sized to fit, so any width
// runs without allocating. 2048 floats + phases stay well inside L1 + L2.
constexpr index_t cf_buffer = 2048;
// The input rows of one output row (product of the outer axes' taps) are listed on the
// stack up to this many; larger outer kernels list them in scratch.
constexpr index_t cf_max_outer_rows = 1024;

// Kernels of at least this many taps (stride 1, dilation 1) sum their rows' windows by blocks
// (block_window_sums), where direct sums cost k / L loads per output: two vectors' worth, and
// at least 16. Measured on AVX-512 (1x16x20000 rows, us): direct 267 / 318 / 556 / 1067 at
// k = 24 / 32 / 64 / 128, blocks 349 / 280 / 256 / 255, and 264 at k = 512.
// Dilated windows gather each residue's taps into a row first and store scalar sums, so
// they take blocks from cf_block_min_dilated_taps on. Measured on AVX-512 (channels-last
// 1x4x20000 through its flat plan, dilation 4; us): direct 74 / 98 / 140 / 185 at k = 24 /
// 33 / 48 / 64, blocks 101 / 118 / 113 / 123 (113 at k = 100, where direct took 286).
template <class T>
constexpr index_t cf_block_min_taps() noexcept {
    return std::max<index_t>(2 * static_cast<index_t>(vec<T>::width), 16);
}
template <class T>
constexpr index_t cf_block_min_dilated_taps() noexcept {
    return 3 * cf_block_min_taps<T>() / 2;
}

template <class T>
constexpr double exact_integer_limit() noexcept {
    return sizeof(T) == 4 ? 16777216.0 : 9007199254740992.0;  // 2^24, 2^53
}

/// The most input rows one output row sums (the product of the outer axes' taps; at most the
/// input rows of a plane, so it fits).
template <std::size_t R>
index_t outer_taps(const pool_geometry<R>& g) noexcept {
    index_t outer_rows = 1;
    for (std::size_t a = 0; a + 1 < R; ++a) outer_rows *= std::min(g.kernel[a], g.input[a]);  // bounds any window's count
    return outer_rows;
}


/// Whether the windows cover every axis but the first whole (one output there, reading every
/// input: i3d's 2x7x7 on 8x7x7 slices). Forward and backward both take a slice-wise path then.
template <std::size_t R>
bool inner_axes_whole(const plan_data<R>& p) noexcept {
    if (R < 2) return false;
    for (std::size_t a = 1; a < R; ++a) {
        const window& w = p.axis(a)[0];
        if (p.geometry.output[a] != 1 || w.first != 0 || w.count != p.geometry.input[a]) return false;
    }
    return true;
}

// Global pools of planes up to this many vectors take cf_kernel's grouped path.
constexpr index_t global_group_max = 32;
// The most first-axis slices cf_kernel's slice sums keep (on the stack) for a plane.
constexpr index_t cf_slices_max = 256;

/// Whether cf_kernel sums the last axis's windows by blocks (block_window_sums, and
/// dilated_window_sums past dilation 1): stride 1, fixed windows, at least
/// cf_block_min_taps() taps (cf_block_min_dilated_taps() dilated).
template <class T, std::size_t R>
bool cf_blocks_geometry(const plan_data<R>& p) noexcept {
    const pool_geometry<R>& g = p.geometry;
    const index_t k = g.kernel[R - 1];
    return !p.adaptive && g.strides[R - 1] == 1 &&
           (g.dilations[R - 1] == 1 ? k >= cf_block_min_taps<T>() : k >= cf_block_min_dilated_taps<T>());
}

/// Whether cf_kernel takes each row whole (one tile, in scratch past cf_buffer): for its block
/// sums, and for windows past cf_buffer / 2 at strides of 3 or more (summed one output at a
/// time, few of them), where the padded row stays within a few rows' length (pads many
/// times the row's are left to the reference, as are such windows at stride 2, whose phase
/// rows stay on the stack).
template <class T, std::size_t R>
bool cf_whole_row(const plan_data<R>& p) noexcept {
    const pool_geometry<R>& g = p.geometry;
    const index_t s = g.strides[R - 1], ke = (g.kernel[R - 1] - 1) * g.dilations[R - 1] + 1;
    if (p.adaptive || !(cf_blocks_geometry<T, R>(p) || (s >= 3 && ke > cf_buffer / 2))) return false;
    const index_t W = g.input[R - 1], Wo = g.output[R - 1];
    const index_t len = (Wo - 1) * s + ke;
    return len <= cf_buffer || len <= 2 * (W + Wo);
}

/// Whether the fast channels-first kernel covers this plan for element type T.
template <class T, std::size_t R>
bool cf_applicable(const plan_data<R>& p) noexcept {
    if (R > 3 || p.memory_layout != layout::channels_first) return false;
    // Divisors are formed in T: they must be exact integers there.
    if (p.max_divisor > exact_integer_limit<T>()) return false;
    if (p.global) return true;
    const pool_geometry<R>& g = p.geometry;  // (more outer rows than its list: a scratch list)
    if (p.adaptive) return true;  // the whole row in the buffer (scratch past cf_buffer)
    const index_t ke = (g.kernel[R - 1] - 1) * g.dilations[R - 1] + 1;
    return ke <= cf_buffer / 2 || cf_whole_row<T, R>(p);
}

/// Whether cf_kernel sums each first-axis slice once (its slice path): windows covering every
/// other axis whole (inner_axes_whole), the first axis undilated with no empty window and at
/// most cf_slices_max inputs, and slices of L to global_group_max * L elements (the global
/// pool's grouped sums), where cf_applicable holds. I3D's 2x7x7 head on 8x7x7 slices.
template <class T, std::size_t R>
bool cf_slices_geometry(const plan_data<R>& p) noexcept {
    constexpr index_t L = static_cast<index_t>(vec<T>::width);
    if (R < 2 || R > 3 || L < 2 || p.global || p.adaptive || p.memory_layout != layout::channels_first ||
        p.geometry.dilations[0] != 1 || p.geometry.input[0] > cf_slices_max || !inner_axes_whole<R>(p) ||
        !cf_applicable<T, R>(p))
        return false;
    const index_t n = p.input_spatial_volume() / p.geometry.input[0];
    if (n < L || n > global_group_max * L) return false;
    const window* w = p.axis(0);
    for (index_t o = 0; o < p.geometry.output[0]; ++o)
        if (w[o].count == 0) return false;
    return true;
}

/// Sum of n contiguous values: blocks of 4 independent vector accumulators, the block sums
/// added in double. Error ~ (block / (4 * width) + log2 + n / block) * eps * sum|x|.
template <class M, class T = compute_t<M>>
double contiguous_sum(const M* x, index_t n) noexcept {
    using V = vec<T>;
    constexpr index_t L = static_cast<index_t>(V::width);
    constexpr index_t block = 1024;
    double total = 0.0;
    for (index_t b0 = 0; b0 < n; b0 += block) {
        const index_t b1 = std::min(n, b0 + block);
        V a0 = V::splat(T(0)), a1 = a0, a2 = a0, a3 = a0;
        index_t i = b0;
        for (; i + 4 * L <= b1; i += 4 * L) {
            a0 = a0 + vload(x + i);
            a1 = a1 + vload(x + i + L);
            a2 = a2 + vload(x + i + 2 * L);
            a3 = a3 + vload(x + i + 3 * L);
        }
        for (; i + L <= b1; i += L) a0 = a0 + vload(x + i);
        T lanes[V::width];
        ((a0 + a1) + (a2 + a3)).store(lanes);
        T s = T(0);
        for (index_t l = 0; l < L; ++l) s += lanes[l];
        for (; i < b1; ++i) s += sload(x[i]);
        total += static_cast<double>(s);
    }
    return total;
}

/// Window sums of k consecutive values by blocks of k (van Herk / Gil-Werman, for sums):
/// window u, starting in block b, is the suffix of block b from u plus the prefix of block
/// b + 1 up to u + k - 1 (a window on a block start is its block), each part summed directly
/// in order, so no subtraction and at most k - 1 adds per part (within the accuracy bound of
/// direct sums). About two scalar adds per value for any k, where direct sums take k / L
/// loads per output. For each block, emit(u0, a, b, n): windows u0 + t, t < n, sum to
/// a[t] + b[t] (both readable to n + L). src: readable over [0, n_out + k - 1). scratch:
/// 2 (k + L) values.
template <class T, class Emit>
void block_window_sums(const T* src, index_t n_out, index_t k, T* scratch, Emit&& emit) {
    constexpr index_t L = static_cast<index_t>(vec<T>::width);
    T* const suf = scratch;          // suffix sums of the block, from each t to its end
    T* const pre = scratch + k + L;  // pre[t]: prefix of the next block up to t - 1 (pre[0] = 0)
    std::fill(suf + k, suf + k + L, T(0));
    for (index_t b0 = 0; b0 < n_out; b0 += k) {
        const index_t n = std::min(k, n_out - b0);  // windows starting in this block
        const T* blk = src + b0;
        // The two chains of adds in one loop, so that they overlap (each add waits for the
        // one before in its chain).
        T s = T(0), q = T(0);
        pre[0] = T(0);
        index_t t = 0;
        for (; t + 1 < n; ++t) {
            suf[k - 1 - t] = s += blk[k - 1 - t];
            pre[t + 1] = q += blk[k + t];
        }
        for (; t < k; ++t) suf[k - 1 - t] = s += blk[k - 1 - t];
        std::fill(pre + n, pre + n + L, T(0));
        emit(b0, suf, pre, n);
    }
}

/// The same for windows of k taps d apart: sums[u] = src[u] + src[u + d] + ... +
/// src[u + (k - 1) d] for u < n_out (src readable to n_out + (k - 1) d). Each residue u mod d
/// is a row of its own, gathered into scratch and summed by blocks. scratch: 2 (k + L) +
/// n_out / d + k + 1 values.
template <class T>
void dilated_window_sums(const T* src, index_t n_out, index_t k, index_t d, T* scratch, T* sums) {
    constexpr index_t L = static_cast<index_t>(vec<T>::width);
    T* const seq = scratch + 2 * (k + L);
    for (index_t r = 0; r < std::min(d, n_out); ++r) {
        const index_t n = (n_out - r + d - 1) / d;  // windows of this residue
        for (index_t i = 0; i < n + k - 1; ++i) seq[i] = src[r + i * d];
        block_window_sums(seq, n, k, scratch, [&](index_t u0, const T* a, const T* b, index_t m) {
            for (index_t t = 0; t < m; ++t) sums[r + (u0 + t) * d] = a[t] + b[t];
        });
    }
}

// Vertical sum at column x of n0 groups of n1 rows (rows[i * n1 + j]), nested:
// sum_i (sum_j row), the order the accuracy bound is stated for. N1 > 0 unrolls the inner sum.
// Shared by the channels-first and channels-last kernels.
// Rows of storage type S (float16 / bfloat16 for T = float) are converted as they are loaded.
// Vt: vec<T>, or vpair<T> for two vectors' worth of channels at once (convert.hpp).
// Requires n0 >= 1 and n1 >= 1 (callers handle windows with no rows themselves).
template <class T, int N1, class S, class Vt = vec<T>>
inline Vt nested_vsum(const S* const* rows, index_t n0, index_t n1, index_t x) noexcept {
    auto inner = [&](index_t i) {
        const S* const* r = rows + i * n1;
        Vt in = vload_as<Vt>(r[0] + x);
        if constexpr (N1 > 0) {
            for (int j = 1; j < N1; ++j) in = in + vload_as<Vt>(r[j] + x);
        } else {
            for (index_t j = 1; j < n1; ++j) in = in + vload_as<Vt>(r[j] + x);
        }
        return in;
    };
    Vt acc = inner(0);
    for (index_t i = 1; i < n0; ++i) acc = acc + inner(i);
    return acc;
}
// sum_j r[B + j] + x for j < N1, left to right.
template <class Vt, std::size_t B, class S, std::size_t... J>
inline Vt group_vsum(const S* const* r, index_t x, std::index_sequence<J...>) noexcept {
    return (vload_as<Vt>(r[B] + x) + ... + vload_as<Vt>(r[B + J + 1] + x));
}
template <class Vt, int N1, class S, std::size_t... A>
inline Vt groups_vsum(const S* const* r, index_t x, std::index_sequence<A...>) noexcept {
    constexpr auto inner = std::make_index_sequence<N1 - 1>{};
    return (group_vsum<Vt, 0>(r, x, inner) + ... + group_vsum<Vt, (A + 1) * N1>(r, x, inner));
}
// nested_vsum() of N0 x N1 rows, with the same sums in the same order. The callers copy the
// row pointers into a local array first: with every index a constant (folds, no loops the
// compiler might keep rolled), it holds them in registers; read from a list that a store
// might alias, they were reloaded for every vector, and those loads bounded the loop.
template <class T, int N0, int N1, class S, class Vt = vec<T>>
inline Vt fixed_nested_vsum(const S* const* r, index_t x) noexcept {
    static_assert(N0 >= 1 && N1 >= 1, "at least one row");
    return groups_vsum<Vt, N1>(r, x, std::make_index_sequence<N0 - 1>{});
}

template <class S, class T = compute_t<S>>
inline T nested_vsum1(const S* const* rows, index_t n0, index_t n1, index_t x) noexcept {
    T acc = T(0);
    for (index_t i = 0; i < n0; ++i) {
        const S* const* r = rows + i * n1;
        T inner = sload(r[0][x]);
        for (index_t j = 1; j < n1; ++j) inner += sload(r[j][x]);
        acc = i == 0 ? inner : acc + inner;
    }
    return acc;
}

// M: the memory type of in and out (T, or float16 / bfloat16 for T = float: loads convert,
// the row buffers and sums stay in T, each output is rounded once as it is stored).
template <class T, std::size_t R, class M = T>
class cf_kernel {
    using V = vec<T>;
    static constexpr index_t L = static_cast<index_t>(V::width);
    static constexpr index_t slack = 2 * L;  // zeroed room for whole-vector over-reads

public:
    cf_kernel(const plan_data<R>& p, pool_op op) : p_(p), op_(op) {
        const pool_geometry<R>& g = p.geometry;
        W_ = g.input[R - 1];
        Wo_ = g.output[R - 1];
        s_ = g.strides[R - 1];
        d_ = g.dilations[R - 1];
        k_ = g.kernel[R - 1];
        pb_ = g.pads_begin[R - 1];
        const index_t ke = (k_ - 1) * d_ + 1;
        tile_ = std::min(Wo_, (cf_buffer - ke) / s_ + 1);
        buf_len_ = (tile_ - 1) * s_ + ke;
        if (p.adaptive) {
            // Windows of any start and length: the whole input row in one buffer, pads 0.
            tile_ = Wo_;
            buf_len_ = W_;
            pb_ = 0;
        }
        blocks_ = cf_blocks_geometry<T, R>(p);
        if (cf_whole_row<T, R>(p)) {
            // The whole padded row at once: tiles would sum (k - 1) d values twice at each cut
            // (or could not hold one window).
            tile_ = Wo_;
            buf_len_ = (Wo_ - 1) * s_ + ke;
        }
        last_div_ = p.template last_divisor<T>();
        hpass_ = pick_hpass();
        // Windows covering every axis but the first whole, first axis undilated: each output
        // row is one output summing a contiguous run of whole slices (see contiguous_row).
        if (!p.adaptive && g.dilations[0] == 1 && inner_axes_whole<R>(p)) contig_inner_ = p.input_spatial_volume() / g.input[0];
        const index_t n = p.input_spatial_volume();
        if (p.global) {  // one window: its divisor once, for both global paths
            const window* w[R];
            for (std::size_t a = 0; a < R; ++a) w[a] = p.axis(a);
            global_div_ = window_divisor<R>(p, w, global_empty_);
        }
        slices_ = cf_slices_geometry<T, R>(p);
        if ((p.global && L > 1 && n >= L && n <= global_group_max * L) || slices_) {
            group_n_ = p.global ? n : contig_inner_;  // (a slice's elements: the groups are its slices)
            // Lanes of the tail vector (the plane's last L values) that the whole vectors
            // before it already counted: masked off.
            const index_t counted = L - group_n_ % L;
            for (index_t l = 0; l < L; ++l) {
                using U = typename std::conditional<sizeof(T) == 4, std::uint32_t, std::uint64_t>::type;
                const U bits = group_n_ % L != 0 && l >= counted ? ~U(0) : U(0);
                std::memcpy(&tail_mask_[l], &bits, sizeof(T));
            }
        }
    }

    /// Planes item_begin .. item_end - 1 (item = n * C + c).
    /// Rows narrower than a vector read one whole vector while it stays inside the input.
    void run(const M* in, M* out, index_t item_begin, index_t item_end) const {
        const M* const in_end = in + p_.input_shape[0] * p_.input_shape[1] * p_.input_spatial_volume();
        const index_t in_plane = p_.input_spatial_volume(), out_plane = p_.output_spatial_volume();
        if (p_.global) {
            if (group_n_ > 0) {
                for (index_t item = item_begin; item < item_end; item += L)
                    global_group(in + item * in_plane, out + item, std::min(L, item_end - item));
                return;
            }
            for (index_t item = item_begin; item < item_end; ++item)
                global(in + item * in_plane, out + item * out_plane, in_plane);
            return;
        }
        if (slices_) {
            // The planes' slices are consecutive: their sums go L at a time across planes (the
            // same bits as a plane alone), for as many planes as the buffer holds.
            const index_t D = p_.geometry.input[0], Do = p_.geometry.output[0];
            const index_t per = std::max<index_t>(1, cf_slices_max / D);
            alignas(64) T sums[cf_slices_max + L];
            for (index_t item = item_begin; item < item_end; item += per) {
                const index_t n = std::min(per, item_end - item);
                slice_sums(in + item * in_plane, 0, n * D, sums);
                for (index_t j = 0; j < n; ++j)
                    for (index_t o = 0; o < Do; ++o) slices_row(sums + j * D, 0, out + (item + j) * out_plane + o, o);
            }
            return;
        }
        buffers b;
        b.in_end = in_end;
        prepare(b);
        for (index_t item = item_begin; item < item_end; ++item) plane(b, in + item * in_plane, out + item * out_plane);
    }

    /// Outer output rows row_begin .. row_end - 1 of plane `item` only (row r is the flat index
    /// over every axis but the last: oh for R = 2, od * Ho + oh for R = 3; R = 1 and global
    /// pools have the single row 0). Each row goes through the same row() call with the same
    /// input-row list as in run(), so the outputs are bit-identical to run()'s: a plane can
    /// be split across threads when there are few planes.
    void run_rows(const M* in, M* out, index_t item, index_t row_begin, index_t row_end) const {
        if (row_begin >= row_end) return;
        const index_t in_plane = p_.input_spatial_volume(), out_plane = p_.output_spatial_volume();
        const M* src = in + item * in_plane;
        M* dst = out + item * out_plane;
        if (p_.global) {
            if (group_n_ > 0)
                global_group(src, dst, 1);
            else
                global(src, dst, in_plane);
            return;
        }
        if (slices_) {  // (rows are the first axis's outputs: the other axes' are 1)
            slices_outputs(src, dst, row_begin, row_end);
            return;
        }
        buffers b;
        b.in_end = in + p_.input_shape[0] * p_.input_shape[1] * in_plane;  // as run() bounds it
        prepare(b);  // as in run()
        const pool_geometry<R>& g = p_.geometry;
        const M** const rows = b.rows;
        if constexpr (R == 1) {
            rows[0] = src;
            row(b, rows, 1, 1, dst, 1.0);
        } else if constexpr (R == 2) {
            for (index_t oh = row_begin; oh < row_end; ++oh) {
                if (contiguous_row(src, dst + oh * Wo_, oh)) continue;
                const window& wh = p_.axis(0)[oh];
                for (index_t j = 0; j < wh.count; ++j) rows[j] = src + (wh.first + j * g.dilations[0]) * W_;
                row(b, rows, 1, wh.count, dst + oh * Wo_, static_cast<double>(wh.divisor));
            }
        } else {
            const index_t HW = g.input[1] * W_, Ho = g.output[1];
            for (index_t r = row_begin; r < row_end; ++r) {
                if (contiguous_row(src, dst + r * Wo_, r / Ho)) continue;
                const window& wd = p_.axis(0)[r / Ho];
                const window& wh = p_.axis(1)[r % Ho];
                for (index_t i = 0; i < wd.count; ++i)
                    for (index_t j = 0; j < wh.count; ++j)
                        rows[i * wh.count + j] =
                            src + (wd.first + i * g.dilations[0]) * HW + (wh.first + j * g.dilations[1]) * W_;
                row(b, rows, wd.count, wh.count, dst + r * Wo_,
                    static_cast<double>(wd.divisor) * static_cast<double>(wh.divisor));
            }
        }
    }

private:
    // Global pools of small planes (7x7, 8x8, 14x14: L <= n <= global_group_max * L), `count`
    // <= L planes of n values at once; one output each. Summing a plane into one vector and
    // reducing that vector alone costs a chain of shuffles and dependent adds per plane, more
    // than reading it; here each plane is added into one vector (its tail read as the plane's
    // last L values with the lanes already counted masked off, so nothing outside the plane is
    // read), and the L vectors go through one tree of de-interleave + add steps that leaves
    // plane i's sum in lane i. Every plane's lanes are added in the same order whatever its
    // slot in the group, so results do not depend on the grouping (the executor's split).
    // Error: n / L sequential adds per lane, then log2(L) levels: far inside the bound.
    void global_group(const M* src, M* dst, index_t count) const {
        V r = plus_zero(group_tree(src, count));
        if (op_ == pool_op::average)
            r = global_empty_ ? V::splat(empty_window_value<T>(p_.empty_window_nan)) : r / V::splat(static_cast<T>(global_div_));
        if (count == L) {
            vstore(r, dst);
            return;
        }
        alignas(64) T lanes[L];
        r.store(lanes);
        store_n(lanes, dst, static_cast<std::size_t>(count));
    }

    // The sums of `count` <= L consecutive planes of group_n_ values (global_group): plane i's
    // in lane i, the other lanes 0.
    V group_tree(const M* src, index_t count) const {
        const index_t n = group_n_;
        V acc[L];
        for (index_t i = 0; i < L; ++i) {
            if (i >= count) {
                acc[i] = V::splat(T(0));
                continue;
            }
            const M* x = src + i * n;
            V a = vload(x);
            index_t j = L;
            for (; j + L <= n; j += L) a = a + vload(x + j);
            if (j < n) a = a + vload(x + n - L).bit_and(V::load(tail_mask_));
            acc[i] = a;
        }
        for (index_t m = L; m > 1; m /= 2) {
            for (index_t i = 0; i < m / 2; ++i) {
                V even, odd;
                deinterleave2(acc[2 * i], acc[2 * i + 1], even, odd);
                acc[i] = even + odd;  // lanes: acc[2i]'s pair sums, then acc[2i + 1]'s
            }
        }
        return acc[0];
    }

    // The slice path (cf_slices_geometry): sums[d - d0] = the sum of first-axis slice d of a
    // plane, for d in [d0, d1), L slices at a time through group_tree, whose sum of a slice
    // does not depend on its group: run() and run_rows() give the same bits. sums has room for
    // d1 - d0 + L values.
    void slice_sums(const M* src, index_t d0, index_t d1, T* sums) const {
        for (index_t d = d0; d < d1; d += L) group_tree(src + d * group_n_, std::min(L, d1 - d)).store(sums + (d - d0));
    }

    // Output o of the slice path: its window's slice sums (in sums, from slice `base` on) added
    // in order, divided as contiguous_row divides.
    void slices_row(const T* sums, index_t base, M* dst, index_t o) const {
        const window& w0 = p_.axis(0)[o];
        const T* s = sums + (w0.first - base);
        T sum = s[0];
        for (index_t t = 1; t < w0.count; ++t) sum = sum + s[t];
        sum = sum + T(0);  // (-0 slices: the reference's sum from +0)
        sstore(op_ == pool_op::sum ? sum : sum / whole_divisor(w0), dst);
    }

    // The divisor of an output whose window covers the other axes whole (first-axis window w0).
    T whole_divisor(const window& w0) const {
        double outer = static_cast<double>(w0.divisor);
        for (std::size_t a = 1; a + 1 < R; ++a) outer *= static_cast<double>(p_.axis(a)[0].divisor);
        return p_.divisor_override > 0 ? static_cast<T>(p_.divisor_override) : static_cast<T>(outer) * last_div_[0];
    }

    // Outputs [o0, o1) of a plane through the slice path (run_rows; run() batches planes;
    // the other axes' outputs are 1, so output o of the first axis is dst[o]).
    void slices_outputs(const M* src, M* dst, index_t o0, index_t o1) const {
        const window* w = p_.axis(0);
        index_t lo = w[o0].first, hi = lo;
        for (index_t o = o0; o < o1; ++o) hi = std::max(hi, w[o].first + w[o].count);
        alignas(64) T sums[cf_slices_max + L];
        slice_sums(src, lo, hi, sums);
        for (index_t o = o0; o < o1; ++o) slices_row(sums, lo, dst + o, o);
    }

    void global(const M* src, M* dst, index_t n) const {
        const double sum = contiguous_sum(src, n);
        if (op_ == pool_op::sum) {
            sstore(static_cast<T>(sum) + T(0), dst);
            return;
        }
        sstore(global_empty_ ? empty_window_value<T>(p_.empty_window_nan) : static_cast<T>(sum / global_div_), dst);
    }

    struct buffers {
        buffers() = default;
        buffers(const buffers&) = delete;  // buf may point into buf_local
        buffers& operator=(const buffers&) = delete;
        const M* rows_local[cf_max_outer_rows];
        const M** rows = rows_local;  // an output row's input rows
        line_buffer<const M*> more_rows;  // past cf_max_outer_rows (scratch, per call)
        alignas(64) T buf_local[cf_buffer + slack + L];
        T* buf = buf_local;
        line_buffer<T> long_row;  // buf for whole rows past cf_buffer (scratch, per call)
        line_buffer<T> blocks;    // block_window_sums' scratch
        alignas(64) T even[cf_buffer / 2 + slack + L];
        alignas(64) T odd[cf_buffer / 2 + slack + L];
        const M* in_end = nullptr;  // how far vpass may over-read
    };

    bool single_tile() const noexcept { return tile_ == Wo_; }

    // A call's buffers: whole rows past cf_buffer (adaptive windows have any length, so no
    // tiling bounds them; block sums take rows whole) take a scratch row, block sums their
    // blocks' scratch.
    void prepare(buffers& b) const {
        if (buf_len_ > cf_buffer) {
            b.long_row = line_buffer<T>(static_cast<std::size_t>(buf_len_ + slack + L));
            b.buf = b.long_row.get();
        }
        const index_t taps = outer_taps<R>(p_.geometry);
        if (taps > cf_max_outer_rows) {
            b.more_rows = line_buffer<const M*>(static_cast<std::size_t>(taps));
            b.rows = b.more_rows.get();
        }
        if (blocks_) {
            // (dilated: the gathered residue rows and the tile's sums too)
            const index_t dilated = d_ == 1 ? 0 : tile_ / d_ + k_ + 1 + tile_ + L;
            b.blocks = line_buffer<T>(static_cast<std::size_t>(2 * (k_ + L) + dilated));
        }
        if (single_tile()) zero_single_tile(b);
    }

    // A single tile: every row uses the same buffer layout, so its zero padding is written
    // once for the call; the phases only at stride 2 and only as far as row() reads them
    // (half + slack: all of both took 8-17 KB of stores a call).
    void zero_single_tile(buffers& b) const noexcept {
        zero(b.buf, 0, buf_len_ + slack);
        if (s_ == 2) {
            const index_t half = (buf_len_ + 1) / 2;
            zero(b.even, 0, half + slack);
            zero(b.odd, 0, half + slack);
        }
    }

    // The output of first-axis index o when its window covers the other axes whole (i3d's
    // 2x7x7 on 8x7x7 slices): a contiguous sum, as global pooling does, divided as row()
    // divides. False (the caller runs row()) for other plans and for empty windows.
    bool contiguous_row(const M* src, M* dst, index_t o) const {
        if (contig_inner_ == 0) return false;
        const window& w0 = p_.axis(0)[o];
        if (w0.count == 0) return false;
        const T sum = static_cast<T>(contiguous_sum(src + w0.first * contig_inner_, w0.count * contig_inner_));
        if (op_ == pool_op::sum) {
            sstore(sum, dst);
            return true;
        }
        sstore(sum / whole_divisor(w0), dst);
        return true;
    }

    // One (n, c) plane: walk the output rows of the outer axes, listing each row's input rows.
    void plane(buffers& b, const M* src, M* dst) const {
        const pool_geometry<R>& g = p_.geometry;
        const M** const rows = b.rows;
        if constexpr (R == 1) {
            rows[0] = src;
            row(b, rows, 1, 1, dst, 1.0);
        } else if constexpr (R == 2) {
            for (index_t oh = 0; oh < g.output[0]; ++oh) {
                if (contiguous_row(src, dst + oh * Wo_, oh)) continue;
                const window& wh = p_.axis(0)[oh];
                for (index_t j = 0; j < wh.count; ++j) rows[j] = src + (wh.first + j * g.dilations[0]) * W_;
                row(b, rows, 1, wh.count, dst + oh * Wo_, static_cast<double>(wh.divisor));
            }
        } else {
            const index_t HW = g.input[1] * W_;
            for (index_t od = 0; od < g.output[0]; ++od) {
                const window& wd = p_.axis(0)[od];
                for (index_t oh = 0; oh < g.output[1]; ++oh) {
                    if (contiguous_row(src, dst + (od * g.output[1] + oh) * Wo_, od)) continue;
                    const window& wh = p_.axis(1)[oh];
                    for (index_t i = 0; i < wd.count; ++i)
                        for (index_t j = 0; j < wh.count; ++j)
                            rows[i * wh.count + j] =
                                src + (wd.first + i * g.dilations[0]) * HW + (wh.first + j * g.dilations[1]) * W_;
                    row(b, rows, wd.count, wh.count, dst + (od * g.output[1] + oh) * Wo_,
                        static_cast<double>(wd.divisor) * static_cast<double>(wh.divisor));
                }
            }
        }
    }

    // Vertical sum at column x of n0 groups of n1 rows; R < 3 has a single group.
    template <int N1>
    static V vsum(const M* const* rows, index_t n0, index_t n1, index_t x) noexcept {
        if constexpr (R < 3) {
            (void)n0;  // one group: R = 1 has one row, R = 2 one group of n1 rows
            V acc = vload(rows[0] + x);
            if constexpr (N1 > 0) {
                for (int j = 1; j < N1; ++j) acc = acc + vload(rows[j] + x);
            } else {
                for (index_t j = 1; j < n1; ++j) acc = acc + vload(rows[j] + x);
            }
            return acc;
        }
        return nested_vsum<T, N1>(rows, n0, n1, x);
    }
    static T vsum1(const M* const* rows, index_t n0, index_t n1, index_t x) noexcept {
        return nested_vsum1(rows, n0, n1, x);
    }

    // buf[i] = vertical sum at input column x0 + (i - i_lo), for i in [i_lo, i_hi).
    template <int N1>
    static void vpass(T* buf, index_t i_lo, index_t i_hi, const M* const* rows, index_t n0, index_t n1,
                      index_t x0, const M* in_end) noexcept {
        if constexpr (R == 3 && (N1 == 2 || N1 == 3)) {
            if (n0 == N1) return vpass_fixed<N1, N1>(buf, i_lo, i_hi, rows, x0, in_end);  // cubic
        }
        const M* const* r = rows;
        index_t i = i_lo;
        for (; i + L <= i_hi; i += L) vsum<N1>(r, n0, n1, x0 + (i - i_lo)).store(buf + i);
        vpass_tail<N1>(buf, i, i_hi, rows, n0, n1, x0 + (i - i_lo), in_end);
    }

    // vpass() for R = 3 windows of N0 x N1 rows (the cubic 2x2x2 and 3x3x3 pools), through
    // fixed_nested_vsum(): same sums in the same order.
    template <int N0, int N1>
    static void vpass_fixed(T* buf, index_t i_lo, index_t i_hi, const M* const* rows, index_t x0,
                            const M* in_end) noexcept {
        const M* r[N0 * N1];
        for (int j = 0; j < N0 * N1; ++j) r[j] = rows[j];
        index_t i = i_lo, x = x0;
        for (; i + L <= i_hi; i += L, x += L)
            fixed_nested_vsum<T, N0, N1>(r, x).store(buf + i);
        vpass_tail<N1>(buf, i, i_hi, rows, N0, N1, x, in_end);
    }

    // The last columns of vpass() from buf[i] (input column x) to i_hi, fewer than a vector.
    template <int N1>
    static void vpass_tail(T* buf, index_t i, index_t i_hi, const M* const* rows, index_t n0, index_t n1,
                           index_t x, const M* in_end) noexcept {
        const M* const* r = rows;
        if (i == i_hi) return;
        // The tail (all of a row narrower than a vector, e.g. 7x7 planes) as one vector when
        // that stays inside the input: same sums per lane; the lanes past i_hi land in the
        // buffer's zero padding, which is restored.
        const M* last = r[n0 * n1 - 1];  // rows are listed in ascending address order
        if (in_end - (last + x) >= L) {  // as a distance: no pointer past the input
            vsum<N1>(r, n0, n1, x).store(buf + i);
            zero(buf, i_hi, i + L);
            return;
        }
        for (; i < i_hi; ++i, ++x) buf[i] = vsum1(r, n0, n1, x);
    }

    // The divisor of output u of a row: the override, or the outer factor times the last
    // axis's (empty-window-adjusted) factor.
    struct row_divisor {
        bool fixed;
        V value;         // the override, or the outer factor
        const T* last;   // last-axis factors, from the tile's first output
        V at(index_t u) const noexcept { return fixed ? value : value * V::load(last + u); }
        T at1(index_t u) const noexcept { return fixed ? first(value) : first(value) * last[u]; }
        static T first(V v) noexcept {
            T tmp[V::width];
            v.store(tmp);
            return tmp[0];
        }
    };

    // One output row: tiles of output columns, each through the row buffer.
    void row(buffers& b, const M* const* rows, index_t n0, index_t n1, M* dst, double outer) const {
        const bool average = op_ == pool_op::average;
        const bool override_div = p_.divisor_override > 0;
        if (average && !override_div && outer == 0.0) {
            // The outer window counts no tap: every output of the row is empty.
            std::fill(dst, dst + Wo_, M(empty_window_value<T>(p_.empty_window_nan)));
            return;
        }
        const bool no_taps = n0 == 0 || n1 == 0;  // include_pad windows wholly in padding
        row_divisor div{override_div,
                        V::splat(static_cast<T>(override_div ? static_cast<double>(p_.divisor_override) : outer)),
                        last_div_};
        const bool single = single_tile();
        for (index_t t0 = 0; t0 < Wo_; t0 += tile_) {
            const index_t wt = std::min(tile_, Wo_ - t0);
            const index_t P0 = t0 * s_;  // padded coordinate of buf[0]
            const index_t len = p_.adaptive ? W_ : (wt - 1) * s_ + (k_ - 1) * d_ + 1;
            // buf[i] holds padded coordinate P0 + i, input column P0 + i - pb; outside the
            // input it holds 0 (written once per call for a single tile, else here).
            const index_t i_lo = std::clamp(pb_ - P0, index_t(0), len);
            const index_t i_hi = std::clamp(pb_ + W_ - P0, i_lo, len);
            if (!single) zero(b.buf, 0, i_lo);
            const index_t x0 = P0 + i_lo - pb_;
            switch (no_taps ? 0 : n1) {
                case 0: zero(b.buf, i_lo, i_hi); break;
                case 1: vpass<1>(b.buf, i_lo, i_hi, rows, n0, n1, x0, b.in_end); break;
                case 2: vpass<2>(b.buf, i_lo, i_hi, rows, n0, n1, x0, b.in_end); break;
                case 3: vpass<3>(b.buf, i_lo, i_hi, rows, n0, n1, x0, b.in_end); break;
                case 4: vpass<4>(b.buf, i_lo, i_hi, rows, n0, n1, x0, b.in_end); break;
                default: vpass<0>(b.buf, i_lo, i_hi, rows, n0, n1, x0, b.in_end); break;
            }
            if (!single) zero(b.buf, i_hi, len + slack);

            div.last = last_div_ + t0;
            M* out = dst + t0;
            if (s_ == 2) {
                const index_t half = (len + 1) / 2;
                for (index_t m = 0; m < half; m += L) {
                    V e, o;
                    deinterleave2(V::load(b.buf + 2 * m), V::load(b.buf + 2 * m + L), e, o);
                    e.store(b.even + m);
                    o.store(b.odd + m);
                }
                if (!single) {
                    zero(b.even, half, half + slack);  // past the loop's last vector
                    zero(b.odd, half, half + slack);
                }
                (this->*hpass_)(out, wt, b.even, b.odd, average, div);
            } else if (blocks_) {
                hpass_blocks(out, wt, b.buf, b.blocks.get(), average, div);
            } else {
                (this->*hpass_)(out, wt, b.buf, b.buf, average, div);
            }
        }
    }

    // buf[from, to) = 0 in whole vectors (the buffers have L elements of room past `to`):
    // the ranges are a few elements, where a memset call would cost more than the stores.
    static void zero(T* buf, index_t from, index_t to) noexcept {
        const V z = V::splat(T(0));
        for (index_t i = from; i < to; i += L) z.store(buf + i);
    }

    using hpass_fn = void (cf_kernel::*)(M*, index_t, const T*, const T*, bool, const row_divisor&) const;

    // Picks the horizontal pass once per call: unrolled for small kernels with dilation 1 at
    // stride 1 or 2, generic otherwise.
    hpass_fn pick_hpass() const noexcept {
        if (p_.adaptive) return &cf_kernel::hpass_table;
        if (d_ == 1 && (s_ == 1 || s_ == 2) && k_ <= 5) {
            const bool two = s_ == 2;
            switch (k_) {
                case 1: return two ? &cf_kernel::hpass<1, 2> : &cf_kernel::hpass<1, 1>;
                case 2: return two ? &cf_kernel::hpass<2, 2> : &cf_kernel::hpass<2, 1>;
                case 3: return two ? &cf_kernel::hpass<3, 2> : &cf_kernel::hpass<3, 1>;
                case 4: return two ? &cf_kernel::hpass<4, 2> : &cf_kernel::hpass<4, 1>;
                default: return two ? &cf_kernel::hpass<5, 2> : &cf_kernel::hpass<5, 1>;
            }
        }
        if (d_ > 1 && s_ == 1 && k_ >= 2 && k_ <= 5) {
            switch (k_) {
                case 2: return &cf_kernel::hpass_dilated<2>;
                case 3: return &cf_kernel::hpass_dilated<3>;
                case 4: return &cf_kernel::hpass_dilated<4>;
                default: return &cf_kernel::hpass_dilated<5>;
            }
        }
        if (s_ <= 2) return &cf_kernel::hpass_any;
        return &cf_kernel::hpass_scalar;
    }

    // Stride 1, K taps d_ apart: tap j of output u at ph[u + j d_] (a channels-last row of
    // few channels, flattened: d_ is the channel count). The taps unrolled, as hpass().
    template <int K>
    V taps_dilated(const T* ph, index_t u) const noexcept {
        const T* at = ph + u;
        V acc = V::load(at);
        for (int j = 1; j < K; ++j) acc = acc + V::load(at + j * d_);
        return acc;
    }
    template <int K>
    void hpass_dilated(M* out, index_t wt, const T* ph0, const T*, bool average, const row_divisor& div) const {
        index_t u = 0;
        for (; u + L <= wt; u += L) finish(out, u, taps_dilated<K>(ph0, u), average, div);
        if (u < wt) finish_tail(out, u, wt, taps_dilated<K>(ph0, u), average, div);
    }

    // Divides (for averages) and stores the outputs u .. u + L - 1, or only those below wt.
    // (+ 0: sums start from the first tap; see plus_zero.)
    static void finish(M* out, index_t u, V acc, bool average, const row_divisor& div) noexcept {
        vstore(plus_zero(average ? acc / div.at(u) : acc), out + u);
    }
    static void finish_tail(M* out, index_t u, index_t wt, V acc, bool average, const row_divisor& div) noexcept {
        vstore_n(plus_zero(average ? acc / div.at(u) : acc), out + u, wt - u);
    }

    // Dilation 1, K taps, stride S in {1, 2}: tap j of output u is at ph[j % S][u + j / S].
    template <int K, int S>
    static V taps(const T* ph0, const T* ph1, index_t u) noexcept {
        V acc = V::load(ph0 + u);
        for (int j = 1; j < K; ++j) acc = acc + V::load((j % S == 0 ? ph0 : ph1) + u + j / S);
        return acc;
    }
    template <int K, int S>
    void hpass(M* out, index_t wt, const T* ph0, const T* ph1, bool average, const row_divisor& div) const {
        index_t u = 0;
        for (; u + L <= wt; u += L) finish(out, u, taps<K, S>(ph0, ph1, u), average, div);
        if (u < wt) finish_tail(out, u, wt, taps<K, S>(ph0, ph1, u), average, div);
    }

    // Any kernel and dilation at stride 1 or 2 (ph1 is ph0 at stride 1).
    V taps_any(const T* ph0, const T* ph1, index_t u) const noexcept {
        V acc = V::load(ph0 + u);
        index_t j = 1;
        if (s_ == 1 && d_ == 1) {  // unrolled, the same sums: split loads are the bound, loop overhead not also
            const T* const at = ph0 + u;
            for (; j + 4 <= k_; j += 4)
                acc = acc + V::load(at + j) + V::load(at + j + 1) + V::load(at + j + 2) + V::load(at + j + 3);
        }
        for (; j < k_; ++j) {
            const index_t t = j * d_;
            acc = acc + (s_ == 1 ? V::load(ph0 + u + t) : V::load((t % 2 == 0 ? ph0 : ph1) + u + t / 2));
        }
        return acc;
    }
    void hpass_any(M* out, index_t wt, const T* ph0, const T* ph1, bool average, const row_divisor& div) const {
        index_t u = 0;
        for (; u + L <= wt; u += L) finish(out, u, taps_any(ph0, ph1, u), average, div);
        if (u < wt) finish_tail(out, u, wt, taps_any(ph0, ph1, u), average, div);
    }

    // Long kernels at stride 1: each output the sum of two block parts (block_window_sums;
    // dilated, per residue into the call's sums, then divided in whole vectors).
    void hpass_blocks(M* out, index_t wt, const T* buf, T* scratch, bool average, const row_divisor& div) const {
        if (d_ > 1) {
            T* const sums = scratch + 2 * (k_ + L) + tile_ / d_ + k_ + 1;
            dilated_window_sums(buf, wt, k_, d_, scratch, sums);
            index_t u = 0;
            for (; u + L <= wt; u += L) finish(out, u, V::load(sums + u), average, div);
            if (u < wt) finish_tail(out, u, wt, V::load(sums + u), average, div);
            return;
        }
        block_window_sums(buf, wt, k_, scratch, [&](index_t u0, const T* a, const T* c, index_t n) {
            index_t t = 0;
            for (; t + L <= n; t += L) finish(out, u0 + t, V::load(a + t) + V::load(c + t), average, div);
            if (t < n) finish_tail(out, u0 + t, u0 + n, V::load(a + t) + V::load(c + t), average, div);
        });
    }

    // Adaptive windows: output u sums buf[first, first + count) of its own window.
    void hpass_table(M* out, index_t wt, const T* buf, const T*, bool average, const row_divisor& div) const {
        const window* w = p_.axis(R - 1);
        for (index_t u = 0; u < wt; ++u) {
            const T* x = buf + w[u].first;
            T acc = x[0];
            if (w[u].count >= 4 * L) {  // long windows (16000 -> 100): vector sums, not a chain of adds
                acc = static_cast<T>(contiguous_sum<T>(x, w[u].count));
            } else {
                for (index_t i = 1; i < w[u].count; ++i) acc += x[i];
            }
            sstore((average ? acc / div.at1(u) : acc) + T(0), out + u);
        }
    }

    // Strides >= 3: one output at a time from the buffer (fewer outputs per input).
    void hpass_scalar(M* out, index_t wt, const T* buf, const T*, bool average, const row_divisor& div) const {
        const bool long_windows = d_ == 1 && k_ >= 4 * L;  // vector sums, not a chain of adds
        for (index_t u = 0; u < wt; ++u) {
            T acc = buf[u * s_];
            if (long_windows) {
                acc = static_cast<T>(contiguous_sum<T>(buf + u * s_, k_));
            } else {
                for (index_t j = 1; j < k_; ++j) acc += buf[u * s_ + j * d_];
            }
            sstore((average ? acc / div.at1(u) : acc) + T(0), out + u);
        }
    }

    const plan_data<R>& p_;
    pool_op op_;
    index_t W_ = 0, Wo_ = 0, s_ = 1, d_ = 1, k_ = 1, pb_ = 0, tile_ = 1, buf_len_ = 1;
    bool blocks_ = false;  // cf_blocks_geometry: hpass_blocks, not hpass_
    const T* last_div_ = nullptr;
    index_t contig_inner_ = 0;  // elements of one first-axis slice, when contiguous_row applies
    bool slices_ = false;       // cf_slices_geometry: the slice path (group_n_ = a slice's elements)
    index_t group_n_ = 0;        // plane size when global_group() applies, else 0
    double global_div_ = 1.0;  // a global plan's one divisor
    bool global_empty_ = false;
    alignas(64) T tail_mask_[L] = {};
    hpass_fn hpass_ = nullptr;
};

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_KERNEL_CF_HPP
