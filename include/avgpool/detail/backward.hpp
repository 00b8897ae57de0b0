// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The backward pass (PyTorch's semantics): every output gradient, divided by exactly the
// forward divisor, is added to each input tap of its window; padding receives nothing; inputs
// no window covers get 0; grad_in is overwritten. It is the transpose of the forward sum and
// runs on the same window tables: the reference gathers each input's shares through the
// transposed (cover) tables (any rank, either layout, any element type); the channels-first
// kernel (backward_cf) transposes the forward kernel's separable sum and writes each input
// row once.
#ifndef AVGPOOL_DETAIL_BACKWARD_HPP
#define AVGPOOL_DETAIL_BACKWARD_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernel_cf.hpp"
#include "kernel_cl.hpp"
#include "plan.hpp"
#include "simd.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

/// Reference: gathers, for each input, the shares of the outputs whose windows tap it
/// (through the per-axis cover tables), summed as the forward reference sums (reference_sum)
/// and stored once. Any rank, either layout, any element type (16-bit storage is rounded
/// once).
template <class T, std::size_t R>
void reference_backward(const plan_data<R>& p, const T* grad_out, T* grad_in, index_t item_begin,
                        index_t item_end) {
    const dims<R + 2> in_st = element_strides<R>(p.input_shape, p.memory_layout);
    const dims<R + 2> out_st = element_strides<R>(p.output_shape, p.memory_layout);
    const index_t C = p.input_shape[1];
    const index_t in_volume = p.input_spatial_volume();
    const reference_axes<R> ax(p, in_st, out_st);
    const index_t *ist = ax.in_stride, *ost = ax.out_stride, *ish = ax.in_shape, *dil = ax.dilation;
    const window* const* table = ax.table;
    for (index_t item = item_begin; item < item_end; ++item) {
        const index_t n = item / C, c = item % C;
        T* gi = grad_in + n * in_st[0] + c * in_st[1];
        const T* go = grad_out + n * out_st[0] + c * out_st[1];
        index_t x[R] = {};  // input position, odometer order
        window cover[R];    // per axis, the outputs reaching x[a] (updated as x[a] moves)
        for (std::size_t a = 0; a < R; ++a) cover[a] = p.cover(a, 0);
        for (index_t flat = 0; flat < in_volume; ++flat) {
            const window* cv[R];
            bool none = false;
            index_t in_off = 0;
            for (std::size_t a = 0; a < R; ++a) {
                cv[a] = cover + a;
                none = none || cv[a]->count == 0;
                in_off += x[a] * ist[a];
            }
            reference_sum<T> acc;
            if (!none) {
                index_t t[R] = {};  // offsets into each axis's candidate outputs
                for (;;) {
                    // Output (cv[a]->first + t[a])_a takes this input if it has a tap at x on
                    // every axis.
                    const window* w[R];
                    bool tap = true;
                    index_t out_off = 0;
                    for (std::size_t a = 0; a < R && tap; ++a) {
                        const index_t o = cv[a]->first + t[a];
                        w[a] = table[a] + o;
                        const index_t rel = x[a] - w[a]->first;
                        tap = rel >= 0 && rel % dil[a] == 0 && rel / dil[a] < w[a]->count;
                        out_off += o * ost[a];
                    }
                    if (tap) {
                        bool empty = false;
                        const double div = window_divisor<R>(p, w, empty);
                        if (!empty) acc.add(to_double(go[out_off]) / div);
                    }
                    std::size_t a = R;
                    while (a-- > 0) {
                        if (++t[a] < cv[a]->count) break;
                        t[a] = 0;
                    }
                    if (a == static_cast<std::size_t>(-1)) break;  // every counter wrapped
                }
            }
            gi[in_off] = from_double<T>(acc.value());
            for (std::size_t a = R; a-- > 0;) {
                const bool carry = ++x[a] == ish[a];
                if (carry) x[a] = 0;
                cover[a] = p.cover(a, x[a]);
                if (!carry) break;
            }
        }
    }
}

// Most output rows whose gradients one input row gathers (the product over the outer axes of
// the outputs covering it); larger outer kernels take the reference path.
constexpr index_t bw_max_rows = 256;
// Elements of the ring of expanded output rows (a row per covering output, for R = 3 a plane
// of rows per covering outer output); plans whose ring does not fit take the per-row path.
constexpr index_t bw_ring = 4096;

/// The most outputs of axis a whose window span reaches any one input (the cover tables'
/// largest count): a bound on the output rows one input row gathers.
template <std::size_t R>
index_t max_cover(const plan_data<R>& p, std::size_t a) noexcept {
    return p.cover_max[a];
}

// Plans whose backward row tables would pass this many outer rows, or this many taps (bounded
// by rows times the largest cover of each outer axis), build them per call instead of keeping
// them: plan memory and creation time stay bounded (review: 65536 rows of 16x16 covers made a
// 346 MB, 0.47 s plan), and such planes cost far more than the build.
constexpr index_t bw_table_rows = 65536;
constexpr index_t bw_table_taps = index_t(1) << 18;

/// Calls fn(o, divisor factor) for each output of outer axis a with a tap at input x.
template <std::size_t R, class Fn>
void backward_taps(const plan_data<R>& p, std::size_t a, index_t x, Fn&& fn) {
    const window cv = p.cover(a, x);
    const window* w = p.axis(a);
    const index_t d = p.geometry.dilations[a];
    if (d == 1) {  // every output whose span reaches x taps it (and no idiv below)
        for (index_t o = cv.first; o < cv.first + cv.count; ++o) fn(o, w[o].divisor);
        return;
    }
    for (index_t o = cv.first; o < cv.first + cv.count; ++o) {
        const index_t rel = x - w[o].first;
        if (rel < 0 || rel % d != 0 || rel / d >= w[o].count) continue;
        fn(o, w[o].divisor);
    }
}

/// Per input column x of the last axis, the outputs whose windows tap it, ascending:
/// cols[col_at[x] .. col_at[x + 1]).
template <std::size_t R>
void build_backward_cols(const plan_data<R>& p, std::vector<index_t>& cols, std::vector<index_t>& col_at) {
    const index_t W = p.geometry.input[R - 1];
    col_at.assign(static_cast<std::size_t>(W + 1), 0);
    std::size_t total = 0;  // counted first: growing the list copied it (a third of a 1-D plan's making)
    for (index_t x = 0; x < W; ++x) backward_taps<R>(p, R - 1, x, [&](index_t, index_t) { ++total; });
    cols.reserve(total);
    for (index_t x = 0; x < W; ++x) {
        col_at[static_cast<std::size_t>(x)] = static_cast<index_t>(cols.size());
        backward_taps<R>(p, R - 1, x, [&](index_t o, index_t) { cols.push_back(o); });
    }
    col_at[static_cast<std::size_t>(W)] = static_cast<index_t>(cols.size());
}

/// The plan's facts for backward_cl from its column lists and row tables (plan_data's
/// bw_col_*, bw_walk, bw_home): built after build_backward_cols and the row tables.
template <std::size_t R>
void build_backward_cl_facts(const plan_data<R>& p) {
    backward_tables<R>& b = p.bwd_mut();
    const index_t W = p.geometry.input[R - 1], Wo = p.geometry.output[R - 1];
    const index_t *const col = b.bw_cols.data(), *const col_at = b.bw_col_at.data();
    bool ranges = true, scatter = true, rising = true;
    index_t span = 0;
    for (index_t x = 0, top = -1; x < W; ++x) {
        const index_t first = col_at[x], n = col_at[x + 1] - first;
        for (index_t i = first + 1; i < first + n; ++i) ranges = ranges && col[i] == col[i - 1] + 1;
        scatter = scatter && n <= 1;
        span = std::max(span, n);
        if (n == 0) continue;
        rising = rising && col[first] + n - 1 >= top;
        top = col[first] + n - 1;
    }
    b.bw_col_ranges = ranges;
    b.bw_col_scatter = scatter;
    b.bw_col_span = span;
    b.bw_walk.clear();
    // (Only where backward_cl may slide: that also needs a vector of channels, and the
    // narrowest vector is double's.)
    if (ranges && span <= 3 && rising && p.input_shape[1] >= static_cast<index_t>(vec<double>::width)) {
        b.bw_walk.assign(static_cast<std::size_t>(Wo + W), 0);
        index_t *const emit = b.bw_walk.data(), *const taps = emit + Wo;
        // Output column o completes the input columns whose last tapping column is o, and the
        // untapped ones before the next tapped column.
        for (index_t o = 0, x = 0; o < Wo; ++o) {
            const index_t from = x;
            for (; x < W; ++x) {
                const index_t first = col_at[x], n = col_at[x + 1] - first;
                if (n > 0 && col[first] + n - 1 != o) break;  // its last column is still to come
                taps[x] = n;
            }
            emit[o] = x - from;
        }  // (x reaches W: rising, every tapped column ends by Wo - 1)
    }
    b.bw_home.clear();
    b.bw_homes = 0;
    if (!b.bw_rows.empty()) {
        index_t in_rows = 1, out_rows = 1;  // outer rows of an image
        for (std::size_t a = 0; a + 1 < R; ++a) {
            in_rows *= p.geometry.input[a];
            out_rows *= p.geometry.output[a];
        }
        b.bw_home.assign(static_cast<std::size_t>(out_rows), -1);
        for (index_t r = in_rows; r-- > 0;) {
            const bw_row& row = b.bw_rows[static_cast<std::size_t>(r)];
            if (row.n == 1) b.bw_home[static_cast<std::size_t>(b.bw_taps[static_cast<std::size_t>(row.first)].q)] = r;
        }
        for (const index_t h : b.bw_home) b.bw_homes += h >= 0 ? 1 : 0;
    }
    b.bw_rows_paired = false;
    if constexpr (R == 2) {
        if (!b.bw_rows.empty()) {
            // (Without pads, two rows at each end do not pair.)
            const bw_tap* const taps = b.bw_taps.data();
            const bw_row* const rows = b.bw_rows.data();
            const index_t in_rows = p.geometry.input[0];
            index_t alone = 0;
            bool consecutive = true;
            for (index_t y = 0; y < in_rows && consecutive; ++y) {
                const bw_row& row = rows[y];
                consecutive = row.n <= 3;
                for (index_t t = 1; t < row.n; ++t) consecutive = consecutive && taps[row.first + t].q == taps[row.first].q + t;
                if (row.n == 2 && y + 1 < in_rows && rows[y + 1].n == 1 && taps[rows[y + 1].first].q == taps[row.first].q + 1) {
                    ++y;
                    continue;
                }
                alone += row.n > 0;
            }
            b.bw_rows_paired = consecutive && alone <= 4;
        }
    }
    b.bw_halves.clear();
    if constexpr (R == 3) {
        if (!b.bw_rows.empty()) {
            const index_t H = p.geometry.input[1], Ho = p.geometry.output[1];
            const index_t in_rows = p.geometry.input[0] * H;
            const bw_tap* const taps = b.bw_taps.data();
            const bw_row* const rows = b.bw_rows.data();
            b.bw_halves.assign(static_cast<std::size_t>(in_rows), 0);
            for (index_t r = 0; r < in_rows; ++r) {
                const bw_row& row = rows[r];
                if (row.n != 2 && row.n != 4) continue;
                const bw_tap* const t = taps + row.first;
                const index_t k = row.n / 2;
                if (t[0].o0 == t[k].o0 || t[0].o0 != t[k - 1].o0 || t[k].o0 != t[row.n - 1].o0) continue;
                bool same = true;  // the halves' second-axis outputs
                for (index_t j = 0; j < k; ++j) same = same && t[j].q - t[j].o0 * Ho == t[k + j].q - t[k + j].o0 * Ho;
                if (!same) continue;
                unsigned char code = static_cast<unsigned char>(k);
                if (r >= H && r + H < in_rows && rows[r - H].n == k && rows[r + H].n == k) {
                    bool held = true;
                    for (index_t j = 0; j < k; ++j)
                        held = held && taps[rows[r - H].first + j].q == t[j].q && taps[rows[r + H].first + j].q == t[k + j].q;
                    if (held) code = static_cast<unsigned char>(code | 4);
                }
                b.bw_halves[static_cast<std::size_t>(r)] = code;
            }
        }
    }
}

/// backward_cf's row tables: for each outer input row, the outer output rows that tap it
/// (first-axis outputs outer, as the cover tables order them) and an earlier row with the same
/// ones. (Any vectors: the plan's, or a call's own on scratch_allocator, each reserved once to
/// its bound so that a warm call allocates nothing.)
template <std::size_t R, class TapVec, class RowVec>
void build_backward_rows(const plan_data<R>& p, TapVec& taps, RowVec& rows) {
    const pool_geometry<R>& g = p.geometry;
    taps.clear();
    rows.clear();
    index_t most_rows = 1, most_taps = 1;
    for (std::size_t a = 0; a + 1 < R; ++a) {
        most_rows *= g.input[a];
        most_taps *= max_cover<R>(p, a);
    }
    rows.reserve(static_cast<std::size_t>(most_rows));
    taps.reserve(static_cast<std::size_t>(most_rows * most_taps));
    if constexpr (R == 2) {
        for (index_t x = 0; x < g.input[0]; ++x) {
            const index_t first = static_cast<index_t>(taps.size());
            backward_taps<R>(p, 0, x, [&](index_t o, index_t f) { taps.push_back({o, o, f}); });
            rows.push_back({first, static_cast<index_t>(taps.size()) - first, same_taps_as_previous<R>(p, 0, x) ? x - 1 : -1});
        }
    } else if constexpr (R == 3) {
        const index_t H = g.input[1], Ho = g.output[1];
        using out_div = std::pair<index_t, index_t>;
        std::vector<out_div, scratch_allocator<out_div>> zs;  // first-axis outputs and divisors
        zs.reserve(static_cast<std::size_t>(max_cover<R>(p, 0)));
        for (index_t z = 0; z < g.input[0]; ++z) {
            zs.clear();
            backward_taps<R>(p, 0, z, [&](index_t o, index_t f) { zs.emplace_back(o, f); });
            const bool same_z = same_taps_as_previous<R>(p, 0, z);
            for (index_t y = 0; y < H; ++y) {
                const index_t first = static_cast<index_t>(taps.size()), r = z * H + y;
                for (const auto& t : zs)  // exact: the products are at most max_divisor
                    backward_taps<R>(p, 1, y, [&](index_t o, index_t f) { taps.push_back({t.first, t.first * Ho + o, t.second * f}); });
                // A slab that repeats the previous one copies it whole (walk's one run of H rows),
                // rather than alternating row and slab copies of one row each.
                const index_t copy = same_z ? r - H : same_taps_as_previous<R>(p, 1, y) ? r - 1 : -1;
                rows.push_back({first, static_cast<index_t>(taps.size()) - first, copy});
            }
        }
    }
}

/// Whether one input row gathers at most bw_max_rows output rows (the product over the outer
/// axes of the most outputs covering one input), as both backward kernels list them.
template <std::size_t R>
bool backward_rows_fit(const plan_data<R>& p) noexcept {
    index_t rows = 1;
    for (std::size_t a = 0; a + 1 < R; ++a) {
        const index_t m = max_cover<R>(p, a);
        if (m > bw_max_rows) return false;
        rows *= m;
        if (rows > bw_max_rows) return false;
    }
    return true;
}

/// Whether the channels-first transposed kernel covers this plan for element type T.
template <class T, std::size_t R>
bool backward_cf_applicable(const plan_data<R>& p) noexcept {
    if (!std::is_floating_point<T>::value) return false;
    if (R > 3 || p.memory_layout != layout::channels_first) return false;
    if (p.global) return true;  // backward_cf_global's fill
    // Divisors are formed in T, as in forward: they must be exact integers there.
    if (p.max_divisor > exact_integer_limit<T>() || !backward_rows_fit<R>(p)) return false;
    // Rows past the kernel's stack buffers take scratch for their shares (16000-long 1-D rows
    // ran the reference at 15x forward's time), bounded by a few rows: pads many times the
    // row's length stay with the reference.
    const pool_geometry<R>& g = p.geometry;
    const index_t W = g.input[R - 1], Wo = g.output[R - 1];
    const index_t len = p.adaptive ? W : (Wo - 1) * g.strides[R - 1] + (g.kernel[R - 1] - 1) * g.dilations[R - 1] + 1;
    return len <= cf_buffer || len <= 2 * (W + Wo);
}

// Channels-last input rows of at most 4 KB (W * C values) are made from their covering output
// rows expanded along the last axis once (backward_cl's expanded rows), where per-row set-up
// costs more than the row's sums; longer rows, up to bw_cl_expand_row values, only where most
// output rows have a home (an input row that they alone tap, written with the expansion
// itself: no row stored twice) and the last axis's windows overlap. Measured on AVX-512:
// 3x3 stride 2 on 1536x7x7 8.1 -> 6.9 us, 24x56x56 8.3 -> 6.9; where rows have no home, the
// per-row path was faster past 4 KB (64x32x32 3x3 stride 1 10.2 against 11.4 us), and
// non-overlapping windows keep their direct path (2x2 stride 2 on 1024x14x14 16.2 against 18.9).
constexpr index_t bw_cl_expand_bytes = 4096;
constexpr index_t bw_cl_expand_row = 16384;
// Vectors of quotients backward_cl's divide_into_columns stores to every tap of a column
// before the next ones.
constexpr index_t bw_cl_spread_block = 8;
// Expanded rows a backward_cl call keeps at most (the ring: a plane of rows per first-axis
// output covering one input), and their values.
constexpr index_t bw_cl_expand_slots = 256;
constexpr index_t bw_cl_expand_ring = index_t(1) << 18;

/// Slots of backward_cl's ring of expanded rows: a power of two (a mask, not a division, per row
/// gathered) at least the rows of the first-axis outputs one input gathers, which lie in that
/// many consecutive planes, so in distinct slots.
template <std::size_t R>
index_t backward_cl_ring_slots(const plan_data<R>& p) noexcept {
    index_t slots = 1;
    while (slots < max_cover<R>(p, 0) * (R == 3 ? p.geometry.output[1] : 1)) slots *= 2;
    return slots;
}

/// Whether channels-last input rows may take backward_cl's expanded rows (which read the plan's
/// row tables).
template <std::size_t R>
bool backward_cl_rows_expandable(const plan_data<R>& p) noexcept {
    if (R < 2 || p.global || p.memory_layout != layout::channels_last) return false;
    const index_t row = p.geometry.input[R - 1] * p.input_shape[1];
    if (row > bw_cl_expand_row) return false;
    const index_t slots = backward_cl_ring_slots<R>(p);
    return slots <= bw_cl_expand_slots && slots * row <= bw_cl_expand_ring;
}

