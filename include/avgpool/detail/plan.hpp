// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The validated, resolved description of one pooling that every kernel runs from.
#ifndef AVGPOOL_DETAIL_PLAN_HPP
#define AVGPOOL_DETAIL_PLAN_HPP

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "../types.hpp"
#include "windows.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

/// The backward row tables' entries (backward.hpp; channels-first's walk, channels-last's
/// expanded rows): an outer output row q (first-axis output o0) that taps an outer input row,
/// with the outer axes' divisors multiplied.
struct bw_tap {
    index_t o0, q, factor;
};
/// An outer input row's taps, bw_taps[first, first + n), and an earlier row with the same ones
/// (or -1).
struct bw_row {
    index_t first, n, copy;
};

/// What the channels-last kernel needs to know about a plan's windows (cl_measure in
/// kernel_cl.hpp), measured once when the plan is made: per call it took a sixth of a
/// 64-channel 1-D pool of 16 outputs.
struct cl_extent {
    index_t outer_rows = 1;  // bound on the input rows of one output row
    index_t span_all = 0;    // input columns from the row's first tap to its last
    index_t max_span = 0;    // the widest single window of the last axis (columns)
    bool fits_rows = true;
};

// The whole-plane permute kernels' tables (kernel_perm.hpp, AVX-512 builds), built once per
// plan: building them took longer than 16 planes' sums.
struct perm_plane_tables;
class perm_plane_backward;
struct px_bshape;

// One permute's lane indices, a cache line each (a table vector split over two lines cost 5%
// on 112x112 planes), so that kernels read them in place.
struct alignas(64) lane_table {
    std::int32_t lane[16];
};

template <std::size_t R>
struct backward_cell;
template <std::size_t R>
struct backward_tables;

template <std::size_t R>
struct plan_data {
    dims<R + 2> input_shape{};   // logical {N, C, spatial...}
    dims<R + 2> output_shape{};  // logical {N, C, spatial_out...}
    pool_geometry<R> geometry{};
    // The layout the kernels run: channels-first for one channel whatever was asked, as
    // N[D]HWC and NC[D]HW then hold the same bytes in the same order (channels-last kernels
    // run their vectors over the channels, so one channel left them 4-25x slower). The
    // caller's choice is kept in requested_layout.
    layout memory_layout = layout::channels_first;
    layout requested_layout = layout::channels_first;
    divisor_type divisor = divisor_type::exclude_pad;  // resolved: never full_kernel_if_padded
    index_t divisor_override = 0;
    bool empty_window_nan = false;
    // windows[offset[a] + o] is output index o of spatial axis a.
    std::vector<window> windows;
    std::array<std::size_t, R> offset{};

    bool adaptive = false;  // windows from create_adaptive: kernel / strides / pads do not apply

    // For the fast kernels, derived once from the windows:
    bool global = false;       // one window covering the whole input on every axis
    double max_divisor = 0.0;  // bound on any divisor (must be exact in the element type)
    cl_extent cl_ext{};        // cl_measure(*this)
    // Last axis divisor factor per output, with an empty window's 0 made 1 (sum 0 / 1 = 0) or
    // kept 0 under empty_window_nan (0 / 0 = NaN); padded with 1s for whole-vector reads.
    std::vector<float> last_div_f;
    std::vector<double> last_div_d;
    // The same for backward, where an empty window's 0 is always made 1: its share then lands
    // only on padding, which is never copied back. Empty (last_backward_divisor() then reads
    // last_div) unless empty_window_nan left a 0 there.
    std::vector<float> last_bdiv_f;
    std::vector<double> last_bdiv_d;

    // The flattened kernel's divisors, one per output of a plane (R = 2) or of a block of rows
    // (R = 1), empty windows adjusted as above; empty when that kernel does not apply.
    std::vector<float> flat_div_f;
    std::vector<double> flat_div_d;

