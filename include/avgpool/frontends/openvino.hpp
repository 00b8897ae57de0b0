// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// OpenVINO front end: AvgPool-1, -14 and -16 from the IR's <data .../> attribute strings, and
// the output extents of AdaptiveAvgPool-8.
#ifndef AVGPOOL_FRONTENDS_OPENVINO_HPP
#define AVGPOOL_FRONTENDS_OPENVINO_HPP

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "../dynamic.hpp"
#include "../error.hpp"
#include "../types.hpp"
#include "common.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace openvino {

/// The attribute strings of an AvgPool layer's <data .../> element, exactly as written in the
/// IR; an empty optional is an absent attribute. The strings must outlive the call only.
///
///     // <data auto_pad="explicit" exclude-pad="true" kernel="5,5" pads_begin="1,1"
///     //       pads_end="1,1" strides="3,3"/>
///     avgpool::openvino::avg_pool_data d;
///     d.kernel = "5,5";
///     d.strides = "3,3";
///     d.pads_begin = "1,1";
///     d.pads_end = "1,1";
///     d.exclude_pad = "true";
///     d.auto_pad = "explicit";
struct avg_pool_data {
    std::optional<std::string_view> kernel;         ///< required: "2,2"
    std::optional<std::string_view> strides;        ///< required: "2,2"
    std::optional<std::string_view> pads_begin;     ///< required ("" means all 0): "0,0"
    std::optional<std::string_view> pads_end;       ///< required ("" means all 0): "1,1"
    std::optional<std::string_view> exclude_pad;    ///< required, attribute "exclude-pad": "true"
    std::optional<std::string_view> rounding_type;  ///< floor (default), ceil, ceil_torch (v14+)
    std::optional<std::string_view> auto_pad;       ///< explicit (default), notset, same_upper, same_lower, valid
    std::optional<std::string_view> dilations;      ///< AvgPool-16 only; default all 1
};

}  // namespace openvino

