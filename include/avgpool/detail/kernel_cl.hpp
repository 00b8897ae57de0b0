// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The fast channels-last kernel (N[D]HWC; R = 1, 2, 3; float and double). Each spatial
// position holds C contiguous values, so SIMD runs over channels and never needs gathers.
// Work unit: one output row (fixed n and outer output coordinates). Dilation 1, no adaptive
// windows, at most cl_register_rows input rows and C >= one vector take a fused path with
// no row buffer pass (the vertical sums are formed per input column as needed):
//   - ring (K <= 5, stride 1-2, C >= 4 vectors): output columns in order, all channels of a
//     block each, the last K columns' vertical sums in a ring of the buffer; 2-D 3x3 stride 1
//     (Inception's branch pools) takes two output rows at a time where both windows are
//     whole, their four input rows read once for the two (ring_pair, AVX-512, float/double);
//   - register sliding (K <= 5, stride 1-2, fewer channels; C a multiple of the width when
//     K > 3): the column sums of a few vectors of channels slid along the row in registers;
//   - block sums (K > 5, stride 1): each window is the suffix of one block of K columns plus
//     the prefix of the next, each summed directly (van Herk / Gil-Werman); past cl_max_block
//     columns the blocks go to scratch, and the plan needs no row buffer (cl_long_blocks).
// Windows covering every axis but the first whole (global pools, i3d's 2x7x7 on 8x7x7 slices)
// with C >= one vector take the slice path: the window's slices read once in memory order,
// partial sums per axis in L1 rows (no outer-row list, so global pools of any extent).
// Everything else goes through the general path:
//   1. Vertical pass: the input rows of the window's outer taps are summed into a row buffer
//      (contiguous spans, full SIMD width, the first row loaded rather than added to zeros).
//      A row whose window has one outer tap skips the buffer and is read in place.
//   2. Horizontal pass: each output column sums its window's columns of the buffer, several
//      vector accumulators over channels in registers, then divides.
// Channels are cut into blocks so that the columns one tile of outputs needs fit the buffer
// (L1-resident). Window geometry comes only from the plan's per-axis tables (first, count);
// adaptive plans run through the same code.
// Sums are nested per axis (sum over w of sum over h of sum over d), which keeps the rounding
// error within 4 * (k_1 + ... + k_R) * eps * sum|x| (DESIGN.md section 3); divisors are the
// channels-first kernel's: the override, or outer factor times the last axis's factor, formed
// exactly in T, and a quotient correctly rounded for every normal result (quotient_by). Every
// output's arithmetic depends only on the plan and its position, never on which items run
// together, so results are bit-identical for every executor.
#ifndef AVGPOOL_DETAIL_KERNEL_CL_HPP
#define AVGPOOL_DETAIL_KERNEL_CL_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "kernel_cf.hpp"
#include "plan.hpp"
#include "reference.hpp"
#include "simd.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {


// Row buffer size in bytes: with the small temp below it stays inside a 32 KiB L1d.
constexpr index_t cl_buffer_bytes = 16384;
// Outer taps (input rows) of one output row, listed on the stack.
constexpr index_t cl_max_outer_rows = 1024;
// Up to this many input rows are summed in registers per vector; more rows go through the
// buffer four at a time, so that only a few input streams are live at once.
constexpr index_t cl_register_rows = 16;
// Elements per chunk of the many-rows vertical pass (its partial sums stay in L1).
constexpr index_t cl_chunk = 512;
// Longest last-axis kernel of the block-sum path (two blocks of column sums on the stack).
constexpr index_t cl_max_block = 32;
// Bytes of the ring path's K slots of column sums (part of the row buffer).
#ifndef AVGPOOL_CL_RING_BYTES
#define AVGPOOL_CL_RING_BYTES 16384
#endif
constexpr index_t cl_ring_bytes = AVGPOOL_CL_RING_BYTES;
// The ring path needs this many vectors of channels to pay for its per-output overhead
// (fewer: the register path slides over the row once per group of vectors).
constexpr index_t cl_ring_min_vectors = 4;
// Bytes of the input slices one first-axis output reads past which 3-D output rows run by
// columns (cl_kernel::columns_first).
constexpr index_t cl_columns_bytes = 256 * 1024;

template <class T>
constexpr index_t cl_capacity() noexcept {
    return cl_buffer_bytes / static_cast<index_t>(sizeof(T));
}

/// Measures p's windows for the channels-last kernel (once, into plan_data::cl_ext).
template <std::size_t R>
cl_extent cl_measure(const plan_data<R>& p) noexcept {
    cl_extent e;
    for (std::size_t a = 0; a + 1 < R; ++a) {
        index_t m = 0;
        const window* w = p.axis(a);
        for (index_t o = 0; o < p.geometry.output[a]; ++o) m = std::max(m, w[o].count);
        if (m > cl_max_outer_rows) {
            e.fits_rows = false;
            return e;
        }
        e.outer_rows *= m;
        if (e.outer_rows > cl_max_outer_rows) {
            e.fits_rows = false;
            return e;
        }
    }
    const window* w = p.axis(R - 1);
    const index_t d = p.geometry.dilations[R - 1];
    index_t lo = 0, hi = 0;
    bool any = false;
    for (index_t o = 0; o < p.geometry.output[R - 1]; ++o) {
        if (w[o].count == 0) continue;
        const index_t end = w[o].first + (w[o].count - 1) * d + 1;
        e.max_span = std::max(e.max_span, end - w[o].first);
        lo = any ? std::min(lo, w[o].first) : w[o].first;
        hi = any ? std::max(hi, end) : end;
        any = true;
    }
    e.span_all = any ? hi - lo : 0;
    return e;
}

/// Channel blocking: cb channels at a time (cb == C: one flat block; else a multiple of the
/// vector width, the last block shifted back to end at C, so every vector is whole).
struct cl_blocking {
    index_t cb = 0;
    bool ok = false;
};

inline cl_blocking cl_choose_blocking(index_t C, index_t span_all, index_t max_span, index_t L,
                                      index_t cap) noexcept {
    cl_blocking b;
    span_all = std::max<index_t>(span_all, 1);
    max_span = std::max<index_t>(max_span, 1);
    if (C <= cap / span_all) {  // the whole row, all channels: one block, one tile
        b.cb = C;
        b.ok = true;
        return b;
    }
    if (C <= L || C <= cap / (4 * max_span)) {
        // Narrow channels (or windows narrow enough for tiles of >= 4 outputs): every channel,
        // tiles of columns.
        b.cb = C;
        b.ok = C <= cap / max_span;
        return b;
    }
    // Blocks of channels wide enough for the whole row, else for one window at least.
    index_t cb_max = (cap / span_all) / L * L;
    if (cb_max < 4 * L) cb_max = (cap / max_span) / L * L;
    if (cb_max < L) return b;
    const index_t nb = (C + cb_max - 1) / cb_max;
    const index_t per = (C + nb - 1) / nb;
    b.cb = std::min(C, (per + L - 1) / L * L);  // balanced blocks, whole vectors
    b.ok = true;
    return b;
}

/// Whether the fused path's block sums take this plan's rows, needing no row buffer (so any
/// kernel length, where the buffer's blocking fails past a few hundred columns): stride 1,
/// dilation 1 and more than cl_max_block taps on the last axis, a vector of channels, from 1
/// to cl_register_rows input rows per output row.
template <class T, std::size_t R>
bool cl_long_blocks(const plan_data<R>& p) noexcept {
    const pool_geometry<R>& g = p.geometry;
    if (p.adaptive || g.strides[R - 1] != 1 || g.dilations[R - 1] != 1 || g.kernel[R - 1] <= cl_max_block ||
        g.output[R - 1] < 2 || p.input_shape[1] < static_cast<index_t>(vec<T>::width) ||
        p.cl_ext.outer_rows > cl_register_rows)
        return false;
    // Every output row has input rows (an outer window with none would take the row-buffer
    // path, which these plans' windows do not fit).
    for (std::size_t a = 0; a + 1 < R; ++a)
        for (index_t o = 0; o < g.output[a]; ++o)
            if (p.axis(a)[o].count == 0) return false;
    return true;
}

/// Whether the fast channels-last kernel covers this plan for element type T.
template <class T, std::size_t R>
bool cl_applicable(const plan_data<R>& p) noexcept {
    if (R > 3 || p.memory_layout != layout::channels_last) return false;
    // Divisors are formed in T: they must be exact integers there.
    if (p.max_divisor > exact_integer_limit<T>()) return false;
    constexpr index_t L = static_cast<index_t>(vec<T>::width);
    if (p.global && p.input_shape[1] >= L) return true;  // the slice path: any extents
    const cl_extent& e = p.cl_ext;
    if (!e.fits_rows) return false;
    return cl_choose_blocking(p.input_shape[1], e.span_all, e.max_span, L, cl_capacity<T>()).ok || cl_long_blocks<T, R>(p);
}