    // The same-grid kernel's horizontal tap masks (kernel_same.hpp): for tap j, at
    // [j * (m + pad) + i], all bits set where position i of an m-long segment (a plane or a row)
    // reads inside its row, else 0 (also past m); empty when that kernel does not apply.
    std::vector<float> same_mask_f;
    std::vector<double> same_mask_d;
    // The same for backward's flipped windows (pad_left' = kernel - 1 - pad_left).
    std::vector<float> same_bmask_f;
    std::vector<double> same_bmask_d;
    // flat3()'s lane masks (3x3 pad 1, planes 2 to 63 wide; else empty): for 16-lane vector j
    // of a plane, at [2 j] the lanes whose left tap and at [2 j + 1] those whose right tap lie
    // inside the row and the plane. The same for forward and backward (the pads are symmetric).
    std::vector<std::uint16_t> same_kmask;
    // 1 / divisor per output of a plane (rounded once from the exact divisor; empty windows as
    // in flat_div), for the same-grid and tile kernels; empty when neither applies.
    std::vector<float> plane_rdiv_f;
    std::vector<double> plane_rdiv_d;
    // R = 2: whether rows 1 .. H - 2 of those reciprocals are all alike (H >= 3).
    bool plane_rdiv_inner_rows = false;
    // The permute kernel's input rows per outer output row (kernel_perm.hpp); empty when that
    // kernel does not apply.
    std::vector<index_t> perm_rows;
    // Whether s2_geometry() held when the plan was made: it walks every window, which on
    // calls of a few microseconds cost about 5% each time (17 planes of 30x30).
    bool s2_forward = false;
    // R = 2, planes of at most 64 inputs (perm_plane_geometry): the whole-plane forward's
    // tables; null where they do not apply (its backward's: backward_tables::perm_plane_b).
    std::shared_ptr<const perm_plane_tables> perm_plane_f;
    // Its horizontal tables (perm_horizontal): chunk triples, lane indices and masks per chunk
    // and tap, and the tap count.
    std::vector<index_t> perm_hchunks;
    std::vector<lane_table> perm_hidx;
    // The same tables for bfloat16 storage, which loads 32 columns at once and splits them
    // into even and odd columns (the permutes' two sources): column v at lane v / 2 or 16 + v / 2.
    std::vector<lane_table> perm_hidx_eo;
    std::vector<std::uint16_t> perm_hmask;
    index_t perm_htaps = 0;
    // 3-D pools it runs slice-sums first (perm_slices_first): per first-axis output the slice
    // offsets its window sums, per second-axis output the row offsets in a slice (-1: none),
    // each padded to the longest window; empty otherwise.
    std::vector<index_t> perm_slices, perm_hrows;
    // The pixel kernel (kernel_pixels.hpp: channels-last, 2-8 channels, a plan the flattened
    // one does not take) runs this plan, with 1 / last_div_f per last-axis output (padded as
    // it is; an empty window's 0 gives inf).
    bool pixel_kernel = false;
    std::vector<float> px_rdiv;
    // Whether this is a flipped plan (backward_tables::flipped): it needs forward tables only.
    bool flipped_own = false;
    // The tile kernel's (kernel_tile.hpp) lists, per axis a, of the outputs with a tap at each
    // input x, ascending: tile_cover[tile_cover_at[tile_cover_axis[a] + x] ..
    // tile_cover_at[tile_cover_axis[a] + x + 1]); empty when that kernel does not apply.
    std::vector<index_t> tile_cover, tile_cover_at;
    std::array<std::size_t, R> tile_cover_axis{};

    template <class T>
    const T* plane_reciprocals() const noexcept {
        if constexpr (sizeof(T) == sizeof(float)) {
            return plane_rdiv_f.data();
        } else {
            return plane_rdiv_d.data();
        }
    }

    template <class T>
    const T* same_masks(bool transpose) const noexcept {
        if constexpr (sizeof(T) == sizeof(float)) {
            return transpose ? same_bmask_f.data() : same_mask_f.data();
        } else {
            return transpose ? same_bmask_d.data() : same_mask_d.data();
        }
    }

