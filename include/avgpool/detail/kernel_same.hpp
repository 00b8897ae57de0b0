// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The kernel for 2-D pools whose output grid is the input grid (stride 1, dilation 1, "same"
// padding: 3x3 pad 1, 7x7 pad 3, ...), the Inception-style branch pools. Planes there are small
// (8x8 to 35x35), so anything done per row costs as much as the arithmetic; this kernel works
// on a plane as one flat array instead:
// - horizontal pass: hs[i] = sum over taps j of in[i + j - pad_left], each tap ANDed with a
//   per-position mask that drops reads wrapping into the neighbouring row (or plane); the
//   masks are built once per plan, for a whole plane when it is small, else for one row;
// - vertical pass: out[i] = (sum over taps t of hs[i + t * W]) * (1 / divisor[i]), with hs stored
//   between zero rows for the padding, so it is full-width vector code with no edge cases.
// The sum is separable (a window's rows summed along w, then along h). The reciprocal multiply
// (a divide costs as much as the rest of the arithmetic here) adds at most about an ulp, well
// inside the accuracy bound.
#ifndef AVGPOOL_DETAIL_KERNEL_SAME_HPP
#define AVGPOOL_DETAIL_KERNEL_SAME_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "convert.hpp"
#include "kernel_cf.hpp"
#include "plan.hpp"
#include "simd.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

constexpr index_t same_max_kernel = 7;
// flat3() keeps 2 Q + 3 vectors of horizontal sums in registers: planes up to 16 (Q + 1) - 1 wide.
constexpr index_t flat3_max_q = 3;
// A whole plane is one segment while its masks (kernel width x plane) stay this small.
constexpr index_t same_plane_mask_budget = 8192;
// Planes up to this many elements: the padded buffer of horizontal sums stays in L2.
constexpr index_t same_max_plane = index_t(1) << 16;
// Planes up to this many elements split backward rows through this kernel's general path.
constexpr index_t same_split_backward_max = index_t(1) << 14;

/// Whether the geometry suits the same-grid kernel (independent of the element type).
template <std::size_t R>
bool same_geometry(const plan_data<R>& p) noexcept {
    if constexpr (R != 2) {
        return false;
    } else {
        if (p.memory_layout != layout::channels_first || p.global || p.adaptive) return false;
        const pool_geometry<R>& g = p.geometry;
        for (std::size_t a = 0; a < R; ++a) {
            if (g.strides[a] != 1 || g.dilations[a] != 1 || g.output[a] != g.input[a]) return false;
            if (g.kernel[a] > same_max_kernel || g.pads_begin[a] < 0 || g.pads_begin[a] >= g.kernel[a]) return false;
        }
        return g.input[0] * g.input[1] <= same_max_plane;
    }
}

/// The segment the horizontal masks describe: a whole plane when small, else one row.
template <std::size_t R>
index_t same_segment(const plan_data<R>& p) noexcept {
    const pool_geometry<R>& g = p.geometry;
    const index_t n = g.input[0] * g.input[R - 1];
    return g.kernel[R - 1] * n <= same_plane_mask_budget ? n : g.input[R - 1];
}

/// Whether same_kernel's flat3() path fits the geometry: 3x3 pad 1 (so the flipped windows of
/// backward are the same), planes 2 to 16 (flat3_max_q + 1) - 1 wide.
template <std::size_t R>
bool flat3_geometry(const plan_data<R>& p) noexcept {
    const pool_geometry<R>& g = p.geometry;
    return same_geometry<R>(p) && g.kernel[0] == 3 && g.kernel[R - 1] == 3 && g.pads_begin[0] == 1 &&
           g.pads_begin[R - 1] == 1 && g.input[R - 1] >= 2 && g.input[R - 1] < 16 * (flat3_max_q + 1);
}

/// flat3()'s lane masks for a plane of n values W wide (plan_data::same_kmask).
inline std::vector<std::uint16_t> flat3_masks(index_t n, index_t W) {
    std::vector<std::uint16_t> k(static_cast<std::size_t>(2 * ((n + 15) / 16)), 0);
    for (index_t pos = 0, col = 0; pos < n; ++pos, col = col + 1 == W ? 0 : col + 1) {
        const auto bit = static_cast<std::uint16_t>(1u << (pos % 16));
        const std::size_t j = static_cast<std::size_t>(pos / 16);
        if (col > 0) k[2 * j] = static_cast<std::uint16_t>(k[2 * j] | bit);
        if (col < W - 1) k[2 * j + 1] = static_cast<std::uint16_t>(k[2 * j + 1] | bit);
    }
    return k;
}

template <class T, std::size_t R>
bool same_applicable(const plan_data<R>& p) noexcept {
    return p.max_divisor <= exact_integer_limit<T>() && !p.plane_rdiv_f.empty() &&
           same_geometry<R>(p);
}

// M: the memory type of the forward pass's input and output (T, or float16 / bfloat16 for
// T = float, converted in registers; the row sums stay in T). Backward runs in T only.
template <class T, std::size_t R, class M = T>
class same_kernel {
    using V = vec<T>;
    static constexpr index_t L = static_cast<index_t>(V::width);

public:
    /// transpose: the kernel of backward() instead, the same sum over the flipped window
    /// (pads kernel - 1 - pad), which at stride 1 is exactly the set of outputs covering an input.
    same_kernel(const plan_data<R>& p, pool_op op, bool transpose = false) : p_(p), op_(op) {
        const pool_geometry<R>& g = p.geometry;
        H_ = g.input[0];
        W_ = g.input[1];
        kh_ = g.kernel[0];
        kw_ = g.kernel[1];
        pt_ = transpose ? kh_ - 1 - g.pads_begin[0] : g.pads_begin[0];
        pl_ = transpose ? kw_ - 1 - g.pads_begin[1] : g.pads_begin[1];
        n_ = H_ * W_;
        m_ = same_segment<R>(p);
        stride_ = m_ + 64;  // the slack build_same_masks() leaves per tap
        masks_ = p.template same_masks<T>(transpose);
        rgrid_ = p.template plane_reciprocals<T>();
        narrow8_ = narrow8_supported() && W_ == 8 && H_ % 2 == 0 && kh_ == 3 && kw_ == 3 && pt_ == 1 && pl_ == 1;
        flat3_ = !narrow8_ && narrow8_supported() && flat3_storage() && !p.same_kmask.empty();
        strip3_ = !narrow8_ && !flat3_ && L >= 4 && W_ >= L && kh_ == 3 && kw_ == 3 && pt_ == 1 && pl_ == 1;
        vfirst_ = !narrow8_ && !flat3_ && !strip3_ && narrow8_supported() && flat3_storage() &&
                  (pl_ == (kw_ - 1) / 2 || pl_ == kw_ / 2);
    }

    /// Planes item_begin .. item_end - 1 (item = n * C + c).
    /// Vector reads reach up to pad_left before a plane and kw + L past it while they stay
    /// inside the input; zero rows above and below the plane's horizontal sums stand for the
    /// padding, written once per call.
    void run(const M* in, M* out, index_t item_begin, index_t item_end) const {
        const M* const in_end = tensor_end(in);
        if (narrow8_) {
            narrow8<false>(in + item_begin * n_, out + item_begin * n_, item_end - item_begin);
            return;
        }
        if (flat3_) {
            flat3<false>(in + item_begin * n_, out + item_begin * n_, item_end - item_begin);
            return;
        }
        if (strip3_) {
            strip3(in, in_end, in + item_begin * n_, out + item_begin * n_, item_end - item_begin);
            return;
        }
        if (vfirst_) {
            for (index_t item = item_begin; item < item_end; ++item) vfirst(in + item * n_, out + item * n_, 0, H_);
            return;
        }
        const line_buffer<T> sums = sums_buffer();
        T* const buf = sums.get();
        for (index_t item = item_begin; item < item_end; ++item)
            plane(in, in_end, in + item * n_, out + item * n_, buf, 0, H_);
    }