// M: the memory (storage) type of in and out (T itself, or float16 / bfloat16 for T = float: loads
// convert in registers, stores round once; every sum and divisor stays in T).
template <class T, std::size_t R, class M = T>
class cl_kernel {
    static_assert(std::is_same<compute_t<M>, T>::value, "cl_kernel: M must be T, or a 16-bit type computed in T");
    using V = vec<T>;
    static constexpr index_t L = static_cast<index_t>(V::width);
    // Vectors of 32 bytes or more and T storage: 3x3 windows prefer the register path, and at
    // stride 2 slide three vectors in it (see the constructor).
    static constexpr bool wide_groups = sizeof(T) * V::width >= 32 && std::is_same<M, T>::value;
    static constexpr index_t cap = cl_capacity<T>();
    static constexpr index_t ring_cap = cl_ring_bytes / static_cast<index_t>(sizeof(T));

public:
    /// Requires cl_applicable<T, R>(p). divide_by > 0 (with op average): every output is its
    /// sum divided by it, whatever the plan's divisors (backward's flipped sum, when every
    /// window of the pool it transposes has that one divisor).
    cl_kernel(const plan_data<R>& p, pool_op op, index_t divide_by = 0) : p_(p), op_(op), divide_by_(divide_by) {
        const pool_geometry<R>& g = p.geometry;
        N_ = p.input_shape[0];
        C_ = p.input_shape[1];
        W_ = g.input[R - 1];
        Wo_ = g.output[R - 1];
        d_ = g.dilations[R - 1];
        row_out_ = Wo_ * C_;
        rows_per_n_ = 1;
        for (std::size_t a = 0; a + 1 < R; ++a) rows_per_n_ *= g.output[a];
        in_n_ = p.input_spatial_volume() * C_;
        const cl_extent& e = p.cl_ext;
        const cl_blocking blk = cl_choose_blocking(C_, e.span_all, e.max_span, L, cap);
        cb_ = blk.ok ? blk.cb : C_;  // not ok: a global plan, which takes the slice path only
        blocks_ = cb_ == C_ ? 1 : (C_ + cb_ - 1) / cb_;
        last_ = p.axis(R - 1);
        last_div_ = p.template last_divisor<T>();
        pb_ = g.pads_begin[R - 1];
        k_ = g.kernel[R - 1];
        // 3-wide windows over whole vectors take the register path instead (AVX2, AVX-512):
        //  - AVX-512, at stride 2 always: the ring sums each window's middle column in a pass
        //    of its own through L1, and sliding three vectors of channels in registers measured
        //    0-21% faster (ShuffleNet's 3x3 s2 pools, 144-1536 channels, on a Xeon);
        //  - AVX-512, at stride 1 up to 256 bytes of channels: 64 floats 18.7 -> 13.6 us on
        //    35x35 and 54 -> 42 us on 56x56. At 512 bytes they tie, and past that the ring
        //    wins (256 floats: 81 against 93 us).
        //  - AVX2 (the same strides and widths) only while the window's rows stay in L1, or
        //    under 256 bytes of channels: its passes read 96 bytes of each column, so most
        //    lines are read by two passes, and once the K rows outgrow L1 the second read
        //    comes from L2 again. Measured on an AMD Zen 3 (32 KiB L1, 512 KiB L2), registers
        //    against the ring (medians; this machine is noisy): 3x3 s2 on 768x14x14 38 -> 26
        //    us, 64x600x600 15.6 -> 9.3 ms, 1536x7x7 15.2 -> 13.2 us, 3x3 s1 on 64x56x56
        //    130 -> 101 us; rows within L1 stayed faster in registers (64x28x28 s1, 64x17x17).
        // Not with SSE2's 16-byte vectors: up to 28% slower, the rows streamed once per 12
        // channels. Not for 16-bit storage: the ring converts two vectors per load (vpair),
        // and bfloat16 took 36-57% longer this way. Other kernel widths measured faster
        // through the ring (2x2 s2, 4x4 s2, 5x5).
        const index_t s_last = g.strides[R - 1], c_bytes = C_ * index_t(sizeof(T));
        const bool wide512 = sizeof(T) * V::width >= 64;
        const bool rows_in_l1 = c_bytes < 256 || W_ <= 32768 / 3 / c_bytes;  // three rows (k_ == 3)
        const bool registers_win = wide_groups && k_ == 3 && C_ % L == 0 &&
                                   (s_last == 2 || (s_last == 1 && c_bytes <= 256)) &&
                                   (wide512 || rows_in_l1);
        if (C_ >= cl_ring_min_vectors * L && k_ <= 5 && !registers_win) {
            // Ring blocks: K slots of at most cl_ring_bytes in all, whole vectors.
            // (Whole pairs of vectors per slot: the ring works on vpairs.)
            const index_t most = (ring_cap / k_) / (2 * L) * (2 * L);
            if (most >= 2 * L) rcb_ = balanced_block(most);
            if (rcb_ < 2 * L) rcb_ = 0;
        }
        fused_ = pick_fused();
        // Pairs of output rows through the ring (ring_pair): 3x3 stride 1 windows of float or
        // double storage in 64-byte vectors; two rings in the slots' space, so blocks half as wide.
        // Not for 16-bit storage, which reads half the bytes again: bfloat16 took 1.09-1.22x
        // its unpaired time (harness: 288x35x35, 768x17x17, 2048x8x8, 1280x8x8).
        if constexpr (R == 2 && std::is_same<M, T>::value && sizeof(T) * V::width == 64) {
            if (fused_ == &cl_kernel::ring<3, 1> && g.kernel[0] == 3 && g.strides[0] == 1 && g.dilations[0] == 1) {
                const index_t most = (ring_cap / (2 * k_)) / (2 * L) * (2 * L);
                if (most >= 2 * L) pair_cb_ = balanced_block(most);
                if (pair_cb_ < 2 * L) pair_cb_ = 0;
            }
        }
        // Windows covering every axis but the first whole (global pools; i3d's 2x7x7 on 8x7x7):
        // each output row is one output, the sum of whole first-axis slices (slices()).
        slices_ = C_ >= L && (p.global || inner_axes_whole<R>(p));
        if (slices_) {
            // R rows of partial sums in the buffer (global_level: the result and one per axis
            // but the last): blocks of whole vectors, balanced. 2048 channels of a 2-D global
            // pool are one block, read as whole rows (global_pass_rows).
            global_cb_ = balanced_block(std::max<index_t>(L, (cap / static_cast<index_t>(R)) / L * L));
        }
        by_columns_ = !slices_ && columns_first(p);
        // Rows of the row path whose taps all fit the buffer at once (most): their one tile,
        // found once here rather than by scanning the windows for every row (a quarter of a
        // 9-channel row's time). Not for plans the fused paths take: a scan per call cost as
        // much as a whole 1-D call (32 x 100, 3-wide stride 2: 150 -> 500 ns).
        if (blk.ok && fused_ == nullptr && !slices_) one_tile_ = next_tile(0, cap / cb_, tile_lo_, tile_hi_) == Wo_;
    }

    /// Output rows of the whole batch: the executor's work items.
    index_t items() const noexcept { return N_ * rows_per_n_; }

    /// Output rows item_begin .. item_end - 1 (item = n * rows_per_n + outer output index).
    void run(const M* in, M* out, index_t item_begin, index_t item_end) const {
        // (R = 3: the second-axis stride; else the first axis's, and i1 is 0.)
        const index_t WC = W_ * C_, outer = R == 3 ? p_.geometry.input[1] * WC : WC, in_n = in_n_;
        auto row_at = [in, WC, outer, in_n](index_t n, index_t i0, index_t i1) {
            return in + n * in_n + i0 * outer + i1 * WC;
        };
        if (!by_columns_) return run_rows(out, item_begin, item_end, row_at, 0, true);
        // Second-axis index outer, first-axis inner (columns_first): each output row reads
        // the slices the previous one just read. Every row is computed alone, so the bits
        // are those of the other order.
        const index_t per_n = rows_per_n_, Ho = p_.geometry.output[1], Do = per_n / Ho;
        for (index_t n = item_begin / per_n; n * per_n < item_end; ++n)
            for (index_t o1 = 0; o1 < Ho; ++o1)
                for (index_t o0 = 0; o0 < Do; ++o0) {
                    const index_t item = n * per_n + o0 * Ho + o1;
                    if (item >= item_begin && item < item_end) run_rows(out, item, item + 1, row_at);
                }
    }

    /// As run(), with input row (image n, first-axis index i0, second-axis index i1 for R = 3;
    /// 0 where the rank has no such axis) at row_at(n, i0, i1): W * C values (R = 1: the whole
    /// image). For R = 3 the rows of one (n, i0) are W * C apart: row_at(n, i0, i1) is
    /// row_at(n, i0, 0) + i1 * W * C, and only the first row of each i0 is asked for. The rows
    /// of one output row are asked for together, in order; the pointers must stay valid until
    /// the next output row's. Output row `item` goes to out + (item - out_item0) * Wo * C.
    /// pair_rows: the rows of two output rows may be asked for together (run() only; a caller's
    /// row_at may hold no more rows than one window's).
    template <class RowAt>
    void run_rows(M* out, index_t item_begin, index_t item_end, RowAt&& row_at, index_t out_item0 = 0,
                  bool pair_rows = false) const {
        buffers b;  // not zeroed: every read is of an element written before (see zero_slack)
        const M* rows[cl_max_outer_rows];
        // The geometry in locals, and the row's position counted rather than divided out: on
        // rows of a few outputs (pool_ci_3d:non_cubic, C = 16, 4 outputs a row) the per-row
        // set-up was a tenth of the time. (The stores to rows[] may alias what the plan's
        // pointers reach, so fields read through p_ were loaded again for every row.)
        const pool_geometry<R>& g = p_.geometry;
        const index_t per_n = rows_per_n_, row_out = row_out_;
        const index_t Ho = R == 3 ? g.output[1] : 1;
        const index_t dil0 = g.dilations[0], step1 = (R == 3 ? g.dilations[1] : 1) * W_ * C_;
        const window* const ax0 = p_.axis(0);
        const window* const ax1 = R == 3 ? p_.axis(1) : ax0;
        const bool by_slices = slices_;
        const bool pairs = pair_rows && pair_cb_ > 0;
        const bool weighted = R == 2 && sw0_ != nullptr;  // (then pair_cb_ > 0 and dilation 1)
        // item = n * per_n + r, r = o0 * Ho + o1 (R = 3; else o0 = r and o1 = 0).
        index_t n = item_begin / per_n, r = item_begin % per_n;
        index_t o0 = r / Ho, o1 = r % Ho;
        M* dst = out + (item_begin - out_item0) * row_out;
        for (index_t item = item_begin; item < item_end; ++item, dst += row_out) {
            if (by_slices && ax0[r].count > 0) {  // (rows_per_n == the first axis's outputs)
                slices(b, row_at(n, 0, 0), dst, ax0[r]);
            } else if constexpr (R == 1) {
                rows[0] = row_at(n, 0, 0);
                row(b, rows, 1, 1, 1.0, dst);
            } else if constexpr (R == 2) {
                const window wh = ax0[o0];
                bool paired = false;
                if (pairs && wh.count == 3 && item + 1 < item_end && r + 1 < per_n) {
                    // Output rows o0 and o0 + 1 share two of their windows' three input rows:
                    // both at once, each row read once for the two (ring_pair). Each output
                    // takes the operations it takes alone, so the bits do not depend on
                    // which rows an executor's range pairs.
                    const window wn = ax0[o0 + 1];
                    if (wn.count == 3 && wn.first == wh.first + 1 && wn.divisor == wh.divisor) {
                        for (index_t j = 0; j < 4; ++j) rows[j] = row_at(n, wh.first + j, 0);
                        if (weighted) {
                            ring_pair<true, true>(b, rows, dst, false, divisor_of(1.0), wh.first);
                        } else {
                            row_pair(b, rows, static_cast<double>(wh.divisor), dst);
                        }
                        // The first row done: the loop's step below moves past the second.
                        ++item;
                        dst += row_out;
                        ++r;
                        ++o0;
                        paired = true;
                    }
                }
                if (!paired) {
                    for (index_t j = 0; j < wh.count; ++j) rows[j] = row_at(n, wh.first + j * dil0, 0);
                    if (!weighted) {
                        row(b, rows, 1, wh.count, static_cast<double>(wh.divisor), dst);
                    } else if (wh.count > 0) {
                        ring_pair<true, false>(b, rows, dst, false, divisor_of(1.0), wh.first, wh.count);
                    } else {
                        std::fill(dst, dst + row_out, M(0));  // no output's window holds these inputs
                    }
                }
            } else {
                const window wd = ax0[o0], wh = ax1[o1];
                index_t k = 0;
                for (index_t i = 0; i < (wh.count > 0 ? wd.count : 0); ++i) {  // (no rows: ask for none)
                    const M* const first = row_at(n, wd.first + i * dil0, wh.first);
                    for (index_t j = 0; j < wh.count; ++j) rows[k++] = first + j * step1;
                }
                row(b, rows, wd.count, wh.count, static_cast<double>(wd.divisor) * static_cast<double>(wh.divisor), dst);
            }
            if (++r == per_n) {
                r = o0 = o1 = 0;
                ++n;
            } else if (++o1 == Ho) {
                o1 = 0;
                ++o0;
            }
        }
    }

