// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The stride-2 row kernel, AVX2 code (in AVX-512 builds for 2-D planes only, ahead of the
// permute kernel; see AVGPOOL_STRIDE2_KERNEL): channels-first float planes of R = 1 to 3 with rows of 9 to 128 inputs at stride 2 on the
// last axis and 2x2, 3x3 or 5x5 windows: ShuffleNet's 3x3 pools on 14x14 to 56x56,
// DenseNet's 2x2 on 14x14 and 28x28. The tile kernel spent about half its time there on transposes, the row and
// block kernels on setting rows up. Here an output row is the sum of its window's input rows,
// kept in registers as chunks of 16 columns (two vectors; one or two chunks a row, longer rows
// a chunk at a time: s2_kernel::stream); a
// chunk's sum is de-interleaved once into its even and odd columns, and each horizontal tap is
// then one of those two vectors as it is, or moved by whole lanes (a permute) with the lanes
// moved past the chunk's edge taken from the neighbouring chunk or zeroed past the row: tap t
// of output o reads column 2 o - pad + t, whose parity is the tap's. The vectors that pass the
// row's end are masked loads, which read zeros there (windows running past the row under ceil
// rounding sum zeros, as the window tables say) and nothing past the tensor. Output rows are
// stored as whole vectors but in a call's last row, so a row's spare lanes land on the next
// row, which is stored after it.
// The sums run in the tile kernel's order for R = 2 (the window's rows in order, then the taps
// in order; a zeroed lane adds +0, which changes no sum but a zero's sign, and the final + 0
// of the quotient makes such zeros +0 either way), and the quotient is the sum times the same
// reciprocal: on the planes both take, the results are the tile kernel's, bit for bit. (For
// R = 3 a window's rows are one sum, where the tile kernel sums each axis in turn.)
// Rows of 7 or 8 columns under a 3x3 window padded by 1 (ShuffleNet's 7x7 planes, 4 outputs a
// row) take a path of their own (s2_kernel::narrow): two output rows share a vector.
// In AVX-512 builds rows of 33 to 128 columns (ShuffleNet's 56x56, pool_ci_2d's 50x50) take a
// 16-lane form instead of streaming (s2_kernel::wide_rows): chunks of 32 columns de-interleaved
// in order by one two-source permute each, taps moved by a lane shift; the same sums in the
// same order, so the same bits.
// Backward (s2_backward, below) is the transpose on the same planes of 9 columns and more and
// on rows of up to 64 (ShuffleNet's and DenseNet's 56x56): output rows divided and expanded
// along the row with the same permutes, input rows summed from them; with AVX-512, rows of 33
// to 64 in 16-lane vectors (expand_zmm, stream_as).
#ifndef AVGPOOL_DETAIL_KERNEL_STRIDE2_HPP
#define AVGPOOL_DETAIL_KERNEL_STRIDE2_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#if defined(__AVX512F__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

#include "kernel_perm.hpp"
#include "plan.hpp"
#include "simd.hpp"

// AVX2 code with 8-lane float vectors, in AVX2 and AVX-512 builds. With AVX-512 it takes only
// 2-D float planes of rows 9 to 128 wide (s2_geometry), ahead of the permute kernel: on a Zen 5
// (session 51, bench medians of 3 alternating processes) these planes took 0.77-0.85x the
// permute kernel's time forward and 0.46-0.68x backward (ShuffleNet 14x14 and 28x28, DenseNet's
// 2x2 on 14x14, pool_ci_2d), while the permute kernel kept 1-D rows (0.6x) and the 7x7 planes
// (perm_plane_kernel, 0.8x the narrow path here).
#if AVGPOOL_HAS_XSIMD && defined(__AVX2__)
#define AVGPOOL_STRIDE2_KERNEL 1
#else
#define AVGPOOL_STRIDE2_KERNEL 0
#endif
// The kernel's 16-lane form (s2_kernel::wide_rows) for rows of 33 to 128 columns, in AVX-512
// builds. Define AVGPOOL_STRIDE2_WIDE to 0 to keep the 8-lane form there (to compare them).
#if !AVGPOOL_STRIDE2_KERNEL || !defined(__AVX512F__)
#undef AVGPOOL_STRIDE2_WIDE
#define AVGPOOL_STRIDE2_WIDE 0
#elif !defined(AVGPOOL_STRIDE2_WIDE)
#define AVGPOOL_STRIDE2_WIDE 1
#endif

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

// Input rows summed per output row and horizontal taps, at most.
constexpr index_t s2_max_rows = 5;
constexpr index_t s2_max_taps = 5;
// Rows of s2_min_width columns and more, in chunks of 16 columns (8 outputs), at most
// s2_max_chunks of them. On 7x7 planes (4 outputs in 8 lanes) chunks were no faster than the
// tile kernel (10.5-11.4 us either way for 576 planes, 3x3): those rows take the narrow path
// (s2_kernel::narrow, two output rows a vector: 0.25x the tile kernel's time, paired
// harness). With four chunks (56x56) kept in registers at once they ran out and the block
// kernel was faster (25 against 33 us for 24 planes, 3x3): rows of more than two chunks
// stream (s2_unrolled_chunks).
constexpr index_t s2_min_width = 9;
static_assert(s2_min_width >= 9, "s2_kernel::run loads a one-chunk row's first vector whole");
constexpr index_t s2_max_chunks = 8;
// Rows of more chunks than this stream chunk by chunk (s2_kernel::stream), keeping three
// chunks' vectors live instead of the whole row's.
constexpr index_t s2_unrolled_chunks = 2;
// Backward expands output rows chunk by chunk and keeps fewer of them live: rows of up to four
// chunks (ShuffleNet's 56x56).
constexpr index_t s2_backward_max_chunks = 4;

// Whether backward sums and stores rows of 3 or 4 chunks in 16-lane vectors (s2_backward::
// stream_as) or in 8-lane halves of the 16-lane expansion. The same sums, so the same bits;
// only the speed differs, and by CPU: 3x3 stride-2 backward on 24x56x56 went 7.1 -> 5.7 us
// with 16 lanes on a Zen 5 (session 56), but took 9.5 us against 7.3 in 8-lane halves on a
// Xeon with AVX-512-FP16 (session 57; 48- to 64-wide rows alike, aligned or not).
// So 16 lanes on AMD CPUs, 8-lane halves elsewhere; AVGPOOL_STRIDE2_WIDE_STREAM = 0 or 1
// forces one.
inline bool s2_wide_stream_default() noexcept {
#if defined(AVGPOOL_STRIDE2_WIDE_STREAM)
    return AVGPOOL_STRIDE2_WIDE_STREAM != 0;
#elif defined(__AVX512F__) && (defined(__GNUC__) || defined(__clang__))
    static const bool amd = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        // Leaf 0: the vendor string in ebx, edx, ecx ("Auth" "enti" "cAMD").
        return __get_cpuid(0, &a, &b, &c, &d) != 0 && b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
    }();
    return amd;
#else
    return false;
#endif
}
// AVX-512 builds: rows of s2_wide_min_width columns up to s2_wide_vectors 16-lane vectors (all
// rows the kernel would stream) take s2_kernel::wide_rows. On rows of one or two 16-column
// chunks (ShuffleNet's 14x14 and 28x28, DenseNet's 2x2, pool_ci_2d's 30 and 32) it was slower
// than rows() (1.1-1.5x the time, harness, Zen 5): those keep the 8-lane code.
constexpr index_t s2_wide_min_width = 33;
constexpr index_t s2_wide_vectors = 8;

/// Chunks of 16 columns that cover a row of W inputs, or 0 if their 8 outputs each do not
/// cover the Wo outputs (pads past the row: chunks of no input would read past it).
constexpr index_t s2_chunks(index_t W, index_t Wo) noexcept {
    const index_t n = (W + 15) / 16;
    return Wo <= 8 * n ? n : 0;
}

/// The windows the kernel is compiled for, as (input rows per output row, taps, left pad) at
/// dilation 1: 2x2, 3x3 with and without padding, 5x5 padded; their case in s2_kernel::run, or
/// -1. (Run-time counts of rows and taps made a 3x3 pool 1.7x as slow, and a 4x4 one slower
/// than the tile kernel.)
constexpr int s2_pattern(index_t rows, index_t k, index_t d, index_t pl) noexcept {
    if (d != 1 || rows != k) return -1;
    if (k == 2 && pl == 0) return 0;
    if (k == 3 && pl == 1) return 1;
    if (k == 3 && pl == 0) return 2;
    if (k == 5 && pl == 2) return 3;
    return -1;
}

/// Rows of 7 or 8 columns that s2_kernel::narrow takes: 3 taps from column -1 at stride 2,
/// 4 outputs (the windows -1 .. 1, 1 .. 3, 3 .. 5, 5 .. 7, column 7 of a 7-wide row padding).
constexpr bool s2_narrow(index_t W, index_t Wo, index_t k, index_t d, index_t pl) noexcept {
    return (W == 7 || W == 8) && Wo == 4 && k == 3 && d == 1 && pl == 1;
}

/// Whether the geometry suits the stride-2 row kernel (float storage, AVX2 code; with AVX-512
/// 2-D planes only, not narrow rows): the
/// last axis at stride 2 with rows of one to s2_max_chunks chunks (s2_backward_max_chunks
/// for backward; forward leaves whole 2x2 blocks on rows of more than two chunks to the 2x2
/// kernel) and at least 4 outputs a chunk, or the narrow rows of s2_narrow, whose
/// windows are the kernel's taps 2 o - pad + t inside the row (what a non-adaptive window is),
/// and a window s2_pattern names.
template <std::size_t R>
bool s2_geometry(const plan_data<R>& p, bool backward = false) noexcept {
    const index_t max_chunks = backward ? s2_backward_max_chunks : s2_max_chunks;
    if (!AVGPOOL_STRIDE2_KERNEL || R > 3 || p.memory_layout != layout::channels_first || p.global || p.adaptive)
        return false;
    const pool_geometry<R>& g = p.geometry;
    const index_t W = g.input[R - 1], Wo = g.output[R - 1], k = g.kernel[R - 1], d = g.dilations[R - 1];
    const index_t pl = g.pads_begin[R - 1];
    // Rows of at least 4 outputs a chunk: a row's last whole vector then spills into the next
    // row only (s2_kernel stores whole vectors but in a call's last row).
    const index_t chunks = s2_chunks(W, Wo);
    // (s2_backward_geometry turns the narrow rows away: s2_backward has no such path.)
    // (Narrow rows pair output rows down a plane: R >= 2.)
    const bool narrow = R >= 2 && s2_narrow(W, Wo, k, d, pl);
    if (AVGPOOL_PERM_KERNEL && (R != 2 || narrow)) return false;  // (see AVGPOOL_STRIDE2_KERNEL)
    if (g.strides[R - 1] != 2 || (W < s2_min_width && !narrow) || chunks < 1 || chunks > max_chunks || Wo < 4 * chunks ||
        k < 1 || k > s2_max_taps)
        return false;
    const window* w = p.axis(R - 1);
    for (index_t o = 0; o < Wo; ++o) {
        // The window's columns must be the taps that land inside the row, in order.
        index_t n = 0;
        for (index_t t = 0; t < k; ++t) {
            const index_t c = 2 * o - pl + t * d;
            if (c < 0 || c >= W) continue;
            if (n >= w[o].count || w[o].first + n * d != c) return false;
            ++n;
        }
        if (n != w[o].count) return false;
    }
    // Rows per output row: the product of the outer axes' largest windows (perm_rows's count).
    index_t rows = 1;
    for (std::size_t a = 0; a + 1 < R; ++a) {
        index_t most = 0;
        const window* wa = p.axis(a);
        for (index_t o = 0; o < g.output[a]; ++o) most = std::max(most, wa[o].count);
        rows *= most;
        if (rows < 1 || rows > s2_max_rows) return false;
    }
    // (Whole 2x2 blocks on rows of more chunks: the 2x2 kernel, simpler and at memcpy's speed.)
    if (chunks > s2_unrolled_chunks && !backward && pair_geometry<R>(p)) return false;
    // (A 1-D plane is one row: no rows to sum, its window is the row's taps.)
    return p.output_spatial_volume() / Wo <= perm_max_outer && s2_pattern(R == 1 ? k : rows, k, d, pl) >= 0;
}