/// Whether the plan keeps the backward row tables (else each call builds its own, or needs
/// none): channels-first's, and channels-last's expanded rows.
template <std::size_t R>
bool backward_rows_kept(const plan_data<R>& p) noexcept {
    if (R < 2 || p.global) return false;
    if (p.memory_layout == layout::channels_last) {
        if (!backward_cl_rows_expandable<R>(p) || !backward_rows_fit<R>(p)) return false;
    } else if (inner_axes_whole<R>(p) || !backward_cf_applicable<double, R>(p)) {
        return false;
    }
    index_t rows = 1, taps = 1;
    for (std::size_t a = 0; a + 1 < R; ++a) {
        rows *= p.geometry.input[a];
        taps *= max_cover<R>(p, a);  // at most bw_max_rows (applicable)
        if (rows > bw_table_rows) return false;
    }
    return rows * taps <= bw_table_taps;
}

template <class T, std::size_t R, class M = T>
class backward_cf_global;  // (below: global plans of backward_cf run it)

/// backward_cf's ring slot (R >= 2): the expanded output rows of one first-axis output (a row
/// for R = 2, Ho rows for R = 3), + 2L for the last row's whole-vector spill.
template <class T, std::size_t R>
index_t backward_cf_slot(const plan_data<R>& p) noexcept {
    const index_t L = static_cast<index_t>(vec<T>::width), W = p.geometry.input[R - 1];
    if constexpr (R >= 3) {
        return p.geometry.output[1] * W + 2 * L;
    } else {
        return W + 2 * L;
    }
}

/// Whether backward_cf<T, R> has room for its ring of expanded output rows (else it runs per
/// row: there it sums the covering rows' gradients before dividing, where the other orders
/// divide each row first; s2_backward, which promises backward_cf's bits, takes only plans
/// where the ring fits).
template <class T, std::size_t R>
bool backward_cf_ring_fits(const plan_data<R>& p) noexcept {
    if constexpr (R < 2) {
        (void)p;
        return true;
    } else {
        return max_cover<R>(p, 0) * backward_cf_slot<T, R>(p) <= bw_ring;
    }
}

/// The orders backward_cf can run in (best: flat where it fits, else slots, else ring, else
/// per row).
enum class backward_order { best, slots, ring, per_row };

/// The channels-first backward: the transpose of cf_kernel's separable sum, writing every
/// input row once (no zero fill, no read-modify-write). Four orders of the same two passes:
/// - ring (the transpose of forward's order): each output-gradient row is divided by its
///   divisors into a zero-padded share row and expanded horizontally (each input column
///   gathers the shares of the windows that tap it) once, into a ring holding the outputs
///   that cover the current input row; an input row is then the vertical sum of the ring
///   rows whose windows tap it.
/// - flat (narrow planes, stride 1 or 2): the ring holding every output row, the rows'
///   shares laid out with zero gaps so one pass expands them all.
/// - slots (R = 3, stride 1 or 2): the ring, each slot (the Ho rows of one first-axis output)
///   expanded as flat expands a plane. Per-row expansion stalled on every row: it loaded its
///   shares, at an offset, right after storing them (graph_avgpool3d_chain: 35% of the time).
/// - per row (when the ring does not fit): for each input row, the output rows that tap it
///   are summed vertically on the narrow output width and divided, then expanded straight
///   into the input row.
/// An input row whose covering outputs equal the previous row's copies that row (a slab for
/// R = 3); windows covering every axis but the first whole take one value per first-axis
/// input (plane_whole); global pools are backward_cf_global's fill.
/// Stores v over the whole vectors of dst[0, n) and returns how many elements that is (n
/// rounded down to v's width). Four stores a turn: a loop of one ran at one store a cycle or
/// one per two by where it lay in the code (a 64-byte line boundary inside it: the bench's
/// global backward rows were 2x apart between builds of unchanged code, session 49).
template <class V, class T>
index_t store_whole_vectors(V v, T* dst, index_t n) noexcept {
    constexpr index_t L = static_cast<index_t>(V::width);
    index_t i = 0;
    for (; i + 4 * L <= n; i += 4 * L) {
        v.store(dst + i);
        v.store(dst + i + L);
        v.store(dst + i + 2 * L);
        v.store(dst + i + 3 * L);
    }
    for (; i + L <= n; i += L) v.store(dst + i);
    return i;
}

template <class T, std::size_t R>
class backward_cf {
    using V = vec<T>;
    static constexpr index_t L = static_cast<index_t>(V::width);

public:
    backward_cf(const backward_cf&) = delete;  // rows_ may point into own_rows_
    backward_cf& operator=(const backward_cf&) = delete;

    /// `order` forces a slower order where the best one applies (the tests run each).
    explicit backward_cf(const plan_data<R>& p, backward_order order = backward_order::best) : p_(p) {
        const pool_geometry<R>& g = p.geometry;
        W_ = g.input[R - 1];
        Wo_ = g.output[R - 1];
        s_ = g.strides[R - 1];
        d_ = g.dilations[R - 1];
        k_ = g.kernel[R - 1];
        pb_ = p.adaptive ? 0 : g.pads_begin[R - 1];
        len_ = p.adaptive ? W_ : (Wo_ - 1) * s_ + (k_ - 1) * d_ + 1;
        cols_ = std::clamp<index_t>(len_ - pb_, 0, W_);  // input columns a window reaches
        // Shares start after enough zeros for the farthest tap back, rounded to whole vectors.
        front_ = p.adaptive ? 0 : ((k_ - 1) * d_ + L - 1) / L * L;
        sp_need_ = front_ + std::max(Wo_ + L, len_ + 2 * L) + L;
        mode_ = p.adaptive || s_ > 2 ? hmode::scatter : s_ == 1 ? hmode::gather1 : hmode::gather2;
        blocks_ = cf_blocks_geometry<T, R>(p);  // (gather1's windows, summed by blocks)
        fixed_ = p.divisor_override > 0;
        override_ = static_cast<T>(p.divisor_override);
        bdiv_ = p.template last_backward_divisor<T>();
        std::memset(lane_mask_, 0xff, sizeof(T) * V::width);
        std::memset(lane_mask_ + L, 0, sizeof(T) * V::width);
        if constexpr (R >= 2) {
            cap_ = max_cover<R>(p, 0);  // outputs covering one input: the ring's slots
            slot_ = backward_cf_slot<T, R>(p);
            ring_ = order != backward_order::per_row && backward_cf_ring_fits<T, R>(p);
            // Flat: every outer output row's shares at a pitch that leaves the zeros the
            // expansion reads between rows, expanded in one pass (no per-row costs).
            index_t rows = 1;
            for (std::size_t a = 0; a + 1 < R; ++a) rows *= g.output[a];
            pitch_ = s_ == 1 ? Wo_ + (k_ - 1) * d_ : Wo_ + (k_ - 1) * d_ / 2 + 1;
            flat_ = order == backward_order::best && mode_ != hmode::scatter && rows * pitch_ + L <= 2 * cf_buffer + 3 * L - front_ &&
                    rows * s_ * pitch_ + 2 * L <= bw_ring;
            flat_rows_ = rows;
            if constexpr (R == 3) {
                // Slots: one first-axis output's rows at the flat pitch, expanded into slots of
                // fslot_ (room for the last vector's writes and whole-vector reads past it).
                const index_t Ho = g.output[1];
                fslot_ = (Ho * s_ * pitch_ + L - 1) / L * L + 2 * L;
                slots_ = !flat_ && (order == backward_order::best || order == backward_order::slots) &&
                         mode_ != hmode::scatter && Ho * pitch_ + L <= 2 * cf_buffer + 3 * L - front_ && cap_ * fslot_ <= bw_ring;
                if (slots_) flat_rows_ = Ho;
            }
            // Windows covering every axis but the first whole (i3d's 2x7x7 on 8x7x7): an
            // input slice takes one value, the sum of its covering outputs' shares.
            whole_ = order == backward_order::best && inner_axes_whole<R>(p);
            for (std::size_t a = 1; a + 1 < R; ++a) inner_div_ *= p.axis(a)[0].divisor;
            if (whole_) {
                // Each first-axis input's outputs and divisors, once a call, not once a plane
                // (a plane of I3D's head is a few hundred cycles; the covers took a fifth).
                const index_t D = g.input[0];
                whole_at_.reserve(static_cast<std::size_t>(D + 1));
                whole_taps_.reserve(static_cast<std::size_t>(D * std::max<index_t>(1, max_cover<R>(p, 0))));
                for (index_t x0 = 0; x0 < D; ++x0) {
                    whole_at_.push_back(static_cast<index_t>(whole_taps_.size()));
                    backward_taps<R>(p, 0, x0, [&](index_t o, index_t f) {
                        whole_taps_.push_back({o, fixed_ ? override_ : static_cast<T>(f * inner_div_) * bdiv_[0]});
                    });
                }
                whole_at_.push_back(static_cast<index_t>(whole_taps_.size()));
            }
            if (!whole_ && !p.global) {
                if (p.bwd().bw_rows.empty()) {
                    build_backward_rows<R>(p, own_taps_, own_rows_);
                    taps_ = own_taps_.data();
                    rows_ = own_rows_.data();
                } else {
                    taps_ = p.bwd().bw_taps.data();
                    rows_ = p.bwd().bw_rows.data();
                }
            }
        }
    }

    void run(const T* grad_out, T* grad_in, index_t item_begin, index_t item_end) const {
        const index_t in_plane = p_.input_spatial_volume(), out_plane = p_.output_spatial_volume();
        if (p_.global) {
            backward_cf_global<T, R>(p_).run_planes(grad_out, grad_in, item_begin, item_end);
            return;
        }
        buffers b;
        init(b, grad_out);
        for (index_t item = item_begin; item < item_end; ++item)
            plane_rows(b, grad_out + item * out_plane, grad_in + item * in_plane, 0, outer_rows());
    }

    /// Outer input rows of a plane (every axis but the last): the units of run_rows.
    index_t outer_rows() const noexcept {
        index_t n = 1;
        for (std::size_t a = 0; a + 1 < R; ++a) n *= p_.geometry.input[a];
        return n;
    }

    /// Outer input rows [r0, r1) of plane `item` (the few-plane split, so that N = 1 with few
    /// channels uses every thread), in the same order as run(): every row comes out
    /// bit-identical to the whole-plane result. Not for global plans.
    void run_rows(const T* grad_out, T* grad_in, index_t item, index_t r0, index_t r1) const {
        buffers b;
        init(b, grad_out);
        plane_rows(b, grad_out + item * p_.output_spatial_volume(), grad_in + item * p_.input_spatial_volume(), r0, r1);
    }

private:
    enum class hmode { gather1, gather2, scatter };

    struct buffers {
        buffers() = default;
        buffers(const buffers&) = delete;  // sp and hb may point into the arrays
        buffers& operator=(const buffers&) = delete;
        alignas(64) T sp_local[2 * cf_buffer + 4 * L];
        alignas(64) T hb_local[cf_buffer + 2 * L];
        T* sp = sp_local;  // one row of shares between zero borders
        T* hb = hb_local;  // the scatter path's padded input row
        line_buffer<T> long_rows;  // sp and hb of rows past the arrays (scratch, per call)
        line_buffer<T> blocks;     // block_window_sums' scratch
        const T* rows[bw_max_rows];               // the output rows an input row gathers
        T* slot[bw_max_rows];                     // slots: the current cover's expanded slots
        T factor[bw_max_rows];                    // and their outer divisor factors
        alignas(64) T ring[bw_ring + 2 * L];      // expanded output rows, slot o % cap
        const T* go_end = nullptr;                // vector tails read output gradients below it
    };

    // The zeros around the share rows, written once per call: rows only write their own Wo
    // shares (and zeroed lanes past them), rows with no tap never.
    void init(buffers& b, const T* grad_out) const {
        if (sp_need_ > static_cast<index_t>(sizeof(b.sp_local) / sizeof(T)) ||
            len_ > static_cast<index_t>(sizeof(b.hb_local) / sizeof(T))) {
            b.long_rows = line_buffer<T>(static_cast<std::size_t>(sp_need_ + (len_ + L - 1) / L * L));
            b.sp = b.long_rows.get();
            b.hb = b.sp + sp_need_;
        }
        if (blocks_) b.blocks = line_buffer<T>(static_cast<std::size_t>(2 * (k_ + L) + (d_ == 1 ? 0 : cols_ / d_ + k_ + 1)));
        b.go_end = grad_out + p_.input_shape[0] * p_.input_shape[1] * p_.output_spatial_volume();
        if (flat_ || slots_) {
            std::fill(b.sp, b.sp + front_ + flat_rows_ * pitch_ + L, T(0));
        } else {
            std::fill(b.sp, b.sp + front_, T(0));
            std::fill(b.sp + front_ + Wo_, b.sp + front_ + std::max(Wo_, len_ + 2 * L), T(0));
        }
    }

    void plane_rows(buffers& b, const T* go, T* gi, index_t r0, index_t r1) const {
        if (whole_) {
            plane_whole(go, gi, r0, r1);
        } else if (flat_) {
            plane_flat(b, go, gi, r0, r1);
        } else if (slots_) {
            plane_slots(b, go, gi, r0, r1);
        } else if (ring_) {
            plane_ring(b, go, gi, r0, r1);
        } else {
            per_row(b, go, gi, r0, r1);
        }
    }

    // dst[0, n) = v in whole vectors (std::fill of a float is a scalar loop at -O2); the tail
    // is one more vector ending at n, over lanes already holding v (13x13 planes: 10 vector
    // stores and 9 scalar ones became 11 vector stores).
    static void fill(T* dst, index_t n, T v) noexcept {
        const V vv = V::splat(v);
        index_t i = store_whole_vectors(vv, dst, n);
        if (i == n) return;
        if (n >= L) {
            vv.store(dst + n - L);
            return;
        }
        for (; i < n; ++i) dst[i] = v;
    }

    // The walk every order shares: input rows [r0, r1) of one plane (outer rows: h for R = 2,
    // z * H + h for R = 3; R = 1 has one), each from the outputs that tap it, as listed in
    // rows_ / taps_ (built once per plan, so the walk reads no window tables).
    // - enter(x0): before the first computed row of first-axis input x0 (the ring expands
    //   what its rows need);
    // - source(i, tap): lists output row tap.q = o0 * Ho + o1 with its outer divisor factor as
    //   b.rows[i] (and b.factor[i]);
    // - finish(dst, n): writes input row dst from the n rows listed.
    // A row gathering the same outputs as an earlier row of the range copies it: its result
    // would be the same bits.
    template <class Enter, class Source, class Finish>
    void walk(T* gi, index_t r0, index_t r1, Enter&& enter, Source&& source, Finish&& finish) const {
        if constexpr (R == 1) {
            (void)r0, (void)r1, (void)enter;
            source(0, bw_tap{0, 0, 1});
            finish(gi, 1);
        } else {
            const std::size_t row_bytes = static_cast<std::size_t>(W_) * sizeof(T);
            const index_t per = outer_rows() / p_.geometry.input[0];  // rows per first-axis input
            index_t x0 = r0 / per, h = r0 % per, entered = -1;
            for (index_t r = r0; r < r1;) {
                T* dst = gi + r * W_;
                const bw_row& t = rows_[r];
                index_t run = 1;
                if (t.copy >= r0) {
                    // Following rows that copy from the same distance back, up to where they
                    // would read this run, go in one copy (a slab for R = 3: one call, not H).
                    const index_t back = r - t.copy;
                    while (run < back && r + run < r1 && rows_[r + run].copy == r + run - back) ++run;
                    std::memcpy(dst, dst - back * W_, row_bytes * static_cast<std::size_t>(run));
                } else {
                    if (x0 != entered) enter(entered = x0);
                    for (index_t i = 0; i < t.n; ++i) source(i, taps_[t.first + i]);
                    finish(dst, t.n);
                }
                r += run;
                for (h += run; h >= per; h -= per) ++x0;
            }
        }
    }

    // Per row (when the ring does not fit): each input row sums the output rows that tap it on
    // the narrow output width, divides, and expands the result straight into the row.
    void per_row(buffers& b, const T* go, T* gi, index_t r0, index_t r1) const {
        walk(
            gi, r0, r1, [](index_t) {},
            [&](index_t i, const bw_tap& t) {
                b.rows[i] = go + t.q * Wo_;
                b.factor[i] = static_cast<T>(t.factor);  // exact: at most max_divisor
            },
            [&](T* dst, index_t n) { row(b, n, dst, gi + r1 * W_); });
    }

    // One output-gradient row g with outer factor f, divided and expanded into ring row dst
    // (whole vectors may spill up to dst_end: later rows of the slot, or its pad).
    void expand(buffers& b, const T* g, T f, T* dst, const T* dst_end) const {
        T* sh = b.sp + front_;
        shares(&g, &f, 1, sh, b.go_end);
        horizontal(b, sh, dst, dst_end);
    }

    // dst[0, w) = the sum of the n expanded rows listed.
    // The last partial vector is stored whole while it stays below dst_end: the lanes past w
    // land in columns the caller fills or rows it writes later (the ring rows have room).
    template <int N>
    static void sum_rows(const T* const* rows, index_t n, T* dst, index_t w, const T* dst_end) noexcept {
        index_t x = 0;
        for (; x + L <= w; x += L) vsum<N>(rows, n, x).store(dst + x);
        if (x < w && dst + x + L <= dst_end) {
            vsum<N>(rows, n, x).store(dst + x);
            return;
        }
        for (; x < w; ++x) {
            T acc = rows[0][x];
            for (index_t i = 1; i < n; ++i) acc += rows[i][x];
            dst[x] = acc;
        }
    }
    static void sum_rows(const T* const* rows, index_t n, T* dst, index_t w, const T* dst_end) noexcept {
        switch (n) {
            case 0: std::fill(dst, dst + w, T(0)); break;  // no window taps this row
            case 1: sum_rows<1>(rows, n, dst, w, dst_end); break;  // a copy, inline (rows are short)
            case 2: sum_rows<2>(rows, n, dst, w, dst_end); break;
            case 3: sum_rows<3>(rows, n, dst, w, dst_end); break;
            case 4: sum_rows<4>(rows, n, dst, w, dst_end); break;
            default: sum_rows<0>(rows, n, dst, w, dst_end); break;
        }
    }

