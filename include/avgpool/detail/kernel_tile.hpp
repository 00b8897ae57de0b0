// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The channel-tile kernel, for channels-first tensors of many small planes (ShuffleNet's
// stride-2 3x3 pools on 7x7 and 14x14, where no row kernel of this build and element type
// takes them, and their backward). There a row is shorter than two vectors and the row
// kernels spend most of their time setting rows up. This kernel transposes P planes (a vector
// of channels, or a cache line's worth) into a tile where each spatial position is P
// contiguous values, whole vectors, sums with no edge cases, and transposes the results back
// (oneDNN's JIT kernels treat plain layouts the same way). The sum is separable, one pass per
// axis through the window tables: any rank, dilation, padding, divisor and adaptive windows.
// Backward is its transpose: the gradients, times 1 / divisor, gathered back one axis at a
// time through per-axis lists of the outputs that tap each input.
// Every lane of a tile does the same operations, so a plane's result does not depend on which
// tile (or executor chunk) it falls in.
#ifndef AVGPOOL_DETAIL_KERNEL_TILE_HPP
#define AVGPOOL_DETAIL_KERNEL_TILE_HPP

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "kernel_cf.hpp"
#include "plan.hpp"
#include "simd.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

// Forward: planes of at most this many elements (input or output), so a tile stays in L1, and
// output rows shorter than this; longer ones the row kernels do as well (measured: 28x28
// planes at stride 2 ran no faster here, 32x32 ones slower).
constexpr index_t tile_max_plane = 256;
constexpr index_t tile_max_row = 16;
// Backward gains on larger planes too with 8-float vectors (AVX2 on an AMD EPYC: 28x28 and
// 32x32 at stride 2 in 0.7x and 0.9x the time of the row transpose, whose row setup costs
// more there). With 16-float vectors (AVX-512 on an Intel Xeon) the row transpose was the
// faster one on those planes (28x28 c144: 32 vs 46 us; 32x32 c64: 19 vs 41 us; 30x30 equal)
// and the tile still won on 14x14 (15 vs 27 us): the forward limit there.
constexpr index_t tile_max_plane_backward = vec<float>::width >= 16 ? tile_max_plane : 1024;
constexpr index_t tile_max_row_backward = 17;

/// Whether the geometry suits the tile kernel, forward or backward (any element type).
template <std::size_t R>
bool tile_geometry(const plan_data<R>& p, bool backward = false) noexcept {
    if (R > 3 || p.memory_layout != layout::channels_first || p.global) return false;
    const index_t xs = p.input_spatial_volume(), os = p.output_spatial_volume();
    const index_t plane = backward ? tile_max_plane_backward : tile_max_plane;
    if (xs > plane || os > plane) return false;
    if (p.geometry.output[R - 1] >= (backward ? tile_max_row_backward : tile_max_row)) return false;
    return p.input_shape[0] * p.input_shape[1] >= 16;  // enough planes for whole tiles
}

template <class T, std::size_t R>
bool tile_applicable(const plan_data<R>& p, bool backward = false) noexcept {
    return !p.tile_cover_at.empty() && !p.plane_rdiv_f.empty() && tile_geometry<R>(p, backward);
}

/// Transposes an L x L block: row r of src (at src + r * ss) becomes column r of dst (row c at
/// dst + c * ds). log2(L) rounds of interleaving rows r and r + L / 2. Src and Dst: T, or a
/// 16-bit type converted to and from T as the rows are loaded and stored.
// Rounds Step, 2 Step, ... < L of the transpose network, from a into b, then back (the arrays
// alternate): returns the array holding the result.
template <class T, int Step, int L = static_cast<int>(vec<T>::width)>
AVGPOOL_ALWAYS_INLINE const vec<T>* transpose_rounds(vec<T>* a, vec<T>* b) noexcept {
    if constexpr (Step >= L) {
        (void)b;
        return a;
    } else {
        unrolled<L / 2>([&](auto r) { interleave2(a[r], a[r + L / 2], b[2 * r], b[2 * r + 1]); });
        return transpose_rounds<T, 2 * Step>(b, a);
    }
}