template <class T, std::size_t R, class M = T>
bool s2_applicable(const plan_data<R>& p) noexcept {
    // The row table and reciprocals exist only where s2_geometry held when the plan was made.
    return AVGPOOL_STRIDE2_KERNEL && std::is_same<T, float>::value && std::is_same<M, float>::value &&
           !p.plane_rdiv_f.empty() && !p.perm_rows.empty() && p.s2_forward;
}

#if AVGPOOL_STRIDE2_KERNEL

// Read for a window's missing rows: a row of the widest chunks (forward only: two).
alignas(32) inline constexpr float s2_zeros[16 * s2_max_chunks] = {};
// The last axis's divisors under a divisor override (the quotient is then g / override).
inline constexpr float s2_ones[8 * s2_backward_max_chunks] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                                              1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

// deinterleave2_unordered (and so the shufps of a chunk's even and odd columns, and the
// unpacklo / unpackhi that interleave them back) leaves element j of a chunk's even (odd)
// columns at lane s2_pos(j): bits 1 and 2 of j swapped (a0 a2 b0 b2 | a4 a6 b4 b6); it is
// its own inverse.
constexpr std::int32_t s2_pos(index_t j) noexcept {
    return static_cast<std::int32_t>((j & 1) | ((j & 2) << 1) | ((j & 4) >> 1));
}

// A permute within a chunk: lane indices, and the lanes taken from the neighbouring chunk
// (or zeroed past the row's ends).
struct s2_tap {
    alignas(32) std::int32_t idx[8];
    alignas(32) std::int32_t other[8];
};

// s2_backward::stream_as's vectors: 8 lanes, or 16 (Wide). (A trait, not std::conditional
// of the two, whose attributes GCC warns it drops in a template argument.)
template <bool Wide>
struct s2_vector {
    using type = __m256;
};
#if AVGPOOL_STRIDE2_WIDE
template <>
struct s2_vector<true> {
    using type = __m512;
};
#endif

// A compile-time count (s2_backward's dispatch).
template <int N>
using s2_int = std::integral_constant<int, N>;

// The 256-bit forms of simd.hpp's in_order, plus_zero and scale_plus_zero (vec<float> is
// 16 lanes in AVX-512 builds, where this kernel still works on 8): the same operations.
AVGPOOL_ALWAYS_INLINE __m256 s2_in_order(__m256 v) noexcept {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), _MM_SHUFFLE(3, 1, 2, 0)));
}
AVGPOOL_ALWAYS_INLINE __m256 s2_plus_zero(__m256 v) noexcept { return _mm256_add_ps(v, _mm256_setzero_ps()); }
AVGPOOL_ALWAYS_INLINE __m256 s2_scale_plus_zero(__m256 v, __m256 r) noexcept {
#if defined(__FMA__)
    if constexpr (has_fused_mul_add<float>()) return _mm256_fmadd_ps(v, r, _mm256_setzero_ps());
#endif
    return _mm256_add_ps(_mm256_mul_ps(v, r), _mm256_setzero_ps());
}

// 8 int32 lanes from a table.
template <class A>
AVGPOOL_ALWAYS_INLINE __m256i s2_lanes(const A& a) noexcept {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
}

// Horizontal tap T of a window with left pad PL: output o of a chunk reads column 2 o + c0,
// which is element o + shift of the chunk's odd columns (odd) or its even ones.
template <int T, int PL>
struct s2_tap_at {
    static constexpr int c0 = T - PL;
    static constexpr bool odd = (c0 % 2 + 2) % 2 == 1;
    static constexpr int shift = (c0 - (odd ? 1 : 0)) / 2;
};

template <std::size_t R>
class s2_kernel {
public:
    // allow_wide = false keeps AVX-512 builds' rows of 33 to 128 in the 8-lane form (the tests
    // compare the two forms' bits).
    s2_kernel(const plan_data<R>& p, pool_op op, bool allow_wide = true) : p_(p), average_(op == pool_op::average) {
        const pool_geometry<R>& g = p.geometry;
        const index_t W = g.input[R - 1], k = g.kernel[R - 1], pl = g.pads_begin[R - 1];
        Wo_ = g.output[R - 1];
        xs_ = p.input_spatial_volume();
        nr_ = p.output_spatial_volume() / Wo_;
        os_ = nr_ * Wo_;
        nc_ = s2_chunks(W, Wo_);
        mask_lo_ = W < 16 * nc_ - 8;
        pattern_ = s2_pattern(R == 1 ? k : static_cast<index_t>(p.perm_rows.size()) / nr_, k, g.dilations[R - 1], pl);
        narrow_ = W < s2_min_width;  // (s2_geometry admits only s2_narrow's rows there)
        W_ = W;
        // Narrow planes pooled alike down (rows: s2_narrow's windows on the first axis too).
        if constexpr (R == 2) {
            const window* w0 = p.axis(0);
            square_ = narrow_ && s2_narrow(g.input[0], g.output[0], g.kernel[0], g.dilations[0], g.pads_begin[0]) &&
                      g.strides[0] == 2 && g.input[0] == W;
            for (index_t o = 0; square_ && o < 4; ++o)
                square_ = w0[o].first == std::max<index_t>(0, 2 * o - 1) &&
                          w0[o].count == std::min<index_t>(2 * o + 2, g.input[0]) - std::max<index_t>(0, 2 * o - 1);
        }
        // The last chunk's two vectors: the columns inside the row.
        for (index_t l = 0; l < 16; ++l) tail_[l] = 16 * (nc_ - 1) + l < W ? -1 : 0;
#if AVGPOOL_STRIDE2_WIDE
        if (allow_wide && !narrow_ && W >= s2_wide_min_width && W <= 16 * s2_wide_vectors) {
            wide_nv_ = static_cast<int>((W + 15) / 16);
            wide_tail_ = static_cast<std::uint16_t>((1u << (W - 16 * (wide_nv_ - 1))) - 1u);
        }
#else
        (void)allow_wide;
#endif
        for (index_t t = 0; t < k; ++t) {
            const index_t c0 = t - pl;                          // the column output 0 reads
            const index_t shift = (c0 - (c0 % 2 + 2) % 2) / 2;  // output o reads element o + shift
            for (index_t o = 0; o < 8; ++o) {
                // Outside 0 .. 7: that element of the neighbouring chunk (zeros past the ends).
                const index_t j = o + shift;
                tap_[t].idx[s2_pos(o)] = s2_pos(j & 7);
                tap_[t].other[s2_pos(o)] = j >= 0 && j < 8 ? 0 : -1;
            }
        }
    }

    /// Planes item_begin .. item_end - 1 (item = n * C + c).
    void run(const float* in, float* out, index_t item_begin, index_t item_end) const {
        if (narrow_) return narrow(in, out, item_begin, item_end);
        dispatch(in, out, item_begin, item_end, 0, nr_);
    }

    /// Whether run_rows() may split a plane (not narrow rows, which pair output rows).
    bool splits_rows() const noexcept { return !narrow_; }

    /// Output rows row_begin .. row_end - 1 (every axis but the last) of plane `item`, for
    /// splitting few planes across threads: each row is computed as run() computes it, so the
    /// bits are run()'s whatever the split. Not for narrow rows (splits_rows()).
    void run_rows(const float* in, float* out, index_t item, index_t row_begin, index_t row_end) const {
        if (row_begin >= row_end || narrow_) return;
        dispatch(in, out, item, item + 1, row_begin, row_end);
    }

    /// Whether run() takes narrow rows' whole-plane path (7x7 or 8x8 planes; for the tests).
    bool narrow_square() const noexcept { return square_; }

    /// Whether rows take the 16-lane form (AVX-512 builds, rows of 33 to 128; for the tests).
    bool wide() const noexcept { return wide_nv_ > 0; }

private:
    // Input rows summed per output row for a window of k rows and columns (1-D: one).
    static constexpr int kv(int k) noexcept { return R == 1 ? 1 : k; }