    /// Whether run() takes pairs of output rows through ring_pair (2-D 3x3 stride 1).
    bool pairs_rows() const noexcept { return pair_cb_ > 0; }

    /// Backward's flipped sum of gradients whose forward windows have several divisors
    /// (exclude-pad borders): requires pairs_rows(), op sum and T storage. Source row o0,
    /// column o1 (of the gradients) is then weighed by 1 / (w0[o0].divisor w1[o1].divisor)
    /// as the rows are summed, so no pass divides the gradients first; every row goes
    /// through ring_pair, alone or paired, by the same operations. w0, w1: the forward
    /// plan's first- and last-axis windows, alive while this kernel runs.
    void weigh_sources(const window* w0, const window* w1) noexcept {
        sw0_ = w0;
        sw1_ = w1;
    }

    /// Whether run() visits 3-D output rows second axis first (columns_first).
    bool by_columns() const noexcept { return by_columns_; }

    /// Whether some output rows are made from whole first-axis slices of the image (global
    /// pools), which run_rows reads from row_at(n, 0, 0) onwards as one block.
    bool reads_slices() const noexcept { return slices_; }

private:
    // R = 3: whether run() visits output rows by second-axis index, then first. In the
    // natural order a first-axis output reads its kd input slices' rows, and the next reads
    // again those it shares, a whole pass over the slices later: past L2 they come from
    // memory twice. By columns, the next output row reads them right after. Only where the
    // second axis's windows do not overlap (else the overlap's rows would be the ones read
    // a pass apart) and the slices of one first-axis output outgrow L2's share: 1x16x60^3
    // 4x2x3 stride 2 (benchdnn's shapes_3d_4), 720-910 -> 580 us on a Zen 5 (1 MiB L2);
    // at 16x24^3 to 16x30^3 the orders tie.
    static bool columns_first(const plan_data<R>& p) noexcept {
        if constexpr (R == 3) {
            const pool_geometry<R>& g = p.geometry;
            const index_t d0 = p.adaptive ? 1 : g.dilations[0], d1 = p.adaptive ? 1 : g.dilations[1];
            // Whether some window of axis a reaches into the next one's first row.
            auto overlaps = [&](std::size_t a, index_t dil) {
                const window* const w = p.axis(a);
                for (index_t o = 0; o + 1 < g.output[a]; ++o)
                    if (w[o].count > 0 && w[o + 1].count > 0 && w[o].first + (w[o].count - 1) * dil >= w[o + 1].first)
                        return true;
                return false;
            };
            if (!overlaps(0, d0) || overlaps(1, d1)) return false;
            index_t kd = 0;
            for (index_t o = 0; o < g.output[0]; ++o) kd = std::max(kd, p.axis(0)[o].count);
            const index_t slab = kd * g.input[1] * g.input[2] * p.input_shape[1] * index_t(sizeof(M));
            return slab > cl_columns_bytes;
        } else {
            (void)p;
            return false;
        }
    }

    // Channels per block when at most `most` (whole vectors) fit: C itself, or equal blocks of
    // whole vectors (the last shifted back to end at C).
    index_t balanced_block(index_t most) const noexcept {
        const index_t nb = (C_ + most - 1) / most;
        return nb == 1 ? C_ : std::min(C_, ((C_ + nb - 1) / nb + L - 1) / L * L);
    }

    struct buffers {
        // + L: whole-vector reads past a flat block's last channel; the ring path may use more.
        alignas(64) T buf[std::max(cap, ring_cap) + L];
        alignas(64) T tmp[cl_chunk];
    };

    // The divisor of output column ow: the override, or the outer factor times the last
    // axis's (empty-window-adjusted) factor; both exact in T (cl_applicable).
    struct row_divisor {
        bool fixed;
        T value;
        const T* last;
        AVGPOOL_ALWAYS_INLINE T scalar(index_t ow) const noexcept { return fixed ? value : value * last[ow]; }
        V at(index_t ow) const noexcept { return V::splat(scalar(ow)); }
    };

    // a / d through divide_rounded (simd.hpp): the correctly rounded quotient for every normal
    // result, cheaper than a vector division (the mean of ones is 1). When d is a power of
    // two, r = 1 / d exactly, so a * r is a / d itself, rounded once: one multiply (2x2 and
    // 2x2x2 windows, k = 2, 4, 8, ...).
    struct quotient_by {
        T ds, rs;  // the divisor and its reciprocal
        V d, r;    // splatted
        bool exact;
        explicit quotient_by(T div) noexcept
            : ds(div),
              rs(div != T(0) ? T(1) / div : std::numeric_limits<T>::infinity()),
              d(V::splat(ds)),
              r(V::splat(rs)),
              exact(power_of_two(div)) {}
        // (The product + 0, as divide_rounded's result: see plus_zero.)
        AVGPOOL_ALWAYS_INLINE V operator()(V a) const noexcept { return exact ? scale_plus_zero(a, r) : divide_rounded(a, d, r); }
    };

    // The quotient for a run of outputs whose divisor rarely changes (an exclude-pad row
    // differs only near its ends): rebuilt, with its scalar reciprocal, only on a change.
    struct divider {
        T cur = T(-1);  // divisors are >= 0: the first call always builds
        quotient_by q{T(1)};
        AVGPOOL_ALWAYS_INLINE const quotient_by& operator()(T div) noexcept {
            if (AVGPOOL_UNLIKELY(div != cur)) {
                q = quotient_by(div);
                cur = div;
            }
            return q;
        }
    };

    // The divisors of a row whose outer window has the factor `outer`: the override (backward's
    // divide_by, else the plan's), or outer times the last axis's factors.
    row_divisor divisor_of(double outer) const noexcept {
        const index_t over = divide_by_ > 0 ? divide_by_ : p_.divisor_override;
        return {over > 0, static_cast<T>(over > 0 ? static_cast<double>(over) : outer), last_div_};
    }

    // One output row: channel blocks, each through tiles of output columns.
    void row(buffers& b, const M* const* rows, index_t n0, index_t n1, double outer, M* dst) const;
    // Output rows whose windows are input rows rows[0 .. 2] and rows[1 .. 3], divisor factor
    // `outer` each, into dst and dst + Wo C (pair_cb_ > 0).
    void row_pair(buffers& b, const M* const* rows, double outer, M* dst) const;

    using fused_fn = void (cl_kernel::*)(buffers&, const M* const*, index_t, index_t, M*, bool,
                                         const row_divisor&) const;

    // The fused path, dilation 1 and at least one whole vector of channels (C >= L; when C is
    // not a multiple of L the last vector is shifted back to end at C: its overlap with the
    // one before is computed twice, the same way, to the same values). No buffer: the
    // vertical sums of the window's columns are kept in registers.
    //  - Small kernels (K <= 5) at stride 1 or 2: the column sums are slid along the row
    //    (stride 1 reuses K - 1 of them per output, stride 2 K - 2).
    //  - Long kernels (K > 5) at stride 1: block sums (block_chunk).
    // Window ow covers columns ow * S - pb + t, t < K; those outside the input count as zero
    // columns, which is exactly the table's clipped window (first, count).
    fused_fn pick_fused() const noexcept;

    // The ring path (K <= 5, stride 1 or 2): output columns in order, each over every channel
    // of a block (contiguous loads and stores: the input rows stream through the prefetchers).
    // The vertical sums of the last K columns are kept in a ring of K slots of the buffer;
    // each output computes its newest column(s), stores them in the ring and adds the older
    // slots: K - 1 + 1 additions per output vector, in column order as in a direct sum.
    template <int K, int S>
    void ring(buffers& b, const M* const* rows, index_t n0, index_t n1, M* dst, bool average,
              const row_divisor& div) const {
        // R = 1 has one input row per output row: the other row counts are never compiled.
        if constexpr (R == 1) {
            ring_rows<K, S, 1, 1>(b, rows, n0, n1, dst, average, div);
        } else {
            if (n0 == 1) {
                switch (n1) {
                    case 1: return ring_rows<K, S, 1, 1>(b, rows, n0, n1, dst, average, div);
                    case 2: return ring_rows<K, S, 1, 2>(b, rows, n0, n1, dst, average, div);
                    case 3: return ring_rows<K, S, 1, 3>(b, rows, n0, n1, dst, average, div);
                    default: break;
                }
            }
            if constexpr (R == 3 && (K == 2 || K == 3)) {  // the cubic 2x2x2 and 3x3x3 pools
                if (n0 == K && n1 == K) return ring_rows<K, S, K, K>(b, rows, n0, n1, dst, average, div);
            }
            ring_rows<K, S, 0, 0>(b, rows, n0, n1, dst, average, div);
        }
    }

    // Vertical sum at element offset off (channels off .. off + L - 1 of some column): of
    // N0 x N1 rows held in r when N1 > 0, else of the list.
    template <int N0, int N1>
    struct vsource {
        const M* const* rows;
        index_t n0, n1;
        const M* r[N1 > 0 ? N0 * N1 : 1];
        AVGPOOL_ALWAYS_INLINE V operator()(index_t off) const noexcept {
            if constexpr (N1 > 0) {
                return fixed_nested_vsum<T, N0, N1>(r, off);
            } else {
                return nested_vsum<T, 0>(rows, n0, n1, off);
            }
        }
        // The same sums, two vectors' worth of channels at once (convert.hpp's vpair).
        AVGPOOL_ALWAYS_INLINE vpair<T> pair(index_t off) const noexcept {
            if constexpr (N1 > 0) {
                return fixed_nested_vsum<T, N0, N1, M, vpair<T>>(r, off);
            } else {
                return nested_vsum<T, 0, M, vpair<T>>(rows, n0, n1, off);
            }
        }
    };

    // Columns of an interior window read from the ring, the rest ("fresh") from the input.
    // The ring holds the K - S columns a window shares with the one before (K > S). When
    // S > K - S, the window's first S - (K - S) fresh columns, which the next one does not
    // share (K = 3, S = 2: the middle one), go through the ring too: summed in a pass of their
    // own, they keep the interior loop at three input streams, which measured faster than six.
    static constexpr int ring_kept(int K, int S) noexcept { return K > S ? std::max(K - S, S) : 0; }

