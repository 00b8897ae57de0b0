// Brute-force average pooling: the oracle for the randomized tests (tests/random_test.cpp).
//
// Written from DESIGN.md section 1 alone, deliberately shares no code with the library, and
// deliberately slow and plain:
//   - runtime rank (std::vector attributes), any number of spatial axes;
//   - output extents found by counting windows one by one, not by closed formulas;
//   - every output visits EVERY tap of its window (the full N-D product of j in [0, k) per
//     axis, no separability), checks each coordinate against the bounds directly, and counts
//     divisors as N-D tap counts;
//   - accumulation in long double.
// Test-only; not part of the public headers.
#ifndef AVGPOOL_TESTS_SUPPORT_BRUTE_FORCE_HPP
#define AVGPOOL_TESTS_SUPPORT_BRUTE_FORCE_HPP

#include <avgpool/types.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace avgpool_test {

using bf_index = std::int64_t;
using bf_dims = std::vector<bf_index>;

/// Attributes, runtime rank: every vector has one entry per spatial axis.
struct bf_attrs {
    bf_dims kernel, strides, dilations, pads_begin, pads_end;
    avgpool::pad_type auto_pad = avgpool::pad_type::explicit_pads;
    avgpool::rounding_type rounding = avgpool::rounding_type::floor;
    avgpool::divisor_type divisor = avgpool::divisor_type::exclude_pad;
    bf_index divisor_override = 0;
    bool empty_window_nan = false;
    bool oversized_kernel = false;
};

/// Resolved geometry. ok == false: no window fits (the library must reject the attributes).
struct bf_geometry {
    bool ok = false;
    std::string why;  // for failure messages
    bf_dims input, output, pads_begin, pads_end;
};

/// Spatial shape inference. Attributes are assumed in range (kernel, stride, dilation >= 1,
/// explicit pads >= 0); only the "does any window fit" question can fail.
inline bf_geometry bf_infer(const bf_dims& spatial, const bf_attrs& a) {
    bf_geometry g;
    g.input = spatial;
    g.ok = true;
    const std::size_t rank = spatial.size();
    g.output.assign(rank, 0);
    g.pads_begin.assign(rank, 0);
    g.pads_end.assign(rank, 0);
    for (std::size_t ax = 0; ax < rank; ++ax) {
        const bf_index X = spatial[ax];
        const bf_index k = a.kernel[ax];
        const bf_index s = a.strides[ax];
        const bf_index d = a.dilations[ax];
        const bf_index ke = (k - 1) * d + 1;  // span of the dilated window
        bf_index pb = 0, pe = 0, out = 0;
        switch (a.auto_pad) {
            case avgpool::pad_type::valid:
                break;  // no padding
            case avgpool::pad_type::same_upper:
            case avgpool::pad_type::same_lower: {
                // One window per stride step that starts inside the input: ceil(X / s).
                bf_index n = 0;
                while (n * s < X) ++n;
                bf_index total = (n - 1) * s + ke - X;
                if (total < 0) total = 0;
                const bf_index half_down = total / 2;
                const bf_index half_up = total - half_down;
                if (a.auto_pad == avgpool::pad_type::same_upper) {
                    pb = half_down;
                    pe = half_up;
                } else {
                    pb = half_up;
                    pe = half_down;
                }
                break;
            }
            case avgpool::pad_type::explicit_pads:
                pb = a.pads_begin[ax];
                pe = a.pads_end[ax];
                break;
        }
        // The rounding applies whatever produced the pads.
        const bf_index L = X + pb + pe;  // padded length
        if (L < ke) {
            // A kernel longer than the padded input: one window under ceil rounding when
            // oversized_kernel is set and the stride would pass the end, else none fits.
            if (!(a.oversized_kernel && a.rounding != avgpool::rounding_type::floor && ke - L < s)) {
                g.ok = false;
                g.why = "X + pb + pe < ke on axis " + std::to_string(ax);
                return g;
            }
        }
        if (a.rounding == avgpool::rounding_type::floor) {
            // Windows wholly inside the padded input.
            while (out * s + ke <= L) ++out;
        } else {
            // ceil: the first window, then one more as long as the previous window stops
            // short of the end of the padded input.
            out = 1;
            while ((out - 1) * s + ke < L) ++out;
            // ceil_torch: once, drop a last window that starts in the end padding (its first
            // tap at input coordinate >= X).
            if (a.rounding == avgpool::rounding_type::ceil_torch && (out - 1) * s - pb >= X) --out;
        }
        g.output[ax] = out;
        g.pads_begin[ax] = pb;
        g.pads_end[ax] = pe;
    }
    return g;
}

