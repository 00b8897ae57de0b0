// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// Shape inference: constexpr, noexcept, overflow-checked. Every rule is per spatial axis;
// see README.md "Semantics" for the formulas and which framework uses which mode.
#ifndef AVGPOOL_SHAPE_HPP
#define AVGPOOL_SHAPE_HPP

#include <cstddef>
#include <limits>

#include "error.hpp"
#include "types.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

constexpr index_t index_max = std::numeric_limits<index_t>::max();

// Checked arithmetic on non-negative operands: false instead of signed overflow (UB).
constexpr bool checked_add(index_t a, index_t b, index_t& out) noexcept {
    if (b > 0 && a > index_max - b) return false;
    out = a + b;
    return true;
}
constexpr bool checked_mul(index_t a, index_t b, index_t& out) noexcept {
    if (a != 0 && b > index_max / a) return false;
    out = a * b;
    return true;
}
// Divisions with b > 0 that round towards -inf / +inf whatever the sign of a.
constexpr index_t floor_div(index_t a, index_t b) noexcept {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}
constexpr index_t ceil_div(index_t a, index_t b) noexcept {
    return a >= 0 ? a / b + (a % b != 0 ? 1 : 0) : -((-a) / b);
}

constexpr bool valid_enum(pad_type v) noexcept {
    return v == pad_type::explicit_pads || v == pad_type::same_upper ||
           v == pad_type::same_lower || v == pad_type::valid;
}
constexpr bool valid_enum(rounding_type v) noexcept {
    return v == rounding_type::floor || v == rounding_type::ceil || v == rounding_type::ceil_torch;
}
constexpr bool valid_enum(divisor_type v) noexcept {
    return v == divisor_type::exclude_pad || v == divisor_type::include_pad ||
           v == divisor_type::full_kernel || v == divisor_type::full_kernel_if_padded;
}
constexpr bool valid_enum(layout v) noexcept {
    return v == layout::channels_first || v == layout::channels_last;
}

/// One spatial axis: the attributes in, the resolved pads and output extent out.
struct axis_shape {
    index_t output = 0, pad_begin = 0, pad_end = 0;
};

/// Where a shape's extents are named in error messages: "input_shape" with the spatial axes
/// at offset 2 for a full {N, C, ...} shape, "input_spatial" at offset 0 for spatial-only.
struct shape_naming {
    const char* input = "input_spatial";
    int axis_offset = 0;
};

/// Resolves one axis. Returns errc::ok and fills `out`, or the first error found.
constexpr error_info resolve_axis(index_t X, index_t k, index_t s, index_t d, index_t pb,
                                  index_t pe, pad_type auto_pad, rounding_type rounding,
                                  bool oversized_kernel, int axis, shape_naming naming,
                                  axis_shape& out) noexcept {
    if (X < 1)
        return make_error(errc::invalid_value, naming.input, axis + naming.axis_offset, X,
                          "spatial extent must be >= 1");
    if (k < 1) return make_error(errc::invalid_value, "kernel", axis, k, "must be >= 1");
    if (s < 1) return make_error(errc::invalid_value, "strides", axis, s, "must be >= 1");
    if (d < 1) return make_error(errc::invalid_value, "dilations", axis, d, "must be >= 1");
    if (!valid_enum(rounding))
        return make_error(errc::invalid_enum, "rounding", -1, static_cast<index_t>(rounding),
                          "not a rounding_type");
    index_t ke = 0;  // dilated kernel extent (k - 1) * d + 1
    if (!checked_mul(k - 1, d, ke) || !checked_add(ke, 1, ke))
        return make_error(errc::overflow, "kernel", axis, k,
                          "dilated extent (kernel - 1) * {0} + 1 overflows int64", d);

    // The pads first; then one output rule for every pad type, so that rounding applies to
    // valid and same padding too (ONNX shape inference and ONNX Runtime round VALID by
    // ceil_mode; OpenVINO rounds both).
    switch (auto_pad) {
        case pad_type::explicit_pads:
            if (pb < 0) return make_error(errc::invalid_value, "pads_begin", axis, pb, "must be >= 0");
            if (pe < 0) return make_error(errc::invalid_value, "pads_end", axis, pe, "must be >= 0");
            break;
        case pad_type::valid:
            pb = pe = 0;
            break;
        case pad_type::same_upper:
        case pad_type::same_lower: {
            const index_t o = ceil_div(X, s);
            // total = max(0, (o - 1) * s + ke - X); (o - 1) * s < X, so only + ke can overflow.
            index_t total = (o - 1) * s;
            if (!checked_add(total, ke, total))
                return make_error(errc::overflow, "kernel", axis, k,
                                  "same padding for dilated extent {0} overflows int64", ke);
            total = total > X ? total - X : 0;
            const index_t small = total / 2, large = total - small;
            pb = auto_pad == pad_type::same_upper ? small : large;
            pe = total - pb;
            // With these pads floor and ceil_torch give ceil(X / s) outputs; plain ceil one more
            // where the pads clamp to 0 and the stride passes the end (OpenVINO's rule).
            break;
        }
        default:
            return make_error(errc::invalid_enum, "auto_pad", -1, static_cast<index_t>(auto_pad),
                              "not a pad_type");
    }
    index_t padded = 0;
    if (!checked_add(X, pb, padded) || !checked_add(padded, pe, padded))
        return make_error(errc::overflow, "pads_end", axis, pe,
                          "input extent {0} + pads_begin {1} + pads_end overflows int64", X, pb);
    const index_t span = padded - ke;
    index_t o = 0;
    if (span < 0) {
        // A kernel longer than the padded input: under ceil rounding PyTorch and ONNX still
        // make one window (at -pads_begin) while the stride would reach past the end; OpenVINO
        // and floor rounding reject it.
        const bool one = oversized_kernel && rounding != rounding_type::floor && span > -s;
        if (!one) {
            if (auto_pad == pad_type::valid)
                return make_error(errc::kernel_too_large, "kernel", axis, k,
                                  "dilated kernel extent {0} is larger than the input extent "
                                  "{1} (auto_pad valid: no padding): no window fits",
                                  ke, X);
            return make_error(errc::kernel_too_large, "kernel", axis, k,
                              "dilated kernel extent {0} is larger than the padded input "
                              "extent {1}: no window fits",
                              ke, padded);
        }
        o = 1;
    } else {
        o = rounding == rounding_type::floor ? span / s + 1 : ceil_div(span, s) + 1;
    }
    // Kernels index from the last window's start (o - 1) * s - pb; under ceil it can pass
    // X + pe, so prove it representable instead of assuming it.
    index_t last_start = 0;
    if (!checked_mul(o - 1, s, last_start))
        return make_error(errc::overflow, "strides", axis, s,
                          "last window start ({0} - 1) * stride overflows int64", o);
    // ceil_torch drops a last window that would start inside the end padding.
    if (rounding == rounding_type::ceil_torch && last_start >= X + pb) --o;
    out = axis_shape{o, pb, pe};
    return error_info{};
}

