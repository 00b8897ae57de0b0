// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The permute kernel, for channels-first float planes whose input rows fit two AVX-512 vectors
// (W <= 32) and whose output rows fit one (Wo <= 16): ShuffleNet's 3x3 stride-2 pools on 7x7
// to 28x28, DenseNet's 2x2 on 14x14, 3-D pools on 16^3. On such planes the row kernels spend
// more on setting up each row than on the sums, and the tile kernel on its transposes. Here an
// output row is the sum of its window's input rows, whole rows in registers (masked loads, so
// nothing past a row is read), then one two-source permute per horizontal tap: lane o of tap t
// takes column first(o) + t * dilation, zeroed where t is past that window's count. Padding,
// dilation, ceil rounding and adaptive windows all live in the index tables, so there are no
// edge cases. Rows of at most 16 with output rows of at most 8 pack two consecutive output rows
// into one vector (the second row's vertical sum is the permute's second source), which halves
// the horizontal work and the stores. Every lane does the same operations whichever rows share
// its vector, so results do not depend on how a call is split. bfloat16 storage loads a row's
// 32 columns at once and splits them into the even and the odd columns (a shift, an AND),
// which the permutes read through remapped tables: no widening shuffle per 16 values.
#ifndef AVGPOOL_DETAIL_KERNEL_PERM_HPP
#define AVGPOOL_DETAIL_KERNEL_PERM_HPP

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "convert.hpp"
#include "kernel_pair.hpp"
#include "plan.hpp"
#include "reference.hpp"
#include "simd.hpp"

// Where convert.hpp has the masked 16-bit loads and stores (AVX-512 with BW and VL): float
// and 16-bit storage take the kernel together, so a 16-bit result stays the float result
// rounded once.
#define AVGPOOL_PERM_KERNEL AVGPOOL_MASKED_HALF

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

// Horizontal taps (one permute each) and input rows summed per output row; past these the
// other kernels' costs no longer dominate.
constexpr index_t perm_max_taps = 8;
constexpr index_t perm_max_rows = 64;
// Outer output rows per plane (every axis but the last): bounds the row tables.
constexpr index_t perm_max_outer = index_t(1) << 16;
// Chunks of an output row (each up to 16 outputs reading up to 32 columns).
constexpr index_t perm_max_chunks = 4;

/// Cuts the last axis's outputs into chunks of at most 16 consecutive outputs whose taps all
/// fall within 32 columns of the chunk's base column (0 for the first chunk, else the first
/// column any of its windows reads): calls f(first output, outputs, base) per chunk and returns
/// the number of chunks, or 0 if some window alone spans more than 32 columns.
template <std::size_t R, class F>
index_t perm_chunks(const plan_data<R>& p, F&& f) {
    const window* w = p.axis(R - 1);
    const index_t Wo = p.geometry.output[R - 1], d = p.adaptive ? 1 : p.geometry.dilations[R - 1];
    index_t chunks = 0;
    for (index_t o0 = 0, o = 0; o0 < Wo; o0 = o) {
        index_t lo = o0 == 0 ? 0 : -1, hi = -1;  // columns read so far (lo < 0: none yet)
        for (o = o0; o < Wo && o - o0 < 16; ++o) {
            if (w[o].count == 0) continue;
            const index_t first = w[o].first, last = first + (w[o].count - 1) * d;
            const index_t nlo = lo < 0 ? first : std::min(lo, first), nhi = std::max(hi, last);
            if (nhi - nlo >= 32) break;
            lo = nlo;
            hi = nhi;
        }
        if (o == o0) return 0;
        f(o0, o - o0, lo < 0 ? index_t(0) : lo);
        ++chunks;
    }
    return chunks;
}

// Input bytes per block of planes that the forward kernel runs chunk by chunk (in L1).
constexpr index_t perm_block_bytes = 32768;

/// Whether the forward kernel packs two rows per vector (one chunk, rows of at most 16
/// columns and 8 outputs).
constexpr bool perm_packed(index_t chunks, index_t W, index_t Wo) noexcept { return chunks == 1 && W <= 16 && Wo <= 8; }

/// Whether the geometry suits the permute kernel (float storage only; AVX-512 builds only).
template <std::size_t R>
bool perm_geometry(const plan_data<R>& p) noexcept {
    if (!AVGPOOL_PERM_KERNEL || R > 3 || p.memory_layout != layout::channels_first || p.global) return false;
    const pool_geometry<R>& g = p.geometry;
    const index_t W = g.input[R - 1], Wo = g.output[R - 1];
    // 2-D planes 8 wide or less: the tile kernel (7x7: 6.5 against 7.6 us for 576 planes) and
    // the same-grid kernel's two-rows-per-vector path (8x8 stride 1) are faster there.
    if (R == 2 && W <= 8) return false;
    // Windows covering every axis but the first whole: cf_kernel sums each slice once (I3D's
    // 2x7x7 head on 8x7x7: 0.6x this kernel's time, session 51).
    if (cf_slices_geometry<float, R>(p)) return false;
    const window* w = p.axis(R - 1);
    for (index_t o = 0; o < Wo; ++o)
        if (w[o].count > perm_max_taps) return false;
    const index_t chunks = perm_chunks<R>(p, [](index_t, index_t, index_t) {});
    if (chunks < 1 || chunks > perm_max_chunks) return false;
    // Rows of several chunks pay at stride 2 and more (3x3 on 56x56: 11.6 against 14.2 us for
    // 24 planes), not at stride 1 (the same-grid and block kernels: 3x3 on 20x20, 8.6 against
    // 16 us) nor for whole 2x2 blocks (the 2x2 kernel: 35 against 48 us on 56x56).
    if (chunks > 1 && (p.adaptive || g.strides[R - 1] < 2 || pair_geometry<R>(p))) return false;
    index_t rows = 1, outer = 1;
    for (std::size_t a = 0; a + 1 < R; ++a) {
        index_t most = 0;
        const window* wa = p.axis(a);
        for (index_t o = 0; o < g.output[a]; ++o) most = std::max(most, wa[o].count);
        rows *= std::max<index_t>(most, 1);
        outer *= g.output[a];
        if (rows > perm_max_rows || outer > perm_max_outer) return false;
    }
    return true;
}

/// The forward kernel's horizontal tables, built once per plan (building them took a third of
/// a 1-D call on 32 rows of 100): its chunks as (first output, outputs, first column) triples,
/// and per chunk and tap (taps: the most taps of any window) 16 lane indices into the chunk's
/// two column vectors and a lane mask. Two rows share a vector (pack) when one chunk holds a
/// row of at most 16 columns and 8 outputs: the second row's lanes Wo .. 2 Wo - 1 read the
/// second vector.
template <std::size_t R>
void perm_horizontal(const plan_data<R>& p, std::vector<index_t>& chunks, std::vector<lane_table>& idx,
                     std::vector<lane_table>& idx_eo, std::vector<std::uint16_t>& mask, index_t& taps) {
    const window* w = p.axis(R - 1);
    const index_t W = p.geometry.input[R - 1], Wo = p.geometry.output[R - 1];
    const index_t d = p.adaptive ? 1 : p.geometry.dilations[R - 1];
    chunks.clear();
    perm_chunks<R>(p, [&](index_t o0, index_t n, index_t base) { chunks.insert(chunks.end(), {o0, n, base}); });
    const index_t nch = static_cast<index_t>(chunks.size()) / 3;
    const bool pack = perm_packed(nch, W, Wo);
    taps = 0;
    for (index_t o = 0; o < Wo; ++o) taps = std::max(taps, w[o].count);
    const index_t K = std::max<index_t>(taps, 1);
    idx.assign(static_cast<std::size_t>(nch * K), lane_table{});
    mask.assign(static_cast<std::size_t>(nch * K), 0);
    for (index_t ch = 0; ch < nch; ++ch) {
        const index_t o0 = chunks[static_cast<std::size_t>(3 * ch)], n = chunks[static_cast<std::size_t>(3 * ch + 1)],
                      base = chunks[static_cast<std::size_t>(3 * ch + 2)];
        for (index_t t = 0; t < taps; ++t) {
            std::uint32_t m = 0;
            std::int32_t* lanes = idx[static_cast<std::size_t>(ch * K + t)].lane;
            for (index_t i = 0; i < n; ++i) {
                const window& wi = w[o0 + i];
                if (t >= wi.count) continue;
                // Tap t of output o reads column first + t * d, relative to the chunk's base.
                const auto col = static_cast<std::int32_t>(wi.first + t * d - base);
                lanes[i] = col;
                m |= 1u << i;
                if (pack) {
                    lanes[Wo + i] = 16 + col;
                    m |= 1u << (Wo + i);
                }
            }
            mask[static_cast<std::size_t>(ch * K + t)] = static_cast<std::uint16_t>(m);
        }
    }
    // bfloat16's tables: column v of the chunk's 32 at lane v / 2 (the even columns, the
    // first source) or 16 + v / 2 (the odd ones, the second).
    idx_eo = idx;
    for (lane_table& tab : idx_eo)
        for (std::int32_t& v : tab.lane) v = v % 2 != 0 ? 16 + v / 2 : v / 2;
}

// Row offsets of the window product over the outer axes a .. R - 2, from base (in rows).
template <std::size_t R>
void perm_add_rows(const plan_data<R>& p, const std::array<const window*, R>& wr, std::size_t a, index_t base,
                   std::vector<index_t>& rows) {
    if (a + 1 >= R) {
        rows.push_back(base * p.geometry.input[R - 1]);
        return;
    }
    const index_t d = p.adaptive ? 1 : p.geometry.dilations[a];
    for (index_t t = 0; t < wr[a]->count; ++t) perm_add_rows(p, wr, a + 1, base * p.geometry.input[a] + wr[a]->first + t * d, rows);
}

/// The permute kernel's row table, built once per plan: for each outer output row (every axis
/// but the last), the offsets in a plane of the input rows its window sums, in window order,
/// kv per row (the largest window's row count). Rows of smaller windows are padded at the end
/// with -1, read from a zero row instead, so every row runs the same unrolled code (short loops
/// of varying trip counts cost a mispredicted branch per row) with the same load masks (a mask
/// per entry would cost a mask move on the permute port); rows with no -1 skip that select.
template <std::size_t R>
std::vector<index_t> perm_rows(const plan_data<R>& p) {
    const pool_geometry<R>& g = p.geometry;
    index_t nr = 1, kv = 1;
    for (std::size_t a = 0; a + 1 < R; ++a) {
        nr *= g.output[a];
        index_t most = 0;
        for (index_t o = 0; o < g.output[a]; ++o) most = std::max(most, p.axis(a)[o].count);
        kv *= most;
    }
    std::vector<index_t> rows;
    rows.reserve(static_cast<std::size_t>(nr * kv));
    for (index_t r = 0; r < nr; ++r) {
        const std::size_t first = rows.size();
        std::array<const window*, R> wr{};
        index_t rest = r;
        for (std::size_t a = R - 1; a-- > 0;) {
            wr[a] = p.axis(a) + rest % g.output[a];
            rest /= g.output[a];
        }
        perm_add_rows<R>(p, wr, 0, 0, rows);
        rows.resize(first + static_cast<std::size_t>(kv), -1);
    }
    return rows;
}

// Largest slice (H x W elements) the forward kernel sums first: a plane of float sums that
// stays in L1 next to the input it reads.
constexpr index_t perm_slice_max = 4096;