    /// Whether vfirst() runs the pass (forward, or backward on the scaled plane; for tests).
    bool vertical_first() const noexcept { return vfirst_; }

    /// Whether run_rows() serves this kernel: not on the whole-plane paths (narrow8, flat3).
    bool splits_rows() const noexcept { return !narrow8_ && !flat3_; }

    /// Whether run_backward_rows() serves it and pays: its general path stages a scaled plane
    /// and a plane of sums per call, which past same_split_backward_max elements lost to the
    /// gathering backward (4 planes of 160x160, 5x5: 160 against 70 us).
    bool splits_backward_rows() const noexcept {
        return splits_rows() && (strip3_ || vfirst_ || n_ <= same_split_backward_max);  // (those two: no plane of sums)
    }

    /// Output rows row_begin .. row_end - 1 of plane `item`, for splitting few planes across
    /// threads (where splits_rows()). Each output row takes the operations, in the order, that
    /// run() gives it, so the bits are run()'s whatever the split.
    void run_rows(const M* in, M* out, index_t item, index_t row_begin, index_t row_end) const {
        if (row_begin >= row_end) return;
        const M* const in_end = tensor_end(in);
        const M* const src = in + item * n_;
        M* const dst = out + item * n_;
        if (strip3_) {
            strip3_rows(in, in_end, src, dst, row_begin, row_end);
            return;
        }
        if (vfirst_) {
            vfirst(src, dst, row_begin, row_end);
            return;
        }
        const line_buffer<T> sums = sums_buffer();
        plane(in, in_end, src, dst, sums.get(), row_begin, row_end);
    }

    /// backward() on a kernel made with transpose = true and pool_op::sum: each plane of
    /// grad_out times 1 / divisor, then summed over the flipped windows into grad_in.
    void run_backward(const T* grad_out, T* grad_in, index_t item_begin, index_t item_end) const {
        if (narrow8_) {
            narrow8<true>(grad_out + item_begin * n_, grad_in + item_begin * n_, item_end - item_begin);
            return;
        }
        if (flat3_) {
            flat3<true>(grad_out + item_begin * n_, grad_in + item_begin * n_, item_end - item_begin);
            return;
        }
        if (strip3_scaled()) {
            strip3<true>(grad_out, tensor_end(grad_out), grad_out + item_begin * n_, grad_in + item_begin * n_, item_end - item_begin);
            return;
        }
        const line_buffer<T> sums = sums_buffer();
        const scaled_plane scaled(*this);
        for (index_t item = item_begin; item < item_end; ++item)
            backward_rows(grad_out + item * n_, grad_in + item * n_, sums.get(), scaled, 0, H_);
    }

    /// Input rows row_begin .. row_end - 1 of grad_in's plane `item`, as run_backward() gives
    /// them (where splits_rows()): for splitting few planes across threads.
    void run_backward_rows(const T* grad_out, T* grad_in, index_t item, index_t row_begin, index_t row_end) const {
        if (row_begin >= row_end) return;
        if (strip3_scaled()) {
            strip3_rows<true>(grad_out, tensor_end(grad_out), grad_out + item * n_, grad_in + item * n_, row_begin, row_end);
            return;
        }
        const line_buffer<T> sums = sums_buffer();
        const scaled_plane scaled(*this);
        backward_rows(grad_out + item * n_, grad_in + item * n_, sums.get(), scaled, row_begin, row_end);
    }

private:
    // Backward through strip3() scaling each gradient as it is loaded (strip3_column's Scaled),
    // where rows 1 .. H - 2 share their reciprocals (so three rows of them per strip serve the
    // plane). Staging the scaled plane instead cost 1.6-1.8x the forward pass on Inception's
    // 8x8 planes (AVX2): a store and a reload per value, the reloads misaligned across
    // just-stored vectors, which wait for the stores to reach L1.
    bool strip3_scaled() const noexcept { return strip3_ && p_.plane_rdiv_inner_rows; }

    // The end of a tensor of planes (input and output planes have n_ elements alike).
    template <class E>
    const E* tensor_end(const E* t) const noexcept { return t + p_.input_shape[0] * p_.input_shape[1] * n_; }

    // plane()'s buffer of horizontal sums (plane() zeroes the rows it reads and does not
    // fill), starting on a 64-byte line: rows whose width is a multiple of 16 floats then
    // load and store whole lines.
    line_buffer<T> sums_buffer() const {
        return line_buffer<T>(strip3_ || vfirst_ ? 0 : static_cast<std::size_t>((H_ + kh_ - 1) * W_ + 2 * L));  // none there
    }

    // backward's plane of scaled gradients, between zeros: the horizontal pass's vector reads
    // past either end stay inside this buffer (masked lanes, so the zeros are never summed).
    // (The margin a whole number of lines, so that the plane starts on one.)
    struct scaled_plane {
        index_t margin, size;
        line_buffer<T> buf;
        explicit scaled_plane(const same_kernel& k)
            : margin((k.kw_ + L + line() - 1) / line() * line()), size(k.n_ + 2 * margin),
              buf(static_cast<std::size_t>(size)) {
            std::fill(lo(), plane(), T(0));
            std::fill(plane() + k.n_, hi(), T(0));
        }
        static constexpr index_t line() noexcept { return 64 / static_cast<index_t>(sizeof(T)); }
        T* lo() const noexcept { return buf.get(); }
        T* plane() const noexcept { return buf.get() + margin; }
        T* hi() const noexcept { return buf.get() + size; }
    };

    // Input rows [r0, r1) of one plane's gradients: the rows of g they read, and e rows either
    // side (which masked lanes touch), times 1 / divisor into the scaled plane, then summed
    // over the flipped windows. Each value is scaled alike in a vector or alone, so the bits
    // do not depend on the rows staged.
    void backward_rows(const T* g, T* gi, T* buf, const scaled_plane& scaled, index_t r0, index_t r1) const {
        const index_t e = (kw_ + L) / W_ + 1;
        const bool whole = m_ == n_;  // the horizontal pass reads the whole plane
        const index_t s0 = whole ? 0 : std::max<index_t>(0, r0 - pt_ - e);
        const index_t s1 = whole ? H_ : std::min(H_, r1 - pt_ + kh_ - 1 + e);
        T* const gs = scaled.plane();
        index_t i = s0 * W_;
        const index_t end = s1 * W_;
        // (+ 0: see plus_zero.)
        for (; i + L <= end; i += L) scale_plus_zero(V::load(g + i), V::load(rgrid_ + i)).store(gs + i);
        for (; i < end; ++i) gs[i] = g[i] * rgrid_[i] + T(0);
        if (strip3_)
            strip3_rows(scaled.lo(), scaled.hi(), gs, gi, r0, r1);
        else if (vfirst_)  // (its pairs start at an even row, one row before r0 at most: e >= 1)
            vfirst(gs, gi, r0, r1);
        else
            plane(scaled.lo(), scaled.hi(), gs, gi, buf, r0, r1);
    }

