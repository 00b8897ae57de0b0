// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The fast channels-last kernel (N[D]HWC; R = 1, 2, 3; float and double). Each spatial
// position holds C contiguous values, so SIMD runs over channels and never needs gathers.
// Work unit: one output row (fixed n and outer output coordinates).
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
// exactly in T, and a true division.
#ifndef AVGPOOL_DETAIL_KERNEL_CL_HPP
#define AVGPOOL_DETAIL_KERNEL_CL_HPP

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>

#include "kernel_cf.hpp"
#include "plan.hpp"
#include "reference.hpp"
#include "simd.hpp"

namespace avgpool {
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

template <class T>
constexpr index_t cl_capacity() noexcept {
    return cl_buffer_bytes / static_cast<index_t>(sizeof(T));
}

/// What the channels-last kernel needs to know about a plan's windows, from the tables.
struct cl_extent {
    index_t outer_rows = 1;  // bound on the input rows of one output row
    index_t span_all = 0;    // input columns from the row's first tap to its last
    index_t max_span = 0;    // the widest single window of the last axis (columns)
    bool fits_rows = true;
};

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

/// Whether the fast channels-last kernel covers this plan for element type T.
template <class T, std::size_t R>
bool cl_applicable(const plan_data<R>& p) noexcept {
    if (R > 3 || p.memory_layout != layout::channels_last) return false;
    // Divisors are formed in T: they must be exact integers there.
    if (p.max_divisor > exact_integer_limit<T>()) return false;
    const cl_extent e = cl_measure<R>(p);
    if (!e.fits_rows) return false;
    constexpr index_t L = static_cast<index_t>(vec<T>::width);
    return cl_choose_blocking(p.input_shape[1], e.span_all, e.max_span, L, cl_capacity<T>()).ok;
}

template <class T, std::size_t R>
class cl_kernel {
    using V = vec<T>;
    static constexpr index_t L = static_cast<index_t>(V::width);
    static constexpr index_t cap = cl_capacity<T>();

public:
    /// Requires cl_applicable<T, R>(p).
    cl_kernel(const plan_data<R>& p, pool_op op) : p_(p), op_(op) {
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
        const cl_extent e = cl_measure<R>(p);
        cb_ = cl_choose_blocking(C_, e.span_all, e.max_span, L, cap).cb;
        blocks_ = cb_ == C_ ? 1 : (C_ + cb_ - 1) / cb_;
        last_ = p.axis(R - 1);
        last_div_ = p.template last_divisor<T>();
        pb_ = g.pads_begin[R - 1];
        fused_ = pick_fused();
    }

    /// Output rows of the whole batch: the executor's work items.
    index_t items() const noexcept { return N_ * rows_per_n_; }

    /// Output rows item_begin .. item_end - 1 (item = n * rows_per_n + outer output index).
    void run(const T* in, T* out, index_t item_begin, index_t item_end) const {
        buffers b;  // not zeroed: every read is of an element written before (see zero_slack)
        const T* rows[cl_max_outer_rows];
        const pool_geometry<R>& g = p_.geometry;
        const index_t WC = W_ * C_;
        for (index_t item = item_begin; item < item_end; ++item) {
            const index_t n = item / rows_per_n_, r = item % rows_per_n_;
            const T* src = in + n * in_n_;
            T* dst = out + item * row_out_;
            if constexpr (R == 1) {
                (void)r;
                (void)WC;
                rows[0] = src;
                row(b, rows, 1, 1, 1.0, dst);
            } else if constexpr (R == 2) {
                const window& wh = p_.axis(0)[r];
                for (index_t j = 0; j < wh.count; ++j) rows[j] = src + (wh.first + j * g.dilations[0]) * WC;
                row(b, rows, 1, wh.count, static_cast<double>(wh.divisor), dst);
            } else {
                const index_t Ho = g.output[1];
                const window& wd = p_.axis(0)[r / Ho];
                const window& wh = p_.axis(1)[r % Ho];
                const index_t HWC = g.input[1] * WC;
                for (index_t i = 0; i < wd.count; ++i)
                    for (index_t j = 0; j < wh.count; ++j)
                        rows[i * wh.count + j] =
                            src + (wd.first + i * g.dilations[0]) * HWC + (wh.first + j * g.dilations[1]) * WC;
                row(b, rows, wd.count, wh.count,
                    static_cast<double>(wd.divisor) * static_cast<double>(wh.divisor), dst);
            }
        }
    }

private:
    struct buffers {
        alignas(64) T buf[cap + L];  // + L: whole-vector reads past a flat block's last channel
        alignas(64) T tmp[cl_chunk];
    };