    // Output rows r_begin .. r_end - 1 of planes item_begin .. item_end - 1.
    void dispatch(const float* in, float* out, index_t item_begin, index_t item_end, index_t r_begin, index_t r_end) const {
#if AVGPOOL_STRIDE2_WIDE
        if (wide_nv_ > 0) {
            switch (pattern_ * 6 + wide_nv_ - 3) {  // (3 to 8 vectors a row)
                case 0: return wide_rows<kv(2), 2, 0, 3>(in, out, item_begin, item_end, r_begin, r_end);
                case 1: return wide_rows<kv(2), 2, 0, 4>(in, out, item_begin, item_end, r_begin, r_end);
                case 2: return wide_rows<kv(2), 2, 0, 5>(in, out, item_begin, item_end, r_begin, r_end);
                case 3: return wide_rows<kv(2), 2, 0, 6>(in, out, item_begin, item_end, r_begin, r_end);
                case 4: return wide_rows<kv(2), 2, 0, 7>(in, out, item_begin, item_end, r_begin, r_end);
                case 5: return wide_rows<kv(2), 2, 0, 8>(in, out, item_begin, item_end, r_begin, r_end);
                case 6: return wide_rows<kv(3), 3, 1, 3>(in, out, item_begin, item_end, r_begin, r_end);
                case 7: return wide_rows<kv(3), 3, 1, 4>(in, out, item_begin, item_end, r_begin, r_end);
                case 8: return wide_rows<kv(3), 3, 1, 5>(in, out, item_begin, item_end, r_begin, r_end);
                case 9: return wide_rows<kv(3), 3, 1, 6>(in, out, item_begin, item_end, r_begin, r_end);
                case 10: return wide_rows<kv(3), 3, 1, 7>(in, out, item_begin, item_end, r_begin, r_end);
                case 11: return wide_rows<kv(3), 3, 1, 8>(in, out, item_begin, item_end, r_begin, r_end);
                case 12: return wide_rows<kv(3), 3, 0, 3>(in, out, item_begin, item_end, r_begin, r_end);
                case 13: return wide_rows<kv(3), 3, 0, 4>(in, out, item_begin, item_end, r_begin, r_end);
                case 14: return wide_rows<kv(3), 3, 0, 5>(in, out, item_begin, item_end, r_begin, r_end);
                case 15: return wide_rows<kv(3), 3, 0, 6>(in, out, item_begin, item_end, r_begin, r_end);
                case 16: return wide_rows<kv(3), 3, 0, 7>(in, out, item_begin, item_end, r_begin, r_end);
                case 17: return wide_rows<kv(3), 3, 0, 8>(in, out, item_begin, item_end, r_begin, r_end);
                case 18: return wide_rows<kv(5), 5, 2, 3>(in, out, item_begin, item_end, r_begin, r_end);
                case 19: return wide_rows<kv(5), 5, 2, 4>(in, out, item_begin, item_end, r_begin, r_end);
                case 20: return wide_rows<kv(5), 5, 2, 5>(in, out, item_begin, item_end, r_begin, r_end);
                case 21: return wide_rows<kv(5), 5, 2, 6>(in, out, item_begin, item_end, r_begin, r_end);
                case 22: return wide_rows<kv(5), 5, 2, 7>(in, out, item_begin, item_end, r_begin, r_end);
                case 23: return wide_rows<kv(5), 5, 2, 8>(in, out, item_begin, item_end, r_begin, r_end);
                default: return;  // (s2_geometry admits only the cases above)
            }
        }
#endif
        if (nc_ > s2_unrolled_chunks) {
            switch (pattern_) {
                case 0: return stream<kv(2), 2, 0>(in, out, item_begin, item_end, r_begin, r_end);
                case 1: return stream<kv(3), 3, 1>(in, out, item_begin, item_end, r_begin, r_end);
                case 2: return stream<kv(3), 3, 0>(in, out, item_begin, item_end, r_begin, r_end);
                case 3: return stream<kv(5), 5, 2>(in, out, item_begin, item_end, r_begin, r_end);
                default: return;  // (s2_geometry admits only the cases above)
            }
        }
        // (Other rows of one chunk are at least 9 wide: their first vector is always whole.)
        switch (pattern_ * 3 + (nc_ == 1 ? 0 : mask_lo_ ? 2 : 1)) {
            case 0: return rows<kv(2), 2, 0, 1, false>(in, out, item_begin, item_end, r_begin, r_end);
            case 1: return rows<kv(2), 2, 0, 2, false>(in, out, item_begin, item_end, r_begin, r_end);
            case 2: return rows<kv(2), 2, 0, 2, true>(in, out, item_begin, item_end, r_begin, r_end);
            case 3: return rows<kv(3), 3, 1, 1, false>(in, out, item_begin, item_end, r_begin, r_end);
            case 4: return rows<kv(3), 3, 1, 2, false>(in, out, item_begin, item_end, r_begin, r_end);
            case 5: return rows<kv(3), 3, 1, 2, true>(in, out, item_begin, item_end, r_begin, r_end);
            case 6: return rows<kv(3), 3, 0, 1, false>(in, out, item_begin, item_end, r_begin, r_end);
            case 7: return rows<kv(3), 3, 0, 2, false>(in, out, item_begin, item_end, r_begin, r_end);
            case 8: return rows<kv(3), 3, 0, 2, true>(in, out, item_begin, item_end, r_begin, r_end);
            case 9: return rows<kv(5), 5, 2, 1, false>(in, out, item_begin, item_end, r_begin, r_end);
            case 10: return rows<kv(5), 5, 2, 2, false>(in, out, item_begin, item_end, r_begin, r_end);
            case 11: return rows<kv(5), 5, 2, 2, true>(in, out, item_begin, item_end, r_begin, r_end);
            default: return;  // (s2_geometry admits only the cases above)
        }
    }

    // The K taps' permute indices and neighbour lanes, in registers for a call.
    template <int K>
    void tap_lanes(__m256i (&idx)[K], __m256 (&other)[K]) const noexcept {
        for (int t = 0; t < K; ++t) {
            idx[t] = s2_lanes(tap_[t].idx);
            other[t] = _mm256_castsi256_ps(s2_lanes(tap_[t].other));
        }
    }

