// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The stride-2 row kernel, for AVX2 builds (where the AVX-512 permute kernel is compiled out):
// channels-first float planes of R = 2 or 3 with rows of 9 to 32 inputs at stride 2 on the
// last axis and 2x2, 3x3 or 5x5 windows: ShuffleNet's 3x3 pools on 14x14 and 28x28,
// DenseNet's 2x2 on 14x14 and 28x28. The tile kernel spent about half its time there on transposes, the row and
// block kernels on setting rows up. Here an output row is the sum of its window's input rows,
// kept in registers as chunks of 16 columns (two vectors; one or two chunks a row); a
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
#ifndef AVGPOOL_DETAIL_KERNEL_STRIDE2_HPP
#define AVGPOOL_DETAIL_KERNEL_STRIDE2_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernel_perm.hpp"
#include "plan.hpp"
#include "simd.hpp"

// AVX2 with 8-lane float vectors: AVX-512 builds have the permute kernel for these planes.
#if AVGPOOL_HAS_XSIMD && defined(__AVX2__) && !defined(__AVX512F__)
#define AVGPOOL_STRIDE2_KERNEL 1
#else
#define AVGPOOL_STRIDE2_KERNEL 0
#endif

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

// Input rows summed per output row and horizontal taps, at most.
constexpr index_t s2_max_rows = 5;
constexpr index_t s2_max_taps = 5;
// Rows of s2_min_width columns and more, in chunks of 16 columns (8 outputs), at most
// s2_max_chunks of them. On 7x7 planes (4 outputs in 8 lanes) the tile kernel was as fast
// (10.5-11.4 us either way for 576 planes, 3x3); with four chunks (56x56) the registers ran
// out and the block kernel was faster (25 against 33 us for 24 planes, 3x3).
constexpr index_t s2_min_width = 9;
static_assert(s2_min_width >= 9, "s2_kernel::run loads a one-chunk row's first vector whole");
constexpr index_t s2_max_chunks = 2;

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

