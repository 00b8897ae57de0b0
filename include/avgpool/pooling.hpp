// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The plan (pooling<R>) and the one-call avg_pool.
#ifndef AVGPOOL_POOLING_HPP
#define AVGPOOL_POOLING_HPP

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "detail/backward.hpp"
#include "detail/kernel_cf.hpp"
#include "detail/kernel_cl.hpp"
#include "detail/kernel_flat.hpp"
#include "detail/kernel_pair.hpp"
#include "detail/kernel_perm.hpp"
#include "detail/kernel_pixels.hpp"
#include "detail/kernel_same.hpp"
#include "detail/kernel_stride2.hpp"
#include "detail/kernel_tile.hpp"
#include "detail/plan.hpp"
#include "detail/reference.hpp"
#include "detail/windows.hpp"
#include "error.hpp"
#include "executor.hpp"
#include "float16.hpp"
#include "shape.hpp"
#include "types.hpp"

AVGPOOL_BEGIN_NAMESPACE

/// The instruction set this translation unit's kernels were compiled for: xsimd's name for its
/// default architecture ("sse2", "fma3+avx2", "avx512bw", "neon64", ...), or "scalar" without
/// xsimd. The compiler's target flags choose it (-march=..., -mavx2 ...); for logs and reports:
///     std::printf("avgpool kernels: %s\n", avgpool::simd_name());
inline const char* simd_name() noexcept {
#if AVGPOOL_HAS_XSIMD
    return xsimd::default_arch::name();
#else
    return "scalar";
#endif
}

namespace detail {

template <class T>
struct is_element
    : std::integral_constant<bool, std::is_same<T, float>::value || std::is_same<T, double>::value ||
                                       std::is_same<T, float16>::value || std::is_same<T, bfloat16>::value> {};

// 16-bit channels-first backward stages float copies of planes (pooling::stage_planes; the
// forward kernels convert in registers instead): float elements per chunk of staged planes
// (64 KiB, L2-resident with its outputs), and zeros around them (at least the kernels'
// over-reads: 2 vectors of 16 floats, or a 7-wide window plus a vector).
constexpr index_t stage_elements = index_t(1) << 14;
constexpr index_t stage_slack = 64;

// A chunk's float copies: [slack][planes of src][zeros up to a line][planes of dst]. Both
// copies start on 64-byte lines; the zeros around src are the kernels' over-reads.
struct stage_area {
    line_buffer<float> buf;  // not zeroed: only the slack needs it
    float *lo = nullptr, *src = nullptr, *dst = nullptr;

    stage_area(index_t planes, index_t src_plane, index_t dst_plane)
        : buf(static_cast<std::size_t>(stage_slack + gap_end(planes, src_plane) + planes * dst_plane)) {
        lo = buf.get();
        src = lo + stage_slack;
        dst = src + gap_end(planes, src_plane);
        std::fill(lo, src, 0.0f);
        std::fill(src + planes * src_plane, dst, 0.0f);
    }

private:
    static index_t gap_end(index_t planes, index_t src_plane) noexcept {
        return (planes * src_plane + stage_slack + 15) / 16 * 16;
    }
};

inline error_info null_pointer_error(const char* name) noexcept {
    return make_error_novalue(errc::null_pointer, name, -1, "null pointer");
}

// A moved-from plan keeps its shapes but not its tables: calls on it report this instead of
// reading tables that are gone.
inline error_info moved_from_error() noexcept {
    return make_error_novalue(errc::invalid_value, "plan", -1, "the plan was moved from");
}

// Element count of {N, C, spatial...}, or false when it overflows int64.
template <std::size_t N>
constexpr bool checked_volume(const dims<N>& d, index_t& v) noexcept {
    v = 1;
    for (std::size_t i = 0; i < N; ++i)
        if (!checked_mul(v, d[i], v)) return false;
    return true;
}

}  // namespace detail

/// A validated pooling plan: attributes checked and resolved once, window tables built once
/// (the backward pass's by the first backward call, so forward-only plans never pay for them);
/// then forward / sum / divisor / backward run any number of times, on any element type,
/// allocating nothing once the calling thread has run the plan before (kernels' scratch comes
/// from a small per-thread cache; see README, Memory). Copyable; const methods are safe to
/// call from several threads at once.
///
///     avgpool::pool_attrs<2> a;
///     a.kernel = {3, 3};
///     a.strides = {2, 2};
///     auto plan = avgpool::pooling<2>::create({1, 64, 112, 112}, a);  // {N, C, H, W}
///     if (!plan) return plan.error().message();
///     std::vector<float> out(plan->output_size());                      // 1 x 64 x 55 x 55
///     plan->forward(in.data(), out.data());
template <std::size_t R>
class pooling;

namespace detail {
/// Read access to a plan's resolved data, for the library's own tests and benchmarks.
struct plan_access {
    template <std::size_t R>
    static const plan_data<R>& data(const pooling<R>& p) {
        p.build_backward();  // (tests read the backward tables too)
        return p.d_;
    }
    // The plan without building its backward tables (tests: forward leaves them unbuilt).
    template <std::size_t R>
    static const plan_data<R>& data_unbuilt(const pooling<R>& p) noexcept {
        return p.d_;
    }
    // Tests: plans whose kernels follow the requested layout even for one channel (see
    // plan_data::memory_layout), to check the channels-last kernels there.
    template <std::size_t R>
    static result<pooling<R>> create_exact(const dims<R + 2>& s, const pool_attrs<R>& a, layout l) {
        return pooling<R>::make(s, a, l, false);
    }
    template <std::size_t R>
    static result<pooling<R>> create_adaptive_exact(const dims<R + 2>& s, const dims<R>& o, layout l) {
        return pooling<R>::make_adaptive(s, o, l, false);
    }
    // Whether a channels-last plan runs through its flattened channels-first plan.
    template <std::size_t R>
    static bool flattened(const pooling<R>& p) noexcept {
        return p.flat_ != nullptr;
    }
    // Whether a channels-last plan's forward (and backward) runs the pixel kernel.
    template <std::size_t R>
    static bool pixels(const pooling<R>& p) noexcept {
        return p.d_.pixel_kernel;
    }
    template <std::size_t R>
    static bool pixels_backward(const pooling<R>& p) {
        p.build_backward();
        return p.d_.bwd().px_b != nullptr;
    }
};
}  // namespace detail

template <std::size_t R>
class pooling {
    static_assert(R >= 1, "pooling needs at least one spatial axis");
    friend struct detail::plan_access;

public:
    /// The largest extent, input or output, of a spatial axis a plan takes (2^32): a plan keeps
    /// tables per position of each axis, which past this would not fit a machine's memory.
    static constexpr index_t max_plan_extent = index_t(1) << 32;

    /// Validates and resolves. input_shape is always the logical {N, C, spatial...}, whatever
    /// the memory layout. Every error names the attribute, the axis and the value.
    static result<pooling> create(const dims<R + 2>& input_shape, const pool_attrs<R>& attrs,
                                  layout memory_layout = layout::channels_first) {
        return make(input_shape, attrs, memory_layout, true);
    }