    // Whole inner axes: outer rows [r0, r1) (rows_per of them per first-axis input x0) are
    // filled with x0's sum of shares, each divided as shares() divides.
    void plane_whole(const T* go, T* gi, index_t r0, index_t r1) const {
        const index_t rows_per = outer_rows() / p_.geometry.input[0];
        for (index_t x0 = r0 / rows_per; x0 * rows_per < r1; ++x0) {
            T v = T(0);
            for (index_t i = whole_at_[static_cast<std::size_t>(x0)]; i < whole_at_[static_cast<std::size_t>(x0) + 1]; ++i) {
                const whole_tap& t = whole_taps_[static_cast<std::size_t>(i)];
                v += go[t.o] / t.div;
            }
            const index_t a = std::max(r0, x0 * rows_per), e = std::min(r1, (x0 + 1) * rows_per);
            fill(gi + a * W_, (e - a) * W_, v);
        }
    }

    // The expanded-row orders' last step: input row dst sums its n listed expanded rows on
    // `width` columns, zeros past them. The last partial vector may spill into later rows of
    // the range (written after them), never past `end` (row r1). Forced inline into each
    // order's walk: called once per input row, it made the 3-D slots order's backward 7-16%
    // slower (the pool_ci_3d shapes, rows 8-30 wide).
    AVGPOOL_ALWAYS_INLINE void sum_expanded(buffers& b, T* dst, index_t n, index_t width, const T* end) const {
        sum_rows(b.rows, n, dst, width, end);
        std::fill(dst + width, dst + W_, T(0));
    }

    // The flat order: the shares of the outer output rows q that the range needs, at
    // sp[front + q * pitch], expanded in one pass to exp[q * s * pitch + P] (padded position
    // P of that row); each input row then sums the expanded rows that tap it (input column x
    // is P = pb + x). Every lane is computed alone, so any range gives the same bits.
    void plane_flat(buffers& b, const T* go, T* gi, index_t r0, index_t r1) const {
        const pool_geometry<R>& g = p_.geometry;
        const window* w0 = p_.axis(0);
        T* sh = b.sp + front_;
        T* exp = b.ring;
        const index_t epitch = s_ * pitch_;
        // Outer output rows [q0, q1) tap the range: the first axis's covering outputs (all of
        // the second axis's for R = 3).
        const index_t H = R == 3 ? g.input[1] : 1, Ho = R == 3 ? g.output[1] : 1;
        const window c0 = p_.cover(0, r0 / H);
        const window c1 = p_.cover(0, (r1 - 1) / H);
        const index_t q0 = c0.first * Ho, q1 = std::max(c0.first, c1.first + c1.count) * Ho;
        for (index_t q = q0; q < q1; ++q) {
            const window& a0 = w0[q / Ho];
            index_t f = a0.divisor;
            if constexpr (R == 3) {
                const window& a1 = p_.axis(1)[q % Ho];
                if (a1.count == 0) continue;
                f *= a1.divisor;  // exact: at most max_divisor
            }
            if (a0.count == 0) continue;  // never gathered
            const T* row = go + q * Wo_;
            const T ft = static_cast<T>(f);
            shares(&row, &ft, 1, sh + q * pitch_, b.go_end);
        }
        expand_flat(sh, exp, q0 * pitch_, q1 * pitch_);
        exp += pb_;
        const T* const end = gi + r1 * W_;
        walk(
            gi, r0, r1, [](index_t) {}, [&](index_t i, const bw_tap& t) { b.rows[i] = exp + t.q * epitch; },
            [&](T* dst, index_t n) { sum_expanded(b, dst, n, cols_, end); });
    }

    // The flat expansion: shares sh[m], m in [from, to) (rows at pitch_, zero gaps between),
    // to exp[m] (stride 1) or exp[2m], exp[2m + 1] (stride 2), in whole vectors.
    void expand_flat(const T* sh, T* exp, index_t from, index_t to) const noexcept {
        if (s_ == 1) {
            for (index_t P = from; P < to; P += L) {
                V acc = V::load(sh + P);
                for (index_t j = 1; j < k_; ++j) acc = acc + V::load(sh + P - j * d_);
                acc.store(exp + P);
            }
        } else {
            for (index_t m = from; m < to; m += L) {
                V e, o;
                phases(sh + m, sh + m, e, o);
                V lo, hi;
                interleave2(e, o, lo, hi);
                lo.store(exp + 2 * m);
                hi.store(exp + 2 * m + L);
            }
        }
    }

    // The slots order (R = 3): the ring order, each first-axis output's Ho rows of shares laid
    // out as plane_flat lays out a plane's, then expanded in one pass into slot o % cap_. A row
    // whose second-axis window taps nothing is never written (zeros from init, or a previous
    // row's zeroed tail lanes), and no input row gathers it.
    void plane_slots(buffers& b, const T* go, T* gi, index_t r0, index_t r1) const {
        const window* w0 = p_.axis(0);
        const window* w1 = p_.axis(1);
        const index_t Ho = p_.geometry.output[1], epitch = s_ * pitch_;
        T* const sh = b.sp + front_;
        index_t next = 0, first = 0;  // as plane_ring's; first: the current cover's first output
        const T* const end = gi + r1 * W_;
        walk(
            gi, r0, r1,
            [&](index_t x0) {
                const window c = p_.cover(0, x0);
                first = c.first;
                for (index_t o = std::max(next, c.first); o < c.first + c.count; ++o) {
                    if (w0[o].count == 0) continue;  // a window with no tap is never gathered
                    for (index_t oh = 0; oh < Ho; ++oh) {
                        if (w1[oh].count == 0) continue;
                        const T* row = go + (o * Ho + oh) * Wo_;
                        const T f = static_cast<T>(w0[o].divisor * w1[oh].divisor);  // exact: at most max_divisor
                        shares(&row, &f, 1, sh + oh * pitch_, b.go_end);
                    }
                    expand_flat(sh, b.ring + (o % cap_) * fslot_, 0, Ho * pitch_);
                }
                next = std::max(next, c.first + c.count);
                for (index_t i = 0; i < c.count; ++i) b.slot[i] = b.ring + ((c.first + i) % cap_) * fslot_ + pb_;
            },
            [&](index_t i, const bw_tap& t) { b.rows[i] = b.slot[t.o0 - first] + (t.q - t.o0 * Ho) * epitch; },
            [&](T* dst, index_t n) { sum_expanded(b, dst, n, cols_, end); });
    }

    // The ring order (the transpose of forward's order). Cover ranges only move forward along
    // an axis, so the outputs of the current first-axis input are the last ones expanded, and
    // at most cap_ of them are live: output o0's expanded rows sit in slot o0 % cap_.
    void plane_ring(buffers& b, const T* go, T* gi, index_t r0, index_t r1) const {
        const window* w0 = p_.axis(0);
        const index_t Ho = R == 3 ? p_.geometry.output[1] : 1;
        index_t next = 0;  // outputs of axis 0 below this are expanded (or not needed)
        const T* const end = gi + r1 * W_;
        walk(
            gi, r0, r1,
            [&](index_t x0) {
                const window c = p_.cover(0, x0);
                for (index_t o = std::max(next, c.first); o < c.first + c.count; ++o) {
                    if (w0[o].count == 0) continue;  // a window with no tap is never gathered
                    T* at = b.ring + (o % cap_) * slot_;
                    if constexpr (R == 3) {
                        const window* w1 = p_.axis(1);
                        for (index_t oh = 0; oh < Ho; ++oh)
                            if (w1[oh].count > 0)  // exact: the product is at most max_divisor
                                expand(b, go + (o * Ho + oh) * Wo_, static_cast<T>(w0[o].divisor * w1[oh].divisor),
                                       at + oh * W_, at + slot_);
                    } else {
                        expand(b, go + o * Wo_, static_cast<T>(w0[o].divisor), at, at + slot_);
                    }
                }
                next = std::max(next, c.first + c.count);
            },
            [&](index_t i, const bw_tap& t) { b.rows[i] = b.ring + (t.o0 % cap_) * slot_ + (t.q - t.o0 * Ho) * W_; },
            [&](T* dst, index_t n) { sum_expanded(b, dst, n, W_, end); });
    }

    void horizontal(buffers& b, const T* sh, T* dst, const T* dst_end) const noexcept {
        switch (mode_) {
            case hmode::gather1:
                if (blocks_) {
                    gather_blocks(b.blocks.get(), sh, dst);
                } else {
                    gather1(sh, dst, dst_end);
                }
                break;
            case hmode::gather2: gather2(sh, dst, dst_end); break;
            default: scatter(b.hb, sh, dst); break;
        }
    }

    // One input row from the n output-gradient rows (and outer factors) listed in b.
    void row(buffers& b, index_t n, T* dst, const T* dst_end) const {
        if (n == 0) {  // no window taps this row
            std::fill(dst, dst + W_, T(0));
            return;
        }
        T* sh = b.sp + front_;
        shares(b.rows, b.factor, n, sh, b.go_end);
        horizontal(b, sh, dst, dst_end);
    }

    // sh[u] = sum over the listed rows of g[u] / divisor: the outer factors summed out first
    // when they agree (the common case: then one division per output, as in forward).
    template <int N>
    static V vsum(const T* const* rows, index_t n, index_t u) noexcept {
        V acc = V::load(rows[0] + u);
        if constexpr (N > 0) {
            for (int i = 1; i < N; ++i) acc = acc + V::load(rows[i] + u);
        } else {
            for (index_t i = 1; i < n; ++i) acc = acc + V::load(rows[i] + u);
        }
        return acc;
    }
    // The last partial vector, when its reads stay below end, is one more vector with the
    // lanes past Wo zeroed: they fall in the zero border (or, flat, the next row, written
    // after), so narrow rows (Wo < L: small planes) need no scalar divisions.
    template <int N>
    // (Every share + 0, so that input sums of -0 shares are +0: see plus_zero.)
    void shares_same(const T* const* rows, index_t n, T f, T* sh, const T* end) const noexcept {
        const V fv = V::splat(f);
        index_t u = 0;
        if (fixed_) {
            for (; u + L <= Wo_; u += L) plus_zero(vsum<N>(rows, n, u) / fv).store(sh + u);
        } else {
            for (; u + L <= Wo_; u += L) plus_zero(vsum<N>(rows, n, u) / (fv * V::load(bdiv_ + u))).store(sh + u);
        }
        if (u == Wo_) return;
        bool fits = true;
        for (index_t i = 0; i < n; ++i) fits = fits && rows[i] + u + L <= end;
        if (fits) {
            const V acc = vsum<N>(rows, n, u);
            const V q = plus_zero(fixed_ ? acc / fv : acc / (fv * V::load(bdiv_ + u)));
            q.bit_and(V::load(lane_mask_ + L - (Wo_ - u))).store(sh + u);
            return;
        }
        for (; u < Wo_; ++u) {
            T acc = rows[0][u];
            for (index_t i = 1; i < n; ++i) acc += rows[i][u];
            sh[u] = (fixed_ ? acc / f : acc / (f * bdiv_[u])) + T(0);
        }
    }
    void shares(const T* const* rows, const T* factor, index_t n, T* sh, const T* end) const noexcept {
        bool same = true;
        for (index_t i = 1; i < n; ++i) same = same && factor[i] == factor[0];
        if (fixed_ || same) {
            const T f = fixed_ ? override_ : factor[0];
            switch (n) {
                case 1: shares_same<1>(rows, n, f, sh, end); break;
                case 2: shares_same<2>(rows, n, f, sh, end); break;
                case 3: shares_same<3>(rows, n, f, sh, end); break;
                default: shares_same<0>(rows, n, f, sh, end); break;
            }
            return;
        }
        // Rows at the edges of the outer axes: one division per row.
        index_t u = 0;
        for (; u + L <= Wo_; u += L) {
            V acc = V::load(rows[0] + u) / V::splat(factor[0]);
            for (index_t i = 1; i < n; ++i) acc = acc + V::load(rows[i] + u) / V::splat(factor[i]);
            plus_zero(acc / V::load(bdiv_ + u)).store(sh + u);
        }
        for (; u < Wo_; ++u) {
            T acc = rows[0][u] / factor[0];
            for (index_t i = 1; i < n; ++i) acc += rows[i][u] / factor[i];
            sh[u] = acc / bdiv_[u] + T(0);
        }
        (void)end;
    }

    // Stores the 0 < m <= 2L values in v (lo, hi) that fall in dst[0, cols) from column x on.
    void store_part(T* dst, index_t x, const T* v, index_t m) const noexcept {
        const index_t from = std::max<index_t>(0, -x), to = std::min(m, cols_ - x);
        for (index_t i = from; i < to; ++i) dst[x + i] = v[i];
    }

    // Stride 1: input column x (padded position P = x + pb) gathers the shares of outputs
    // P - j * d, j < k; outputs outside [0, Wo) read the zero borders.
    // A last partial vector is stored whole when it stays below dst_end (its lanes past cols_
    // are zeroed or rewritten after: later rows of the range, or slot padding).
    void gather1(const T* sh, T* dst, const T* dst_end) const noexcept {
        index_t x = 0;
        for (; x < cols_; x += L) {
            const T* at = sh + x + pb_;
            V acc = V::load(at);
            index_t j = 1;
            if (d_ == 1) {  // unrolled: split loads are the bound, loop overhead not also
                for (; j + 4 <= k_; j += 4)
                    acc = acc + V::load(at - j) + V::load(at - j - 1) + V::load(at - j - 2) + V::load(at - j - 3);
            }
            for (; j < k_; ++j) acc = acc + V::load(at - j * d_);
            if (x + L <= cols_ || dst + x + L <= dst_end) {
                acc.store(dst + x);
            } else {
                T tmp[V::width];
                acc.store(tmp);
                store_part(dst, x, tmp, L);
            }
        }
        std::fill(dst + cols_, dst + W_, T(0));  // beyond every window
    }

    // Stride 1, long kernels (cf_blocks_geometry): input column x sums the shares of padded
    // positions x + pb - (k - 1) d .. x + pb, d apart, a window of block_window_sums (or
    // dilated_window_sums; the zeros before the shares reach back front_ >= (k - 1) d).
    void gather_blocks(T* scratch, const T* sh, T* dst) const {
        if (d_ > 1) {
            dilated_window_sums(sh + pb_ - (k_ - 1) * d_, cols_, k_, d_, scratch, dst);
            std::fill(dst + cols_, dst + W_, T(0));
            return;
        }
        block_window_sums(sh + pb_ - (k_ - 1), cols_, k_, scratch, [&](index_t u0, const T* a, const T* c, index_t n) {
            index_t t = 0;
            for (; t + L <= n; t += L) (V::load(a + t) + V::load(c + t)).store(dst + u0 + t);
            for (; t < n; ++t) dst[u0 + t] = a[t] + c[t];
        });
        std::fill(dst + cols_, dst + W_, T(0));
    }

    // Stride 2: the even (e) and odd (o) positions 2m, 2m + 1 of the padded row, for the L
    // values of m from so = sh + m (odd) and se (even: sh + m, or sh + m + 1 to pair odd
    // positions with the next even ones).
    void phases(const T* se, const T* so, V& e, V& o) const noexcept {
        e = V::load(se);
        o = V::splat(T(0));
        if (d_ % 2 != 0) {
            for (index_t j = 2; j < k_; j += 2) e = e + V::load(se - j * d_ / 2);
            for (index_t j = 1; j < k_; j += 2) o = o + V::load(so - (j * d_ - 1) / 2);
        } else {
            for (index_t j = 1; j < k_; ++j) e = e + V::load(se - j * d_ / 2);
        }
    }

    // Stride 2, in the two phases of the padded row: position 2m gathers the shares of
    // outputs m - j * d / 2 over taps j with j * d even, position 2m + 1 those of
    // m - (j * d - 1) / 2 with j * d odd; the phases are interleaved in registers, starting
    // at input column 0 (padded position pb: an odd pb pairs odd positions with the next
    // even ones), so whole vectors are stored from the row's start.
    void gather2(const T* sh, T* dst, const T* dst_end) const noexcept {
        const index_t m0 = pb_ / 2;
        const bool odd = pb_ % 2 != 0;
        for (index_t x = 0; x < cols_; x += 2 * L) {
            const T* at = sh + m0 + x / 2;
            V e, o;
            phases(at + (odd ? 1 : 0), at, e, o);
            V lo, hi;
            if (odd) {
                interleave2(o, e, lo, hi);
            } else {
                interleave2(e, o, lo, hi);
            }
            if (x + 2 * L <= cols_ || dst + x + 2 * L <= dst_end) {
                lo.store(dst + x);
                hi.store(dst + x + L);
            } else {
                T tmp[2 * V::width];
                lo.store(tmp);
                hi.store(tmp + L);
                store_part(dst, x, tmp, 2 * L);
            }
        }
        std::fill(dst + cols_, dst + W_, T(0));
    }

    // Stride >= 3 and adaptive windows: each share added to its taps in the padded row.
    void scatter(T* hb, const T* sh, T* dst) const noexcept {
        std::fill(hb, hb + len_, T(0));
        const window* w = p_.axis(R - 1);
        for (index_t ow = 0; ow < Wo_; ++ow) {
            if (w[ow].count == 0) continue;  // taps only in padding
            if (p_.adaptive) {  // (whole vectors: the same adds, in the same order per input)
                T* at = hb + w[ow].first;
                const index_t n = w[ow].count;
                const V v = V::splat(sh[ow]);
                index_t i = 0;
                for (; i + L <= n; i += L) (V::load(at + i) + v).store(at + i);
                for (; i < n; ++i) at[i] += sh[ow];
            } else {
                T* at = hb + ow * s_;
                for (index_t j = 0; j < k_; ++j) at[j * d_] += sh[ow];
            }
        }
        std::copy(hb + pb_, hb + pb_ + cols_, dst);
        std::fill(dst + cols_, dst + W_, T(0));
    }