template <class T, class Src, class Dst>
inline void transpose_block(const Src* src, index_t ss, Dst* dst, index_t ds) noexcept {
    using V = vec<T>;
    constexpr index_t L = static_cast<index_t>(V::width);
#if AVGPOOL_HAS_XSIMD && defined(__AVX__)
    if constexpr (std::is_same<T, float>::value && std::is_same<Src, T>::value && std::is_same<Dst, T>::value && L == 8) {
        // Rows r and r + 4 share a register (128-bit halves), then two in-lane rounds: 24
        // shuffles where the generic network takes 48.
        __m256 h[8], t[8];
        for (int r = 0; r < 4; ++r) {
            h[r] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(src + r * ss)), _mm_loadu_ps(src + (r + 4) * ss), 1);
            h[r + 4] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(src + r * ss + 4)), _mm_loadu_ps(src + (r + 4) * ss + 4), 1);
        }
        for (int k = 0; k < 8; k += 4) {
            t[k] = _mm256_unpacklo_ps(h[k], h[k + 1]);
            t[k + 1] = _mm256_unpackhi_ps(h[k], h[k + 1]);
            t[k + 2] = _mm256_unpacklo_ps(h[k + 2], h[k + 3]);
            t[k + 3] = _mm256_unpackhi_ps(h[k + 2], h[k + 3]);
            _mm256_storeu_ps(dst + (k + 0) * ds, _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0)));
            _mm256_storeu_ps(dst + (k + 1) * ds, _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2)));
            _mm256_storeu_ps(dst + (k + 2) * ds, _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0)));
            _mm256_storeu_ps(dst + (k + 3) * ds, _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2)));
        }
        return;
    }
#endif
    // Straight-line code whatever the optimization level (at -O2 GCC kept these loops rolled,
    // with the vectors in memory and a memmove per round: 2.5x the time of -O3).
    V a[L], b[L];
    unrolled<L>([&](auto r) { a[r] = vload(src + r * ss); });
    const V* t = transpose_rounds<T, 1>(a, b);
    unrolled<L>([&](auto c) { vstore(t[c], dst + c * ds); });
}

// M: the memory type of the forward pass's input and output (T, or float16 / bfloat16 for
// T = float, converted as the tiles are transposed in and out). Backward runs in T only.
template <class T, std::size_t R, class M = T>
class tile_kernel {
    using V = vec<T>;
    static constexpr index_t L = static_cast<index_t>(V::width);
    // Planes per tile: a cache line's worth (two AVX2 vectors of float) when the tile stays
    // small, so each position's vectors share a line and two independent sums are in flight
    // per position; else one vector. Measured with AVX2, against one vector: 0.83-0.93x the
    // time on ShuffleNet's 7x7 to 28x28 planes, but 1.2x on 32x32 backward (a 64 KiB tile);
    // four vectors made 28x28 backward slower too.
    static constexpr index_t line = 64 / static_cast<index_t>(sizeof(T)) > L ? 64 / static_cast<index_t>(sizeof(T)) : L;
    static constexpr index_t wide_tile_bytes = 60 * 1024;

public:
    /// Planes one tile holds (a multiple of the vector width).
    index_t planes_per_tile() const noexcept { return P_; }

    tile_kernel(const plan_data<R>& p, pool_op op) : p_(p), average_(op == pool_op::average) {
        xs_ = p.input_spatial_volume();
        os_ = p.output_spatial_volume();
        const index_t largest = std::max(xs_, os_);
        P_ = largest * line * static_cast<index_t>(sizeof(T)) <= wide_tile_bytes ? line : L;
        // The largest stage: axes before a reduced to the output, a and after still input.
        for (std::size_t a = 0; a <= R; ++a) {
            index_t v = 1;
            for (std::size_t b = 0; b < R; ++b) v *= b < a ? p.geometry.output[b] : p.geometry.input[b];
            stage_ = std::max(stage_, v);
        }
    }

    /// Planes item_begin .. item_end - 1 (item = n * C + c).
    void run(const M* in, M* out, index_t item_begin, index_t item_end) const {
        each_tile(in, xs_, out, os_, item_begin, item_end, [this](T* a, T* b, index_t P) {
            for (std::size_t ax = 0; ax < R; ++ax) {
                reduce(ax, a, b, P);
                std::swap(a, b);
            }
            return a;
        });
    }