    // flat3() reads and writes M through the masked forms of convert.hpp.
    template <class E = M>
    static constexpr bool flat3_storage() noexcept { return std::is_same<E, T>::value || AVGPOOL_MASKED_HALF; }

    static constexpr bool narrow8_supported() noexcept {
#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
        return std::is_same<T, float>::value && L == 16;
#else
        return false;
#endif
    }

    // 3x3 pad 1 on planes 8 wide with an even number of rows (Inception's 8x8 branch pools),
    // float with AVX-512: a vector is two rows, so the plane stays in registers. The rows
    // above and below are the neighbouring vectors' halves (one alignr each), the columns left
    // and right one lane across the pair (alignr with the lanes of column 0 or 7 zeroed), so
    // a plane costs 3 shuffles per vector against 10 loads through the general path, whose
    // per-plane set-up also cost as much as the sums on 64-value planes. The window sums of
    // the general path in another order (vertical first), within the accuracy bound; NaN and
    // Inf stay in their windows (zeroed lanes, not multiplied). Scaled (backward): each value
    // times its 1 / divisor as it is loaded, then summed over the (symmetric) window.
    template <bool Scaled, class E>
    void narrow8(const E* src, E* dst, index_t count) const {
#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
        if constexpr (narrow8_supported()) {
            const index_t nv = H_ / 2;  // vectors per plane
            const bool average = !Scaled && op_ == pool_op::average;
            const __m512 zero = _mm512_setzero_ps();
            // maskz with every lane: the plain alignr intrinsic trips GCC 12's
            // -Wmaybe-uninitialized inside its own header; it is the same instruction.
            const __mmask16 all = 0xffff, not_first = 0xfefe, not_last = 0x7f7f;  // columns 1-7, 0-6
            // Lanes shifted by `by` across the pair (lo, hi): alignr of hi:lo, lanes outside `keep` zero.
            auto across = [](__mmask16 keep, __m512 hi, __m512 lo, auto by) {
                return _mm512_castsi512_ps(
                    _mm512_maskz_alignr_epi32(keep, _mm512_castps_si512(hi), _mm512_castps_si512(lo), decltype(by)::value));
            };
            using half = std::integral_constant<int, 8>;
            // The vertical sum of vector `cur` (rows above + rows + rows below).
            auto vsum = [&](__m512 prev, __m512 cur, __m512 next) {
                return _mm512_add_ps(_mm512_add_ps(across(all, cur, prev, half{}), cur), across(all, next, cur, half{}));
            };
            for (index_t c = 0; c < count; ++c) {
                const E* x = src + c * n_;
                E* y = dst + c * n_;
                auto load = [&](index_t j) {
                    const __m512 v = vload(x + 16 * j).v;
                    return Scaled ? _mm512_fmadd_ps(v, _mm512_loadu_ps(rgrid_ + 16 * j), zero) : v;  // (+ 0: plus_zero)
                };
                __m512 prev = zero, cur = load(0), next = nv > 1 ? load(1) : zero;
                __m512 vprev = zero, vcur = vsum(prev, cur, next);
                for (index_t j = 0; j < nv; ++j) {
                    __m512 vnext = zero;  // vertical sums of vector j + 1 (zero past the plane)
                    if (j + 1 < nv) {
                        prev = cur;
                        cur = next;
                        next = j + 2 < nv ? load(j + 2) : zero;
                        vnext = vsum(prev, cur, next);
                    }
                    const __m512 left = across(not_first, vcur, vprev, std::integral_constant<int, 15>{});
                    const __m512 right = across(not_last, vnext, vcur, std::integral_constant<int, 1>{});
                    __m512 acc = _mm512_add_ps(_mm512_add_ps(left, vcur), right);
                    // (+ 0: see plus_zero; backward's scaled shares already are.)
                    if (average) {
                        acc = _mm512_fmadd_ps(acc, _mm512_loadu_ps(rgrid_ + 16 * j), zero);
                    } else if constexpr (!Scaled) {
                        acc = _mm512_add_ps(acc, zero);
                    }
                    vstore(V{acc}, y + 16 * j);
                    vprev = vcur;
                    vcur = vnext;
                }
            }
            return;
        }
#endif
        (void)src, (void)dst, (void)count;
    }

