// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The vocabulary types: shapes, modes, attributes, and the resolved geometry.
#ifndef AVGPOOL_TYPES_HPP
#define AVGPOOL_TYPES_HPP

#include "config.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

AVGPOOL_BEGIN_NAMESPACE

/// Signed 64-bit index type used for every size, stride, pad and offset.
using index_t = std::int64_t;

/// A fixed-size list of extents, one per axis: `dims<2>{224, 224}`.
template <std::size_t N>
using dims = std::array<index_t, N>;

/// How pads are chosen per spatial axis.
enum class pad_type {
    explicit_pads,  ///< use pool_attrs::pads_begin / pads_end as given
    same_upper,     ///< output = ceil(X / s); odd total padding goes at the end
    same_lower,     ///< output = ceil(X / s); odd total padding goes at the beginning
    valid           ///< no padding; only windows that fit inside the input
};

/// How the output extent is rounded when the windows do not tile the padded input exactly.
/// Only used with pad_type::explicit_pads: `same_*` and `valid` fix the extent themselves.
enum class rounding_type {
    floor,      ///< (X + pb + pe - ke) / s + 1
    ceil,       ///< ceil((X + pb + pe - ke) / s) + 1, every window kept (ONNX 10-19 text, OpenVINO-1)
    ceil_torch  ///< as ceil, but a last window starting in the end padding is dropped (PyTorch)
};

/// What each window sum is divided by.
enum class divisor_type {
    exclude_pad,  ///< taps inside the input (TensorFlow, count_include_pad=false)
    include_pad,  ///< taps inside [-pb, X + pe): pads count, a ceil overhang does not (PyTorch)
    full_kernel,  ///< prod(kernel) always (oneDNN, ONNX Runtime before 19)
    /// full_kernel when any resolved pad of any axis is non-zero, else exclude_pad
    /// (OpenVINO AvgPool with exclude-pad="false"). Decided after auto_pad is resolved.
    full_kernel_if_padded
};

/// Memory order of a tensor whose logical shape is always {N, C, spatial...}.
enum class layout {
    channels_first,  ///< NCW, NCHW, NCDHW, ...
    channels_last    ///< NWC, NHWC, NDHWC, ...
};

namespace detail {
template <std::size_t N>
constexpr dims<N> filled(index_t v) noexcept {
    dims<N> d{};
    for (std::size_t i = 0; i < N; ++i) d[i] = v;
    return d;
}
}  // namespace detail

/// Attributes of an average pooling over R spatial axes.
///
///     avgpool::pool_attrs<2> a;          // 3x3 window, stride 2, PyTorch ceil_mode
///     a.kernel = {3, 3};
///     a.strides = {2, 2};
///     a.rounding = avgpool::rounding_type::ceil_torch;
template <std::size_t R>
struct pool_attrs {
    static_assert(R >= 1, "pooling needs at least one spatial axis");
    dims<R> kernel{};                                ///< required, every entry >= 1
    dims<R> strides = detail::filled<R>(1);          ///< every entry >= 1
    dims<R> dilations = detail::filled<R>(1);        ///< every entry >= 1
    dims<R> pads_begin{};                            ///< >= 0; ignored unless explicit_pads
    dims<R> pads_end{};                              ///< >= 0; ignored unless explicit_pads
    pad_type auto_pad = pad_type::explicit_pads;
    rounding_type rounding = rounding_type::floor;
    divisor_type divisor = divisor_type::exclude_pad;
    index_t divisor_override = 0;  ///< > 0: divide every window by this (PyTorch); 0: off
    bool empty_window_nan = false;  ///< a window whose divisor is 0 gives NaN (nGraph), else 0
    /// Under ceil / ceil_torch rounding, a dilated kernel longer than the padded input still
    /// makes one window (at -pads_begin) if it passes the padded end by less than the stride,
    /// as PyTorch's and ONNX's ceil_mode do (avg_pool2d(kernel 3, stride 3, ceil_mode) on 2
    /// values averages both). false: such a kernel fits nowhere, an error (OpenVINO).
    bool oversized_kernel = false;
};

/// What shape inference resolves, per spatial axis: pads after auto_pad, and the output extent.
template <std::size_t R>
struct pool_geometry {
    dims<R> input{}, output{}, kernel{}, strides{}, dilations{}, pads_begin{}, pads_end{};
};

AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_TYPES_HPP