/// Everything the oracle knows about one pooling, for one memory layout. Every per-output
/// vector is in the memory order of the chosen layout, over the logical output shape
/// {N, C, output spatial...}; `spatial_divisor` is in row-major output spatial order.
struct bf_result {
    bf_geometry geometry;
    bf_dims output_shape;                 // logical {N, C, out...}
    std::vector<long double> average;     // forward(): sum / divisor, 0 or NaN if divisor == 0
    std::vector<long double> sum;         // sum(): sum of the taps inside the input
    std::vector<long double> abs_sum;     // sum of |x| over the taps inside the input
    std::vector<bf_index> divisor;        // divisor of each output (0: counts no tap)
    std::vector<bf_index> spatial_divisor;  // divisor(): one per output spatial position
};

namespace bf_detail {
inline bf_index product(const bf_dims& v) {
    bf_index p = 1;
    for (bf_index x : v) p *= x;
    return p;
}
// Row-major odometer: advances idx within [0, extent) per axis; false after the last.
inline bool next_index(bf_dims& idx, const bf_dims& extent) {
    for (std::size_t i = idx.size(); i-- > 0;) {
        if (++idx[i] < extent[i]) return true;
        idx[i] = 0;
    }
    return false;
}
inline bf_index row_major(const bf_dims& idx, const bf_dims& extent) {
    bf_index off = 0;
    for (std::size_t i = 0; i < idx.size(); ++i) off = off * extent[i] + idx[i];
    return off;
}
}  // namespace bf_detail

/// Memory offset of element (n, c, spatial index p) of a tensor with logical shape
/// {N, C, spatial...} in the given layout; p is the row-major spatial offset.
inline bf_index bf_offset(avgpool::layout lay, bf_index N, bf_index C, bf_index spatial_volume,
                          bf_index n, bf_index c, bf_index p) {
    (void)N;
    if (lay == avgpool::layout::channels_first) return (n * C + c) * spatial_volume + p;
    return (n * spatial_volume + p) * C + c;
}

/// The windows of a valid geometry, found by brute force: for every output spatial position,
/// the row-major spatial offsets of the window's taps that fall inside the input, and its
/// divisor. Independent of the values and of the memory layout, so one plan serves both.
struct bf_plan {
    bf_geometry geometry;
    bf_dims spatial;                              // input spatial extents
    std::vector<std::vector<bf_index>> taps;      // per output spatial position
    std::vector<bf_index> divisor;                // per output spatial position
    bool empty_window_nan = false;
};