    // 3x3 pad 1 on planes 2 to 63 wide (Inception's 35x35, 17x17; ResNet-style 56x56), float
    // with AVX-512 (16-bit storage too, converted as loaded and stored), one plane at a time as a flat array of vectors with every intermediate in
    // registers. The general path stores the horizontal sums and reads them back three times,
    // and reads each input and mask vector three times: on AMD Zen 4 (one 64-byte store per
    // two cycles, misaligned loads a third slower) those L1 accesses, not memory, set its speed.
    // Here, per vector: one input load, one output store, two 16-bit masks and the reciprocals.
    //  - horizontal: h = (left + x) + right, left and right the input vector shifted a lane
    //    across its neighbours (alignr), zeroed where they would wrap into the row before or
    //    after or past the plane (so h is 0 past the plane);
    //  - vertical: out = (h[p - W] + h) + h[p + W], read from the window of horizontal-sum
    //    vectors kept in registers (W = 16 Q + r: a two-vector permute by r lanes), vectors
    //    outside the plane 0.
    // The same operations in the same order as the general path (zeros where it ANDs taps
    // away, the same reciprocal), so the results are bit-identical to it. Scaled (backward):
    // each value times its 1 / divisor as it is loaded, no multiply at the end.
    template <bool Scaled, class E>
    void flat3(const E* src, E* dst, index_t count) const {
#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
        if constexpr (narrow8_supported() && flat3_storage<E>()) {
            switch (W_ / 16) {
                case 0: return flat3_q<0, Scaled, E>(src, dst, count);
                case 1: return flat3_q<1, Scaled, E>(src, dst, count);
                case 2: return flat3_q<2, Scaled, E>(src, dst, count);
                default: return flat3_q<3, Scaled, E>(src, dst, count);
            }
        }
#endif
        (void)src, (void)dst, (void)count;
    }

#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
    template <int Q, bool Scaled, class E>
    void flat3_q(const E* src, E* dst, index_t count) const {
        if constexpr (narrow8_supported()) {
            const index_t n = n_, nv = (n + 15) / 16;
            const index_t r = W_ - 16 * Q;
            // h[p - W] from the concatenation (H[j - Q - 1], H[j - Q]): lane l is element
            // 16 + l - r; h[p + W] from (H[j + Q], H[j + Q + 1]): element l + r.
            const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            const __m512i up_idx = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(16 - r)));
            const __m512i down_idx = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(r)));
            const bool average = !Scaled && op_ == pool_op::average;
            const T* const rgrid = rgrid_;
            const std::uint16_t* const km = p_.same_kmask.data();
            const __mmask16 tail = static_cast<__mmask16>(n % 16 == 0 ? 0xffffu : (1u << (n % 16)) - 1u);
            constexpr int NH = 2 * Q + 3;  // H[j - Q - 1] .. H[j + Q + 1]
            const __m512 zero = _mm512_setzero_ps();
            for (index_t c = 0; c < count; ++c) {
                const E* x = src + c * n;
                E* y = dst + c * n;
                // Input vector t (zeros past the plane; the last one read masked).
                auto load = [&](index_t t) AVGPOOL_INLINE_LAMBDA {
                    if (t >= nv) return zero;
                    __m512 v = t + 1 < nv ? static_cast<__m512>(vload(x + 16 * t).v) : masked_load(tail, x + 16 * t);
                    if constexpr (Scaled) {
                        v = _mm512_fmadd_ps(v, t + 1 < nv ? _mm512_loadu_ps(rgrid + 16 * t) : _mm512_maskz_loadu_ps(tail, rgrid + 16 * t),
                                            zero);  // (+ 0: plus_zero)
                    }
                    return v;
                };
                __m512 xp = zero, xc = zero, xn = load(0);  // inputs t - 1, t, t + 1
                // Horizontal sums of vector t from (xp, xc, xn).
                auto hsum = [&](index_t t) AVGPOOL_INLINE_LAMBDA {
                    if (t >= nv) return zero;
                    const __mmask16 ml = km[2 * t], mr = km[2 * t + 1];
                    const __m512 left = _mm512_castsi512_ps(
                        _mm512_maskz_alignr_epi32(ml, _mm512_castps_si512(xc), _mm512_castps_si512(xp), 15));
                    const __m512 right = _mm512_castsi512_ps(
                        _mm512_maskz_alignr_epi32(mr, _mm512_castps_si512(xn), _mm512_castps_si512(xc), 1));
                    return _mm512_add_ps(_mm512_add_ps(left, xc), right);
                };
                __m512 h[NH];
                for (int i = 0; i < NH; ++i) h[i] = zero;
                // Fill the window for output vector 0: H[-Q-1 .. Q+1]; H[t] needs inputs up to t + 1.
                for (index_t t = 0; t <= Q + 1; ++t) {
                    xp = xc;
                    xc = xn;
                    xn = load(t + 1);
                    h[Q + 1 + t] = hsum(t);
                }
                for (index_t j = 0; j < nv; ++j) {
                    const __m512 up = _mm512_permutex2var_ps(h[0], up_idx, h[1]);
                    const __m512 down = _mm512_permutex2var_ps(h[NH - 2], down_idx, h[NH - 1]);
                    __m512 acc = _mm512_add_ps(_mm512_add_ps(up, h[Q + 1]), down);
                    if (j + 1 < nv) {
                        // (+ 0: see plus_zero; backward's scaled shares already are.)
                        if (average) {
                            acc = _mm512_fmadd_ps(acc, _mm512_loadu_ps(rgrid + 16 * j), zero);
                        } else if constexpr (!Scaled) {
                            acc = _mm512_add_ps(acc, zero);
                        }
                        vstore(V{acc}, y + 16 * j);
                    } else {
                        if (average) {
                            acc = _mm512_fmadd_ps(acc, _mm512_maskz_loadu_ps(tail, rgrid + 16 * j), zero);
                        } else if constexpr (!Scaled) {
                            acc = _mm512_add_ps(acc, zero);
                        }
                        masked_store(y + 16 * j, tail, acc);
                    }
                    // Slide: H[j + Q + 2] enters (inputs up to j + Q + 3).
                    for (int i = 0; i + 1 < NH; ++i) h[i] = h[i + 1];
                    const index_t t = j + Q + 2;
                    xp = xc;
                    xc = xn;
                    xn = load(t + 1);
                    h[NH - 1] = hsum(t);
                }
            }
        }
    }
#endif

    // The other kernels (5x5, 7x7, 1x7, 3x3 pad 0, ...: pad_left (kw - 1) / 2 or kw / 2), float
    // with AVX-512 (16-bit storage too): vertical first, then horizontal in registers. The
    // general path's horizontal pass makes kw loads per vector, misaligned and so mostly split
    // across two lines, and stores the sums for a second pass; a 7x7 pool on 112x112 planes ran
    // at 3x its 3x3 (kernel-size independence). Here, per pair of output rows (2 i, 2 i + 1),
    // vector by vector along the row:
    //  - vertical: the aligned input rows 2 i + 1 - pt .. 2 i + kh - 1 - pt summed once for
    //    both rows, plus row 2 i - pt for the first and row 2 i + kh - pt for the second (rows
    //    outside the plane are zeros), so kh + 1 loads serve two outputs;
    //  - horizontal: the kw taps are lane shifts (valignd) of the vertical sums of the vector
    //    and its neighbours, zeros past either end of the row (the last vector's lanes past the
    //    row are read masked, so they are zeros), summed as a tree; from kw = 4, the shifts of
    //    pair sums v[j] + v[j + 1] instead, computed once a vector.
    // Per pair of 7x7 output vectors: 8 loads, 7 + 2 x 4 additions and 2 x 4 shifts. The general
    // path's: 14 loads of inputs, most split across two lines, 12 + 7 additions, 2 stores and 8
    // reloads of the horizontal sums. A 112x112 plane hot in L2: 1.8-1.9 us against 5.1 (AMD Zen 5).
    // Pairs start at even rows whatever the rows asked for, so each output's sum takes the same
    // operations in the same order in run() and in any split of run_rows(). Another order of
    // summation than plane()'s, within the accuracy bound; NaN and Inf stay in their windows.
    template <class E>
    void vfirst(const E* src, E* dst, index_t r0, index_t r1) const {
#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
        if constexpr (narrow8_supported() && flat3_storage<E>()) {
            // (kw, pad_left): pad (kw - 1) / 2 (same_upper, odd kernels) or kw / 2 (same_lower).
            switch (2 * kw_ + (pl_ == (kw_ - 1) / 2 ? 0 : 1)) {
                case 2: return vf_rows<1, 0>(src, dst, r0, r1);
                case 4: return vf_rows<2, 0>(src, dst, r0, r1);
                case 5: return vf_rows<2, 1>(src, dst, r0, r1);
                case 6: return vf_rows<3, 1>(src, dst, r0, r1);
                case 8: return vf_rows<4, 1>(src, dst, r0, r1);
                case 9: return vf_rows<4, 2>(src, dst, r0, r1);
                case 10: return vf_rows<5, 2>(src, dst, r0, r1);
                case 12: return vf_rows<6, 2>(src, dst, r0, r1);
                case 13: return vf_rows<6, 3>(src, dst, r0, r1);
                default: return vf_rows<7, 3>(src, dst, r0, r1);
            }
        }
#endif
        (void)src, (void)dst, (void)r0, (void)r1;
    }