/// 3-D pools whose rows fit one chunk: whether the forward kernel first sums, per first-axis
/// output, its window's input slices into one slice of sums (full vectors, the slice read in
/// memory order), then each output row adds only its second-axis window's rows of that slice.
/// If so, fills the two tables (perm_slices, perm_hrows in plan_data); else clears them. The
/// rule counts vector loads and stores per first-axis output, a row table entry as a load:
/// summing kd x kh rows for each of Ho output rows against kd + 1 passes over the slice plus
/// kh rows each (pool_ci_3d 16x32x16x8 3x3x3 stride 2: 144 against 80; measured 13.4 -> 9.1
/// us forward; 32x16^3 12.2 -> 11.4, 17x30^3 at dilation 1 pad 1: 74 -> 68).
template <std::size_t R>
void perm_slices_first(const plan_data<R>& p, std::vector<index_t>& slices, std::vector<index_t>& hrows) {
    slices.clear();
    hrows.clear();
    if constexpr (R == 3) {
        const pool_geometry<R>& g = p.geometry;
        const index_t H = g.input[1], W = g.input[2], HW = H * W, Do = g.output[0], Ho = g.output[1];
        if (HW > perm_slice_max || static_cast<index_t>(p.perm_hchunks.size()) != 3) return;
        index_t kd = 0, kh = 0;
        for (index_t o = 0; o < Do; ++o) kd = std::max(kd, p.axis(0)[o].count);
        for (index_t o = 0; o < Ho; ++o) kh = std::max(kh, p.axis(1)[o].count);
        // One output row per slice of sums (Ho = 1) saves only table reads, and its rows read
        // the sums right after storing them: I3D's 2x7x7 on 8x7x7 took 123 against 89 us.
        if (kd < 2 || kh < 1 || Ho < 2) return;
        const index_t row_vecs = (W + 15) / 16, slice_vecs = (HW + 15) / 16;
        if ((kd + 1) * slice_vecs + 2 * Ho * kh * row_vecs >= 2 * Ho * kd * kh * row_vecs) return;
        const index_t dd = p.adaptive ? 1 : g.dilations[0], dh = p.adaptive ? 1 : g.dilations[1];
        slices.assign(static_cast<std::size_t>(Do * kd), -1);
        for (index_t o = 0; o < Do; ++o) {
            const window& w = p.axis(0)[o];
            for (index_t t = 0; t < w.count; ++t) slices[static_cast<std::size_t>(o * kd + t)] = (w.first + t * dd) * HW;
        }
        hrows.assign(static_cast<std::size_t>(Ho * kh), -1);
        for (index_t o = 0; o < Ho; ++o) {
            const window& w = p.axis(1)[o];
            for (index_t t = 0; t < w.count; ++t) hrows[static_cast<std::size_t>(o * kh + t)] = (w.first + t * dh) * W;
        }
    } else {
        (void)p;
    }
}

/// Float, or 16-bit storage computed in float (the float kernel's bits, rounded once).
template <class T, class M>
constexpr bool perm_types() noexcept {
    return AVGPOOL_PERM_KERNEL && std::is_same<T, float>::value &&
           (std::is_same<M, float>::value || is_half<M>::value);
}

template <class T, std::size_t R, class M = T>
bool perm_applicable(const plan_data<R>& p) noexcept {
    // The tables exist only where perm_geometry held when the plan was made.
    return perm_types<T, M>() && !p.plane_rdiv_f.empty() && !p.perm_rows.empty() && !p.perm_hchunks.empty();
}

// The longest rows the permute backward takes: this many 16-column vectors.
constexpr index_t perm_bmax_vecs = 8;
// The most floats of scaled gradients (and zeros) it keeps for a plane: past that the copy
// falls out of cache and costs more than it saves.
constexpr index_t perm_bscale_max = 16384;
// The most floats of scratch the separable backward keeps (perm_backward::separable): its
// spread output rows and, for 3-D, the first stage's sums.
constexpr index_t perm_bsep_max = 16384;

/// The backward kernel's table, the transpose of perm_rows: for each outer input row, the
/// outer output rows whose windows sum it, ascending, kc per row, as element offsets (row *
/// Wo) into the output plane, padded with -zero_gap (where the kernel keeps zeros before its
/// scaled plane: no select per entry); empty if some input row is summed by more than
/// perm_max_rows output rows, or past perm_max_outer input rows.
template <std::size_t R>
std::vector<index_t> perm_backward_rows(const plan_data<R>& p, index_t zero_gap) {
    const pool_geometry<R>& g = p.geometry;
    const index_t W = g.input[R - 1];
    index_t nr = 1, ni = 1;
    for (std::size_t a = 0; a + 1 < R; ++a) {
        nr *= g.output[a];
        ni *= g.input[a];
    }
    // Tall planes (more input rows than perm_max_outer) keep the other backward kernels: this
    // table would grow with the input rows (2^25 rows: 2.8 GB to build).
    if (ni > perm_max_outer) return {};
    const std::size_t kv = p.perm_rows.size() / static_cast<std::size_t>(nr);
    std::vector<std::vector<index_t>> lists(static_cast<std::size_t>(ni));
    for (index_t r = 0; r < nr; ++r)
        for (std::size_t i = 0; i < kv; ++i) {
            const index_t off = p.perm_rows[static_cast<std::size_t>(r) * kv + i];
            if (off >= 0) lists[static_cast<std::size_t>(off / W)].push_back(r * g.output[R - 1]);
        }
    std::size_t kc = 1;
    for (const auto& l : lists) kc = std::max(kc, l.size());
    std::vector<index_t> rows;
    if (kc > static_cast<std::size_t>(perm_max_rows)) return rows;
    rows.reserve(lists.size() * kc);
    for (auto& l : lists) {
        l.resize(kc, -zero_gap);
        rows.insert(rows.end(), l.begin(), l.end());
    }
    return rows;
}

/// Whether a 2-D plan suits the whole-plane form: planes of at most 64 inputs (four vectors)
/// and 16 outputs (one), windows that are exactly the kernel's taps inside the plane (so
/// bounds masks reproduce them), and the vertical sums it needs within the first 64 positions.
template <std::size_t R>
bool perm_plane_geometry(const plan_data<R>& p) noexcept {
    if constexpr (R != 2) {
        return false;
    } else {
        if (!AVGPOOL_PERM_KERNEL || p.memory_layout != layout::channels_first || p.global || p.adaptive) return false;
        const pool_geometry<R>& g = p.geometry;
        const index_t H = g.input[0], W = g.input[1], Ho = g.output[0], Wo = g.output[1];
        if (H * W > 64 || Ho * Wo > 16 || g.kernel[0] > perm_max_taps || g.kernel[1] > perm_max_taps) return false;
        if ((Ho - 1) * g.strides[0] * W + W > 64) return false;
        for (std::size_t a = 0; a < R; ++a) {
            const window* w = p.axis(a);
            for (index_t o = 0; o < g.output[a]; ++o) {
                index_t first = -1, count = 0;
                for (index_t t = 0; t < g.kernel[a]; ++t) {
                    const index_t x = o * g.strides[a] - g.pads_begin[a] + t * g.dilations[a];
                    if (x < 0 || x >= g.input[a]) continue;
                    if (first < 0) first = x;
                    ++count;
                }
                if (w[o].count != count || (count > 0 && w[o].first != first)) return false;
            }
        }
        return true;
    }
}

template <class T, std::size_t R, class M = T>
bool perm_plane_applicable(const plan_data<R>& p) noexcept {
    // The tables exist only where perm_plane_geometry held when the plan was made.
    return perm_types<T, M>() && !p.plane_rdiv_f.empty() && p.perm_plane_f != nullptr;
}

/// Backward's transpose along axis a: for each input position, the outputs whose windows tap
/// it, ascending, padded with `none` to the largest count (returned in taps).
template <std::size_t R>
std::vector<index_t> perm_axis_transpose(const plan_data<R>& p, std::size_t a, index_t none, index_t& taps) {
    const window* w = p.axis(a);
    const index_t X = p.geometry.input[a], O = p.geometry.output[a];
    const index_t d = p.adaptive ? 1 : p.geometry.dilations[a];
    std::vector<std::vector<index_t>> lists(static_cast<std::size_t>(X));
    for (index_t o = 0; o < O; ++o)
        for (index_t t = 0; t < w[o].count; ++t) lists[static_cast<std::size_t>(w[o].first + t * d)].push_back(o);
    taps = 0;
    for (const auto& l : lists) taps = std::max(taps, static_cast<index_t>(l.size()));
    std::vector<index_t> out;
    out.reserve(static_cast<std::size_t>(X * taps));
    for (auto& l : lists) {
        l.resize(static_cast<std::size_t>(taps), none);
        out.insert(out.end(), l.begin(), l.end());
    }
    return out;
}

/// Backward's horizontal transpose, built once per plan: per input column, the outputs whose
/// windows tap it, padded with -1 (taps per column).
template <std::size_t R>
std::vector<index_t> perm_backward_columns(const plan_data<R>& p, index_t& taps) {
    return perm_axis_transpose<R>(p, R - 1, -1, taps);
}

/// The outer axes' transposes for perm_backward's separable form (R = 2, 3): per outer axis a,
/// from at[a], k[a] outputs per input padded with the axis's output count (the second-to-last
/// axis: the row of zeros the kernel keeps past its spread rows; 3-D's first axis: skipped).
/// Built where perm_bsep_geometry holds.
template <std::size_t R>
void perm_backward_outer(const plan_data<R>& p, std::vector<index_t>& lists, std::array<index_t, R>& at, std::array<index_t, R>& k) {
    lists.clear();
    for (std::size_t a = 0; a + 1 < R; ++a) {
        at[a] = static_cast<index_t>(lists.size());
        const std::vector<index_t> l = perm_axis_transpose<R>(p, a, p.geometry.output[a], k[a]);
        lists.insert(lists.end(), l.begin(), l.end());
        // (An axis no window taps, or past the kernel's row list: the form does not apply.)
        if (k[a] < 1 || k[a] > perm_max_rows) {
            lists.clear();
            return;
        }
    }
}

/// The zeros perm_backward keeps before each scaled plane: a whole vector read from any base.
inline index_t perm_backward_zero_gap(const std::vector<index_t>& bases) noexcept {
    index_t most = 0;
    for (const index_t b : bases) most = std::max(most, b);
    return (most + 31) / 16 * 16;
}

/// Per 16-column vector of an input row, the first output its columns gather, so that the
/// vector's outputs are the 16 lanes of one load from there (all 0 when a row's outputs fit
/// one vector); empty if some vector's outputs span more than 16 or the row is longer than
/// perm_bmax_vecs vectors, or long rows (which always scale a copy of the plane first) have
/// planes whose copy would pass perm_bscale_max.
template <std::size_t R>
std::vector<index_t> perm_backward_bases(const plan_data<R>& p, const std::vector<index_t>& cols, index_t taps) {
    const index_t W = p.geometry.input[R - 1], Wo = p.geometry.output[R - 1], nv = (W + 15) / 16;
    if (nv > perm_bmax_vecs || taps < 1 || taps > perm_max_taps) return {};  // the kernel's table sizes
    // 3-D rows past one vector of outputs or two of columns keep the row transpose, which
    // copies the slices that gather the same outputs (2x3x4 on 20x40x60: 94 against 106 us).
    if (R == 3 && (nv > 2 || Wo > 16)) return {};
    std::vector<index_t> bases(static_cast<std::size_t>(nv), 0);
    if (Wo <= 16) return nv <= 2 || p.output_spatial_volume() + 32 <= perm_bscale_max ? bases : std::vector<index_t>{};
    for (index_t h = 0; h < nv; ++h) {
        index_t lo = Wo, hi = -1;
        for (index_t c = 16 * h; c < std::min(W, 16 * h + 16); ++c)
            for (index_t j = 0; j < taps; ++j) {
                const index_t o = cols[static_cast<std::size_t>(c * taps + j)];
                if (o < 0) continue;
                lo = std::min(lo, o);
                hi = std::max(hi, o);
            }
        if (hi < 0) continue;  // no window taps these columns
        if (hi - lo >= 16) return {};
        bases[static_cast<std::size_t>(h)] = lo;
    }
    if (p.output_spatial_volume() + perm_backward_zero_gap(bases) + 16 > perm_bscale_max) return {};
    return bases;
}

/// The backward kernel's lane tables, built once per plan (building them per call took a
/// quarter of a 1-D call on 32 rows of 100): per 16-column vector h and cover slot j, 16 lane
/// indices (output - the vector's base) and a lane mask.
template <std::size_t R>
void perm_backward_lanes(const plan_data<R>& p, std::vector<std::int32_t>& idx, std::vector<std::uint16_t>& mask) {
    const index_t W = p.geometry.input[R - 1], nv = (W + 15) / 16, taps = p.bwd().perm_btaps;
    idx.assign(static_cast<std::size_t>(nv * taps * 16), 0);
    mask.assign(static_cast<std::size_t>(nv * taps), 0);
    for (index_t c = 0; c < W; ++c) {
        const index_t h = c / 16, lane = c % 16;
        for (index_t j = 0; j < taps; ++j) {
            const index_t o = p.bwd().perm_bcols[static_cast<std::size_t>(c * taps + j)];
            if (o < 0) continue;
            idx[static_cast<std::size_t>((h * taps + j) * 16 + lane)] = static_cast<std::int32_t>(o - p.bwd().perm_bbase[static_cast<std::size_t>(h)]);
            mask[static_cast<std::size_t>(h * taps + j)] |= static_cast<std::uint16_t>(1u << lane);
        }
    }
}