    // The divisor of output column ow: the override, or the outer factor times the last
    // axis's (empty-window-adjusted) factor; both exact in T (cl_applicable).
    struct row_divisor {
        bool fixed;
        T value;
        const T* last;
        T scalar(index_t ow) const noexcept { return fixed ? value : value * last[ow]; }
        V at(index_t ow) const noexcept { return V::splat(scalar(ow)); }
    };

    // a / d, correctly rounded up to a last-bit tie: with FMA, a multiply by the reciprocal r
    // then one exact-residual correction (q + (a - q d) r), which costs less than a vector
    // division and returns exact quotients exactly (the mean of ones is 1); else a division.
    struct quotient_by {
        V d, r;
        explicit quotient_by(T div) noexcept
            : d(V::splat(div)), r(V::splat(div != T(0) ? T(1) / div : std::numeric_limits<T>::infinity())) {}
        V operator()(V a) const noexcept {
#if AVGPOOL_HAS_XSIMD && defined(__FMA__)
            const V q{a.v * r.v};
            return V{xsimd::fma(xsimd::fnma(q.v, d.v, a.v), r.v, q.v)};
#else
            return a / d;
#endif
        }
    };

    // One output row: channel blocks, each through tiles of output columns.
    void row(buffers& b, const T* const* rows, index_t n0, index_t n1, double outer, T* dst) const {
        const bool average = op_ == pool_op::average;
        const bool override_div = p_.divisor_override > 0;
        if (average && !override_div && outer == 0.0) {
            // The outer window counts no tap: every output of the row is empty.
            std::fill(dst, dst + row_out_, empty_window_value<T>(p_.empty_window_nan));
            return;
        }
        const row_divisor div{override_div,
                              static_cast<T>(override_div ? static_cast<double>(p_.divisor_override) : outer),
                              last_div_};
        const index_t nrows = n0 * n1;
        if (fused_ != nullptr && nrows >= 1 && nrows <= cl_register_rows) {
            (this->*fused_)(rows, n0, n1, dst, average, div);
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
                // The longest run of outputs whose taps fit the buffer (any window alone does).
                index_t o1 = o0, lo = 0, hi = 0;
                bool any = false;
                for (; o1 < Wo_; ++o1) {
                    const window& w = last_[o1];
                    if (w.count == 0) continue;
                    const index_t end = w.first + (w.count - 1) * d_ + 1;
                    const index_t nlo = any ? std::min(lo, w.first) : w.first;
                    const index_t nhi = any ? std::max(hi, end) : end;
                    if (nhi - nlo > cols_cap) break;
                    lo = nlo;
                    hi = nhi;
                    any = true;
                }
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
                hpass(b.buf, cb_, lo, o0, o1, c0, dst, average, div);
                o0 = o1;
            }
        }
    }

    using fused_fn = void (cl_kernel::*)(const T* const*, index_t, index_t, T*, bool, const row_divisor&) const;