    const plan_data<R>& p_;
    index_t W_ = 0, Wo_ = 0, s_ = 1, d_ = 1, k_ = 1, pb_ = 0, len_ = 0, cols_ = 0, front_ = 0;
    index_t sp_need_ = 0;  // the share row's length with its zero borders (buffers::sp)
    hmode mode_ = hmode::scatter;
    // The plan's row tables, or (past bw_table_rows / bw_table_taps) this call's own.
    std::vector<bw_tap, scratch_allocator<bw_tap>> own_taps_;
    std::vector<bw_row, scratch_allocator<bw_row>> own_rows_;
    const bw_tap* taps_ = nullptr;
    const bw_row* rows_ = nullptr;
    bool fixed_ = false, ring_ = false, flat_ = false, slots_ = false, whole_ = false, blocks_ = false;
    index_t inner_div_ = 1;  // whole_: the divisors of the axes between the first and the last
    struct whole_tap {
        index_t o;  // first-axis output
        T div;      // its whole divisor, formed as plane_whole divided by it before
    };
    // whole_: per first-axis input x0, its outputs whole_taps_[whole_at_[x0] .. whole_at_[x0 + 1]).
    std::vector<whole_tap, scratch_allocator<whole_tap>> whole_taps_;
    std::vector<index_t, scratch_allocator<index_t>> whole_at_;
    index_t cap_ = 1, slot_ = 0, pitch_ = 0, flat_rows_ = 0, fslot_ = 0;
    T override_ = T(1);
    const T* bdiv_ = nullptr;
    T lane_mask_[2 * V::width];  // L lanes of all-ones bits, then L of zeros
};

/// Whether backward_cl runs the plan (T: the compute type, float or double): channels-last,
/// ranks 1-3, the plan's column lists built, divisors exact in T, at most bw_max_rows output
/// rows gathered by one input row.
template <class T, std::size_t R>
bool backward_cl_applicable(const plan_data<R>& p) noexcept {
    if (!std::is_floating_point<T>::value) return false;
    if (R > 3 || p.memory_layout != layout::channels_last || p.bwd().bw_col_at.empty()) return false;
    return p.max_divisor <= exact_integer_limit<T>() && backward_rows_fit<R>(p);
}

/// Whether backward_cl_global (channels-last) or backward_cf_global (channels-first) runs the
/// plan (T: the compute type): a global pool (any rank) whose one divisor is exact in T
/// (channels-last divides whole vectors in T) or, channels-first, in double.
template <class T, std::size_t R>
bool backward_global_applicable(const plan_data<R>& p) noexcept {
    const double limit = p.memory_layout == layout::channels_first ? exact_integer_limit<double>() : exact_integer_limit<T>();
    return std::is_floating_point<T>::value && p.global && p.max_divisor >= 1.0 && p.max_divisor <= limit;
}

/// The channels-last backward of a global pool: every input of image n receives n's
/// gradients divided by the one divisor, so each image is one row of C quotients repeated.
/// The row is made once per image (correctly rounded quotients, + 0 as the reference's sum
/// gives a -0 gradient), laid out over up to pattern_bytes of columns (one column when a
/// column is 1 KiB or more: 1024 channels of 7x7 filled in 1.36 us from one column, in
/// 1.9-2.0 us from four (16 KiB), a memset of the bytes in 1.7 us), and copied; the
/// gathering kernel made each input row again from its covering rows (1024 channels of 7x7:
/// most of its time in per-row set-up). Work items: input rows, as backward_cl's.
/// M: the storage type (T, or 16-bit storage for T = float, each quotient rounded once).
template <class T, std::size_t R, class M = T>
class backward_cl_global {
    using V = vec<T>;
    static constexpr index_t L = static_cast<index_t>(V::width);
    static constexpr index_t pattern_bytes = 16384;

public:
    /// Requires backward_global_applicable<T, R>(p).
    explicit backward_cl_global(const plan_data<R>& p) {
        const pool_geometry<R>& g = p.geometry;
        C_ = p.input_shape[1];
        W_ = g.input[R - 1];
        for (std::size_t a = 0; a + 1 < R; ++a) rows_ *= g.input[a];
        items_ = p.input_shape[0] * rows_;
        div_ = static_cast<T>(p.max_divisor);  // the one window's (or the override)
        const index_t position_bytes = C_ * static_cast<index_t>(sizeof(M));
        cols_ = position_bytes >= 1024 ? 1 : std::min(W_, std::max<index_t>(1, pattern_bytes / position_bytes));
    }

    /// Input rows of every image: the work items of run().
    index_t items() const noexcept { return items_; }

    /// Input rows item_begin .. item_end - 1 of grad_in from grad_out.
    void run(const M* grad_out, M* grad_in, index_t item_begin, index_t item_end) const {
        const line_buffer<M> pattern(static_cast<std::size_t>(cols_ * C_));
        index_t made = -1;  // the image whose quotients the pattern holds
        for (index_t item = item_begin; item < item_end; ++item) {
            const index_t n = item / rows_;
            if (n != made) {
                fill(grad_out + n * C_, pattern.get());
                made = n;
            }
            M* dst = grad_in + item * W_ * C_;
            index_t x = 0;
            for (; x + cols_ <= W_; x += cols_) copy(pattern.get(), dst + x * C_, cols_ * C_);
            if (x < W_) copy(pattern.get(), dst + x * C_, (W_ - x) * C_);
        }
    }

private:
    // dst[0 .. n) = pattern[0 .. n): vector copies where M is T (with libc's memcpy, 4 KB rows
    // of 32 channels of 32x32 took 5.3 us a call against 3.9-5.0 here), else memcpy.
    static void copy(const M* pattern, M* dst, index_t n) noexcept {
        if constexpr (std::is_same<M, T>::value) {
            if (n >= L) {
                index_t i = 0;
                // (Four a turn, as store_whole_vectors() and for its reason.)
                for (; i + 4 * L <= n; i += 4 * L) {
                    V::load(pattern + i).store(dst + i);
                    V::load(pattern + i + L).store(dst + i + L);
                    V::load(pattern + i + 2 * L).store(dst + i + 2 * L);
                    V::load(pattern + i + 3 * L).store(dst + i + 3 * L);
                }
                for (; i + L <= n; i += L) V::load(pattern + i).store(dst + i);
                if (i < n) V::load(pattern + n - L).store(dst + n - L);
                return;
            }
        }
        std::memcpy(dst, pattern, static_cast<std::size_t>(n) * sizeof(M));
    }

    void fill(const M* g, M* pattern) const {
        const V d = V::splat(div_), zero = V::splat(T(0));
        index_t c = 0;
        for (; c + L <= C_; c += L) vstore(vload(g + c) / d + zero, pattern + c);
        for (; c < C_; ++c) sstore(sload(g[c]) / div_ + T(0), pattern + c);
        for (index_t x = 1; x < cols_; ++x)
            std::memcpy(pattern + x * C_, pattern, static_cast<std::size_t>(C_) * sizeof(M));
    }

    index_t C_ = 0, W_ = 0, rows_ = 1, items_ = 0, cols_ = 1;
    T div_ = T(1);
};

/// The channels-first backward of a global pool: plane c of grad_in is grad_out[c] / divisor
/// (+ 0 as backward_cl_global), divided in double: a float quotient comes out as float
/// division rounds it (53 >= 2 * 24 + 2 bits), and divisors past float's 2^24 (planes of
/// 4096x4096 and more) stay exact. The planes are one run of memory, filled
/// in aligned vectors, a vector that straddles two planes blending their values: 1024 planes
/// of 7x7 took 5.0 us filled plane by plane (most stores split across two cache lines) and
/// 3.2 us so, the time of a memset of the same bytes. Work items: blocks of that run, so that
/// a few large planes still split across threads.
/// M: the storage type (T, or 16-bit storage for T = float, each quotient rounded once).
template <class T, std::size_t R, class M>
class backward_cf_global {
    using V = vec<T>;
    static constexpr index_t L = static_cast<index_t>(V::width);
    static constexpr index_t block = 4096;  // elements per work item (a multiple of every L)

public:
    /// Requires backward_global_applicable<T, R>(p) and a channels-first plan.
    explicit backward_cf_global(const plan_data<R>& p)
        : n_(p.input_spatial_volume()), total_(p.input_shape[0] * p.input_shape[1] * n_), div_(p.max_divisor) {}

    /// Blocks of grad_in: the work items of run().
    index_t items() const noexcept { return (total_ + block - 1) / block; }

    /// Blocks item_begin .. item_end - 1 of grad_in from grad_out.
    void run(const M* grad_out, M* grad_in, index_t item_begin, index_t item_end) const {
        run_elements(grad_out, grad_in, item_begin * block, std::min(item_end * block, total_));
    }

    /// Planes c0 .. c1 - 1 of grad_in from grad_out.
    void run_planes(const M* grad_out, M* grad_in, index_t c0, index_t c1) const {
        run_elements(grad_out, grad_in, c0 * n_, c1 * n_);
    }

private:
    void run_elements(const M* grad_out, M* grad_in, index_t lo, index_t hi) const {
        if (lo >= hi) return;
        if constexpr (std::is_same<M, T>::value) {
            if (n_ >= L) {
                run_flat(grad_out, grad_in, lo, hi);
                return;
            }
        }
        for (index_t c = lo / n_; c * n_ < hi; ++c) {
            M v;
            sstore(value(grad_out, c), &v);
            const index_t a = std::max(lo, c * n_), b = std::min(hi, (c + 1) * n_);
            std::fill(grad_in + a, grad_in + b, v);
        }
    }

    T value(const M* g, index_t c) const noexcept {
        return static_cast<T>(static_cast<double>(sload(g[c])) / div_) + T(0);
    }

    // Elements [lo, hi) with planes of at least a vector: a vector holds at most two planes'
    // values. Scalars up to the first aligned vector and after the last.
    void run_flat(const T* g, T* dst, index_t lo, index_t hi) const noexcept {
        const std::uintptr_t bytes = static_cast<std::uintptr_t>(L) * sizeof(T);
        const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(dst + lo);
        const index_t head = std::min(hi, lo + static_cast<index_t>(((bytes - addr % bytes) % bytes) / sizeof(T)));
        index_t j = lo;
        for (; j < head; ++j) dst[j] = value(g, j / n_);
        index_t c = j / n_, bound = (c + 1) * n_;  // plane c ends at bound
        V vv = V::splat(j < hi ? value(g, c) : T(0));
        while (j + L <= hi) {
            // The vectors that hold plane c alone.
            j += store_whole_vectors(vv, dst + j, std::min(bound, hi) - j);
            if (j + L > hi) break;
            // The vector that plane c's end splits (bound < j + L <= hi).
            const V next = V::splat(value(g, c + 1));
            V::front_blend(vv, next, static_cast<std::size_t>(bound - j)).store(dst + j);
            j += L;
            ++c;
            bound += n_;
            vv = next;
        }
        for (; j < hi; ++j) dst[j] = value(g, j / n_);
    }

    index_t n_ = 0, total_ = 0;
    double div_ = 1.0;
};

/// Whether the channels-last backward can be the forward sum over flipped windows: dilation 1,
/// strides of 1 or below the kernel (overlapping windows: where they do not overlap, as 2x2
/// stride 2, each input has one share and the gathering kernel's direct path measured
/// 12-30% faster) and pads below it on every axis (windows hold taps, and at stride 1 the
/// flipped pads, kernel - 1 - pad, are not negative), and at least a kernel's
/// worth of outputs per axis (windows that span the whole output, as a 7x7 pool on 7x7,
/// gather better the other way: 8 against 32 us measured for 1024 channels). The plan builds
/// the flipped plan only if every input has a window tapping it.
template <std::size_t R>
bool flip_geometry(const plan_data<R>& p) noexcept {
    if (R > 3 || p.adaptive || p.memory_layout != layout::channels_last) return false;
    const pool_geometry<R>& g = p.geometry;
    for (std::size_t a = 0; a < R; ++a) {
        const index_t k = g.kernel[a], s = g.strides[a];
        if (g.dilations[a] != 1 || (s > 1 && s >= k) || g.pads_begin[a] >= k || g.pads_end[a] >= k || g.output[a] < (k + s - 1) / s)
            return false;
        if (s == 1 && g.output[a] + (k - 1 - g.pads_begin[a]) + (k - 1 - g.pads_end[a]) - k + 1 != g.input[a]) return false;
    }
    return true;
}

// Channel bytes below which strided plans keep the gathering backward (backward_flip_applicable).
constexpr index_t flip_strided_min_bytes = 256;
// The most divided gradients backward_cl_flip keeps per executor chunk, in bytes.
constexpr index_t flip_ring_bytes = index_t(16) << 20;

/// The ring slots backward_cl_flip keeps (first-axis slabs of divided gradients): the most
/// outputs tapping an input along the first axis, the flipped kernel's, and for R = 2 one
/// more (the sum may ask for two output rows' rows at once: ring_pair); one slab for R = 1.
template <std::size_t R>
index_t flip_ring_slots(const plan_data<R>& p) noexcept {
    return R == 1 ? 1 : p.bwd().flipped->geometry.kernel[0] + (R == 2 ? 1 : 0);
}

/// Whether backward_cl_flip serves this plan for elements computed in T: at least a vector of
/// channels, divisors exact in T, and the forward kernel taking the flipped plan.
template <class T, std::size_t R>
bool backward_flip_applicable(const plan_data<R>& p) noexcept {
    if (!std::is_floating_point<T>::value || p.bwd().flipped == nullptr) return false;
    const pool_geometry<R>& g = p.geometry;
    const index_t C = p.input_shape[1];
    if (C < static_cast<index_t>(vec<T>::width) || p.max_divisor > exact_integer_limit<T>()) return false;
    // Strided plans' flipped windows take the kernel's window-table path, which lost to the
    // gathering kernel with few channels (3x3 stride 2, AVX2: 24 channels of 56x56 20% more
    // cycles; 144 channels and more 30-45% fewer).
    if (p.bwd().flipped->adaptive && C * static_cast<index_t>(sizeof(T)) < flip_strided_min_bytes) return false;
    const index_t slab = R == 1 ? g.output[0] : p.output_spatial_volume() / g.output[0];  // (times C)
    const index_t slots = flip_ring_slots(p);
    if (slots * slab > flip_ring_bytes / static_cast<index_t>(sizeof(T)) / C) return false;
    return cl_applicable<T, R>(*p.bwd().flipped);
}

/// Whether run_backward takes backward_cl_flip for this plan (it must be applicable): with
/// 8-wide float vectors (AVX2, measured on an AMD EPYC) wherever it applies; with 16-wide
/// ones (AVX-512, measured on an Intel Xeon) only where an input column gathers more than
/// three output columns, since the gathering kernel's sliding path, which takes up to three,
/// was the faster one there at every stride (3x3 stride 1: 192x35x35 52 against 76 us, 2048x8x8
/// 30 against 40; stride 2: 144x28x28 10.6 against 14.5; 3x3x3 stride 2 on 64x16^3 30 against
/// 41) and the flipped sum only past it (7x7 stride 1 on 1024x8x8: 29 against 40 us).
template <class T, std::size_t R>
bool backward_flip_preferred(const plan_data<R>& p) noexcept {
    if (vec<T>::width * sizeof(T) < 64 || !backward_cl_applicable<T, R>(p)) return true;
    return max_cover<R>(p, R - 1) > 3;
}

/// Where backward_flip_preferred says no, whether the flipped sum may still win by pairing
/// output rows (ring_pair: 2-D 3x3 stride 1 in 64-byte vectors, over more than 256 bytes of
/// channels); backward_cl_flip::pairs_win() then decides, on the kernel it builds. The paired
/// forward sum changed the balance session 57 measured: on a Zen 5 (harness, float, one
/// thread, alternating runs), the flipped sum took about the forward time where every window
/// has one divisor (the gradients read in place: 1024x8x8 7.4-7.6 us against the gathering
/// kernel's 11.9-14.3, 512x17x17 16.5-17.3 against 23.3-23.8, 192x35x35 29.9-31.3 against
/// 37.4-37.8), and, with the gradients divided into the ring first
/// (exclude-pad), 0.75-0.85x the gathering kernel's time on planes of 8 to 17 rows (1024x8x8,
/// 512x14x14, 512x17x17, 2048x8x8, 1280x8x8), 0.95-1.09x on 28 and 35 rows (128x28x28,
/// 96x35x35, 192x35x35, 256x35x35). Since session 66 the paired sum weighs the gradients as it
/// reads them (no ring of divided ones), and wins on every plane measured (harness, Zen 5,
/// 3 alternating pinned rounds, backward time against the ring or the gathering kernel):
/// 1280x8x8 0.72x, 2048x8x8 0.72x, 768x17x17 0.88x, 128x28x28 0.69x, 256x28x28 0.55x.
/// At stride 2 the gathering kernel stayed as fast or faster (144x28x28 5.4 against 7.5-8.5
/// us), so that keeps those plans. (16-bit storage takes the same kernel as float, unpaired
/// there, for float's bits rounded.)
template <class T, std::size_t R>
bool backward_flip_pairs_candidate(const plan_data<R>& p) noexcept {
    if constexpr (R != 2) {
        (void)p;
        return false;
    } else {
        const pool_geometry<R>& g = p.geometry;
        return vec<T>::width * sizeof(T) == 64 && g.kernel[0] == 3 && g.kernel[1] == 3 && g.strides[0] == 1 &&
               g.strides[1] == 1 && g.dilations[0] == 1 && g.dilations[1] == 1;
    }
}

/// The channels-last backward as a forward sum (flip_geometry): the outputs whose windows tap
/// an input are the ones the flipped window at that input covers (at stride 1 a pooling
/// window itself, at larger strides a window of the cover tables), so grad_in is the forward
/// kernel's sum over the flipped plan of the gradients divided by their divisors. Each
/// gradient is divided once per chunk: the first-axis slabs a row gathers (a row of outputs
/// for R = 2, a plane for R = 3, the whole image for R = 1) are divided into a ring of
/// flip_ring_slots slots as the rows ask for them, and stay there for the rows after. The forward
/// kernel's separable sum then reads each divided value from L1 or L2, where the gathering
/// kernel (backward_cl) divided the same rows again for every input row that taps them.
/// Where every window has one divisor (one_divisor), the sum reads the gradients in place and
/// divides each input's total once, as forward divides a window's sum (so, as in forward,
/// gradients near the type's largest value may sum to infinity where dividing each first
/// would not); 16-bit storage still converts them into the ring. 2-D stride-1 plans whose
/// windows have one divisor but on their borders (exclude-pad) do the same with the largest
/// divisor, then correct each input for the border outputs it gathers (border_divisor).
/// Every row's arithmetic depends only on the plan: bit-identical for every executor.
/// M: the storage type (T, or 16-bit storage for T = float: the sums are made in T, a row at
/// a time, and each rounded once, so the result is T's on the same gradients, rounded).
template <class T, std::size_t R, class M = T>
class backward_cl_flip {
    using V = vec<T>;
    static constexpr index_t L = static_cast<index_t>(V::width);

public:
    /// Requires backward_flip_applicable<T, R>(p); then usable() says whether to run it.
    explicit backward_cl_flip(const plan_data<R>& p)
        : p_(p),
          div_(pick_divisor(p)),
          sum_(*p.bwd().flipped, div_.one > 0 ? pool_op::average : pool_op::sum, div_.one) {
        // Several divisors and paired rows: the sum weighs each gradient as it reads it
        // (cl_kernel::weigh_sources) instead of dividing them into the ring first, a pass
        // that took 40% of 1280x8x8's backward (3x3 exclude-pad; AVX-512, its stores to a
        // ring of four 40 KiB rows past L1). 16-bit storage still converts into the ring,
        // undivided, so that its result stays float's on the same gradients, rounded.
        if constexpr (R == 2) {
            weighted_ = div_.one == 0 && sum_.pairs_rows();
            if (weighted_) sum_.weigh_sources(p.axis(0), p.axis(1));
        }
        const pool_geometry<R>& g = p.geometry;
        C_ = p.input_shape[1];
        W_ = g.input[R - 1];
        Wo_ = g.output[R - 1];
        row_ = Wo_ * C_;
        slab_rows_ = R == 3 ? g.output[1] : 1;
        slab_ = slab_rows_ * row_;
        slots_ = flip_ring_slots(p);
        first_ = R == 1 ? 1 : g.output[0];
    }