namespace detail {
namespace frontend {

// Reads one list attribute; an empty pads / dilations list means the default (OpenVINO's
// shape inference fills them in), so it comes back with `rank` copies of `empty_fill`.
inline error_info openvino_list(const std::optional<std::string_view>& text, const char* attribute,
                                std::size_t rank, index_t empty_fill, list& out) {
    if (!text) return make_error_novalue(errc::parse_error, attribute, -1, "required attribute is missing");
    const error_info e = parse_int_list(*text, attribute, out);
    if (!failed(e) && out.empty() && empty_fill >= 0) out.assign(rank, empty_fill);
    return e;
}

inline result<pool_attrs_dynamic> openvino_avg_pool(const openvino::avg_pool_data& a, int version,
                                                    std::size_t wanted_rank) {
    if (version != 1 && version != 14 && version != 16)
        return make_error(errc::unsupported, "version", -1, version, "AvgPool has versions 1, 14 and 16");
    if (a.dilations && version < 16)
        return make_error_novalue(errc::unsupported, "dilations", -1,
                                  "not an attribute of AvgPool-{0}; added in AvgPool-16", version);
    pool_attrs_dynamic d;
    if (!a.kernel) return make_error_novalue(errc::parse_error, "kernel", -1, "required attribute is missing");
    error_info e = parse_int_list(*a.kernel, "kernel", d.kernel);
    std::size_t rank = 0;
    if (!failed(e)) e = resolve_rank("kernel", d.kernel.size(), wanted_rank, rank);
    if (!failed(e)) e = openvino_list(a.strides, "strides", rank, -1, d.strides);
    if (!failed(e)) e = openvino_list(a.pads_begin, "pads_begin", rank, 0, d.pads_begin);
    if (!failed(e)) e = openvino_list(a.pads_end, "pads_end", rank, 0, d.pads_end);
    if (!failed(e)) {
        if (a.dilations) e = openvino_list(a.dilations, "dilations", rank, 1, d.dilations);
        else d.dilations.assign(rank, 1);
    }
    // Every length before any value, in OpenVINO's order.
    if (!failed(e)) e = check_length(d.strides, "strides", rank);
    if (!failed(e)) e = check_length(d.pads_begin, "pads_begin", rank);
    if (!failed(e)) e = check_length(d.pads_end, "pads_end", rank);
    if (!failed(e)) e = check_length(d.dilations, "dilations", rank);
    if (!failed(e)) e = check_at_least(d.kernel, "kernel", 1);
    if (!failed(e)) e = check_at_least(d.strides, "strides", 1);
    if (!failed(e)) e = check_at_least(d.pads_begin, "pads_begin", 0);
    if (!failed(e)) e = check_at_least(d.pads_end, "pads_end", 0);
    if (!failed(e)) e = check_at_least(d.dilations, "dilations", 1);
    if (failed(e)) return e;

    bool exclude = true;
    if (!a.exclude_pad)
        return make_error_novalue(errc::parse_error, "exclude-pad", -1, "required attribute is missing");
    e = parse_bool(*a.exclude_pad, "exclude-pad", exclude);
    if (failed(e)) return e;

    if (a.rounding_type) {
        const std::string_view t = trim(*a.rounding_type);
        if (iequals(t, "floor")) d.rounding = rounding_type::floor;
        else if (iequals(t, "ceil")) d.rounding = rounding_type::ceil;
        else if (iequals(t, "ceil_torch")) d.rounding = rounding_type::ceil_torch;
        else
            return error_text(errc::parse_error, "rounding_type", -1,
                              "unknown value \"{t}\" (expected floor, ceil or ceil_torch)", *a.rounding_type);
        if (d.rounding == rounding_type::ceil_torch && version < 14)
            return error_text(errc::unsupported, "rounding_type", -1,
                              "\"{t}\" is not supported by AvgPool-1 (floor or ceil; ceil_torch needs AvgPool-14)",
                              *a.rounding_type);
    }
    if (a.auto_pad) {
        const std::string_view t = trim(*a.auto_pad);
        if (iequals(t, "explicit") || iequals(t, "notset")) d.auto_pad = pad_type::explicit_pads;
        else if (iequals(t, "same_upper")) d.auto_pad = pad_type::same_upper;
        else if (iequals(t, "same_lower")) d.auto_pad = pad_type::same_lower;
        else if (iequals(t, "valid")) d.auto_pad = pad_type::valid;
        else
            return error_text(errc::parse_error, "auto_pad", -1,
                              "unknown value \"{t}\" (expected explicit, notset, same_upper, same_lower or valid)",
                              *a.auto_pad);
    }

    // OpenVINO rejects explicit pads that let an exclude-pad window lie wholly in the padding
    // (its divisor would be 0); same_* pads are always smaller than the kernel.
    if (exclude && d.auto_pad == pad_type::explicit_pads) {
        for (std::size_t i = 0; i < rank; ++i) {
            index_t ke = 0;
            if (!dilated_extent(d.kernel[i], d.dilations[i], ke))
                return make_error(errc::overflow, "kernel", static_cast<int>(i), d.kernel[i],
                                  "dilated extent (kernel - 1) * {0} + 1 overflows int64", d.dilations[i]);
            const char* reason =
                "with exclude-pad=\"true\" every pad must be smaller than the dilated kernel extent "
                "{0}, else a window lies entirely in the padding";
            if (d.pads_begin[i] >= ke)
                return make_error(errc::invalid_value, "pads_begin", static_cast<int>(i), d.pads_begin[i], reason, ke);
            if (d.pads_end[i] >= ke)
                return make_error(errc::invalid_value, "pads_end", static_cast<int>(i), d.pads_end[i], reason, ke);
        }
    }
    // exclude-pad="false": OpenVINO divides by the whole kernel once any resolved pad is
    // non-zero, else by the in-bounds count; the core decides after resolving auto_pad.
    d.divisor = exclude ? divisor_type::exclude_pad : divisor_type::full_kernel_if_padded;
    return d;
}

inline error_info openvino_adaptive(const index_t* shape, std::size_t size, const list& output_size,
                                    index_t* out) {
    if (size < 3)
        return input_rank_error(size);
    const std::size_t rank = size - 2;
    error_info e = check_length(output_size, "output_size", rank);
    if (!failed(e)) e = check_spatial(shape, rank);
    // An output extent of 0 would be an empty tensor, which avgpool does not make.
    if (!failed(e)) e = check_at_least(output_size, "output_size", 1);
    if (failed(e)) return e;
    for (std::size_t i = 0; i < rank; ++i) out[i] = output_size[i];
    return error_info{};
}

}  // namespace frontend
}  // namespace detail