#if AVGPOOL_HAS_XSIMD && defined(__AVX512F__)
    // Taps A .. B - 1 of the vector c (p before it, n after it), as a tree.
    template <int PL, int A, int B>
    static AVGPOOL_ALWAYS_INLINE __m512 vf_htree(__m512 p, __m512 c, __m512 n) noexcept {
        if constexpr (B - A == 1) {
            return vf_at<A - PL>(p, c, n);
        } else {
            constexpr int mid = A + (B - A) / 2;
            return _mm512_add_ps(vf_htree<PL, A, mid>(p, c, n), vf_htree<PL, mid, B>(p, c, n));
        }
    }

    // Lanes shifted by `off` (-16 < off < 16) across (p, c, n): element j + off for lane j.
    template <int off>
    static AVGPOOL_ALWAYS_INLINE __m512 vf_at(__m512 p, __m512 c, __m512 n) noexcept {
        if constexpr (off < 0) {
            return lane_shift<16 + off>(p, c);
        } else if constexpr (off == 0) {
            return c;
        } else {
            return lane_shift<off>(c, n);
        }
    }

    // Wide kernels (kw >= 4) from the pair sums a[j] = v[j] + v[j + 1]: terms A .. B - 1 of
    // (tap -PL if kw is odd), then pairs at -PL + kw % 2, + 2, ..., as a tree.
    template <int KW, int PL, int A, int B>
    static AVGPOOL_ALWAYS_INLINE __m512 vf_hpairs(__m512 p, __m512 c, __m512 n, __m512 ap, __m512 ac, __m512 an) noexcept {
        if constexpr (B - A == 1) {
            if constexpr (KW % 2 == 1 && A == 0) {
                return vf_at<-PL>(p, c, n);
            } else {
                return vf_at<-PL + KW % 2 + 2 * (A - KW % 2)>(ap, ac, an);
            }
        } else {
            constexpr int mid = A + (B - A) / 2;
            return _mm512_add_ps(vf_hpairs<KW, PL, A, mid>(p, c, n, ap, ac, an), vf_hpairs<KW, PL, mid, B>(p, c, n, ap, ac, an));
        }
    }

    template <int KW, int PL, class E>
    AVGPOOL_NOINLINE void vf_rows(const E* src, E* dst, index_t r0, index_t r1) const {
        const index_t H = H_, W = W_, kh = kh_, pt = pt_;
        for (index_t r = r0 - r0 % 2; r < r1; r += 2) {
            E* const y0 = r >= r0 ? dst + r * W : nullptr;
            E* const y1 = r + 1 < r1 ? dst + (r + 1) * W : nullptr;
            const index_t top = r - pt;  // the first input row of output row r's window
            if (kh == KW && top >= 0 && top + kh < H && y0 != nullptr && y1 != nullptr) {
                // Most pairs: square kernels' row count known, every row inside the plane.
                const E* const base = src + top * W;
                vf_pair<KW, PL, KW, false>([base, W](index_t t) AVGPOOL_INLINE_LAMBDA { return base + t * W; }, y0, y1, r);
            } else {
                vf_pair<KW, PL, 0, true>(
                    [src, W, H, top](index_t t) AVGPOOL_INLINE_LAMBDA -> const E* {
                        return top + t >= 0 && top + t < H ? src + (top + t) * W : nullptr;
                    },
                    y0, y1, r);
            }
        }
    }

    // Output rows r (into y0) and r + 1 (into y1). KH: kh when known (0: not). General: y0 or
    // y1 null (not written) and row(t), input row top + t, null outside the plane. Both forms
    // add the rows in the same order (row 1 .. kh - 1 in turn), so the same bits.
    template <int KW, int PL, int KH, bool General, class Row, class E>
    AVGPOOL_ALWAYS_INLINE void vf_pair(Row row, E* y0, E* y1, index_t r) const {
        const index_t W = W_, kh = KH > 0 ? KH : kh_, nv = (W + 15) / 16;
        const __mmask16 tail = static_cast<__mmask16>(W % 16 == 0 ? 0xffffu : (1u << (W % 16)) - 1u);
        const bool average = op_ == pool_op::average;
        const T* const g0 = rgrid_ + r * W;  // (g0 + W read only for y1, a row of the plane)
        const __m512 zero = _mm512_setzero_ps();
        // Input row t's vector at o: a whole one, or (tail_v) the row's last, read masked.
        auto ld = [&](index_t t, index_t o, auto tail_v) AVGPOOL_INLINE_LAMBDA -> __m512 {
            const E* const p = row(t);
            if constexpr (General) {
                if (p == nullptr) return zero;
            }
            if constexpr (decltype(tail_v)::value) {
                return masked_load(tail, p + o);
            } else {
                return static_cast<__m512>(vload(p + o).v);
            }
        };
        // The vertical sums of both rows at o (f: row r's, s: row r + 1's).
        auto vert = [&](index_t o, auto tail_v, __m512& f, __m512& s) AVGPOOL_INLINE_LAMBDA {
            if (kh == 1) {
                f = ld(0, o, tail_v);
                s = ld(1, o, tail_v);
                return;
            }
            __m512 shared = ld(1, o, tail_v);
            for (index_t t = 2; t < kh; ++t) shared = _mm512_add_ps(shared, ld(t, o, tail_v));
            f = _mm512_add_ps(ld(0, o, tail_v), shared);
            s = _mm512_add_ps(shared, ld(kh, o, tail_v));
        };
        // One output vector from its sums (acc), scaled (+ 0: see plus_zero).
        auto put = [&](E* y, const T* g, index_t o, __m512 acc, auto tail_v) AVGPOOL_INLINE_LAMBDA {
            constexpr bool last = decltype(tail_v)::value;
            if (average) {
                acc = _mm512_fmadd_ps(acc, last ? _mm512_maskz_loadu_ps(tail, g + o) : _mm512_loadu_ps(g + o), zero);
            } else {
                acc = _mm512_add_ps(acc, zero);
            }
            if constexpr (last) {
                masked_store(y + o, tail, acc);
            } else {
                vstore(V{acc}, y + o);
            }
        };
        // Wide kernels share pair sums between neighbouring taps (kw = 7: 4 lane shifts and 4
        // additions a vector instead of 6 and 6); the pairs of a vector need the next one's
        // first lanes, so the vertical sums run two vectors ahead.
        constexpr bool pairs = KW >= 4;
        const std::true_type masked{};
        const std::false_type whole{};
        // Vertical sums of vectors v - 1, v, v + 1 (p, c, n) and pair sums of v - 1, v (ap, ac),
        // for row r (f) and row r + 1 (s); zeros before the row.
        __m512 fp = zero, sp = zero, fc, sc, fn = zero, sn = zero;
        if (nv > 1) {
            vert(0, whole, fc, sc);
        } else {
            vert(0, masked, fc, sc);
        }
        if (nv > 2) {
            vert(16, whole, fn, sn);
        } else if (nv == 2) {
            vert(16, masked, fn, sn);
        }
        __m512 fap = zero, sap = zero, fac = zero, sac = zero;
        if constexpr (pairs) {
            fap = _mm512_add_ps(zero, lane_shift<1>(zero, fc));
            sap = _mm512_add_ps(zero, lane_shift<1>(zero, sc));
            fac = _mm512_add_ps(fc, lane_shift<1>(fc, fn));
            sac = _mm512_add_ps(sc, lane_shift<1>(sc, sn));
        }
        index_t o = 0;
        // Output vector v (at o) given vector v + 2's vertical sums, then slide.
        auto step = [&](__m512 fnn, __m512 snn, auto tail_v) AVGPOOL_INLINE_LAMBDA {
            if constexpr (pairs) {
                const __m512 fan = _mm512_add_ps(fn, lane_shift<1>(fn, fnn)), san = _mm512_add_ps(sn, lane_shift<1>(sn, snn));
                constexpr int terms = KW % 2 + KW / 2;
                if (!General || y0 != nullptr) put(y0, g0, o, vf_hpairs<KW, PL, 0, terms>(fp, fc, fn, fap, fac, fan), tail_v);
                if (!General || y1 != nullptr) put(y1, g0 + W, o, vf_hpairs<KW, PL, 0, terms>(sp, sc, sn, sap, sac, san), tail_v);
                fap = fac;
                fac = fan;
                sap = sac;
                sac = san;
            } else {
                if (!General || y0 != nullptr) put(y0, g0, o, vf_htree<PL, 0, KW>(fp, fc, fn), tail_v);
                if (!General || y1 != nullptr) put(y1, g0 + W, o, vf_htree<PL, 0, KW>(sp, sc, sn), tail_v);
            }
            fp = fc;
            fc = fn;
            fn = fnn;
            sp = sc;
            sc = sn;
            sn = snn;
            o += 16;
        };
        index_t v = 0;
        for (; v + 3 < nv; ++v) {
            __m512 fnn, snn;
            vert(o + 32, whole, fnn, snn);
            step(fnn, snn, whole);
        }
        if (v + 2 < nv) {
            __m512 fnn, snn;
            vert(o + 32, masked, fnn, snn);
            step(fnn, snn, whole);
            ++v;
        }
        if (v + 1 < nv) step(zero, zero, whole);
        step(zero, zero, masked);
    }