    /// False when the sum would read whole slices of the image (it asks for rows only).
    bool usable() const noexcept { return !sum_.reads_slices(); }

    /// Whether the sum divides by the largest divisor and the borders are corrected after it
    /// (border_divisor).
    bool border_corrected() const noexcept { return div_.border; }

    /// Whether the sum weighs each gradient by its divisor's reciprocal as it reads it
    /// (cl_kernel::weigh_sources: 2-D, paired rows, several divisors).
    bool weighs_sources() const noexcept { return weighted_; }

    /// Whether the sum pairs output rows, which wins wherever it applies
    /// (backward_flip_pairs_candidate): with one divisor the gradients are read in place,
    /// with several they are weighed as they are read (weighs_sources).
    bool pairs_win() const noexcept { return R == 2 && sum_.pairs_rows(); }

    /// Input rows of every image: the work items of run().
    index_t items() const noexcept { return sum_.items(); }

    /// Input rows item_begin .. item_end - 1 of grad_in from grad_out.
    void run(const M* grad_out, M* grad_in, index_t item_begin, index_t item_end) const {
        // The ring, then (16-bit storage) one row of sums.
        const index_t row_in = W_ * C_;
        const index_t tmp = std::is_same<T, M>::value ? 0 : row_in;
        const bool direct = std::is_same<T, M>::value && (div_.one > 0 || weighted_);  // the sum reads the gradients
        const line_buffer<T> ring(static_cast<std::size_t>((direct ? 0 : slots_ * slab_) + tmp));
        const line_buffer<index_t> held_buf(static_cast<std::size_t>(slots_));  // slab n * first_ + i0 in each slot
        index_t* const held = held_buf.get();
        std::fill(held, held + slots_, index_t(-1));
        T* const base = ring.get();
        auto row_at = [&](index_t n, index_t i0, index_t i1) -> const T* {
            if constexpr (std::is_same<T, M>::value) {
                if (direct) return grad_out + (n * first_ + i0) * slab_ + i1 * row_;
            }
            const index_t key = n * first_ + i0, slot = i0 % slots_;
            T* const dst = base + slot * slab_;
            if (held[static_cast<std::size_t>(slot)] != key) {
                divide_slab(grad_out + key * slab_, i0, dst);
                held[static_cast<std::size_t>(slot)] = key;
            }
            return dst + i1 * row_;
        };
        if constexpr (std::is_same<T, M>::value) {
            // (Pairs of output rows ask for four rows at once: the ring has a slot for each.)
            sum_.run_rows(grad_in, item_begin, item_end, row_at, 0, R == 2);
            if constexpr (R == 2) {
                if (div_.border)
                    for (index_t item = item_begin; item < item_end; ++item)
                        add_border_shares(grad_out, grad_in + item * row_in, item);
            }
        } else {
            T* const sums = base + slots_ * slab_;
            for (index_t item = item_begin; item < item_end; ++item) {
                sum_.run_rows(sums, item, item + 1, row_at, item);
                if constexpr (R == 2) {
                    if (div_.border) add_border_shares(grad_out, sums, item);
                }
                store_n(sums, grad_in + item * row_in, static_cast<std::size_t>(row_in));
            }
        }
    }

private:
    // The one divisor of every window (the override, or each axis's windows all alike: no
    // exclude-pad border), else 0. Then the sum divides each input's total once, as forward
    // divides a window's (within the accuracy bound of dividing each share), and reads the
    // gradients in place: no pass dividing them into the ring, which took a third of
    // DLinear's channels-last backward (321 channels, 25 taps, 360 long).
    static index_t one_divisor(const plan_data<R>& p) noexcept {
        if (p.divisor_override > 0) return p.divisor_override;
        index_t d = 1;
        for (std::size_t a = 0; a < R; ++a) {
            const window* w = p.axis(a);
            for (index_t o = 0; o < p.geometry.output[a]; ++o)
                if (w[o].divisor != w[0].divisor || w[o].divisor == 0) return 0;
            d *= w[0].divisor;  // at most max_divisor (applicable)
        }
        return d;
    }

    // What divides each input's sum: one_divisor, else border_divisor's D with the border
    // corrections, else nothing (0: the gradients are divided into the ring first).
    struct flip_divisor {
        index_t one = 0;
        index_t most[2] = {0, 0};  // border: each axis's largest divisor (D = most[0] most[1])
        bool border = false;       // one is border_divisor's: add_border_shares() corrects
    };
    static flip_divisor pick_divisor(const plan_data<R>& p) noexcept {
        flip_divisor f;
        f.one = one_divisor(p);
        if (f.one == 0) {
            f.one = border_divisor(p, f.most);
            f.border = f.one > 0;
            // Where the sum pairs rows, it weighs the gradients instead (weigh_sources):
            // harness, AVX-512, 3 alternating pinned rounds: 192x35x35 0.75-1.0x and
            // 288x35x35 0.82-0.89x the border form's time, 256x56x56 0.93-0.97x.
            if (f.border && cl_kernel<T, R, T>(*p.bwd().flipped, pool_op::sum).pairs_rows()) f = flip_divisor{};
        }
        return f;
    }

    // Exclude-pad borders, 2-D, stride 1: the divisor of output
    // (o0, o1) is d0[o0] d1[o1], at most D = max d0 x max d1, and most outputs (all but at
    // most an eighth) have D. The sum then reads the gradients in place and divides each
    // input's total by D, and add_border_shares() adds g (1 / divisor - 1 / D) for each
    // output of another divisor: no pass dividing every gradient into the ring, which took
    // 30% of 1280x8x8's backward (there half the outputs are on the border: not this path).
    // Within the accuracy bound: |g| / D <= |g| / divisor, and each correction is at most
    // its share. Returns D (each axis's largest divisor in most), or 0 where this does not apply.
    static constexpr index_t border_max_kernel = 16;
    static index_t border_divisor(const plan_data<R>& p, index_t (&most)[2]) noexcept {
        if constexpr (R != 2) {
            (void)p;
            (void)most;
            return 0;
        } else {
            const pool_geometry<R>& g = p.geometry;
            if (p.divisor_override > 0) return 0;
            index_t at_most[2] = {0, 0};  // per axis: outputs with the largest divisor (most)
            for (std::size_t a = 0; a < 2; ++a) {
                most[a] = 0;
                if (g.strides[a] != 1 || g.dilations[a] != 1 || g.kernel[a] > border_max_kernel) return 0;
                const window* w = p.axis(a);
                for (index_t o = 0; o < g.output[a]; ++o) {
                    if (w[o].divisor <= 0 || w[o].count <= 0) return 0;
                    most[a] = std::max(most[a], w[o].divisor);
                }
                for (index_t o = 0; o < g.output[a]; ++o) at_most[a] += w[o].divisor == most[a];
            }
            // Up to an eighth of the outputs on the border, rows of 256 bytes and more (harness,
            // one thread, Zen 5: 192-288 channels of 35x35 3x3 exclude-pad 0.69-0.90x the time
            // with AVX-512, 0.85-0.96x with AVX2; 768x17x17, 22% on the border, 0.92-1.07x;
            // 32 channels of 32x32 1.2-1.3x with AVX2, its corrections mostly overhead).
            const index_t outputs = g.output[0] * g.output[1];
            if (8 * (outputs - at_most[0] * at_most[1]) > outputs) return 0;
            if (p.input_shape[1] * static_cast<index_t>(sizeof(T)) < 256) return 0;
            const index_t D = most[0] * most[1];
            return static_cast<double>(D) <= exact_integer_limit<T>() ? D : 0;
        }
    }

    // Input row `item` (image n, row x0) += the share corrections g (1 / divisor - 1 / D) of
    // the border outputs whose windows hold it. Per input column, from its covering outputs in
    // order: an output row of another divisor (the first and last) corrects the whole row, a
    // sum per column of its corrections; the other rows correct only the columns under the
    // last axis's border windows, from their gradients' sum over those rows times the one
    // weight they share (1 / D0) (1 / d1 - 1 / D1).
    // dst: the row's sums (T), in grad_in itself where M is T.
    void add_border_shares(const M* grad_out, T* dst, index_t item) const noexcept {
        const pool_geometry<R>& g = p_.geometry;
        const index_t H = g.input[0], Ho = g.output[0];
        const index_t n = item / H, x0 = item % H;
        const window* w0 = p_.axis(0);
        const window* w1 = p_.axis(R - 1);
        const index_t D0 = div_.most[0], D1 = div_.most[1];
        const double inv_d = 1.0 / static_cast<double>(div_.one);
        // A function of the divisor d0 d1 alone; the last one kept (most repeat).
        index_t last = 0;
        T last_weight = T(0);
        auto weight = [&](index_t d0, index_t d1) {
            if (d0 * d1 != last) {
                last = d0 * d1;
                last_weight = static_cast<T>(1.0 / static_cast<double>(last) - inv_d);
            }
            return last_weight;
        };
        // a * b + c, rounded once where the target has a fused multiply-add (so the compiler's
        // contraction cannot make float and 16-bit storage round differently), else twice.
        auto madd = [](const V& a, const V& b, const V& c) AVGPOOL_INLINE_LAMBDA {
            if constexpr (has_fused_mul_add<T>()) return fused_mul_add(a, b, c);
            else return a * b + c;
        };
        auto smadd = [](T a, T b, T c) AVGPOOL_INLINE_LAMBDA {
            if constexpr (has_fused_mul_add<T>()) return std::fma(a, b, c);
            else return a * b + c;
        };
        const M* const img = grad_out + n * Ho * Wo_ * C_;
        const index_t k1 = g.kernel[R - 1], pb1 = g.pads_begin[R - 1];
        // Output rows whose windows hold x0: o0 - pb <= x0 < o0 - pb + k (stride 1).
        const index_t lo = std::max<index_t>(0, x0 + g.pads_begin[0] - g.kernel[0] + 1);
        const index_t hi = std::min<index_t>(Ho - 1, x0 + g.pads_begin[0]);
        index_t inner[border_max_kernel];  // the covering rows of divisor D0
        index_t n_inner = 0;
        for (index_t o0 = lo; o0 <= hi; ++o0) {
            if (x0 < w0[o0].first || x0 >= w0[o0].first + w0[o0].count) continue;
            if (w0[o0].divisor == D0) {
                inner[n_inner++] = o0;
                continue;
            }
            // A border row: every column, from the outputs o1 whose windows hold it.
            const M* const row = img + o0 * Wo_ * C_;
            for (index_t x1 = 0; x1 < W_; ++x1) {
                const index_t a = std::max<index_t>(0, x1 + pb1 - k1 + 1), b = std::min<index_t>(Wo_ - 1, x1 + pb1);
                T wt[border_max_kernel];
                const M* src[border_max_kernel];
                index_t m = 0;
                for (index_t o1 = a; o1 <= b; ++o1) {
                    if (x1 < w1[o1].first || x1 >= w1[o1].first + w1[o1].count) continue;
                    wt[m] = weight(w0[o0].divisor, w1[o1].divisor);
                    src[m++] = row + o1 * C_;
                }
                if (m == 0) continue;
                T* const o = dst + x1 * C_;
                index_t c = 0;
                for (; c + L <= C_; c += L) {
                    V acc = V::load(o + c);
                    for (index_t t = 0; t < m; ++t) acc = madd(vload(src[t] + c), V::splat(wt[t]), acc);
                    acc.store(o + c);
                }
                for (; c < C_; ++c) {
                    T acc = o[c];
                    for (index_t t = 0; t < m; ++t) acc = smadd(static_cast<T>(sload(src[t][c])), wt[t], acc);
                    o[c] = acc;
                }
            }
        }
        if (n_inner == 0) return;
        // The other rows: only the last axis's border windows.
        for (index_t o1 = 0; o1 < Wo_; ++o1) {
            if (w1[o1].divisor == D1) continue;
            const T wt = weight(D0, w1[o1].divisor);
            const V wv = V::splat(wt);
            const index_t x_end = w1[o1].first + w1[o1].count;
            index_t c = 0;
            for (; c + L <= C_; c += L) {
                V t = vload(img + (inner[0] * Wo_ + o1) * C_ + c);
                for (index_t r = 1; r < n_inner; ++r) t = t + vload(img + (inner[r] * Wo_ + o1) * C_ + c);
                for (index_t x1 = w1[o1].first; x1 < x_end; ++x1) madd(t, wv, V::load(dst + x1 * C_ + c)).store(dst + x1 * C_ + c);
            }
            for (; c < C_; ++c) {
                T t = static_cast<T>(sload(img[(inner[0] * Wo_ + o1) * C_ + c]));
                for (index_t r = 1; r < n_inner; ++r) t = t + static_cast<T>(sload(img[(inner[r] * Wo_ + o1) * C_ + c]));
                for (index_t x1 = w1[o1].first; x1 < x_end; ++x1) dst[x1 * C_ + c] = smadd(t, wt, dst[x1 * C_ + c]);
            }
        }
    }

    // dst = the gradients of first-axis output o0 (src) divided by their divisors: the
    // override, or the outer factors times the last axis's, formed in T as forward forms them;
    // with one divisor or weighed sources, the gradients in T only (16-bit storage; the sum
    // divides or weighs).
    void divide_slab(const M* src, index_t o0, T* dst) const {
        if (div_.one > 0 || weighted_) {
            index_t i = 0;
            for (; i + L <= slab_; i += L) vload(src + i).store(dst + i);
            for (; i < slab_; ++i) dst[i] = static_cast<T>(src[i]);
            return;
        }
        const bool fixed = p_.divisor_override > 0;
        const T* const last = p_.template last_divisor<T>();
        for (index_t r = 0; r < slab_rows_; ++r) {
            double outer = 1.0;
            if constexpr (R >= 2) outer = static_cast<double>(p_.axis(0)[o0].divisor);
            if constexpr (R == 3) outer *= static_cast<double>(p_.axis(1)[r].divisor);
            const T value = static_cast<T>(fixed ? static_cast<double>(p_.divisor_override) : outer);
            const M* s = src + r * row_;
            T* o = dst + r * row_;
            for (index_t ow = 0; ow < Wo_; ++ow, s += C_, o += C_) {
                const T div = fixed ? value : value * last[ow];
                if (div == T(0)) {  // an empty window (ceil rounding): no input reads its share
                    std::fill(o, o + C_, T(0));
                    continue;
                }
                // Times the reciprocal, within an ulp of the quotient (well inside the
                // accuracy bound, and the flipped sum rounds its shares' sum anyway):
                // divide_rounded's correction made this pass a third of the backward on
                // 1280x8x8 3x3 exclude-pad, which the product took 14.8 -> 13.6 us
                // (2048x8x8 24.7 -> 23.0, 768x17x17 41.3 -> 39.5; harness, one thread).
                const V rc = V::splat(T(1) / div);
                for (index_t i = 0; i < C_; i += L) {  // the last vector shifted back to end at C
                    const index_t j = std::min(i, C_ - L);
                    scale_plus_zero(vload(s + j), rc).store(o + j);
                }
            }
        }
    }

    const plan_data<R>& p_;
    flip_divisor div_;  // (before sum_, which takes div_.one)
    cl_kernel<T, R, T> sum_;
    bool weighted_ = false;  // sum_ weighs the gradients (weigh_sources): read in place
    index_t C_ = 0, W_ = 0, Wo_ = 0, row_ = 0, slab_rows_ = 1, slab_ = 0, slots_ = 1, first_ = 1;
};

