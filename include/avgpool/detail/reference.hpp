// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The reference kernel: plain loops over the window tables, any rank, either layout,
// accumulating in double (compensated for double values: reference_sum). It is the oracle
// every fast kernel is tested against, and the path for ranks and modes no fast kernel
// covers. Keep it obviously correct, not fast.
#ifndef AVGPOOL_DETAIL_REFERENCE_HPP
#define AVGPOOL_DETAIL_REFERENCE_HPP

#include <cmath>
#include <cstddef>
#include <type_traits>

#include "plan.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

enum class pool_op { average, sum };

/// The reference's sum of one window (or of one input's gradient shares) in double. For
/// float and 16-bit values a plain double sum is far inside the accuracy bound; for double
/// values it is not (its error grows with the count: 21600 taps of 0.1 were 3600 eps off
/// where DESIGN.md section 3 allows 408), so those take a compensated sum (Neumaier's: the
/// error each addition makes, kept exactly and added at the end), within a few eps of the
/// exact sum. An infinite or NaN sum is returned as it is (its error term is NaN).
template <class T>
struct reference_sum {
    double s = 0.0, c = 0.0;
    void add(double x) noexcept {
        if constexpr (std::is_same<T, double>::value) {
            const double t = s + x;
            c += std::fabs(s) >= std::fabs(x) ? (s - t) + x : (x - t) + s;
            s = t;
        } else {
            s += x;
        }
    }
    double value() const noexcept { return std::isfinite(s) ? s + c : s; }
};

/// A plan's per-axis values in plain arrays for the reference loops: every test compares
/// against them, also in the unoptimized sanitizer build, where each std::array access is a
/// function call.
template <std::size_t R>
struct reference_axes {
    index_t in_stride[R], out_stride[R], in_shape[R], out_shape[R], dilation[R];
    const window* table[R];  // the forward windows
    reference_axes(const plan_data<R>& p, const dims<R + 2>& in_st, const dims<R + 2>& out_st) noexcept {
        for (std::size_t a = 0; a < R; ++a) {
            in_stride[a] = in_st[a + 2];
            out_stride[a] = out_st[a + 2];
            in_shape[a] = p.input_shape[a + 2];
            out_shape[a] = p.output_shape[a + 2];
            dilation[a] = p.geometry.dilations[a];
            table[a] = p.axis(a);
        }
    }
};

/// Pools the outputs flat_begin .. flat_end - 1 (channels-first order of the output spatial
/// positions) of the (n, c) plane `item` = n * C + c. Every output is computed on its own, so
/// a plane may be split into ranges (across threads) without changing any value.
template <class T, std::size_t R>
void reference_pool_outputs(const plan_data<R>& p, const T* in, T* out, pool_op op, index_t item,
                            index_t flat_begin, index_t flat_end) {
    const dims<R + 2> in_st = element_strides<R>(p.input_shape, p.memory_layout);
    const dims<R + 2> out_st = element_strides<R>(p.output_shape, p.memory_layout);
    const index_t C = p.input_shape[1];
    const index_t n = item / C, c = item % C;
    const T* src = in + n * in_st[0] + c * in_st[1];
    T* dst = out + n * out_st[0] + c * out_st[1];
    const reference_axes<R> ax(p, in_st, out_st);
    const index_t *ist = ax.in_stride, *ost = ax.out_stride, *osh = ax.out_shape, *dil = ax.dilation;
    const window* const* table = ax.table;

    index_t o[R];  // output position, odometer order (last axis fastest)
    index_t rest = flat_begin;
    for (std::size_t a = R; a-- > 0;) {
        o[a] = rest % osh[a];
        rest /= osh[a];
    }
    for (index_t flat = flat_begin; flat < flat_end; ++flat) {
        const window* w[R];
        bool any_empty = false;
        index_t dst_off = 0;
        for (std::size_t a = 0; a < R; ++a) {
            w[a] = table[a] + o[a];
            any_empty = any_empty || w[a]->count == 0;
            dst_off += o[a] * ost[a];
        }

        // The taps in odometer order (last axis fastest): the outer axes' counters, and the
        // last axis as the inner loop.
        reference_sum<T> acc;
        if (!any_empty) {
            index_t t[R] = {};
            const index_t last_count = w[R - 1]->count, last_step = dil[R - 1] * ist[R - 1];
            for (;;) {
                index_t src_off = 0;
                for (std::size_t a = 0; a < R; ++a) src_off += (w[a]->first + t[a] * dil[a]) * ist[a];
                for (index_t j = 0; j < last_count; ++j, src_off += last_step) acc.add(to_double(src[src_off]));
                std::size_t a = R - 1;
                while (a-- > 0) {
                    if (++t[a] < w[a]->count) break;
                    t[a] = 0;
                }
                if (a == static_cast<std::size_t>(-1)) break;  // every outer counter wrapped
            }
        }

        if (op == pool_op::sum) {
            dst[dst_off] = from_double<T>(acc.value());
        } else {
            bool empty = false;
            const double div = window_divisor<R>(p, w, empty);
            dst[dst_off] = empty ? empty_window_value<T>(p.empty_window_nan) : from_double<T>(acc.value() / div);
        }

        for (std::size_t a = R; a-- > 0;) {
            if (++o[a] < osh[a]) break;
            o[a] = 0;
        }
    }
}

/// Pools the (n, c) planes item_begin .. item_end - 1, item = n * C + c.
template <class T, std::size_t R>
void reference_pool(const plan_data<R>& p, const T* in, T* out, pool_op op, index_t item_begin,
                    index_t item_end) {
    const index_t out_volume = p.output_spatial_volume();
    for (index_t item = item_begin; item < item_end; ++item)
        reference_pool_outputs<T, R>(p, in, out, op, item, 0, out_volume);
}

/// The divisor of every output position (output spatial shape, channels-first order).
template <class T, std::size_t R>
void reference_divisor(const plan_data<R>& p, T* out) {
    const index_t out_volume = p.output_spatial_volume();
    dims<R> o{};
    for (index_t flat = 0; flat < out_volume; ++flat) {
        const window* w[R];
        for (std::size_t a = 0; a < R; ++a) w[a] = p.axis(a) + o[a];
        bool empty = false;
        const double div = window_divisor<R>(p, w, empty);
        out[flat] = from_double<T>(empty ? 0.0 : div);
        for (std::size_t a = R; a-- > 0;) {
            if (++o[a] < p.output_shape[a + 2]) break;
            o[a] = 0;
        }
    }
}

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_REFERENCE_HPP
