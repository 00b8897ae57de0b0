// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// ONNX front end: AveragePool (opsets 1, 7, 10, 11, 19, 22) and GlobalAveragePool, from the
// node's attributes in ONNX spelling, with each opset's attribute set and defaults.
#ifndef AVGPOOL_FRONTENDS_ONNX_HPP
#define AVGPOOL_FRONTENDS_ONNX_HPP

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "../dynamic.hpp"
#include "../error.hpp"
#include "../types.hpp"
#include "common.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace onnx {

/// The attributes of one AveragePool node as the model stores them. An empty optional is an
/// absent attribute (its default applies); an opset rejects attributes it does not define.
///
///     avgpool::onnx::average_pool_attributes n;
///     n.kernel_shape = {3, 3};
///     n.strides = {2, 2};
///     n.pads = {1, 1, 1, 1};   // [x1_begin, x2_begin, x1_end, x2_end]
///     n.ceil_mode = 1;
struct average_pool_attributes {
    std::vector<index_t> kernel_shape;             ///< required, one entry per spatial axis
    std::optional<std::vector<index_t>> strides;   ///< default all 1
    std::optional<std::vector<index_t>> pads;      ///< [b1..bn, e1..en], each >= 0; default all 0
    std::optional<std::vector<index_t>> dilations; ///< opset >= 19; default all 1
    std::string_view auto_pad = "NOTSET";          ///< NOTSET, SAME_UPPER, SAME_LOWER or VALID
    std::optional<index_t> ceil_mode;              ///< opset >= 10; 0 or 1, default 0
    std::optional<index_t> count_include_pad;      ///< opset >= 7; 0 or 1, default 0
};

/// Choices that are not node attributes.
struct options {
    /// ceil_mode=1 then keeps every window (rounding_type::ceil), as the opset 10-21 spec text
    /// reads, instead of dropping a last window that starts in the end padding, which ONNX
    /// Runtime and the ONNX reference do (rounding_type::ceil_torch, the default). Opset 22
    /// specifies the drop, so there this switch has no effect.
    bool legacy_ceil = false;
};

/// The AveragePool version an opset uses (its since_version): 1, 7, 10, 11, 19 or 22; 0 for an
/// opset < 1.
///
///     static_assert(avgpool::onnx::average_pool_version(13) == 11);
constexpr int average_pool_version(index_t opset) noexcept {
    return opset >= 22 ? 22 : opset >= 19 ? 19 : opset >= 11 ? 11 : opset >= 10 ? 10 : opset >= 7 ? 7 : opset >= 1 ? 1 : 0;
}

}  // namespace onnx

