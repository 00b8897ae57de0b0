// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// PyTorch front end: avg_pool1d/2d/3d and adaptive_avg_pool1d/2d/3d, with PyTorch's argument
// forms (a single int or one per axis) and its own checks.
#ifndef AVGPOOL_FRONTENDS_TORCH_HPP
#define AVGPOOL_FRONTENDS_TORCH_HPP

#include <cstddef>
#include <optional>
#include <vector>

#include "../error.hpp"
#include "../types.hpp"
#include "common.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {
namespace frontend {

// A PyTorch int-or-tuple argument: one value for every axis, or one per axis. `may_be_empty`:
// an empty list is allowed (stride: then the kernel size) and left empty.
template <std::size_t R>
error_info torch_expand(const list& v, const char* name, bool may_be_empty, list& out) {
    if ((v.empty() && may_be_empty) || v.size() == R) {
        out = v;
        return error_info{};
    }
    if (v.size() == 1) {
        out.assign(R, v[0]);
        return error_info{};
    }
    if (R == 1) return list_length_error(name, v.size(), 1);
    return make_error_novalue(errc::rank_mismatch, name, -1,
                              may_be_empty ? "{0} given; expected none (the kernel size), a single int or {1}"
                                           : "{0} given; expected a single int or {1}",
                              static_cast<index_t>(v.size()), static_cast<index_t>(R));
}

template <std::size_t R>
result<pool_attrs<R>> torch_avg_pool(const list& kernel_size, const list& stride, const list& padding,
                                     bool ceil_mode, bool count_include_pad,
                                     std::optional<index_t> divisor_override) {
    list k, s, p;
    error_info e = torch_expand<R>(kernel_size, "kernel_size", false, k);
    if (!failed(e)) e = torch_expand<R>(stride, "stride", true, s);
    if (!failed(e)) e = torch_expand<R>(padding, "padding", false, p);
    if (failed(e)) return e;
    if (s.empty()) s = k;  // PyTorch: stride defaults to kernel_size
    if (divisor_override && *divisor_override == 0)
        return make_error(errc::invalid_value, "divisor_override", -1, 0, "must not be zero (omit it for none)");
    // PyTorch would also divide by a negative override; the core supports positive ones only.
    if (divisor_override && *divisor_override < 0)
        return make_error(errc::invalid_value, "divisor_override", -1, *divisor_override, "must be > 0");
    e = check_at_least(k, "kernel_size", 1);
    if (!failed(e)) e = check_at_least(s, "stride", 1);
    if (!failed(e)) e = check_at_least(p, "padding", 0);
    if (failed(e)) return e;
    for (std::size_t i = 0; i < R; ++i)
        if (p[i] > k[i] / 2)
            return make_error(errc::invalid_value, "padding", static_cast<int>(i), p[i],
                              "must be at most half of kernel_size {0} (PyTorch: pad <= {1})", k[i], k[i] / 2);
    pool_attrs<R> a;
    for (std::size_t i = 0; i < R; ++i) {
        a.kernel[i] = k[i];
        a.strides[i] = s[i];
        a.pads_begin[i] = a.pads_end[i] = p[i];
    }
    a.rounding = ceil_mode ? rounding_type::ceil_torch : rounding_type::floor;
    // ceil_mode: one window while the stride passes the end; avg_pool3d rejects any input
    // shorter than the kernel, so not there.
    a.oversized_kernel = R < 3;
    a.divisor = count_include_pad ? divisor_type::include_pad : divisor_type::exclude_pad;
    a.divisor_override = divisor_override.value_or(0);
    return a;
}

}  // namespace frontend
}  // namespace detail