    // Lanes 8 c .. 8 c + 7 of an output row that are outputs (the masked stores of a call's
    // last row).
    __m256i store_mask(index_t c) const noexcept {
        return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<std::int32_t>(Wo_ - 8 * c)),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }

    // Chunk c's sums acc (outputs at `at` of the plane's dst), in order, scaled or + 0, stored
    // as a whole vector but in the call's last row: the spare lanes land on the next row,
    // which is stored after this one.
    AVGPOOL_ALWAYS_INLINE void put(__m256 acc, const float* rdiv, float* dst, index_t at, index_t c, bool last_row,
                                   bool average) const noexcept {
        __m256 v = s2_in_order(acc);
        v = average ? s2_scale_plus_zero(v, _mm256_loadu_ps(rdiv + at)) : s2_plus_zero(v);
        if (!last_row) {
            _mm256_storeu_ps(dst + at, v);
        } else {
            _mm256_maskstore_ps(dst + at, store_mask(c), v);
        }
    }

    // Rows of more than s2_unrolled_chunks chunks, as rows() computes them (the same
    // operations on each chunk, so the same bits), a chunk at a time: each chunk's even and
    // odd columns and its taps' permutes are made once, when it is the next chunk, and serve
    // it as the neighbour, then itself, then the neighbour again; the zero state stands for
    // the chunks before the first and after the last (a blend with it is rows()'s andnot).
    template <int KV, int K, int PL>
    void stream(const float* in, float* out, index_t item_begin, index_t item_end, index_t r_begin, index_t r_end) const {
        if (average_) {
            stream<KV, K, PL, true>(in, out, item_begin, item_end, r_begin, r_end);
        } else {
            stream<KV, K, PL, false>(in, out, item_begin, item_end, r_begin, r_end);
        }
    }

    template <int KV, int K, int PL, bool Average>
    void stream(const float* in, float* out, index_t item_begin, index_t item_end, index_t r_begin, index_t r_end) const {
        struct state {
            __m256 even, odd, p[K];
        };
        const index_t* const table = p_.perm_rows.data();
        const float* const rdiv = p_.template plane_reciprocals<float>();
        const __m256i tail_lo = s2_lanes(tail_), tail_hi = s2_lanes(tail_ + 8);
        __m256i idx[K];
        __m256 other[K];
        tap_lanes(idx, other);
        const index_t xs = xs_, os = os_, Wo = Wo_, nc = nc_;
        const bool mask_lo = mask_lo_;
        state zero;
        zero.even = zero.odd = _mm256_setzero_ps();
        for (int t = 0; t < K; ++t) zero.p[t] = zero.even;
        for (index_t item = item_begin; item < item_end; ++item) {
            const float* const plane = in + item * xs;
            float* const dst = out + item * os;
            for (index_t r = r_begin; r < r_end; ++r) {
                // The window's rows, once a row (-1 in the table: a shorter window's
                // padding, read from the zeros, which are as long as a row's chunks).
                const index_t* const rr = table + r * KV;
                const float* src[KV];
                for (int i = 0; i < KV; ++i) src[i] = rr[i] >= 0 ? plane + rr[i] : s2_zeros;
                // Chunk c of the row: its window's rows summed (masked loads in the last chunk:
                // nothing past the row), split into even and odd columns, permuted per tap.
                auto chunk = [&](index_t c, auto last) AVGPOOL_INLINE_LAMBDA {
                    __m256 lo = _mm256_setzero_ps(), hi = lo;
                    unrolled<KV>([&](auto i) AVGPOOL_INLINE_LAMBDA {
                        const float* const x = src[i] + 16 * c;
                        const __m256 a = last && mask_lo ? _mm256_maskload_ps(x, tail_lo) : _mm256_loadu_ps(x);
                        // (A last vector wholly past the row, under mask_lo: zeros, not loaded
                        // from an address that may pass the tensor's end.)
                        const __m256 b = !last ? _mm256_loadu_ps(x + 8)
                                         : mask_lo ? _mm256_setzero_ps()
                                                   : _mm256_maskload_ps(x + 8, tail_hi);
                        lo = i == 0 ? a : _mm256_add_ps(lo, a);
                        hi = i == 0 ? b : _mm256_add_ps(hi, b);
                    });
                    state s;
                    if constexpr (KV == 1) {  // (1-D: the loads themselves, each shuffled twice)
                        hold_in_register(lo);
                        hold_in_register(hi);
                    }
                    s.even = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
                    s.odd = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
                    unrolled<K>([&](auto t) AVGPOOL_INLINE_LAMBDA {
                        using tap = s2_tap_at<static_cast<int>(t), PL>;
                        s.p[t] = tap::shift == 0 ? s.even : _mm256_permutevar8x32_ps(tap::odd ? s.odd : s.even, idx[t]);
                    });
                    return s;
                };
                const bool last_row = r + 1 == r_end && item + 1 == item_end;
                state prev = zero, cur = chunk(0, std::false_type{}), next = chunk(1, std::false_type{});  // (nc >= 3)
                // Chunk c's outputs, from prev, cur and next.
                auto emit = [&](index_t c) AVGPOOL_INLINE_LAMBDA {
                    __m256 acc = _mm256_setzero_ps();
                    unrolled<K>([&](auto t) AVGPOOL_INLINE_LAMBDA {
                        using tap = s2_tap_at<static_cast<int>(t), PL>;
                        __m256 v;
                        if constexpr (tap::shift == 0) {
                            v = tap::odd ? cur.odd : cur.even;
                        } else {
                            v = _mm256_blendv_ps(cur.p[t], tap::shift < 0 ? prev.p[t] : next.p[t], other[t]);
                        }
                        acc = t == 0 ? v : _mm256_add_ps(acc, v);
                    });
                    put(acc, rdiv, dst, r * Wo + 8 * c, c, last_row, Average);
                    prev = cur;
                    cur = next;
                };
                index_t c = 0;
                for (; c + 3 < nc; ++c) {
                    emit(c);
                    next = chunk(c + 2, std::false_type{});
                }
                emit(c);  // (c = nc - 3)
                next = chunk(nc - 1, std::true_type{});
                emit(nc - 2);
                next = zero;
                emit(nc - 1);
            }
        }
    }

    // KV input rows per output row, K taps with left pad PL (dilation 1), NC chunks of 16
    // columns (8 outputs) a row; MASK_LO: whether the last chunk's first 8 columns pass the row
    // (else a plain load: masking it too cost 30% on 14x14 planes).
    template <int KV, int K, int PL, int NC, bool MASK_LO>
    void rows(const float* in, float* out, index_t item_begin, index_t item_end, index_t r_begin, index_t r_end) const {
        constexpr int NV = 2 * NC;  // vectors of a row
        const index_t* const table = p_.perm_rows.data();
        const float* const rdiv = p_.template plane_reciprocals<float>();
        const __m256i tail_lo = s2_lanes(tail_), tail_hi = s2_lanes(tail_ + 8);
        __m256i idx[K];
        __m256 other[K];
        tap_lanes(idx, other);
        // The members in locals: the stores may alias them, which would reload them every row.
        const index_t xs = xs_, os = os_, Wo = Wo_;
        const bool average = average_;
        for (index_t item = item_begin; item < item_end; ++item) {
            const float* const plane = in + item * xs;
            float* const dst = out + item * os;
            // Output row r. Full: its window has KV rows (the table has no -1), as most rows.
            // The last input row of an output row's window is the first of the next one's at
            // stride 2 with 3 rows: its vectors are kept and not loaded again (a third of the
            // loads; 3x3 on 14x14 and 28x28: 0.87-0.94x the time, bench, Zen 5). The sums are
            // the same, in the same order. (Not for 2 or 5 rows, which share no such row at
            // stride 2: keeping the vectors cost 2x2 on 14x14 7%. KV == 3 is spelt out where
            // it is used: clang 14 rejects a constexpr local read in the nested lambdas.)
            index_t carried = -2;  // the input row whose vectors `keep` holds
            __m256 keep[NV];
            for (int v = 0; v < NV; ++v) keep[v] = _mm256_setzero_ps();
            auto row = [&](index_t r, auto full) AVGPOOL_INLINE_LAMBDA {
                // The window's rows (-1: a shorter window's padding, read as zeros), summed per
                // vector; the last chunk's vectors are masked loads (nothing past the row).
                const index_t* const rr = table + r * KV;
                __m256 sum[NV];
                auto load = [&](index_t at, auto v) AVGPOOL_INLINE_LAMBDA {
                    const float* src = full || at >= 0 ? plane + at : s2_zeros;
                    constexpr int n = static_cast<int>(v);
                    __m256 a;
                    if constexpr (n + 2 < NV || (n + 2 == NV && !MASK_LO)) {
                        a = _mm256_loadu_ps(src + 8 * n);
                    } else if constexpr (n + 2 == NV) {
                        a = _mm256_maskload_ps(src + 8 * n, tail_lo);
                    } else if constexpr (MASK_LO) {
                        // A last vector wholly past the row: no load (nor an address
                        // past the tensor's end, in its last row).
                        a = _mm256_setzero_ps();
                    } else {
                        a = _mm256_maskload_ps(src + 8 * n, tail_hi);
                    }
                    return a;
                };
                if (KV == 3 && rr[0] == carried) {
                    unrolled<NV>([&](auto v) AVGPOOL_INLINE_LAMBDA { sum[v] = keep[v]; });
                } else {
                    unrolled<NV>([&](auto v) AVGPOOL_INLINE_LAMBDA { sum[v] = load(rr[0], v); });
                }
                unrolled<KV - 1>([&](auto i1) AVGPOOL_INLINE_LAMBDA {
                    constexpr int i = static_cast<int>(i1) + 1;
                    unrolled<NV>([&](auto v) AVGPOOL_INLINE_LAMBDA {
                        const __m256 a = load(rr[i], v);
                        if (KV == 3 && i == KV - 1) keep[v] = a;
                        sum[v] = _mm256_add_ps(sum[v], a);
                    });
                });
                if (KV == 3) carried = rr[KV - 1];
                // Per chunk, its even and odd columns (element j at lane s2_pos(j)).
                __m256 even[NC], odd[NC];
                unrolled<NC>([&](auto c) AVGPOOL_INLINE_LAMBDA {
                    even[c] = _mm256_shuffle_ps(sum[2 * c], sum[2 * c + 1], _MM_SHUFFLE(2, 0, 2, 0));
                    odd[c] = _mm256_shuffle_ps(sum[2 * c], sum[2 * c + 1], _MM_SHUFFLE(3, 1, 3, 1));
                });
                const bool last_row = r + 1 == r_end && item + 1 == item_end;
                unrolled<NC>([&](auto c) AVGPOOL_INLINE_LAMBDA {
                    __m256 acc = _mm256_setzero_ps();
                    unrolled<K>([&](auto t) AVGPOOL_INLINE_LAMBDA {
                        using tap = s2_tap_at<static_cast<int>(t), PL>;
                        // (Indexed by constants, not through a pointer: GCC then kept the
                        // arrays on the stack, 1.8x the time on 14x14 planes.)
                        __m256 v = tap::odd ? odd[c] : even[c];
                        if constexpr (tap::shift != 0) {
                            // Lanes moved past the chunk's edge take the neighbour's (none
                            // before the first chunk or after the last: zeros).
                            constexpr int nb = tap::shift < 0 ? static_cast<int>(c) - 1 : static_cast<int>(c) + 1;
                            v = _mm256_permutevar8x32_ps(v, idx[t]);
                            if constexpr (nb < 0 || nb >= NC) {
                                v = _mm256_andnot_ps(other[t], v);
                            } else {
                                const __m256 n = tap::odd ? odd[nb] : even[nb];
                                v = _mm256_blendv_ps(v, _mm256_permutevar8x32_ps(n, idx[t]), other[t]);
                            }
                        }
                        acc = t == 0 ? v : _mm256_add_ps(acc, v);
                    });
                    put(acc, rdiv, dst, r * Wo + 8 * c, c, last_row, average);
                });
            };
            for (index_t r = r_begin; r < r_end; ++r) {
                if (table[r * KV + KV - 1] >= 0) {
                    row(r, std::true_type{});
                } else {
                    row(r, std::false_type{});
                }
            }
        }
    }

#if AVGPOOL_STRIDE2_WIDE
    // rows() in 16-lane vectors, for rows of NV of them (3 to 8): a chunk is 32
    // columns, whose even and odd columns one two-source permute each gathers in order (no
    // lane-order fix-up before the store); a tap moved by a column is one lane shift (valignd)
    // that brings in the neighbouring chunk's lane, or a zero past the row's ends. Vectors
    // past the row's last one are zeros, the last is a masked load; a chunk's outputs are one
    // masked store. The sums run in rows()'s order (rows, then taps), so the bits are its.
    template <int KV, int K, int PL, int NV>
    void wide_rows(const float* in, float* out, index_t item_begin, index_t item_end, index_t r_begin, index_t r_end) const {
        constexpr int NC = (NV + 1) / 2;
        const index_t* const table = p_.perm_rows.data();
        const float* const rdiv = p_.template plane_reciprocals<float>();
        const __mmask16 tail = wide_tail_;
        const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        const __m512 zero = _mm512_setzero_ps();
        // The members in locals: the stores may alias them.
        const index_t xs = xs_, os = os_, Wo = Wo_;
        const bool average = average_;
        // Chunk c's lanes that are outputs.
        __mmask16 omask[NC];
        for (int c = 0; c < NC; ++c) {
            const index_t n = std::min<index_t>(16, std::max<index_t>(0, Wo - 16 * c));
            omask[c] = static_cast<__mmask16>((1u << n) - 1u);
        }
        for (index_t item = item_begin; item < item_end; ++item) {
            const float* const plane = in + item * xs;
            float* const dst = out + item * os;
            // (The shared input row loaded once, as in rows(): 3x3 on 50x50 and 56x56 took
            // 0.83x the time, harness.)
            index_t carried = -2;  // the input row whose vectors `keep` holds (-1: zeros)
            __m512 keep[NV];
            for (int v = 0; v < NV; ++v) keep[v] = zero;
            auto row = [&](index_t r, auto full) AVGPOOL_INLINE_LAMBDA {
                const index_t* const rr = table + r * KV;
                __m512 sum[NV];
                auto load = [&](index_t at, auto v) AVGPOOL_INLINE_LAMBDA {
                    const float* src = full || at >= 0 ? plane + at : s2_zeros;
                    constexpr int n = static_cast<int>(v);
                    return n + 1 < NV ? _mm512_loadu_ps(src + 16 * n) : _mm512_maskz_loadu_ps(tail, src + 16 * n);
                };
                if (KV == 3 && rr[0] == carried) {
                    unrolled<NV>([&](auto v) AVGPOOL_INLINE_LAMBDA { sum[v] = keep[v]; });
                } else {
                    unrolled<NV>([&](auto v) AVGPOOL_INLINE_LAMBDA { sum[v] = load(rr[0], v); });
                }
                unrolled<KV - 1>([&](auto i1) AVGPOOL_INLINE_LAMBDA {
                    constexpr int i = static_cast<int>(i1) + 1;
                    unrolled<NV>([&](auto v) AVGPOOL_INLINE_LAMBDA {
                        const __m512 a = load(rr[i], v);
                        if (KV == 3 && i == KV - 1) keep[v] = a;
                        sum[v] = _mm512_add_ps(sum[v], a);
                    });
                });
                if (KV == 3) carried = rr[KV - 1];
                __m512 even[NC], odd[NC];
                unrolled<NC>([&](auto c) AVGPOOL_INLINE_LAMBDA {
                    constexpr int lo = 2 * static_cast<int>(c);
                    const __m512 hi = lo + 1 < NV ? sum[lo + 1 < NV ? lo + 1 : lo] : zero;
                    even[c] = _mm512_permutex2var_ps(sum[lo], ie, hi);
                    odd[c] = _mm512_permutex2var_ps(sum[lo], io, hi);
                });
                unrolled<NC>([&](auto c) AVGPOOL_INLINE_LAMBDA {
                    constexpr int ci = static_cast<int>(c);
                    __m512 acc = zero;
                    unrolled<K>([&](auto t) AVGPOOL_INLINE_LAMBDA {
                        using tap = s2_tap_at<static_cast<int>(t), PL>;
                        // (Constant indices, not a pointer to the arrays: see rows().)
                        constexpr int pc = ci > 0 ? ci - 1 : 0, nc = ci + 1 < NC ? ci + 1 : ci;
                        __m512 v = tap::odd ? odd[ci] : even[ci];
                        if constexpr (tap::shift < 0) {
                            const __m512 before = ci == 0 ? zero : tap::odd ? odd[pc] : even[pc];
                            v = lane_shift<15>(before, v);
                        } else if constexpr (tap::shift > 0) {
                            const __m512 after = ci + 1 == NC ? zero : tap::odd ? odd[nc] : even[nc];
                            v = lane_shift<1>(v, after);
                        }
                        acc = t == 0 ? v : _mm512_add_ps(acc, v);
                    });
                    const index_t at = r * Wo + 16 * ci;
                    if (average) {
                        // (Fused only where s2_scale_plus_zero fuses: the same rounding as rows().)
                        const __m512 rd = _mm512_maskz_loadu_ps(omask[ci], rdiv + at);
#if defined(__FMA__)
                        acc = _mm512_fmadd_ps(acc, rd, zero);
#else
                        acc = _mm512_add_ps(_mm512_mul_ps(acc, rd), zero);
#endif
                    } else {
                        acc = _mm512_add_ps(acc, zero);
                    }
                    _mm512_mask_storeu_ps(dst + at, omask[ci], acc);
                });
            };
            for (index_t r = r_begin; r < r_end; ++r) {
                if (table[r * KV + KV - 1] >= 0) {
                    row(r, std::true_type{});
                } else {
                    row(r, std::false_type{});
                }
            }
        }
    }