namespace detail {
namespace frontend {

// An attribute that the node's AveragePool version does not define (since: the first opset
// that has it); the ONNX checker rejects such a node, so do we.
inline error_info onnx_gate(const char* attribute, bool present, int version, index_t opset,
                            index_t since, const char* reason) noexcept {
    if (!present || version >= since) return error_info{};
    return make_error_novalue(errc::unsupported, attribute, -1, reason, version, opset);
}

inline error_info onnx_flag(const std::optional<index_t>& v, const char* attribute) noexcept {
    if (v && *v != 0 && *v != 1)
        return make_error(errc::invalid_value, attribute, -1, *v, "must be 0 or 1");
    return error_info{};
}

inline result<pool_attrs_dynamic> onnx_average_pool(const onnx::average_pool_attributes& a,
                                                    index_t opset, onnx::options opt,
                                                    std::size_t wanted_rank) {
    if (opset < 1) return make_error(errc::invalid_value, "opset", -1, opset, "must be >= 1");
    const int version = onnx::average_pool_version(opset);
    error_info e = onnx_gate("count_include_pad", a.count_include_pad.has_value(), version, opset, 7,
                             "not an attribute of AveragePool-{0} (opset {1}); added in opset 7");
    if (!failed(e))
        e = onnx_gate("ceil_mode", a.ceil_mode.has_value(), version, opset, 10,
                      "not an attribute of AveragePool-{0} (opset {1}); added in opset 10");
    if (!failed(e))
        e = onnx_gate("dilations", a.dilations.has_value(), version, opset, 19,
                      "not an attribute of AveragePool-{0} (opset {1}); added in opset 19");
    if (failed(e)) return e;

    std::size_t rank = 0;
    e = resolve_rank("kernel_shape", a.kernel_shape.size(), wanted_rank, rank);
    // Every length before any value.
    if (!failed(e) && a.strides) e = check_length(*a.strides, "strides", rank);
    if (!failed(e) && a.pads && a.pads->size() != 2 * rank)
        e = make_error_novalue(errc::rank_mismatch, "pads", -1,
                               "{0} given; expected {1}: [x1_begin, x2_begin, ..., x1_end, x2_end, ...]",
                               static_cast<index_t>(a.pads->size()), static_cast<index_t>(2 * rank));
    if (!failed(e) && a.dilations) e = check_length(*a.dilations, "dilations", rank);
    if (!failed(e)) e = check_at_least(a.kernel_shape, "kernel_shape", 1);
    if (!failed(e) && a.strides) e = check_at_least(*a.strides, "strides", 1);
    if (!failed(e) && a.pads) e = check_at_least(*a.pads, "pads", 0);
    if (!failed(e) && a.dilations) e = check_at_least(*a.dilations, "dilations", 1);
    if (!failed(e)) e = onnx_flag(a.ceil_mode, "ceil_mode");
    if (!failed(e)) e = onnx_flag(a.count_include_pad, "count_include_pad");
    if (failed(e)) return e;

    pool_attrs_dynamic d;
    // ONNX Runtime reads an empty auto_pad as NOTSET; the spellings are case-sensitive.
    if (a.auto_pad == "NOTSET" || a.auto_pad.empty()) d.auto_pad = pad_type::explicit_pads;
    else if (a.auto_pad == "SAME_UPPER") d.auto_pad = pad_type::same_upper;
    else if (a.auto_pad == "SAME_LOWER") d.auto_pad = pad_type::same_lower;
    else if (a.auto_pad == "VALID") d.auto_pad = pad_type::valid;
    else
        return error_text(errc::parse_error, "auto_pad", -1,
                          "unknown value \"{t}\" (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)",
                          a.auto_pad);
    if (a.pads && d.auto_pad != pad_type::explicit_pads) {
        // The spec forbids pads together with auto_pad; all-zero pads (some exporters write
        // them) say nothing, so only a non-zero pad is a contradiction.
        for (std::size_t i = 0; i < a.pads->size(); ++i)
            if ((*a.pads)[i] != 0)
                return with_text(make_error(errc::invalid_value, "pads", static_cast<int>(i), (*a.pads)[i],
                                            "must be 0 or absent when auto_pad is {t}"),
                                 a.auto_pad);
    }

    d.kernel = a.kernel_shape;
    d.strides = a.strides ? *a.strides : list(rank, 1);
    d.dilations = a.dilations ? *a.dilations : list(rank, 1);
    d.pads_begin.assign(rank, 0);
    d.pads_end.assign(rank, 0);
    if (a.pads && d.auto_pad == pad_type::explicit_pads) {
        for (std::size_t i = 0; i < rank; ++i) {
            d.pads_begin[i] = (*a.pads)[i];
            d.pads_end[i] = (*a.pads)[rank + i];
        }
        // ONNX Runtime's check (the spec has none; its reference averages NaN over windows
        // that hold no input): every pad smaller than its axis's kernel.
        for (std::size_t i = 0; i < 2 * rank; ++i)
            if ((*a.pads)[i] >= a.kernel_shape[i % rank])
                return make_error(errc::invalid_value, "pads", static_cast<int>(i), (*a.pads)[i],
                                  "must be smaller than kernel_shape[{0}] = {1}",
                                  static_cast<index_t>(i % rank), a.kernel_shape[i % rank]);
    }
    const bool ceil = a.ceil_mode.value_or(0) == 1;
    // SAME gives ceil(X / s) outputs under any ceil_mode (spec text and shape inference), which
    // ceil_torch does with same pads and plain ceil may not.
    const bool legacy = opt.legacy_ceil && version < 22 && d.auto_pad != pad_type::same_upper &&
                        d.auto_pad != pad_type::same_lower;
    d.rounding = !ceil ? rounding_type::floor : (legacy ? rounding_type::ceil : rounding_type::ceil_torch);
    // ceil_mode: a kernel past the padded input still makes one window while the stride passes
    // the end (shape inference, ONNX Runtime and the reference agree).
    d.oversized_kernel = true;
    d.divisor = a.count_include_pad.value_or(0) == 1 ? divisor_type::include_pad : divisor_type::exclude_pad;
    return d;
}

inline result<pool_attrs_dynamic> onnx_global(const index_t* shape, std::size_t size) {
    if (size < 3)
        return input_rank_error(size);
    const error_info e = check_spatial(shape, size - 2);
    if (failed(e)) return e;
    pool_attrs_dynamic d;
    d.kernel.assign(shape + 2, shape + size);
    return d;
}

}  // namespace frontend
}  // namespace detail