/// Whether perm_backward suits its separable form (on the plan's first backward call; then the
/// plan keeps the outer lists, perm_backward_outer): 2-D and 3-D planes whose rows are one or two vectors
/// and their outputs one, not the rows of eight it pairs, nor planes whose scaled copy it skips
/// (tall ones), with the scratch within perm_bsep_max.
template <std::size_t R>
bool perm_bsep_geometry(const plan_data<R>& p) noexcept {
    if constexpr (R < 2 || R > 3) {
        (void)p;
        return false;
    } else {
        const pool_geometry<R>& g = p.geometry;
        const index_t W = g.input[R - 1], Wo = g.output[R - 1], nv = (W + 15) / 16;
        if (nv > 2 || Wo > 16 || (W == 8 && Wo <= 8)) return false;
        if (p.output_spatial_volume() + perm_backward_zero_gap(p.bwd().perm_bbase) + 16 > perm_bscale_max) return false;
        const index_t H = g.input[R - 2], Ho = g.output[R - 2], Do = R == 3 ? g.output[0] : 0;
        const index_t rows = Ho + 1 + (R == 3 ? Do * H : 0);
        return rows <= perm_bsep_max / (16 * nv);
    }
}

/// Whether perm_backward, where it applies, runs in its separable form.
template <std::size_t R>
bool perm_bsep_fits(const plan_data<R>& p) noexcept {
    return !p.bwd().perm_bouter.empty();
}

/// Whether backward runs through the permute kernel (float; rows of 8 to 16 * perm_bmax_vecs
/// columns whose 16-column vectors each gather at most 16 consecutive outputs). 16-bit storage
/// is staged through float planes.
template <class T, std::size_t R>
bool perm_backward_applicable(const plan_data<R>& p) noexcept {
    if (!perm_applicable<T, R>(p) || p.bwd().perm_brows.empty() || p.bwd().perm_bbase.empty()) return false;
    // Rows under 8 leave most lanes idle: I3D's 2x7x7 head on 8x7x7 planes took 161 us here
    // against 56 us through the row transpose (8-wide rows of pool_ci_3d: 36 against 66 us).
    return p.geometry.input[R - 1] >= 8 && p.bwd().perm_btaps >= 1 && p.bwd().perm_btaps <= perm_max_taps;
}

#if AVGPOOL_PERM_KERNEL

// f(0) + f(1) + ... + f(n - 1), in order: unrolled when N > 0 (then n == N), else a loop
// (the permute kernels' vertical sums; short loops of varying trip counts mispredict).
template <int N, class F>
AVGPOOL_ALWAYS_INLINE __m512 perm_sum(index_t n, F&& f) {
    __m512 acc = f(index_t(0));
    if constexpr (N > 0) {
        (void)n;
        unrolled<N - 1>([&](auto i) { acc = _mm512_add_ps(acc, f(static_cast<index_t>(i) + 1)); });
    } else {
        for (index_t i = 1; i < n; ++i) acc = _mm512_add_ps(acc, f(i));
    }
    return acc;
}

// A 16-lane table into a register, for the kernels that keep their tables in local arrays.
// (A masked load: GCC made plain loads into such arrays a copy in 32-byte halves, then read
// the array back whole, a failed store forward per table; 1-D calls on 16 planes of 64
// spent a fifth of their time there.)
AVGPOOL_ALWAYS_INLINE __m512i perm_table(const std::int32_t* at) {
    return _mm512_maskz_loadu_epi32(__mmask16(0xffff), at);
}

// M: the storage type (float, or a 16-bit type converted in registers).
template <std::size_t R, class M = float>
class perm_kernel {
public:
    perm_kernel(const plan_data<R>& p, pool_op op) : p_(p), average_(op == pool_op::average) {
        const pool_geometry<R>& g = p.geometry;
        W_ = g.input[R - 1];
        Wo_ = g.output[R - 1];
        xs_ = p.input_spatial_volume();
        os_ = p.output_spatial_volume();
        auto bits = [](index_t k) { return static_cast<__mmask16>(k >= 16 ? 0xffffu : k <= 0 ? 0u : (1u << k) - 1u); };
        const index_t* t = p.perm_hchunks.data();
        nch_ = static_cast<index_t>(p.perm_hchunks.size()) / 3;
        for (index_t ch = 0; ch < nch_; ++ch, t += 3) {
            const __mmask16 lo = bits(W_ - t[2]), hi = bits(W_ - t[2] - 16);
            const auto both = static_cast<__mmask32>(lo | (static_cast<std::uint32_t>(hi) << 16));
            chunks_[static_cast<std::size_t>(ch)] = chunk{t[0], t[1], t[2], lo, hi, bits(t[1]), both};
        }
        pack_ = perm_packed(nch_, W_, Wo_);
        two_ = pack_ ? static_cast<__mmask16>((1u << (2 * Wo_)) - 1u) : chunks_[0].keep;
        taps_ = p.perm_htaps;
        idx_ = p.perm_hidx.data();  // read in place (copying them was a tenth of a small call)
        idx_eo_ = p.perm_hidx_eo.data();
        mask_ = p.perm_hmask.data();

        nr_ = 1;
        for (std::size_t a = 0; a + 1 < R; ++a) nr_ *= g.output[a];
        kv_ = static_cast<index_t>(p.perm_rows.size()) / nr_;
        if (R == 3 && !p.perm_slices.empty()) {  // slices summed first: rows of kh, not kd x kh
            ho_ = g.output[1];
            kd_ = static_cast<index_t>(p.perm_slices.size()) / g.output[0];
            kv_ = static_cast<index_t>(p.perm_hrows.size()) / ho_;
        }
    }

    /// Planes item_begin .. item_end - 1 (item = n * C + c).
    void run(const M* in, M* out, index_t item_begin, index_t item_end) const {
        dispatch(in, out, item_begin, item_end, 0, nr_);
    }

    /// Outer output rows r0 .. r1 - 1 of one plane.
    void run_rows(const M* in, M* out, index_t plane, index_t r0, index_t r1) const {
        dispatch(in, out, plane, plane + 1, r0, r1);
    }

private:
    void dispatch(const M* in, M* out, index_t c0, index_t c1, index_t r0, index_t r1) const {
        // The common windows fully unrolled (short loops of varying trip counts cost a
        // mispredicted branch per row); the rest with the row count a loop bound.
        if (taps_ == 2 && kv_ == 2) return rows<2, 2>(in, out, c0, c1, r0, r1);
        if (taps_ == 3 && kv_ == 3) return rows<3, 3>(in, out, c0, c1, r0, r1);
        if (taps_ == 3 && kv_ == 9) return rows<3, 9>(in, out, c0, c1, r0, r1);
        if (taps_ == 2 && kv_ == 1) return rows<2, 1>(in, out, c0, c1, r0, r1);  // 1-D
        if (taps_ == 3 && kv_ == 1) return rows<3, 1>(in, out, c0, c1, r0, r1);
        switch (taps_) {  // the permutes unrolled, their tables in registers
            case 0: return rows<0, 0>(in, out, c0, c1, r0, r1);
            case 1: return rows<1, 0>(in, out, c0, c1, r0, r1);
            case 2: return rows<2, 0>(in, out, c0, c1, r0, r1);
            case 3: return rows<3, 0>(in, out, c0, c1, r0, r1);
            case 4: return rows<4, 0>(in, out, c0, c1, r0, r1);
            case 5: return rows<5, 0>(in, out, c0, c1, r0, r1);
            case 6: return rows<6, 0>(in, out, c0, c1, r0, r1);
            case 7: return rows<7, 0>(in, out, c0, c1, r0, r1);
            default: return rows<8, 0>(in, out, c0, c1, r0, r1);
        }
    }