    template <class T>
    const T* flat_divisor() const noexcept {
        if constexpr (sizeof(T) == sizeof(float)) {
            return flat_div_f.data();
        } else {
            return flat_div_d.data();
        }
    }

    template <class T>
    const T* last_backward_divisor() const noexcept {
        if constexpr (sizeof(T) == sizeof(float)) {
            return last_bdiv_f.empty() ? last_div_f.data() : last_bdiv_f.data();
        } else {
            return last_bdiv_d.empty() ? last_div_d.data() : last_bdiv_d.data();
        }
    }

    template <class T>
    const T* last_divisor() const noexcept {
        if constexpr (sizeof(T) == sizeof(float)) {
            return last_div_f.data();
        } else {
            return last_div_d.data();
        }
    }

    // The backward tables (backward_tables): readers call bwd() after the plan's
    // build_backward, the builders write through bwd_mut() under the cell's lock.
    std::shared_ptr<backward_cell<R>> lazy = std::make_shared<backward_cell<R>>();
    const backward_tables<R>& bwd() const noexcept { return lazy->tables; }
    backward_tables<R>& bwd_mut() const noexcept { return lazy->tables; }

    const window* axis(std::size_t a) const noexcept { return windows.data() + offset[a]; }

    std::array<index_t, R> cover_max{};  // per axis, the most outputs cover() lists for one input

    /// The transposed windows: the outputs of axis a whose window span reaches input x, as
    /// first = o_lo and count (each still checked for a tap at x: dilation leaves holes;
    /// divisor unset). Computed, not tabled: a table per input position took 24 bytes each
    /// (805 MB for a global pool of a 2^25-long row). Fixed windows by arithmetic on the
    /// spans o * s - pb .. o * s - pb + (k - 1) * d; table windows (adaptive, and the flipped
    /// plan's) by a binary search for the first, as their starts and ends never decrease and
    /// none is empty.
    window cover(std::size_t a, index_t x) const noexcept {
        const index_t O = geometry.output[a];
        index_t lo = 0, hi = 0;
        if (adaptive) {
            const window* w = axis(a);
            index_t n = O;  // lo: the first window ending past x
            while (n > 0) {
                const index_t half = n / 2;
                if (w[lo + half].first + w[lo + half].count <= x) {
                    lo += half + 1;
                    n -= half + 1;
                } else {
                    n = half;
                }
            }
            hi = lo;  // the first window starting past x: a walk, as callers walk the ones before
            while (hi < O && w[hi].first <= x) ++hi;
        } else {
            const index_t s = geometry.strides[a], P = x + geometry.pads_begin[a];  // padded position
            const index_t reach = (geometry.kernel[a] - 1) * geometry.dilations[a];  // span - 1
            if (s == 1) {  // (no division: plan building asks for every input of the axis)
                lo = std::min(O, std::max<index_t>(0, P - reach));
                hi = std::min(O, std::max<index_t>(0, P + 1));
            } else {
                lo = P - reach <= 0 ? 0 : std::min(O, (P - reach + s - 1) / s);
                hi = P < 0 ? 0 : std::min(O, P / s + 1);
            }
        }
        window c{};
        c.first = lo;
        c.count = hi > lo ? hi - lo : 0;
        return c;
    }

    index_t input_spatial_volume() const noexcept {
        index_t v = 1;
        for (std::size_t a = 0; a < R; ++a) v *= input_shape[a + 2];
        return v;
    }
    // Records the caller's layout and picks the kernels' (see memory_layout; tests may keep
    // the requested one).
    void set_layout(layout requested, bool one_channel_first) noexcept {
        requested_layout = requested;
        memory_layout = one_channel_first && input_shape[1] == 1 ? layout::channels_first : requested;
    }

    index_t output_spatial_volume() const noexcept {
        index_t v = 1;
        for (std::size_t a = 0; a < R; ++a) v *= output_shape[a + 2];
        return v;
    }
};