    // The fused path: small kernels (K <= 5) at stride 1 or 2 with dilation 1, whole vectors
    // of channels. No buffer: the vertical sums of the window's columns are kept in registers
    // and slid along the row (stride 1 reuses K - 1 of them per output, stride 2 K - 2).
    // Window ow covers columns ow * S - pb + t, t < K; those outside the input count as zero
    // columns, which is exactly the table's clipped window (first, count).
    fused_fn pick_fused() const noexcept {
        const pool_geometry<R>& g = p_.geometry;
        if (p_.adaptive || d_ != 1 || C_ % L != 0) return nullptr;
        const index_t k = g.kernel[R - 1], s = g.strides[R - 1];
        if (s != 1 && s != 2) return nullptr;
        const bool two = s == 2;
        switch (k) {
            case 1: return two ? &cl_kernel::fused<1, 2> : &cl_kernel::fused<1, 1>;
            case 2: return two ? &cl_kernel::fused<2, 2> : &cl_kernel::fused<2, 1>;
            case 3: return two ? &cl_kernel::fused<3, 2> : &cl_kernel::fused<3, 1>;
            case 4: return two ? &cl_kernel::fused<4, 2> : &cl_kernel::fused<4, 1>;
            case 5: return two ? &cl_kernel::fused<5, 2> : &cl_kernel::fused<5, 1>;
            default: return nullptr;
        }
    }

    template <int K, int S>
    void fused(const T* const* rows, index_t n0, index_t n1, T* dst, bool average, const row_divisor& div) const {
        constexpr index_t G = 2;  // vectors of channels per pass: 2 * K column sums in registers
        index_t c = 0;
        if (n0 == 1) {
            switch (n1) {
                case 1:
                    for (; c + G * L <= C_; c += G * L) fused_chunk<K, S, G, 1>(rows, n0, n1, c, dst, average, div);
                    break;
                case 2:
                    for (; c + G * L <= C_; c += G * L) fused_chunk<K, S, G, 2>(rows, n0, n1, c, dst, average, div);
                    break;
                case 3:
                    for (; c + G * L <= C_; c += G * L) fused_chunk<K, S, G, 3>(rows, n0, n1, c, dst, average, div);
                    break;
                default: break;
            }
        }
        for (; c + G * L <= C_; c += G * L) fused_chunk<K, S, G, 0>(rows, n0, n1, c, dst, average, div);
        for (; c < C_; c += L) fused_chunk<K, S, 1, 0>(rows, n0, n1, c, dst, average, div);
    }

    template <int K, int S, int G, int N1>
    void fused_chunk(const T* const* rows, index_t n0, index_t n1, index_t c, T* dst, bool average,
                     const row_divisor& div) const {
        V col[K][G];
        auto column = [&](index_t x, V* out) {
            if (x < 0 || x >= W_) {
                for (int g = 0; g < G; ++g) out[g] = V::splat(T(0));
                return;
            }
            const index_t off = x * C_ + c;
            for (int g = 0; g < G; ++g) out[g] = nested_vsum<T, N1>(rows, n0, n1, off + g * L);
        };
        index_t x0 = -pb_;
        for (int t = 0; t < K; ++t) column(x0 + t, col[t]);
        T* o = dst + c;
        for (index_t ow = 0;;) {
            const quotient_by dv(average ? div.scalar(ow) : T(1));
            for (int g = 0; g < G; ++g) {
                V acc = col[0][g];
                for (int t = 1; t < K; ++t) acc = acc + col[t][g];
                if (average) acc = dv(acc);
                acc.store(o + g * L);
            }
            if (++ow == Wo_) break;
            o += C_;
            x0 += S;
            for (int t = 0; t + S < K; ++t)
                for (int g = 0; g < G; ++g) col[t][g] = col[t + S][g];
            for (int t = K - S < 0 ? 0 : K - S; t < K; ++t) column(x0 + t, col[t]);
        }
    }

    template <int N1>
    static void vsum_regs(T* dst, const T* const* rows, index_t n0, index_t n1, index_t off, index_t len) noexcept {
        index_t i = 0;
        for (; i + L <= len; i += L) nested_vsum<T, N1>(rows, n0, n1, off + i).store(dst + i);
        for (; i < len; ++i) dst[i] = nested_vsum1(rows, n0, n1, off + i);
    }