    // K: horizontal taps; V: input rows per output row (0: kv_, at run time).
    template <int K, int V>
    void rows(const M* in, M* out, index_t c0, index_t c1, index_t r0, index_t r1) const {
        // Everything in locals: the stores may alias any member as far as the compiler knows.
        const float* const rdiv = average_ ? p_.template plane_reciprocals<float>() : nullptr;
        const index_t* const off = kd_ > 0 ? p_.perm_hrows.data() : p_.perm_rows.data();
        const index_t Wo = Wo_, kv = V > 0 ? V : kv_, xs = xs_, os = os_, nch = nch_;
        const chunk* const chunks = chunks_.data();
        const lane_table* const idx_all = idx_;
        const std::uint16_t* const mask_all = mask_;
        const __mmask16 lo = chunks[0].lo, hi = chunks[0].hi, one = chunks[0].keep, two = two_;
        const bool pack = pack_, wide = hi != 0;
        // The sum of tap vectors: each lane's taps in order, like the other kernels' rows.
        auto across = [&](__m512 a, __m512 b, const __m512i* ix, const __mmask16* mk) {
            if constexpr (K == 0) {
                (void)a, (void)b, (void)ix, (void)mk;
                return _mm512_setzero_ps();
            } else {
                __m512 acc = _mm512_maskz_permutex2var_ps(mk[0], a, ix[0], b);
                for (int t = 1; t < K; ++t) acc = _mm512_add_ps(acc, _mm512_maskz_permutex2var_ps(mk[t], a, ix[t], b));
                return acc;
            }
        };
        // Outputs o0 .. of row r of output plane y under keep.
        auto finish = [&](M* y, __m512 v, index_t r, index_t o0, __mmask16 keep) {
            // (+ 0, fused into the scaling: see plus_zero.)
            const __m512 zero = _mm512_setzero_ps();
            if (rdiv != nullptr) {
                v = _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(keep, rdiv + r * Wo + o0), zero);
            } else {
                v = _mm512_add_ps(v, zero);
            }
            masked_store(y + r * Wo + o0, keep, v);
        };
        // The vertical sum of output row r's input rows of plane x, columns [col, col + 16)
        // under keep (x: the input, M, or a slice of float sums; zero_ serves both).
        auto down = [&](const auto* x, index_t r, __mmask16 keep, index_t col) AVGPOOL_INLINE_LAMBDA {
            using E = std::remove_cv_t<std::remove_pointer_t<decltype(x)>>;
            const E* const none = reinterpret_cast<const E*>(zero_);
            const index_t* o = off + r * kv;
            // Windows of kv rows (the tables pad shorter ones at the end with -1) load without
            // the select (two instructions a row; most rows of most plans).
            if (o[kv - 1] >= 0) return perm_sum<V>(kv, [&](index_t i) { return masked_load(keep, x + o[i] + col); });
            return perm_sum<V>(kv, [&](index_t i) { return masked_load(keep, o[i] >= 0 ? x + o[i] + col : none); });
        };
        // bfloat16 storage (split): an input row's 32 columns from the chunk's base are one
        // load, split into the even and the odd columns (split_bf16), which the permutes take
        // as their two sources through the plan's eo tables: no widening shuffle competing
        // with the permutes for their port. Each column's sum is the same as the float
        // kernel's, so are the bits. Packed rows and the float slices of 3-D pools keep the
        // widening loads and the plain tables.
        constexpr bool split = std::is_same<M, bfloat16>::value;
        const lane_table* const idx_h = split ? idx_eo_ : idx_all;  // the tables of chunked rows
        // Output row r of plane x, columns [col, col + 32) under keep: down() split.
        auto across_split = [&](const M* x, index_t r, __mmask32 keep, index_t col, const __m512i* ix,
                                const __mmask16* mk) AVGPOOL_INLINE_LAMBDA {
            const M* const none = reinterpret_cast<const M*>(zero_);
            const index_t* o = off + r * kv;
            auto sum = [&](auto row) AVGPOOL_INLINE_LAMBDA {
                __m512 e, d;
                split_bf16(row(0), e, d);
                auto step = [&](index_t i) AVGPOOL_INLINE_LAMBDA {
                    __m512 e1, d1;
                    split_bf16(row(i), e1, d1);
                    e = _mm512_add_ps(e, e1);
                    d = _mm512_add_ps(d, d1);
                };
                if constexpr (V > 0) {
                    unrolled<V - 1>([&](auto i) { step(static_cast<index_t>(i) + 1); });
                } else {
                    for (index_t i = 1; i < kv; ++i) step(i);
                }
                return across(e, d, ix, mk);
            };
            if (o[kv - 1] >= 0) return sum([&](index_t i) { return _mm512_maskz_loadu_epi16(keep, x + o[i] + col); });  // (as down)
            return sum([&](index_t i) { return _mm512_maskz_loadu_epi16(keep, o[i] >= 0 ? x + o[i] + col : none); });
        };
        const __m512 z = _mm512_setzero_ps();
        // 1-D, one row a plane: chunk k of planes cb .. ce - 1 with its tables ix, mk. Nothing
        // in the loop but the plane's loads, permutes and store (a branch and the row offset's
        // reload per plane made 64 planes of 32 take twice the permutes' time); the sum scales
        // by 1 / divisor (average) or by 1 (sum), both one fused multiply-add, which also gives
        // plus_zero's + 0. Planes before `whole` load whole vectors, which stay inside the input
        // tensor (the lanes past the row are never selected); the last ones load under the masks.
        auto planes_1d = [&](const chunk k, index_t cb, index_t ce, const __m512i* ix, const __mmask16* mk)
                             AVGPOOL_INLINE_LAMBDA {
            const __m512 scale = rdiv != nullptr ? _mm512_maskz_loadu_ps(k.keep, rdiv + k.o0) : _mm512_set1_ps(1.0f);
            const index_t from = off[0] + k.base;  // (the row table of a 1-D plan is {0})
            // Plane c's row and output, formed from c each time: stepping one pointer per
            // plane would leave it past the tensor's end after the last plane (undefined
            // pointer arithmetic); GCC and clang strength-reduce this to the same loop.
            auto xp = [&](index_t c) AVGPOOL_INLINE_LAMBDA { return in + c * xs + from; };
            auto yp = [&](index_t c) AVGPOOL_INLINE_LAMBDA { return out + c * os + k.o0; };
            const bool both = k.hi != 0;
            index_t c = cb;
            if constexpr (split) {  // 32 values a plane, split (one row, no vertical sum)
                __m512 e, d;
                for (const index_t whole = unmasked_planes(cb, ce, 32, from); c < whole; ++c) {
                    split_bf16(_mm512_loadu_si512(xp(c)), e, d);
                    masked_store(yp(c), k.keep, _mm512_fmadd_ps(across(e, d, ix, mk), scale, z));
                }
                for (; c < ce; ++c) {
                    split_bf16(_mm512_maskz_loadu_epi16(k.both, xp(c)), e, d);
                    masked_store(yp(c), k.keep, _mm512_fmadd_ps(across(e, d, ix, mk), scale, z));
                }
                return;
            }
            const index_t whole = unmasked_planes(cb, ce, both ? 32 : 16, from);
            if (both) {
                for (; c < whole; ++c) {
                    __m512 a = full_load(xp(c)), b = full_load(xp(c) + 16);
                    hold_in_register(a);
                    hold_in_register(b);
                    masked_store(yp(c), k.keep, _mm512_fmadd_ps(across(a, b, ix, mk), scale, z));
                }
            } else {
                for (; c < whole; ++c) {
                    __m512 a = full_load(xp(c));
                    hold_in_register(a);
                    masked_store(yp(c), k.keep, _mm512_fmadd_ps(across(a, z, ix, mk), scale, z));
                }
            }
            for (; c < ce; ++c) {
                __m512 a = masked_load(k.lo, xp(c)), b = both ? masked_load(k.hi, xp(c) + 16) : z;
                hold_in_register(a);
                hold_in_register(b);
                masked_store(yp(c), k.keep, _mm512_fmadd_ps(across(a, b, ix, mk), scale, z));
            }
        };
        // Longer rows: chunk by chunk, each with its own tables.
        const index_t plane_bytes = xs * static_cast<index_t>(sizeof(M));
        if (nch > 1 && plane_bytes <= perm_block_bytes) {
            // Planes in L1: chunk by chunk over a block of planes, so that each chunk's tables
            // stay in registers for all its rows (reloading them per row and chunk: 1.6 us
            // for 32 rows of 100, now 0.4; 16 planes 50x50: 7.0 -> 4.6 us).
            const index_t block = perm_block_bytes / plane_bytes;
            for (index_t cb = c0; cb < c1; cb += block) {
                const index_t ce = std::min(c1, cb + block);
                for (index_t ch = 0; ch < nch; ++ch) {
                    const chunk k = chunks[ch];
                    __m512i ix[K > 0 ? K : 1];
                    __mmask16 mk[K > 0 ? K : 1];
                    for (int t = 0; t < K; ++t) {
                        ix[t] = perm_table(idx_h[ch * K + t].lane);
                        mk[t] = mask_all[ch * K + t];
                    }
                    if constexpr (R == 1) {
                        // One row a plane: the chunk's reciprocals hoisted too, and nothing
                        // else kept across planes but the tables and masks (the general loop
                        // spilled its masks: 32 rows of 100 at stride 2, 0.39 us).
                        if (r0 >= r1) return;  // an empty row range writes nothing
                        if (off[0] >= 0) {
                            planes_1d(k, cb, ce, ix, mk);
                            continue;
                        }
                    }
                    for (index_t c = cb; c < ce; ++c) {
                        const M* const x = in + c * xs;
                        M* const y = out + c * os;
                        for (index_t r = r0; r < r1; ++r) {
                            if constexpr (split) {
                                finish(y, across_split(x, r, k.both, k.base, ix, mk), r, k.o0, k.keep);
                            } else {
                                const __m512 a = down(x, r, k.lo, k.base), b = k.hi != 0 ? down(x, r, k.hi, k.base + 16) : z;
                                finish(y, across(a, b, ix, mk), r, k.o0, k.keep);
                            }
                        }
                    }
                }
            }
            return;
        }
        if (nch > 1) {
            // Larger planes stream through in row order (a chunk-by-chunk pass over them read
            // each from L2 again: 64 planes 112x112, 138 -> 163 us); the tables come from L1.
            for (index_t c = c0; c < c1; ++c) {
                const M* const x = in + c * xs;
                M* const y = out + c * os;
                for (index_t r = r0; r < r1; ++r)
                    for (index_t ch = 0; ch < nch; ++ch) {
                        const chunk& k = chunks[ch];
                        __m512i ix[K > 0 ? K : 1];
                        for (int t = 0; t < K; ++t) ix[t] = perm_table(idx_h[ch * K + t].lane);
                        if constexpr (split) {
                            finish(y, across_split(x, r, k.both, k.base, ix, mask_all + ch * K), r, k.o0, k.keep);
                        } else {
                            const __m512 a = down(x, r, k.lo, k.base), b = k.hi != 0 ? down(x, r, k.hi, k.base + 16) : z;
                            finish(y, across(a, b, ix, mask_all + ch * K), r, k.o0, k.keep);
                        }
                    }
            }
            return;
        }
        // The only chunk's tables in registers (loaded here: the chunked paths above have
        // their own).
        // (Split bfloat16 rows: 1-D planes, and rows neither packed nor summed from slices.)
        const bool eo = split && (R == 1 || (!pack && kd_ == 0));
        __m512i idx[K > 0 ? K : 1];
        __mmask16 m[K > 0 ? K : 1];
        for (int t = 0; t < K; ++t) {
            idx[t] = perm_table((eo ? idx_eo_ : idx_all)[t].lane);
            m[t] = mask_all[t];
        }
        if (kd_ > 0) {
            // Slices first (perm_slices_first): per first-axis output od, its window's input
            // slices summed into one slice of float sums (in window order, whole vectors),
            // then output rows r = od * Ho + oh, each the sum of oh's rows of that slice.
            // The slices of a group of ods are summed before any of their rows is read: a
            // row loaded right after its slice's stores waits for them (masked loads are not
            // forwarded from stores), which doubled I3D's 2x7x7 on 8x7x7.
            alignas(64) float sums[perm_slice_max];
            const index_t* const sl = p_.perm_slices.data();
            const index_t kd = kd_, ho = ho_, hw = xs / p_.geometry.input[0];
            const index_t pitch = (hw + 15) / 16 * 16, group = perm_slice_max / pitch;
            // The slice of od's sums at at.
            auto sum_slices = [&](const M* x, index_t od, float* at) AVGPOOL_INLINE_LAMBDA {
                const index_t* const s = sl + od * kd;
                index_t nd = 0;  // the window's slices come first, then -1
                while (nd < kd && s[nd] >= 0) ++nd;
                // Whole vectors with a constant mask, the count fixed for the common windows
                // (a mask and a loop bound per vector cost a sixth of the time).
                auto fixed = [&](auto n) AVGPOOL_INLINE_LAMBDA {
                    constexpr int N = decltype(n)::value;
                    const index_t full = hw / 16 * 16;
                    // The slices' starts in locals: read through s per vector, they were
                    // reloaded after every store (which may alias them for the compiler).
                    const M* src[N > 0 ? N : 1];
                    if constexpr (N > 0) unrolled<N>([&](auto i) { src[i] = x + s[i]; });
                    auto vec = [&](__mmask16 k, index_t j) AVGPOOL_INLINE_LAMBDA {
                        __m512 v;
                        if constexpr (N > 0) {
                            v = perm_sum<N>(nd, [&](index_t i) { return masked_load(k, src[i] + j); });
                        } else {
                            v = perm_sum<N>(nd, [&](index_t i) { return masked_load(k, x + s[i] + j); });
                        }
                        _mm512_store_ps(at + j, v);
                    };
                    for (index_t j = 0; j < full; j += 16) vec(__mmask16(0xffff), j);
                    if (full < hw) vec(__mmask16((1u << (hw - full)) - 1u), full);
                };
                switch (nd) {
                    case 0: std::fill(at, at + pitch, 0.0f); break;
                    case 2: fixed(std::integral_constant<int, 2>{}); break;
                    case 3: fixed(std::integral_constant<int, 3>{}); break;
                    default: fixed(std::integral_constant<int, 0>{}); break;
                }
            };
            for (index_t c = c0; c < c1; ++c) {
                const M* const x = in + c * xs;
                M* const y = out + c * os;
                for (index_t r = r0; r < r1;) {
                    const index_t od0 = r / ho, od1 = std::min((r1 - 1) / ho + 1, od0 + group);
                    for (index_t od = od0; od < od1; ++od) sum_slices(x, od, sums + (od - od0) * pitch);
                    for (const index_t stop = std::min(r1, od1 * ho); r < stop;) {
                        const index_t od = r / ho, end = std::min(stop, (od + 1) * ho), base = od * ho;
                        const float* const S = sums + (od - od0) * pitch;
                        if (pack) {
                            for (; r + 1 < end; r += 2)
                                finish(y, across(down(S, r - base, lo, 0), down(S, r + 1 - base, lo, 0), idx, m), r, 0, two);
                            if (r < end) finish(y, across(down(S, r - base, lo, 0), z, idx, m), r, 0, one);
                        } else if (!wide) {
                            for (; r < end; ++r) finish(y, across(down(S, r - base, lo, 0), z, idx, m), r, 0, one);
                        } else {
                            for (; r < end; ++r)
                                finish(y, across(down(S, r - base, lo, 0), down(S, r - base, hi, 16), idx, m), r, 0, one);
                        }
                        r = end;
                    }
                }
            }
            return;
        }
        if constexpr (R == 1) {
            // 1-D: one row a plane, so the loop runs over planes, the row's reciprocals kept in
            // a register (the general loop reloaded them and spilled its tables: pool_ci_1d
            // regular, 64 planes of 32: 0.233 -> 0.120 us).
            if (r0 >= r1) return;  // (the one row; run_rows may ask for none)
            planes_1d(chunks[0], c0, c1, idx, m);
            return;
        }
        for (index_t c = c0; c < c1; ++c) {
            const M* const x = in + c * xs;
            M* const y = out + c * os;
            index_t r = r0;
            if (eo) {
                const __mmask32 both = chunks[0].both;
                for (; r < r1; ++r) finish(y, across_split(x, r, both, 0, idx, m), r, 0, one);
            } else if (pack) {
                for (; r + 1 < r1; r += 2) finish(y, across(down(x, r, lo, 0), down(x, r + 1, lo, 0), idx, m), r, 0, two);
                if (r < r1) finish(y, across(down(x, r, lo, 0), z, idx, m), r, 0, one);
            } else if (!wide) {
                for (; r < r1; ++r) finish(y, across(down(x, r, lo, 0), z, idx, m), r, 0, one);
            } else {
                for (; r < r1; ++r) finish(y, across(down(x, r, lo, 0), down(x, r, hi, 16), idx, m), r, 0, one);
            }
        }
    }

    // 1-D: the end of planes c0 .. c1 - 1 whose `span` values from offset `from` in the plane
    // lie inside the input tensor (so a whole-vector load there reads only the tensor; a
    // masked load costs a fifth more where the loads bound the loop: 64 planes of 32,
    // 1.3 -> 1.15 ns a plane).
    index_t unmasked_planes(index_t c0, index_t c1, index_t span, index_t from = 0) const {
        // Counted down from c1: at most span planes end within span values of the tensor's
        // end, and a division here was a sixth of a one-plane call.
        const index_t total = p_.input_shape[0] * p_.input_shape[1] * xs_;
        index_t c = c1;
        while (c > c0 && (c - 1) * xs_ + from + span > total) --c;
        return c;
    }

    const plan_data<R>& p_;
    bool average_;
    bool pack_ = false;
    index_t W_ = 0, Wo_ = 0, xs_ = 0, os_ = 0, taps_ = 0, nr_ = 1, kv_ = 1;
    index_t kd_ = 0, ho_ = 1;  // slices first: the first axis's window length and Ho (else 0, 1)
    // Outputs o0 .. o0 + n - 1 of a row, reading columns from base: loads under lo and hi
    // (columns base .. + 15 and base + 16 .. + 31 inside the row), stores under keep.
    struct chunk {
        index_t o0, n, base;
        __mmask16 lo, hi, keep;
        __mmask32 both;  // lo and hi as one mask of 32 16-bit values
    };
    // A fixed array (no allocation per call; the tiny 1-D shapes notice it).
    std::array<chunk, perm_max_chunks> chunks_{};
    index_t nch_ = 0;
    __mmask16 two_ = 0;
    const lane_table* idx_ = nullptr;  // the plan's lane tables and masks (perm_horizontal)
    const lane_table* idx_eo_ = nullptr;  // its tables for split bfloat16 rows
    const std::uint16_t* mask_ = nullptr;
    alignas(64) unsigned char zero_[16 * sizeof(float)] = {};  // a zero vector: 16 floats, 16 or 32 M
};