    /// Adaptive average pooling (OpenVINO AdaptiveAvgPool-8, PyTorch adaptive_avg_pool): output
    /// o of an axis of extent X averages [floor(o * X / O), ceil((o + 1) * X / O)), computed in
    /// exact integer arithmetic; O may exceed X (windows then overlap). geometry() reports the
    /// largest window as the kernel, strides 1 and pads 0.
    ///
    ///     auto plan = avgpool::pooling<2>::create_adaptive({1, 2048, 60, 60}, {6, 6});
    static result<pooling> create_adaptive(const dims<R + 2>& input_shape, const dims<R>& output_spatial,
                                           layout memory_layout = layout::channels_first) {
        return make_adaptive(input_shape, output_spatial, memory_layout, true);
    }

private:
    // one_channel_first: run one-channel plans through the channels-first kernels.
    static result<pooling> make(const dims<R + 2>& input_shape, const pool_attrs<R>& attrs, layout memory_layout,
                                bool one_channel_first) {
        const error_info e = check_shape(input_shape, memory_layout);
        if (e.code != errc::ok) return e;
        dims<R> spatial{};
        for (std::size_t a = 0; a < R; ++a) spatial[a] = input_shape[a + 2];
        auto geo = detail::infer_geometry_named<R>(spatial, attrs,
                                                   detail::shape_naming{"input_shape", 2});
        if (!geo) return geo.error_data();

        pooling p;
        detail::plan_data<R>& d = p.d_;
        d.input_shape = input_shape;
        d.output_shape[0] = input_shape[0];
        d.output_shape[1] = input_shape[1];
        for (std::size_t a = 0; a < R; ++a) d.output_shape[a + 2] = geo->output[a];
        const error_info v = check_volumes(d);
        if (v.code != errc::ok) return v;
        d.geometry = *geo;
        d.set_layout(memory_layout, one_channel_first);
        d.divisor = detail::resolve_divisor<R>(attrs.divisor, d.geometry);
        d.divisor_override = attrs.divisor_override;
        d.empty_window_nan = attrs.empty_window_nan;
        p.build_windows();
        if (one_channel_first) {
            p.build_flat_channels_last();
            p.build_pixel_tables();
        }
        return p;
    }

    // Channels-last on 2-8 channels that the flattened plan does not take (a stride on the
    // last axis): the pixel kernel, with the last axis's reciprocal divisors.
    void build_pixel_tables() {
        if (flat_ != nullptr || !detail::px_geometry<R>(d_)) return;
        const std::vector<float>& ld = d_.last_div_f;
        d_.px_rdiv.assign(ld.size(), 1.0f);
        for (std::size_t o = 0; o < ld.size(); ++o)
            d_.px_rdiv[o] = ld[o] != 0.0f ? 1.0f / ld[o] : std::numeric_limits<float>::infinity();
        d_.pixel_kernel = true;
    }

    // Channels-last with fewer channels than a float vector and stride 1 on the last axis: the
    // same sums as a channels-first plan of one plane per image whose last axis is W * C long,
    // with that axis's dilation and pads times C (output w, channel c sits at w * C + c and
    // reads (w + t * dilation - pad) * C + c; the other axes are unchanged). The channels-last
    // kernels run their vectors over the channels, so few channels left most lanes idle
    // (224x224x3, 3x3: 287 against 43 us). The inner plan runs forward, sum and backward.
    void build_flat_channels_last() {
        const pool_geometry<R>& g = d_.geometry;
        const index_t C = d_.input_shape[1];
        // (Global pools keep their own path, which divides each gradient exactly.)
        if (d_.memory_layout != layout::channels_last || R > 3 || d_.global || g.strides[R - 1] != 1 ||
            C >= static_cast<index_t>(detail::vec<float>::width))
            return;
        const index_t big = std::numeric_limits<index_t>::max() / C;
        if (g.pads_begin[R - 1] > big || g.pads_end[R - 1] > big || g.pads_begin[R - 1] < -big ||
            g.pads_end[R - 1] < -big || g.dilations[R - 1] > big)
            return;
        pool_attrs<R> a;
        a.kernel = g.kernel;
        a.strides = g.strides;
        a.dilations = g.dilations;
        a.pads_begin = g.pads_begin;
        a.pads_end = g.pads_end;
        a.dilations[R - 1] *= C;
        a.pads_begin[R - 1] *= C;
        a.pads_end[R - 1] *= C;
        a.auto_pad = pad_type::explicit_pads;
        a.rounding = rounding_type::floor;  // the resolved pads and output extents below are checked
        a.divisor = d_.divisor;
        a.divisor_override = d_.divisor_override;
        a.empty_window_nan = d_.empty_window_nan;
        dims<R + 2> shape = d_.input_shape;
        shape[1] = 1;
        shape[R + 1] *= C;
        auto inner = make(shape, a, layout::channels_first, false);
        if (!inner) return;
        // Only where every window and divisor rule maps exactly (else keep the kernels here).
        const detail::plan_data<R>& f = inner->d_;
        for (std::size_t ax = 0; ax < R; ++ax) {
            const bool last = ax + 1 == R;
            if (f.geometry.output[ax] != g.output[ax] * (last ? C : 1)) return;
            for (index_t o = 0; o < f.geometry.output[ax]; ++o) {
                const detail::window& w = d_.axis(ax)[last ? o / C : o];
                const detail::window& v = f.axis(ax)[o];
                if (v.count != w.count || (w.count > 0 && v.first != (last ? w.first * C + o % C : w.first))) return;
            }
        }
        if (f.divisor != d_.divisor) return;
        flat_ = std::make_shared<const pooling>(std::move(*inner));
    }

    static result<pooling> make_adaptive(const dims<R + 2>& input_shape, const dims<R>& output_spatial,
                                         layout memory_layout, bool one_channel_first) {
        using detail::make_error;
        error_info e = check_shape(input_shape, memory_layout);
        if (e.code != errc::ok) return e;
        for (std::size_t a = 0; a < R; ++a)
            if (output_spatial[a] < 1)
                return make_error(errc::invalid_value, "output_spatial", static_cast<int>(a), output_spatial[a],
                                  "must be >= 1");
        pooling p;
        detail::plan_data<R>& d = p.d_;
        d.adaptive = true;
        d.input_shape = input_shape;
        d.output_shape[0] = input_shape[0];
        d.output_shape[1] = input_shape[1];
        for (std::size_t a = 0; a < R; ++a) {
            d.output_shape[a + 2] = output_spatial[a];
            d.geometry.input[a] = input_shape[a + 2];
            d.geometry.output[a] = output_spatial[a];
            d.geometry.strides[a] = d.geometry.dilations[a] = 1;
        }
        e = check_volumes(d);
        if (e.code != errc::ok) return e;
        d.set_layout(memory_layout, one_channel_first);
        d.divisor = divisor_type::exclude_pad;  // every tap lies inside the input
        p.allocate_windows();
        for (std::size_t a = 0; a < R; ++a) {
            index_t largest = 1;
            for (index_t o = 0; o < output_spatial[a]; ++o) {
                const detail::window w = detail::adaptive_window(o, input_shape[a + 2], output_spatial[a]);
                d.windows[d.offset[a] + static_cast<std::size_t>(o)] = w;
                largest = std::max(largest, w.count);
            }
            d.geometry.kernel[a] = largest;
        }
        p.derive_tables();
        return p;
    }

public:
    /// Logical input shape {N, C, spatial...}.
    const dims<R + 2>& input_shape() const noexcept { return d_.input_shape; }
    /// Logical output shape {N, C, spatial_out...}.
    const dims<R + 2>& output_shape() const noexcept { return d_.output_shape; }
    /// Resolved per-axis geometry: pads after auto_pad, output extents.
    const pool_geometry<R>& geometry() const noexcept { return d_.geometry; }
    /// The layout the plan was made for.
    layout memory_layout() const noexcept { return d_.requested_layout; }
    /// The divisor rule in force (full_kernel_if_padded already resolved).
    divisor_type divisor_mode() const noexcept { return d_.divisor; }

    /// Element counts of the input, the output, and the divisor() tensor.
    index_t input_size() const noexcept { return d_.input_shape[0] * d_.input_shape[1] * d_.input_spatial_volume(); }
    index_t output_size() const noexcept { return d_.output_shape[0] * d_.output_shape[1] * d_.output_spatial_volume(); }
    index_t divisor_size() const noexcept { return d_.output_spatial_volume(); }

    /// out = window sum / divisor, for every output. Returns an error (and writes nothing)
    /// only for a null pointer or a moved-from plan. `exec` may run the work in parallel (see executor.hpp).
    template <class T, class Exec>
    status forward(const T* in, T* out, Exec&& exec) const {
        return run(in, out, detail::pool_op::average, detail::exec_ref(exec));
    }
    template <class T>
    status forward(const T* in, T* out) const {
        return forward(in, out, sequential{});
    }