namespace onnx {

/// ONNX AveragePool over R spatial axes, for a model importing `opset` of the default domain
/// (opsets 1-6 use AveragePool-1, 7-9 -7, 10 -10, 11-18 -11, 19-21 -19, 22 and later -22).
/// ceil_mode=1 maps to rounding_type::ceil_torch (see options::legacy_ceil),
/// count_include_pad=1 to divisor_type::include_pad, else exclude_pad. Errors name the ONNX
/// attribute: a list of the wrong length (rank_mismatch), kernel_shape / strides / dilations
/// < 1 or pads < 0 (invalid_value), an attribute the opset lacks (unsupported), an unknown
/// auto_pad (parse_error).
///
///     avgpool::onnx::average_pool_attributes n;
///     n.kernel_shape = {3, 3};
///     n.strides = {2, 2};
///     n.ceil_mode = 1;
///     auto a = avgpool::onnx::average_pool<2>(n, 17);  // result<pool_attrs<2>>
///     auto plan = avgpool::pooling<2>::create({1, 3, 32, 32}, *a);
template <std::size_t R>
result<pool_attrs<R>> average_pool(const average_pool_attributes& node, index_t opset,
                                   options opt = {}) {
    return detail::frontend::to_fixed<R>(detail::frontend::onnx_average_pool(node, opset, opt, R));
}

/// average_pool with the rank taken from kernel_shape, for engines whose rank is known only at
/// run time; feed the result to avgpool::infer_output_shape or avgpool::to_static<R>.
///
///     auto d = avgpool::onnx::average_pool_dynamic(n, 19);
///     auto shape = avgpool::infer_output_shape({1, 3, 32, 32}, *d);
inline result<pool_attrs_dynamic> average_pool_dynamic(const average_pool_attributes& node,
                                                       index_t opset, options opt = {}) {
    return detail::frontend::onnx_average_pool(node, opset, opt, 0);
}

/// ONNX GlobalAveragePool (every opset): one window over the whole spatial extent of the
/// input {N, C, spatial...}.
///
///     auto a = avgpool::onnx::global_average_pool<2>({1, 64, 7, 7});  // kernel {7, 7}
template <std::size_t R>
result<pool_attrs<R>> global_average_pool(const dims<R + 2>& input_shape) {
    return detail::frontend::to_fixed<R>(detail::frontend::onnx_global(input_shape.data(), R + 2));
}

/// global_average_pool for a runtime-rank input shape (rank >= 3).
///
///     auto d = avgpool::onnx::global_average_pool_dynamic({1, 64, 7, 7});
inline result<pool_attrs_dynamic> global_average_pool_dynamic(const std::vector<index_t>& input_shape) {
    return detail::frontend::onnx_global(input_shape.data(), input_shape.size());
}

}  // namespace onnx
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_FRONTENDS_ONNX_HPP