namespace torch {

/// torch.nn.functional.avg_pool{R}d's arguments, in its order and with its defaults, for any
/// R: kernel_size, stride (empty: kernel_size) and padding are a single int or one per axis;
/// padding is symmetric. ceil_mode gives rounding_type::ceil_torch, count_include_pad
/// divisor_type::include_pad (else exclude_pad), divisor_override (given: > 0) replaces the
/// divisor. PyTorch's checks: kernel_size >= 1, stride >= 1, 0 <= padding <= kernel_size / 2,
/// divisor_override != 0; the output size is checked by the core (pooling::create). With
/// ceil_mode, 1-D and 2-D, a kernel past the padded input still makes one window while the
/// excess is under the stride (pool_attrs::oversized_kernel), as PyTorch's output size does.
///
///     // F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)
///     auto a = avgpool::torch::avg_pool<2>({3}, {2}, {1}, true);
template <std::size_t R>
result<pool_attrs<R>> avg_pool(const std::vector<index_t>& kernel_size, const std::vector<index_t>& stride = {},
                               const std::vector<index_t>& padding = {0}, bool ceil_mode = false,
                               bool count_include_pad = true,
                               std::optional<index_t> divisor_override = std::nullopt) {
    return detail::frontend::torch_avg_pool<R>(kernel_size, stride, padding, ceil_mode, count_include_pad,
                                               divisor_override);
}

/// torch.nn.functional.avg_pool1d (which has no divisor_override).
///
///     auto a = avgpool::torch::avg_pool1d({3}, {2});   // AvgPool1d(3, stride=2)
inline result<pool_attrs<1>> avg_pool1d(const std::vector<index_t>& kernel_size,
                                        const std::vector<index_t>& stride = {},
                                        const std::vector<index_t>& padding = {0}, bool ceil_mode = false,
                                        bool count_include_pad = true) {
    return avg_pool<1>(kernel_size, stride, padding, ceil_mode, count_include_pad);
}

/// torch.nn.functional.avg_pool2d / torch.nn.AvgPool2d.
///
///     auto a = avgpool::torch::avg_pool2d({3, 2}, {2, 1}, {1, 0}, false, false, 4);
inline result<pool_attrs<2>> avg_pool2d(const std::vector<index_t>& kernel_size,
                                        const std::vector<index_t>& stride = {},
                                        const std::vector<index_t>& padding = {0}, bool ceil_mode = false,
                                        bool count_include_pad = true,
                                        std::optional<index_t> divisor_override = std::nullopt) {
    return avg_pool<2>(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

/// torch.nn.functional.avg_pool3d / torch.nn.AvgPool3d.
///
///     auto a = avgpool::torch::avg_pool3d({2}, {}, {1}, true);
inline result<pool_attrs<3>> avg_pool3d(const std::vector<index_t>& kernel_size,
                                        const std::vector<index_t>& stride = {},
                                        const std::vector<index_t>& padding = {0}, bool ceil_mode = false,
                                        bool count_include_pad = true,
                                        std::optional<index_t> divisor_override = std::nullopt) {
    return avg_pool<3>(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

/// adaptive_avg_pool{R}d's output_size for an input {N, C, spatial...}: a single value or one
/// per axis, where std::nullopt (Python's None, R >= 2) keeps that axis's input extent. Returns the
/// output spatial extents; each must be >= 1, as must the input's spatial extents.
///
///     auto o = avgpool::torch::adaptive_avg_pool<2>({1, 64, 10, 9}, {5, std::nullopt});  // {5, 9}
template <std::size_t R>
result<dims<R>> adaptive_avg_pool(const dims<R + 2>& input_shape,
                                  const std::vector<std::optional<index_t>>& output_size) {
    using detail::frontend::failed;
    error_info e = detail::frontend::check_spatial(input_shape.data(), R);
    if (failed(e)) return e;
    if (output_size.size() != 1 && output_size.size() != R)
        return R == 1 ? detail::list_length_error("output_size", output_size.size(), 1)
                      : detail::make_error_novalue(errc::rank_mismatch, "output_size", -1,
                                                   "{0} given; expected a single int or {1}",
                                                   static_cast<index_t>(output_size.size()),
                                                   static_cast<index_t>(R));
    dims<R> out{};
    for (std::size_t i = 0; i < R; ++i) {
        const std::optional<index_t>& o = output_size[output_size.size() == 1 ? 0 : i];
        // None keeps an axis only in adaptive_avg_pool2d/3d's per-axis form (Python's
        // _list_with_default); 1-D takes ints only, and a lone None is no size at all.
        if (!o && (R == 1 || output_size.size() != R))
            return detail::make_error_novalue(errc::invalid_value, "output_size", static_cast<int>(i),
                                              R == 1 ? "None is not a size for adaptive_avg_pool1d"
                                                     : "None keeps an axis only with one entry per axis");
        out[i] = o ? *o : input_shape[i + 2];
        // PyTorch allows 0 (an empty output); avgpool makes no empty outputs.
        if (out[i] < 1)
            return detail::make_error(errc::invalid_value, "output_size", static_cast<int>(i), out[i],
                                      "must be >= 1");
    }
    return out;
}

/// torch.nn.functional.adaptive_avg_pool1d's output_size.
///
///     auto o = avgpool::torch::adaptive_avg_pool1d({2, 3, 7}, {3});   // {3}
inline result<dims<1>> adaptive_avg_pool1d(const dims<3>& input_shape,
                                           const std::vector<std::optional<index_t>>& output_size) {
    return adaptive_avg_pool<1>(input_shape, output_size);
}

/// torch.nn.functional.adaptive_avg_pool2d / torch.nn.AdaptiveAvgPool2d's output_size.
///
///     auto o = avgpool::torch::adaptive_avg_pool2d({1, 512, 7, 7}, {1});   // {1, 1}
inline result<dims<2>> adaptive_avg_pool2d(const dims<4>& input_shape,
                                           const std::vector<std::optional<index_t>>& output_size) {
    return adaptive_avg_pool<2>(input_shape, output_size);
}

/// torch.nn.functional.adaptive_avg_pool3d / torch.nn.AdaptiveAvgPool3d's output_size.
///
///     auto o = avgpool::torch::adaptive_avg_pool3d({1, 8, 4, 6, 6}, {2, 3, 3});   // {2, 3, 3}
inline result<dims<3>> adaptive_avg_pool3d(const dims<5>& input_shape,
                                           const std::vector<std::optional<index_t>>& output_size) {
    return adaptive_avg_pool<3>(input_shape, output_size);
}

}  // namespace torch
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_FRONTENDS_TORCH_HPP