/// Backward through permutes, float: for each input row and 16-column vector of it, the sum
/// over the output rows whose windows sum the row of their gradients times 1 / divisor (16
/// consecutive outputs from the vector's base), then one one-source permute per horizontal
/// cover slot spreads those sums over the vector's columns: column c, slot j, takes the j-th
/// output whose window taps c. Each input row is written once, in full.
template <std::size_t R>
class perm_backward {
public:
    explicit perm_backward(const plan_data<R>& p) : p_(p) {
        const pool_geometry<R>& g = p.geometry;
        W_ = g.input[R - 1];
        Wo_ = g.output[R - 1];
        xs_ = p.input_spatial_volume();
        os_ = p.output_spatial_volume();
        ni_ = 1;
        for (std::size_t a = 0; a + 1 < R; ++a) ni_ *= g.input[a];
        kc_ = static_cast<index_t>(p.bwd().perm_brows.size()) / ni_;
        taps_ = p.bwd().perm_btaps;
        nv_ = (W_ + 15) / 16;
        zero_gap_ = perm_backward_zero_gap(p.bwd().perm_bbase);
        sep_ = perm_bsep_fits<R>(p);
        for (index_t h = 0; h < nv_; ++h) {
            base_[h] = p.bwd().perm_bbase[static_cast<std::size_t>(h)];
            const index_t n = std::min<index_t>(16, W_ - 16 * h);
            store_[h] = static_cast<__mmask16>(n >= 16 ? 0xffffu : (1u << n) - 1u);
        }
        // Copied from the plan's (perm_backward_lanes) to an aligned place: a table vector
        // split over two cache lines is a slower load.
        std::memcpy(idx_, p.bwd().perm_bidx.data(), p.bwd().perm_bidx.size() * sizeof(std::int32_t));
        std::memcpy(mask_, p.bwd().perm_bmask.data(), p.bwd().perm_bmask.size() * sizeof(std::uint16_t));
    }

    /// grad_in planes item_begin .. item_end - 1 from grad_out.
    void run(const float* grad_out, float* grad_in, index_t item_begin, index_t item_end) const {
        dispatch(grad_out, grad_in, item_begin, item_end, 0, ni_);
    }

    /// Outer input rows y0 .. y1 - 1 of one plane.
    void run_rows(const float* grad_out, float* grad_in, index_t plane, index_t y0, index_t y1) const {
        dispatch(grad_out, grad_in, plane, plane + 1, y0, y1);
    }

private:
    void dispatch(const float* g, float* gi, index_t c0, index_t c1, index_t y0, index_t y1) const {
        if (taps_ == 1 && kc_ == 1) return rows<1, 1>(g, gi, c0, c1, y0, y1);
        if (taps_ == 2 && kc_ == 1) return rows<2, 1>(g, gi, c0, c1, y0, y1);  // 1-D
        if (taps_ == 2 && kc_ == 2) return rows<2, 2>(g, gi, c0, c1, y0, y1);
        if (taps_ == 3 && kc_ == 3) return rows<3, 3>(g, gi, c0, c1, y0, y1);
        if (taps_ == 2 && kc_ == 4) return rows<2, 4>(g, gi, c0, c1, y0, y1);
        switch (taps_) {
            case 1: return rows<1, 0>(g, gi, c0, c1, y0, y1);
            case 2: return rows<2, 0>(g, gi, c0, c1, y0, y1);
            case 3: return rows<3, 0>(g, gi, c0, c1, y0, y1);
            case 4: return rows<4, 0>(g, gi, c0, c1, y0, y1);
            case 5: return rows<5, 0>(g, gi, c0, c1, y0, y1);
            case 6: return rows<6, 0>(g, gi, c0, c1, y0, y1);
            case 7: return rows<7, 0>(g, gi, c0, c1, y0, y1);
            default: return rows<8, 0>(g, gi, c0, c1, y0, y1);
        }
    }