/// The tables only the backward pass reads, derived from a plan's windows on its first backward
/// call (pooling::build_backward), not when it is made, so that forward-only users (inference,
/// the one-call functions) never build them: making a 1x3x32x32 3x3 stride-2 plan took 7.4 us
/// with them and 2.8 us without (best of 50, -march=native).
template <std::size_t R>
struct backward_tables {
    // The permute kernel's (kernel_perm.hpp): per outer input row, the outer output rows
    // summing it; per input column, the outputs tapping it (perm_btaps per column).
    std::vector<index_t> perm_brows, perm_bcols;
    index_t perm_btaps = 0;
    // Per 16-column vector of an input row, the first output it gathers (empty when the
    // backward kernel does not apply).
    std::vector<index_t> perm_bbase;
    std::vector<std::int32_t> perm_bidx;  // and per vector and cover slot, lanes and masks
    std::vector<std::uint16_t> perm_bmask;
    // Its separable form's outer transposes (perm_backward_outer; empty when the form does not
    // apply): per outer axis a, from perm_bouter_at[a], perm_bouter_k[a] outputs per input.
    std::vector<index_t> perm_bouter;
    std::array<index_t, R> perm_bouter_at{}, perm_bouter_k{};
    // R = 2, planes of at most 64 inputs: the whole-plane permute backward; null where it
    // does not apply.
    std::shared_ptr<const perm_plane_backward> perm_plane_b;
    // The stride-2 backward's covering output rows per outer input row, s2_bcount of them each
    // (s2_backward_table in kernel_stride2.hpp); empty when that kernel does not apply.
    std::vector<std::int32_t> s2_brows;
    index_t s2_bcount = 0;
    // Where every row gathers its last output row and perhaps the one before, and the rows'
    // last ones rise: per outer input row, how many it gathers, and per output row q the
    // first input row written after it is expanded (s2_bgroup[q], nr + 1 of them); else empty.
    std::vector<std::int32_t> s2_bstream;
    std::vector<index_t> s2_bgroup;
    // Output rows [s2_bfast_first, s2_bfast_end) whose groups are two rows gathering
    // (s2_bfast 1) the output row alone, both, or (2) the one before and it, then it alone.
    int s2_bfast = 0;
    index_t s2_bfast_first = 0, s2_bfast_end = 0;
    // The backward row tables (backward.hpp: channels-first's walk, channels-last's expanded
    // rows), built once here rather than per call (a 20x40x60 plane spent 14 us of each 32 us
    // call building them); empty when no kernel reads them or the plane passes bw_table_rows /
    // bw_table_taps.
    std::vector<bw_tap> bw_taps;
    std::vector<bw_row> bw_rows;
    // The channels-last backward's per input column lists of the output columns tapping it:
    // bw_cols[bw_col_at[x] .. bw_col_at[x + 1]) (built once; empty for channels-first).
    std::vector<index_t> bw_cols, bw_col_at;
    // What backward_cl reads of those lists (build_backward_cl_facts), once per plan rather
    // than per call (a third of a 0.5 us 1-D call): every column's tapping columns consecutive
    // (ranges), none tapped twice (scatter), the most tapping one column (span). With ranges,
    // span <= 3, each tapped column's last tapping column at least the previous tapped
    // column's, and a vector of channels: the walk of slide_block, Wo counts of the input
    // columns each output column completes, then W tap counts; else empty.
    bool bw_col_ranges = true, bw_col_scatter = true;
    index_t bw_col_span = 0;
    std::vector<index_t> bw_walk;
    // With bw_rows, per output row of an image its home: the first input row that it alone
    // taps, or -1; bw_homes of them are set.
    std::vector<index_t> bw_home;
    index_t bw_homes = 0;
    // R = 3, with bw_rows: per input row of an image, k (1 or 2) where its taps are two halves
    // of k, each the same output rows of one first-axis output, else 0; plus 4 where the rows
    // a plane before and after it hold exactly those halves (backward_cl sums those two).
    std::vector<unsigned char> bw_halves;
    // R = 2, with bw_rows: every input row gathers at most three consecutive output rows and
    // all but four of the tapped rows pair (a row of output rows q - 1 and q, then one of q
    // alone), as 3x3 stride 2's do: backward_cl's run_fused.
    bool bw_rows_paired = false;
    // Channels-last plans at stride 1 (flip_geometry): the plan of the flipped windows (pads
    // kernel - 1 - pad) over the output extents, whose sum of the divided gradients is the
    // backward pass (backward_cl_flip); null otherwise, and in that plan itself (flipped_own).
    std::shared_ptr<const plan_data<R>> flipped;
    // The pixel kernel's backward (px_backward) runs the backward pass where this is set.
    std::shared_ptr<const px_bshape> px_b;
};