    /// out = window sum over the counted input taps (nGraph's sum tensor); padding adds 0.
    template <class T, class Exec>
    status sum(const T* in, T* out, Exec&& exec) const {
        return run(in, out, detail::pool_op::sum, detail::exec_ref(exec));
    }
    template <class T>
    status sum(const T* in, T* out) const {
        return sum(in, out, sequential{});
    }

    /// The gradient of forward(): grad_in (input shape, overwritten) gets, at every input tap of
    /// each window, that output's gradient divided by the divisor forward() used (PyTorch's
    /// semantics, divisor_override included); padding receives nothing, inputs no window
    /// covers get 0. Returns an error (writing nothing) only for a null pointer or a moved-from plan.
    ///
    ///     plan->backward(grad_out.data(), grad_in.data());
    template <class T, class Exec>
    status backward(const T* grad_out, T* grad_in, Exec&& exec) const {
        return run_backward(grad_out, grad_in, detail::exec_ref(exec));
    }
    template <class T>
    status backward(const T* grad_out, T* grad_in) const {
        return backward(grad_out, grad_in, sequential{});
    }

    /// The divisor of every output position: a tensor of the output spatial shape only
    /// (the same for every N and C). 0 marks a window that counts no tap.
    template <class T>
    status divisor(T* out) const {
        static_assert(detail::is_element<T>::value, "avgpool: unsupported element type");
        if (out == nullptr) return detail::null_pointer_error("out");
        if (d_.lazy == nullptr) return detail::moved_from_error();
        detail::reference_divisor<T, R>(d_, out);
        return status{};
    }

private:
    // run_backward and run (every kernel is reached through them) are defined after the class:
    // not inline, so that AVGPOOL_EXTERN_TEMPLATES keeps them out of a translation unit.
    template <class T>
    status run_backward(const T* grad_out, T* grad_in, const detail::exec_ref& exec) const;

    pooling() = default;

    static error_info check_shape(const dims<R + 2>& input_shape, layout memory_layout) noexcept {
        using detail::make_error;
        if (!detail::valid_enum(memory_layout))
            return make_error(errc::invalid_enum, "memory_layout", -1,
                              static_cast<index_t>(memory_layout), "not a layout");
        if (input_shape[0] < 1)
            return make_error(errc::invalid_value, "input_shape", 0, input_shape[0],
                              "batch N must be >= 1");
        if (input_shape[1] < 1)
            return make_error(errc::invalid_value, "input_shape", 1, input_shape[1],
                              "channels C must be >= 1");
        for (std::size_t a = 0; a < R; ++a)
            if (input_shape[a + 2] < 1)
                return make_error(errc::invalid_value, "input_shape", static_cast<int>(a + 2),
                                  input_shape[a + 2], "spatial extent must be >= 1");
        return error_info{};
    }

    static error_info check_volumes(const detail::plan_data<R>& d) noexcept {
        // A plan keeps tables per input and per output position of each axis (windows, the
        // outputs covering each input, divisors): extents past max_plan_extent would ask
        // for more than any machine holds, and allocating them would throw or abort.
        for (std::size_t a = 0; a < R; ++a) {
            const int axis = static_cast<int>(a + 2);
            const char* const why = "must be <= {0} (a plan's per-axis tables)";
            if (d.input_shape[a + 2] > max_plan_extent)
                return detail::make_error(errc::invalid_value, "input_shape", axis, d.input_shape[a + 2], why,
                                          max_plan_extent);
            if (d.output_shape[a + 2] > max_plan_extent)
                return detail::make_error(errc::invalid_value, "output_shape", axis, d.output_shape[a + 2], why,
                                          max_plan_extent);
        }
        index_t volume = 0;
        if (!detail::checked_volume(d.input_shape, volume))
            return detail::make_error_novalue(errc::overflow, "input_shape", -1,
                                              "element count N * C * spatial overflows int64");
        if (!detail::checked_volume(d.output_shape, volume))
            return detail::make_error_novalue(errc::overflow, "output_shape", -1,
                                              "element count N * C * spatial overflows int64");
        return error_info{};
    }

    void allocate_windows() {
        std::size_t total = 0;
        for (std::size_t a = 0; a < R; ++a) {
            d_.offset[a] = total;
            total += static_cast<std::size_t>(d_.output_shape[a + 2]);
        }
        d_.windows.resize(total);
    }

    // Per axis, the most outputs whose window span reaches one input (plan_data::cover). Spans
    // (not first valid taps: dilation can skip the first tap of an early window) start and end
    // at non-decreasing positions, so two pointers sweep each axis once, with no division.
    void build_cover() {
        const pool_geometry<R>& g = d_.geometry;
        for (std::size_t a = 0; a < R; ++a) {
            const detail::window* w = d_.axis(a);
            const index_t O = d_.output_shape[a + 2], X = d_.input_shape[a + 2];
            const index_t ke = (g.kernel[a] - 1) * g.dilations[a] + 1;
            auto span_first = [&](index_t o) { return d_.adaptive ? w[o].first : o * g.strides[a] - g.pads_begin[a]; };
            auto span_last = [&](index_t o) {
                return d_.adaptive ? w[o].first + w[o].count - 1 : o * g.strides[a] - g.pads_begin[a] + ke - 1;
            };
            index_t lo = 0, hi = 0, most = 0;
            for (index_t x = 0; x < X; ++x) {
                while (lo < O && span_last(lo) < x) ++lo;
                if (hi < lo) hi = lo;
                while (hi < O && span_first(hi) <= x) ++hi;
                most = std::max(most, hi - lo);
            }
            d_.cover_max[a] = most;
        }
    }

    void build_windows() {
        const pool_geometry<R>& g = d_.geometry;
        allocate_windows();
        for (std::size_t a = 0; a < R; ++a)
            for (index_t o = 0; o < g.output[a]; ++o)
                d_.windows[d_.offset[a] + static_cast<std::size_t>(o)] = detail::axis_window(
                    o, g.input[a], g.kernel[a], g.strides[a], g.dilations[a], g.pads_begin[a],
                    g.pads_end[a], d_.divisor);
        derive_tables();
    }

    // The same-grid kernel's tap masks: lane i of tap j keeps its read when column
    // (i mod W) + j - pad_left lies inside the row and i is inside the segment.
    void build_same_masks() {
        const pool_geometry<R>& g = d_.geometry;
        const index_t kw = g.kernel[R - 1], pl = g.pads_begin[R - 1];
        build_same_masks(pl, d_.same_mask_f, d_.same_mask_d);
        build_same_masks(kw - 1 - pl, d_.same_bmask_f, d_.same_bmask_d);
        if (detail::flat3_geometry<R>(d_)) d_.same_kmask = detail::flat3_masks(g.input[0] * g.input[R - 1], g.input[R - 1]);
    }
    void build_same_masks(index_t pl, std::vector<float>& mask_f, std::vector<double>& mask_d) {
        const pool_geometry<R>& g = d_.geometry;
        const index_t W = g.input[R - 1], kw = g.kernel[R - 1];
        const index_t m = detail::same_segment<R>(d_);
        constexpr index_t slack = 64;  // >= any vector width
        const std::size_t size = static_cast<std::size_t>(kw * (m + slack));
        mask_f.assign(size, 0.0f);
        mask_d.assign(size, 0.0);
        const std::uint32_t ones32 = ~std::uint32_t(0);
        const std::uint64_t ones64 = ~std::uint64_t(0);
        for (index_t j = 0; j < kw; ++j)
            for (index_t i = 0; i < m; ++i) {
                const index_t x = i % W + j - pl;
                if (x < 0 || x >= W) continue;
                const std::size_t at = static_cast<std::size_t>(j * (m + slack) + i);
                std::memcpy(&mask_f[at], &ones32, sizeof ones32);
                std::memcpy(&mask_d[at], &ones64, sizeof ones64);
            }
    }