    // K: cover slots per column; V: output rows per input row (0: kc_, at run time).
    template <int K, int V>
    void rows(const float* grad_out, float* grad_in, index_t c0, index_t c1, index_t y0, index_t y1) const {
        const float* const rdiv = p_.template plane_reciprocals<float>();
        const index_t* const list = p_.bwd().perm_brows.data();
        const index_t W = W_, kc = V > 0 ? V : kc_, xs = xs_, os = os_, nv = nv_, gap = zero_gap_;
        // The sum of the scaled output rows input row y gathers, 16 lanes from `from`.
        auto gather = [&](const float* sc, index_t y, index_t from) {
            const index_t* l = list + y * kc;
            return perm_sum<V>(kc, [&](index_t i) { return _mm512_loadu_ps(sc + l[i] + from); });
        };
        auto spread = [&](__m512 v, const __m512i* ix, const __mmask16* m) {
            __m512 acc = _mm512_maskz_permutexvar_ps(m[0], ix[0], v);
            for (int j = 1; j < K; ++j) acc = _mm512_add_ps(acc, _mm512_maskz_permutexvar_ps(m[j], ix[j], v));
            return acc;
        };
        // Each plane's gradients times their reciprocals, once: each output row is read by up
        // to kc input rows (four for 3x3x3 at stride 2), which scaled it at every read. Only
        // the output rows [s0, s1) (elements) the input rows y0 .. y1 - 1 gather are scaled:
        // a split call scaling the whole plane cost 13x on one plane cut in many pieces
        // (review). Zeros sit before each scaled plane for the table's padding entries and
        // after its last row; lanes past a row's outputs hold the next row's values (or
        // those zeros), which no permute index selects.
        index_t s0 = 0, s1 = os;
        if (y0 > 0 || y1 < ni_) {
            s0 = os, s1 = 0;
            for (const index_t* l = list + y0 * kc; l < list + y1 * kc; ++l)
                if (*l >= 0) s0 = std::min(s0, *l), s1 = std::max(s1, *l + Wo_);
            if (s1 <= s0) s0 = s1 = 0;  // no input row of the range gathers anything
        }
        auto scale = [&](const float* g, float* sc) {
            for (index_t i = s0; i < s1; i += 16) {
                const __mmask16 m = static_cast<__mmask16>(s1 - i >= 16 ? 0xffffu : (1u << (s1 - i)) - 1u);
                _mm512_mask_storeu_ps(sc + i, m, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, g + i), _mm512_maskz_loadu_ps(m, rdiv + i), _mm512_setzero_ps()));
            }
        };
        // Room for n planes (each after its zeros), uninitialized but for the zeros before
        // and after each plane's scaled span: scale() writes the rest of what gathers read.
        // Planes start on 64-byte lines (gap is a multiple of 16; so is the pitch).
        const index_t pitch = gap + (os + 15) / 16 * 16;
        auto scratch = [&](index_t n) {
            line_buffer<float> buf(static_cast<std::size_t>(n * pitch + 16));
            for (index_t b = 0; b < n; ++b) {
                float* const sc = buf.get() + b * pitch + gap;
                std::fill(sc - gap, sc, 0.0f);
                std::fill(sc + s1, sc + s1 + 16, 0.0f);
            }
            return buf;
        };
        if (nv <= 2 && Wo_ <= 16) {
            // Rows up to 32 whose outputs fit one vector: one sum per row, both halves' tables
            // in registers.
            __m512i idx[2][K];
            __mmask16 m[2][K];
            for (int h = 0; h < 2; ++h)
                for (int j = 0; j < K; ++j) {
                    idx[h][j] = h < nv ? perm_table(idx_ + (h * K + j) * 16) : _mm512_setzero_si512();
                    m[h][j] = h < nv ? mask_[h * K + j] : 0;
                }
            const __mmask16 lo = store_[0], hi = nv > 1 ? store_[1] : 0;
            // (Halves indexed by constants here, so that the tables stay in registers.)
            auto half = [&](__m512 v, int h) {
                __m512 acc = _mm512_maskz_permutexvar_ps(m[h][0], idx[h][0], v);
                for (int j = 1; j < K; ++j) acc = _mm512_add_ps(acc, _mm512_maskz_permutexvar_ps(m[h][j], idx[h][j], v));
                return acc;
            };
            if (R == 1 || os + gap + 16 > perm_bscale_max) {
                // Tall planes: the scaled copy would not stay in cache (8192x32: 40 against
                // 75 us), so each row scales what it reads, padding entries reading zeros.
                // 1-D: the one row reads each output once, and its loads right after the
                // copy's masked stores waited for them (pool_ci_1d regular: 0.218 -> 0.140 us).
                const __mmask16 keep = static_cast<__mmask16>((1u << Wo_) - 1u);
                const __m512 zero = _mm512_setzero_ps();
                for (index_t c = c0; c < c1; ++c) {
                    const float* const g = grad_out + c * os;
                    float* const x = grad_in + c * xs;
                    for (index_t y = y0; y < y1; ++y) {
                        const index_t* l = list + y * kc;
                        const __m512 v = perm_sum<V>(kc, [&](index_t i) {
                            return l[i] < 0 ? zero : _mm512_fmadd_ps(_mm512_maskz_loadu_ps(keep, g + l[i]), _mm512_maskz_loadu_ps(keep, rdiv + l[i]), zero);
                        });
                        _mm512_mask_storeu_ps(x + y * W, lo, half(v, 0));
                        if (hi != 0) _mm512_mask_storeu_ps(x + y * W + 16, hi, half(v, 1));
                    }
                }
                return;
            }
            if constexpr (R >= 2) {
                if (sep_) return nv == 1 ? separable<K, 1>(grad_out, grad_in, c0, c1, y0, y1) : separable<K, 2>(grad_out, grad_in, c0, c1, y0, y1);
            }
            const auto scaled_plane = scratch(1);
            float* const sc = scaled_plane.get() + gap;
            // (A call: inline, its loop cost the 16-wide rows' loop 10%: pool_ci_3d regular.)
            if (W == 8 && Wo_ <= 8) return rows_of_eight<K, V>(grad_out, grad_in, c0, c1, y0, y1, sc, scale);
            for (index_t c = c0; c < c1; ++c) {
                float* const x = grad_in + c * xs;
                scale(grad_out + c * os, sc);
                for (index_t y = y0; y < y1; ++y) {
                    const __m512 v = gather(sc, y, 0);
                    _mm512_mask_storeu_ps(x + y * W, lo, half(v, 0));
                    if (hi != 0) _mm512_mask_storeu_ps(x + y * W + 16, hi, half(v, 1));
                }
            }
            return;
        }
        // Column vector h's lane tables, into registers.
        auto tables = [&](index_t h, __m512i* ix, __mmask16* m) {
            for (int j = 0; j < K; ++j) {
                ix[j] = perm_table(idx_ + (h * K + j) * 16);
                m[j] = mask_[h * K + j];
            }
        };
        if constexpr (R == 1) {
            // 1-D longer rows: each column vector scales the outputs it reads, straight from
            // the gradients rather than from a scaled copy of the plane (a row is its plane;
            // pool_ci_1d ic_tail: 0.214 -> 0.08-0.11 us).
            if (y0 >= y1) return;  // (the one row; run_rows may ask for none)
            const __m512 zero = _mm512_setzero_ps();
            for (index_t h = 0; h < nv; ++h) {
                __m512i ix[K];
                __mmask16 m[K];
                tables(h, ix, m);
                const index_t from = base_[h], n = std::min<index_t>(16, Wo_ - from);
                const __mmask16 keep = store_[h], have = static_cast<__mmask16>(n >= 16 ? 0xffffu : (1u << n) - 1u);
                const __m512 r = _mm512_maskz_loadu_ps(have, rdiv + from);
                for (index_t c = c0; c < c1; ++c) {
                    const __m512 v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(have, grad_out + c * os + from), r, zero);
                    _mm512_mask_storeu_ps(grad_in + c * xs + 16 * h, keep, spread(v, ix, m));
                }
            }
            return;
        }
        // Longer rows: vector by vector over a block of planes in L1 (their scaled planes side
        // by side), each vector's tables in registers for all the block's rows.
        const index_t block = std::min(c1 - c0, std::max<index_t>(1, perm_block_bytes / (xs * static_cast<index_t>(sizeof(float)))));
        const auto scaled = scratch(block);
        for (index_t cb = c0; cb < c1; cb += block) {
            const index_t n = std::min(block, c1 - cb);
            for (index_t b = 0; b < n; ++b) scale(grad_out + (cb + b) * os, scaled.get() + b * pitch + gap);
            for (index_t h = 0; h < nv; ++h) {
                __m512i ix[K];
                __mmask16 m[K];
                tables(h, ix, m);
                const index_t from = base_[h], col = 16 * h;
                const __mmask16 keep = store_[h];
                for (index_t b = 0; b < n; ++b) {
                    const float* const sc = scaled.get() + b * pitch + gap;
                    float* const x = grad_in + (cb + b) * xs + col;
                    for (index_t y = y0; y < y1; ++y) _mm512_mask_storeu_ps(x + y * W, keep, spread(gather(sc, y, from), ix, m));
                }
            }
        }
    }

    // The separable form (perm_bsep_fits): each output row scaled and spread along the row
    // once (its K permutes), into a row of NV vectors; then the outer axes' sums, one axis at a
    // time: 3-D sums, per first-axis output, the spread rows each input row of the second axis
    // gathers (a scratch of H rows per output), then for each input row the scratch rows of the
    // first-axis outputs gathering it; 2-D the spread rows each input row gathers. Per input
    // row that is a sum of k[0] loaded rows, where the gather above sums kc = k[0] k[1] scaled
    // rows and spreads them (pool_ci_3d regular, 3x3x3 at stride 2 on 16^3: 21 -> 13 us in a harness).
    // Padding entries of the second-to-last axis name the row of zeros past the spread rows;
    // the first axis's (3-D) are left out. Each output is computed alike whatever y0 .. y1 (the
    // split rows give the whole plane's bits).
    template <int K, int NV>
    AVGPOOL_NOINLINE void separable(const float* grad_out, float* grad_in, index_t c0, index_t c1, index_t y0, index_t y1) const {
        constexpr index_t VW = 16 * NV;  // floats of a spread row
        const pool_geometry<R>& g = p_.geometry;
        const float* const rdiv = p_.template plane_reciprocals<float>();
        const index_t W = W_, Wo = Wo_, xs = xs_, os = os_;
        const index_t H = g.input[R - 2], Ho = g.output[R - 2];
        const index_t Do = R == 3 ? g.output[0] : 1;
        const index_t* const L1 = p_.bwd().perm_bouter.data() + p_.bwd().perm_bouter_at[R - 2];
        const index_t k1 = p_.bwd().perm_bouter_k[R - 2];
        const index_t* const L0 = p_.bwd().perm_bouter.data() + p_.bwd().perm_bouter_at[0];
        const index_t k0 = R == 3 ? p_.bwd().perm_bouter_k[0] : 1;
        __m512i idx[NV][K];
        __mmask16 m[NV][K];
        for (int h = 0; h < NV; ++h)
            for (int j = 0; j < K; ++j) {
                idx[h][j] = perm_table(idx_ + (h * K + j) * 16);
                m[h][j] = mask_[h * K + j];
            }
        const __mmask16 keep = static_cast<__mmask16>((1u << Wo) - 1u);
        const __m512 zero = _mm512_setzero_ps();
        bool full[NV];  // vectors wholly inside the row: plain stores
        for (int h = 0; h < NV; ++h) full[h] = store_[h] == 0xffff;
        auto put = [&](float* dst, __m512 v, index_t h) AVGPOOL_INLINE_LAMBDA {
            if (full[h])
                _mm512_storeu_ps(dst, v);
            else
                _mm512_mask_storeu_ps(dst, store_[h], v);
        };
        // Only what the rows y0 .. y1 - 1 read is made (a split call spreading whole planes
        // cost 7x on 1x1x1100x16 cut in blocks, review): 3-D, the first-axis outputs [od0, od1)
        // they gather and the second-axis rows [hlo, hhi) of their sums (all when the rows
        // span slices); the spread rows [elo, ehi) those sums, or 2-D those rows, gather.
        index_t d0 = 0, d1 = 1, od0 = 0, od1 = 1, hlo = y0, hhi = y1;
        if (R == 3) {
            d0 = y0 / H, d1 = (y1 + H - 1) / H, od0 = Do, od1 = 0;
            for (const index_t* l = L0 + d0 * k0; l < L0 + d1 * k0; ++l)
                if (*l < Do) od0 = std::min(od0, *l), od1 = std::max(od1, *l + 1);
            hlo = d1 - d0 == 1 ? y0 - d0 * H : 0;
            hhi = d1 - d0 == 1 ? y1 - d0 * H : H;
        }
        index_t elo = Ho, ehi = 0;
        for (const index_t* l = L1 + hlo * k1; l < L1 + hhi * k1; ++l)
            if (*l < Ho) elo = std::min(elo, *l), ehi = std::max(ehi, *l + 1);
        // [spread rows (Ho + 1, the last zeros)][3-D: first-stage sums, Do x H]
        const index_t erows = Ho + 1, frows = R == 3 ? Do * H : 0;
        line_buffer<float> buf(static_cast<std::size_t>((erows + frows) * VW));
        float* const E = buf.get();
        float* const F = E + erows * VW;
        std::fill(E + Ho * VW, E + erows * VW, 0.0f);
        auto spread = [&](const float* gr, const float* rd, float* e) AVGPOOL_INLINE_LAMBDA {
            const __m512 v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(keep, gr), _mm512_maskz_loadu_ps(keep, rd), zero);
            unrolled<NV>([&](auto h) AVGPOOL_INLINE_LAMBDA {
                __m512 acc = _mm512_maskz_permutexvar_ps(m[h][0], idx[h][0], v);
                for (int j = 1; j < K; ++j) acc = _mm512_add_ps(acc, _mm512_maskz_permutexvar_ps(m[h][j], idx[h][j], v));
                _mm512_store_ps(e + 16 * h, acc);
            });
        };
        // dst row = the sum of the k rows of src the list names (row units of VW floats).
        auto gather = [&](const float* src, const index_t* l, index_t k, auto store) AVGPOOL_INLINE_LAMBDA {
            unrolled<NV>([&](auto h) AVGPOOL_INLINE_LAMBDA {
                const __m512 v = k == 2   ? _mm512_add_ps(_mm512_load_ps(src + l[0] * VW + 16 * h), _mm512_load_ps(src + l[1] * VW + 16 * h))
                                 : k == 1 ? _mm512_load_ps(src + l[0] * VW + 16 * h)
                                          : perm_sum<0>(k, [&](index_t i) { return _mm512_load_ps(src + l[i] * VW + 16 * h); });
                store(v, static_cast<index_t>(h));
            });
        };
        for (index_t c = c0; c < c1; ++c) {
            const float* const gp = grad_out + c * os;
            float* const x = grad_in + c * xs;
            if (R == 2) {
                for (index_t r = elo; r < ehi; ++r) spread(gp + r * Wo, rdiv + r * Wo, E + r * VW);
                for (index_t y = y0; y < y1; ++y)
                    gather(E, L1 + y * k1, k1, [&](__m512 v, index_t h) { put(x + y * W + 16 * h, v, h); });
                continue;
            }
            for (index_t od = od0; od < od1; ++od) {
                for (index_t r = elo; r < ehi; ++r) spread(gp + (od * Ho + r) * Wo, rdiv + (od * Ho + r) * Wo, E + r * VW);
                float* const f = F + od * H * VW;
                for (index_t y = hlo; y < hhi; ++y)
                    gather(E, L1 + y * k1, k1, [&](__m512 v, index_t h) { _mm512_store_ps(f + y * VW + 16 * h, v); });
            }
            for (index_t d = d0; d < d1; ++d) {
                // The first-stage sums input row d gathers (rows od * H), padding entries left out
                // (a row gathering one is a copy: 0.9x the time at 3x3x3 stride 2; none, zeros).
                index_t l[perm_max_rows];
                index_t n0 = 0;
                for (index_t i = 0; i < k0; ++i)
                    if (L0[d * k0 + i] < Do) l[n0++] = L0[d * k0 + i] * H;
                const index_t h0 = std::max<index_t>(0, y0 - d * H), h1 = std::min(H, y1 - d * H);
                if (n0 == 0) {
                    for (index_t y = h0; y < h1; ++y)
                        unrolled<NV>([&](auto h) AVGPOOL_INLINE_LAMBDA { put(x + (d * H + y) * W + 16 * h, zero, h); });
                    continue;
                }
                for (index_t y = h0; y < h1; ++y)
                    gather(F + y * VW, l, n0, [&](__m512 v, index_t h) { put(x + (d * H + y) * W + 16 * h, v, h); });
            }
        }
    }

    // Rows of 8 (pool_ci_3d's non_cubic): two rows a vector, each gathering into its own half
    // and permuted within it, stored as one 16-float vector: half the permutes and stores a
    // row (14.4 -> 10.7 us). Each row sums and rounds as alone (an odd last row is alone).
    template <int K, int V, class Scale>
    AVGPOOL_NOINLINE void rows_of_eight(const float* grad_out, float* grad_in, index_t c0, index_t c1, index_t y0, index_t y1,
                                        float* sc, Scale&& scale) const {
        const index_t* const list = p_.bwd().perm_brows.data();
        const index_t kc = V > 0 ? V : kc_;
        // Each table's 8 lanes twice, the second copy selecting from the upper half.
        __m512i idx[K], idx2[K];
        __mmask16 m[K], m2[K];
        for (int j = 0; j < K; ++j) {
            idx[j] = perm_table(idx_ + j * 16);
            m[j] = mask_[j];
            // 128-bit blocks 0, 1, 0, 1 (the zero-masked form: GCC 12 warns of the unmasked one)
            const __m512i both = _mm512_maskz_shuffle_i32x4(0xffff, idx[j], idx[j], 0x44);
            idx2[j] = _mm512_mask_add_epi32(both, 0xff00, both, _mm512_set1_epi32(8));
            m2[j] = static_cast<__mmask16>((m[j] & 0xffu) * 0x101u);
        }
        auto spread = [&](__m512 v, const __m512i* ix, const __mmask16* mk) {
            __m512 acc = _mm512_maskz_permutexvar_ps(mk[0], ix[0], v);
            for (int j = 1; j < K; ++j) acc = _mm512_add_ps(acc, _mm512_maskz_permutexvar_ps(mk[j], ix[j], v));
            return acc;
        };
        for (index_t c = c0; c < c1; ++c) {
            float* const x = grad_in + c * xs_;
            scale(grad_out + c * os_, sc);
            index_t y = y0;
            for (; y + 2 <= y1; y += 2) {
                const index_t* l0 = list + y * kc;
                const index_t* l1 = l0 + kc;
                const __m512 v = perm_sum<V>(kc, [&](index_t i) {
                    // (The upper half through the 64-bit form, AVX512F where the 32-bit one is DQ;
                    // zero-masked, as GCC 12 warns of the unmasked form's undefined source.)
                    const __m512d lo8 = _mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(sc + l0[i])));
                    return _mm512_castpd_ps(_mm512_maskz_insertf64x4(0xff, lo8, _mm256_castps_pd(_mm256_loadu_ps(sc + l1[i])), 1));
                });
                _mm512_storeu_ps(x + y * 8, spread(v, idx2, m2));
            }
            if (y < y1) {
                const index_t* l = list + y * kc;
                const __m512 v = perm_sum<V>(kc, [&](index_t i) { return _mm512_loadu_ps(sc + l[i]); });
                _mm512_mask_storeu_ps(x + y * 8, 0xff, spread(v, idx, m));
            }
        }
    }

    const plan_data<R>& p_;
    index_t W_ = 0, Wo_ = 0, xs_ = 0, os_ = 0, ni_ = 1, kc_ = 1, taps_ = 1, nv_ = 1, zero_gap_ = 16;
    bool sep_ = false;  // the separable form (perm_bsep_fits)
    index_t base_[perm_bmax_vecs] = {};      // per column vector: its first output
    __mmask16 store_[perm_bmax_vecs] = {};  // and its columns inside the row
    // Per column vector and cover slot (only the used part is copied: no 4 KiB clear).
    alignas(64) std::int32_t idx_[perm_bmax_vecs * perm_max_taps * 16];
    std::uint16_t mask_[perm_bmax_vecs * perm_max_taps];
};