    /// backward(): grad_in planes item_begin .. item_end - 1 from grad_out.
    void run_backward(const T* grad_out, T* grad_in, index_t item_begin, index_t item_end) const {
        // The forward reciprocals: an empty window's (inf or 1) never reaches grad_in, as no
        // input lists it.
        const T* scale = p_.template plane_reciprocals<T>();
        each_tile(grad_out, os_, grad_in, xs_, item_begin, item_end, [this, scale](T* a, T* b, index_t P) {
            for (index_t o = 0; o < os_; ++o)
                for (index_t u = 0; u < P; u += L) scale_plus_zero(V::load(a + o * P + u), V::splat(scale[o])).store(a + o * P + u);
            for (std::size_t ax = R; ax-- > 0;) {
                expand(ax, a, b, P);
                std::swap(a, b);
            }
            return a;
        });
    }

private:
    // Planes [begin, end) of src (sn elements each) into tiles; passes(a, b, P) turns tile a
    // (P lanes) into the result, with b as scratch, and returns where it is; dst planes (dn
    // elements) from it. A last tile of at most a vector of planes is a vector wide, not P_:
    // half the work where P_ is two vectors (17 channels of 30x30 backward: the second tile held
    // one plane). Every lane does the same operations whatever the tile's width.
    template <class Src, class Dst, class Passes>
    void each_tile(const Src* src, index_t sn, Dst* dst, index_t dn, index_t begin, index_t end, Passes&& passes) const {
        const line_buffer<T> buf(static_cast<std::size_t>(2 * stage_ * P_));
        for (index_t p0 = begin; p0 < end; p0 += P_) {
            const index_t m = std::min(P_, end - p0), P = m <= L ? L : P_;
            to_tile(src + p0 * sn, sn, m, buf.get(), P);
            from_tile(passes(buf.get(), buf.get() + stage_ * P, P), dn, m, dst + p0 * dn, P);
        }
    }

    // Positions before axis ax (already output) and after it (still input), for both passes.
    void around(std::size_t ax, index_t& outer, index_t& inner) const noexcept {
        outer = inner = 1;
        for (std::size_t b = 0; b < ax; ++b) outer *= p_.geometry.output[b];
        for (std::size_t b = ax + 1; b < R; ++b) inner *= p_.geometry.input[b];
    }

    // m planes of n elements at src (plane stride n) -> tile[i * P + lane]; lanes past m zero.
    template <class Src>
    void to_tile(const Src* src, index_t n, index_t m, T* tile, index_t P) const noexcept {
        if (m < P) {  // a partial tile (the end of a chunk): its planes' lanes one by one
            std::fill(tile, tile + n * P, T(0));
            for (index_t l = 0; l < m; ++l)
                for (index_t i = 0; i < n; ++i) tile[i * P + l] = sload(src[l * n + i]);
            return;
        }
        index_t i = 0;
        for (; i + L <= n; i += L)
            for (index_t u = 0; u < P; u += L) transpose_block<T>(src + u * n + i, n, tile + i * P + u, P);
        for (; i < n; ++i)
            for (index_t l = 0; l < P; ++l) tile[i * P + l] = sload(src[l * n + i]);
    }
    template <class Dst>
    void from_tile(const T* tile, index_t n, index_t m, Dst* dst, index_t P) const noexcept {
        index_t i = 0;
        if (m == P)
            for (; i + L <= n; i += L)
                for (index_t u = 0; u < P; u += L) transpose_block<T>(tile + i * P + u, P, dst + u * n + i, n);
        for (; i < n; ++i)
            for (index_t l = 0; l < m; ++l) sstore(tile[i * P + l], dst + l * n + i);
    }