    // 1 / divisor for each output of a plane (the divisor in double, the quotient rounded once),
    // an empty window's 0 made 1 (0 * 1 = 0) or kept under empty_window_nan (0 * inf = NaN);
    // padded with 1s for whole-vector reads.
    void build_plane_reciprocals() {
        const pool_geometry<R>& g = d_.geometry;
        const std::size_t n = static_cast<std::size_t>(d_.output_spatial_volume()), pad = 64;
        d_.plane_rdiv_f.assign(n + pad, 1.0f);
        d_.plane_rdiv_d.assign(n + pad, 1.0);
        // Row by row, each reciprocal divided only when the divisor changes: per output, the
        // index arithmetic and the division took 230 of a 224x224 plan's 530 us.
        const index_t Wo = g.output[R - 1];
        const std::size_t rows = n / static_cast<std::size_t>(Wo);
        double prev = -1.0, rd = 1.0;
        float rf = 1.0f;
        for (std::size_t r = 0; r < rows; ++r) {
            const detail::window* w[R];
            index_t rest = static_cast<index_t>(r);
            for (std::size_t a = R - 1; a-- > 0;) {
                w[a] = d_.axis(a) + rest % g.output[a];
                rest /= g.output[a];
            }
            for (index_t o = 0; o < Wo; ++o) {
                w[R - 1] = d_.axis(R - 1) + o;
                bool empty = false;
                const double div = detail::window_divisor<R>(d_, w, empty);
                const double eff = empty ? (d_.empty_window_nan ? 0.0 : 1.0) : div;
                if (eff != prev) {
                    prev = eff;
                    rd = 1.0 / eff;
                    rf = static_cast<float>(rd);
                }
                const std::size_t i = r * static_cast<std::size_t>(Wo) + static_cast<std::size_t>(o);
                d_.plane_rdiv_f[i] = rf;
                d_.plane_rdiv_d[i] = rd;
            }
        }
        // Rows 1 .. H - 2 alike (the float grid is rounded from the double one, so it follows).
        if constexpr (R == 2) {
            const index_t H = g.output[0], W = g.output[1];
            const double* row1 = d_.plane_rdiv_d.data() + W;
            bool alike = H >= 3;
            for (index_t r = 2; alike && r + 1 < H; ++r)
                alike = std::memcmp(row1, row1 + (r - 1) * W, static_cast<std::size_t>(W) * sizeof(double)) == 0;
            d_.plane_rdiv_inner_rows = alike;
        }
    }

    // The tile kernel's per-axis lists of the outputs that tap each input (for backward).
    void build_tile_cover() {
        const pool_geometry<R>& g = d_.geometry;
        d_.tile_cover.clear();
        d_.tile_cover_at.clear();
        for (std::size_t a = 0; a < R; ++a) {
            d_.tile_cover_axis[a] = d_.tile_cover_at.size();
            const detail::window* w = d_.axis(a);
            const index_t d = d_.adaptive ? 1 : g.dilations[a];
            for (index_t x = 0; x < g.input[a]; ++x) {
                d_.tile_cover_at.push_back(static_cast<index_t>(d_.tile_cover.size()));
                const detail::window cv = d_.cover(a, x);
                for (index_t o = cv.first; o < cv.first + cv.count; ++o) {
                    const index_t off = x - w[o].first;
                    if (w[o].count > 0 && off >= 0 && off % d == 0 && off / d < w[o].count) d_.tile_cover.push_back(o);
                }
            }
            d_.tile_cover_at.push_back(static_cast<index_t>(d_.tile_cover.size()));
        }
    }

    // Everything the other kernels read, derived from the windows.
    void derive_tables() {
        const pool_geometry<R>& g = d_.geometry;
        build_cover();
        d_.global = true;
        double max_div = 1.0;
        for (std::size_t a = 0; a < R; ++a) {
            const detail::window* w = d_.axis(a);
            d_.global = d_.global && g.output[a] == 1 && w->first == 0 && w->count == g.input[a];
            index_t m = 0;
            for (index_t o = 0; o < g.output[a]; ++o) m = std::max(m, w[o].divisor);
            max_div *= static_cast<double>(m);
        }
        d_.max_divisor = d_.divisor_override > 0 ? static_cast<double>(d_.divisor_override) : max_div;
        d_.cl_ext = detail::cl_measure<R>(d_);

        constexpr std::size_t pad = 64;  // >= any vector width
        const detail::window* last = d_.axis(R - 1);
        const std::size_t n = static_cast<std::size_t>(g.output[R - 1]);
        d_.last_div_f.assign(n + pad, 1.0f);
        d_.last_div_d.assign(n + pad, 1.0);
        bool nan_empty = false;  // backward's divisors differ (empty windows kept 0 for NaN)
        for (std::size_t o = 0; o < n; ++o) {
            const index_t f = last[o].divisor;
            const double eff = f != 0 ? static_cast<double>(f) : (d_.empty_window_nan ? 0.0 : 1.0);
            d_.last_div_f[o] = static_cast<float>(eff);
            d_.last_div_d[o] = eff;
            nan_empty = nan_empty || eff == 0.0;
        }
        // Else backward reads the forward rows (plan_data::last_backward_divisor): 12 bytes
        // less per output, which 1-D plans of long rows keep per input position.
        d_.last_bdiv_f.clear();
        d_.last_bdiv_d.clear();
        if (nan_empty) {
            d_.last_bdiv_f.assign(n + pad, 1.0f);
            d_.last_bdiv_d.assign(n + pad, 1.0);
            for (std::size_t o = 0; o < n; ++o) {
                const index_t f = last[o].divisor;
                d_.last_bdiv_f[o] = f != 0 ? static_cast<float>(f) : 1.0f;
                d_.last_bdiv_d[o] = f != 0 ? static_cast<double>(f) : 1.0;
            }
        }
        // A flipped plan only feeds the channels-last forward kernel's sum: it needs no more.
        if (d_.flipped_own) return;

        if (detail::same_geometry<R>(d_)) build_same_masks();
        if (detail::same_geometry<R>(d_) || detail::tile_geometry<R>(d_, true) || detail::perm_geometry<R>(d_) ||
            detail::perm_plane_geometry<R>(d_) || detail::s2_geometry<R>(d_))
            build_plane_reciprocals();
#if AVGPOOL_PERM_KERNEL
        if constexpr (R == 2) {
            if (detail::perm_plane_geometry<R>(d_) && !d_.plane_rdiv_f.empty())
                d_.perm_plane_f = std::make_shared<const detail::perm_plane_tables>(d_);
        }
#endif
        if (detail::perm_geometry<R>(d_)) {
            d_.perm_rows = detail::perm_rows<R>(d_);
            detail::perm_horizontal<R>(d_, d_.perm_hchunks, d_.perm_hidx, d_.perm_hidx_eo, d_.perm_hmask, d_.perm_htaps);
            detail::perm_slices_first<R>(d_, d_.perm_slices, d_.perm_hrows);
        }
        if (detail::s2_geometry<R>(d_)) {  // (AVX2 code; with AVX-512, 2-D planes)
            d_.perm_rows = detail::perm_rows<R>(d_);
            d_.s2_forward = true;
        }
        if (detail::tile_geometry<R>(d_, true)) build_tile_cover();  // backward's, the wider
        if (detail::flat_geometry<R>(d_) || detail::same_geometry<R>(d_)) {
            // The whole divisor of each output: the override, or the product of the per-axis
            // factors with an empty window's 0 made 1 (0 / 1 = 0) or kept (0 / 0 = NaN).
            auto eff = [this](double prod) {
                if (d_.divisor_override > 0) return static_cast<double>(d_.divisor_override);
                return prod != 0 ? prod : (d_.empty_window_nan ? 0.0 : 1.0);
            };
            const index_t Wo = g.output[R - 1];
            index_t rows = 1;  // outer output rows of a plane (every axis but the last)
            for (std::size_t a = 0; a + 1 < R; ++a) rows *= g.output[a];
            // + pad: the kernel reads whole vectors past a row's end (values unused).
            const std::size_t size = static_cast<std::size_t>(rows * Wo);
            d_.flat_div_f.assign(size + pad, 1.0f);
            d_.flat_div_d.assign(size + pad, 1.0);
            for (index_t r = 0; r < rows; ++r) {
                double outer = 1.0;  // the outer axes' factors of row r
                index_t rest = r;
                for (std::size_t a = R - 1; a-- > 0;) {
                    outer *= static_cast<double>(d_.axis(a)[rest % g.output[a]].divisor);
                    rest /= g.output[a];
                }
                for (index_t o = 0; o < Wo; ++o) {
                    const double v = eff(outer * static_cast<double>(last[o].divisor));
                    d_.flat_div_f[static_cast<std::size_t>(r * Wo + o)] = static_cast<float>(v);
                    d_.flat_div_d[static_cast<std::size_t>(r * Wo + o)] = v;
                }
            }
        }
    }