/// A plan's backward tables and what builds them once, whichever thread asks first. Shared by
/// copies of the plan: the tables depend only on its windows, which never change. A mutex, not
/// std::call_once: libstdc++'s call_once fails (std::system_error) in programs not linked with
/// -pthread on older C libraries, where its mutex locks do nothing, as then no other thread runs.
template <std::size_t R>
struct backward_cell {
    std::mutex lock;
    std::atomic<bool> built{false};  // set once the tables are whole (release; read acquire)
    backward_tables<R> tables;
};

/// Element strides of a tensor with logical shape {N, C, spatial...} in a memory layout:
/// result[0] = batch, [1] = channel, [2 + a] = spatial axis a.
template <std::size_t R>
inline dims<R + 2> element_strides(const dims<R + 2>& shape, layout lay) noexcept {
    dims<R + 2> st{};
    const index_t C = shape[1];
    index_t inner = (lay == layout::channels_last) ? C : 1;
    for (std::size_t a = R; a-- > 0;) {
        st[a + 2] = inner;
        inner *= shape[a + 2];
    }
    // inner is now the spatial volume (times C for channels-last).
    if (lay == layout::channels_last) {
        st[1] = 1;
        st[0] = inner;
    } else {
        st[1] = inner;
        st[0] = inner * C;
    }
    return st;
}

/// The divisor of one window: the override, or the product of the per-axis factors; `empty` is
/// set when that product is 0 (the window counts no tap).
template <std::size_t R>
inline double window_divisor(const plan_data<R>& p, const window* const* w, bool& empty) noexcept {
    empty = false;
    if (p.divisor_override > 0) return static_cast<double>(p.divisor_override);
    double div = 1.0;
    for (std::size_t a = 0; a < R; ++a) div *= static_cast<double>(w[a]->divisor);
    empty = div == 0.0;
    return div;
}

/// Element conversions through double: float and double directly, the 16-bit storage types
/// through float (their only conversion).
template <class T>
inline double to_double(T x) noexcept {
    if constexpr (std::is_floating_point<T>::value) {
        return static_cast<double>(x);
    } else {
        return static_cast<double>(static_cast<float>(x));
    }
}
template <class T>
inline T from_double(double v) noexcept {
    if constexpr (std::is_floating_point<T>::value) {
        return static_cast<T>(v);
    } else {
        return T(static_cast<float>(v));
    }
}

/// Whether input x of outer axis a gathers exactly the outputs x - 1 does. Without dilation
/// every output whose span reaches an input taps it (adaptive spans are their windows), so
/// equal cover ranges mean equal sets; with dilation, say no.
template <std::size_t R>
bool same_taps_as_previous(const plan_data<R>& p, std::size_t a, index_t x) noexcept {
    if (x == 0 || p.geometry.dilations[a] != 1) return false;
    const window c = p.cover(a, x), b = p.cover(a, x - 1);
    return c.first == b.first && c.count == b.count;
}

/// The value written for a window with no counted tap.
template <class T>
inline T empty_window_value(bool nan) noexcept {
    return from_double<T>(nan ? std::numeric_limits<double>::quiet_NaN() : 0.0);
}

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_PLAN_HPP
