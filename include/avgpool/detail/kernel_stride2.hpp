// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The stride-2 row kernel, for AVX2 builds (where the AVX-512 permute kernel is compiled out):
// channels-first float planes of R = 2 or 3 whose input rows fit two 8-lane vectors (9 to 16
// columns) and whose output rows fit one, stride 2 on the last axis: ShuffleNet's 3x3 pools on
// 14x14. The tile kernel spent about half its time there on transposes. Here an output row is
// the sum of its window's input rows, kept in two registers; one de-interleave splits the sum
// into its even and odd columns, and each horizontal tap is then one of those two vectors as
// it is, or moved by whole lanes (one permute) with the lanes that would fall outside the row
// zeroed: tap t of output o reads column 2 o - pad + t * dilation, whose parity is the tap's.
// The row's second vector is a masked load, which zeroes the columns past the row (windows
// running past it under ceil rounding read zeros, as the window tables say) and never reads
// past the tensor. Output rows are stored whole but for a chunk's last one, so a row's spare
// lanes are overwritten by the next row.
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
/// last axis at stride 2 with rows of 9 to 16 inputs and at most 8 outputs, whose windows are
/// the kernel's taps 2 o - pad + t inside the row (what a non-adaptive window is), and a window
/// s2_pattern names.
template <std::size_t R>
bool s2_geometry(const plan_data<R>& p) noexcept {
    if (!AVGPOOL_STRIDE2_KERNEL || R < 2 || R > 3 || p.memory_layout != layout::channels_first || p.global ||
        p.adaptive)
        return false;
    const pool_geometry<R>& g = p.geometry;
    const index_t W = g.input[R - 1], Wo = g.output[R - 1], k = g.kernel[R - 1], d = g.dilations[R - 1];
    const index_t pl = g.pads_begin[R - 1];
    if (g.strides[R - 1] != 2 || W < 9 || W > 16 || Wo < 1 || Wo > 8 || k < 1 || k > s2_max_taps) return false;
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

// Read for a window's missing rows (and masked past its 9th column).
alignas(32) inline constexpr float s2_zeros[16] = {};

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
        pattern_ = s2_pattern(static_cast<index_t>(p.perm_rows.size()) / nr_, k, g.dilations[R - 1], pl);
        for (int l = 0; l < 8; ++l) {
            high_[l] = l + 8 < W ? -1 : 0;
            last_[l] = l < Wo_ ? -1 : 0;
        }
        // deinterleave2_unordered puts element j of the even (odd) columns at lane pos(j):
        // bits 1 and 2 of j swapped (a0 a2 b0 b2 | a4 a6 b4 b6).
        auto pos = [](index_t j) { return static_cast<std::int32_t>((j & 1) | ((j & 2) << 1) | ((j & 4) >> 1)); };
        for (index_t t = 0; t < k; ++t) {
            const index_t c0 = t - pl;                          // the column output 0 reads
            const index_t shift = (c0 - (c0 % 2 + 2) % 2) / 2;  // output o reads element o + shift
            for (index_t o = 0; o < 8; ++o) {
                const index_t j = o + shift;
                const bool inside = j >= 0 && j < 8;
                tap_[t].idx[pos(o)] = inside ? pos(j) : 0;
                tap_[t].mask[pos(o)] = inside ? -1 : 0;
            }
        }
    }

    /// Planes item_begin .. item_end - 1 (item = n * C + c).
    void run(const float* in, float* out, index_t item_begin, index_t item_end) const {
        switch (pattern_) {
            case 0: return rows<2, 2, 0>(in, out, item_begin, item_end);
            case 1: return rows<3, 3, 1>(in, out, item_begin, item_end);
            case 2: return rows<3, 3, 0>(in, out, item_begin, item_end);
            case 3: return rows<5, 5, 2>(in, out, item_begin, item_end);
            default: return;  // (s2_geometry admits only the cases above)
        }
    }

private:
    // A tap's permute: lane indices, and the lanes it keeps.
    struct tap {
        alignas(32) std::int32_t idx[8];
        alignas(32) std::int32_t mask[8];
    };

    // KV input rows per output row, K taps with left pad PL (dilation 1).
    template <int KV, int K, int PL>
    void rows(const float* in, float* out, index_t item_begin, index_t item_end) const {
        const index_t* const table = p_.perm_rows.data();
        const float* const rdiv = p_.template plane_reciprocals<float>();
        const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(high_));
        const __m256i last = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(last_));
        __m256i idx[K];
        __m256 mask[K];
        for (int t = 0; t < K; ++t) {
            idx[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tap_[t].idx));
            mask[t] = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tap_[t].mask)));
        }
        for (index_t item = item_begin; item < item_end; ++item) {
            const float* const plane = in + item * xs_;
            float* const dst = out + item * os_;
            for (index_t r = 0; r < nr_; ++r) {
                // The window's rows (-1: a shorter window's padding, read as zeros).
                const index_t* const rr = table + r * KV;
                __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
                unrolled<KV>([&](auto i) AVGPOOL_INLINE_LAMBDA {
                    const float* src = rr[i] >= 0 ? plane + rr[i] : s2_zeros;
                    const __m256 a = _mm256_loadu_ps(src), b = _mm256_maskload_ps(src + 8, high);
                    lo = i == 0 ? a : _mm256_add_ps(lo, a);
                    hi = i == 0 ? b : _mm256_add_ps(hi, b);
                });
                const __m256 even = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
                const __m256 odd = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
                __m256 acc = _mm256_setzero_ps();
                unrolled<K>([&](auto t) AVGPOOL_INLINE_LAMBDA {
                    constexpr int c0 = static_cast<int>(t) - PL;  // the column output 0 reads
                    constexpr bool is_odd = (c0 % 2 + 2) % 2 == 1, moved = c0 != 0 && c0 != 1;
                    __m256 v = is_odd ? odd : even;
                    if constexpr (moved) v = _mm256_and_ps(_mm256_permutevar8x32_ps(v, idx[t]), mask[t]);
                    acc = t == 0 ? v : _mm256_add_ps(acc, v);
                });
                vec<float> v = in_order(vec<float>{acc});
                v = average_ ? scale_plus_zero(v, vec<float>::load(rdiv + r * Wo_)) : plus_zero(v);
                float* const o = dst + r * Wo_;
                // Whole rows but the chunk's last: the spare lanes land on the next row, which
                // is stored after this one.
                if (r + 1 < nr_ || item + 1 < item_end) {
                    _mm256_storeu_ps(o, v.v);
                } else {
                    _mm256_maskstore_ps(o, last, v.v);
                }
            }
        }
    }

    const plan_data<R>& p_;
    bool average_;
    index_t Wo_ = 1, xs_ = 0, os_ = 0, nr_ = 1;
    int pattern_ = -1;
    alignas(32) std::int32_t high_[8] = {};
    alignas(32) std::int32_t last_[8] = {};
    tap tap_[s2_max_taps] = {};
};

#endif  // AVGPOOL_STRIDE2_KERNEL

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_KERNEL_STRIDE2_HPP