    // The tables only backward reads (detail::backward_tables), on the first backward call:
    // const, as they go to the shared cell, built once whichever thread calls first (the
    // others wait for them).
    void build_backward() const {
        detail::backward_cell<R>& c = *d_.lazy;
        if (c.built.load(std::memory_order_acquire)) return;
        const std::lock_guard<std::mutex> hold(c.lock);
        if (c.built.load(std::memory_order_relaxed)) return;
        derive_backward_tables();
        c.built.store(true, std::memory_order_release);
    }
    void derive_backward_tables() const {
        if (d_.flipped_own) return;
        detail::backward_tables<R>& b = d_.bwd_mut();
#if AVGPOOL_PERM_KERNEL
        if (d_.pixel_kernel) {
            auto shape = std::make_shared<const detail::px_bshape>(detail::px_bmeasure<R>(d_));
            if (shape->phases > 0) b.px_b = std::move(shape);
        }
        if constexpr (R == 2) {
            if (d_.perm_plane_f != nullptr && detail::perm_plane_backward::applicable(d_))
                b.perm_plane_b = std::make_shared<const detail::perm_plane_backward>(d_);
        }
#endif
        if (detail::perm_geometry<R>(d_) && d_.geometry.input[R - 1] <= 16 * detail::perm_bmax_vecs) {
            b.perm_bcols = detail::perm_backward_columns<R>(d_, b.perm_btaps);
            b.perm_bbase = detail::perm_backward_bases<R>(d_, b.perm_bcols, b.perm_btaps);
            if (!b.perm_bbase.empty()) {
                b.perm_brows = detail::perm_backward_rows<R>(d_, detail::perm_backward_zero_gap(b.perm_bbase));
                detail::perm_backward_lanes<R>(d_, b.perm_bidx, b.perm_bmask);
                if (!b.perm_brows.empty() && detail::perm_bsep_geometry<R>(d_))
                    detail::perm_backward_outer<R>(d_, b.perm_bouter, b.perm_bouter_at, b.perm_bouter_k);
            }
        }
        if (detail::backward_rows_kept<R>(d_)) detail::build_backward_rows<R>(d_, b.bw_taps, b.bw_rows);
        // (AVX2 code, from the row tables; where backward_cf divides each output row first.)
        detail::s2_backward_table<R>(d_, detail::backward_cf_ring_fits<float, R>(d_));
        if (d_.memory_layout == layout::channels_last) {
            detail::build_backward_cols<R>(d_, b.bw_cols, b.bw_col_at);
            detail::build_backward_cl_facts<R>(d_);
        }
        if (detail::flip_geometry<R>(d_)) build_flipped();
    }

    // The plan of the flipped windows over the output (plan_data::flipped): window x of the
    // flipped plan covers exactly the outputs whose windows tap input x. At stride 1 that is a
    // pooling window (pads kernel - 1 - pad), which keeps the kernel's fixed-window paths;
    // at larger strides the windows come from the cover tables (as adaptive windows do).
    void build_flipped() const {
        const pool_geometry<R>& g = d_.geometry;
        bool unit = true;
        for (std::size_t a = 0; a < R; ++a) {
            unit = unit && g.strides[a] == 1;
            for (index_t x = 0; x < g.input[a]; ++x)
                if (d_.cover(a, x).count == 0) return;  // an input no window taps
        }
        pooling f;
        detail::plan_data<R>& t = f.d_;
        t.flipped_own = true;
        t.adaptive = !unit;
        t.input_shape = d_.output_shape;
        t.output_shape = d_.input_shape;
        t.memory_layout = d_.memory_layout;
        t.divisor = divisor_type::exclude_pad;  // (it sums: the divisors only bound max_divisor)
        for (std::size_t a = 0; a < R; ++a) {
            t.geometry.input[a] = g.output[a];
            t.geometry.output[a] = g.input[a];
            t.geometry.kernel[a] = g.kernel[a];
            t.geometry.strides[a] = t.geometry.dilations[a] = 1;
            if (unit) {
                t.geometry.pads_begin[a] = g.kernel[a] - 1 - g.pads_begin[a];
                t.geometry.pads_end[a] = g.kernel[a] - 1 - g.pads_end[a];
            }
        }
        if (unit) {
            f.build_windows();
        } else {
            f.allocate_windows();
            for (std::size_t a = 0; a < R; ++a) {
                index_t largest = 1;
                for (index_t x = 0; x < g.input[a]; ++x) {
                    detail::window w = d_.cover(a, x);
                    w.divisor = w.count;
                    t.windows[t.offset[a] + static_cast<std::size_t>(x)] = w;
                    largest = std::max(largest, w.count);
                }
                t.geometry.kernel[a] = largest;
            }
            f.derive_tables();
        }
        d_.bwd_mut().flipped = std::make_shared<const detail::plan_data<R>>(std::move(t));
    }

    // Calls fn(kernel) with the channels-first plane kernel for element type U that serves
    // this plan (the first that applies), and says whether there was one.
    // M: the element type in memory (U, or a 16-bit type the kernel converts in registers).
    template <class U, class M, class Fn>
    bool with_plane_kernel(detail::pool_op op, Fn&& fn) const {
        // (The stride-2 kernel first: with AVX-512 it takes the 2-D planes it serves from the
        // permute kernel, see AVGPOOL_STRIDE2_KERNEL.)
#if AVGPOOL_STRIDE2_KERNEL
        if constexpr (std::is_same<U, float>::value && std::is_same<M, float>::value) {
            if (detail::s2_applicable<U, R, M>(d_)) {
                fn(detail::s2_kernel<R>(d_, op));
                return true;
            }
        }
#endif
#if AVGPOOL_PERM_KERNEL
        if constexpr (detail::perm_types<U, M>()) {
            if (detail::perm_applicable<U, R, M>(d_)) {
                fn(detail::perm_kernel<R, M>(d_, op));
                return true;
            }
            if constexpr (R == 2) {
                if (detail::perm_plane_applicable<U, R, M>(d_)) {
                    fn(detail::perm_plane_kernel<M>(d_, op));
                    return true;
                }
            }
        }
#endif
        if (detail::pair_applicable<U, R>(d_)) {
            fn(detail::pair_kernel<U, R, M>(d_, op));
        } else if (detail::same_applicable<U, R>(d_)) {
            fn(detail::same_kernel<U, R, M>(d_, op));
        } else if (detail::tile_applicable<U, R>(d_)) {
            fn(detail::tile_kernel<U, R, M>(d_, op));
        } else if (detail::flat_applicable<U, R>(d_)) {
            fn(detail::flat_kernel<U, R, M>(d_, op));
        } else if (detail::cf_applicable<U, R>(d_)) {
            fn(detail::cf_kernel<U, R, M>(d_, op));
        } else {
            return false;
        }
        return true;
    }

