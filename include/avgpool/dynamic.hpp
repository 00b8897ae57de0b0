// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// Runtime-rank attributes, for engines whose shapes are vectors: checks the list lengths
// against the tensor rank, then hands over to the fixed-rank core.
#ifndef AVGPOOL_DYNAMIC_HPP
#define AVGPOOL_DYNAMIC_HPP

#include <cstddef>
#include <utility>
#include <vector>

#include "error.hpp"
#include "pooling.hpp"
#include "shape.hpp"
#include "types.hpp"

#ifndef AVGPOOL_MAX_DYNAMIC_RANK
/// Largest number of spatial axes the runtime-rank helpers dispatch to.
#define AVGPOOL_MAX_DYNAMIC_RANK 8
#endif

AVGPOOL_BEGIN_NAMESPACE

/// pool_attrs with the rank known only at run time. Empty `strides` / `dilations` mean all 1,
/// empty pads mean all 0; otherwise every list must have one entry per spatial axis.
struct pool_attrs_dynamic {
    std::vector<index_t> kernel, strides, dilations, pads_begin, pads_end;
    pad_type auto_pad = pad_type::explicit_pads;
    rounding_type rounding = rounding_type::floor;
    divisor_type divisor = divisor_type::exclude_pad;
    index_t divisor_override = 0;
    bool empty_window_nan = false;
    bool oversized_kernel = false;
};

namespace detail {
inline error_info list_length_error(const char* name, std::size_t got, std::size_t want) noexcept {
    return make_error_novalue(errc::rank_mismatch, name, -1,
                              "{0} given; expected {1}, one per spatial axis",
                              static_cast<index_t>(got), static_cast<index_t>(want));
}

template <std::size_t R>
inline error_info copy_list(const std::vector<index_t>& from, const char* name, bool may_be_empty,
                            index_t fill, dims<R>& to) noexcept {
    if (from.empty() && may_be_empty) {
        to = filled<R>(fill);
        return error_info{};
    }
    if (from.size() != R) return list_length_error(name, from.size(), R);
    for (std::size_t i = 0; i < R; ++i) to[i] = from[i];
    return error_info{};
}
}  // namespace detail

/// Fixed-rank attributes from runtime-rank ones; errc::rank_mismatch names the list whose
/// length is not R.
///
///     avgpool::pool_attrs_dynamic d;
///     d.kernel = {3, 3};
///     auto a = avgpool::to_static<2>(d);  // result<pool_attrs<2>>
template <std::size_t R>
result<pool_attrs<R>> to_static(const pool_attrs_dynamic& d) {
    pool_attrs<R> a;
    error_info e = detail::copy_list<R>(d.kernel, "kernel", false, 0, a.kernel);
    if (e.code == errc::ok) e = detail::copy_list<R>(d.strides, "strides", true, 1, a.strides);
    if (e.code == errc::ok) e = detail::copy_list<R>(d.dilations, "dilations", true, 1, a.dilations);
    if (e.code == errc::ok) e = detail::copy_list<R>(d.pads_begin, "pads_begin", true, 0, a.pads_begin);
    if (e.code == errc::ok) e = detail::copy_list<R>(d.pads_end, "pads_end", true, 0, a.pads_end);
    if (e.code != errc::ok) return e;
    a.auto_pad = d.auto_pad;
    a.rounding = d.rounding;
    a.divisor = d.divisor;
    a.divisor_override = d.divisor_override;
    a.empty_window_nan = d.empty_window_nan;
    a.oversized_kernel = d.oversized_kernel;
    return a;
}

namespace detail {
template <std::size_t R>
result<std::vector<index_t>> output_shape_at_rank(const std::vector<index_t>& input_shape,
                                                  const pool_attrs_dynamic& d) {
    if constexpr (R > AVGPOOL_MAX_DYNAMIC_RANK) {
        return make_error_novalue(errc::rank_mismatch, "input_shape", -1,
                                  "rank {0}; at most {1} spatial axes are compiled in "
                                  "(raise AVGPOOL_MAX_DYNAMIC_RANK)",
                                  static_cast<index_t>(input_shape.size()),
                                  AVGPOOL_MAX_DYNAMIC_RANK);
    } else {
        if (input_shape.size() != R + 2) return output_shape_at_rank<R + 1>(input_shape, d);
        auto attrs = to_static<R>(d);
        if (!attrs) return attrs.error_data();
        dims<R + 2> shape{};
        for (std::size_t i = 0; i < R + 2; ++i) shape[i] = input_shape[i];
        auto plan = pooling<R>::create(shape, *attrs);
        if (!plan) return plan.error_data();
        const dims<R + 2>& out = plan->output_shape();
        return std::vector<index_t>(out.begin(), out.end());
    }
}
}  // namespace detail

/// Output shape {N, C, spatial_out...} for a runtime-rank input shape {N, C, spatial...}
/// (rank >= 3), with every check of pooling<R>::create plus the list lengths.
///
///     avgpool::pool_attrs_dynamic d;
///     d.kernel = {2, 2};
///     d.strides = {2, 2};
///     auto s = avgpool::infer_output_shape({1, 3, 32, 32}, d);  // {1, 3, 16, 16}
inline result<std::vector<index_t>> infer_output_shape(const std::vector<index_t>& input_shape,
                                                       const pool_attrs_dynamic& d) {
    if (input_shape.size() < 3)
        return detail::make_error_novalue(errc::rank_mismatch, "input_shape", -1,
                                          "rank {0}; expected {N, C, spatial...}, rank >= 3",
                                          static_cast<index_t>(input_shape.size()));
    return detail::output_shape_at_rank<1>(input_shape, d);
}

AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DYNAMIC_HPP