namespace openvino {

/// OpenVINO AvgPool over R spatial axes from its IR attribute strings; `version` is the
/// operation version: 1 (AvgPool-1), 14 (adds rounding_type="ceil_torch") or 16 (adds
/// dilations). exclude-pad="true" gives divisor_type::exclude_pad and needs every explicit pad
/// smaller than the dilated kernel; "false" gives divisor_type::full_kernel_if_padded (the
/// whole kernel once any pad is non-zero). Lists are comma-separated integers, spaces
/// allowed; enum strings are read in any case. Errors: parse_error (unreadable string, missing
/// required attribute, unknown mode), overflow (a number past int64), rank_mismatch (a list
/// without R entries), invalid_value (out of range), unsupported (not in that version).
///
///     avgpool::openvino::avg_pool_data d;
///     d.kernel = "2,2";
///     d.strides = "2,2";
///     d.pads_begin = "0,0";
///     d.pads_end = "1,1";
///     d.exclude_pad = "true";
///     d.auto_pad = "same_upper";
///     auto a = avgpool::openvino::avg_pool<2>(d, 1);      // result<pool_attrs<2>>
///     auto plan = avgpool::pooling<2>::create({1, 3, 32, 32}, *a);   // 1x3x16x16
template <std::size_t R>
result<pool_attrs<R>> avg_pool(const avg_pool_data& data, int version) {
    return detail::frontend::to_fixed<R>(detail::frontend::openvino_avg_pool(data, version, R));
}

/// avg_pool with the rank taken from the kernel string, for runtime-rank engines.
///
///     auto d = avgpool::openvino::avg_pool_dynamic(data, 14);
///     auto shape = avgpool::infer_output_shape({1, 3, 32, 32}, *d);
inline result<pool_attrs_dynamic> avg_pool_dynamic(const avg_pool_data& data, int version) {
    return detail::frontend::openvino_avg_pool(data, version, 0);
}

/// AdaptiveAvgPool-8: checks the input {N, C, spatial...} and the `output_size` input (one
/// extent >= 1 per spatial axis) and returns the output spatial extents.
///
///     auto o = avgpool::openvino::adaptive_avg_pool<2>({1, 3, 32, 32}, {16, 16});  // {16, 16}
template <std::size_t R>
result<dims<R>> adaptive_avg_pool(const dims<R + 2>& input_shape, const std::vector<index_t>& output_size) {
    dims<R> out{};
    const error_info e = detail::frontend::openvino_adaptive(input_shape.data(), R + 2, output_size, out.data());
    if (detail::frontend::failed(e)) return e;
    return out;
}

/// AdaptiveAvgPool-8 for a runtime-rank input (rank >= 3): the whole output shape
/// {N, C, output_size...}.
///
///     auto s = avgpool::openvino::adaptive_avg_pool_shape({2, 3, 7}, {3});  // {2, 3, 3}
inline result<std::vector<index_t>> adaptive_avg_pool_shape(const std::vector<index_t>& input_shape,
                                                            const std::vector<index_t>& output_size) {
    std::vector<index_t> out(input_shape);
    const error_info e =
        detail::frontend::openvino_adaptive(input_shape.data(), input_shape.size(), output_size,
                                            out.size() >= 2 ? out.data() + 2 : out.data());
    if (detail::frontend::failed(e)) return e;
    return out;
}

}  // namespace openvino
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_FRONTENDS_OPENVINO_HPP