/// The channels-last backward (N[D]HWC): SIMD over channels, as the forward kernel. Work unit:
/// one input row (fixed n and outer input coordinates), written once. Each output row's
/// shares (its gradients divided by their divisors: the row's outer factor times the last
/// axis's, or the override) are computed once per call into one of a few slots, since the
/// next input rows gather the same output rows; an input row adds its covering output rows'
/// shares (the vertical sum, by channel blocks that stay in L1), then each input column sums
/// the columns of that sum whose windows tap it. Where each input column has at most three
/// tapping output columns, consecutive (3x3 pools), the two steps are one: each output
/// column's vertical sum is made in registers, divided there straight from the gradients, and
/// kept until the last input column it reaches is stored. A row whose windows do not overlap
/// on the last axis and that one output row covers is divided straight into its columns; a
/// row that gathers the same output rows as the row before is a copy of it. With fewer
/// channels than a vector, rows are flat arrays of Wo * C values and each column still takes
/// a whole vector, stored in ascending order so that each store's spill is overwritten by the
/// next columns'.
/// Expanded rows (rows of up to 4 KB, and longer ones whose output rows mostly have a home; see
/// bw_cl_expand_bytes): no slots; each covering output row is divided and expanded along the
/// last axis once a call, into a ring or straight into its home row, and each input row sums
/// its covering expansions or copies an earlier row (the plan's row tables).
/// Every row's arithmetic depends only on the plan, so results are bit-identical for every
/// executor. M: the storage type (T, or 16-bit storage for T = float, rounded once).
template <class T, std::size_t R, class M = T>
class backward_cl {
    using V = vec<T>;
    static constexpr index_t L = static_cast<index_t>(V::width);
    static constexpr index_t slot_bytes = index_t(1) << 19;  // share rows kept by one call
    static constexpr index_t block_bytes = 32768;            // one channel block's vertical sum
    static constexpr index_t max_slots = 64;
    static constexpr index_t cache_bytes = 32768;            // slots that stay in L1: shares kept
    static constexpr int factor_slots = 8;  // divisor tables kept (outer factors)
    static constexpr index_t fused_slots = 4;  // run_fused's quotient rows: q - 2 .. q and a spare
    class state;

public:
    /// Requires backward_cl_applicable<T, R>(p). expand: allow the expanded rows (tests turn
    /// them off to check the other paths on the same plans).
    explicit backward_cl(const plan_data<R>& p, bool expand = true) : p_(p) {
        const pool_geometry<R>& g = p.geometry;
        C_ = p.input_shape[1];
        W_ = g.input[R - 1];
        Wo_ = g.output[R - 1];
        row_ = Wo_ * C_;
        pitch_ = (row_ + 2 * L - 1) / L * L;  // at least a vector past the row's end
        index_t most_rows = 1;                // output rows one input row gathers, at most
        for (std::size_t a = 0; a + 1 < R; ++a) {
            rows_per_n_ *= g.input[a];
            most_rows *= max_cover<R>(p, a);
        }
        out_n_ = p.output_spatial_volume() * C_;
        fixed_ = p.divisor_override > 0;
        override_ = static_cast<T>(p.divisor_override);
        lanes_ = C_ < L && row_ >= L;
        table_ = lanes_ ? row_ : Wo_;
        col_ = p.bwd().bw_cols.data();
        col_at_ = p.bwd().bw_col_at.data();
        ranges_ = p.bwd().bw_col_ranges;
        direct_ = p.bwd().bw_col_scatter && C_ >= L;
        const index_t row_bytes = pitch_ * static_cast<index_t>(sizeof(T));
        slots_ = std::max<index_t>(2, std::min({most_rows, max_slots, slot_bytes / std::max<index_t>(row_bytes, 1)}));
        // Shares are kept when other input rows gather them again and they stay in L1 (and
        // always with fewer channels than a vector: the flat path); else each input row
        // divides its own. One output row per input row: no other row needs them.
        // (Two rows a window, as 3x3 stride 2, keep them in L2 too: measured 768x14x14
        // 29.7 -> 26.3 us, where three rows at stride 1 lose, 192x35x35 82 -> 104.)
        cached_ = C_ < L || (most_rows > 1 && slots_ * row_bytes <= (most_rows == 2 ? 3 : 1) * cache_bytes);
        // Tall windows whose rows fall in many runs (exclude-pad borders) divide each run
        // again per input row: there the shares are kept even out of L1 (measured: 7x7 stride
        // 1 pad 3 on 1024x8x8, 58 -> 45 us; one run, 45 -> 33 us the other way).
        most_runs_ = most_rows > 3 ? 2 : factor_slots;
        if (C_ >= L && most_rows == 1) slots_ = 0;  // divide_blocks takes every row
        // Long ranges of tapping columns (stride 1, kernel past 5): block sums (gather).
        span_ = p.bwd().bw_col_span;
        long_ = ranges_ && C_ >= L && span_ > 5 && Wo_ >= 3 * span_;
        if (C_ >= L) {  // equal blocks of whole vectors
            // Long windows: blocks twice as wide, whose sums (three arrays) leave L1 for L2;
            // narrow blocks cost more in lines touched by two blocks (dlinear, 321 channels:
            // 16-channel blocks 97 us, 32-64 channels 70 us; 256x35x35 unchanged).
            const index_t bytes = long_ ? 2 * block_bytes : block_bytes;
            const index_t fit = std::max(L, bytes / static_cast<index_t>(sizeof(T)) / std::max<index_t>(Wo_, 1) / L * L);
            const index_t nb = (C_ + fit - 1) / fit;
            cb_ = std::min(C_, ((C_ + nb - 1) / nb + L - 1) / L * L);
        } else {
            cb_ = C_;
        }
        // Up to three consecutive tapping columns whose last one grows with x: the output
        // columns' sums are made one at a time in registers and each input column adds the
        // last few (slide), with no row of vertical sums stored and gathered again.
        // The plan has a walk exactly where the columns allow this (ranges, span <= 3, rising
        // ends: see bw_walk; span <= 3 also rules out long_).
        slide_ = C_ >= L && !p.bwd().bw_walk.empty();
        // There each input row divides its vertical sums once per output column: as many
        // divisions as making the shares, and no share rows stored and read back (3x3 stride
        // 2 on 768x14x14: 21.7 -> 18.0 us; stride 1 unchanged).
        if (slide_) {
            cached_ = false;
            walk_ = p.bwd().bw_walk.data();
        }
        // Slid rows need no slots and no sums unless divide_blocks may decline (many runs).
        if (slide_ && most_rows <= most_runs_) slots_ = 0;
        sums_ = !slide_ || slots_ > 0;
        // Without slots every row goes through divide_blocks (whole blocks of cb_ channels);
        // else gather may take a whole row.
        arena_ = slots_ * pitch_ + (sums_ ? pitch_ + Wo_ * cb_ : 0) + (fixed_ ? 0 : 2 * factor_slots * table_) +
                 (long_ ? 2 * Wo_ * (slots_ == 0 ? cb_ : C_) : 0);
        // Short rows (the plan keeps its row tables for them): each covering output row is
        // divided and expanded along the last axis once a call, into a ring, and each input row
        // is the sum of its covering rows' expansions (a copy where it repeats an earlier row).
        // The per-row path spent most of such rows in set-up (pool_ci_3d non_cubic, 16
        // channels of 32x16x8, 3x3x3 stride 2: 19.4 -> 7.6 us, forward 6.8; 16 channels of
        // 50x50 3x3 stride 2: 5.4 -> 4.0 us).
        if (expand && !p.bwd().bw_rows.empty() && W_ * C_ >= L) {
            expand_ = true;
            taps_ = p.bwd().bw_taps.data();
            rtab_ = p.bwd().bw_rows.data();
            ering_ = backward_cl_ring_slots<R>(p);
            epitch_ = (W_ * C_ + L - 1) / L * L;
            out_rows_ = out_n_ / row_;
            // Each output row's home: the first input row that it alone taps (used with storage
            // T only, where the sums can read it back).
            home_ = p.bwd().bw_home.data();
            const index_t homes = p.bwd().bw_homes;
            // Longer rows: only with homes for most rows, where windows overlap (see
            // bw_cl_expand_bytes). Decided the same whatever the storage: 16-bit
            // results are float's rounded once, so they must sum in the same order.
            if (W_ * C_ * static_cast<index_t>(sizeof(T)) > bw_cl_expand_bytes && (direct_ || 2 * homes < out_rows_)) {
                expand_ = false;
                ering_ = 0;
                home_ = nullptr;
            } else {
                slots_ = 0;
                sums_ = true;
                arena_ = ring_arena();
            }
        }
        if constexpr (R == 3) {
            plane_rows_ = g.input[1];
            if (expand_ && !p.bwd().bw_halves.empty()) halves_ = p.bwd().bw_halves.data();
        }
        // 2-D short rows that slide and pair as 3x3 stride 2's do (a row of two output rows,
        // then one of the second alone): the two rows are made together from the second's
        // quotients (run_fused), with a ring of quotient rows instead of expanded rows. AVX-512
        // harness, 16 channels of 50x50, 3x3 stride 2: 3.1 -> 2.5 us, where the expanded rows
        // stored each row and read it back for the next. Not at stride 1 (one row per output
        // row, three quotient rows read for it: 32 channels of 28x28 3.9 -> 5.0 us) nor with
        // quotient rows past 2 KB (their ring leaves L1: 288 channels of 14x14 3.4 -> 3.9 us).
        if constexpr (R == 2) {
            if (expand_ && slide_ && row_ * static_cast<index_t>(sizeof(T)) <= 2048 && p.bwd().bw_rows_paired) {
                fused_ = true;
                ering_ = fused_slots;
                epitch_ = (row_ + L - 1) / L * L;
                arena_ = ring_arena();
            }
        }
    }

    // The arena of the expanded rows and run_fused: a row's and a block's sums, the divisor
    // tables, long windows' block sums and the ring (ering_ rows of epitch_, aligned).
    index_t ring_arena() const noexcept {
        return pitch_ + Wo_ * cb_ + (fixed_ ? 0 : 2 * factor_slots * table_) + (long_ ? 2 * Wo_ * C_ : 0) + ering_ * epitch_ + L;
    }

    /// Input rows of every image: the work items of run().
    index_t items() const noexcept { return p_.input_shape[0] * rows_per_n_; }

    /// Whether run() makes the rows from expanded output rows.
    bool expanded() const noexcept { return expand_ && !fused_; }

    /// Whether run() makes the rows that each output row completes together (run_fused).
    bool fused() const noexcept { return fused_; }

    /// Input rows item_begin .. item_end - 1 of grad_in from grad_out.
    void run(const M* grad_out, M* grad_in, index_t item_begin, index_t item_end) const {
        state st(*this);
        if constexpr (R == 2) {
            if (fused_) {
                run_fused(grad_out, grad_in, item_begin, item_end, st);
                return;
            }
        }
        if (expand_) {
            run_expanded(grad_out, grad_in, item_begin, item_end, st);
            return;
        }
        const M* rows[bw_max_rows];
        T factor[bw_max_rows];
        const T* shares[bw_max_rows];
        const M* prev_rows[bw_max_rows];  // the last computed row's
        T prev_factor[bw_max_rows];
        index_t prev_nr = -1;
        const pool_geometry<R>& g = p_.geometry;
        const index_t H = R == 3 ? g.input[1] : 1, Ho = R == 3 ? g.output[1] : 1;
        // Image n, outer input coordinates (z, y) of the item: counted up, not divided.
        index_t n = item_begin / rows_per_n_, z = 0, y = item_begin % rows_per_n_;
        if constexpr (R == 3) {
            z = y / H;
            y %= H;
        }
        // The first axis's taps of z (3-D), kept while z stays.
        index_t oz[bw_max_rows], fz[bw_max_rows], nz = 0, z_at = -1;
        auto step = [&] {
            if (++y < (R == 3 ? H : rows_per_n_)) return;
            y = 0;
            if (R == 3 && ++z < g.input[0]) return;
            z = 0;
            ++n;
        };
        for (index_t item = item_begin; item < item_end; ++item, step()) {
            const M* src = grad_out + n * out_n_;
            M* dst = grad_in + item * W_ * C_;
            index_t nr = 0;
            if constexpr (R == 1) {
                rows[0] = src;
                factor[0] = T(1);
                nr = 1;
            } else if constexpr (R == 2) {
                backward_taps<R>(p_, 0, y, [&](index_t o, index_t dv) {
                    rows[nr] = src + o * row_;
                    factor[nr++] = static_cast<T>(dv);
                });
            } else {
                if (z != z_at) {
                    nz = 0;
                    backward_taps<R>(p_, 0, z, [&](index_t o0, index_t d0) {
                        oz[nz] = o0;
                        fz[nz++] = d0;
                    });
                    z_at = z;
                }
                for (index_t t = 0; t < nz; ++t)
                    backward_taps<R>(p_, 1, y, [&](index_t o1, index_t d1) {
                        rows[nr] = src + (oz[t] * Ho + o1) * row_;
                        factor[nr++] = static_cast<T>(fz[t]) * static_cast<T>(d1);  // exact (applicable)
                    });
            }
            if (nr == 0) {  // no window taps this row
                for (index_t i = 0; i < W_ * C_; ++i) sstore(T(0), dst + i);
                prev_nr = -1;
                continue;
            }
            // The same covering rows as the row before (written by this call): the same
            // values, copied (global pools: every row after the first; 2x2 stride 2 where the
            // direct path below does not write both rows at once: every other row).
            if (item > item_begin && nr == prev_nr && std::equal(rows, rows + nr, prev_rows) &&
                std::equal(factor, factor + nr, prev_factor)) {
                std::memcpy(dst, dst - W_ * C_, static_cast<std::size_t>(W_ * C_) * sizeof(M));
                continue;
            }
            prev_nr = nr;
            std::copy(rows, rows + nr, prev_rows);
            std::copy(factor, factor + nr, prev_factor);
            if (nr == 1 && direct_) {
                // The next rows of this plane with the same single covering row (2x2 stride
                // 2: the odd rows) are written with this one, not copied from it afterwards:
                // a row read less (2x2 stride 2 on 512x28x28, AVX-512: 42 -> 39 us).
                index_t copies = 1;
                if constexpr (R >= 2) {
                    const index_t plane_rows = R == 3 ? H : rows_per_n_;
                    for (index_t y2 = y + 1; y2 < plane_rows && item + copies < item_end; ++y2) {
                        index_t k = 0;
                        bool same = true;
                        backward_taps<R>(p_, R - 2, y2, [&](index_t o, index_t dv) {
                            const M* r = R == 3 ? src + (oz[0] * Ho + o) * row_ : src + o * row_;
                            const T f = R == 3 ? static_cast<T>(fz[0]) * static_cast<T>(dv) : static_cast<T>(dv);
                            same = same && k++ == 0 && r == rows[0] && f == factor[0];
                        });
                        if (!same || k != 1) break;
                        ++copies;
                    }
                }
                divide_into_columns(rows[0], factor[0], st, dst, copies);
                for (index_t c = 1; c < copies; ++c) {
                    ++item;
                    step();
                }
                continue;
            }
            if (!cached_ && divide_blocks(rows, factor, nr, st, dst)) continue;
            if (nr > slots_) {  // more rows than slots: summed whole, one at a time
                T* acc = st.row_sum();
                for (index_t a = 0; a < nr; ++a) {
                    const T* s = st.share(rows[a], factor[a]);
                    for (index_t i = 0; i < row_; i += L) (a == 0 ? V::load(s + i) : V::load(acc + i) + V::load(s + i)).store(acc + i);
                }
                gather(acc, C_, 0, C_, dst, st.scratch());
                continue;
            }
            // Least recently used first: none of this row's is evicted by the next.
            for (index_t a = 0; a < nr; ++a) shares[a] = st.share(rows[a], factor[a]);
            if (slide_) {
                slide_shares(shares, nr, dst);
                continue;
            }
            if (nr == 1) {
                gather(shares[0], C_, 0, C_, dst, st.scratch());
            } else if (cb_ == C_) {  // one block: the whole row, whole vectors into the zeros past it
                T* acc = st.row_sum();
                add_rows(shares, nr, 0, (row_ + L - 1) / L * L, acc);
                gather(acc, C_, 0, C_, dst, st.scratch());
            } else {
                T* acc = st.block_sum();
                each_block([&](index_t c0) {
                    for (index_t o = 0; o < Wo_; ++o) add_rows(shares, nr, o * C_ + c0, cb_, acc + o * cb_);
                    gather(acc, cb_, c0, cb_, dst, st.scratch());
                });
            }
        }
    }

private:
    // run() for R = 2 by output rows: the input rows whose last covering output row is q (at
    // most two at once) are made in one pass over q's columns. Each output's quotient is
    // made once a call into a ring row (slot q mod fused_slots) and kept for the rows that
    // end at q + 1 and q + 2; a row's column vectors are its quotient rows' sums in
    // ascending order, slid along the row as slide_block does. Every row's arithmetic is the
    // same whatever rows the call holds: bit-identical for every executor.
    void run_fused(const M* grad_out, M* grad_in, index_t item_begin, index_t item_end, state& st) const {
        const index_t n_row = W_ * C_;
        index_t n = item_begin / rows_per_n_, y = item_begin % rows_per_n_;
        for (index_t item = item_begin; item < item_end;) {
            const bw_row& row = rtab_[y];
            M* const dst = grad_in + item * n_row;
            index_t m = 1;
            if (row.n == 0) {  // no window taps this row
                for (index_t i = 0; i < n_row; i += L) vstore(V::splat(T(0)), dst + std::min(i, n_row - L));
            } else {
                const index_t q = taps_[row.first + row.n - 1].q;
                index_t nr[2] = {row.n, 0};
                if (item + 1 < item_end && y + 1 < rows_per_n_) {
                    const bw_row& next = rtab_[y + 1];
                    if (next.n > 0 && taps_[next.first + next.n - 1].q == q) {
                        m = 2;
                        nr[1] = next.n;
                    }
                }
                const M* const src = grad_out + n * out_n_;
                // The earlier quotient rows the pass reads, made where the ring lacks them.
                const T* qr[3] = {};
                for (index_t t = q - std::max(nr[0], nr[1]) + 1; t < q; ++t) {
                    const index_t s = t & (fused_slots - 1), key = n * out_rows_ + t;
                    T* const at = st.quotient_row(s);
                    if (st.quotient_key(s) != key) {
                        const T f = static_cast<T>(p_.axis(0)[t].divisor);
                        divide_row(src + t * row_, fixed_ ? nullptr : st.table(f), f, at);
                        st.quotient_key(s) = key;
                    }
                    qr[t - q + 2] = at;
                }
                const index_t s = q & (fused_slots - 1), key = n * out_rows_ + q;
                T* const cur = st.quotient_row(s);
                const bool make = st.quotient_key(s) != key;
                const T* tab = nullptr;
                if (make && !fixed_) tab = st.table(static_cast<T>(p_.axis(0)[q].divisor));
                M* const rows[2] = {dst, dst + n_row};
                const index_t nv = (C_ + L - 1) / L;
                // (3x3 stride 2: rows of two output rows then one, the quotients made here,
                // with no branch on them per column.)
                const bool pair = make && m == 2 && nr[0] == 2 && nr[1] == 1;
                const M* const g = src + q * row_;
                auto blocks = [&](auto pair) {
                    constexpr bool P = decltype(pair)::value;
                    for (index_t v0 = 0; v0 < nv;) {
                        const index_t left = nv - v0, u = left >= 4 ? 4 : left >= 2 ? 2 : 1;
                        switch (u) {
                            case 1: fused_block<1, P>(v0, g, tab, make, cur, qr, nr, m, rows); break;
                            case 2: fused_block<2, P>(v0, g, tab, make, cur, qr, nr, m, rows); break;
                            default: fused_block<4, P>(v0, g, tab, make, cur, qr, nr, m, rows); break;
                        }
                        v0 += u;
                    }
                };
                if (pair)
                    blocks(std::true_type{});
                else
                    blocks(std::false_type{});
                st.quotient_key(s) = key;
            }
            item += m;
            y += m;
            if (y == rows_per_n_) {
                y = 0;
                ++n;
            }
        }
    }