    // dst[i] = nested sum of rows[.][off + i], i < len (n0, n1 >= 1).
    void vsum(buffers& b, T* dst, const T* const* rows, index_t n0, index_t n1, index_t off, index_t len) const {
        if (n0 * n1 <= cl_register_rows) {
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
                const T* const* r = rows + i * n1;
                for (index_t j = 0; j < n1; j += 4) add_rows(tgt, r + j, std::min<index_t>(4, n1 - j), off + c, m, j > 0);
                if (i > 0) add_into(dst + c, b.tmp, m);
            }
        }
    }

    // tgt[i] (+)= r[0][x + i] + ... + r[g - 1][x + i], i < m, g in 1..4.
    static void add_rows(T* tgt, const T* const* r, index_t g, index_t x, index_t m, bool accumulate) noexcept {
        index_t i = 0;
        for (; i + L <= m; i += L) {
            V s = V::load(r[0] + x + i);
            for (index_t j = 1; j < g; ++j) s = s + V::load(r[j] + x + i);
            if (accumulate) s = V::load(tgt + i) + s;
            s.store(tgt + i);
        }
        for (; i < m; ++i) {
            T s = r[0][x + i];
            for (index_t j = 1; j < g; ++j) s += r[j][x + i];
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
    static void put(T* o, index_t room, V v) noexcept {
        if (room >= L) {
            v.store(o);
        } else {
            T tmp[V::width];
            v.store(tmp);
            std::memcpy(o, tmp, static_cast<std::size_t>(room) * sizeof(T));
        }
    }

    // Outputs o0 .. o1 - 1 of channel block c0: column x of the source is at
    // base + (x - x_lo) * pitch (the row buffer, or the input row itself).
    void hpass(const T* base, index_t pitch, index_t x_lo, index_t o0, index_t o1, index_t c0, T* dst, bool average,
               const row_divisor& div) const {
        const index_t step = d_ * pitch;
        for (index_t ow = o0; ow < o1; ++ow) {
            const window& w = last_[ow];
            const index_t at = ow * C_ + c0;
            T* o = dst + at;
            const index_t room = row_out_ - at;
            if (w.count == 0) {
                const V z = average ? V::splat(T(0)) / div.at(ow) : V::splat(T(0));
                for (index_t i = 0; i < cb_; i += L) put(o + i, room - i, z);
                continue;
            }
            const T* x = base + (w.first - x_lo) * pitch;
            const index_t k = w.count;
            const quotient_by dv(average ? div.scalar(ow) : T(1));
            index_t i = 0;
            for (; i + 4 * L <= cb_; i += 4 * L) {
                const T* p = x + i;
                V a0 = V::load(p), a1 = V::load(p + L), a2 = V::load(p + 2 * L), a3 = V::load(p + 3 * L);
                for (index_t t = 1; t < k; ++t) {
                    p += step;
                    a0 = a0 + V::load(p);
                    a1 = a1 + V::load(p + L);
                    a2 = a2 + V::load(p + 2 * L);
                    a3 = a3 + V::load(p + 3 * L);
                }
                if (average) {
                    a0 = dv(a0);
                    a1 = dv(a1);
                    a2 = dv(a2);
                    a3 = dv(a3);
                }
                a0.store(o + i);
                a1.store(o + i + L);
                a2.store(o + i + 2 * L);
                a3.store(o + i + 3 * L);
            }
            for (; i < cb_; i += L) {
                const T* p = x + i;
                V a = V::load(p);
                for (index_t t = 1; t < k; ++t) {
                    p += step;
                    a = a + V::load(p);
                }
                if (average) a = dv(a);
                put(o + i, room - i, a);
            }
        }
    }

    const plan_data<R>& p_;
    pool_op op_;
    index_t N_ = 0, C_ = 0, W_ = 0, Wo_ = 0, d_ = 1, row_out_ = 0, rows_per_n_ = 1, in_n_ = 0;
    index_t cb_ = 1, blocks_ = 1, pb_ = 0;
    fused_fn fused_ = nullptr;
    const window* last_ = nullptr;
    const T* last_div_ = nullptr;
};

}  // namespace detail
}  // namespace avgpool

#endif  // AVGPOOL_DETAIL_KERNEL_CL_HPP