    // Axis ax from its input extent to its output extent; axes before it are already reduced.
    // The last axis also divides (times the reciprocal of each output's divisor).
    void reduce(std::size_t ax, const T* src, T* dst, index_t P) const {
        const pool_geometry<R>& g = p_.geometry;
        index_t outer = 1, inner = 1;
        around(ax, outer, inner);
        const index_t X = g.input[ax], O = g.output[ax], d = p_.adaptive ? 1 : g.dilations[ax];
        const window* w = p_.axis(ax);
        const bool divide = average_ && ax + 1 == R;
        const T* rdiv = p_.template plane_reciprocals<T>();
        const index_t row = inner * P;  // elements per position of axis ax
        for (index_t u = 0; u < outer; ++u) {
            const T* s = src + u * X * row;
            for (index_t o = 0; o < O; ++o) {
                T* out = dst + (u * O + o) * row;
                const T* first = s + w[o].first * row;
                const T scale = divide ? rdiv[u * O + o] : T(1);
                switch (w[o].count) {  // unrolled for the common counts
                    case 0: taps<0>(first, 0, d * row, row, divide, scale, out); break;
                    case 1: taps<1>(first, 1, d * row, row, divide, scale, out); break;
                    case 2: taps<2>(first, 2, d * row, row, divide, scale, out); break;
                    case 3: taps<3>(first, 3, d * row, row, divide, scale, out); break;
                    case 4: taps<4>(first, 4, d * row, row, divide, scale, out); break;
                    default: taps<-1>(first, w[o].count, d * row, row, divide, scale, out); break;
                }
            }
        }
    }

    // The sum over taps t < n of the vector at at(t) (N is n when known, -1 when not; 0: zero).
    template <int N, class At>
    static V sum_taps(index_t n, At&& at) noexcept {
        if constexpr (N == 0) {
            (void)n;
            return V::splat(T(0));
        } else {
            V acc = V::load(at(0));
            const index_t count = N > 0 ? N : n;
            for (index_t t = 1; t < count; ++t) acc = acc + V::load(at(t));
            return acc;
        }
    }

    // out[j] = sum over t < n of first[t * step + j] (times scale), for j < len in vectors.
    template <int N>
    static void taps(const T* first, index_t n, index_t step, index_t len, bool divide, T scale, T* out) noexcept {
        const V f = V::splat(scale);
        for (index_t j = 0; j < len; j += L) {
            const V acc = sum_taps<N>(n, [&](index_t t) { return first + t * step + j; });
            (divide ? scale_plus_zero(acc, f) : plus_zero(acc)).store(out + j);  // (see plus_zero)
        }
    }

    // The transpose of reduce: axis ax from its output extent back to its input extent; axes
    // before it are still output, axes after it already input.
    void expand(std::size_t ax, const T* src, T* dst, index_t P) const {
        const pool_geometry<R>& g = p_.geometry;
        index_t outer = 1, inner = 1;
        around(ax, outer, inner);
        const index_t X = g.input[ax], O = g.output[ax];
        const index_t* at = p_.tile_cover_at.data() + p_.tile_cover_axis[ax];
        const index_t* list = p_.tile_cover.data();
        const index_t row = inner * P;
        for (index_t u = 0; u < outer; ++u) {
            const T* s = src + u * O * row;
            for (index_t x = 0; x < X; ++x) {
                T* out = dst + (u * X + x) * row;
                const index_t* c = list + at[x];
                switch (at[x + 1] - at[x]) {  // unrolled for the common counts
                    case 0: gather<0>(s, c, 0, row, out); break;
                    case 1: gather<1>(s, c, 1, row, out); break;
                    case 2: gather<2>(s, c, 2, row, out); break;
                    case 3: gather<3>(s, c, 3, row, out); break;
                    default: gather<-1>(s, c, at[x + 1] - at[x], row, out); break;
                }
            }
        }
    }

    // out[j] = sum over t < n of s[c[t] * len + j], for j < len in vectors.
    template <int N>
    static void gather(const T* s, const index_t* c, index_t n, index_t len, T* out) noexcept {
        for (index_t j = 0; j < len; j += L)
            sum_taps<N>(n, [&](index_t t) { return s + c[t] * len + j; }).store(out + j);
    }

    const plan_data<R>& p_;
    bool average_;
    index_t xs_ = 0, os_ = 0, stage_ = 1, P_ = L;
};

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_KERNEL_TILE_HPP
