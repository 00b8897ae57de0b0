// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// TensorFlow front end: tf.nn.avg_pool (and Keras' AveragePooling spellings) with "SAME" /
// "VALID" padding, and TFLite's AVERAGE_POOL_2D.
#ifndef AVGPOOL_FRONTENDS_TENSORFLOW_HPP
#define AVGPOOL_FRONTENDS_TENSORFLOW_HPP

#include <cstddef>
#include <string_view>
#include <vector>

#include "../error.hpp"
#include "../types.hpp"
#include "common.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {
namespace frontend {

inline error_info tf_padding(std::string_view padding, pad_type& out) noexcept {
    // tf.nn spells them in capitals, Keras in lower case.
    if (padding == "SAME" || padding == "same") out = pad_type::same_upper;
    else if (padding == "VALID" || padding == "valid") out = pad_type::valid;
    else if (padding == "EXPLICIT")
        return error_text(errc::unsupported, "padding", -1,
                          "\"{t}\": average pooling takes only SAME or VALID", padding);
    else return error_text(errc::parse_error, "padding", -1, "unknown value \"{t}\" (expected SAME or VALID)", padding);
    return error_info{};
}

// Where the channels sit in an R+2-entry ksize / strides: 1 (NC...) or R + 1 (N...C).
inline error_info tf_channel_axis(std::string_view format, std::size_t rank, std::size_t& channel) noexcept {
    if (format.empty() || format == "channels_last") channel = rank + 1;
    else if (format == "channels_first") channel = 1;
    else if (format.size() == rank + 2 && format.front() == 'N' && format[1] == 'C') channel = 1;
    else if (format.size() == rank + 2 && format.front() == 'N' && format.back() == 'C') channel = rank + 1;
    else
        return error_text(errc::parse_error, "data_format", -1,
                          "unknown value \"{t}\" for this rank (expected e.g. NHWC or NCHW)", format);
    return error_info{};
}

// ksize / strides: a single int, one per spatial axis, or TF's full form with 1 at the batch and
// channel positions ([1, h, w, 1] for NHWC). any_channel: the channel entry may be any value >= 1
// and is ignored (TF's 1-D and 2-D AvgPool check the channel stride only when the channel
// window is not 1, which AvgPool rejects anyway; 3-D requires 1).
template <std::size_t R>
error_info tf_window_list(const list& v, const char* name, std::size_t channel, bool may_be_empty,
                          bool any_channel, list& out) {
    if (v.empty() && may_be_empty) {
        out.clear();
        return error_info{};
    }
    if (v.size() == R || (v.size() == 1 && R != 1)) {
        out = v.size() == R ? v : list(R, v[0]);
        return check_at_least(out, name, 1);
    }
    if (v.size() == R + 2) {
        const error_info e = check_at_least(v, name, 1);
        if (failed(e)) return e;
        if (v[0] != 1)
            return make_error(errc::unsupported, name, 0, v[0], "pooling over the batch dimension is not supported; must be 1");
        if (v[channel] != 1 && !any_channel)
            return make_error(errc::unsupported, name, static_cast<int>(channel), v[channel],
                              "pooling over the channel dimension is not supported; must be 1");
        out.clear();
        for (std::size_t i = 1; i < R + 2; ++i)
            if (i != channel) out.push_back(v[i]);
        return error_info{};
    }
    return make_error_novalue(errc::rank_mismatch, name, -1, "{0} given; expected 1, {1} or {1} + 2",
                              static_cast<index_t>(v.size()), static_cast<index_t>(R));
}

template <std::size_t R>
pool_attrs<R> tf_attrs(const list& k, const list& s, pad_type padding) {
    pool_attrs<R> a;
    for (std::size_t i = 0; i < R; ++i) {
        a.kernel[i] = k[i];
        a.strides[i] = s[i];
    }
    a.auto_pad = padding;
    a.divisor = divisor_type::exclude_pad;  // TensorFlow never counts padding
    return a;
}

template <std::size_t R>
result<pool_attrs<R>> tf_avg_pool(const list& ksize, const list& strides, std::string_view padding,
                                  std::string_view data_format) {
    std::size_t channel = 0;
    pad_type pad = pad_type::valid;
    list k, s;
    error_info e = tf_channel_axis(data_format, R, channel);
    if (!failed(e)) e = tf_window_list<R>(ksize, "ksize", channel, false, false, k);
    if (!failed(e)) e = tf_window_list<R>(strides, "strides", channel, true, R != 3, s);
    if (!failed(e)) e = tf_padding(padding, pad);
    if (failed(e)) return e;
    return tf_attrs<R>(k, s.empty() ? k : s, pad);
}

inline result<pool_attrs<2>> tflite_pool_2d(index_t filter_height, index_t filter_width, index_t stride_height,
                                            index_t stride_width, std::string_view padding) {
    const index_t values[4] = {filter_height, filter_width, stride_height, stride_width};
    const char* names[4] = {"filter_height", "filter_width", "stride_height", "stride_width"};
    for (int i = 0; i < 4; ++i)
        if (values[i] < 1) return make_error(errc::invalid_value, names[i], -1, values[i], "must be >= 1");
    // TFLite's Padding enum has SAME and VALID only, in capitals.
    if (padding != "SAME" && padding != "VALID")
        return error_text(errc::parse_error, "padding", -1, "unknown value \"{t}\" (expected SAME or VALID)", padding);
    return tf_attrs<2>({filter_height, filter_width}, {stride_height, stride_width},
                       padding == "SAME" ? pad_type::same_upper : pad_type::valid);
}

}  // namespace frontend
}  // namespace detail

namespace tensorflow {

/// tf.nn.avg_pool over R spatial axes. ksize and strides are a single int, R ints, or TF's
/// R + 2 form with 1 at the batch and channel positions ([1, h, w, 1] for NHWC); empty
/// strides means ksize (Keras' strides=None). padding "SAME" gives pad_type::same_upper (odd
/// padding at the end), "VALID" pad_type::valid; Keras' "same" / "valid" too. data_format
/// ("NHWC" when empty, "NCHW", "NWC", "NCDHW", ..., or Keras' "channels_last" /
/// "channels_first") only says where the R + 2 form's channel entry is: pass the matching
/// avgpool::layout to pooling::create. The divisor never counts padding.
///
///     // tf.nn.avg_pool2d(x, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME")
///     auto a = avgpool::tensorflow::avg_pool<2>({1, 3, 3, 1}, {1, 2, 2, 1}, "SAME");
///     auto plan = avgpool::pooling<2>::create({1, 8, 7, 7}, *a, avgpool::layout::channels_last);
template <std::size_t R>
result<pool_attrs<R>> avg_pool(const std::vector<index_t>& ksize, const std::vector<index_t>& strides,
                               std::string_view padding, std::string_view data_format = {}) {
    return detail::frontend::tf_avg_pool<R>(ksize, strides, padding, data_format);
}

/// TFLite AVERAGE_POOL_2D (NHWC; pass layout::channels_last): filter and stride per axis and
/// padding "SAME" (same_upper) or "VALID"; the divisor counts only input taps.
///
///     auto a = avgpool::tensorflow::tflite_average_pool_2d(2, 2, 2, 2, "VALID");
inline result<pool_attrs<2>> tflite_average_pool_2d(index_t filter_height, index_t filter_width,
                                                    index_t stride_height, index_t stride_width,
                                                    std::string_view padding) {
    return detail::frontend::tflite_pool_2d(filter_height, filter_width, stride_height, stride_width, padding);
}

}  // namespace tensorflow
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_FRONTENDS_TENSORFLOW_HPP