    // Vectors v0 .. v0 + U - 1 (the last shifted back to end at C) of run_fused's m rows
    // (dst[j], summing nr[j] quotient rows ending at q): g is output row q's gradients, made
    // into cur (make; tab its divisor table) or read from it; qr[0], qr[1] are rows q - 2 and
    // q - 1. Each output column's vertical sums are kept in registers until the last input
    // column tapping them is stored (slide_block's walk, its sums in the same order).
    // Pair: make, m = 2, nr = {2, 1} (the same arithmetic, known here).
    template <int U, bool Pair>
    void fused_block(index_t v0, const M* g, const T* tab, bool make_, T* cur, const T* const* qr, const index_t* nr,
                     index_t m, M* const* dst) const {
        // Members in locals: the vector stores may alias anything, which would reload them.
        const index_t C = C_, Wo = Wo_, n0 = Pair ? 2 : nr[0], n1 = Pair ? 1 : nr[1];
        const T *const p2 = qr[0], *const p1 = qr[1];
        M *const d0 = dst[0], *const d1 = dst[1];
        const bool two = Pair || m == 2, make = Pair || make_;
        index_t at[U];
        unrolled<U>([&](auto u) { at[u] = std::min((v0 + u) * L, C - L); });
        V a0[U], a1[U], a2[U], b0[U], b1[U], b2[U];  // each row's columns o - 2, o - 1, o
        // (Zeros never stored: the rows start at o = 0. All six set, for the compiler's sake.)
        unrolled<U>([&](auto u) { a0[u] = a1[u] = a2[u] = b0[u] = b1[u] = b2[u] = V::splat(T(0)); });
        auto vertical = [&](index_t rows, const V& c, index_t k) AVGPOOL_INLINE_LAMBDA {
            if (rows == 1) return c;
            if (rows == 2) return V::load(p1 + k) + c;
            return V::load(p2 + k) + V::load(p1 + k) + c;
        };
        auto column = [](index_t taps, const V& x0, const V& x1, const V& x2) AVGPOOL_INLINE_LAMBDA {
            if (taps == 1) return x2;
            if (taps == 2) return x1 + x2;
            if (taps == 0) return V::splat(T(0));
            return x0 + x1 + x2;
        };
        const index_t *const emit = walk_, *const taps = emit + Wo;
        for (index_t o = 0, x = 0; o < Wo; ++o) {
            V d, r;
            if (make) column_divisor(tab, o, d, r);
            unrolled<U>([&](auto u) {
                const index_t k = o * C + at[u];
                V c;
                if (make) {
                    c = divide_rounded(vload(g + k), d, r);
                    c.store(cur + k);
                } else {
                    c = V::load(cur + k);
                }
                a0[u] = a1[u];
                a1[u] = a2[u];
                a2[u] = vertical(n0, c, k);
                if (two) {
                    b0[u] = b1[u];
                    b1[u] = b2[u];
                    b2[u] = vertical(n1, c, k);
                }
            });
            const index_t ne = emit[o];
            if (ne == 2 && taps[x] == 2 && taps[x + 1] == 1) {  // 3x3 stride 2's interior, unbranched
                unrolled<U>([&](auto u) {
                    vstore(a1[u] + a2[u], d0 + x * C + at[u]);
                    vstore(a2[u], d0 + (x + 1) * C + at[u]);
                });
                if (two) {
                    unrolled<U>([&](auto u) {
                        vstore(b1[u] + b2[u], d1 + x * C + at[u]);
                        vstore(b2[u], d1 + (x + 1) * C + at[u]);
                    });
                }
                x += 2;
                continue;
            }
            for (const index_t end = x + ne; x < end; ++x) {
                const index_t t = taps[x];
                unrolled<U>([&](auto u) { vstore(column(t, a0[u], a1[u], a2[u]), d0 + x * C + at[u]); });
                if (two) unrolled<U>([&](auto u) { vstore(column(t, b0[u], b1[u], b2[u]), d1 + x * C + at[u]); });
            }
        }
    }

    // run() with the expanded rows: each input row from the plan's row table (its covering
    // output rows and outer factors, or an earlier row with the same ones).
    void run_expanded(const M* grad_out, M* grad_in, index_t item_begin, index_t item_end, state& st) const {
        const index_t n_row = W_ * C_;
        // out[0, n_row) = sum(k) by whole vectors, the last shifted back.
        auto put = [n_row](M* out, auto&& sum) {
            index_t i = 0;
            for (; i + L <= n_row; i += L) vstore(sum(i), out + i);
            if (i < n_row) vstore(sum(n_row - L), out + n_row - L);
        };
        const T* e[bw_max_rows];
        index_t n = item_begin / rows_per_n_, r = item_begin % rows_per_n_;
        for (index_t item = item_begin; item < item_end; ++item) {
            const bw_row& row = rtab_[r];
            M* const dst = grad_in + item * n_row;
            if (deferred(item, r, item_begin, item_end)) {
                // (made below, once the row a plane later is written)
            } else if (row.n == 0) {  // no window taps this row
                for (index_t i = 0; i < n_row; i += L) vstore(V::splat(T(0)), dst + std::min(i, n_row - L));
            } else if (row.copy >= 0 && item - (r - row.copy) >= item_begin &&
                       !deferred(item - (r - row.copy), row.copy, item_begin, item_end)) {  // written by this call
                std::memcpy(dst, dst - (r - row.copy) * n_row, static_cast<std::size_t>(n_row) * sizeof(M));
            } else {
                const M* const src = grad_out + n * out_n_;
                for (index_t t = 0; t < row.n; ++t) {
                    const bw_tap& tap = taps_[row.first + t];
                    // The row's home (the first input row it alone taps), when this call writes
                    // it: the expansion goes straight there.
                    T* home = nullptr;
                    if constexpr (std::is_same<M, T>::value) {
                        const index_t h = home_ == nullptr ? -1 : home_[tap.q];
                        if (h >= 0 && n * rows_per_n_ + h >= item_begin && n * rows_per_n_ + h < item_end)
                            home = grad_in + (n * rows_per_n_ + h) * n_row;
                    }
                    e[t] = st.expanded(src, n, tap.q, static_cast<T>(tap.factor), home);
                }
                if (R == 3 && halves_ != nullptr && (halves_[r] & 3) == 2) {  // as a deferred row sums its halves
                    put(dst, [&](index_t k) { return (V::load(e[0] + k) + V::load(e[1] + k)) + (V::load(e[2] + k) + V::load(e[3] + k)); });
                } else if (row.n > 1 || e[0] != static_cast<const void*>(dst)) {
                    // (A row that is its one tap's home holds it already.)
                    with_row_sum(e, row.n, [&](auto sum) { put(dst, sum); });
                }
            }
            // The row a plane before, deferred: the sum of the rows on each side of it.
            if (r >= plane_rows_ && deferred(item - plane_rows_, r - plane_rows_, item_begin, item_end)) {
                if constexpr (std::is_same<M, T>::value) {
                    const T *const a = dst - 2 * plane_rows_ * n_row, *const b = dst;
                    put(dst - plane_rows_ * n_row, [&](index_t k) { return V::load(a + k) + V::load(b + k); });
                }
            }
            if (++r == rows_per_n_) {
                r = 0;
                ++n;
            }
        }
    }

    // R = 3, storage T: whether input row `item` (row ri of its image) is the sum of the rows a
    // plane before and a plane after it (bw_halves), both written by this call; run_expanded
    // then makes it from them once the later one is written: the same bits as its expansions
    // summed by halves. 16 channels of 32x16x8, 3x3x3 stride 2: half the rows summed from
    // two rows, not from two or four expanded ones.
    bool deferred(index_t item, index_t ri, index_t item_begin, index_t item_end) const noexcept {
        if constexpr (R == 3 && std::is_same<M, T>::value) {
            return halves_ != nullptr && (halves_[ri] & 4) != 0 && item - plane_rows_ >= item_begin &&
                   item + plane_rows_ < item_end;
        } else {
            (void)item, (void)ri, (void)item_begin, (void)item_end;
            return false;
        }
    }

    // Rows whose shares would not stay in L1 (channels >= L): each channel block's vertical
    // sum made straight from the gradients, each run of rows with one outer factor summed then
    // divided once; false (nothing written) past most_runs_ runs.
    bool divide_blocks(const M* const* rows, const T* factor, index_t nr, state& st, M* dst) const {
        index_t end[factor_slots];
        const T* tab[factor_slots];
        index_t runs = 0;
        for (index_t a = 0; a < nr;) {
            if (runs == most_runs_) return false;
            index_t b = a + 1;
            while (b < nr && factor[b] == factor[a]) ++b;
            end[runs++] = b;
            a = b;
        }
        for (index_t u = 0, a = 0; u < runs; a = end[u++]) tab[u] = fixed_ ? nullptr : st.table(factor[a]);
        if (slide_) {
            slide_divided(rows, nr, end, tab, runs, dst);
            return true;
        }
        T* acc = st.block_sum();
        each_block([&](index_t c0) {
            if (runs == 1) {  // one run (the interior of most pools)
                with_row_sum(rows, nr, [&](auto sum) {
                    for (index_t o = 0; o < Wo_; ++o) {
                        V d, r;
                        column_divisor(tab[0], o, d, r);
                        for (index_t i = 0; i < cb_; i += L) {
                            const index_t j = std::min(i, cb_ - L);
                            divide_rounded(sum(o * C_ + c0 + j), d, r).store(acc + o * cb_ + j);
                        }
                    }
                });
            } else {
                many_runs(rows, end, tab, runs, c0, acc);
            }
            gather(acc, cb_, c0, cb_, dst, st.scratch());
        });
        return true;
    }

    // f(sum), sum(k) the vector at k summed over rows[0 .. nr) (nr >= 1): short sums unrolled,
    // longer ones in one pass (stores cost this machine about two loads). The sums capture by
    // reference: by value, 16 channels of 50x50 at stride 2 took 8% longer (8.1 -> 8.8-9.6 us).
    template <class S, class F>
    static void with_row_sum(const S* const* rows, index_t nr, F&& f) {
        const S *s0 = rows[0], *s1 = nr > 1 ? rows[1] : s0, *s2 = nr > 2 ? rows[2] : s0, *s3 = nr > 3 ? rows[3] : s0;
        switch (nr) {
            case 1: return f([&](index_t k) { return vload(s0 + k); });
            case 2: return f([&](index_t k) { return vload(s0 + k) + vload(s1 + k); });
            case 3: return f([&](index_t k) { return vload(s0 + k) + vload(s1 + k) + vload(s2 + k); });
            default:
                return f([&](index_t k) {
                    V v = vload(s0 + k) + vload(s1 + k) + vload(s2 + k) + vload(s3 + k);
                    for (index_t a = 4; a < nr; ++a) v = v + vload(rows[a] + k);
                    return v;
                });
        }
    }

    // slide over the cached shares: output column o's vector is the sum of its rows' shares.
    void slide_shares(const T* const* sh, index_t nr, M* dst) const {
        with_row_sum(sh, nr, [&](auto sum) {
            slide(dst, [&](index_t o) { return [&sum, at = o * C_](index_t k) { return sum(at + k); }; });
        });
    }

    // slide straight from the gradients: output column o's vector is, per run of rows with one
    // outer factor, the run's sum divided by that factor times column o's.
    template <class D>
    void slide_divided(const M* const* rows, index_t nr, const index_t* end, const T* const* tab, index_t runs,
                       D* dst) const {
        if (runs == 1) {
            return with_row_sum(rows, nr, [&](auto sum) {
                slide(dst, [&](index_t o) {
                    V d, r;
                    column_divisor(tab[0], o, d, r);
                    return [&sum, d, r, at = o * C_](index_t k) { return divide_rounded(sum(at + k), d, r); };
                });
            });
        }
        V d[factor_slots], r[factor_slots];  // column o's, refilled as slide asks for it
        slide(dst, [&](index_t o) {
            run_divisors(tab, runs, o, d, r);
            return [&, at = o * C_](index_t k) { return runs_total(rows, end, runs, d, r, at + k); };
        });
    }

    // Every input column of the row from its (at most three, consecutive) tapping output
    // columns, by blocks of up to four vectors of channels: column(o) gives the function
    // k -> output column o's vector at channel k. The output columns are made in order and
    // kept in registers until the last input column tapping them is stored.
    template <class D, class Column>
    void slide(D* dst, Column&& column) const {
        const index_t nv = (C_ + L - 1) / L;
        for (index_t v0 = 0; v0 < nv;) {
            // Every block repeats the whole column walk, so blocks are as wide as four vectors
            // (twelve column sums: with 16 registers some divisors spill, and still, AVX2
            // harness: 32 channels 3x3 stride 2 0.70-0.73x the cycles of pairs, 128 channels
            // 4x4 stride 3 0.77x), and never one vector alone after others (5 = 3 + 2; 24
            // channels: 0.70x the instructions of 2 + 1).
            const index_t left = nv - v0, u = left <= 4 ? left : left == 5 ? 3 : 4;
            switch (u) {
                case 1: slide_block<1>(v0, dst, column); break;
                case 2: slide_block<2>(v0, dst, column); break;
                case 3: slide_block<3>(v0, dst, column); break;
                default: slide_block<4>(v0, dst, column); break;
            }
            v0 += u;
        }
    }

    // Vectors v0 .. v0 + U - 1 (the last shifted back to end at C) of every input column. The
    // input columns each output column completes come from the plan's walk (bw_walk): decoding
    // the column lists in the loop cost more than the sums with one vector of channels (16
    // channels of 50x50 at stride 2, AVX-512: 7.4 -> 5.4 us), and building the walk per call
    // cost a third of a 1-D call of 0.5 us.
    template <int U, class D, class Column>
    void slide_block(index_t v0, D* dst, Column& column) const {
        // Members in locals: the vector stores may alias anything, which would reload them.
        const index_t C = C_, Wo = Wo_;
        index_t at[U];
        unrolled<U>([&](auto u) { at[u] = std::min((v0 + u) * L, C - L); });
        V q0[U], q1[U], q2[U];  // output columns o - 2, o - 1, o
        unrolled<U>([&](auto u) { q1[u] = q2[u] = V::splat(T(0)); });  // never stored: the rows start at o = 0
        // Input column x from the last n output columns made (none: zeros).
        auto put = [&](index_t x, index_t n) AVGPOOL_INLINE_LAMBDA {
            D* const out = dst + x * C;
            if (n == 1) {  // (branches, not a switch: its jump table measured slower)
                unrolled<U>([&](auto u) { vstore(q2[u], out + at[u]); });
            } else if (n == 2) {
                unrolled<U>([&](auto u) { vstore(q1[u] + q2[u], out + at[u]); });
            } else if (n == 0) {
                unrolled<U>([&](auto u) { vstore(V::splat(T(0)), out + at[u]); });
            } else {
                unrolled<U>([&](auto u) { vstore(q0[u] + q1[u] + q2[u], out + at[u]); });
            }
        };
        const index_t *const emit = walk_, *const taps = emit + Wo;
        for (index_t o = 0, x = 0; o < Wo; ++o) {
            auto make = column(o);
            unrolled<U>([&](auto u) {
                q0[u] = q1[u];
                q1[u] = q2[u];
                q2[u] = make(at[u]);
            });
            // The input columns whose last tapping column is o (and those no window taps).
            for (const index_t end = x + emit[o]; x < end; ++x) put(x, taps[x]);
        }  // at o = Wo - 1 the columns left either have no taps or end there: every x is stored
    }

    // f(c0) for each channel block c0 .. c0 + cb_ - 1, the last shifted back to end at C.
    template <class F>
    void each_block(F&& f) const {
        for (index_t c0 = 0;; c0 += cb_) {
            c0 = std::min(c0, C_ - cb_);
            f(c0);
            if (c0 + cb_ >= C_) return;
        }
    }

    void many_runs(const M* const* rows, const index_t* end, const T* const* tab, index_t runs, index_t c0, T* acc) const {
        V d[factor_slots], r[factor_slots];
        for (index_t o = 0; o < Wo_; ++o) {
            run_divisors(tab, runs, o, d, r);
            for (index_t i = 0; i < cb_; i += L) {
                const index_t j = std::min(i, cb_ - L);
                runs_total(rows, end, runs, d, r, o * C_ + c0 + j).store(acc + o * cb_ + j);
            }
        }
    }

    // Output column o's divisor and reciprocal for each run (tab[u]: run u's table).
    void run_divisors(const T* const* tab, index_t runs, index_t o, V* d, V* r) const noexcept {
        for (index_t u = 0; u < runs; ++u) column_divisor(tab[u], o, d[u], r[u]);
    }

    // The vector at k over several runs of rows (run u: rows end[u - 1] .. end[u] - 1): each
    // run's sum divided by d[u] (r[u] its reciprocal), the quotients added.
    V runs_total(const M* const* rows, const index_t* end, index_t runs, const V* d, const V* r, index_t k) const noexcept {
        V total;
        for (index_t u = 0, a = 0; u < runs; a = end[u++]) {
            V sum = vload(rows[a] + k);
            for (++a; a < end[u]; ++a) sum = sum + vload(rows[a] + k);
            const V q = divide_rounded(sum, d[u], r[u]);
            total = u == 0 ? q : total + q;
        }
        return total;
    }

    // acc[0 .. n) = the sum of sh[0 .. nr)[at .. at + n) (n >= L; the last vector shifted back
    // to end at n): short sums unrolled.
    static void add_rows(const T* const* sh, index_t nr, index_t at, index_t n, T* acc) noexcept {
        with_row_sum(sh, nr, [&](auto sum) {
            for (index_t i = 0; i < n; i += L) {
                const index_t j = std::min(i, n - L);
                sum(at + j).store(acc + j);
            }
        });
    }