/// Whether the geometry suits the stride-2 row kernel (float storage, AVX2 builds only): the
/// last axis at stride 2 with rows of one or two chunks and at least 4 outputs a chunk, whose
/// windows are the kernel's taps 2 o - pad + t inside the row (what a non-adaptive window is),
/// and a window s2_pattern names.
template <std::size_t R>
bool s2_geometry(const plan_data<R>& p) noexcept {
    if (!AVGPOOL_STRIDE2_KERNEL || R < 2 || R > 3 || p.memory_layout != layout::channels_first || p.global ||
        p.adaptive)
        return false;
    const pool_geometry<R>& g = p.geometry;
    const index_t W = g.input[R - 1], Wo = g.output[R - 1], k = g.kernel[R - 1], d = g.dilations[R - 1];
    const index_t pl = g.pads_begin[R - 1];
    // Rows of at least 4 outputs a chunk: a row's last whole vector then spills into the next
    // row only (s2_kernel stores whole vectors but in a call's last row).
    const index_t chunks = s2_chunks(W, Wo);
    if (g.strides[R - 1] != 2 || W < s2_min_width || chunks < 1 || chunks > s2_max_chunks || Wo < 4 * chunks ||
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
    return p.output_spatial_volume() / Wo <= perm_max_outer && s2_pattern(rows, k, d, pl) >= 0;
}

template <class T, std::size_t R, class M = T>
bool s2_applicable(const plan_data<R>& p) noexcept {
    // The row table and reciprocals exist only where s2_geometry held when the plan was made.
    return AVGPOOL_STRIDE2_KERNEL && std::is_same<T, float>::value && std::is_same<M, float>::value &&
           !p.plane_rdiv_f.empty() && !p.perm_rows.empty() && s2_geometry<R>(p);
}

#if AVGPOOL_STRIDE2_KERNEL

// Read for a window's missing rows: a row of the widest chunks.
alignas(32) inline constexpr float s2_zeros[16 * s2_max_chunks] = {};

template <std::size_t R>
class s2_kernel {
public:
    s2_kernel(const plan_data<R>& p, pool_op op) : p_(p), average_(op == pool_op::average) {
        const pool_geometry<R>& g = p.geometry;
        const index_t W = g.input[R - 1], k = g.kernel[R - 1], pl = g.pads_begin[R - 1];
        Wo_ = g.output[R - 1];
        xs_ = p.input_spatial_volume();
        nr_ = p.output_spatial_volume() / Wo_;
        os_ = nr_ * Wo_;
        nc_ = s2_chunks(W, Wo_);
        mask_lo_ = W < 16 * nc_ - 8;
        pattern_ = s2_pattern(static_cast<index_t>(p.perm_rows.size()) / nr_, k, g.dilations[R - 1], pl);
        // The last chunk's two vectors: the columns inside the row.
        for (index_t l = 0; l < 16; ++l) tail_[l] = 16 * (nc_ - 1) + l < W ? -1 : 0;
        for (index_t c = 0; c < nc_; ++c)
            for (index_t l = 0; l < 8; ++l) store_[c][l] = 8 * c + l < Wo_ ? -1 : 0;
        // deinterleave2_unordered puts element j of a chunk's even (odd) columns at lane pos(j):
        // bits 1 and 2 of j swapped (a0 a2 b0 b2 | a4 a6 b4 b6).
        auto pos = [](index_t j) { return static_cast<std::int32_t>((j & 1) | ((j & 2) << 1) | ((j & 4) >> 1)); };
        for (index_t t = 0; t < k; ++t) {
            const index_t c0 = t - pl;                          // the column output 0 reads
            const index_t shift = (c0 - (c0 % 2 + 2) % 2) / 2;  // output o reads element o + shift
            for (index_t o = 0; o < 8; ++o) {
                // Outside 0 .. 7: that element of the neighbouring chunk (zeros past the ends).
                const index_t j = o + shift;
                tap_[t].idx[pos(o)] = pos(j & 7);
                tap_[t].other[pos(o)] = j >= 0 && j < 8 ? 0 : -1;
            }
        }
    }

    /// Planes item_begin .. item_end - 1 (item = n * C + c).
    void run(const float* in, float* out, index_t item_begin, index_t item_end) const {
        // (Rows of one chunk are at least 9 wide: their first vector is always whole.)
        switch (pattern_ * 3 + (nc_ == 1 ? 0 : mask_lo_ ? 2 : 1)) {
            case 0: return rows<2, 2, 0, 1, false>(in, out, item_begin, item_end);
            case 1: return rows<2, 2, 0, 2, false>(in, out, item_begin, item_end);
            case 2: return rows<2, 2, 0, 2, true>(in, out, item_begin, item_end);
            case 3: return rows<3, 3, 1, 1, false>(in, out, item_begin, item_end);
            case 4: return rows<3, 3, 1, 2, false>(in, out, item_begin, item_end);
            case 5: return rows<3, 3, 1, 2, true>(in, out, item_begin, item_end);
            case 6: return rows<3, 3, 0, 1, false>(in, out, item_begin, item_end);
            case 7: return rows<3, 3, 0, 2, false>(in, out, item_begin, item_end);
            case 8: return rows<3, 3, 0, 2, true>(in, out, item_begin, item_end);
            case 9: return rows<5, 5, 2, 1, false>(in, out, item_begin, item_end);
            case 10: return rows<5, 5, 2, 2, false>(in, out, item_begin, item_end);
            case 11: return rows<5, 5, 2, 2, true>(in, out, item_begin, item_end);
            default: return;  // (s2_geometry admits only the cases above)
        }
    }

private:
    // A tap's permute: lane indices into a chunk, and the lanes that come from the chunk before
    // (a tap left of the output) or after (right of it).
    struct tap {
        alignas(32) std::int32_t idx[8];
        alignas(32) std::int32_t other[8];
    };

    template <class A>
    static AVGPOOL_ALWAYS_INLINE __m256i lanes(const A& a) noexcept {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
    }

    // KV input rows per output row, K taps with left pad PL (dilation 1), NC chunks of 16
    // columns (8 outputs) a row; MASK_LO: whether the last chunk's first 8 columns pass the row
    // (else a plain load: masking it too cost 30% on 14x14 planes).
    template <int KV, int K, int PL, int NC, bool MASK_LO>
    void rows(const float* in, float* out, index_t item_begin, index_t item_end) const {
        constexpr int NV = 2 * NC;  // vectors of a row
        const index_t* const table = p_.perm_rows.data();
        const float* const rdiv = p_.template plane_reciprocals<float>();
        const __m256i tail_lo = lanes(tail_), tail_hi = lanes(tail_ + 8);
        __m256i idx[K];
        __m256 other[K];
        for (int t = 0; t < K; ++t) {
            idx[t] = lanes(tap_[t].idx);
            other[t] = _mm256_castsi256_ps(lanes(tap_[t].other));
        }
        for (index_t item = item_begin; item < item_end; ++item) {
            const float* const plane = in + item * xs_;
            float* const dst = out + item * os_;
            for (index_t r = 0; r < nr_; ++r) {
                // The window's rows (-1: a shorter window's padding, read as zeros), summed per
                // vector; the last chunk's vectors are masked loads (nothing past the row).
                const index_t* const rr = table + r * KV;
                __m256 sum[NV];
                unrolled<KV>([&](auto i) AVGPOOL_INLINE_LAMBDA {
                    const float* src = rr[i] >= 0 ? plane + rr[i] : s2_zeros;
                    unrolled<NV>([&](auto v) AVGPOOL_INLINE_LAMBDA {
                        const __m256 a = v + 2 < NV || (v + 2 == NV && !MASK_LO)
                                             ? _mm256_loadu_ps(src + 8 * v)
                                             : _mm256_maskload_ps(src + 8 * v, v + 2 == NV ? tail_lo : tail_hi);
                        sum[v] = i == 0 ? a : _mm256_add_ps(sum[v], a);
                    });
                });
                // Per chunk, its even and odd columns (element j at lane pos(j)).
                __m256 even[NC], odd[NC];
                unrolled<NC>([&](auto c) AVGPOOL_INLINE_LAMBDA {
                    even[c] = _mm256_shuffle_ps(sum[2 * c], sum[2 * c + 1], _MM_SHUFFLE(2, 0, 2, 0));
                    odd[c] = _mm256_shuffle_ps(sum[2 * c], sum[2 * c + 1], _MM_SHUFFLE(3, 1, 3, 1));
                });
                const bool last_row = r + 1 == nr_ && item + 1 == item_end;
                unrolled<NC>([&](auto c) AVGPOOL_INLINE_LAMBDA {
                    __m256 acc = _mm256_setzero_ps();
                    unrolled<K>([&](auto t) AVGPOOL_INLINE_LAMBDA {
                        constexpr int c0 = static_cast<int>(t) - PL;  // the column output 0 reads
                        constexpr bool is_odd = (c0 % 2 + 2) % 2 == 1;
                        constexpr int shift = (c0 - (is_odd ? 1 : 0)) / 2;
                        // (Indexed by constants, not through a pointer: GCC then kept the
                        // arrays on the stack, 1.8x the time on 14x14 planes.)
                        __m256 v = is_odd ? odd[c] : even[c];
                        if constexpr (shift != 0) {
                            // Lanes moved past the chunk's edge take the neighbour's (none
                            // before the first chunk or after the last: zeros).
                            constexpr int nb = shift < 0 ? static_cast<int>(c) - 1 : static_cast<int>(c) + 1;
                            v = _mm256_permutevar8x32_ps(v, idx[t]);
                            if constexpr (nb < 0 || nb >= NC) {
                                v = _mm256_andnot_ps(other[t], v);
                            } else {
                                const __m256 n = is_odd ? odd[nb] : even[nb];
                                v = _mm256_blendv_ps(v, _mm256_permutevar8x32_ps(n, idx[t]), other[t]);
                            }
                        }
                        acc = t == 0 ? v : _mm256_add_ps(acc, v);
                    });
                    vec<float> v = in_order(vec<float>{acc});
                    const index_t at = r * Wo_ + 8 * c;
                    v = average_ ? scale_plus_zero(v, vec<float>::load(rdiv + at)) : plus_zero(v);
                    // Whole vectors but in the call's last row: the spare lanes land on the
                    // next row, which is stored after this one.
                    if (!last_row) {
                        _mm256_storeu_ps(dst + at, v.v);
                    } else {
                        _mm256_maskstore_ps(dst + at, lanes(store_[c]), v.v);
                    }
                });
            }
        }
    }

    const plan_data<R>& p_;
    bool average_;
    index_t Wo_ = 1, xs_ = 0, os_ = 0, nr_ = 1, nc_ = 1;
    bool mask_lo_ = false;
    int pattern_ = -1;
    alignas(32) std::int32_t tail_[16] = {};
    alignas(32) std::int32_t store_[4][8] = {};
    tap tap_[s2_max_taps] = {};
};

#endif  // AVGPOOL_STRIDE2_KERNEL

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_KERNEL_STRIDE2_HPP