    template <int K, int S, int N0, int N1>
    void ring_rows(buffers& b, const M* const* rows, index_t n0, index_t n1, M* dst, bool average,
                   const row_divisor& div) const {
        vsource<N0, N1> src{rows, n0, n1, {}};
        if constexpr (N1 > 0)
            for (int j = 0; j < N0 * N1; ++j) src.r[j] = rows[j];
        const index_t cb = rcb_;
        // The ring holds vpairs (two vectors' worth of channels, in vload_pair's lane order):
        // pair i / (2 L) of a slot at slot + i, for the channels from min(i, cb - 2 L) on (the
        // last pair shifted back to end at the block's end; stored at its own place, so the
        // overlap never mixes two pairs' lane orders).
        constexpr index_t P = 2 * L;
        const index_t cbp = (cb + P - 1) / P * P;  // slot stride
        T* const ring = b.buf;
        // Slot of padded column u (input column u - pb): u % K.
        auto fill = [&](index_t u, index_t c0) { ring_fill(src, ring + (u % K) * cbp, u - pb_, c0, cb, cbp); };
        constexpr int kept = ring_kept(K, S);
        constexpr int fresh = K - kept;
        constexpr int shared = K > S ? K - S : 0;  // columns a window shares with the last
        for (index_t c0 = 0;; c0 += cb) {
            c0 = std::min(c0, C_ - cb);  // the last block shifted back to end at C
            divider dvc;
            for (index_t ow = 0; ow < Wo_; ++ow) {
                const index_t ub = ow * S;  // the window's first padded column
                const index_t uf = ub + kept;  // its first column not in the ring (ow > 0)
                const index_t up = ub + shared;  // its first column not shared with the last
                M* o = dst + ow * C_ + c0;
                const quotient_by dv = dvc(average ? div.scalar(ow) : T(1));
                const index_t xf = uf - pb_;
                // Columns to add to the ring first: all but the fresh ones (the first window),
                // else the ones after those the last window shares.
                const index_t from = ow == 0 ? ub : up;
                if (xf >= 0 && xf + fresh <= W_) {
                    for (index_t u = from; u < uf; ++u) fill(u, c0);
                    // Interior: the fresh columns come straight from the input, in registers;
                    // only those the next window shares are written to the ring. The common
                    // case has its loop specialized (branches on the divisor inside it cost
                    // 10-20% on the 3x3 shapes).
                    const T* older[kept > 0 ? kept : 1] = {};  // (zeroed for GCC's -Wmaybe-uninitialized)
                    T* keep[fresh] = {};
                    for (int t = 0; t < kept; ++t) older[t] = ring + ((ub + t) % K) * cbp;
                    for (int t = 0; t < fresh; ++t) keep[t] = ring + ((uf + t) % K) * cbp;
                    const index_t off = xf * C_ + c0;
                    if (!average) {
                        ring_out<K, S, 0>(src, off, older, keep, o, cb, dv);
                    } else if (dv.exact) {
                        ring_out<K, S, 1>(src, off, older, keep, o, cb, dv);
                    } else {
                        ring_out<K, S, 2>(src, off, older, keep, o, cb, dv);
                    }
                    continue;
                }
                // A window whose fresh columns reach past the input: its columns not yet in
                // the ring are summed into it, padding as zeros, then all K are read from it.
                for (index_t u = from; u < ub + K; ++u) fill(u, c0);
                const T* all[K];
                for (int t = 0; t < K; ++t) all[t] = ring + ((ub + t) % K) * cbp;
                ring_edge<K>(all, o, cb, average, dv);
            }
            if (c0 + cb >= C_) break;
        }
    }

    // ring_rows<3, 1, 1, 3> for two output rows at once (R = 2, 3x3 stride 1): the windows'
    // four input rows are each read once for both, the fresh columns of both rows summed from
    // the same loads; each row keeps its own ring (slots of pair_cb_ channels). Every output
    // takes the additions, in the same order, and the quotient it takes in ring_rows, so the
    // bits are the same whichever rows run paired. Unpaired, each input row is read for three
    // output rows, from L2 or L3 by then: bench A/B on a Zen 5, Inception's 3x3 pools (192-768
    // channels at 35x35 and 17x17, 2048 at 8x8) 0.78-0.90x their time; 1280x8x8 (in L2)
    // 1.03-1.06x in a harness. Pairing the register path's rows (3x3 at row stride 1 or 2,
    // fewer channels) was slower, 1.02-1.34x at stride 2 and 1.36-1.59x at stride 1: its
    // second row's column sums leave too few registers.
    // Both rows' vertical sums at element offset j from four loads: ((q0 + q1) + q2) and
    // ((q1 + q2) + q3), as fixed_nested_vsum adds a window's rows.
    AVGPOOL_ALWAYS_INLINE static void pair_column(const M* q0, const M* q1, const M* q2, const M* q3, index_t j,
                                                  vpair<T>& va, vpair<T>& vb) noexcept {
        const vpair<T> l0 = vload_as<vpair<T>>(q0 + j), l1 = vload_as<vpair<T>>(q1 + j);
        const vpair<T> l2 = vload_as<vpair<T>>(q2 + j), l3 = vload_as<vpair<T>>(q3 + j);
        va = l0 + l1 + l2;
        vb = l1 + l2 + l3;
    }

    // Weighted (weigh_sources): each column's vertical sum weighs its rows, source row i0 + j
    // (j < n) by 1 / (d0 d1) of its output (weight()), in one chain of fused multiply-adds
    // from the first row; Two: rows j and j + 1 .. 3 (both outputs), else only the first
    // output, of n rows. A row takes the same operations whether it runs paired or not.
    AVGPOOL_ALWAYS_INLINE static V weigh_add(const V& l, const V& w, const V& acc) noexcept {
        if constexpr (has_fused_mul_add<T>()) {
            return fused_mul_add(l, w, acc);
        } else {
            return l * w + acc;
        }
    }
    template <bool Two>
    AVGPOOL_ALWAYS_INLINE static void weighted_column(const M* const* q, index_t n, const V* w, index_t j,
                                                      vpair<T>& va, vpair<T>& vb) noexcept {
        if constexpr (Two) {
            const vpair<T> l0 = vload_as<vpair<T>>(q[0] + j), l1 = vload_as<vpair<T>>(q[1] + j);
            const vpair<T> l2 = vload_as<vpair<T>>(q[2] + j), l3 = vload_as<vpair<T>>(q[3] + j);
            va = {weigh_add(l2.a, w[2], weigh_add(l1.a, w[1], l0.a * w[0])),
                  weigh_add(l2.b, w[2], weigh_add(l1.b, w[1], l0.b * w[0]))};
            vb = {weigh_add(l3.a, w[3], weigh_add(l2.a, w[2], l1.a * w[1])),
                  weigh_add(l3.b, w[3], weigh_add(l2.b, w[2], l1.b * w[1]))};
        } else {
            const vpair<T> l0 = vload_as<vpair<T>>(q[0] + j);
            va = {l0.a * w[0], l0.b * w[0]};
            for (index_t t = 1; t < n; ++t) {
                const vpair<T> l = vload_as<vpair<T>>(q[t] + j);
                va = {weigh_add(l.a, w[t], va.a), weigh_add(l.b, w[t], va.b)};
            }
            (void)vb;
        }
    }
    // The weight of source row o0, column o1: 1 / (d0[o0] d1[o1]) (0 for an empty window,
    // which no input's flipped window reaches).
    T weight(index_t o0, index_t o1) const noexcept {
        const index_t d = sw0_[o0].divisor * sw1_[o1].divisor;
        return d > 0 ? static_cast<T>(1.0 / static_cast<double>(d)) : T(0);
    }

    template <bool Weighted = false, bool Two = true>
    void ring_pair(buffers& b, const M* const* rows, M* dst, bool average, const row_divisor& div,
                   index_t i0 = 0, index_t n = 4) const {
        constexpr int K = 3, S = 1;
        const index_t cb = pair_cb_;
        constexpr index_t P = 2 * L;
        const index_t cbp = (cb + P - 1) / P * P;
        T* const ra = b.buf;
        T* const rb = b.buf + K * cbp;
        M* const dst2 = dst + row_out_;
        constexpr int kept = ring_kept(K, S);  // 2
        constexpr int shared = K - S;          // 2
        const index_t C = C_;
        V w[4];  // Weighted: the rows' weights at the current column
        auto weigh = [&](index_t x) {
            if constexpr (Weighted)
                for (index_t j = 0; j < n; ++j) w[j] = V::splat(weight(i0 + j, x));
        };
        // Both rows' slots of padded column u, from the same four loads (as the fresh columns).
        auto fill = [&](index_t u, index_t c0) {
            T* const fa = ra + (u % K) * cbp;
            T* const fb = rb + (u % K) * cbp;
            const index_t x = u - pb_;
            if (x < 0 || x >= W_) {
                std::fill(fa, fa + cbp, T(0));
                if constexpr (Two) std::fill(fb, fb + cbp, T(0));
                return;
            }
            const index_t off = x * C + c0;
            weigh(x);
            for (index_t i = 0; i < cb; i += P) {
                vpair<T> va, vb;
                if constexpr (Weighted) {
                    weighted_column<Two>(rows, n, w, off + std::min(i, cb - P), va, vb);
                } else {
                    pair_column(rows[0], rows[1], rows[2], rows[3], off + std::min(i, cb - P), va, vb);
                }
                va.a.store(fa + i);
                va.b.store(fa + i + L);
                if constexpr (Two) {
                    vb.a.store(fb + i);
                    vb.b.store(fb + i + L);
                }
            }
        };
        for (index_t c0 = 0;; c0 += cb) {
            c0 = std::min(c0, C_ - cb);
            divider dvc;
            for (index_t ow = 0; ow < Wo_; ++ow) {
                const index_t ub = ow * S, uf = ub + kept, up = ub + shared;
                const quotient_by dv = dvc(average ? div.scalar(ow) : T(1));
                const index_t xf = uf - pb_;
                const index_t from = ow == 0 ? ub : up;
                M* const oa = dst + ow * C + c0;
                M* const ob = dst2 + ow * C + c0;
                if (xf >= 0 && xf + 1 <= W_) {
                    for (index_t u = from; u < uf; ++u) fill(u, c0);
                    const T* const a0 = ra + (ub % K) * cbp;
                    const T* const a1 = ra + ((ub + 1) % K) * cbp;
                    const T* const b0 = rb + (ub % K) * cbp;
                    const T* const b1 = rb + ((ub + 1) % K) * cbp;
                    T* const ak = ra + (uf % K) * cbp;
                    T* const bk = rb + (uf % K) * cbp;
                    // (Weighted: rows past n are not set; weighted_column reads only n.)
                    const M* const q0 = Weighted ? nullptr : rows[0];
                    const M* const q1 = Weighted ? nullptr : rows[1];
                    const M* const q2 = Weighted ? nullptr : rows[2];
                    const M* const q3 = Weighted ? nullptr : rows[3];
                    const index_t off = xf * C + c0;
                    const V d = V::splat(dv.ds), rr = V::splat(dv.rs);
                    weigh(xf);
                    // Div: 0 the sum, 1 times the exact reciprocal, 2 the corrected quotient
                    // (as ring_out; a branch per vector cost 10-20% there).
                    auto columns = [&](auto div_kind) AVGPOOL_INLINE_LAMBDA {
                    constexpr int mode = decltype(div_kind)::value;
                    for (index_t i = 0; i < cb; i += P) {
                        const index_t j = std::min(i, cb - P);
                        vpair<T> fa, fb;  // the fresh column of both rows
                        if constexpr (Weighted) {
                            weighted_column<Two>(rows, n, w, off + j, fa, fb);
                        } else {
                            pair_column(q0, q1, q2, q3, off + j, fa, fb);
                        }
                        fa.a.store(ak + i);
                        fa.b.store(ak + i + L);
                        if constexpr (Two) {
                            fb.a.store(bk + i);
                            fb.b.store(bk + i + L);
                        }
                        auto finish = [&](const vpair<T>& v) AVGPOOL_INLINE_LAMBDA {
                            vpair<T> q = v;
                            if constexpr (mode == 0) {
                                q = {plus_zero(v.a), plus_zero(v.b)};
                            } else if constexpr (mode == 1) {
                                q = {scale_plus_zero(v.a, rr), scale_plus_zero(v.b, rr)};
                            } else {
                                q = {divide_rounded(v.a, d, rr), divide_rounded(v.b, d, rr)};
                            }
                            return q;
                        };
                        const vpair<T> sa2 = finish(ring_load(a0, i) + ring_load(a1, i) + fa);
                        if constexpr (Two) {
                            const vpair<T> sb2 = finish(ring_load(b0, i) + ring_load(b1, i) + fb);
                            vstore_pair(sa2, oa + j);
                            vstore_pair(sb2, ob + j);
                        } else {
                            vstore_pair(sa2, oa + j);
                        }
                    }
                    };
                    if (!average) {
                        columns(std::integral_constant<int, 0>{});
                    } else if (dv.exact) {
                        columns(std::integral_constant<int, 1>{});
                    } else {
                        columns(std::integral_constant<int, 2>{});
                    }
                    continue;
                }
                for (index_t u = from; u < ub + K; ++u) fill(u, c0);
                const T* alla[K];
                const T* allb[K];
                for (int t = 0; t < K; ++t) {
                    alla[t] = ra + ((ub + t) % K) * cbp;
                    allb[t] = rb + ((ub + t) % K) * cbp;
                }
                ring_edge<K>(alla, oa, cb, average, dv);
                if constexpr (Two) ring_edge<K>(allb, ob, cb, average, dv);
            }
            if (c0 + cb >= C_) break;
        }
    }