    // As with_plane_kernel for backward: fn gets a callable (grad_out, grad_in, begin, end).
    template <class U, class Fn>
    bool with_backward_kernel(Fn&& fn) const {
#if AVGPOOL_STRIDE2_KERNEL
        if constexpr (std::is_same<U, float>::value) {
            if (detail::s2_backward_applicable<U, R>(d_)) {
                const detail::s2_backward<R> k(d_);
                fn([&k](const U* g, U* gi, index_t b, index_t e) { k.run(g, gi, b, e); });
                return true;
            }
        }
#endif
#if AVGPOOL_PERM_KERNEL
        if constexpr (std::is_same<U, float>::value) {
            if (detail::perm_backward_applicable<U, R>(d_)) {
                const detail::perm_backward<R> k(d_);
                fn([&k](const U* g, U* gi, index_t b, index_t e) { k.run(g, gi, b, e); });
                return true;
            }
            if constexpr (R == 2) {
                if (d_.bwd().perm_plane_b != nullptr) {
                    const detail::perm_plane_backward& k = *d_.bwd().perm_plane_b;
                    fn([&k](const U* g, U* gi, index_t b, index_t e) { k.run(g, gi, b, e); });
                    return true;
                }
            }
        }
#endif
        if (detail::pair_applicable<U, R>(d_)) {
            const detail::pair_kernel<U, R> k(d_, detail::pool_op::average);
            fn([&k](const U* g, U* gi, index_t b, index_t e) { k.run_backward(g, gi, b, e); });
        } else if (detail::same_applicable<U, R>(d_)) {
            const detail::same_kernel<U, R> k(d_, detail::pool_op::sum, true);
            fn([&k](const U* g, U* gi, index_t b, index_t e) { k.run_backward(g, gi, b, e); });
        } else if (detail::tile_applicable<U, R>(d_, true)) {
            const detail::tile_kernel<U, R> k(d_, detail::pool_op::average);
            fn([&k](const U* g, U* gi, index_t b, index_t e) { k.run_backward(g, gi, b, e); });
        } else if (detail::backward_cf_applicable<U, R>(d_)) {
            const detail::backward_cf<U, R> k(d_);
            fn([&k](const U* g, U* gi, index_t b, index_t e) { k.run(g, gi, b, e); });
        } else {
            return false;
        }
        return true;
    }

    // Outer input rows of a plane (every axis but the last): the units of the few-plane split.
    index_t backward_rows() const noexcept {
        index_t n = 1;
        for (std::size_t a = 0; a + 1 < R; ++a) n *= d_.input_shape[a + 2];
        return n;
    }

    // The channels-first kernels that split few planes by input rows, in the order backward
    // picks them: fn gets a callable (grad_out, grad_in, plane, row_begin, row_end) whose rows
    // come out as the whole plane's. False when none serves the plan.
    template <class U, class Fn>
    bool with_backward_rows_kernel(Fn&& fn) const {
#if AVGPOOL_STRIDE2_KERNEL
        if constexpr (std::is_same<U, float>::value) {
            if (detail::s2_backward_applicable<U, R>(d_)) {
                const detail::s2_backward<R> k(d_);
                fn([&k](const U* g, U* gi, index_t p, index_t r0, index_t r1) { k.run_rows(g, gi, p, r0, r1); });
                return true;
            }
        }
#endif
#if AVGPOOL_PERM_KERNEL
        if constexpr (std::is_same<U, float>::value) {
            if (detail::perm_backward_applicable<U, R>(d_)) {
                const detail::perm_backward<R> k(d_);
                fn([&k](const U* g, U* gi, index_t p, index_t r0, index_t r1) { k.run_rows(g, gi, p, r0, r1); });
                return true;
            }
        }
#endif
        if (detail::pair_applicable<U, R>(d_)) {
            const detail::pair_kernel<U, R> k(d_, detail::pool_op::average);
            fn([&k](const U* g, U* gi, index_t p, index_t r0, index_t r1) { k.run_backward_rows(g, gi, p, r0, r1); });
            return true;
        }
        if (detail::same_applicable<U, R>(d_)) {
            const detail::same_kernel<U, R> k(d_, detail::pool_op::sum, true);
            if (k.splits_backward_rows()) {
                fn([&k](const U* g, U* gi, index_t p, index_t r0, index_t r1) { k.run_backward_rows(g, gi, p, r0, r1); });
                return true;
            }
        }
        if (!d_.global && detail::backward_cf_applicable<U, R>(d_)) {
            const detail::backward_cf<U, R> k(d_);
            fn([&k](const U* g, U* gi, index_t p, index_t r0, index_t r1) { k.run_rows(g, gi, p, r0, r1); });
            return true;
        }
        return false;
    }

    // 16-bit backward runs the float kernels on float copies of a few planes at a time, so each
    // element is converted once in and once out, and the kernel's traffic stays in L2.
    // Each chunk's copy is [slack][planes][slack]: the slack (zeros) lets every plane take the
    // same vector path whatever its position, so results do not depend on the executor.
    // fn(src, dst, begin, end) runs planes [begin, end) of the staged src into dst.
    template <class T, class Fn>
    void stage_planes(const T* src, T* dst, index_t src_plane, index_t dst_plane, const detail::exec_ref& exec, const Fn& fn) const {
        const index_t group = std::max<index_t>(1, detail::stage_elements / (src_plane + dst_plane));
        exec(d_.input_shape[0] * d_.input_shape[1], [&](index_t begin, index_t end) {
            const index_t g = std::min(group, end - begin);
            const detail::stage_area area(g, src_plane, dst_plane);
            for (index_t p = begin; p < end; p += g) {
                const index_t n = std::min(g, end - p);
                detail::to_float(src + p * src_plane, area.src, static_cast<std::size_t>(n * src_plane));
                // The planes past n (a short last group) hold the previous group's values.
                fn(static_cast<const float*>(area.src), area.dst, index_t(0), n);
                detail::from_float(area.dst, dst + p * dst_plane, static_cast<std::size_t>(n * dst_plane));
            }
        });
    }

    template <class T>
    status run(const T* in, T* out, detail::pool_op op, const detail::exec_ref& exec) const;

    detail::plan_data<R> d_;
    // Channels-last plans of few channels: the channels-first plan that computes them (see
    // build_flat_channels_last); null otherwise.
    std::shared_ptr<const pooling> flat_;
};