#endif

    // s2_narrow's rows (7 or 8 columns, 4 outputs): output rows a and b of a pair are summed
    // down their windows' rows into one vector each (a 7-wide row's 8th lane is the next
    // row's first column, zeroed below); shufps gathers their even columns into X and their odd
    // ones into Y, lanes a0 a2 b0 b2 | a4 a6 b4 b6 and a1 a3 b1 b3 | a5 a7 b5 b7, so that
    // output j of each row sits at the same lane of X (column 2 j), Y (2 j + 1) and Z, Y moved
    // by one column (2 j - 1; zero at j = 0, the padding). Z + X + Y sums the taps in order,
    // as the other kernels do, and one 64-bit permute puts a's 4 outputs before b's: the two
    // rows' 8 outputs, contiguous in the output plane. Two shuffles, two permutes and two
    // masks for 8 outputs, where the tile kernel transposed every plane there and back.
    struct narrow_lanes {
        __m256 ymask, zmask;
        __m256i zidx;
    };
    narrow_lanes narrow_setup() const noexcept {
        // Y's lanes 5 and 7 are column 7: padding in 7-wide rows (the next row's value there).
        return {_mm256_castsi256_ps(W_ == 7 ? _mm256_setr_epi32(-1, -1, -1, -1, -1, 0, -1, 0) : _mm256_set1_epi32(-1)),
                _mm256_castsi256_ps(_mm256_setr_epi32(0, -1, 0, -1, -1, -1, -1, -1)),
                _mm256_setr_epi32(5, 0, 7, 2, 1, 4, 3, 6)};
    }
    // Output rows a and b (their vertical sums), unscaled, a's 4 outputs then b's.
    static AVGPOOL_ALWAYS_INLINE __m256 narrow_pair(__m256 a, __m256 b, const narrow_lanes& k) noexcept {
        const __m256 x = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
        const __m256 y = _mm256_and_ps(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)), k.ymask);
        const __m256 z = _mm256_and_ps(_mm256_permutevar8x32_ps(y, k.zidx), k.zmask);
        const __m256 s = _mm256_add_ps(_mm256_add_ps(z, x), y);
        return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)));
    }

    void narrow(const float* in, float* out, index_t item_begin, index_t item_end) const {
        // A 7-wide plane's last row reads one value past the plane: masked loads in the
        // tensor's last plane, where that would pass the tensor's end.
        if (item_begin >= item_end) return;
        const index_t planes = p_.input_shape[0] * p_.input_shape[1];
        const index_t fast_end = W_ == 7 && item_end == planes ? item_end - 1 : item_end;
        if (square_) {
            if (average_) {
                square<true>(in, out, item_begin, fast_end);
            } else {
                square<false>(in, out, item_begin, fast_end);
            }
        } else {
            narrow_rows<false>(in, out, item_begin, fast_end, item_end);
        }
        narrow_rows<true>(in, out, fast_end, item_end, item_end);
    }

    // Planes of 7 or 8 rows pooled the same way down (3 rows at stride 2 from row -1): each
    // plane is 7 or 8 row loads and two pairs, 16 outputs in two whole stores.
    template <bool Average>
    void square(const float* in, float* out, index_t item_begin, index_t item_end) const {
        const narrow_lanes k = narrow_setup();
        const index_t xs = xs_, W = W_;
        const bool eight = xs == 64;
        const float* const rdiv = p_.template plane_reciprocals<float>();
        const __m256 d0 = _mm256_loadu_ps(rdiv), d1 = _mm256_loadu_ps(rdiv + 8);
        for (index_t item = item_begin; item < item_end; ++item) {
            const float* const x = in + item * xs;
            float* const y = out + item * 16;
            const __m256 r1 = _mm256_loadu_ps(x + W), r3 = _mm256_loadu_ps(x + 3 * W), r5 = _mm256_loadu_ps(x + 5 * W);
            const __m256 a = _mm256_add_ps(_mm256_loadu_ps(x), r1);
            const __m256 b = _mm256_add_ps(_mm256_add_ps(r1, _mm256_loadu_ps(x + 2 * W)), r3);
            const __m256 c = _mm256_add_ps(_mm256_add_ps(r3, _mm256_loadu_ps(x + 4 * W)), r5);
            __m256 d = _mm256_add_ps(r5, _mm256_loadu_ps(x + 6 * W));
            if (eight) d = _mm256_add_ps(d, _mm256_loadu_ps(x + 7 * W));
            const __m256 lo = narrow_pair(a, b, k), hi = narrow_pair(c, d, k);
            _mm256_storeu_ps(y, Average ? s2_scale_plus_zero(lo, d0) : s2_plus_zero(lo));
            _mm256_storeu_ps(y + 8, Average ? s2_scale_plus_zero(hi, d1) : s2_plus_zero(hi));
        }
    }

    // Any other rows down the plane, through the row table; Guard: masked loads (nothing
    // past the row). call_end: the call's last plane, past which nothing may be stored.
    template <bool Guard>
    void narrow_rows(const float* in, float* out, index_t item_begin, index_t item_end, index_t call_end) const {
        constexpr int KV = 3;  // (s2_pattern: a 3x3 window's rows)
        const narrow_lanes k = narrow_setup();
        const index_t* const table = p_.perm_rows.data();
        const float* const rdiv = p_.template plane_reciprocals<float>();
        const index_t nr = nr_, xs = xs_, os = os_;
        const __m256i row_mask = W_ == 7 ? _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, -1, 0) : _mm256_set1_epi32(-1);
        const __m256i half = _mm256_setr_epi32(-1, -1, -1, -1, 0, 0, 0, 0);
        for (index_t item = item_begin; item < item_end; ++item) {
            const float* const plane = in + item * xs;
            float* const dst = out + item * os;
            auto down = [&](index_t r) AVGPOOL_INLINE_LAMBDA {
                const index_t* const rr = table + r * KV;
                __m256 sum = _mm256_setzero_ps();
                unrolled<KV>([&](auto i) AVGPOOL_INLINE_LAMBDA {
                    const float* src = rr[i] >= 0 ? plane + rr[i] : s2_zeros;
                    const __m256 a = Guard ? _mm256_maskload_ps(src, row_mask) : _mm256_loadu_ps(src);
                    sum = i == 0 ? a : _mm256_add_ps(sum, a);
                });
                return sum;
            };
            for (index_t r = 0; r < nr; r += 2) {
                __m256 v = narrow_pair(down(r), r + 1 < nr ? down(r + 1) : _mm256_setzero_ps(), k);
                const index_t at = r * 4;
                v = average_ ? s2_scale_plus_zero(v, _mm256_loadu_ps(rdiv + at)) : s2_plus_zero(v);
                // An odd last row's 4 spare lanes land on the next plane, stored after this
                // one, but in the call's last plane.
                if (r + 1 < nr || item + 1 < call_end) {
                    _mm256_storeu_ps(dst + at, v);
                } else {
                    _mm256_maskstore_ps(dst + at, half, v);
                }
            }
        }
    }

    const plan_data<R>& p_;
    bool average_;
    index_t Wo_ = 1, W_ = 1, xs_ = 0, os_ = 0, nr_ = 1, nc_ = 1;
    bool mask_lo_ = false, narrow_ = false, square_ = false;
    int pattern_ = -1;
    int wide_nv_ = 0;              // wide(): the row's 16-lane vectors
    std::uint16_t wide_tail_ = 0;  // wide(): the last vector's columns inside the row
    alignas(32) std::int32_t tail_[16] = {};
    s2_tap tap_[s2_max_taps] = {};  // per tap: its permute, lanes from the chunk before or after
};

#endif  // AVGPOOL_STRIDE2_KERNEL

/// Output rows of a plane times chunks a row that s2_backward keeps expanded (its buffer).
constexpr index_t s2_backward_rows = 256;

/// Whether the stride-2 backward suits the plan (AVX2 code): the forward kernel's planes,
/// whose expanded output rows fit the kernel's buffer, with the plan's backward row tables.
template <std::size_t R>
bool s2_backward_geometry(const plan_data<R>& p) noexcept {
    if (!AVGPOOL_STRIDE2_KERNEL || R < 2 || p.bwd().bw_rows.empty() || p.geometry.input[R - 1] < s2_min_width ||
        !s2_geometry<R>(p, true))
        return false;
    const index_t Wo = p.geometry.output[R - 1];
    return p.output_spatial_volume() / Wo * s2_chunks(p.geometry.input[R - 1], Wo) <= s2_backward_rows;
}