    // The ring slot of input column x (zeros outside the input): its vertical sums, channels
    // c0 .. c0 + cb - 1, as vpairs. (A member, not a lambda, so that it can be forced inline:
    // GCC made the lambda a call for 16-bit storage, 16% of the 3x3 stride-2 time.)
    template <class Src>
    AVGPOOL_ALWAYS_INLINE void ring_fill(const Src& src, T* slot, index_t x, index_t c0, index_t cb,
                                         index_t cbp) const noexcept {
        constexpr index_t P = 2 * L;
        if (x < 0 || x >= W_) {
            std::fill(slot, slot + cbp, T(0));
            return;
        }
        const index_t off = x * C_ + c0;
        for (index_t i = 0; i < cb; i += P) {
            const vpair<T> v = src.pair(off + std::min(i, cb - P));
            v.a.store(slot + i);
            v.b.store(slot + i + L);
        }
    }

    // A window's sum from its K column sums, in column order as in a direct sum.
    template <int K>
    AVGPOOL_ALWAYS_INLINE static vpair<T> ring_sum(const vpair<T>* col) noexcept {
        vpair<T> acc = col[0];
        unrolled<K - 1>([&](auto t) { acc = acc + col[t + 1]; });
        return acc;
    }
    AVGPOOL_ALWAYS_INLINE static vpair<T> ring_load(const T* slot, index_t i) noexcept {
        return {V::load(slot + i), V::load(slot + i + L)};
    }

    // One interior output of the ring path: its `kept` older column sums from the ring, its
    // `fresh` newest ones from the input (src at element offset off, one column apart), the
    // ones the next window shares stored into their slots; then Div = 0: the sum; 1: times
    // the exact reciprocal of a power-of-two divisor (the correctly rounded quotient);
    // 2: the corrected quotient.
    template <int K, int S, int Div, class Src>
    AVGPOOL_ALWAYS_INLINE void ring_out(const Src& src, index_t off, const T* const* older, T* const* keep, M* o,
                                        index_t cb, const quotient_by& dv) const noexcept {
        constexpr int kept = ring_kept(K, S);
        constexpr int fresh = K - kept;
        constexpr index_t P = 2 * L;
        // Locals: the row pointers and the divisor in registers, not re-read each iteration
        // (the stores below could alias what a reference points to).
        const Src s = src;
        const V d = V::splat(dv.ds), r = V::splat(dv.rs);
        const index_t C = C_;
        for (index_t i = 0; i < cb; i += P) {
            const index_t j = std::min(i, cb - P);
            vpair<T> col[K];
            unrolled<kept>([&](auto t) { col[t] = ring_load(older[t], i); });
            unrolled<fresh>([&](auto t) {
                col[kept + t] = s.pair(off + t * C + j);
                // Shared with the next window: padded column >= its first, ub + S.
                if constexpr (kept + t >= S) {
                    col[kept + t].a.store(keep[t] + i);
                    col[kept + t].b.store(keep[t] + i + L);
                }
            });
            vpair<T> acc = ring_sum<K>(col);
            if constexpr (Div == 0) acc = {plus_zero(acc.a), plus_zero(acc.b)};  // (see plus_zero)
            if constexpr (Div == 1) acc = {scale_plus_zero(acc.a, r), scale_plus_zero(acc.b, r)};
            if constexpr (Div == 2) acc = {divide_rounded(acc.a, d, r), divide_rounded(acc.b, d, r)};
            vstore_pair(acc, o + j);
        }
    }

    // A window whose fresh columns reach past the input: all K column sums from the ring
    // (padding columns hold zeros).
    template <int K>
    void ring_edge(const T* const* all, M* o, index_t cb, bool average, const quotient_by& dv) const noexcept {
        constexpr index_t P = 2 * L;
        for (index_t i = 0; i < cb; i += P) {
            vpair<T> col[K];
            unrolled<K>([&](auto t) { col[t] = ring_load(all[t], i); });
            vpair<T> acc = ring_sum<K>(col);
            acc = average ? vpair<T>{dv(acc.a), dv(acc.b)} : vpair<T>{plus_zero(acc.a), plus_zero(acc.b)};
            vstore_pair(acc, o + std::min(i, cb - P));
        }
    }

    // K = 0: the block-sum path for kernel k_.
    template <int K, int S>
    void fused(buffers&, const M* const* rows, index_t n0, index_t n1, M* dst, bool average,
               const row_divisor& div) const {
        // Vectors of channels per pass (G * K column sums in registers): 3 for 3-wide windows
        // at stride 2 (which the ring path leaves to this one), else 2.
        constexpr index_t G = wide_groups && K == 3 && S == 2 ? 3 : 2;
        // Groups of G vectors, then a pair (G = 3), then what is left: L + 1 .. 2 L - 1
        // channels as one pair whose second vector is shifted back to end at C (C = 17 or 24:
        // one pass over the row, not two), else single vectors (the last shifted back too).
        // Overlapping channels are computed twice by the same operations, so stored twice
        // alike. Row pointers in registers for the common row counts (fixed N0 x N1), else
        // nested loops.
        auto fixed = [&](auto n0c, auto n1c) {
            constexpr int N0 = decltype(n0c)::value, N1 = decltype(n1c)::value;
            index_t c = 0;
            for (; c + G * L <= C_; c += G * L) chunk<K, S, G, N0, N1>(rows, c, dst, average, div);
            if constexpr (G > 2) {
                if (c + 2 * L <= C_) {
                    chunk<K, S, 2, N0, N1>(rows, c, dst, average, div);
                    c += 2 * L;
                }
            }
            if (C_ - c > L) {  // L + 1 .. 2 L - 1 left: one pair, its second vector shifted back
                chunk<K, S, 2, N0, N1>(rows, c, dst, average, div, C_ - c - L);
                return;
            }
            for (; c < C_; c += L) chunk<K, S, 1, N0, N1>(rows, std::min(c, C_ - L), dst, average, div);
        };
        using one = std::integral_constant<int, 1>;
        if constexpr (R == 1) {  // one input row per output row (as in ring)
            fixed(one{}, one{});
        } else {
            if (n0 == 1) {
                switch (n1) {
                    case 1: return fixed(one{}, one{});
                    case 2: return fixed(one{}, std::integral_constant<int, 2>{});
                    case 3: return fixed(one{}, std::integral_constant<int, 3>{});
                    default: break;
                }
            }
            if constexpr (R == 3 && (K == 2 || K == 3)) {  // the cubic 2x2x2 and 3x3x3 pools
                if (n0 == K && n1 == K) return fixed(std::integral_constant<int, K>{}, std::integral_constant<int, K>{});
            }
            index_t c = 0;
            for (; c + G * L <= C_; c += G * L) nested_chunk<K, S, G>(rows, n0, n1, c, dst, average, div);
            if constexpr (G > 2) {
                if (c + 2 * L <= C_) {
                    nested_chunk<K, S, 2>(rows, n0, n1, c, dst, average, div);
                    c += 2 * L;
                }
            }
            if (C_ - c > L) {
                nested_chunk<K, S, 2>(rows, n0, n1, c, dst, average, div, C_ - c - L);
                return;
            }
            for (; c < C_; c += L) nested_chunk<K, S, 1>(rows, n0, n1, std::min(c, C_ - L), dst, average, div);
        }
    }