/// Checks the attributes that are not per axis.
template <std::size_t R>
constexpr error_info check_global_attrs(const pool_attrs<R>& attrs) noexcept {
    if (!valid_enum(attrs.auto_pad))
        return make_error(errc::invalid_enum, "auto_pad", -1, static_cast<index_t>(attrs.auto_pad),
                          "not a pad_type");
    if (!valid_enum(attrs.rounding))
        return make_error(errc::invalid_enum, "rounding", -1, static_cast<index_t>(attrs.rounding),
                          "not a rounding_type");
    if (!valid_enum(attrs.divisor))
        return make_error(errc::invalid_enum, "divisor", -1, static_cast<index_t>(attrs.divisor),
                          "not a divisor_type");
    if (attrs.divisor_override < 0)
        return make_error(errc::invalid_value, "divisor_override", -1, attrs.divisor_override,
                          "must be >= 0 (0 means no override)");
    return error_info{};
}

template <std::size_t R>
constexpr result<pool_geometry<R>> infer_geometry_named(const dims<R>& input_spatial,
                                                        const pool_attrs<R>& attrs,
                                                        shape_naming naming) noexcept {
    const error_info g = check_global_attrs(attrs);
    if (g.code != errc::ok) return g;
    pool_geometry<R> geo{};
    index_t volume = 1;  // kernel volume: the full_kernel divisor, so it must fit
    for (std::size_t a = 0; a < R; ++a) {
        axis_shape ax{};
        const error_info e =
            resolve_axis(input_spatial[a], attrs.kernel[a], attrs.strides[a], attrs.dilations[a],
                         attrs.pads_begin[a], attrs.pads_end[a], attrs.auto_pad, attrs.rounding,
                         attrs.oversized_kernel, static_cast<int>(a), naming, ax);
        if (e.code != errc::ok) return e;
        if (!checked_mul(volume, attrs.kernel[a], volume))
            return make_error(errc::overflow, "kernel", static_cast<int>(a), attrs.kernel[a],
                              "kernel volume overflows int64");
        geo.input[a] = input_spatial[a];
        geo.output[a] = ax.output;
        geo.kernel[a] = attrs.kernel[a];
        geo.strides[a] = attrs.strides[a];
        geo.dilations[a] = attrs.dilations[a];
        geo.pads_begin[a] = ax.pad_begin;
        geo.pads_end[a] = ax.pad_end;
    }
    return geo;
}

}  // namespace detail

/// Shape inference: resolves auto_pad into pads and computes the output extent of every axis.
/// constexpr and noexcept, so it works in static_assert:
///
///     constexpr avgpool::pool_attrs<2> a = [] { avgpool::pool_attrs<2> x; x.kernel = {3, 3};
///                                               x.strides = {2, 2}; return x; }();
///     static_assert(avgpool::infer_geometry<2>({224, 224}, a).value().output[0] == 111);
///
/// Errors (never UB): kernel, strides or dilations < 1, negative explicit pads, an extent < 1,
/// a kernel that fits no window, divisor_override < 0, int64 overflow, enums out of range.
template <std::size_t R>
constexpr result<pool_geometry<R>> infer_geometry(const dims<R>& input_spatial,
                                                  const pool_attrs<R>& attrs) noexcept {
    return detail::infer_geometry_named<R>(input_spatial, attrs, detail::shape_naming{});
}

/// The output extent of one axis alone (same rules as infer_geometry), e.g. for engines that
/// infer shapes dimension by dimension.
constexpr result<index_t> output_extent(index_t input, index_t kernel, index_t stride,
                                        index_t dilation, index_t pad_begin, index_t pad_end,
                                        pad_type auto_pad = pad_type::explicit_pads,
                                        rounding_type rounding = rounding_type::floor,
                                        bool oversized_kernel = false) noexcept {
    detail::axis_shape ax{};
    const error_info e = detail::resolve_axis(input, kernel, stride, dilation, pad_begin, pad_end,
                                              auto_pad, rounding, oversized_kernel, 0,
                                              detail::shape_naming{}, ax);
    if (e.code != errc::ok) return e;
    return ax.output;
}

AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_SHAPE_HPP