/// The plan's s2_brows: for each outer input row, its covering output rows in the order of the
/// row tables (backward_cf's order of addition), then the index of a row of zeros (one past the
/// plane's output rows) up to the most any row has: every row sums as many (x + 0 is x: the
/// expanded rows are never -0), with no branch on the count.
/// (`divides_first`: backward_cf runs the plan in an order that divides each output row
/// before adding rows, whose bits the kernel gives; else the kernel is not used.)
template <std::size_t R>
void s2_backward_table(const plan_data<R>& p, bool divides_first) {
    backward_tables<R>& bt = p.bwd_mut();
    bt.s2_brows.clear();
    bt.s2_bstream.clear();
    bt.s2_bgroup.clear();
    bt.s2_bfast = 0;
    bt.s2_bcount = 0;
    if (!divides_first || !s2_backward_geometry<R>(p)) return;
    index_t most = 1;
    for (const bw_row& r : bt.bw_rows) most = std::max(most, r.n);
    const auto zero = static_cast<std::int32_t>(p.output_spatial_volume() / p.geometry.output[R - 1]);
    bt.s2_brows.reserve(bt.bw_rows.size() * static_cast<std::size_t>(most));
    for (const bw_row& r : bt.bw_rows) {
        for (index_t i = 0; i < most; ++i)
            bt.s2_brows.push_back(i < r.n ? static_cast<std::int32_t>(bt.bw_taps[static_cast<std::size_t>(r.first + i)].q) : zero);
    }
    bt.s2_bcount = most;
    if (most > 2) return;
    // Row r is written after output row last(r) is expanded (rows gathering none after the
    // row before them): group q holds rows s2_bgroup[q] .. s2_bgroup[q + 1] - 1.
    const index_t nr = zero;
    std::vector<index_t> group(static_cast<std::size_t>(nr + 1), 0);
    index_t top = 0;  // the group of the rows so far
    for (const bw_row& r : bt.bw_rows) {
        if (r.n > 0) {
            const index_t first = bt.bw_taps[static_cast<std::size_t>(r.first)].q;
            const index_t last = bt.bw_taps[static_cast<std::size_t>(r.first + r.n - 1)].q;
            if (last < top || (r.n == 2 && first != last - 1)) {
                bt.s2_bstream.clear();
                return;
            }
            top = last;
        }
        ++group[static_cast<std::size_t>(top + 1)];
        bt.s2_bstream.push_back(static_cast<std::int32_t>(r.n));
    }
    for (std::size_t q = 1; q < group.size(); ++q) group[q] += group[q - 1];
    bt.s2_bgroup = std::move(group);
    // The groups of the 2x2 and 3x3 stride-2 windows down the outer axis, around the middle
    // output row (the edges differ).
    auto kind = [&bt](index_t q) {
        const index_t a = bt.s2_bgroup[static_cast<std::size_t>(q)], b = bt.s2_bgroup[static_cast<std::size_t>(q + 1)];
        if (b - a != 2) return 0;
        const std::int32_t n0 = bt.s2_bstream[static_cast<std::size_t>(a)], n1 = bt.s2_bstream[static_cast<std::size_t>(a + 1)];
        return n0 == 1 && n1 == 1 ? 1 : n0 == 2 && n1 == 1 ? 2 : 0;
    };
    const index_t mid = nr / 2;
    bt.s2_bfast = kind(mid);
    bt.s2_bfast_first = mid;
    bt.s2_bfast_end = mid + 1;
    if (bt.s2_bfast == 0) return;
    while (bt.s2_bfast_first > 0 && kind(bt.s2_bfast_first - 1) == bt.s2_bfast) --bt.s2_bfast_first;
    while (bt.s2_bfast_end < nr && kind(bt.s2_bfast_end) == bt.s2_bfast) ++bt.s2_bfast_end;
}

/// Whether s2_backward runs the plan's backward (float).
template <class T, std::size_t R>
bool s2_backward_applicable(const plan_data<R>& p) noexcept {
    // (s2_backward_table() builds s2_brows only where s2_backward_geometry() holds.)
    return AVGPOOL_STRIDE2_KERNEL && std::is_same<T, float>::value && !p.bwd().s2_brows.empty();
}

#if AVGPOOL_STRIDE2_KERNEL

/// The transpose of s2_kernel: each output-gradient row is divided by its divisors (its shares)
/// and expanded along the last axis in registers, chunk by chunk: input column 2 j + parity of
/// a chunk gathers the shares of the outputs whose taps reach it, each of them the chunk's
/// shares moved by whole lanes (with the neighbouring chunk's lanes blended in, or zeros past
/// the row), and the two parities are interleaved into 16 columns. Each input row is then the
/// sum of its covering output rows' expansions: kept in registers where a row gathers its
/// last output row and perhaps the one before (stream()), else from a buffer of the plane's
/// expanded rows (buffered()). Divisions, additions and their order are backward_cf's (shares
/// g / (outer factor x last-axis divisor), the taps of an input column from the farthest output
/// back, the covering rows in the tables' order), so the results are its bits. In AVX-512
/// builds rows of 3 or 4 chunks are expanded in 16-lane vectors (lane shifts, two permutes to
/// interleave), and streamed rows are summed and stored in them too (ShuffleNet's 56x56 and
/// pool_ci_2d's 50x50: 0.80-0.88x the time, harness, Zen 5); the same operations lane by lane.
template <std::size_t R>
class s2_backward {
public:
    // Whether rows of 3 or 4 chunks stream in 16-lane vectors (tests run both forms).
    bool wide_stream() const noexcept { return wide_stream_; }
    // wide_stream: stream_as's form for rows of 3 or 4 chunks (s2_wide_stream_default).
    explicit s2_backward(const plan_data<R>& p, bool wide_stream = s2_wide_stream_default()) : p_(p), wide_stream_(wide_stream) {
        const pool_geometry<R>& g = p.geometry;
        W_ = g.input[R - 1];
        Wo_ = g.output[R - 1];
        const index_t k = g.kernel[R - 1], pl = g.pads_begin[R - 1];
        xs_ = p.input_spatial_volume();
        os_ = p.output_spatial_volume();
        nr_ = os_ / Wo_;
        nc_ = s2_chunks(W_, Wo_);
        pattern_ = s2_pattern(k, k, g.dilations[R - 1], pl);
        in_rows_ = xs_ / W_;
        mc_ = p.bwd().s2_bcount;
        // Each output row's outer divisor factor (the product over the outer axes); 1 for a row
        // whose window holds no input row (no input row gathers it: the value is unused).
        if (p.divisor_override > 0) {
            std::fill(factor_, factor_ + nr_, static_cast<float>(p.divisor_override));
        } else {
            const window* w0 = p.axis(0);
            const index_t Ho = R == 3 ? g.output[1] : 1;
            for (index_t o0 = 0; o0 < g.output[0]; ++o0) {
                for (index_t o1 = 0; o1 < Ho; ++o1) {
                    index_t f = w0[o0].count > 0 ? w0[o0].divisor : 0;
                    if constexpr (R == 3) {
                        const window& a1 = p.axis(1)[o1];
                        f = a1.count > 0 ? f * a1.divisor : 0;  // exact: at most max_divisor
                    }
                    factor_[o0 * Ho + o1] = f > 0 ? static_cast<float>(f) : 1.0f;
                }
            }
        }
        fixed_ = p.divisor_override > 0;
        // Gradients inside the row in the last chunk; input columns inside the row.
        for (index_t l = 0; l < 8; ++l) gmask_[l] = 8 * (nc_ - 1) + l < Wo_ ? -1 : 0;
        for (index_t l = 0; l < 16 * s2_backward_max_chunks; ++l) smask_[l] = l < W_ ? -1 : 0;
        // Lane l of a chunk's shares holds element s2_pos(l): the order unpacklo / unpackhi of
        // the two parities put back in order.
        for (index_t l = 0; l < 8; ++l) order_[l] = s2_pos(l);
        // Shifts by -2 .. 2 elements (index shift + 2): column 2 j + parity of a chunk gathers
        // output element j + shift, from the neighbouring chunk outside 0 .. 7.
        for (index_t shift = -2; shift <= 2; ++shift) {
            for (index_t j = 0; j < 8; ++j) {
                shift_[shift + 2].idx[s2_pos(j)] = s2_pos((j + shift) & 7);
                shift_[shift + 2].other[s2_pos(j)] = j + shift >= 0 && j + shift < 8 ? 0 : -1;
            }
        }
    }

    /// Planes item_begin .. item_end - 1 (item = n * C + c).
    void run(const float* grad_out, float* grad_in, index_t item_begin, index_t item_end) const {
        dispatch(grad_out, grad_in, item_begin, item_end, 0, in_rows_, 0, nr_);
    }

    /// Outer input rows [r0, r1) of plane `item` (the few-plane split): the bits of run().
    void run_rows(const float* grad_out, float* grad_in, index_t item, index_t r0, index_t r1) const {
        if (r0 >= r1) return;
        // The whole plane (the few-plane split hands whole planes here too), or streaming rows
        // (stream() reads no [q0, q1)): run()'s range, without the scan below, which was a fifth
        // of 24 planes of 56x56's backward on a Xeon.
        if ((r0 == 0 && r1 == in_rows_) || !p_.bwd().s2_bstream.empty())
            return dispatch(grad_out, grad_in, item, item + 1, r0, r1, 0, nr_);
        // Only the output rows these input rows gather are expanded: [q0, q1).
        const std::int32_t* const rows = p_.bwd().s2_brows.data();
        index_t q0 = nr_, q1 = 0;
        for (index_t r = r0; r < r1; ++r) {
            for (index_t i = 0; i < mc_; ++i) {
                const index_t q = rows[r * mc_ + i];
                if (q == nr_) continue;  // the zero row
                q0 = std::min(q0, q);
                q1 = std::max(q1, q + 1);
            }
        }
        dispatch(grad_out, grad_in, item, item + 1, r0, r1, q0, q1);
    }

private:

    // Rows gathering their last output row and perhaps the one before, rising, stream
    // (stream()); others go through the buffer (buffered(): 3x3 windows at stride 1 down the
    // planes, 5x5 at stride 2, and R = 3, whose rows gather again the outputs of the slice
    // before them).
    void dispatch(const float* go, float* gi, index_t i0, index_t i1, index_t r0, index_t r1, index_t q0, index_t q1) const {
        const bool streams = !p_.bwd().s2_bstream.empty();
        auto run = [&](auto k, auto pl, auto nc) {
            constexpr int K = decltype(k)::value, PL = decltype(pl)::value, NC = decltype(nc)::value;
            if (streams)
                stream<K, PL, NC>(go, gi, i0, i1, r0, r1);
            else
                buffered<K, PL, NC>(go, gi, i0, i1, r0, r1, q0, q1);
        };
        auto chunks = [&](auto k, auto pl) {
            switch (nc_) {
                case 1: return run(k, pl, s2_int<1>{});
                case 2: return run(k, pl, s2_int<2>{});
                case 3: return run(k, pl, s2_int<3>{});
                case 4: return run(k, pl, s2_int<4>{});
                default: return;  // (s2_backward_geometry admits 1 to 4)
            }
        };
        switch (pattern_) {  // (K, PL) of s2_pattern's cases
            case 0: return chunks(s2_int<2>{}, s2_int<0>{});
            case 1: return chunks(s2_int<3>{}, s2_int<1>{});
            case 2: return chunks(s2_int<3>{}, s2_int<0>{});
            case 3: return chunks(s2_int<5>{}, s2_int<2>{});
            default: return;  // (s2_geometry admits only the patterns above)
        }
    }