#endif

    // 3x3 pad 1 on planes at least a vector wide (AVX2 and SSE builds, and AVX-512 past flat3()'s
    // 63 columns): one strip of a vector's width at a time, walked down the plane with the
    // horizontal sums of three rows in registers. The plane path stores every horizontal sum and
    // reads it back three times, and reads its masks for every vector: on AMD Zen 3 with AVX2
    // it ran at 2-2.5x a memcpy of the tensor. Here, per output vector: the three loads of the
    // new row's taps, one reciprocal, one store; masks only on the strips at either edge of the
    // row (loaded once per strip), whose outer tap would read into the row before or after. The
    // last strip starts at W - L, recomputing the lanes it shares with the one before to the
    // same values. The same operations in the same order as the plane path (left + centre, then
    // + right; row above + row, then + row below; then the reciprocal).
    // Scaled (backward, where strip3_scaled()): src is grad_out, each tap times its output's
    // 1 / divisor as loaded (the reciprocals of the strip's first, inner and last rows kept
    // in registers), and no multiply at the end: the values and order of the scaled plane
    // that backward_rows() stages, so the same bits.
    // Planes [0, count) from src: in blocks of up to 8 KiB of input, strip by strip across the
    // block (small planes: the per-strip set-up, masks and reciprocals, once per block).
    template <bool Scaled = false, class E>
    void strip3(const E* in, const E* in_end, const E* src, E* dst, index_t count) const {
        const index_t W = W_, n = n_;
        const index_t block = std::max(index_t(1), index_t(8192 / sizeof(E)) / n);
        for (index_t b = 0; b < count; b += block) {
            const index_t nb = std::min(block, count - b);
            for (index_t c0 = 0; c0 < W; c0 += L) {
                const index_t c = std::min(c0, W - L);
                if (c == 0 || c + L + 1 > W)
                    strip3_column<true, Scaled>(in, in_end, src + b * n, dst + b * n, nb, c);
                else
                    strip3_column<false, Scaled>(in, in_end, src + b * n, dst + b * n, nb, c);
            }
        }
    }

    // Output rows [r0, r1) of the one plane at src, strip by strip (the row splits' strip3()).
    template <bool Scaled = false, class E>
    void strip3_rows(const E* in, const E* in_end, const E* src, E* dst, index_t r0, index_t r1) const {
        for (index_t c0 = 0; c0 < W_; c0 += L) {
            const index_t c = std::min(c0, W_ - L);
            if (c == 0 || c + L + 1 > W_)
                strip3_column<true, Scaled>(in, in_end, src, dst, 1, c, r0, r1);
            else
                strip3_column<false, Scaled>(in, in_end, src, dst, 1, c, r0, r1);
        }
    }

    // Scaled strip3_column()'s reciprocals for the taps of the strip at column c: [3 k + j] for
    // the row of kind k (0 the first, 1 an inner one, 2 the last) and tap j, lane l that of
    // column c + l + j - 1. Lanes whose column is outside the row hold a neighbour's (they
    // are masked), or 1 before the plane (the grid's padding covers reads past its end).
    struct strip3_recs {
        V v[9];
        strip3_recs(const same_kernel& k, index_t c) {
            const index_t rows[3] = {0, 1, k.H_ - 1};
            for (int kind = 0; kind < 3; ++kind)
                for (int j = 0; j < 3; ++j) {
                    const index_t at = rows[kind] * k.W_ + c + j - 1;
                    if (at >= 0) v[3 * kind + j] = V::load(k.rgrid_ + at);
                }
            if (c == 0) {  // lane 0 of tap 0 of the first row: before the plane
                alignas(64) T tmp[L];
                tmp[0] = T(1);
                std::copy_n(k.rgrid_, L - 1, tmp + 1);
                v[0] = V::load(tmp);
            }
        }
    };

    // Output rows [r0, r1) of the strip at column c (r1 = -1: to the plane's last row).
    template <bool Edge, bool Scaled, class E>
    AVGPOOL_NOINLINE void strip3_column(const E* in, const E* in_end, const E* src0, E* dst0, index_t count,
                                        index_t c, index_t r0 = 0, index_t r1 = -1) const {
        const index_t H = H_, W = W_, n = n_;
        if (r1 < 0) r1 = H;
        const bool average = !Scaled && op_ == pool_op::average;
        const V zero = V::splat(T(0));
        // Taps 0 and 2 of the strip's lanes (the masks describe row 0 of the plane or a row).
        const V ml = V::load(masks_ + c), mr = V::load(masks_ + 2 * stride_ + c);
        const T* const g0 = rgrid_ + c;
        // The rows between the first and the last share their reciprocals (checked with the plan).
        const bool hoist = Scaled || p_.plane_rdiv_inner_rows;
        const V first = V::load(g0), inner = hoist ? V::load(g0 + W) : zero, last = V::load(g0 + (H - 1) * W);
        // Scaled: the taps' reciprocals (set up only then).
        struct none {
            none(const same_kernel&, index_t) {}
        };
        const std::conditional_t<Scaled, strip3_recs, none> recs(*this, c);
        // Rows r with r + 2 < H: the row two below exists.
        const index_t body_end = std::min(r1, H - 2);
        for (index_t k = 0; k < count; ++k) {
            const E* const src = src0 + k * n;
            const index_t before = src - in, after = in_end - src;  // readable around src
            // Rows whose vector reads (tap 0 of lane 0 to tap 2 of the last lane) stay inside
            // [in, in_end): all but, at most, the first row of the tensor and its last.
            const index_t r_lo = Edge && c - 1 < -before ? 1 : 0;
            const index_t r_hi = Edge && (H - 1) * W + c + L + 1 > after ? H - 1 : H;
            // Checked: the plane has such a row (the tensor's first or last plane), so each row
            // is tested. The other planes' loop has no test, and no call around which the
            // compiler spilled the masks (8x8 planes, AVX2: 286 -> 215 instructions a plane).
            auto one_plane = [&](auto checked) AVGPOOL_INLINE_LAMBDA {
                // Horizontal sums of row r over the strip's columns (Scaled: the row's kind, 0-2).
                auto hrow = [&](index_t r, int kind = 0) AVGPOOL_INLINE_LAMBDA {
                    const E* q = src + (r * W + c - 1);
                    auto tap = [&](int j) AVGPOOL_INLINE_LAMBDA {
                        if constexpr (Scaled) {
                            return scale_plus_zero(vload(q + j), recs.v[3 * kind + j]);
                        } else {
                            return vload(q + j);
                        }
                    };
                    if constexpr (!Edge) {
                        return (tap(0) + tap(1)) + tap(2);
                    } else {
                        if constexpr (decltype(checked)::value) {
                            if (r < r_lo || r >= r_hi) return strip3_lanes<Scaled>(src, r, c);
                        }
                        return (tap(0).bit_and(ml) + tap(1)) + tap(2).bit_and(mr);
                    }
                };
                // (Scaled: H >= 3, as hoist needs.)
                auto kind_of = [H](index_t r) { return r == 0 ? 0 : r == H - 1 ? 2 : 1; };
                V hu = r0 > 0 ? hrow(r0 - 1, kind_of(r0 - 1)) : zero, hm = hrow(r0, kind_of(r0)),
                  hd = r0 + 1 < H ? hrow(r0 + 1, kind_of(r0 + 1)) : zero;
                E* o = dst0 + k * n + r0 * W + c;
                // Output row r with reciprocals rec, then the window slides down a row.
                auto emit = [&](V rec) AVGPOOL_INLINE_LAMBDA {
                    const V acc = (hu + hm) + hd;
                    vstore(average ? scale_plus_zero(acc, rec) : plus_zero(acc), o);
                    o += W;
                    hu = hm;
                    hm = hd;
                };
                index_t r = r0;
                if (hoist) {  // (H >= 3)
                    if (r == 0) {
                        emit(first);
                        hd = hrow(2, kind_of(2));
                        ++r;
                    }
                    // Scaled: row r + 2 inner (kind 1) up to row H - 4, then the last row (kind 2).
                    for (const index_t inner_end = Scaled ? std::min(body_end, H - 3) : body_end; r < inner_end; ++r) {
                        emit(inner);
                        hd = hrow(r + 2, 1);
                    }
                    if constexpr (Scaled) {
                        for (; r < body_end; ++r) {
                            emit(inner);
                            hd = hrow(r + 2, 2);
                        }
                    }
                    for (; r < r1; ++r) {
                        emit(r == H - 1 ? last : inner);
                        hd = zero;
                    }
                    return;
                }
                if constexpr (!Scaled) {
                    const T* g = g0 + r * W;
                    for (; r < body_end; ++r, g += W) {
                        emit(V::load(g));
                        hd = hrow(r + 2);
                    }
                    for (; r < r1; ++r, g += W) {
                        emit(V::load(g));
                        hd = r + 2 < H ? hrow(r + 2) : zero;
                    }
                }
            };
            if (Edge && (r_lo > 0 || r_hi < H)) {
                one_plane(std::true_type{});
            } else {
                one_plane(std::false_type{});
            }
        }
    }

    // strip3()'s horizontal sums of row r at the very start or end of the tensor, lane by lane,
    // reading only valid taps (a dropped tap adds +0, as the AND does; Scaled: each tap
    // times its reciprocal, + 0, as the vector path).
    template <bool Scaled, class E>
    AVGPOOL_NOINLINE V strip3_lanes(const E* src, index_t r, index_t c) const {
        T tmp[L];
        auto tap = [&](index_t col) {
            const T v = sload(src[r * W_ + col]);
            if constexpr (Scaled) {
                return v * rgrid_[r * W_ + col] + T(0);
            } else {
                return v;
            }
        };
        for (index_t l = 0; l < L; ++l) {
            const index_t col = c + l;
            T acc = col > 0 ? tap(col - 1) : T(0);
            acc = acc + tap(col);
            tmp[l] = acc + (col + 1 < W_ ? tap(col + 1) : T(0));
        }
        return V::load(tmp);
    }

    // Output rows [r0, r1) of one plane: src inside [in, in_end), which bounds the vector
    // reads; no write reaches past row r1 - 1 (another thread may own the rows after).
    template <class E>
    void plane(const E* in, const E* in_end, const E* src, E* dst, T* buf, index_t r0, index_t r1) const {
        // The kernel width fixed once per plane, not per row (a row's call through the switch
        // cost 5% of a 56x56 5x5 plane).
        switch (kw_) {
            case 1: plane_k<1>(in, in_end, src, dst, buf, r0, r1); break;
            case 2: plane_k<2>(in, in_end, src, dst, buf, r0, r1); break;
            case 3: plane_k<3>(in, in_end, src, dst, buf, r0, r1); break;
            case 4: plane_k<4>(in, in_end, src, dst, buf, r0, r1); break;
            case 5: plane_k<5>(in, in_end, src, dst, buf, r0, r1); break;
            case 6: plane_k<6>(in, in_end, src, dst, buf, r0, r1); break;
            default: plane_k<7>(in, in_end, src, dst, buf, r0, r1); break;
        }
    }

    template <int KW, class E>
    void plane_k(const E* in, const E* in_end, const E* src, E* dst, T* buf, index_t r0, index_t r1) const {
        T* hs = buf + pt_ * W_;
        const index_t limit = r1 * W_;
        // The input rows that output rows [r0, r1) read (the others are never summed); a
        // whole-plane segment (its masks describe the plane) sums them all.
        const bool whole = m_ == n_;
        const index_t x0 = whole ? 0 : std::max<index_t>(0, r0 - pt_);
        const index_t x1 = whole ? H_ : std::min(H_, r1 - pt_ + kh_ - 1);
        // Zeros in the buffer rows these outputs read that no input row fills (the padding),
        // and in the row after them, which the last vector's spilled lanes read.
        const index_t rows = H_ + kh_ - 1;
        if (r0 < pt_ + x0) std::fill(buf + r0 * W_, buf + (pt_ + x0) * W_, T(0));
        const index_t z1 = std::min(rows, r1 + kh_);
        if (pt_ + x1 < z1) std::fill(buf + (pt_ + x1) * W_, buf + z1 * W_, T(0));
        if (r1 + kh_ > rows) std::fill(buf + rows * W_, buf + rows * W_ + 2 * L, T(0));
        if (whole) {
            hseg<KW>(in, in_end, src, hs);
            vertical(buf, dst, r0 * W_, limit, limit);
            return;
        }
        // Row segments: each output row right after its last input row, so the horizontal
        // sums it reads are still in L1 (a 112x112 plane's sums are not). Rows at least a
        // vector wide go in pairs (kernels of 3 or more rows): two neighbouring output rows
        // share kh - 1 rows of sums, added once (the k = 7 pool does 7 + 4 additions per
        // output instead of 7 + 6: kernel-size independence).
        const index_t step = kh_ >= 3 && W_ >= L ? 2 : 1;
        index_t done = r0;  // output rows written
        for (index_t r = x0; r < x1; ++r) {
            hseg<KW>(in, in_end, src + r * W_, hs + r * W_);
            const index_t ready = std::min(r1, pt_ + r + 2 - kh_);  // rows h with h + kh - 1 <= pt + r
            const index_t upto = step == 2 ? ready - ready % 2 : ready;  // whole pairs
            if (upto > done) {
                rows_out(buf, dst, done, upto, step, limit);
                done = upto;
            }
        }
        if (done < r1) rows_out(buf, dst, done, r1, step, limit);
    }

    // Output rows [r0, r1). Step 2: the rows of each pair (2 i, 2 i + 1) through vpair, whether
    // or not both are in the range, so each row's sums are added in the same order whatever
    // the split; a plane's odd last row alone.
    template <class E>
    void rows_out(const T* hs, E* dst, index_t r0, index_t r1, index_t step, index_t limit) const {
        if (step == 2) {
            if (r0 % 2 == 1 && r0 < r1) {
                vpair_dispatch<2>(hs, dst, r0 - 1);  // the second of its pair
                ++r0;
            }
            for (; r0 + 2 <= r1; r0 += 2) vpair_dispatch<3>(hs, dst, r0);
            if (r0 == r1) return;
            if (r0 + 1 < H_ || H_ % 2 == 0) {
                vpair_dispatch<1>(hs, dst, r0);  // the first of its pair
                return;
            }
        }
        vertical(hs, dst, r0 * W_, r1 * W_, limit);
    }

    // vpair<kh, Which>.
    template <int Which, class E>
    void vpair_dispatch(const T* hs, E* dst, index_t r) const {
        switch (kh_) {
            case 3: vpair<3, Which>(hs, dst, r); break;
            case 4: vpair<4, Which>(hs, dst, r); break;
            case 5: vpair<5, Which>(hs, dst, r); break;
            case 6: vpair<6, Which>(hs, dst, r); break;
            default: vpair<7, Which>(hs, dst, r); break;
        }
    }

    // Output rows r and r + 1 (W >= L): the sums of rows r + 1 .. r + K - 1 once, plus row r
    // for the first and row r + K for the second (Which: 1 the first only, 2 the second only,
    // 3 both). The last vector of a row is shifted back to end at the row's end (its
    // overlapping lanes are recomputed to the same values).
    template <int K, int Which, class E>
    void vpair(const T* hs, E* out, index_t r) const {
        const bool average = op_ == pool_op::average;
        const index_t W = W_, base = r * W;
        const T* const rgrid = rgrid_;  // a local: the stores may alias the member
        for (index_t c = 0; c < W; c += L) {
            const index_t i = base + std::min(c, W - L);
            const T* h = hs + i;
            V shared = V::load(h + W);
            for (int t = 2; t < K; ++t) shared = shared + V::load(h + t * W);
            V first = shared, second = shared;
            if constexpr ((Which & 1) != 0) first = V::load(h) + shared;
            if constexpr ((Which & 2) != 0) second = shared + V::load(h + K * W);
            if (average) {
                if constexpr ((Which & 1) != 0) first = scale_plus_zero(first, V::load(rgrid + i));
                if constexpr ((Which & 2) != 0) second = scale_plus_zero(second, V::load(rgrid + i + W));
            } else {
                first = plus_zero(first);
                second = plus_zero(second);
            }
            if constexpr ((Which & 1) != 0) vstore(first, out + i);
            if constexpr ((Which & 2) != 0) vstore(second, out + i + W);
        }
    }