/// The whole-plane kernels' forward tables (see perm_plane_kernel), built once per plan.
struct perm_plane_tables {
    /// hfirst: take the horizontal-first order where it applies (tests turn it off to check
    /// the other order on the same plans).
    explicit perm_plane_tables(const plan_data<2>& p, bool hfirst = true) {
        const pool_geometry<2>& g = p.geometry;
        const index_t H = g.input[0], W = g.input[1], Wo = g.output[1], n = H * W;
        xs_ = n;
        os_ = p.output_spatial_volume();
        kv_ = g.kernel[0];
        kh_ = g.kernel[1];
        keep_ = static_cast<__mmask16>((1u << os_) - 1u);
        if (hfirst && horizontal_tables(g)) return;
        const index_t span = (g.output[0] - 1) * g.strides[0] * W + W;  // positions of S used
        const index_t nv = (span + 15) / 16;  // vectors with positions to sum (the rest stay empty)
        for (index_t v = 0; v < nv; ++v)
            for (index_t t = 0; t < kv_; ++t) {
                const index_t shift = (t * g.dilations[0] - g.pads_begin[0]) * W;
                off_[v * perm_max_taps + t] = 16 * v + shift;
                std::uint32_t m = 0;
                for (index_t l = 0; l < 16; ++l) {
                    const index_t i = 16 * v + l;
                    if (i < span && i + shift >= 0 && i + shift < n) m |= 1u << l;
                }
                vmask_[v * perm_max_taps + t] = static_cast<__mmask16>(m);
            }
        // Output (oy, ox) at lane oy * Wo + ox, tap th: S at oy * s * W + column, from the
        // first pair of vectors (positions < 32) or the second.
        for (index_t t = 0; t < kh_; ++t) {
            std::uint32_t ma = 0, mb = 0;
            for (index_t o = 0; o < os_; ++o) {
                const index_t oy = o / Wo, ox = o % Wo;
                const index_t col = ox * g.strides[1] - g.pads_begin[1] + t * g.dilations[1];
                if (col < 0 || col >= W) continue;
                const index_t j = oy * g.strides[0] * W + col;
                if (j < 32) {
                    idx_[t * 16 + o] = static_cast<std::int32_t>(j);
                    ma |= 1u << o;
                } else {
                    idx_[(perm_max_taps + t) * 16 + o] = static_cast<std::int32_t>(j - 32);
                    mb |= 1u << o;
                }
            }
            hmask_[t] = static_cast<__mmask16>(ma);
            hmask_[perm_max_taps + t] = static_cast<__mmask16>(mb);
        }
    }

    // The horizontal-first tables, if the order applies: row sums (r, ox) at lane r * Wo + ox
    // of vector (r * Wo + ox) / 16, each vector's taps within 32 positions of its base.
    bool horizontal_tables(const pool_geometry<2>& g) {
        const index_t H = g.input[0], W = g.input[1], Ho = g.output[0], Wo = g.output[1], n = H * W;
        const index_t nh = (H * Wo + 15) / 16;
        if (nh > 2) return false;
        // Built on every call: nested loops, no division (divisions by Wo made the tables cost
        // more than 16 planes' sums).
        index_t cols[16 * perm_max_taps];  // per output column and tap: the input column, or -1
        for (index_t ox = 0; ox < Wo; ++ox)
            for (index_t t = 0; t < kh_; ++t) {
                const index_t col = ox * g.strides[1] - g.pads_begin[1] + t * g.dilations[1];
                cols[ox * perm_max_taps + t] = col >= 0 && col < W ? col : -1;
            }
        index_t lo[2] = {n, n}, hi[2] = {-1, -1};
        for (index_t r = 0, l = 0; r < H; ++r)
            for (index_t ox = 0; ox < Wo; ++ox, ++l)
                for (index_t t = 0; t < kh_; ++t) {
                    const index_t col = cols[ox * perm_max_taps + t];
                    if (col < 0) continue;
                    lo[l >> 4] = std::min(lo[l >> 4], r * W + col);
                    hi[l >> 4] = std::max(hi[l >> 4], r * W + col);
                }
        for (index_t k = 0; k < nh; ++k) {
            if (hi[k] < 0) lo[k] = hi[k] = 0;  // no tap in the plane: the vector stays zero
            if (hi[k] - lo[k] >= 32) return false;
            hbase_[k] = lo[k];
        }
        // Zero lane: where every vector's columns leave the last of its 32 loaded lanes unused
        // and the row sums leave their lane 31 unused (or fit one vector), that lane is loaded
        // as zero and absent taps permute from it, so no permute needs a mask. Masks moved
        // from general registers took the permute port (13 moves to 9 permutes on 7x7).
        zero_lane_ = (nh == 1 || H * Wo < 32) && hi[0] - lo[0] < 31 && (nh == 1 || hi[1] - lo[1] < 31);
        const std::int32_t none = zero_lane_ ? 31 : 0;
        for (index_t k = 0; k < nh; ++k)
            for (index_t j = 0; j < 2; ++j) {
                std::uint32_t m = 0;  // the loaded columns within the plane
                for (index_t l = 0; l < 16; ++l)
                    if (hbase_[k] + 16 * j + l < n && !(zero_lane_ && j == 1 && l == 15)) m |= 1u << l;
                lmask_[2 * k + j] = static_cast<__mmask16>(m);
            }
        std::fill(idx_, idx_ + 2 * perm_max_taps * 16, none);
        for (index_t r = 0, l = 0; r < H; ++r)
            for (index_t ox = 0; ox < Wo; ++ox, ++l) {
                const index_t k = l >> 4, lane = l & 15;
                for (index_t t = 0; t < kh_; ++t) {
                    const index_t col = cols[ox * perm_max_taps + t];
                    if (col < 0) continue;
                    idx_[(k * perm_max_taps + t) * 16 + lane] = static_cast<std::int32_t>(r * W + col - hbase_[k]);
                    hmask_[k * perm_max_taps + t] = static_cast<__mmask16>(hmask_[k * perm_max_taps + t] | (1u << lane));
                }
            }
        // Output (oy, ox), vertical tap t: the row sums of row oy * s - pad + t * d.
        std::fill(vidx_, vidx_ + perm_max_taps * 16, none);
        for (index_t t = 0; t < kv_; ++t) {
            std::uint32_t m = 0;
            for (index_t oy = 0; oy < Ho; ++oy) {
                const index_t row = oy * g.strides[0] - g.pads_begin[0] + t * g.dilations[0];
                if (row < 0 || row >= H) continue;
                for (index_t ox = 0; ox < Wo; ++ox) {
                    vidx_[t * 16 + oy * Wo + ox] = static_cast<std::int32_t>(row * Wo + ox);
                    m |= 1u << (oy * Wo + ox);
                }
            }
            vmask_[t] = static_cast<__mmask16>(m);
        }
        nh_ = nh;
        return true;
    }

    index_t xs_ = 0, os_ = 0, kv_ = 1, kh_ = 1;
    __mmask16 keep_ = 0;
    index_t off_[4 * perm_max_taps] = {};
    __mmask16 vmask_[4 * perm_max_taps] = {};
    alignas(64) std::int32_t idx_[2 * perm_max_taps * 16] = {};
    __mmask16 hmask_[2 * perm_max_taps] = {};
    // Horizontal first (nh_ > 0: its vectors of row sums): each vector's first column read
    // and its two loads' masks, the vertical taps' indices (their masks in vmask_).
    index_t nh_ = 0;
    bool zero_lane_ = false;
    index_t hbase_[2] = {};
    __mmask16 lmask_[4] = {};
    alignas(64) std::int32_t vidx_[perm_max_taps * 16] = {};
};

/// The whole-plane form, for planes of at most 64 inputs with at most 16 outputs (ShuffleNet's
/// 7x7 and 8x8 at stride 2). No row is set up at all. Two orders:
/// - horizontal first, where the horizontal sums of every input row (H x Wo of them) fit two
///   vectors: per horizontal tap, one two-source permute of the plane's loaded columns per
///   vector of sums, then per vertical tap one permute of those sums gives the outputs. 3x3
///   stride 2 on 7x7 takes 9 permutes, 6 additions and 4 loads a plane;
/// - vertical first, otherwise: four vectors of vertical sums, S[i] = sum over taps t of
///   x[i + (t * dilation - pad) * W] (masked to the plane), computed for every position in
///   flat order with shifted loads, then per horizontal tap one permute from each pair of S
///   vectors. On 7x7 that is 12 masked loads and 13 additions: the masked loads and the
///   additions share two ports with the permutes, so it ran at 21 cycles a plane against 9.
template <class M = float>
class perm_plane_kernel {
public:
    /// With the plan's tables, or others built from the same plan (tests).
    perm_plane_kernel(const plan_data<2>& p, pool_op op) : perm_plane_kernel(p, op, *p.perm_plane_f) {}
    perm_plane_kernel(const plan_data<2>& p, pool_op op, const perm_plane_tables& t)
        : p_(p), t_(t), average_(op == pool_op::average) {}

    /// Planes item_begin .. item_end - 1 (item = n * C + c).
    void run(const M* in, M* out, index_t item_begin, index_t item_end) const {
        if (t_.nh_ == 2 && t_.zero_lane_) {
            if (t_.kv_ == 3 && t_.kh_ == 3) return hplanes<3, 3, 2, true>(in, out, item_begin, item_end);
            if (t_.kv_ == 2 && t_.kh_ == 2) return hplanes<2, 2, 2, true>(in, out, item_begin, item_end);
            return hplanes<0, 0, 2, true>(in, out, item_begin, item_end);
        }
        if (t_.nh_ == 2) return hplanes<0, 0, 2, false>(in, out, item_begin, item_end);
        if (t_.nh_ == 1 && t_.zero_lane_) return hplanes<0, 0, 1, true>(in, out, item_begin, item_end);
        if (t_.nh_ == 1) return hplanes<0, 0, 1, false>(in, out, item_begin, item_end);
        if (t_.kv_ == 3 && t_.kh_ == 3) return planes<3, 3>(in, out, item_begin, item_end);
        if (t_.kv_ == 2 && t_.kh_ == 2) return planes<2, 2>(in, out, item_begin, item_end);
        planes<0, 0>(in, out, item_begin, item_end);
    }