    // The sum of the taps of parity P (input columns 2 j + P of a chunk) for K taps with left
    // pad PL: tap t reaches them when P + PL - t is even, from output element j + (P + PL - t) / 2;
    // in the order of t, as backward_cf's phases add them (the farthest output first).
    // idx / other: the shift tables of shifts -2 .. 2.
    template <int K, int PL, int P, int NC, int C>
    static AVGPOOL_ALWAYS_INLINE __m256 parity(const __m256* sh, const __m256i* idx, const __m256* other) noexcept {
        __m256 acc = _mm256_setzero_ps();
        unrolled<K>([&](auto t) AVGPOOL_INLINE_LAMBDA {
            constexpr int rel = P + PL - static_cast<int>(t);
            if constexpr (rel % 2 == 0) {
                constexpr int shift = rel / 2;
                __m256 v = sh[C];
                if constexpr (shift != 0) {
                    constexpr int nb = shift < 0 ? C - 1 : C + 1;
                    v = _mm256_permutevar8x32_ps(v, idx[shift + 2]);
                    if constexpr (nb < 0 || nb >= NC) {
                        v = _mm256_andnot_ps(other[shift + 2], v);
                    } else {
                        v = _mm256_blendv_ps(v, _mm256_permutevar8x32_ps(sh[nb], idx[shift + 2]), other[shift + 2]);
                    }
                }
                acc = t == (P + PL) % 2 ? v : _mm256_add_ps(acc, v);  // (the parity's first tap)
            }
        });
        return acc;
    }

    // What every row's expansion uses, loaded once a call into locals (the kernel's members
    // would be read again after every store: a float store may alias them).
    struct regs {
        __m256i gmask, order;
        __m256i idx[5];  // shifts -2 .. 2 (the pattern's stay in registers, the rest unused)
        __m256 other[5];
        const float* bdiv;    // the last axis's divisors (ones under an override)
        const float* factor;  // the output rows' outer factors (the override)
        const float* go_end;  // the end of the output gradients
        index_t W, Wo;
        const std::int32_t* smask;
        std::uint16_t wmask[2];  // expand_wide: the lanes of its two vectors that are outputs
    };
    regs load_regs(const float* grad_out) const noexcept {
        regs k;
        k.gmask = s2_lanes(gmask_);
        k.order = s2_lanes(order_);
        for (int i = 0; i < 5; ++i) {
            k.idx[i] = s2_lanes(shift_[i].idx);
            k.other[i] = _mm256_castsi256_ps(s2_lanes(shift_[i].other));
        }
        k.bdiv = fixed_ ? s2_ones : p_.template last_backward_divisor<float>();
        k.factor = factor_;
        k.go_end = grad_out + p_.input_shape[0] * p_.input_shape[1] * os_;
        k.W = W_;
        k.Wo = Wo_;
        k.smask = smask_;
        for (int c = 0; c < 2; ++c) {
            const index_t n = std::min<index_t>(16, std::max<index_t>(0, Wo_ - 16 * c));
            k.wmask[c] = static_cast<std::uint16_t>((1u << n) - 1u);
        }
        return k;
    }

    // x[0, 2 NC) = output row q of plane go divided into shares and expanded: 16 NC input
    // columns (those past the row hold values no store keeps).
    template <int K, int PL, int NC>
    static AVGPOOL_ALWAYS_INLINE void expand(const regs& k, const float* go, index_t q, __m256* x) noexcept {
#if AVGPOOL_STRIDE2_WIDE
        if constexpr (NC > s2_unrolled_chunks) return expand_wide<K, PL, NC>(k, go, q, x);
#endif
        const float* const g = go + q * k.Wo;
        const __m256 f = _mm256_broadcast_ss(k.factor + q);
        __m256 sh[NC];  // the shares, lanes in pos order
        unrolled<NC>([&](auto c) AVGPOOL_INLINE_LAMBDA {
            // The last chunk's lanes past the row are zeroed: read whole where the vector stays
            // inside the tensor (a masked load waits for the stores before it: 3x3 on 14x14
            // planes went 19.1 -> 14.4 us), else masked.
            __m256 v;
            if (c + 1 < NC) {
                v = _mm256_loadu_ps(g + 8 * c);
            } else if (g + 8 * NC <= k.go_end) {
                v = _mm256_and_ps(_mm256_loadu_ps(g + 8 * c), _mm256_castsi256_ps(k.gmask));
            } else {
                v = _mm256_maskload_ps(g + 8 * c, k.gmask);
            }
            // g / (outer factor x last-axis divisor), the product exact; + 0: -0 shares are +0
            // (backward_cf's plus_zero).
            const __m256 d = _mm256_mul_ps(f, _mm256_loadu_ps(k.bdiv + 8 * c));
            sh[c] = _mm256_permutevar8x32_ps(_mm256_add_ps(_mm256_div_ps(v, d), _mm256_setzero_ps()), k.order);
        });
        unrolled<NC>([&](auto c) AVGPOOL_INLINE_LAMBDA {
            const __m256 e = parity<K, PL, 0, NC, c>(sh, k.idx, k.other), o = parity<K, PL, 1, NC, c>(sh, k.idx, k.other);
            x[2 * c] = _mm256_unpacklo_ps(e, o);
            x[2 * c + 1] = _mm256_unpackhi_ps(e, o);
        });
    }

#if AVGPOOL_STRIDE2_WIDE
    // expand() in 16-lane vectors, for rows of 3 or 4 chunks (33 to 64 columns, up to 32
    // outputs): the shares in two vectors, in order; a tap moved by whole outputs is a lane
    // shift bringing in the other vector's lanes (zeros past the row); the two parities'
    // sums interleaved back into columns by two two-source permutes. The same quotients and
    // sums in the same order as expand(), so its bits (ShuffleNet's 56x56: see s2_backward).
    template <int K, int PL, int NC>
    static AVGPOOL_ALWAYS_INLINE void expand_zmm(const regs& k, const float* go, index_t q, __m512* z) noexcept {
        static_assert(NC == 3 || NC == 4, "expand_zmm: rows of 3 or 4 chunks");
        const float* const g = go + q * k.Wo;
        const __m512 f = _mm512_set1_ps(k.factor[q]), zero = _mm512_setzero_ps();
        __m512 sh[2];
        unrolled<2>([&](auto c) AVGPOOL_INLINE_LAMBDA {
            // Lanes past the row zeroed; a whole load where it stays inside the tensor (as
            // expand()), else masked. (The divisors past the row are the table's padding, 1.)
            const float* const at = g + 16 * c;
            const __mmask16 m = k.wmask[c];
            __m512 v;
            if (m == 0xffff) {
                v = _mm512_loadu_ps(at);
            } else if (at + 16 <= k.go_end) {
                v = _mm512_maskz_mov_ps(m, _mm512_loadu_ps(at));
            } else {
                v = _mm512_maskz_loadu_ps(m, at);
            }
            const __m512 d = _mm512_mul_ps(f, _mm512_loadu_ps(k.bdiv + 16 * c));
            sh[c] = _mm512_add_ps(_mm512_div_ps(v, d), zero);
        });
        // Input columns 2 j + P of vector c's outputs j: tap t reaches them from output
        // j + (P + PL - t) / 2 when P + PL - t is even, in the order of t (parity()'s).
        auto side = [&](auto p, auto c) AVGPOOL_INLINE_LAMBDA {
            constexpr int P = decltype(p)::value, C = decltype(c)::value;
            __m512 acc = zero;
            unrolled<K>([&](auto t) AVGPOOL_INLINE_LAMBDA {
                constexpr int rel = P + PL - static_cast<int>(t);
                if constexpr (rel % 2 == 0) {
                    constexpr int shift = rel / 2;
                    __m512 v = sh[C];
                    if constexpr (shift > 0) {
                        v = lane_shift<shift>(sh[C], C == 0 ? sh[1] : zero);
                    } else if constexpr (shift < 0) {
                        v = lane_shift<16 + shift>(C == 1 ? sh[0] : zero, sh[C]);
                    }
                    acc = t == (P + PL) % 2 ? v : _mm512_add_ps(acc, v);
                }
            });
            return acc;
        };
        const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        unrolled<2>([&](auto c) AVGPOOL_INLINE_LAMBDA {
            const __m512 e = side(s2_int<0>{}, c), o = side(s2_int<1>{}, c);
            constexpr int at = 2 * static_cast<int>(c);
            z[at] = _mm512_permutex2var_ps(e, lo, o);
            if constexpr (at + 1 < NC) z[at + 1] = _mm512_permutex2var_ps(e, hi, o);
        });
    }

    // expand_zmm's columns as expand() gives them, in 8-lane halves (buffered()).
    template <int K, int PL, int NC>
    static AVGPOOL_ALWAYS_INLINE void expand_wide(const regs& k, const float* go, index_t q, __m256* x) noexcept {
        __m512 z[NC];
        expand_zmm<K, PL, NC>(k, go, q, z);
        // Half H of a vector. (maskz with every lane: the plain extract, and the cast to 256
        // bits built on it, trip GCC 12's -Wmaybe-uninitialized.)
        auto half = [](__m512 v, auto h) AVGPOOL_INLINE_LAMBDA {
            return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(v), decltype(h)::value));
        };
        unrolled<NC>([&](auto v) AVGPOOL_INLINE_LAMBDA {
            x[2 * v] = half(z[v], s2_int<0>{});
            x[2 * v + 1] = half(z[v], s2_int<1>{});
        });
    }

    // Input row dst from its sums in 16-lane vectors (store_row()'s rule).
    template <int NC>
    static AVGPOOL_ALWAYS_INLINE void store_row_wide(const regs& k, float* dst, const __m512* acc, bool whole) noexcept {
        unrolled<NC>([&](auto v) AVGPOOL_INLINE_LAMBDA {
            if (v + 1 < NC || 16 * v < k.W) {
                if (whole) {
                    _mm512_storeu_ps(dst + 16 * v, acc[v]);
                } else {
                    const index_t n = std::min<index_t>(16, k.W - 16 * v);
                    _mm512_mask_storeu_ps(dst + 16 * v, static_cast<__mmask16>((1u << n) - 1u), acc[v]);
                }
            }
        });
    }