    // One run()'s buffers: slots of share rows (the least recently used one refilled), the
    // sums, and the divisor tables of the last few outer factors.
    class state {
    public:
        // One allocation for all of it (none when it fits the state's own array).
        explicit state(const backward_cl& k) : k_(k) {
            const std::size_t need = static_cast<std::size_t>(k.arena_);
            T* at = local_;
            if (need > local_values) {
                heap_ = line_buffer<T>(need);
                at = heap_.get();
            }
            buf_ = at;
            for (index_t s = 0; s < k.slots_; ++s)  // zeros past each row: whole-vector reads
                std::fill(buf_ + s * k.pitch_ + k.row_, buf_ + (s + 1) * k.pitch_, T(0));
            sum_ = buf_ + k.slots_ * k.pitch_;
            block_ = sum_ + (k.sums_ ? k.pitch_ : 0);
            tables_ = block_ + (k.sums_ ? k.Wo_ * k.cb_ : 0);
            scratch_ = tables_ + (k.fixed_ ? 0 : 2 * factor_slots * k.table_);
            if (k.sums_)  // zeros past the row: gather's whole-vector reads of the shares
                std::fill(sum_ + k.row_, sum_ + k.pitch_, T(0));
            // The ring at a vector-aligned address (arena_ holds a vector more): its rows are
            // whole vectors apart, so no load of them splits a line.
            if (k.ering_ > 0) {
                ring_ = buf_ + (k.arena_ - k.ering_ * k.epitch_ - L);
                ring_ += (L - static_cast<index_t>(reinterpret_cast<std::uintptr_t>(ring_) / sizeof(T) % L)) % L;
            }
            std::fill(ring_key_, ring_key_ + k.ering_, index_t(-1));
        }

        // run_fused's quotient row in slot s, and which one it holds (n * output rows + q, or -1).
        T* quotient_row(index_t s) noexcept { return ring_ + s * k_.epitch_; }
        index_t& quotient_key(index_t s) noexcept { return ring_key_[s]; }

        T* row_sum() noexcept { return sum_; }      // a whole row's vertical sum (pitch_ values)
        T* block_sum() noexcept { return block_; }  // one channel block's (Wo * cb values)
        T* scratch() noexcept { return scratch_; }  // gather's block sums (2 Wo C values)

        // Output row q of image n (gradients at g + q * row_, outer factor f), divided and
        // expanded along the last axis: W * C values, from the ring or made into it. The
        // slot is q modulo the ring's size, which holds every row an input row gathers and,
        // for R = 3, the planes of all its first-axis outputs: their rows stay for the input
        // rows after.
        // home: where to make it instead of the ring (its home row, which holds exactly it).
        const T* expanded(const M* g, index_t n, index_t q, T f, T* home) {
            const index_t s = q & (k_.ering_ - 1), key = n * k_.out_rows_ + q;
            if (ring_key_[s] != key) {
                T* const out = home != nullptr ? home : ring_ + s * k_.epitch_;
                ring_key_[s] = key;
                ring_at_[s] = out;
                const T* tab = k_.fixed_ ? nullptr : table(f);
                const M* row = g + q * k_.row_;
                if (k_.slide_) {  // each quotient made in registers and added to its columns there
                    const index_t one = 1;
                    k_.slide_divided(&row, 1, &one, &tab, 1, out);
                } else {
                    k_.divide_row(row, tab, f, sum_);
                    k_.gather(sum_, k_.C_, 0, k_.C_, out, scratch_);
                }
            }
            return ring_at_[s];
        }

        // The shares of output row g (outer factor f), from a slot or computed into one.
        const T* share(const M* g, T f) {
            ++clock_;
            index_t victim = 0;
            for (index_t s = 0; s < k_.slots_; ++s) {
                if (key_[s] == g) {
                    used_[s] = clock_;
                    return buf_ + s * k_.pitch_;
                }
                if (used_[s] < used_[victim]) victim = s;
            }
            key_[victim] = g;
            used_[victim] = clock_;
            T* out = buf_ + victim * k_.pitch_;
            k_.divide_row(g, k_.fixed_ ? nullptr : table(f), f, out);
            return out;
        }

        // Divisors then reciprocals for outer factor f: per output column, or per value of
        // the row with fewer channels than a vector (lanes_).
        // Least recently used refilled: the up to factor_slots tables one row takes stay.
        const T* table(T f) {
            ++table_clock_;
            int t = 0;
            for (int u = 0; u < filled_; ++u) {
                if (tf_[u] == f) {
                    table_used_[u] = table_clock_;
                    return tables_ + 2 * u * k_.table_;
                }
                if (table_used_[u] < table_used_[t]) t = u;
            }
            if (filled_ < factor_slots) t = filled_++;
            table_used_[t] = table_clock_;
            tf_[t] = f;
            T* d = tables_ + 2 * t * k_.table_;
            if (!k_.lanes_) {
                for (index_t i = 0; i < k_.table_; ++i) {
                    d[i] = f * k_.last(i);  // exact
                    d[k_.table_ + i] = T(1) / d[i];
                }
                return d;
            }
            // Per value of the row: each output column's pair repeated over its C values
            // (formed once a column, with no integer division per value).
            for (index_t o = 0, i = 0; i < k_.table_; ++o) {
                const T div = f * k_.last(o), rec = T(1) / div;
                for (index_t c = 0; c < k_.C_; ++c, ++i) {
                    d[i] = div;
                    d[k_.table_ + i] = rec;
                }
            }
            return d;
        }

    private:
        static constexpr std::size_t local_values = 4096 / sizeof(T);
        const backward_cl& k_;
        alignas(64) T local_[local_values];
        line_buffer<T> heap_;
        T *buf_ = nullptr, *sum_ = nullptr, *block_ = nullptr, *tables_ = nullptr, *scratch_ = nullptr;
        T* ring_ = nullptr;
        index_t ring_key_[bw_cl_expand_slots];  // n * output rows + q of each ring row, or -1
        T* ring_at_[bw_cl_expand_slots];        // and where it is: its slot, or its home row
        const M* key_[max_slots] = {};
        index_t used_[max_slots] = {};
        index_t clock_ = 0;
        T tf_[factor_slots] = {};
        index_t table_used_[factor_slots] = {};
        index_t table_clock_ = 0;
        int filled_ = 0;
    };

    // The last axis's divisor factor of output column o.
    T last(index_t o) const noexcept { return static_cast<T>(p_.axis(R - 1)[o].divisor); }

    // The divisor and its reciprocal (as vectors) of output column o: from the table, or the
    // override's.
    void column_divisor(const T* tab, index_t o, V& d, V& r) const noexcept {
        d = V::splat(fixed_ ? override_ : tab[o]);
        r = V::splat(fixed_ ? T(1) / override_ : tab[table_ + o]);
    }

    // Row g's gradients divided by their divisors (tab: divisors then reciprocals for outer
    // factor f, or null for the override) into out: correctly rounded quotients either way.
    void divide_row(const M* g, const T* tab, T f, T* out) const {
        if (row_ < L) {
            for (index_t i = 0; i < row_; ++i)
                out[i] = sload(g[i]) / (fixed_ ? override_ : f * last(i / C_)) + T(0);  // (+ 0: a -0 gradient gives +0)
            return;
        }
        if (lanes_) {  // per-lane divisors; the last vector shifted back to end at the row's end
            for (index_t i = 0; i < row_; i += L) {
                const index_t j = std::min(i, row_ - L);
                V d, r;
                if (fixed_) {
                    column_divisor(tab, 0, d, r);
                } else {
                    d = V::load(tab + j);
                    r = V::load(tab + table_ + j);
                }
                divide_rounded(vload(g + j), d, r).store(out + j);
            }
            return;
        }
        for (index_t o = 0; o < Wo_; ++o) {
            V d, r;
            column_divisor(tab, o, d, r);
            for (index_t i = 0; i < C_; i += L) {
                const index_t j = std::min(i, C_ - L);
                divide_rounded(vload(g + o * C_ + j), d, r).store(out + o * C_ + j);
            }
        }
    }

    // Windows that do not overlap on the last axis, one output row: each quotient stored
    // straight to the columns its window taps, in `copies` consecutive input rows; columns no
    // window taps get zeros.
    void divide_into_columns(const M* g, T f, state& st, M* dst, index_t copies) const {
        const window* w = p_.axis(R - 1);
        const index_t dil = p_.geometry.dilations[R - 1];
        const T* tab = fixed_ ? nullptr : st.table(f);
        const index_t n_row = W_ * C_;
        for (index_t x = 0; x < W_; ++x)
            if (col_at_[x + 1] == col_at_[x])
                for (index_t c = 0; c < copies; ++c)
                    for (index_t i = 0; i < C_; i += L) vstore(V::splat(T(0)), dst + c * n_row + x * C_ + std::min(i, C_ - L));
        for (index_t o = 0; o < Wo_; ++o) {
            V d, r;
            column_divisor(tab, o, d, r);
            // Locals: the stores below could alias the window table.
            const index_t step = dil * C_;
            M* const first = dst + w[o].first * C_;
            const M* const src = g + o * C_;
            auto put = [&](auto count, auto quotient) {
                // Whole blocks of bw_cl_spread_block vectors of quotients (in registers), each
                // stored to every tap before the next: storing one vector to every tap in turn
                // wrote lines C values apart (a 7x7 window: 49 pages a vector; i3d's head,
                // 1024x8x7x7, spent 43% of its backward there).
                index_t i = 0;
                if (copies * count >= 4) {
                    for (; i + bw_cl_spread_block * L <= C_; i += bw_cl_spread_block * L) {
                        V q[bw_cl_spread_block];
                        for (index_t b = 0; b < bw_cl_spread_block; ++b) q[b] = quotient(vload(src + i + b * L));
                        for (index_t c = 0; c < copies; ++c)
                            for (index_t t = 0; t < count; ++t) {
                                M* const to = first + c * n_row + t * step + i;
                                for (index_t b = 0; b < bw_cl_spread_block; ++b) vstore(q[b], to + b * L);
                            }
                    }
                }
                for (; i < C_; i += L) {
                    const index_t j = std::min(i, C_ - L);
                    const V q = quotient(vload(src + j));
                    for (index_t c = 0; c < copies; ++c)
                        for (index_t t = 0; t < count; ++t) vstore(q, first + c * n_row + t * step + j);
                }
            };
            // A power-of-two divisor (2x2 stride 2, the common case here) divides by a
            // multiply, the same correctly rounded quotient, and two-wide windows are unrolled:
            // resnet50d's 256x56x56 2x2 transition, AVX2, 1.69M -> 0.65M instructions a call.
            // (+ 0: the quotient added to a zeroed grad_in, as every other path, so a -0
            // gradient gives +0.)
            if (power_of_two(fixed_ ? override_ : tab[o])) {
                const V zero = V::splat(T(0));
                auto times = [&](V a) { return a * r + zero; };
                if (w[o].count == 2)
                    put(std::integral_constant<index_t, 2>{}, times);
                else
                    put(w[o].count, times);
            } else {
                put(w[o].count, [&](V a) { return divide_rounded(a, d, r); });
            }
        }
    }

    // Channels c0 .. c0 + cb - 1 of each input column: the sum of the columns of `sum` (column
    // o at sum + o * pitch, readable a vector past the last) whose windows tap it.
    template <class D>
    void gather(const T* sum, index_t pitch, index_t c0, index_t cb, D* dst, T* scratch) const {
        const index_t n_in = W_ * C_;
        if (long_) {
            gather_blocks(sum, pitch, c0, cb, dst, scratch);
            return;
        }
        if (C_ >= L) {
            for (index_t x = 0; x < W_; ++x) {
                const index_t* o = col_ + col_at_[x];
                const index_t n = col_at_[x + 1] - col_at_[x];
                D* out = dst + x * C_ + c0;
                auto put = [&](auto&& f) { store_block(out, cb, f); };
                const T* p = sum + (n > 0 ? o[0] * pitch : 0);
                if (!ranges_ || n > 3) {
                    put([&](index_t j) { return column_sum(sum + j, pitch, o, n); });
                } else if (n == 3) {
                    put([&](index_t j) { return V::load(p + j) + V::load(p + pitch + j) + V::load(p + 2 * pitch + j); });
                } else if (n == 2) {
                    put([&](index_t j) { return V::load(p + j) + V::load(p + pitch + j); });
                } else if (n == 1) {
                    put([&](index_t j) { return V::load(p + j); });
                } else {
                    put([](index_t) { return V::splat(T(0)); });
                }
            }
            return;
        }
        if (n_in < L) {  // a whole row in less than a vector
            for (index_t x = 0; x < W_; ++x) {
                const index_t* o = col_ + col_at_[x];
                const index_t n = col_at_[x + 1] - col_at_[x];
                for (index_t i = 0; i < C_; ++i) {
                    T acc = T(0);
                    for (index_t t = 0; t < n; ++t) acc = t == 0 ? sum[o[t] * C_ + i] : acc + sum[o[t] * C_ + i];
                    sstore(acc, dst + x * C_ + i);
                }
            }
            return;
        }
        // Fewer channels than a vector: a whole vector per column, in ascending order, so each
        // store's spill into the next columns is overwritten by theirs; the columns whose
        // vector would pass the row's end go through a buffer.
        const index_t whole = (n_in - L) / C_ + 1;  // columns 0 .. whole - 1 store whole vectors
        for (index_t x = 0; x < W_; ++x) {
            const index_t* o = col_ + col_at_[x];
            const index_t n = col_at_[x + 1] - col_at_[x];
            const V acc = column_sum(sum, C_, o, n);
            if (x < whole) {
                vstore(acc, dst + x * C_);
            } else {
                alignas(64) T part[V::width];
                acc.store(part);
                for (index_t i = 0; i < C_; ++i) sstore(part[i], dst + x * C_ + i);
            }
        }
    }

    // gather for long ranges of tapping columns (van Herk / Gil-Werman, as the forward's
    // block_chunk): the output columns are cut into blocks of span_, each block's prefix and
    // suffix sums made once, and a range that crosses into the next block is the suffix of
    // one plus the prefix of the other; a range inside one block is its prefix or suffix
    // (ranges have span_ columns except where clipped at the row's ends), else summed.
    template <class D>
    void gather_blocks(const T* sum, index_t pitch, index_t c0, index_t cb, D* dst, T* scratch) const {
        const index_t K = span_;
        T* const pre = scratch;
        T* const suf = scratch + Wo_ * cb;
        // Column by column (contiguous channels: columns a page apart would share L1 sets).
        auto add = [&](T* to, const T* prev, const T* col) {
            for (index_t i = 0; i < cb; i += L) {
                const index_t j = std::min(i, cb - L);
                (prev ? V::load(prev + j) + V::load(col + j) : V::load(col + j)).store(to + j);
            }
        };
        for (index_t b0 = 0; b0 < Wo_; b0 += K) {
            const index_t e = std::min(b0 + K, Wo_);
            for (index_t o = b0; o < e; ++o) add(pre + o * cb, o == b0 ? nullptr : pre + (o - 1) * cb, sum + o * pitch);
            for (index_t o = e - 1; o >= b0; --o) add(suf + o * cb, o == e - 1 ? nullptr : suf + (o + 1) * cb, sum + o * pitch);
        }
        for (index_t x = 0; x < W_; ++x) {
            const index_t n = col_at_[x + 1] - col_at_[x];
            D* out = dst + x * C_ + c0;
            auto put = [&](auto&& f) { store_block(out, cb, f); };
            if (n == 0) {
                put([](index_t) { return V::splat(T(0)); });
                continue;
            }
            const index_t a = col_[col_at_[x]], b = a + n - 1, ba = a / K * K;
            if (b >= ba + K) {
                put([&](index_t j) { return V::load(suf + a * cb + j) + V::load(pre + b * cb + j); });
            } else if (a == ba) {
                put([&](index_t j) { return V::load(pre + b * cb + j); });
            } else if (b == std::min(ba + K, Wo_) - 1) {
                put([&](index_t j) { return V::load(suf + a * cb + j); });
            } else {
                put([&](index_t j) { return column_sum(sum + j, pitch, col_ + col_at_[x], n); });
            }
        }
    }

    // Channels j .. j + L - 1 of out from f(j), for each vector of a block of cb channels (the
    // last vector shifted back to end at cb).
    template <class D, class F>
    static void store_block(D* out, index_t cb, F&& f) {
        for (index_t i = 0; i < cb; i += L) {
            const index_t j = std::min(i, cb - L);
            vstore(f(j), out + j);
        }
    }

    // One vector of an input column: the sum over its n tapping columns o[] (pitch apart).
    V column_sum(const T* at, index_t pitch, const index_t* o, index_t n) const noexcept {
        if (n == 0) return V::splat(T(0));
        if (ranges_) {  // consecutive columns: short sums unrolled
            at += o[0] * pitch;
            switch (n) {
                case 1: return V::load(at);
                case 2: return V::load(at) + V::load(at + pitch);
                case 3: return V::load(at) + V::load(at + pitch) + V::load(at + 2 * pitch);
                case 4: return V::load(at) + V::load(at + pitch) + V::load(at + 2 * pitch) + V::load(at + 3 * pitch);
                default: break;
            }
            V acc = V::load(at);
            for (index_t t = 1; t < n; ++t) acc = acc + V::load(at + t * pitch);
            return acc;
        }
        V acc = V::load(at + o[0] * pitch);
        for (index_t t = 1; t < n; ++t) acc = acc + V::load(at + o[t] * pitch);
        return acc;
    }

    const plan_data<R>& p_;
    index_t C_ = 0, W_ = 0, Wo_ = 0, row_ = 0, pitch_ = 0, rows_per_n_ = 1, out_n_ = 0;
    index_t slots_ = 2, table_ = 0, cb_ = 1, arena_ = 0, span_ = 0, most_runs_ = factor_slots;
    bool fixed_ = false, lanes_ = false, direct_ = false, cached_ = true, long_ = false, slide_ = false;
    bool sums_ = true;    // the arena holds a row's and a block's sums
    // The expanded rows (expand_): the plan's row tables, the ring's rows (ering_, each
    // epitch_ values).
    bool expand_ = false;
    const bw_tap* taps_ = nullptr;
    const bw_row* rtab_ = nullptr;
    index_t ering_ = 0, epitch_ = 0, out_rows_ = 1;
    const index_t* home_ = nullptr;  // per output row of an image, its home input row, or -1 (the plan's; none: null)
    bool ranges_ = true;  // every column's tapping columns are consecutive
    T override_ = T(0);
    // Output columns tapping each input column x: col_[col_at_[x] .. col_at_[x + 1]) (the plan's).
    const index_t* col_ = nullptr;
    const index_t* col_at_ = nullptr;
    const index_t* walk_ = nullptr;  // the plan's bw_walk (slide_)
    bool fused_ = false;             // run_fused (2-D): the ring holds quotient rows
    index_t plane_rows_ = 1;                   // R = 3: input rows of a plane (H)
    const unsigned char* halves_ = nullptr;  // R = 3: the plan's bw_halves (expand_), or null
};

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_BACKWARD_HPP