    /// Whether the planes are summed horizontally first, and if so whether without masks.
    bool horizontal_first() const noexcept { return t_.nh_ > 0; }
    bool zero_lane() const noexcept { return t_.zero_lane_; }

private:
    // The horizontal-first order; NH: vectors of row sums (1 or 2); ZL: the zero lane.
    template <int KV, int KH, int NH, bool ZL>
    void hplanes(const M* in, M* out, index_t c0, index_t c1) const {
        const float* const rdiv = average_ ? p_.template plane_reciprocals<float>() : nullptr;
        const index_t kv = KV > 0 ? KV : t_.kv_, kh = KH > 0 ? KH : t_.kh_, xs = t_.xs_, os = t_.os_;
        const __mmask16 keep = t_.keep_;
        const __m512 scale = rdiv != nullptr ? _mm512_maskz_loadu_ps(keep, rdiv) : _mm512_set1_ps(1.0f);
        __m512i hi[NH][perm_max_taps], vi[perm_max_taps];
        for (index_t t = 0; t < kh; ++t)
            for (int k = 0; k < NH; ++k) hi[k][t] = perm_table(t_.idx_ + (k * perm_max_taps + t) * 16);
        for (index_t t = 0; t < kv; ++t) vi[t] = perm_table(t_.vidx_ + t * 16);
        // Locals, so that they stay in mask registers (the stores may alias the members).
        const __mmask16 lm[4] = {t_.lmask_[0], t_.lmask_[1], t_.lmask_[2], t_.lmask_[3]};
        const index_t base[2] = {t_.hbase_[0], t_.hbase_[1]};
        auto perm = [&](__mmask16 m, __m512 a, __m512i i, __m512 b) {
            return ZL ? _mm512_permutex2var_ps(a, i, b) : _mm512_maskz_permutex2var_ps(m, a, i, b);
        };
        for (index_t c = c0; c < c1; ++c) {
            // As an integer: a second load's masked-off lanes may lie past the array.
            const std::uintptr_t x = reinterpret_cast<std::uintptr_t>(in + c * xs);
            auto at = [&](index_t i) { return reinterpret_cast<const M*>(x + static_cast<std::uintptr_t>(i) * sizeof(M)); };
            __m512 h[2];
            unrolled<NH>([&](auto k) {
                const __m512 a = masked_load(lm[2 * k], at(base[k]));
                const __m512 b = masked_load(lm[2 * k + 1], at(base[k] + 16));
                h[k] = perm_sum<KH>(kh, [&](index_t t) { return perm(t_.hmask_[k * perm_max_taps + t], a, hi[k][t], b); });
            });
            if constexpr (NH == 1) h[1] = _mm512_setzero_ps();
            __m512 acc = perm_sum<KV>(kv, [&](index_t t) { return perm(t_.vmask_[t], h[0], vi[t], h[1]); });
            // (+ 0, fused into the scaling: see plus_zero.)
            acc = _mm512_fmadd_ps(acc, scale, _mm512_setzero_ps());  // (scale is 1 for sums)
            masked_store(out + c * os, keep, acc);
        }
    }

    // KV, KH: the taps (0: the tables' at run time).
    template <int KV, int KH>
    void planes(const M* in, M* out, index_t c0, index_t c1) const {
        const float* const rdiv = average_ ? p_.template plane_reciprocals<float>() : nullptr;
        const index_t kv = KV > 0 ? KV : t_.kv_, kh = KH > 0 ? KH : t_.kh_, xs = t_.xs_, os = t_.os_;
        const __mmask16 keep = t_.keep_;
        const __m512 scale = rdiv != nullptr ? _mm512_maskz_loadu_ps(keep, rdiv) : _mm512_set1_ps(1.0f);
        __m512i ia[perm_max_taps], ib[perm_max_taps];
        for (index_t t = 0; t < kh; ++t) {
            ia[t] = perm_table(t_.idx_ + t * 16);
            ib[t] = perm_table(t_.idx_ + (perm_max_taps + t) * 16);
        }
        for (index_t c = c0; c < c1; ++c) {
            // The plane's address as an integer: the shifted loads' masked-off lanes may lie
            // before or past it (never read), and pointer arithmetic may not leave the array.
            const std::uintptr_t x = reinterpret_cast<std::uintptr_t>(in + c * xs);
            // Always four vectors, unrolled, so they stay in registers (the unused ones load
            // nothing: their masks are empty).
            __m512 sv[4];
            unrolled<4>([&](auto v) {
                const index_t* o = t_.off_ + v * perm_max_taps;
                const __mmask16* mk = t_.vmask_ + v * perm_max_taps;
                auto tap = [&](index_t t) {
                    return masked_load(mk[t], reinterpret_cast<const M*>(x + static_cast<std::uintptr_t>(o[t] * static_cast<index_t>(sizeof(M)))));
                };
                sv[v] = perm_sum<KV>(kv, tap);
            });
            auto hsum = [&](index_t t) {
                const __m512 a = _mm512_maskz_permutex2var_ps(t_.hmask_[t], sv[0], ia[t], sv[1]);
                return _mm512_add_ps(a, _mm512_maskz_permutex2var_ps(t_.hmask_[perm_max_taps + t], sv[2], ib[t], sv[3]));
            };
            __m512 acc = perm_sum<KH>(kh, hsum);
            // (+ 0, fused into the scaling: see plus_zero.)
            acc = _mm512_fmadd_ps(acc, scale, _mm512_setzero_ps());  // (scale is 1 for sums)
            masked_store(out + c * os, keep, acc);
        }
    }

    const plan_data<2>& p_;
    const perm_plane_tables& t_;
    bool average_;
};

/// Backward of the horizontal-first whole-plane form, its transpose: a plane's scaled output
/// gradients (one vector) go to the row sums' lanes, one permute per output row covering an
/// input row, then to the input lanes, one two-source permute per output column covering an
/// input column; every input vector is stored whole, so grad_in is overwritten with no
/// clearing pass (uncovered inputs and padding get +0). 576 7x7 planes at 3x3 stride 2: 12
/// permutes a plane, where the tile kernel's transposes took 6.6 us.
class perm_plane_backward {
public:
    explicit perm_plane_backward(const plan_data<2>& p) {
        const pool_geometry<2>& g = p.geometry;
        // The forward reciprocals: an empty window's (inf or 1) never reaches grad_in, as no
        // input lists it.
        std::copy_n(p.plane_reciprocals<float>(), p.output_spatial_volume(), rdiv_);
        const index_t H = g.input[0], W = g.input[1], Ho = g.output[0], Wo = g.output[1];
        n_ = H * W;
        os_ = p.output_spatial_volume();
        nv_ = (n_ + 15) / 16;
        // Row sums (r, ox) at lane r * Wo + ox; with fewer than 32 of them lane 31 stays zero,
        // and absent taps permute from it (else they are masked).
        zero_lane_ = H * Wo < 32;
        // Row-sum lane (r, ox) from output (oy, ox) for each oy whose window holds row r.
        std::vector<std::vector<index_t>> rows(static_cast<std::size_t>(H));
        for (index_t oy = 0; oy < Ho; ++oy)
            for (index_t t = 0; t < g.kernel[0]; ++t) {
                const index_t r = oy * g.strides[0] - g.pads_begin[0] + t * g.dilations[0];
                if (r >= 0 && r < H) rows[static_cast<std::size_t>(r)].push_back(oy);
            }
        std::vector<std::vector<index_t>> cols(static_cast<std::size_t>(W));
        for (index_t ox = 0; ox < Wo; ++ox)
            for (index_t t = 0; t < g.kernel[1]; ++t) {
                const index_t c = ox * g.strides[1] - g.pads_begin[1] + t * g.dilations[1];
                if (c >= 0 && c < W) cols[static_cast<std::size_t>(c)].push_back(ox);
            }
        // At least one tap each: a row or column no window covers permutes zeros.
        cv_ = ch_ = 1;
        for (const auto& l : rows) cv_ = std::max(cv_, static_cast<index_t>(l.size()));
        for (const auto& l : cols) ch_ = std::max(ch_, static_cast<index_t>(l.size()));
        std::fill(std::begin(ridx_), std::end(ridx_), 16);  // the zero source
        for (index_t l = 0; l < H * Wo; ++l) {
            const auto& list = rows[static_cast<std::size_t>(l / Wo)];
            for (std::size_t j = 0; j < list.size(); ++j)
                ridx_[((l / 16) * perm_max_taps + static_cast<index_t>(j)) * 16 + l % 16] = static_cast<std::int32_t>(list[j] * Wo + l % Wo);
        }
        std::fill(std::begin(cidx_), std::end(cidx_), zero_lane_ ? 31 : 0);
        for (index_t i = 0; i < n_; ++i) {
            const index_t r = i / W;
            const auto& list = cols[static_cast<std::size_t>(i % W)];
            for (std::size_t j = 0; j < list.size(); ++j) {
                const std::size_t at = static_cast<std::size_t>((i / 16) * perm_max_taps + static_cast<index_t>(j));
                cidx_[at * 16 + static_cast<std::size_t>(i % 16)] = static_cast<std::int32_t>(r * Wo + list[j]);
                cmask_[at] = static_cast<__mmask16>(cmask_[at] | (1u << (i % 16)));
            }
        }
        for (index_t v = 0; v < nv_; ++v)
            smask_[v] = static_cast<__mmask16>(n_ - 16 * v >= 16 ? 0xffffu : (1u << (n_ - 16 * v)) - 1u);
    }

    /// Whether the plan suits it (on the first backward call: then bwd().perm_plane_b holds it): the
    /// whole-plane form's geometry with at most 32 row sums.
    static bool applicable(const plan_data<2>& p) noexcept {
        return perm_types<float, float>() && !p.plane_rdiv_f.empty() && perm_plane_geometry<2>(p) &&
               p.geometry.input[0] * p.geometry.output[1] <= 32;
    }

    /// grad_in planes item_begin .. item_end - 1 from grad_out.
    void run(const float* grad_out, float* grad_in, index_t item_begin, index_t item_end) const {
        if (zero_lane_ && cv_ == 2 && ch_ == 2 && nv_ == 4) return planes<2, 2, 4, true>(grad_out, grad_in, item_begin, item_end);
        if (zero_lane_) return planes<0, 0, 0, true>(grad_out, grad_in, item_begin, item_end);
        planes<0, 0, 0, false>(grad_out, grad_in, item_begin, item_end);
    }

    bool zero_lane() const noexcept { return zero_lane_; }

private:
    // CV, CH: the most output rows / columns covering an input row / column; NV: input vectors
    // (0: at run time); ZL: zero_lane_.
    template <int CV, int CH, int NV, bool ZL>
    void planes(const float* grad_out, float* grad_in, index_t c0, index_t c1) const {
        const index_t cv = CV > 0 ? CV : cv_, ch = CH > 0 ? CH : ch_, nv = NV > 0 ? NV : nv_, os = os_, n = n_;
        const __mmask16 keep = static_cast<__mmask16>((1u << os) - 1u);
        const __m512 scale = _mm512_maskz_loadu_ps(keep, rdiv_);
        __m512i ri[2][perm_max_taps];
        for (index_t j = 0; j < cv; ++j)
            for (int k = 0; k < 2; ++k) ri[k][j] = perm_table(ridx_ + (k * perm_max_taps + j) * 16);
        const __m512 zero = _mm512_setzero_ps();
        for (index_t c = c0; c < c1; ++c) {
            // (+ 0: a -0 gradient adds +0, as the reference's sums from +0 do.)
            const __m512 gs = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(keep, grad_out + c * os), scale, zero);
            __m512 h[2];
            for (int k = 0; k < 2; ++k)
                h[k] = perm_sum<CV>(cv, [&](index_t j) { return _mm512_permutex2var_ps(gs, ri[k][j], zero); });
            float* const gi = grad_in + c * n;
            auto vector = [&](index_t v) {
                const __m512 acc = perm_sum<CH>(ch, [&](index_t j) {
                    const std::size_t at = static_cast<std::size_t>(v * perm_max_taps + j);
                    const __m512i idx = _mm512_loadu_si512(cidx_ + at * 16);
                    return ZL ? _mm512_permutex2var_ps(h[0], idx, h[1]) : _mm512_maskz_permutex2var_ps(cmask_[at], h[0], idx, h[1]);
                });
                // A plane's one last value (7x7) by a scalar store: with the masked 512-bit
                // store ShuffleNet's 576 planes of 7x7 took 1.88 against 1.62 us (2.21 against
                // 1.77 with grad_in 16 bytes past a 64-byte boundary).
                if (16 * v + 16 <= n)
                    _mm512_storeu_ps(gi + 16 * v, acc);
                else if (16 * v + 1 == n)
                    gi[16 * v] = _mm512_cvtss_f32(acc);
                else
                    _mm512_mask_storeu_ps(gi + 16 * v, smask_[v], acc);
            };
            if constexpr (NV > 0) {
                unrolled<NV>([&](auto v) { vector(static_cast<index_t>(v)); });
            } else {
                for (index_t v = 0; v < nv; ++v) vector(v);
            }
        }
    }

    index_t n_ = 0, os_ = 0, nv_ = 0, cv_ = 1, ch_ = 1;
    float rdiv_[16] = {};
    bool zero_lane_ = false;
    // Per row-sum vector and covering output row: lanes of the scaled gradients (16: zero).
    alignas(64) std::int32_t ridx_[2 * perm_max_taps * 16];
    // Per input vector and covering output column: lanes of the row sums, and their masks.
    alignas(64) std::int32_t cidx_[4 * perm_max_taps * 16];
    __mmask16 cmask_[4 * perm_max_taps] = {};
    __mmask16 smask_[4] = {};
};

#endif  // AVGPOOL_PERM_KERNEL

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_KERNEL_PERM_HPP