    // Vertical sums of input column x, channels c + g * gap (g < G; gap is L but for a
    // shifted pair), into out[g], from N0 x N1 rows (N0 = 1: one outer tap; N0 = N1 = K:
    // R = 3 cubic windows), nested as nested_vsum:
    // the row pointers, already offset by c, live in registers (fixed_nested_vsum).
    // Zero outside the input. (Results are written through a pointer, not returned in a
    // struct: GCC moved such structs of vectors through memory in pieces.)
    template <int G, int N0, int N1>
    struct rows_source {
        const M* r[N0 * N1];
        index_t C, W, gap;
        AVGPOOL_ALWAYS_INLINE void operator()(index_t x, V* out) const noexcept {
            if (x < 0 || x >= W) {
                for (int g = 0; g < G; ++g) out[g] = V::splat(T(0));
                return;
            }
            const index_t off = x * C;
            for (int g = 0; g < G; ++g) out[g] = fixed_nested_vsum<T, N0, N1>(r, off + g * gap);
        }
    };
    // The same for any n0, n1 (the nested sum over both outer axes).
    template <int G>
    struct nested_source {
        const M* const* rows;
        index_t n0, n1, c, C, W, gap;
        AVGPOOL_ALWAYS_INLINE void operator()(index_t x, V* out) const noexcept {
            if (x < 0 || x >= W) {
                for (int g = 0; g < G; ++g) out[g] = V::splat(T(0));
                return;
            }
            const index_t off = x * C + c;
            for (int g = 0; g < G; ++g) out[g] = nested_vsum<T, 0>(rows, n0, n1, off + g * gap);
        }
    };

    template <int K, int S, int G, int N0, int N1>
    void chunk(const M* const* rows, index_t c, M* dst, bool average, const row_divisor& div, index_t gap = L) const {
        rows_source<G, N0, N1> src;
        for (int j = 0; j < N0 * N1; ++j) src.r[j] = rows[j] + c;
        src.C = C_;
        src.W = W_;
        src.gap = gap;
        chunk_from<K, S, G>(src, c, dst, average, div);
    }
    template <int K, int S, int G>
    void nested_chunk(const M* const* rows, index_t n0, index_t n1, index_t c, M* dst, bool average,
                      const row_divisor& div, index_t gap = L) const {
        const nested_source<G> src{rows, n0, n1, c, C_, W_, gap};
        chunk_from<K, S, G>(src, c, dst, average, div);
    }

    template <int K, int S, int G, class Src>
    void chunk_from(const Src& src, index_t c, M* dst, bool average, const row_divisor& div) const {
        if constexpr (K == 0) {
            block_chunk<G>(src, c, dst, average, div);
        } else {
            slide_chunk<K, S, G>(src, c, dst, average, div);
        }
    }

    // Stores output ow of the chunk (channels c ..), divided when averaging.
    template <int G>
    AVGPOOL_ALWAYS_INLINE void emit(M* dst, index_t ow, index_t c, index_t gap, const V* a, bool average,
                                    const row_divisor& div, divider& dvc) const noexcept {
        M* o = dst + ow * C_ + c;
        if (average) {
            const quotient_by dv = dvc(div.scalar(ow));
            for (int g = 0; g < G; ++g) vstore(dv(a[g]), o + g * gap);
        } else {
            for (int g = 0; g < G; ++g) vstore(plus_zero(a[g]), o + g * gap);  // (see plus_zero)
        }
    }

    template <int K, int S, int G, class Src>
    void slide_chunk(const Src& source, index_t c, M* dst, bool average, const row_divisor& divisor) const {
        // 3-D rows (up to K x K row pointers): the source in a local and the loops over taps
        // and vectors unrolled, else GCC kept the columns in memory and read the row pointers
        // again after every store (harness on a Zen 5, -O3: pool_ci_3d non_cubic
        // channels-last 0.83x its time, 1x16x60^3 4x2x3 stride 2 0.79x; bench 0.82x and
        // 0.75x). Not for 1-D and 2-D rows: at -O3 that made 3x3 stride 2 slower (576x7x7
        // 1.22x, 16x50x50 1.09x), though at -O2 faster (0.94x, 0.60x); their loops are only
        // unrolled (AVGPOOL_UNROLL: 0.72-0.85x at -O2, 0.8-1.0x at -O3).
        // The divisor in a local: a store of an output may alias its float member, so through
        // the reference it was read again for every output (harness medians, -O3, Zen 5:
        // 0.97x on pool_ci_3d regular, 0.98x on pool_ci_1d ic_tail and 24x56x56 3x3 s2).
        const row_divisor div = divisor;
        if constexpr (R == 3) {
            const Src src = source;
            const index_t Wo = Wo_, gap = src.gap;
            constexpr int keep = K > S ? K - S : 0;
            V col[K][G];
            index_t x0 = -pb_;
            unrolled<K>([&](auto t) { src(x0 + t, col[t]); });
            divider dvc;
            for (index_t ow = 0;;) {
                V acc[G];
                unrolled<G>([&](auto g) {
                    acc[g] = col[0][g];
                    unrolled<K - 1>([&](auto t) { acc[g] = acc[g] + col[t + 1][g]; });
                });
                emit<G>(dst, ow, c, gap, acc, average, div, dvc);
                if (++ow == Wo) break;
                x0 += S;
                unrolled<keep>([&](auto t) { unrolled<G>([&](auto g) { col[t][g] = col[t + S][g]; }); });
                unrolled<K - keep>([&](auto t) { src(x0 + keep + t, col[keep + t]); });
            }
        } else {
            const Src& src = source;
            V col[K][G];
            index_t x0 = -pb_;
            AVGPOOL_UNROLL for (int t = 0; t < K; ++t) src(x0 + t, col[t]);
            divider dvc;
            for (index_t ow = 0;;) {
                V acc[G];
                AVGPOOL_UNROLL for (int g = 0; g < G; ++g) {
                    acc[g] = col[0][g];
                    AVGPOOL_UNROLL for (int t = 1; t < K; ++t) acc[g] = acc[g] + col[t][g];
                }
                emit<G>(dst, ow, c, src.gap, acc, average, div, dvc);
                if (++ow == Wo_) break;
                x0 += S;
                AVGPOOL_UNROLL for (int t = 0; t + S < K; ++t)
                    AVGPOOL_UNROLL for (int g = 0; g < G; ++g) col[t][g] = col[t + S][g];
                AVGPOOL_UNROLL for (int t = K - S < 0 ? 0 : K - S; t < K; ++t) src(x0 + t, col[t]);
            }
        }
    }

    // Long windows at stride 1 (van Herk / Gil-Werman blocks): the padded row's columns
    // u = x + pb are cut into blocks of K. Window ow covers u in [ow, ow + K): all of block
    // ow / K when ow % K == 0, else the suffix of block ow / K from u = ow plus the prefix of
    // the next block up to ow + K - 1. Each part is summed directly (suffixes backwards,
    // prefixes forwards, restarting at every block), then the two parts are added: about
    // three additions per output instead of K - 1, no running add/subtract, and every tap
    // goes through at most K - 1 additions, as in a direct sum. Each input column's vertical
    // sum is formed once.
    template <int G, class Src>
    void block_chunk(const Src& source, index_t c, M* dst, bool average, const row_divisor& div) const {
        const Src src = source;  // (in registers: see slide_chunk)
        const index_t K = k_;
        V buf0[cl_max_block][G], buf1[cl_max_block][G];
        V(*cur)[G] = buf0;  // raw columns of block b, then (in place) their suffix sums
        V(*nxt)[G] = buf1;  // raw columns of block b + 1
        line_buffer<T> longer;  // past cl_max_block columns: both blocks in scratch
        if (K > cl_max_block) {
            longer = line_buffer<T>(static_cast<std::size_t>(2 * K * G * L));
            V* const v = reinterpret_cast<V*>(longer.get());  // (64-byte aligned)
            for (index_t i = 0; i < 2 * K * G; ++i) ::new (static_cast<void*>(v + i)) V();
            cur = reinterpret_cast<V(*)[G]>(v);
            nxt = reinterpret_cast<V(*)[G]>(v + K * G);
        }
        for (index_t t = 0; t < K; ++t) src(t - pb_, cur[t]);
        divider dvc;
        for (index_t b0 = 0; b0 < Wo_; b0 += K) {
            for (index_t t = K - 1; t-- > 0;)
                for (int g = 0; g < G; ++g) cur[t][g] = cur[t][g] + cur[t + 1][g];
            emit<G>(dst, b0, c, src.gap, cur[0], average, div, dvc);
            const index_t u1 = b0 + K;  // first column of the next block
            const index_t tn = std::min(K, Wo_ - b0);
            V pre[G] = {}, out[G];  // pre: set at t = 1 (zeroed for GCC's -Wmaybe-uninitialized)
            for (index_t t = 1; t < tn; ++t) {
                src(u1 + t - 1 - pb_, nxt[t - 1]);
                for (int g = 0; g < G; ++g) {
                    pre[g] = t == 1 ? nxt[0][g] : pre[g] + nxt[t - 1][g];
                    out[g] = cur[t][g] + pre[g];
                }
                emit<G>(dst, b0 + t, c, src.gap, out, average, div, dvc);
            }
            if (u1 >= Wo_) break;
            for (index_t t = std::max<index_t>(tn - 1, 0); t < K; ++t) src(u1 + t - pb_, nxt[t]);
            std::swap(cur, nxt);
        }
    }

    // Windows covering every axis but the first whole, C >= one vector: the output row is one
    // output, the sum over the first-axis window's slices (global pools: every slice). They
    // are read once, in memory order, with the sums nested per axis as in the row path (the
    // sum over the first axis of the sums over the next ...), their partial sums in
    // L1-resident rows of the buffer. The last axis is summed in one pass straight into the row
    // above it (global_pass_sum).
    // Channel blocks (when R rows of partial sums do not fit the buffer) are read as
    // contiguous pieces. Vector v of a block reads channels min(v L, cb - L) .. + L - 1 (the
    // last shifted back to end at cb) but owns slot v L of every row of partial sums, so that
    // overlapping lanes are summed twice, separately, to the same values. There is no
    // outer-row list, so any number of input rows is fine.

    void slices(buffers& b, const M* src, M* dst, const window& w0) const;

    // out = (first ? 0 : out) + the nested sum over spatial axes A .. R - 1 of the block at p,
    // axis 0 over n0 taps (dilated). Row k of the partial sums is at sums + k nv L: row 0 the
    // result, row A + 1 axis A's own.
    template <std::size_t A>
    void global_level(T* sums, const M* p, index_t nv, index_t cb, T* out, bool first, index_t n0 = 0) const noexcept {
        const index_t n = A == 0 ? n0 : p_.geometry.input[A];
        if constexpr (A + 1 == R) {
            (void)sums;
            if (first) global_pass_sum<false>(p, n, nv, cb, out);
            else global_pass_sum<true>(p, n, nv, cb, out);
        } else {
            T* own = sums + static_cast<index_t>(A + 1) * nv * L;
            index_t step = A == 0 ? C_ * p_.geometry.dilations[0] : C_;
            for (std::size_t a = A + 1; a < R; ++a) step *= p_.geometry.input[a];
            for (index_t i = 0; i < n; ++i) global_level<A + 1>(sums, p + i * step, nv, cb, own, i == 0);
            for (index_t v = 0; v < nv; ++v) {
                const V s = V::load(own + v * L);
                (first ? s : V::load(out + v * L) + s).store(out + v * L);
            }
        }
    }