/// Enumerates every tap of every window. If the geometry is invalid, only `geometry` is set.
inline bf_plan bf_make_plan(const bf_dims& spatial, const bf_attrs& a) {
    using bf_detail::next_index;
    using bf_detail::product;
    using bf_detail::row_major;
    bf_plan pl;
    pl.geometry = bf_infer(spatial, a);
    pl.spatial = spatial;
    pl.empty_window_nan = a.empty_window_nan;
    if (!pl.geometry.ok) return pl;
    const bf_geometry& g = pl.geometry;
    const std::size_t rank = spatial.size();
    const bf_index out_vol = product(g.output);
    const bf_index kernel_vol = product(a.kernel);

    bool any_pad = false;
    for (std::size_t ax = 0; ax < rank; ++ax)
        if (g.pads_begin[ax] != 0 || g.pads_end[ax] != 0) any_pad = true;

    pl.taps.assign(static_cast<std::size_t>(out_vol), {});
    pl.divisor.assign(static_cast<std::size_t>(out_vol), 0);

    bf_dims o(rank, 0);  // output spatial index
    bf_dims j(rank, 0);  // tap index within the window
    bf_dims t(rank, 0);  // tap coordinate in the input
    do {
        const std::size_t op = static_cast<std::size_t>(row_major(o, g.output));
        // All taps of this window: the full product of j in [0, k) over the axes.
        bf_index count_inside = 0;  // taps with every coordinate in [0, X)
        bf_index count_padded = 0;  // taps with every coordinate in [-pb, X + pe)
        do {
            bool inside = true, in_padded = true;
            for (std::size_t ax = 0; ax < rank; ++ax) {
                t[ax] = o[ax] * a.strides[ax] - g.pads_begin[ax] + j[ax] * a.dilations[ax];
                if (t[ax] < 0 || t[ax] >= spatial[ax]) inside = false;
                if (t[ax] < -g.pads_begin[ax] || t[ax] >= spatial[ax] + g.pads_end[ax])
                    in_padded = false;
            }
            if (inside) {
                ++count_inside;
                pl.taps[op].push_back(row_major(t, spatial));
            }
            if (in_padded) ++count_padded;
        } while (next_index(j, a.kernel));

        bf_index div = 0;
        if (a.divisor_override > 0) {
            div = a.divisor_override;
        } else {
            switch (a.divisor) {
                case avgpool::divisor_type::exclude_pad: div = count_inside; break;
                case avgpool::divisor_type::include_pad: div = count_padded; break;
                case avgpool::divisor_type::full_kernel: div = kernel_vol; break;
                case avgpool::divisor_type::full_kernel_if_padded:
                    div = any_pad ? kernel_vol : count_inside;
                    break;
            }
        }
        pl.divisor[op] = div;
    } while (next_index(o, g.output));
    return pl;
}

/// Applies a plan to `in` (logical shape {N, C, spatial...}, stored in layout `lay`).
inline bf_result bf_apply(const bf_plan& pl, const std::vector<double>& in, bf_index N,
                          bf_index C, avgpool::layout lay) {
    bf_result r;
    r.geometry = pl.geometry;
    if (!pl.geometry.ok) return r;
    r.output_shape = {N, C};
    for (bf_index o : pl.geometry.output) r.output_shape.push_back(o);
    const bf_index in_vol = bf_detail::product(pl.spatial);
    const bf_index out_vol = bf_detail::product(pl.geometry.output);
    const std::size_t total = static_cast<std::size_t>(N * C * out_vol);
    r.average.assign(total, 0.0L);
    r.sum.assign(total, 0.0L);
    r.abs_sum.assign(total, 0.0L);
    r.divisor.assign(total, 0);
    r.spatial_divisor = pl.divisor;
    for (bf_index op = 0; op < out_vol; ++op) {
        const std::vector<bf_index>& taps = pl.taps[static_cast<std::size_t>(op)];
        const bf_index div = pl.divisor[static_cast<std::size_t>(op)];
        for (bf_index n = 0; n < N; ++n) {
            for (bf_index c = 0; c < C; ++c) {
                long double s = 0.0L, sa = 0.0L;
                for (bf_index ip : taps) {
                    const long double x = static_cast<long double>(
                        in[static_cast<std::size_t>(bf_offset(lay, N, C, in_vol, n, c, ip))]);
                    s += x;
                    sa += x < 0 ? -x : x;
                }
                const std::size_t dst =
                    static_cast<std::size_t>(bf_offset(lay, N, C, out_vol, n, c, op));
                r.sum[dst] = s;
                r.abs_sum[dst] = sa;
                r.divisor[dst] = div;
                if (div > 0)
                    r.average[dst] = s / static_cast<long double>(div);
                else
                    r.average[dst] = pl.empty_window_nan
                                         ? std::numeric_limits<long double>::quiet_NaN()
                                         : 0.0L;
            }
        }
    }
    return r;
}

/// Brute-force pooling of `in` (logical shape {N, C, spatial...}, stored in layout `lay`).
/// If the geometry is invalid, only `geometry` is filled.
inline bf_result bf_pool(const std::vector<double>& in, bf_index N, bf_index C,
                         const bf_dims& spatial, const bf_attrs& a, avgpool::layout lay) {
    return bf_apply(bf_make_plan(spatial, a), in, N, C, lay);
}

}  // namespace avgpool_test

#endif  // AVGPOOL_TESTS_SUPPORT_BRUTE_FORCE_HPP