private:
    // One segment of m_ positions: the masked tap sums, in whole vectors (the masks are 0
    // past the segment, so the last vector's extra lanes write zeros into slack or into the
    // next segment before it is computed).
    template <class E>
    void horizontal(const E* in, const E* in_end, const E* src, T* dst) const {
        switch (kw_) {
            case 1: hseg<1>(in, in_end, src, dst); break;
            case 2: hseg<2>(in, in_end, src, dst); break;
            case 3: hseg<3>(in, in_end, src, dst); break;
            case 4: hseg<4>(in, in_end, src, dst); break;
            case 5: hseg<5>(in, in_end, src, dst); break;
            case 6: hseg<6>(in, in_end, src, dst); break;
            default: hseg<7>(in, in_end, src, dst); break;
        }
    }

    template <int K, class E>
    void hseg(const E* in, const E* in_end, const E* src, T* dst) const {
        // Members in locals: GCC reloaded them (and kept i on the stack) after every store,
        // a chain through memory that made this loop 2.5x slower on AMD Zen 4.
        const index_t ms = stride_, m = m_, pl = pl_, W = W_;
        const T* const masks = masks_;
        // With one row per segment, vectors whose every tap stays inside the row need no masks.
        const index_t ilo = m == W ? pl : m, ihi = W - L - K + 1 + pl;
        const index_t before = src - in, after = in_end - src;  // readable around src
        for (index_t i = 0; i < m; i += L) {
            // Offsets, not pointers, until the reads are known to be inside [in, in_end).
            const index_t off = i - pl;
            // (The taps summed as a tree: see tree_sum; the same order in both vector forms.)
            if (i >= ilo && i <= ihi) {
                const E* lo = src + off;
                auto tap = [&](int j) AVGPOOL_INLINE_LAMBDA { return vload(lo + j); };
                tree_sum<0, K>(tap).store(dst + i);
            } else if (off >= -before && off + K - 1 + L <= after) {
                const E* lo = src + off;
                const T* mk = masks + i;
                auto tap = [&](int j) AVGPOOL_INLINE_LAMBDA { return vload(lo + j).bit_and(V::load(mk + j * ms)); };
                tree_sum<0, K>(tap).store(dst + i);
            } else {
                // At the very start or end of the tensor: per lane, reading only valid taps,
                // a dropped tap +0 (as the AND makes it) and the taps summed in the same tree,
                // so a plane's bits do not depend on where in the tensor it lies.
                for (index_t e = 0; e < L; ++e) {
                    const index_t x = i + e, w = x % W;
                    auto tap = [&](int j) {
                        const index_t col = w + j - pl;
                        return x < m && col >= 0 && col < W ? sload(src[x + j - pl]) : T(0);
                    };
                    dst[x] = tree_sum<0, K>(tap);
                }
            }
        }
    }

    // Outputs [i0, i1) of a plane; i1 is a row boundary, and no write reaches limit or past.
    template <class E>
    void vertical(const T* hs, E* out, index_t i0, index_t i1, index_t limit) const {
        switch (kh_) {
            case 1: vrows<1>(hs, out, i0, i1, limit); break;
            case 2: vrows<2>(hs, out, i0, i1, limit); break;
            case 3: vrows<3>(hs, out, i0, i1, limit); break;
            case 4: vrows<4>(hs, out, i0, i1, limit); break;
            case 5: vrows<5>(hs, out, i0, i1, limit); break;
            case 6: vrows<6>(hs, out, i0, i1, limit); break;
            default: vrows<7>(hs, out, i0, i1, limit); break;
        }
    }

    template <int K, class E>
    void vrows(const T* hs, E* out, index_t i0, index_t i1, index_t limit) const {
        const bool average = op_ == pool_op::average;
        const index_t W = W_;
        const T* const rgrid = rgrid_;
        auto at = [&](index_t i) {
            V acc = V::load(hs + i);
            for (int t = 1; t < K; ++t) acc = acc + V::load(hs + i + t * W);
            return average ? scale_plus_zero(acc, V::load(rgrid + i)) : plus_zero(acc);  // (see plus_zero)
        };
        index_t i = i0;
        for (; i + L <= i1; i += L) vstore(at(i), out + i);
        if (i < i1) {
            if (i + L <= limit) {
                vstore(at(i), out + i);  // spills into rows written later by this same call
            } else {  // the last partial vector: never write past limit
                vstore_n(at(i), out + i, i1 - i);
            }
        }
    }

    const plan_data<R>& p_;
    pool_op op_;
    index_t H_ = 0, W_ = 0, kh_ = 1, kw_ = 1, pt_ = 0, pl_ = 0, n_ = 0, m_ = 0, stride_ = 0;
    const T* masks_ = nullptr;
    const T* rgrid_ = nullptr;
    bool narrow8_ = false;  // narrow8() runs the forward pass
    bool flat3_ = false;    // flat3() does (for float storage)
    bool strip3_ = false;   // strip3() does
    bool vfirst_ = false;   // vfirst() does
};

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_KERNEL_SAME_HPP
