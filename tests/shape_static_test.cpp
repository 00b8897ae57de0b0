// Compile-only: shape inference is constexpr, so these are checked by the compiler.
// If this file builds, every assertion here holds.
#include <avgpool/avgpool.hpp>

namespace {

using avgpool::index_t;
using avgpool::pad_type;
using avgpool::rounding_type;

template <std::size_t R>
constexpr avgpool::pool_attrs<R> attrs(const avgpool::dims<R>& k, const avgpool::dims<R>& s,
                                       const avgpool::dims<R>& pb, const avgpool::dims<R>& pe,
                                       pad_type p = pad_type::explicit_pads,
                                       rounding_type r = rounding_type::floor,
                                       const avgpool::dims<R>& d = avgpool::detail::filled<R>(1)) {
    avgpool::pool_attrs<R> a{};
    a.kernel = k;
    a.strides = s;
    a.pads_begin = pb;
    a.pads_end = pe;
    a.auto_pad = p;
    a.rounding = r;
    a.dilations = d;
    return a;
}

constexpr index_t out1(index_t X, index_t k, index_t s, index_t pb, index_t pe,
                       pad_type p = pad_type::explicit_pads, rounding_type r = rounding_type::floor,
                       index_t d = 1) {
    return avgpool::infer_geometry<1>({X}, attrs<1>({k}, {s}, {pb}, {pe}, p, r, {d})).value().output[0];
}

// floor / ceil / ceil_torch
static_assert(out1(224, 3, 2, 0, 0) == 111, "floor");
static_assert(out1(5, 2, 2, 0, 0, pad_type::explicit_pads, rounding_type::ceil) == 3, "ceil keeps the overhang");
static_assert(out1(5, 2, 2, 0, 0, pad_type::explicit_pads, rounding_type::ceil_torch) == 3, "starts inside: kept");
static_assert(out1(3, 2, 2, 1, 1, pad_type::explicit_pads, rounding_type::ceil) == 3, "ceil");
static_assert(out1(3, 2, 2, 1, 1, pad_type::explicit_pads, rounding_type::ceil_torch) == 2,
              "ceil_torch drops a last window starting in the end padding");
static_assert(out1(9, 2, 2, 1, 1, pad_type::explicit_pads, rounding_type::ceil_torch) == 5, "OpenVINO v14 test");
static_assert(out1(150, 20, 3, 0, 0, pad_type::explicit_pads, rounding_type::ceil_torch) == 45, "OpenVINO v14 test");
// auto_pad resolves the pads, then the rounding applies as for explicit pads: same_* is ceil(X / s)
// under floor and ceil_torch; plain ceil adds a window where the pads clamp to 0 and the stride
// passes the end (OpenVINO's shape inference); valid rounds with no pads (ONNX shape inference,
// ONNX Runtime, OpenVINO).
static_assert(out1(32, 2, 2, 0, 0, pad_type::same_upper) == 16, "OpenVINO spec example 1 (the spec says 32: wrong)");
static_assert(out1(32, 5, 2, 0, 0, pad_type::same_upper) == 16, "OpenVINO spec example 2 (the spec says 32: wrong)");
static_assert(out1(32, 5, 3, 1, 1) == 10, "OpenVINO spec example 3");
static_assert(out1(32, 5, 2, 1, 1) == 15, "OpenVINO spec example 4");
static_assert(out1(32, 5, 2, 1, 1, pad_type::valid) == 14, "OpenVINO spec example 5: pads ignored");
static_assert(out1(5, 1, 3, 0, 0, pad_type::same_upper, rounding_type::ceil) == 3, "same, pads clamped, ceil");
static_assert(out1(5, 1, 3, 0, 0, pad_type::same_upper, rounding_type::ceil_torch) == 2, "same, ceil_torch");
static_assert(out1(5, 1, 3, 0, 0, pad_type::same_lower, rounding_type::floor) == 2, "same, floor");
static_assert(out1(7, 3, 2, 0, 0, pad_type::same_upper, rounding_type::ceil) == 4, "same, padded: ceil(X / s)");
static_assert(out1(5, 2, 2, 0, 0, pad_type::valid, rounding_type::ceil) == 3, "valid rounds by ceil");
static_assert(out1(5, 2, 2, 0, 0, pad_type::valid, rounding_type::floor) == 2, "valid, floor");
static_assert(out1(5, 1, 3, 0, 0, pad_type::valid, rounding_type::ceil_torch) == 2, "valid, ceil_torch drops");
// A kernel past the padded input: one window under ceil with oversized_kernel, while the
// excess is under the stride; an error otherwise.
static_assert(avgpool::output_extent(2, 3, 3, 1, 0, 0, pad_type::explicit_pads, rounding_type::ceil_torch, true)
                      .value() == 1, "oversized kernel, ceil_torch");
static_assert(avgpool::output_extent(1, 3, 2, 1, 1, 0, pad_type::explicit_pads, rounding_type::ceil, true)
                      .value() == 1, "oversized kernel, ceil");
static_assert(avgpool::output_extent(2, 3, 2, 1, 0, 0, pad_type::valid, rounding_type::ceil, true).value() == 1,
              "oversized kernel, valid");
static_assert(avgpool::output_extent(2, 3, 3, 1, 0, 0, pad_type::explicit_pads, rounding_type::ceil_torch)
                      .error_code() == avgpool::errc::kernel_too_large, "oversized kernel not allowed");
static_assert(avgpool::output_extent(2, 3, 3, 1, 0, 0, pad_type::explicit_pads, rounding_type::floor, true)
                      .error_code() == avgpool::errc::kernel_too_large, "oversized kernel, floor");
static_assert(avgpool::output_extent(2, 5, 3, 1, 0, 0, pad_type::explicit_pads, rounding_type::ceil, true)
                      .error_code() == avgpool::errc::kernel_too_large, "excess reaches the stride");
// dilation: ke = (k - 1) * d + 1
static_assert(out1(32, 5, 3, 0, 0, pad_type::explicit_pads, rounding_type::floor, 2) == 8, "ONNX 3d dilations");
static_assert(out1(32, 5, 3, 0, 0, pad_type::explicit_pads, rounding_type::ceil_torch, 2) == 9, "ONNX 3d dilations ceil");
static_assert(out1(5, 2, 1, 0, 0, pad_type::same_upper, rounding_type::floor, 2) == 5, "same with dilation");

// Resolved pads: odd totals go to the end (same_upper) or the beginning (same_lower).
constexpr auto g_upper = avgpool::infer_geometry<2>(
    {32, 32}, attrs<2>({5, 5}, {2, 2}, {0, 0}, {1, 1}, pad_type::same_upper));
static_assert(g_upper.value().pads_begin[0] == 1 && g_upper.value().pads_end[0] == 2, "same_upper 1/2");
constexpr auto g_lower = avgpool::infer_geometry<3>(
    {10, 12, 20}, attrs<3>({5, 5, 5}, {1, 3, 2}, {0, 0, 0}, {0, 0, 0}, pad_type::same_lower, rounding_type::ceil));
static_assert(g_lower.value().output[0] == 10 && g_lower.value().output[1] == 4 && g_lower.value().output[2] == 10, "");
static_assert(g_lower.value().pads_begin[1] == 1 && g_lower.value().pads_end[1] == 1, "");
static_assert(g_lower.value().pads_begin[2] == 2 && g_lower.value().pads_end[2] == 1, "same_lower puts the odd pad first");

// Any rank.
constexpr auto g5 = avgpool::infer_geometry<5>({4, 5, 6, 7, 8}, attrs<5>({2, 2, 2, 2, 2}, {1, 1, 1, 1, 2},
                                                                       {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}));
static_assert(g5.value().output[0] == 3 && g5.value().output[4] == 4, "rank 5");

// Errors are values, also at compile time.
static_assert(!avgpool::infer_geometry<1>({8}, attrs<1>({9}, {1}, {0}, {0})).ok(), "kernel fits nowhere");
static_assert(avgpool::infer_geometry<1>({8}, attrs<1>({9}, {1}, {0}, {1})).ok(), "fits with the end pad");
static_assert(avgpool::infer_geometry<1>({8}, attrs<1>({0}, {1}, {0}, {0})).error_code() == avgpool::errc::invalid_value, "");
static_assert(avgpool::infer_geometry<1>({8}, attrs<1>({2}, {0}, {0}, {0})).error_data().axis == 0, "");
static_assert(avgpool::infer_geometry<2>({8, 8}, attrs<2>({2, 2}, {1, 1}, {0, -1}, {0, 0})).error_data().axis == 1, "");
static_assert(avgpool::infer_geometry<1>({index_t(1) << 62}, attrs<1>({2}, {1}, {index_t(1) << 62}, {index_t(1) << 62}))
                  .error_code() == avgpool::errc::overflow, "checked, not UB");
// ceil with a stride past half the int64 range: the last window's start would overflow.
static_assert(avgpool::output_extent((index_t(1) << 62) + 3, 1, (index_t(1) << 62) + 1, 1, 0, 0,
                                     pad_type::explicit_pads, rounding_type::ceil)
                  .error_code() == avgpool::errc::overflow, "");
static_assert(avgpool::output_extent((index_t(1) << 62) + 2, 1, (index_t(1) << 62) + 1, 1, 0, 0).value() == 2, "floor fits");
static_assert(avgpool::output_extent(7, 3, 3, 1, 0, 0, pad_type::explicit_pads, rounding_type::ceil).value() == 3, "");
static_assert(avgpool::output_extent(0, 1, 1, 1, 0, 0).error_code() == avgpool::errc::invalid_value, "");

}  // namespace