    // Per vector v: s = the sum of positions q, q + C, .., q + (m - 1) C, then tgt = s, or with
    // Add tgt += s (blocks of more than 2 global_vectors vectors: tgt (with Add) + position 0
    // + position 1 + ..., left to right, global_pass_rows). Up to global_vectors vectors at a
    // time, position by position: each
    // position's channels are read in memory order, as many sums in flight (and two per
    // vector, even and odd positions, for up to four vectors: one add's latency a position).
    // Before, a vector at a time over passes of 8 positions: 96x56x56 took 9.7 us, a third
    // more than a plain read of the same bytes.
    static constexpr index_t global_vectors = 8;

    template <bool Add>
    void global_pass_sum(const M* q, index_t m, index_t nv, index_t cb, T* tgt) const noexcept {
        if (nv > 2 * global_vectors) {
            global_pass_rows<Add>(q, m, nv, cb, tgt);
            return;
        }
        for (index_t v0 = 0; v0 < nv; v0 += global_vectors) {
            switch (std::min(global_vectors, nv - v0)) {
                case 1: global_block<1, Add>(q, m, v0, cb, tgt); break;
                case 2: global_block<2, Add>(q, m, v0, cb, tgt); break;
                case 3: global_block<3, Add>(q, m, v0, cb, tgt); break;
                case 4: global_block<4, Add>(q, m, v0, cb, tgt); break;
                case 5: global_block<5, Add>(q, m, v0, cb, tgt); break;
                case 6: global_block<6, Add>(q, m, v0, cb, tgt); break;
                case 7: global_block<7, Add>(q, m, v0, cb, tgt); break;
                default: global_block<8, Add>(q, m, v0, cb, tgt); break;
            }
        }
    }

    // Blocks of more than two register blocks: tgt[v] += position t's vector v, position by
    // position, so the input is read as one stream of whole rows (of cb channels). Register
    // blocks read cb / (global_vectors L) interleaved streams, lines a row apart (8 KB at
    // 2048 channels), which the prefetchers served at about half the rate of one stream
    // (prototype, 2048 channels, 64 positions: 4.5 us, one stream 3.1, a plain read of the
    // bytes 2.5). Up to two register blocks stay in registers: one L1 load and store per
    // input vector cost more there (144 channels, 28 x 28: 1.16x).
    template <bool Add>
    void global_pass_rows(const M* q, index_t m, index_t nv, index_t cb, T* tgt) const noexcept {
        const index_t C = C_;
        for (index_t t = 0; t < m; ++t) {
            const M* x = q + t * C;
            index_t v = 0;
            for (; v + 1 < nv; ++v) {
                const V s = vload(x + v * L);
                (Add || t > 0 ? V::load(tgt + v * L) + s : s).store(tgt + v * L);
            }
            const V s = vload(x + (cb - L));  // the last vector ends at cb (see slices())
            (Add || t > 0 ? V::load(tgt + v * L) + s : s).store(tgt + v * L);
        }
    }

    template <int U, bool Add>
    void global_block(const M* q, index_t m, index_t v0, index_t cb, T* tgt) const noexcept {
        const index_t C = C_;
        const M* x[U];
        V s[U], s2[U];
        unrolled<U>([&](auto u) {
            x[u] = q + std::min((v0 + u) * L, cb - L);
            s[u] = vload(x[u]);
        });
        if (U <= 4 && m >= 2) {
            unrolled<U>([&](auto u) { s2[u] = vload(x[u] + C); });
            index_t t = 2;
            for (; t + 1 < m; t += 2) {
                unrolled<U>([&](auto u) {
                    s[u] = s[u] + vload(x[u] + t * C);
                    s2[u] = s2[u] + vload(x[u] + (t + 1) * C);
                });
            }
            unrolled<U>([&](auto u) {
                if (t < m) s[u] = s[u] + vload(x[u] + t * C);
                s[u] = s[u] + s2[u];
            });
        } else {
            for (index_t t = 1; t < m; ++t) unrolled<U>([&](auto u) { s[u] = s[u] + vload(x[u] + t * C); });
        }
        unrolled<U>([&](auto u) {
            T* at = tgt + (v0 + u) * L;
            (Add ? V::load(at) + s[u] : s[u]).store(at);
        });
    }

    template <int N1>
    static void vsum_regs(T* dst, const M* const* rows, index_t n0, index_t n1, index_t off, index_t len) noexcept {
        index_t i = 0;
        for (; i + L <= len; i += L) nested_vsum<T, N1>(rows, n0, n1, off + i).store(dst + i);
        for (; i < len; ++i) dst[i] = nested_vsum1(rows, n0, n1, off + i);
    }

    // vsum_regs() of N0 x N1 rows, their pointers copied to registers (fixed_nested_vsum):
    // the same sums in the same order.
    template <int N0, int N1>
    static void vsum_fixed(T* dst, const M* const* rows, index_t off, index_t len) noexcept {
        const M* r[N0 * N1];
        for (int j = 0; j < N0 * N1; ++j) r[j] = rows[j];
        index_t i = 0;
        for (; i + L <= len; i += L) fixed_nested_vsum<T, N0, N1>(r, off + i).store(dst + i);
        for (; i < len; ++i) dst[i] = nested_vsum1(rows, N0, N1, off + i);
    }

    // dst[i] = nested sum of rows[.][off + i], i < len (n0, n1 >= 1).
    void vsum(buffers& b, T* dst, const M* const* rows, index_t n0, index_t n1, index_t off, index_t len) const {
        if (n0 * n1 <= cl_register_rows) {
            if constexpr (R == 3) {
                // 3-D windows of 2-3 x 2-4 rows (2x2x2, 3x3x3, 2x4x3 and their clipped edges):
                // the generic loop reloaded the row pointers for every vector.
                if (n0 == 2 || n0 == 3) {
                    const int key = static_cast<int>(n0 * 8 + n1);
                    switch (key) {
                        case 2 * 8 + 2: vsum_fixed<2, 2>(dst, rows, off, len); return;
                        case 2 * 8 + 3: vsum_fixed<2, 3>(dst, rows, off, len); return;
                        case 2 * 8 + 4: vsum_fixed<2, 4>(dst, rows, off, len); return;
                        case 3 * 8 + 2: vsum_fixed<3, 2>(dst, rows, off, len); return;
                        case 3 * 8 + 3: vsum_fixed<3, 3>(dst, rows, off, len); return;
                        default: break;
                    }
                }
            }
            if (n0 == 1) {
                switch (n1) {
                    case 1: vsum_regs<1>(dst, rows, n0, n1, off, len); return;
                    case 2: vsum_regs<2>(dst, rows, n0, n1, off, len); return;
                    case 3: vsum_regs<3>(dst, rows, n0, n1, off, len); return;
                    case 4: vsum_regs<4>(dst, rows, n0, n1, off, len); return;
                    default: break;
                }
            }
            vsum_regs<0>(dst, rows, n0, n1, off, len);
            return;
        }
        // Many rows (global pooling, tall windows): four rows at a time into the buffer, by
        // chunks, so that few input streams are live and the partial sums stay in L1. The
        // inner sum of each group i goes to tmp first to keep the per-axis nesting.
        for (index_t c = 0; c < len; c += cl_chunk) {
            const index_t m = std::min(cl_chunk, len - c);
            for (index_t i = 0; i < n0; ++i) {
                T* tgt = i == 0 ? dst + c : b.tmp;
                const M* const* r = rows + i * n1;
                for (index_t j = 0; j < n1; j += 4) add_rows(tgt, r + j, std::min<index_t>(4, n1 - j), off + c, m, j > 0);
                if (i > 0) add_into(dst + c, b.tmp, m);
            }
        }
    }

    // tgt[i] (+)= r[0][x + i] + ... + r[g - 1][x + i], i < m, g in 1..4.
    static void add_rows(T* tgt, const M* const* r, index_t g, index_t x, index_t m, bool accumulate) noexcept {
        index_t i = 0;
        for (; i + L <= m; i += L) {
            V s = vload(r[0] + x + i);
            for (index_t j = 1; j < g; ++j) s = s + vload(r[j] + x + i);
            if (accumulate) s = V::load(tgt + i) + s;
            s.store(tgt + i);
        }
        for (; i < m; ++i) {
            T s = sload(r[0][x + i]);
            for (index_t j = 1; j < g; ++j) s += sload(r[j][x + i]);
            tgt[i] = accumulate ? tgt[i] + s : s;
        }
    }
    static void add_into(T* dst, const T* src, index_t m) noexcept {
        index_t i = 0;
        for (; i + L <= m; i += L) (V::load(dst + i) + V::load(src + i)).store(dst + i);
        for (; i < m; ++i) dst[i] += src[i];
    }

    // Stores a vector of outputs at o; only `room` elements belong to this row from o on.
    // Elements past cb but inside the row belong to later columns (or channel blocks) of the
    // row, written after this one: whole stores there are overwritten, so only the row end
    // needs a partial store.
    static void put(M* o, index_t room, V v) noexcept {
        if (room >= L) {
            vstore(v, o);
        } else {
            vstore_n(v, o, room);
        }
    }

    // Outputs o0 .. o1 - 1 of channel block c0: column x of the source is at
    // base + (x - x_lo) * pitch (the row buffer, or the input row itself).
    // (base: T for the buffer, M for an input row read in place.)
    template <class B>
    void hpass(const B* base, index_t pitch, index_t x_lo, index_t o0, index_t o1, index_t c0, M* dst, bool average,
               const row_divisor& div) const {
        const index_t step = d_ * pitch;
        divider dvc;
        for (index_t ow = o0; ow < o1; ++ow) {
            const window& w = last_[ow];
            const index_t at = ow * C_ + c0;
            M* o = dst + at;
            const index_t room = row_out_ - at;
            if (w.count == 0) {
                const V z = average ? V::splat(T(0)) / div.at(ow) : V::splat(T(0));
                for (index_t i = 0; i < cb_; i += L) put(o + i, room - i, z);
                continue;
            }
            const B* x = base + (w.first - x_lo) * pitch;
            const index_t k = w.count;
            const quotient_by dv = dvc(average ? div.scalar(ow) : T(1));
            index_t i = 0;
            for (; i + 4 * L <= cb_; i += 4 * L) {
                const B* p = x + i;
                V a0 = vload(p), a1 = vload(p + L), a2 = vload(p + 2 * L), a3 = vload(p + 3 * L);
                for (index_t t = 1; t < k; ++t) {
                    p += step;
                    a0 = a0 + vload(p);
                    a1 = a1 + vload(p + L);
                    a2 = a2 + vload(p + 2 * L);
                    a3 = a3 + vload(p + 3 * L);
                }
                if (average) {
                    a0 = dv(a0);
                    a1 = dv(a1);
                    a2 = dv(a2);
                    a3 = dv(a3);
                } else {  // (see plus_zero)
                    a0 = plus_zero(a0);
                    a1 = plus_zero(a1);
                    a2 = plus_zero(a2);
                    a3 = plus_zero(a3);
                }
                vstore(a0, o + i);
                vstore(a1, o + i + L);
                vstore(a2, o + i + 2 * L);
                vstore(a3, o + i + 3 * L);
            }
            for (; i < cb_; i += L) {
                const B* p = x + i;
                V a = vload(p);
                for (index_t t = 1; t < k; ++t) {
                    p += step;
                    a = a + vload(p);
                }
                put(o + i, room - i, average ? dv(a) : plus_zero(a));
            }
        }
    }