#endif

    // Input row dst from its sums: whole vectors (the lanes past the row land on the next
    // row, written after this one), or, for the call's last row, masked stores. (Vectors
    // that start past the row are left out; a row's first 2 NC - 1 start inside it: rows of
    // NC chunks are more than 16 (NC - 1) wide, and of one 9 or more.)
    template <int NC>
    static AVGPOOL_ALWAYS_INLINE void store_row(const regs& k, float* dst, const __m256* acc, bool whole) noexcept {
        if (whole) {
            unrolled<2 * NC>([&](auto v) AVGPOOL_INLINE_LAMBDA {
                if (v + 1 < 2 * NC || 8 * v < k.W) _mm256_storeu_ps(dst + 8 * v, acc[v]);
            });
        } else {
            unrolled<2 * NC>([&](auto v) AVGPOOL_INLINE_LAMBDA {
                if (v + 1 < 2 * NC || 8 * v < k.W) _mm256_maskstore_ps(dst + 8 * v, s2_lanes(k.smask + 8 * v), acc[v]);
            });
        }
    }

    // Rows that gather their last output row and perhaps the one before (s2_bstream), the
    // last ones rising: output rows are expanded in order, once each, in registers, the
    // previous one kept (a row of 3x3 stride-2 windows gathers the outputs either side of
    // it), and after each the input rows of its group are written, each the masked sum
    // prev + cur (the tables' order). A branch per row on whether to expand cost 1.5x on
    // 14x14 planes, and a few instructions more per row show: the groups of two rows alike
    // (s2_bfast) run in a loop of their own.
    template <int K, int PL, int NC>
    void stream(const float* grad_out, float* grad_in, index_t i0, index_t i1, index_t r0, index_t r1) const {
#if AVGPOOL_STRIDE2_WIDE
        if constexpr (NC > s2_unrolled_chunks) {
            if (wide_stream_) return stream_as<K, PL, NC, true>(grad_out, grad_in, i0, i1, r0, r1);
        }
#endif
        stream_as<K, PL, NC, false>(grad_out, grad_in, i0, i1, r0, r1);
    }

    // Wide: in 16-lane vectors (expand_zmm, store_row_wide; AVX-512 builds, rows of 3 or 4
    // chunks), the same sums.
    template <int K, int PL, int NC, bool Wide>
    void stream_as(const float* grad_out, float* grad_in, index_t i0, index_t i1, index_t r0, index_t r1) const {
        using vt = typename s2_vector<Wide>::type;
        constexpr int NV = Wide ? NC : 2 * NC;  // vectors of a row
        auto vzero = []() AVGPOOL_INLINE_LAMBDA -> vt {
#if AVGPOOL_STRIDE2_WIDE
            if constexpr (Wide) return _mm512_setzero_ps(); else
#endif
            return _mm256_setzero_ps();
        };
        auto vadd = [](vt a, vt b) AVGPOOL_INLINE_LAMBDA -> vt {
#if AVGPOOL_STRIDE2_WIDE
            if constexpr (Wide) return _mm512_add_ps(a, b); else
#endif
            return _mm256_add_ps(a, b);
        };
        auto expand_to = [](const regs& k, const float* go, index_t q, vt* x) AVGPOOL_INLINE_LAMBDA {
#if AVGPOOL_STRIDE2_WIDE
            if constexpr (Wide) expand_zmm<K, PL, NC>(k, go, q, x); else
#endif
            expand<K, PL, NC>(k, go, q, x);
        };
        auto store_to = [](const regs& k, float* dst, const vt* acc, bool whole) AVGPOOL_INLINE_LAMBDA {
#if AVGPOOL_STRIDE2_WIDE
            if constexpr (Wide) store_row_wide<NC>(k, dst, acc, whole); else
#endif
            store_row<NC>(k, dst, acc, whole);
        };
        const std::int32_t* const count = p_.bwd().s2_bstream.data();
        const index_t* const group = p_.bwd().s2_bgroup.data();
        const regs k = load_regs(grad_out);
        const index_t W = k.W;
        // The groups of rows r0 .. r1 - 1.
        index_t qa = 0, qb = nr_;
        while (group[qa + 1] <= r0) ++qa;
        while (qb > qa + 1 && group[qb - 1] >= r1) --qb;
        // The groups of two rows alike wholly inside [r0, r1 - 1) (the call's last row may be
        // masked): [fa, fb), or none.
        const int fast = p_.bwd().s2_bfast;
        index_t fa = std::max(qa, p_.bwd().s2_bfast_first), fb = std::min(qb, p_.bwd().s2_bfast_end);
        while (fa < fb && group[fa] < r0) ++fa;
        while (fb > fa && group[fb] > r1 - 1) --fb;
        if (fast == 0) fa = fb = qb;
        alignas(32) static constexpr std::int32_t masks[3][2][8] = {
            {{0}, {0}}, {{0}, {-1, -1, -1, -1, -1, -1, -1, -1}}, {{-1, -1, -1, -1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1, -1, -1, -1}}};
        // Row r's sum: prev and cur, or cur, or nothing, by its count (and masks, or their
        // 16-lane form: zeroing masks).
        auto gather = [&](index_t r, const vt* prev, const vt* cur, vt* acc) AVGPOOL_INLINE_LAMBDA {
#if AVGPOOL_STRIDE2_WIDE
            if constexpr (Wide) {
                const __mmask16 mp = count[r] == 2 ? 0xffff : 0, mc = count[r] >= 1 ? 0xffff : 0;
                unrolled<NV>([&](auto v) AVGPOOL_INLINE_LAMBDA {
                    acc[v] = _mm512_add_ps(_mm512_maskz_mov_ps(mp, prev[v]), _mm512_maskz_mov_ps(mc, cur[v]));
                });
                return;
            }
#endif
            if constexpr (!Wide) {
                const __m256 m_prev = _mm256_castsi256_ps(s2_lanes(masks[count[r]][0]));
                const __m256 m_cur = _mm256_castsi256_ps(s2_lanes(masks[count[r]][1]));
                unrolled<NV>([&](auto v) AVGPOOL_INLINE_LAMBDA {
                    acc[v] = _mm256_add_ps(_mm256_and_ps(prev[v], m_prev), _mm256_and_ps(cur[v], m_cur));
                });
            }
        };
        for (index_t item = i0; item < i1; ++item) {
            const float* const go = grad_out + item * os_;
            float* const gi = grad_in + item * xs_;
            const index_t whole_end = item + 1 == i1 ? r1 - 1 : r1;
            vt cur[NV], prev[NV];
            unrolled<NV>([&](auto v) AVGPOOL_INLINE_LAMBDA { cur[v] = vzero(); });
            if (qa > 0) expand_to(k, go, qa - 1, cur);
            // Groups q0 .. q1 - 1 row by row.
            auto rows = [&](index_t q0, index_t q1) AVGPOOL_INLINE_LAMBDA {
                for (index_t q = q0; q < q1; ++q) {
                    unrolled<NV>([&](auto v) AVGPOOL_INLINE_LAMBDA { prev[v] = cur[v]; });
                    expand_to(k, go, q, cur);
                    const index_t end = std::min(r1, group[q + 1]);
                    for (index_t r = std::max(r0, group[q]); r < end; ++r) {
                        vt acc[NV];
                        gather(r, prev, cur, acc);
                        store_to(k, gi + r * W, acc, r < whole_end);
                    }
                }
            };
            rows(qa, fa);
            float* dst = gi + group[fa] * W;
            if (fast == 1) {  // both rows cur
                for (index_t q = fa; q < fb; ++q, dst += 2 * W) {
                    expand_to(k, go, q, cur);
                    store_to(k, dst, cur, true);
                    store_to(k, dst + W, cur, true);
                }
            } else {  // prev + cur, then cur
                for (index_t q = fa; q < fb; ++q, dst += 2 * W) {
                    unrolled<NV>([&](auto v) AVGPOOL_INLINE_LAMBDA { prev[v] = cur[v]; });
                    expand_to(k, go, q, cur);
                    vt acc[NV];
                    unrolled<NV>([&](auto v) AVGPOOL_INLINE_LAMBDA { acc[v] = vadd(prev[v], cur[v]); });
                    store_to(k, dst, acc, true);
                    store_to(k, dst + W, cur, true);
                }
            }
            rows(fb, qb);
        }
    }

    // Rows that gather more: every output row the rows need ([q0, q1)) is expanded into a
    // buffer, then each input row sums its own from there.
    template <int K, int PL, int NC>
    void buffered(const float* grad_out, float* grad_in, index_t i0, index_t i1, index_t r0, index_t r1, index_t q0, index_t q1) const {
        constexpr index_t CW = 16 * NC;  // expanded columns a row
        // The plane's expanded output rows, then the row of zeros (index nr_).
        alignas(32) float ex[(s2_backward_rows + s2_backward_max_chunks) * 16];
        for (index_t l = 0; l < CW; l += 8) _mm256_store_ps(ex + nr_ * CW + l, _mm256_setzero_ps());
        const std::int32_t* const table = p_.bwd().s2_brows.data();
        const index_t mc = mc_;
        const regs k = load_regs(grad_out);
        for (index_t item = i0; item < i1; ++item) {
            const float* const go = grad_out + item * os_;
            float* const gi = grad_in + item * xs_;
            for (index_t q = q0; q < q1; ++q) {
                __m256 x[2 * NC];
                expand<K, PL, NC>(k, go, q, x);
                unrolled<2 * NC>([&](auto v) AVGPOOL_INLINE_LAMBDA { _mm256_store_ps(ex + q * CW + 8 * v, x[v]); });
            }
            const index_t whole_end = item + 1 == i1 ? r1 - 1 : r1;
            for (index_t r = r0; r < r1; ++r) {
                const std::int32_t* const t = table + r * mc;
                __m256 acc[2 * NC];
                const float* x = ex + t[0] * CW;
                unrolled<2 * NC>([&](auto v) AVGPOOL_INLINE_LAMBDA { acc[v] = _mm256_load_ps(x + 8 * v); });
                for (index_t i = 1; i < mc; ++i) {
                    x = ex + t[i] * CW;
                    unrolled<2 * NC>([&](auto v) AVGPOOL_INLINE_LAMBDA { acc[v] = _mm256_add_ps(acc[v], _mm256_load_ps(x + 8 * v)); });
                }
                store_row<NC>(k, gi + r * k.W, acc, r < whole_end);
            }
        }
    }

    const plan_data<R>& p_;
    bool wide_stream_ = false;
    index_t W_ = 1, Wo_ = 1, xs_ = 0, os_ = 0, nr_ = 1, nc_ = 1, in_rows_ = 1, mc_ = 1;
    int pattern_ = -1;
    bool fixed_ = false;
    alignas(32) std::int32_t gmask_[8] = {};
    alignas(32) std::int32_t smask_[16 * s2_backward_max_chunks] = {};
    alignas(32) std::int32_t order_[8] = {};
    s2_tap shift_[5] = {};
    float factor_[s2_backward_rows] = {};
};

#endif  // AVGPOOL_STRIDE2_KERNEL

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_KERNEL_STRIDE2_HPP