template <std::size_t R>
template <class T>
status pooling<R>::run_backward(const T* grad_out, T* grad_in, const detail::exec_ref& exec) const {
    static_assert(detail::is_element<T>::value, "avgpool: unsupported element type");
    if (grad_out == nullptr) return detail::null_pointer_error("grad_out");
    if (grad_in == nullptr) return detail::null_pointer_error("grad_in");
    if (d_.lazy == nullptr) return detail::moved_from_error();
    if (flat_ != nullptr) return flat_->run_backward(grad_out, grad_in, exec);
    build_backward();
    const index_t items = d_.input_shape[0] * d_.input_shape[1];
    if constexpr (std::is_floating_point<T>::value || detail::is_half<T>::value) {
        // Channels-last: items are input rows, so that N = 1 still splits across threads.
        using U = detail::compute_t<T>;
#if AVGPOOL_PERM_KERNEL
        if constexpr (std::is_same<U, float>::value) {
            if (d_.bwd().px_b != nullptr) {
                const detail::px_backward<R, T> kernel(d_);
                exec(kernel.items(), [&kernel, grad_out, grad_in](index_t b, index_t e) { kernel.run(grad_out, grad_in, b, e); });
                return status{};
            }
        }
#endif
        if (detail::backward_global_applicable<U, R>(d_)) {
            if (d_.memory_layout == layout::channels_last) {
                const detail::backward_cl_global<U, R, T> kernel(d_);
                exec(kernel.items(), [&kernel, grad_out, grad_in](index_t b, index_t e) { kernel.run(grad_out, grad_in, b, e); });
            } else {
                const detail::backward_cf_global<U, R, T> kernel(d_);
                exec(kernel.items(), [&kernel, grad_out, grad_in](index_t b, index_t e) { kernel.run(grad_out, grad_in, b, e); });
            }
            return status{};
        }
        if (detail::backward_flip_applicable<U, R>(d_)) {
            const bool preferred = detail::backward_flip_preferred<U, R>(d_);
            if (preferred || detail::backward_flip_pairs_candidate<U, R>(d_)) {
                const detail::backward_cl_flip<U, R, T> kernel(d_);
                if (kernel.usable() && (preferred || kernel.pairs_win())) {
                    exec(kernel.items(), [&kernel, grad_out, grad_in](index_t b, index_t e) { kernel.run(grad_out, grad_in, b, e); });
                    return status{};
                }
            }
        }
        if (d_.memory_layout == layout::channels_last && detail::backward_cl_applicable<U, R>(d_)) {
            const detail::backward_cl<U, R, T> kernel(d_);
            exec(kernel.items(), [&kernel, grad_out, grad_in](index_t b, index_t e) { kernel.run(grad_out, grad_in, b, e); });
            return status{};
        }
    }
    if constexpr (std::is_floating_point<T>::value) {
        // Few planes: blocks of input rows (as forward splits output rows), by shape only.
        const detail::plane_blocks rows(items, backward_rows(), input_size());
        if (rows.split() && with_backward_rows_kernel<T>([&](const auto& kernel) {
                exec(rows.items(), [&rows, &kernel, grad_out, grad_in](index_t b, index_t e) {
                    rows.for_each(b, e, [&](index_t plane, index_t r0, index_t r1) { kernel(grad_out, grad_in, plane, r0, r1); });
                });
            }))
            return status{};
        const bool done = with_backward_kernel<T>([&](const auto& kernel) {
            exec(items, [&kernel, grad_out, grad_in](index_t b, index_t e) { kernel(grad_out, grad_in, b, e); });
        });
        if (done) return status{};
    } else if (d_.memory_layout == layout::channels_first) {
        // grad_out planes are the staged inputs, grad_in planes the outputs.
        auto staged = [&](const auto& kernel) {
            stage_planes(grad_out, grad_in, d_.output_spatial_volume(), d_.input_spatial_volume(), exec, kernel);
        };
        // Where float splits few planes by rows, the same row kernels on the same blocks of
        // rows, so that the result is float's on the same values, rounded once (the plane
        // kernels, which float runs on many planes, could differ by an ulp), and few planes
        // still use every thread. Each block stages its whole gradient plane.
        const detail::plane_blocks rows(items, backward_rows(), input_size());
        const bool done = (rows.split() && with_backward_rows_kernel<float>([&](const auto& kernel) {
                              const index_t src_plane = d_.output_spatial_volume(), dst_plane = d_.input_spatial_volume();
                              const index_t row = dst_plane / rows.rows;  // elements of an input row
                              exec(rows.items(), [&](index_t b, index_t e) {
                                  const detail::stage_area area(1, src_plane, dst_plane);
                                  rows.for_each(b, e, [&](index_t plane, index_t r0, index_t r1) {
                                      detail::to_float(grad_out + plane * src_plane, area.src, static_cast<std::size_t>(src_plane));
                                      kernel(area.src, area.dst, index_t(0), r0, r1);
                                      detail::from_float(area.dst + r0 * row, grad_in + plane * dst_plane + r0 * row,
                                                         static_cast<std::size_t>((r1 - r0) * row));
                                  });
                              });
                          })) ||
                          with_backward_kernel<float>(staged);
        if (done) return status{};
    }
    exec(items, [this, grad_out, grad_in](index_t b, index_t e) {
        detail::reference_backward<T, R>(d_, grad_out, grad_in, b, e);
    });
    return status{};
}

template <std::size_t R>
template <class T>
status pooling<R>::run(const T* in, T* out, detail::pool_op op, const detail::exec_ref& exec) const {
    static_assert(detail::is_element<T>::value, "avgpool: unsupported element type");
    if (in == nullptr) return detail::null_pointer_error("in");
    if (out == nullptr) return detail::null_pointer_error("out");
    if (d_.lazy == nullptr) return detail::moved_from_error();
    if (flat_ != nullptr) return flat_->run(in, out, op, exec);
    const index_t items = d_.input_shape[0] * d_.input_shape[1];
    // A plane kernel over the executor's chunks of planes.
    auto planes = [&](const auto& kernel) {
        exec(items, [&kernel, in, out](index_t begin, index_t end) { kernel.run(in, out, begin, end); });
    };
    // fn(plane, first, end) over the executor's chunks of plane blocks.
    auto blocks = [&](const detail::plane_blocks& pb, const auto& fn) {
        exec(pb.items(), [&pb, &fn](index_t begin, index_t end) { pb.for_each(begin, end, fn); });
        return status{};
    };
    // SIMD kernels: float and double, and 16-bit storage through the float kernels, which
    // convert as they load and round once as they store (the same path as float, so a
    // 16-bit result is the float result on the same values, rounded).
    if constexpr (std::is_floating_point<T>::value || detail::is_half<T>::value) {
        using U = detail::compute_t<T>;
#if AVGPOOL_PIXEL_KERNEL
        if constexpr (std::is_same<U, float>::value) {
            if (detail::px_applicable<R>(d_)) {
                // Items are output rows, as below.
                const detail::px_kernel<R, T> kernel(d_, op);
                exec(kernel.items(), [&kernel, in, out](index_t begin, index_t end) { kernel.run(in, out, begin, end); });
                return status{};
            }
        }
#endif
        if (d_.memory_layout == layout::channels_last && detail::cl_applicable<U, R>(d_)) {
            // Items are output rows, so that N = 1 still splits across threads.
            const detail::cl_kernel<U, R, T> kernel(d_, op);
            exec(kernel.items(), [&kernel, in, out](index_t begin, index_t end) { kernel.run(in, out, begin, end); });
            return status{};
        }
        // Few planes: blocks of outer output rows (every axis but the last) through the
        // block kernel where it applies to rows up to flat_split_max_width, else the
        // row-wise kernel, so that N = 1 with few channels still uses every thread. The
        // choice reads the shape only, so each output comes from the same code whatever
        // the executor (bit-identical results).
        index_t outer_rows = 1;
        for (std::size_t a = 0; a + 1 < R; ++a) outer_rows *= d_.output_shape[a + 2];
        const detail::plane_blocks rows(items, d_.global ? 1 : outer_rows, input_size());
        auto split_rows = [&](const auto& kernel) {
            exec(rows.items(), [&rows, &kernel, in, out](index_t begin, index_t end) {
                rows.for_each_run(
                    begin, end, [&](index_t plane, index_t r0, index_t r1) { kernel.run_rows(in, out, plane, r0, r1); },
                    [&](index_t first, index_t last) { kernel.run(in, out, first, last); });
            });
            return status{};
        };
#if AVGPOOL_PERM_KERNEL
        if constexpr (detail::perm_types<U, T>()) {
            // (Not where the stride-2 kernel takes the plan, below: with_plane_kernel's order.)
            if (rows.split() && detail::perm_applicable<U, R, T>(d_) && !detail::s2_applicable<U, R, T>(d_))
                return split_rows(detail::perm_kernel<R, T>(d_, op));
        }
#endif
        if (rows.split() && detail::pair_applicable<U, R>(d_)) return split_rows(detail::pair_kernel<U, R, T>(d_, op));
        if (rows.split() && detail::same_applicable<U, R>(d_)) {
            const detail::same_kernel<U, R, T> kernel(d_, op);
            if (kernel.splits_rows()) return split_rows(kernel);
        }
#if AVGPOOL_STRIDE2_KERNEL
        if constexpr (std::is_same<U, float>::value && std::is_same<T, float>::value) {
            if (rows.split() && detail::s2_applicable<U, R, T>(d_)) {
                const detail::s2_kernel<R> kernel(d_, op);
                if (kernel.splits_rows()) return split_rows(kernel);
            }
        }
#endif
        if (rows.split() && detail::flat_split_applicable<U, R>(d_)) return split_rows(detail::flat_kernel<U, R, T>(d_, op));
        if (rows.split() && detail::cf_applicable<U, R>(d_)) return split_rows(detail::cf_kernel<U, R, T>(d_, op));
        if (with_plane_kernel<U, T>(op, planes)) return status{};
    }
    // The reference: blocks of a plane's outputs when there are few planes (as above).
    const detail::plane_blocks outputs(items, d_.output_spatial_volume(), input_size());
    if (outputs.split()) {
        return blocks(outputs, [this, in, out, op](index_t plane, index_t o0, index_t o1) {
            detail::reference_pool_outputs<T, R>(d_, in, out, op, plane, o0, o1);
        });
    }
    exec(items, [this, in, out, op](index_t begin, index_t end) {
        detail::reference_pool<T, R>(d_, in, out, op, begin, end);
    });
    return status{};
}