    // The longest run of outputs from o0 whose taps fit `cols` columns of the buffer (any
    // window alone does): returns its end, and sets [lo, hi), the input columns it reads.
    index_t next_tile(index_t o0, index_t cols, index_t& lo_out, index_t& hi_out) const noexcept {
        index_t o1 = o0, lo = 0, hi = 0;  // (locals: the references may be members)
        bool any = false;
        for (; o1 < Wo_; ++o1) {
            const window& w = last_[o1];
            if (w.count == 0) continue;
            const index_t end = w.first + (w.count - 1) * d_ + 1;
            const index_t nlo = any ? std::min(lo, w.first) : w.first;
            const index_t nhi = any ? std::max(hi, end) : end;
            if (nhi - nlo > cols) break;
            lo = nlo;
            hi = nhi;
            any = true;
        }
        lo_out = lo;
        hi_out = hi;
        return o1;
    }

    // hpass() of a row narrower than a vector (cb_ == C_ < L, the row buffer): one vector an
    // output, stored whole over the next output's channels (written after it); whole windows of
    // K taps unrolled. The same sums in the same order, and the same quotients.
    template <int K>
    void hpass_narrow(const T* base, index_t x_lo, index_t o0, index_t o1, M* dst, bool average,
                      const row_divisor& div) const {
        const index_t C = C_, step = d_ * C;
        divider dvc;
        for (index_t ow = o0; ow < o1; ++ow) {
            const window& w = last_[ow];
            M* o = dst + ow * C;
            const index_t room = row_out_ - ow * C;
            if (w.count == 0) {
                put(o, room, average ? V::splat(T(0)) / div.at(ow) : V::splat(T(0)));
                continue;
            }
            const T* x = base + (w.first - x_lo) * C;
            V a = vload(x);
            if (K > 0 && w.count == K) {
                for (int t = 1; t < K; ++t) a = a + vload(x + t * step);
            } else {
                for (index_t t = 1; t < w.count; ++t) a = a + vload(x + t * step);
            }
            put(o, room, average ? dvc(div.scalar(ow))(a) : plus_zero(a));
        }
    }

    const plan_data<R>& p_;
    pool_op op_;
    index_t divide_by_ = 0;  // > 0: the one divisor of every output (constructor)
    index_t N_ = 0, C_ = 0, W_ = 0, Wo_ = 0, d_ = 1, row_out_ = 0, rows_per_n_ = 1, in_n_ = 0;
    index_t cb_ = 1, blocks_ = 1, pb_ = 0, k_ = 1;
    index_t rcb_ = 0;  // channels per block of the ring path (0: not used)
    index_t pair_cb_ = 0;  // channels per block of ring_pair (0: rows are not paired)
    const window* sw0_ = nullptr;  // weigh_sources: the source rows' and columns' windows
    const window* sw1_ = nullptr;
    fused_fn fused_ = nullptr;
    bool slices_ = false;    // the slice path (slices())
    bool by_columns_ = false;  // run(): second-axis-major order (columns_first)
    bool one_tile_ = false;    // row(): one tile of columns [tile_lo_, tile_hi_) takes the row
    index_t tile_lo_ = 0, tile_hi_ = 0;
    index_t global_cb_ = 0;  // channels per block of the slice path
    const window* last_ = nullptr;
    const T* last_div_ = nullptr;
};

// Defined out of the class, so not inline: the entry points into the kernel's code (the
// constructor chooses the fused path through pick_fused). AVGPOOL_EXTERN_TEMPLATES declares
// them extern, so a translation unit that only constructs and runs a kernel, as the 16-bit
// backward runs float's, does not generate that code again.

template <class T, std::size_t R, class M>
auto cl_kernel<T, R, M>::pick_fused() const noexcept -> fused_fn {
    const pool_geometry<R>& g = p_.geometry;
    if (p_.adaptive || d_ != 1 || C_ < L) return nullptr;
    const index_t k = g.kernel[R - 1], s = g.strides[R - 1];
    if (s == 1 && k > 5 && Wo_ >= 2) return &cl_kernel::fused<0, 1>;
    if (s != 1 && s != 2) return nullptr;
    const bool two = s == 2;
    if (rcb_ > 0) {
        switch (k) {
            case 1: return two ? &cl_kernel::ring<1, 2> : &cl_kernel::ring<1, 1>;
            case 2: return two ? &cl_kernel::ring<2, 2> : &cl_kernel::ring<2, 1>;
            case 3: return two ? &cl_kernel::ring<3, 2> : &cl_kernel::ring<3, 1>;
            case 4: return two ? &cl_kernel::ring<4, 2> : &cl_kernel::ring<4, 1>;
            case 5: return two ? &cl_kernel::ring<5, 2> : &cl_kernel::ring<5, 1>;
            default: break;
        }
    }
    // Channels not a multiple of the width: the last vector is shifted back to end at C,
    // its overlap computed twice to the same values. That beats the row-buffer path for
    // windows up to 3 wide (17-24 channels, AVX-512: 17-36% less time; SSE2 6 channels
    // 38%), not for 4x4 at stride 2 (35% more).
    if (C_ % L != 0 && k > 3) return nullptr;
    switch (k) {
        case 1: return two ? &cl_kernel::fused<1, 2> : &cl_kernel::fused<1, 1>;
        case 2: return two ? &cl_kernel::fused<2, 2> : &cl_kernel::fused<2, 1>;
        case 3: return two ? &cl_kernel::fused<3, 2> : &cl_kernel::fused<3, 1>;
        case 4: return two ? &cl_kernel::fused<4, 2> : &cl_kernel::fused<4, 1>;
        case 5: return two ? &cl_kernel::fused<5, 2> : &cl_kernel::fused<5, 1>;
        default: return nullptr;
    }
}

template <class T, std::size_t R, class M>
void cl_kernel<T, R, M>::row(buffers& b, const M* const* rows, index_t n0, index_t n1, double outer, M* dst) const {
    const bool average = op_ == pool_op::average;
    const row_divisor div = divisor_of(outer);
    if (average && !div.fixed && outer == 0.0) {
        // The outer window counts no tap: every output of the row is empty.
        std::fill(dst, dst + row_out_, M(empty_window_value<T>(p_.empty_window_nan)));
        return;
    }
    const index_t nrows = n0 * n1;
    if (fused_ != nullptr && nrows >= 1 && nrows <= cl_register_rows) {
        (this->*fused_)(b, rows, n0, n1, dst, average, div);
        return;
    }
    // One input row and whole vectors only: read it in place.
    const bool direct = nrows == 1 && (cb_ < C_ || C_ % L == 0);
    const index_t cols_cap = cap / cb_;
    for (index_t blk = 0; blk < blocks_; ++blk) {
        const index_t c0 = std::min(blk * cb_, C_ - cb_);
        if (direct) {
            hpass(rows[0] + c0, C_, 0, 0, Wo_, c0, dst, average, div);
            continue;
        }
        for (index_t o0 = 0; o0 < Wo_;) {
            index_t lo = tile_lo_, hi = tile_hi_;
            const index_t o1 = o0 == 0 && one_tile_ ? Wo_ : next_tile(o0, cols_cap, lo, hi);
            const index_t len = (hi - lo) * cb_;
            if (nrows == 0) {
                std::fill(b.buf, b.buf + len, T(0));  // include-pad rows wholly in padding
            } else if (cb_ == C_) {
                vsum(b, b.buf, rows, n0, n1, lo * C_, len);
            } else {
                for (index_t x = lo; x < hi; ++x) vsum(b, b.buf + (x - lo) * cb_, rows, n0, n1, x * C_ + c0, cb_);
            }
            // Whole-vector reads of a flat block's last column reach up to L - 1 past it.
            std::fill(b.buf + len, b.buf + len + L, T(0));
            if (C_ < L) {
                switch (k_) {
                    case 2: hpass_narrow<2>(b.buf, lo, o0, o1, dst, average, div); break;
                    case 3: hpass_narrow<3>(b.buf, lo, o0, o1, dst, average, div); break;
                    case 4: hpass_narrow<4>(b.buf, lo, o0, o1, dst, average, div); break;
                    default: hpass_narrow<0>(b.buf, lo, o0, o1, dst, average, div); break;
                }
            } else {
                hpass(b.buf, cb_, lo, o0, o1, c0, dst, average, div);
            }
            o0 = o1;
        }
    }
}

template <class T, std::size_t R, class M>
void cl_kernel<T, R, M>::row_pair(buffers& b, const M* const* rows, double outer, M* dst) const {
    ring_pair(b, rows, dst, op_ == pool_op::average, divisor_of(outer));
}

template <class T, std::size_t R, class M>
void cl_kernel<T, R, M>::slices(buffers& b, const M* src, M* dst, const window& w0) const {
    const index_t cb = global_cb_, nv = (cb + L - 1) / L;
    const bool average = op_ == pool_op::average;
    T div = T(1);
    if (average) {
        // The outer axes' factors (R = 1: none; the last axis's is last_div_), the inner
        // outer axis (R = 3) having one window.
        double outer = R == 1 ? 1.0 : static_cast<double>(w0.divisor);
        for (std::size_t a = 1; a + 1 < R; ++a) outer *= static_cast<double>(p_.axis(a)[0].divisor);
        const index_t over = divide_by_ > 0 ? divide_by_ : p_.divisor_override;
        div = over > 0 ? static_cast<T>(over) : static_cast<T>(outer) * last_div_[0];
    }
    const quotient_by dv(div);
    const M* first = src + w0.first * (in_n_ / p_.geometry.input[0]);  // first-axis slices
    for (index_t c0 = 0;; c0 += cb) {
        c0 = std::min(c0, C_ - cb);
        global_level<0>(b.buf, first + c0, nv, cb, b.buf, true, w0.count);
        for (index_t v = 0; v < nv; ++v) {
            const V a = V::load(b.buf + v * L);
            vstore(average ? dv(a) : plus_zero(a), dst + c0 + std::min(v * L, cb - L));
        }
        if (c0 + cb >= C_) break;
    }
}

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_KERNEL_CL_HPP