namespace detail {
// The one-call functions: check pointers, make the plan, run it; throw the error when
// exceptions are on (else return it). Nothing is written on error.
template <class T, class MakePlan>
status one_call(const T* in, T* out, MakePlan make_plan) {
    status st{};
    if (in == nullptr) {
        st = null_pointer_error("in");
    } else if (out == nullptr) {
        st = null_pointer_error("out");
    } else {
        auto plan = make_plan();
        st = plan ? plan->forward(in, out) : status(plan.error_data());
    }
#if AVGPOOL_HAS_EXCEPTIONS
    if (!st) throw avgpool::error(st.error_data());
#endif
    return st;
}
}  // namespace detail

/// One call, no plan kept: out = average pooling of in. Throws avgpool::error on bad input
/// when exceptions are on (else returns it); the output buffer is untouched on error.
///
///     avgpool::pool_attrs<2> a;
///     a.kernel = {2, 2};
///     a.strides = {2, 2};
///     avgpool::avg_pool<float, 2>(in, {1, 3, 32, 32}, a, out);  // out: 1 x 3 x 16 x 16
template <class T, std::size_t R>
status avg_pool(const T* in, const dims<R + 2>& input_shape, const pool_attrs<R>& attrs, T* out,
                layout memory_layout = layout::channels_first) {
    return detail::one_call(in, out, [&] { return pooling<R>::create(input_shape, attrs, memory_layout); });
}

/// One call, no plan kept: adaptive average pooling of in to the output spatial extents
/// output_spatial. Throws avgpool::error on bad input when exceptions are on (else returns it);
/// the output buffer is untouched on error.
///
///     avgpool::adaptive_avg_pool<float, 2>(in, {1, 2048, 60, 60}, {6, 6}, out);  // PSPNet bin 6
template <class T, std::size_t R>
status adaptive_avg_pool(const T* in, const dims<R + 2>& input_shape, const dims<R>& output_spatial, T* out,
                         layout memory_layout = layout::channels_first) {
    return detail::one_call(
        in, out, [&] { return pooling<R>::create_adaptive(input_shape, output_spatial, memory_layout); });
}

/// Frees the scratch the calling thread keeps for plan runs (at most six blocks, none over
/// 64 MiB; a thread's exit frees them anyway) and returns their size in bytes. The thread's
/// next runs allocate again until warm. For long-lived threads that ran a large plan once
/// (a thread_pool's workers: the overload below).
///
///     plan->forward(big_in, big_out);       // warms this thread's scratch
///     avgpool::release_thread_scratch();    // gives it back to the heap
inline std::size_t release_thread_scratch() noexcept {
    detail::scratch_cache* const cache = detail::thread_scratch();
    return cache != nullptr ? cache->clear() : 0;
}

/// The same on every thread of pool: its workers and the calling thread (through
/// thread_pool::on_each_thread); returns the bytes freed in all. From inside a chunk of one
/// of pool's own calls it frees nothing and returns 0.
///
///     avgpool::thread_pool pool(4);
///     plan->forward(in, out, pool);              // each thread keeps its scratch
///     avgpool::release_thread_scratch(pool);     // all four give theirs back
inline std::size_t release_thread_scratch(const thread_pool& pool) {
    std::atomic<std::size_t> bytes{0};
    pool.on_each_thread([&bytes] { bytes.fetch_add(release_thread_scratch(), std::memory_order_relaxed); });
    return bytes.load(std::memory_order_relaxed);
}

AVGPOOL_END_NAMESPACE

// Compiling the kernels once (AVGPOOL_EXTERN_TEMPLATES, AVGPOOL_INSTANTIATE): every translation
// unit that runs a plan otherwise generates the kernels for its element types and ranks again,
// tens of seconds each at -O2. A project with many such files can define AVGPOOL_EXTERN_TEMPLATES
// everywhere (before the first include) and instantiate in one file of its own:
//
//     // avgpool_instances.cpp
//     #include <avgpool/avgpool.hpp>
//     AVGPOOL_INSTANTIATE(float, 2)        // one line per element type and rank the project uses
//
// With AVGPOOL_EXTERN_TEMPLATES, each of float, double, float16 and bfloat16 at ranks 1-3 that the
// program runs must be instantiated somewhere in it (AVGPOOL_INSTANTIATE_ALL() does all twelve),
// and float16 or bfloat16 at rank R needs float at rank R as well: their channels-last backward
// sums in float through float's kernel, which is then compiled once, with float's. Other ranks
// compile where they are used, as without the macro. Both macros go at global scope.
#define AVGPOOL_DETAIL_RUN_SPECS(PREFIX, T, R)                                                               \
    PREFIX template ::avgpool::status avgpool::pooling<R>::run<T>(const T*, T*, ::avgpool::detail::pool_op,  \
                                                                   const ::avgpool::detail::exec_ref&) const; \
    PREFIX template ::avgpool::status avgpool::pooling<R>::run_backward<T>(const T*, T*,                    \
                                                                            const ::avgpool::detail::exec_ref&) const; \
    PREFIX template class ::avgpool::detail::cl_kernel<::avgpool::detail::compute_t<T>, R, T>;
#define AVGPOOL_DETAIL_RUN_SPECS_ALL(PREFIX)                                                          \
    AVGPOOL_DETAIL_RUN_SPECS(PREFIX, float, 1) AVGPOOL_DETAIL_RUN_SPECS(PREFIX, float, 2)            \
    AVGPOOL_DETAIL_RUN_SPECS(PREFIX, float, 3) AVGPOOL_DETAIL_RUN_SPECS(PREFIX, double, 1)           \
    AVGPOOL_DETAIL_RUN_SPECS(PREFIX, double, 2) AVGPOOL_DETAIL_RUN_SPECS(PREFIX, double, 3)          \
    AVGPOOL_DETAIL_RUN_SPECS(PREFIX, ::avgpool::float16, 1)                                          \
    AVGPOOL_DETAIL_RUN_SPECS(PREFIX, ::avgpool::float16, 2)                                          \
    AVGPOOL_DETAIL_RUN_SPECS(PREFIX, ::avgpool::float16, 3)                                          \
    AVGPOOL_DETAIL_RUN_SPECS(PREFIX, ::avgpool::bfloat16, 1)                                         \
    AVGPOOL_DETAIL_RUN_SPECS(PREFIX, ::avgpool::bfloat16, 2)                                         \
    AVGPOOL_DETAIL_RUN_SPECS(PREFIX, ::avgpool::bfloat16, 3)

/// The kernels of plans of rank R (R spatial axes) on element type T, compiled here (see above).
#define AVGPOOL_INSTANTIATE(T, R) AVGPOOL_DETAIL_RUN_SPECS(, T, R)
/// AVGPOOL_INSTANTIATE for float, double, float16 and bfloat16 at ranks 1, 2 and 3.
#define AVGPOOL_INSTANTIATE_ALL() AVGPOOL_DETAIL_RUN_SPECS_ALL()

#ifdef AVGPOOL_EXTERN_TEMPLATES
AVGPOOL_DETAIL_RUN_SPECS_ALL(extern)
#endif

#endif  // AVGPOOL_POOLING_HPP
