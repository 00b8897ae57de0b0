// The framework front ends one by one: attribute parsing, defaults, every validation error
// with its exact message, version differences, and examples from the frameworks' own docs run
// through the core.
#include <gtest/gtest.h>

#include <avgpool/avgpool.hpp>
#include <avgpool/frontends/all.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace {

using avgpool::errc;
using avgpool::index_t;

// The result must be an error of this kind with exactly this message.
#define EXPECT_FE_ERROR(expr, code_, message_)                                   \
    do {                                                                         \
        const auto r_ = (expr);                                                  \
        ASSERT_FALSE(r_.ok()) << "accepted: " #expr;                             \
        EXPECT_EQ(r_.error_code(), code_) << r_.error().message();               \
        EXPECT_EQ(r_.error().message(), std::string(message_));                  \
    } while (0)

template <class T>
std::string why(const avgpool::result<T>& r) {
    return r.ok() ? std::string() : r.error().message();
}

// Output shape and values of attrs on a channels-first float input filled with 1, 2, 3, ...
template <std::size_t R>
std::vector<float> run(const avgpool::dims<R + 2>& shape, const avgpool::pool_attrs<R>& attrs,
                       avgpool::dims<R + 2>* out_shape = nullptr) {
    auto plan = avgpool::pooling<R>::create(shape, attrs);
    EXPECT_TRUE(plan.ok()) << why(plan);
    if (!plan) return {};
    std::vector<float> in(static_cast<std::size_t>(plan->input_size()));
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i + 1);
    std::vector<float> out(static_cast<std::size_t>(plan->output_size()));
    EXPECT_TRUE(plan->forward(in.data(), out.data()).ok());
    if (out_shape) *out_shape = plan->output_shape();
    return out;
}

// ---- ONNX ------------------------------------------------------------------------------------

avgpool::onnx::average_pool_attributes onnx_kernel(std::vector<index_t> k) {
    avgpool::onnx::average_pool_attributes n;
    n.kernel_shape = std::move(k);
    return n;
}

TEST(FrontendOnnx, DefaultsOfEveryOpset) {
    for (index_t opset : {1, 6, 7, 9, 10, 11, 18, 19, 21, 22, 23}) {
        SCOPED_TRACE(opset);
        auto a = avgpool::onnx::average_pool<2>(onnx_kernel({3, 2}), opset);
        ASSERT_TRUE(a.ok()) << why(a);
        EXPECT_EQ(a->kernel, (avgpool::dims<2>{3, 2}));
        EXPECT_EQ(a->strides, (avgpool::dims<2>{1, 1}));
        EXPECT_EQ(a->dilations, (avgpool::dims<2>{1, 1}));
        EXPECT_EQ(a->pads_begin, (avgpool::dims<2>{0, 0}));
        EXPECT_EQ(a->pads_end, (avgpool::dims<2>{0, 0}));
        EXPECT_EQ(a->auto_pad, avgpool::pad_type::explicit_pads);
        EXPECT_EQ(a->rounding, avgpool::rounding_type::floor);
        EXPECT_EQ(a->divisor, avgpool::divisor_type::exclude_pad);
        EXPECT_EQ(a->divisor_override, 0);
    }
}

TEST(FrontendOnnx, OpsetToOperatorVersion) {
    static_assert(avgpool::onnx::average_pool_version(0) == 0);
    static_assert(avgpool::onnx::average_pool_version(6) == 1);
    static_assert(avgpool::onnx::average_pool_version(9) == 7);
    static_assert(avgpool::onnx::average_pool_version(10) == 10);
    static_assert(avgpool::onnx::average_pool_version(18) == 11);
    static_assert(avgpool::onnx::average_pool_version(21) == 19);
    static_assert(avgpool::onnx::average_pool_version(30) == 22);
    EXPECT_FE_ERROR(avgpool::onnx::average_pool<1>(onnx_kernel({2}), 0), errc::invalid_value,
                    "opset = 0: must be >= 1");
}

TEST(FrontendOnnx, AttributesMapToCoreModes) {
    avgpool::onnx::average_pool_attributes n = onnx_kernel({5, 5});
    n.strides = {2, 1};
    n.pads = {1, 2, 3, 4};  // [x1_begin, x2_begin, x1_end, x2_end]
    n.ceil_mode = 1;
    n.count_include_pad = 1;
    auto a = avgpool::onnx::average_pool<2>(n, 11);
    ASSERT_TRUE(a.ok()) << why(a);
    EXPECT_EQ(a->strides, (avgpool::dims<2>{2, 1}));
    EXPECT_EQ(a->pads_begin, (avgpool::dims<2>{1, 2}));
    EXPECT_EQ(a->pads_end, (avgpool::dims<2>{3, 4}));
    EXPECT_EQ(a->rounding, avgpool::rounding_type::ceil_torch);
    EXPECT_EQ(a->divisor, avgpool::divisor_type::include_pad);

    n.ceil_mode = 0;
    n.count_include_pad = 0;
    a = avgpool::onnx::average_pool<2>(n, 11);
    ASSERT_TRUE(a.ok()) << why(a);
    EXPECT_EQ(a->rounding, avgpool::rounding_type::floor);
    EXPECT_EQ(a->divisor, avgpool::divisor_type::exclude_pad);

    const std::pair<const char*, avgpool::pad_type> modes[] = {
        {"NOTSET", avgpool::pad_type::explicit_pads}, {"", avgpool::pad_type::explicit_pads},
        {"SAME_UPPER", avgpool::pad_type::same_upper}, {"SAME_LOWER", avgpool::pad_type::same_lower},
        {"VALID", avgpool::pad_type::valid}};
    for (const auto& m : modes) {
        avgpool::onnx::average_pool_attributes k = onnx_kernel({2});
        k.auto_pad = m.first;
        auto b = avgpool::onnx::average_pool<1>(k, 22);
        ASSERT_TRUE(b.ok()) << m.first << ": " << why(b);
        EXPECT_EQ(b->auto_pad, m.second) << m.first;
    }
}

TEST(FrontendOnnx, AttributesAnOpsetDoesNotHave) {
    avgpool::onnx::average_pool_attributes n = onnx_kernel({2, 2});
    n.count_include_pad = 0;
    EXPECT_FE_ERROR(avgpool::onnx::average_pool<2>(n, 6), errc::unsupported,
                    "count_include_pad: not an attribute of AveragePool-1 (opset 6); added in opset 7");
    EXPECT_TRUE(avgpool::onnx::average_pool<2>(n, 7).ok());

    n = onnx_kernel({2, 2});
    n.ceil_mode = 1;
    EXPECT_FE_ERROR(avgpool::onnx::average_pool<2>(n, 9), errc::unsupported,
                    "ceil_mode: not an attribute of AveragePool-7 (opset 9); added in opset 10");
    EXPECT_TRUE(avgpool::onnx::average_pool<2>(n, 10).ok());

    // Opset 7 vs 19: dilations arrive with AveragePool-19.
    n = onnx_kernel({2, 2});
    n.dilations = {2, 2};
    EXPECT_FE_ERROR(avgpool::onnx::average_pool<2>(n, 7), errc::unsupported,
                    "dilations: not an attribute of AveragePool-7 (opset 7); added in opset 19");
    EXPECT_FE_ERROR(avgpool::onnx::average_pool<2>(n, 18), errc::unsupported,
                    "dilations: not an attribute of AveragePool-11 (opset 18); added in opset 19");
    for (index_t opset : {19, 22}) {
        auto a = avgpool::onnx::average_pool<2>(n, opset);
        ASSERT_TRUE(a.ok()) << why(a);
        EXPECT_EQ(a->dilations, (avgpool::dims<2>{2, 2}));
    }
}

TEST(FrontendOnnx, ValidationMessages) {
    using avgpool::onnx::average_pool;
    EXPECT_FE_ERROR(average_pool<2>(onnx_kernel({3, 3, 3}), 22), errc::rank_mismatch,
                    "kernel_shape: 3 given; expected 2, one per spatial axis");
    EXPECT_FE_ERROR(average_pool<2>(onnx_kernel({3, 0}), 22), errc::invalid_value,
                    "kernel_shape[1] = 0: must be >= 1");
    avgpool::onnx::average_pool_attributes n = onnx_kernel({3, 3});
    n.strides = {1};
    EXPECT_FE_ERROR(average_pool<2>(n, 22), errc::rank_mismatch, "strides: 1 given; expected 2, one per spatial axis");
    n.strides = {0, 1};
    EXPECT_FE_ERROR(average_pool<2>(n, 22), errc::invalid_value, "strides[0] = 0: must be >= 1");
    n = onnx_kernel({3, 3});
    n.pads = {1, 1};
    EXPECT_FE_ERROR(average_pool<2>(n, 22), errc::rank_mismatch,
                    "pads: 2 given; expected 4: [x1_begin, x2_begin, ..., x1_end, x2_end, ...]");
    n.pads = {1, 1, 1, -1};
    EXPECT_FE_ERROR(average_pool<2>(n, 22), errc::invalid_value, "pads[3] = -1: must be >= 0");
    n = onnx_kernel({3, 3});
    n.dilations = {1, 0};
    EXPECT_FE_ERROR(average_pool<2>(n, 22), errc::invalid_value, "dilations[1] = 0: must be >= 1");
    n.dilations = {1, 1, 1};
    EXPECT_FE_ERROR(average_pool<2>(n, 22), errc::rank_mismatch, "dilations: 3 given; expected 2, one per spatial axis");
    n = onnx_kernel({3, 3});
    n.ceil_mode = 2;
    EXPECT_FE_ERROR(average_pool<2>(n, 22), errc::invalid_value, "ceil_mode = 2: must be 0 or 1");
    n = onnx_kernel({3, 3});
    n.count_include_pad = -1;
    EXPECT_FE_ERROR(average_pool<2>(n, 22), errc::invalid_value, "count_include_pad = -1: must be 0 or 1");
    n = onnx_kernel({3, 3});
    n.auto_pad = "same_upper";  // ONNX spellings are upper case
    EXPECT_FE_ERROR(average_pool<2>(n, 22), errc::parse_error,
                    "auto_pad: unknown value \"same_upper\" (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)");
    // pads and auto_pad together: a non-zero pad contradicts auto_pad; zeros say nothing.
    n.auto_pad = "SAME_UPPER";
    n.pads = {0, 1, 0, 0};
    EXPECT_FE_ERROR(average_pool<2>(n, 22), errc::invalid_value,
                    "pads[1] = 1: must be 0 or absent when auto_pad is SAME_UPPER");
    n.pads = {0, 0, 0, 0};
    auto a = average_pool<2>(n, 22);
    ASSERT_TRUE(a.ok()) << why(a);
    EXPECT_EQ(a->auto_pad, avgpool::pad_type::same_upper);
}

// ceil_mode rounds VALID too, keeps SAME at ceil(X / s), and makes one window of a kernel past
// the padded input while the stride passes the end (ONNX shape inference and ONNX Runtime).
TEST(FrontendOnnx, CeilModeUnderAutoPadAndLongKernels) {
    auto extent = [](index_t X, avgpool::onnx::average_pool_attributes n, avgpool::onnx::options o = {}) -> index_t {
        auto a = avgpool::onnx::average_pool<1>(n, 19, o);
        EXPECT_TRUE(a.ok()) << why(a);
        auto g = avgpool::infer_geometry<1>({X}, *a);
        return g ? g->output[0] : -1;
    };
    for (bool legacy : {false, true}) {
        SCOPED_TRACE(legacy ? "legacy ceil" : "default");
        avgpool::onnx::options o;
        o.legacy_ceil = legacy;
        avgpool::onnx::average_pool_attributes n = onnx_kernel({2});
        n.strides = {2};
        n.ceil_mode = 1;
        n.auto_pad = "VALID";
        EXPECT_EQ(extent(5, n, o), 3);  // (5 - 2 + 1) / 2 + 1
        EXPECT_EQ(extent(3, n, o), 2);
        n.ceil_mode = 0;
        EXPECT_EQ(extent(5, n, o), 2);
        // SAME: ceil(X / s) whatever ceil_mode, also where the pads clamp to 0 (k 1, s 3).
        n = onnx_kernel({1});
        n.strides = {3};
        n.ceil_mode = 1;
        for (const char* same : {"SAME_UPPER", "SAME_LOWER"}) {
            n.auto_pad = same;
            EXPECT_EQ(extent(5, n, o), 2) << same;
            EXPECT_EQ(extent(2, n, o), 1) << same;
        }
        // A kernel longer than the (padded) input.
        n = onnx_kernel({2});
        n.strides = {2};
        n.ceil_mode = 1;
        EXPECT_EQ(extent(1, n, o), 1);
        n.kernel_shape = {3};
        n.pads = {1, 0};
        EXPECT_EQ(extent(1, n, o), 1);
    }
    // The value: X = 1, kernel 3, stride 2, pads 1 / 0, count_include_pad: the window [-1, 2)
    // counts the begin pad and the input, not the overhang past the end.
    avgpool::onnx::average_pool_attributes n = onnx_kernel({3});
    n.strides = {2};
    n.pads = {1, 0};
    n.ceil_mode = 1;
    n.count_include_pad = 1;
    EXPECT_EQ(run<1>({1, 1, 1}, *avgpool::onnx::average_pool<1>(n, 19)), (std::vector<float>{0.5f}));
    // Floor keeps rejecting it (the spec's formula gives no output).
    n.ceil_mode = 0;
    EXPECT_EQ(avgpool::pooling<1>::create({1, 1, 1}, *avgpool::onnx::average_pool<1>(n, 19)).error_code(),
              errc::kernel_too_large);
}

// ONNX Runtime's check: pads smaller than the kernel.
TEST(FrontendOnnx, PadsSmallerThanTheKernel) {
    avgpool::onnx::average_pool_attributes n = onnx_kernel({2, 3});
    n.pads = {1, 2, 1, 2};
    EXPECT_TRUE(avgpool::onnx::average_pool<2>(n, 11).ok());
    n.pads = {1, 3, 1, 2};
    EXPECT_FE_ERROR(avgpool::onnx::average_pool<2>(n, 11), errc::invalid_value,
                    "pads[1] = 3: must be smaller than kernel_shape[1] = 3");
    n.pads = {0, 0, 2, 0};
    EXPECT_FE_ERROR(avgpool::onnx::average_pool<2>(n, 11), errc::invalid_value,
                    "pads[2] = 2: must be smaller than kernel_shape[0] = 2");
}

TEST(FrontendOnnx, RuntimeRank) {
    avgpool::onnx::average_pool_attributes n = onnx_kernel({2, 2, 2});
    n.strides = {2, 2, 2};
    auto d = avgpool::onnx::average_pool_dynamic(n, 13);
    ASSERT_TRUE(d.ok()) << why(d);
    auto shape = avgpool::infer_output_shape({1, 3, 8, 8, 8}, *d);
    ASSERT_TRUE(shape.ok()) << why(shape);
    EXPECT_EQ(*shape, (std::vector<index_t>{1, 3, 4, 4, 4}));
    EXPECT_FE_ERROR(avgpool::onnx::average_pool_dynamic(onnx_kernel({}), 13), errc::rank_mismatch,
                    "kernel_shape: 0 given; expected at least 1, one per spatial axis");
}

// test_averagepool_2d_ceil_last_window_starts_on_pad: input 2x2, kernel 3, stride 3, pads 1.
// Runtimes drop the second window (it starts in the end padding); the opset 10-21 text keeps it.
TEST(FrontendOnnx, LegacyCeilSwitch) {
    avgpool::onnx::average_pool_attributes n = onnx_kernel({3, 3});
    n.strides = {3, 3};
    n.pads = {1, 1, 1, 1};
    n.ceil_mode = 1;
    n.count_include_pad = 1;
    avgpool::onnx::options legacy;
    legacy.legacy_ceil = true;
    for (index_t opset : {10, 11, 19, 22}) {
        SCOPED_TRACE(opset);
        auto now = avgpool::onnx::average_pool<2>(n, opset);
        auto old = avgpool::onnx::average_pool<2>(n, opset, legacy);
        ASSERT_TRUE(now.ok() && old.ok());
        EXPECT_EQ(now->rounding, avgpool::rounding_type::ceil_torch);
        EXPECT_EQ(old->rounding, opset < 22 ? avgpool::rounding_type::ceil : avgpool::rounding_type::ceil_torch);
        avgpool::dims<4> s_now{}, s_old{};
        run<2>({1, 1, 2, 2}, *now, &s_now);
        run<2>({1, 1, 2, 2}, *old, &s_old);
        EXPECT_EQ(s_now, (avgpool::dims<4>{1, 1, 1, 1}));
        EXPECT_EQ(s_old, opset < 22 ? (avgpool::dims<4>{1, 1, 2, 2}) : (avgpool::dims<4>{1, 1, 1, 1}));
    }
}

TEST(FrontendOnnx, GlobalAveragePool) {
    auto a = avgpool::onnx::global_average_pool<2>({2, 3, 5, 7});
    ASSERT_TRUE(a.ok()) << why(a);
    EXPECT_EQ(a->kernel, (avgpool::dims<2>{5, 7}));
    avgpool::dims<4> out{};
    const std::vector<float> y = run<2>({1, 1, 5, 7}, *a, &out);
    EXPECT_EQ(out, (avgpool::dims<4>{1, 1, 1, 1}));
    ASSERT_EQ(y.size(), 1u);
    EXPECT_FLOAT_EQ(y[0], 18.0f);  // mean of 1..35
    EXPECT_FE_ERROR(avgpool::onnx::global_average_pool<2>({1, 3, 5, 0}), errc::invalid_value,
                    "input_shape[3] = 0: spatial extent must be >= 1");
    auto d = avgpool::onnx::global_average_pool_dynamic({1, 3, 4, 4, 4});
    ASSERT_TRUE(d.ok()) << why(d);
    EXPECT_EQ(d->kernel, (std::vector<index_t>{4, 4, 4}));
    EXPECT_FE_ERROR(avgpool::onnx::global_average_pool_dynamic({1, 3}), errc::rank_mismatch,
                    "input_shape: rank 2; expected {N, C, spatial...}, rank >= 3");
}

// ---- OpenVINO --------------------------------------------------------------------------------

avgpool::openvino::avg_pool_data ov_layer(std::string_view kernel, std::string_view strides = "1,1",
                                          std::string_view pads_begin = "0,0", std::string_view pads_end = "0,0",
                                          std::string_view exclude_pad = "true") {
    avgpool::openvino::avg_pool_data d;
    d.kernel = kernel;
    d.strides = strides;
    d.pads_begin = pads_begin;
    d.pads_end = pads_end;
    d.exclude_pad = exclude_pad;
    return d;
}

TEST(FrontendOpenVino, ParsesAttributeStringsAndDefaults) {
    auto a = avgpool::openvino::avg_pool<2>(ov_layer(" 3 ,\t2 ", "2, 1", "+1,0", "0 , 1"), 1);
    ASSERT_TRUE(a.ok()) << why(a);
    EXPECT_EQ(a->kernel, (avgpool::dims<2>{3, 2}));
    EXPECT_EQ(a->strides, (avgpool::dims<2>{2, 1}));
    EXPECT_EQ(a->pads_begin, (avgpool::dims<2>{1, 0}));
    EXPECT_EQ(a->pads_end, (avgpool::dims<2>{0, 1}));
    EXPECT_EQ(a->dilations, (avgpool::dims<2>{1, 1}));
    EXPECT_EQ(a->auto_pad, avgpool::pad_type::explicit_pads);  // auto_pad absent: explicit
    EXPECT_EQ(a->rounding, avgpool::rounding_type::floor);     // rounding_type absent: floor
    EXPECT_EQ(a->divisor, avgpool::divisor_type::exclude_pad);

    // Empty pads are all 0 (OpenVINO fills them in); enum strings in any case.
    avgpool::openvino::avg_pool_data d = ov_layer("2,2", "2,2", "", "");
    d.exclude_pad = "FALSE";
    d.rounding_type = "CEIL";
    d.auto_pad = "Same_Lower";
    a = avgpool::openvino::avg_pool<2>(d, 14);
    ASSERT_TRUE(a.ok()) << why(a);
    EXPECT_EQ(a->pads_begin, (avgpool::dims<2>{0, 0}));
    EXPECT_EQ(a->rounding, avgpool::rounding_type::ceil);
    EXPECT_EQ(a->auto_pad, avgpool::pad_type::same_lower);
    EXPECT_EQ(a->divisor, avgpool::divisor_type::full_kernel_if_padded);

    const std::pair<const char*, avgpool::pad_type> modes[] = {
        {"explicit", avgpool::pad_type::explicit_pads}, {"notset", avgpool::pad_type::explicit_pads},
        {"same_upper", avgpool::pad_type::same_upper}, {"same_lower", avgpool::pad_type::same_lower},
        {"valid", avgpool::pad_type::valid}};
    for (const auto& m : modes) {
        d.auto_pad = m.first;
        auto b = avgpool::openvino::avg_pool<2>(d, 1);
        ASSERT_TRUE(b.ok()) << m.first << ": " << why(b);
        EXPECT_EQ(b->auto_pad, m.second) << m.first;
    }
    for (const char* t : {"true", "True", "1"}) {
        d.exclude_pad = t;
        EXPECT_EQ(avgpool::openvino::avg_pool<2>(d, 1)->divisor, avgpool::divisor_type::exclude_pad) << t;
    }
}

TEST(FrontendOpenVino, ParseErrors) {
    using avgpool::openvino::avg_pool;
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,x"), 1), errc::parse_error, "kernel[1]: not an integer: \"x\"");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,,2"), 1), errc::parse_error, "kernel[1]: empty entry in \"2,,2\"");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,"), 1), errc::parse_error, "kernel[1]: empty entry in \"2,\"");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer(",2"), 1), errc::parse_error, "kernel[0]: empty entry in \",2\"");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2 2"), 1), errc::parse_error, "kernel[0]: not an integer: \"2 2\"");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2;2"), 1), errc::parse_error, "kernel[0]: not an integer: \"2;2\"");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2", "1,--1"), 1), errc::parse_error, "strides[1]: not an integer: \"--1\"");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2", "1,2-"), 1), errc::parse_error, "strides[1]: not an integer: \"2-\"");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2", "1,+"), 1), errc::parse_error, "strides[1]: not an integer: \"+\"");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2", "1,0x2"), 1), errc::parse_error, "strides[1]: not an integer: \"0x2\"");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2", "1,1", "0,9223372036854775808"), 1), errc::overflow,
                    "pads_begin[1]: \"9223372036854775808\" does not fit in int64");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2", "1,1", "0,0", "99999999999999999999999,0"), 1), errc::overflow,
                    "pads_end[0]: \"99999999999999999999999\" does not fit in int64");
    // The extremes of int64 read fine; their range is checked after.
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2", "1,1", "-9223372036854775808,0"), 1), errc::invalid_value,
                    "pads_begin[0] = -9223372036854775808: must be >= 0");
    EXPECT_TRUE(avg_pool<1>(ov_layer("1", "9223372036854775807", "0", "0"), 1).ok());

    avgpool::openvino::avg_pool_data d = ov_layer("2,2");
    d.exclude_pad = "yes";
    EXPECT_FE_ERROR(avg_pool<2>(d, 1), errc::parse_error, "exclude-pad: not a boolean: \"yes\" (expected true or false)");
    d = ov_layer("2,2");
    d.rounding_type = "round";
    EXPECT_FE_ERROR(avg_pool<2>(d, 14), errc::parse_error,
                    "rounding_type: unknown value \"round\" (expected floor, ceil or ceil_torch)");
    d = ov_layer("2,2");
    d.auto_pad = "same";
    EXPECT_FE_ERROR(avg_pool<2>(d, 1), errc::parse_error,
                    "auto_pad: unknown value \"same\" (expected explicit, notset, same_upper, same_lower or valid)");
    // A long offending string is quoted with a cut.
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,,1"), 1), errc::parse_error,
                    "kernel[18]: empty entry in \"1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,...\"");
}

TEST(FrontendOpenVino, RequiredAttributesAndCounts) {
    using avgpool::openvino::avg_pool;
    avgpool::openvino::avg_pool_data d = ov_layer("2,2");
    d.kernel.reset();
    EXPECT_FE_ERROR(avg_pool<2>(d, 1), errc::parse_error, "kernel: required attribute is missing");
    d = ov_layer("2,2");
    d.strides.reset();
    EXPECT_FE_ERROR(avg_pool<2>(d, 1), errc::parse_error, "strides: required attribute is missing");
    d = ov_layer("2,2");
    d.pads_end.reset();
    EXPECT_FE_ERROR(avg_pool<2>(d, 1), errc::parse_error, "pads_end: required attribute is missing");
    d = ov_layer("2,2");
    d.exclude_pad.reset();
    EXPECT_FE_ERROR(avg_pool<2>(d, 1), errc::parse_error, "exclude-pad: required attribute is missing");

    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2,2"), 1), errc::rank_mismatch, "kernel: 3 given; expected 2, one per spatial axis");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2", "1"), 1), errc::rank_mismatch, "strides: 1 given; expected 2, one per spatial axis");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2", ""), 1), errc::rank_mismatch, "strides: 0 given; expected 2, one per spatial axis");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2", "1,1", "0,0,0"), 1), errc::rank_mismatch,
                    "pads_begin: 3 given; expected 2, one per spatial axis");
    // Every length is checked before any value.
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,0", "1"), 1), errc::rank_mismatch, "strides: 1 given; expected 2, one per spatial axis");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,0"), 1), errc::invalid_value, "kernel[1] = 0: must be >= 1");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2", "0,1"), 1), errc::invalid_value, "strides[0] = 0: must be >= 1");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2", "1,1", "0,-1"), 1), errc::invalid_value, "pads_begin[1] = -1: must be >= 0");

    auto r = avgpool::openvino::avg_pool_dynamic(ov_layer("2,3,4", "1,1,1", "", ""), 1);
    ASSERT_TRUE(r.ok()) << why(r);
    EXPECT_EQ(r->pads_end, (std::vector<index_t>{0, 0, 0}));
    EXPECT_FE_ERROR(avgpool::openvino::avg_pool_dynamic(ov_layer(""), 1), errc::rank_mismatch,
                    "kernel: 0 given; expected at least 1, one per spatial axis");
}

TEST(FrontendOpenVino, VersionDifferences) {
    using avgpool::openvino::avg_pool;
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("2,2"), 8), errc::unsupported, "version = 8: AvgPool has versions 1, 14 and 16");

    // ceil_torch arrives with AvgPool-14.
    avgpool::openvino::avg_pool_data d = ov_layer("2,2", "2,2", "1,1", "1,1");
    d.rounding_type = "ceil_torch";
    EXPECT_FE_ERROR(avg_pool<2>(d, 1), errc::unsupported,
                    "rounding_type: \"ceil_torch\" is not supported by AvgPool-1 (floor or ceil; ceil_torch needs AvgPool-14)");
    for (int v : {14, 16}) {
        auto a = avg_pool<2>(d, v);
        ASSERT_TRUE(a.ok()) << why(a);
        EXPECT_EQ(a->rounding, avgpool::rounding_type::ceil_torch);
    }
    // AvgPoolV1_2d_ceil_last_window_fully_in_padding vs AvgPoolV14_2d_ceil_torch_drops_window_starting_in_pad:
    // 3x3 input 1..9, kernel 2, stride 2, pads 1: ceil keeps a third window wholly in the end padding (0).
    d.rounding_type = "ceil";
    avgpool::dims<4> shape{};
    EXPECT_EQ(run<2>({1, 1, 3, 3}, *avg_pool<2>(d, 1), &shape),
              (std::vector<float>{1, 2.5f, 0, 5.5f, 7, 0, 0, 0, 0}));
    EXPECT_EQ(shape, (avgpool::dims<4>{1, 1, 3, 3}));
    d.rounding_type = "ceil_torch";
    EXPECT_EQ(run<2>({1, 1, 3, 3}, *avg_pool<2>(d, 14), &shape), (std::vector<float>{1, 2.5f, 5.5f, 7}));
    EXPECT_EQ(shape, (avgpool::dims<4>{1, 1, 2, 2}));

    // dilations arrive with AvgPool-16.
    d = ov_layer("2,2");
    d.dilations = "2,2";
    EXPECT_FE_ERROR(avg_pool<2>(d, 14), errc::unsupported, "dilations: not an attribute of AvgPool-14; added in AvgPool-16");
    EXPECT_FE_ERROR(avg_pool<2>(d, 1), errc::unsupported, "dilations: not an attribute of AvgPool-1; added in AvgPool-16");
    auto a = avg_pool<2>(d, 16);
    ASSERT_TRUE(a.ok()) << why(a);
    EXPECT_EQ(a->dilations, (avgpool::dims<2>{2, 2}));
    d.dilations = "";
    EXPECT_EQ(avg_pool<2>(d, 16)->dilations, (avgpool::dims<2>{1, 1}));
    d.dilations = "2,0";
    EXPECT_FE_ERROR(avg_pool<2>(d, 16), errc::invalid_value, "dilations[1] = 0: must be >= 1");
}

// OpenVINO's shape inference rounds by rounding_type whatever auto_pad resolved the pads to,
// and rejects a kernel past the padded input in every rounding.
TEST(FrontendOpenVino, RoundingUnderAutoPad) {
    using avgpool::openvino::avg_pool;
    auto extent = [](index_t X, const avgpool::openvino::avg_pool_data& d, int version) -> index_t {
        auto a = avg_pool<1>(d, version);
        EXPECT_TRUE(a.ok()) << why(a);
        auto g = avgpool::infer_geometry<1>({X}, *a);
        return g ? g->output[0] : -1;
    };
    struct row {
        const char *kernel, *strides, *auto_pad, *rounding;
        int version;
        index_t X, want;  // want -1: rejected
    };
    const row rows[] = {
        {"2", "2", "valid", "ceil", 1, 5, 3},
        {"2", "2", "valid", "ceil_torch", 14, 5, 3},
        {"2", "2", "valid", "floor", 1, 5, 2},
        // same_upper with pads clamped to 0 (kernel 1, stride 3): ceil keeps a window past the end.
        {"1", "3", "same_upper", "ceil", 1, 5, 3},
        {"1", "3", "same_upper", "ceil_torch", 14, 5, 2},
        {"1", "3", "same_upper", "floor", 1, 5, 2},
        // Kernel 3 on 2 values: "larger than the data shape after padding" even under ceil.
        {"3", "3", "explicit", "ceil", 1, 2, -1},
    };
    for (const row& r : rows) {
        avgpool::openvino::avg_pool_data d = ov_layer(r.kernel, r.strides, "0", "0");
        d.auto_pad = r.auto_pad;
        d.rounding_type = r.rounding;
        EXPECT_EQ(extent(r.X, d, r.version), r.want) << r.kernel << " " << r.strides << " " << r.auto_pad << " " << r.rounding;
    }
}

TEST(FrontendOpenVino, ExcludePadNeedsPadsSmallerThanTheDilatedKernel) {
    using avgpool::openvino::avg_pool;
    EXPECT_TRUE(avg_pool<1>(ov_layer("9", "1", "8", "8"), 1).ok());
    EXPECT_FE_ERROR(avg_pool<1>(ov_layer("9", "1", "9", "0"), 1), errc::invalid_value,
                    "pads_begin[0] = 9: with exclude-pad=\"true\" every pad must be smaller than the dilated "
                    "kernel extent 9, else a window lies entirely in the padding");
    EXPECT_FE_ERROR(avg_pool<2>(ov_layer("3,3", "1,1", "0,0", "0,10"), 14), errc::invalid_value,
                    "pads_end[1] = 10: with exclude-pad=\"true\" every pad must be smaller than the dilated "
                    "kernel extent 3, else a window lies entirely in the padding");
    // Dilation widens the kernel: 3 taps, dilation 2 span 5.
    avgpool::openvino::avg_pool_data d = ov_layer("3", "1", "4", "0");
    d.dilations = "2";
    EXPECT_TRUE(avg_pool<1>(d, 16).ok());
    d.pads_begin = "5";
    EXPECT_FE_ERROR(avg_pool<1>(d, 16), errc::invalid_value,
                    "pads_begin[0] = 5: with exclude-pad=\"true\" every pad must be smaller than the dilated "
                    "kernel extent 5, else a window lies entirely in the padding");
    // Not a rule for exclude-pad="false", nor for pads that auto_pad replaces.
    EXPECT_TRUE(avg_pool<1>(ov_layer("2", "1", "5", "6", "false"), 1).ok());
    d = ov_layer("2", "1", "5", "6");
    d.auto_pad = "same_upper";
    EXPECT_TRUE(avg_pool<1>(d, 1).ok());
}

TEST(FrontendOpenVino, FullKernelDivisorOnlyWhenPadded) {
    // exclude-pad="false": the whole kernel once any resolved pad is non-zero, else the
    // in-bounds count (AvgPoolV1_1d_ceil_no_pad_include_pad: last window [7, 8] -> 7.5).
    avgpool::openvino::avg_pool_data d = ov_layer("3", "2", "0", "0", "false");
    d.rounding_type = "ceil";
    auto a = avgpool::openvino::avg_pool<1>(d, 1);
    ASSERT_TRUE(a.ok()) << why(a);
    EXPECT_EQ(run<1>({1, 1, 8}, *a), (std::vector<float>{2, 4, 6, 7.5f}));
    EXPECT_EQ(avgpool::pooling<1>::create({1, 1, 8}, *a)->divisor_mode(), avgpool::divisor_type::exclude_pad);
    d.pads_end = "1";
    a = avgpool::openvino::avg_pool<1>(d, 1);
    EXPECT_EQ(avgpool::pooling<1>::create({1, 1, 8}, *a)->divisor_mode(), avgpool::divisor_type::full_kernel);
    // auto_pad decides after resolving: same_upper with kernel 2 on 3 pads the end.
    d = ov_layer("2,2", "1,1", "0,0", "0,0", "false");
    d.auto_pad = "same_upper";
    auto b = avgpool::openvino::avg_pool<2>(d, 1);
    ASSERT_TRUE(b.ok()) << why(b);
    EXPECT_EQ(avgpool::pooling<2>::create({1, 1, 3, 3}, *b)->divisor_mode(), avgpool::divisor_type::full_kernel);
    // AvgPoolV1_2d_same_upper_include: divisor 4 even for windows touching the end pad.
    EXPECT_EQ(run<2>({1, 1, 3, 3}, *b), (std::vector<float>{3, 4, 2.25f, 6, 7, 3.75f, 3.75f, 4.25f, 2.25f}));
}

// The five <data> layers of the AvgPool-1 specification on 1x3x32x32 (its same_upper examples
// print 32x32; the formulas and OpenVINO give 16x16).
TEST(FrontendOpenVino, SpecificationLayers) {
    struct layer {
        const char *auto_pad, *exclude, *kernel, *pads_begin, *pads_end, *strides;
        index_t out;
    };
    const layer layers[] = {{"same_upper", "true", "2,2", "0,0", "1,1", "2,2", 16},
                            {"same_upper", "false", "5,5", "0,0", "1,1", "2,2", 16},
                            {"explicit", "true", "5,5", "1,1", "1,1", "3,3", 10},
                            {"explicit", "false", "5,5", "1,1", "1,1", "2,2", 15},
                            {"valid", "true", "5,5", "1,1", "1,1", "2,2", 14}};
    for (const layer& l : layers) {
        avgpool::openvino::avg_pool_data d = ov_layer(l.kernel, l.strides, l.pads_begin, l.pads_end, l.exclude);
        d.auto_pad = l.auto_pad;
        auto a = avgpool::openvino::avg_pool<2>(d, 1);
        ASSERT_TRUE(a.ok()) << why(a);
        auto plan = avgpool::pooling<2>::create({1, 3, 32, 32}, *a);
        ASSERT_TRUE(plan.ok()) << why(plan);
        EXPECT_EQ(plan->output_shape(), (avgpool::dims<4>{1, 3, l.out, l.out})) << l.kernel << " " << l.auto_pad;
    }
}

TEST(FrontendOpenVino, AdaptiveAvgPool) {
    auto o = avgpool::openvino::adaptive_avg_pool<2>({1, 3, 32, 32}, {16, 16});
    ASSERT_TRUE(o.ok()) << why(o);
    EXPECT_EQ(*o, (avgpool::dims<2>{16, 16}));
    EXPECT_EQ(*avgpool::openvino::adaptive_avg_pool<2>({2, 6, 3, 2}, {5, 7}), (avgpool::dims<2>{5, 7}));  // upsampling
    EXPECT_FE_ERROR((avgpool::openvino::adaptive_avg_pool<2>({1, 6, 8, 9}, {5, 7, 8})), errc::rank_mismatch,
                    "output_size: 3 given; expected 2, one per spatial axis");
    EXPECT_FE_ERROR((avgpool::openvino::adaptive_avg_pool<2>({1, 6, 8, 9}, {5, 0})), errc::invalid_value,
                    "output_size[1] = 0: must be >= 1");
    EXPECT_FE_ERROR((avgpool::openvino::adaptive_avg_pool<2>({1, 6, 0, 9}, {5, 7})), errc::invalid_value,
                    "input_shape[2] = 0: spatial extent must be >= 1");
    auto s = avgpool::openvino::adaptive_avg_pool_shape({2, 3, 7}, {3});
    ASSERT_TRUE(s.ok()) << why(s);
    EXPECT_EQ(*s, (std::vector<index_t>{2, 3, 3}));
    EXPECT_FE_ERROR(avgpool::openvino::adaptive_avg_pool_shape({1, 6}, {1}), errc::rank_mismatch,
                    "input_shape: rank 2; expected {N, C, spatial...}, rank >= 3");
}

// ---- PyTorch ---------------------------------------------------------------------------------

TEST(FrontendTorch, DefaultsAndArgumentForms) {
    auto a = avgpool::torch::avg_pool2d({3});
    ASSERT_TRUE(a.ok()) << why(a);
    EXPECT_EQ(a->kernel, (avgpool::dims<2>{3, 3}));
    EXPECT_EQ(a->strides, (avgpool::dims<2>{3, 3}));  // stride None: the kernel size
    EXPECT_EQ(a->pads_begin, (avgpool::dims<2>{0, 0}));
    EXPECT_EQ(a->pads_end, (avgpool::dims<2>{0, 0}));
    EXPECT_EQ(a->rounding, avgpool::rounding_type::floor);
    EXPECT_EQ(a->divisor, avgpool::divisor_type::include_pad);  // count_include_pad=True
    EXPECT_EQ(a->divisor_override, 0);

    a = avgpool::torch::avg_pool2d({3, 2}, {2}, {1, 0}, true, false, 5);
    ASSERT_TRUE(a.ok()) << why(a);
    EXPECT_EQ(a->kernel, (avgpool::dims<2>{3, 2}));
    EXPECT_EQ(a->strides, (avgpool::dims<2>{2, 2}));
    EXPECT_EQ(a->pads_begin, (avgpool::dims<2>{1, 0}));
    EXPECT_EQ(a->pads_end, (avgpool::dims<2>{1, 0}));  // symmetric
    EXPECT_EQ(a->rounding, avgpool::rounding_type::ceil_torch);
    EXPECT_EQ(a->divisor, avgpool::divisor_type::exclude_pad);
    EXPECT_EQ(a->divisor_override, 5);

    auto b = avgpool::torch::avg_pool1d({4}, {}, {2});
    ASSERT_TRUE(b.ok()) << why(b);
    EXPECT_EQ(b->strides, (avgpool::dims<1>{4}));
    auto c = avgpool::torch::avg_pool3d({2, 3, 4}, {1, 2, 3});
    ASSERT_TRUE(c.ok()) << why(c);
    EXPECT_EQ(c->strides, (avgpool::dims<3>{1, 2, 3}));
    auto g = avgpool::torch::avg_pool<4>({2});  // any rank
    ASSERT_TRUE(g.ok()) << why(g);
    EXPECT_EQ(g->kernel, (avgpool::dims<4>{2, 2, 2, 2}));
}

TEST(FrontendTorch, PyTorchChecks) {
    using avgpool::torch::avg_pool2d;
    EXPECT_FE_ERROR(avg_pool2d({3, 3, 3}), errc::rank_mismatch, "kernel_size: 3 given; expected a single int or 2");
    EXPECT_FE_ERROR(avg_pool2d({}), errc::rank_mismatch, "kernel_size: 0 given; expected a single int or 2");
    EXPECT_FE_ERROR(avg_pool2d({3}, {1, 1, 1}), errc::rank_mismatch,
                    "stride: 3 given; expected none (the kernel size), a single int or 2");
    EXPECT_FE_ERROR(avg_pool2d({3}, {}, {1, 1, 1}), errc::rank_mismatch, "padding: 3 given; expected a single int or 2");
    EXPECT_FE_ERROR(avgpool::torch::avg_pool1d({3, 3}), errc::rank_mismatch,
                    "kernel_size: 2 given; expected 1, one per spatial axis");
    EXPECT_FE_ERROR(avg_pool2d({3, 0}), errc::invalid_value, "kernel_size[1] = 0: must be >= 1");
    EXPECT_FE_ERROR(avg_pool2d({3}, {2, 0}), errc::invalid_value, "stride[1] = 0: must be >= 1");
    EXPECT_FE_ERROR(avg_pool2d({3}, {}, {-1}), errc::invalid_value, "padding[0] = -1: must be >= 0");
    EXPECT_FE_ERROR(avg_pool2d({3}, {}, {2}), errc::invalid_value,
                    "padding[0] = 2: must be at most half of kernel_size 3 (PyTorch: pad <= 1)");
    EXPECT_FE_ERROR(avg_pool2d({4, 3}, {}, {2, 2}), errc::invalid_value,
                    "padding[1] = 2: must be at most half of kernel_size 3 (PyTorch: pad <= 1)");
    EXPECT_TRUE(avg_pool2d({4}, {}, {2}).ok());
    EXPECT_FE_ERROR(avg_pool2d({3}, {}, {0}, false, true, 0), errc::invalid_value,
                    "divisor_override = 0: must not be zero (omit it for none)");
    EXPECT_FE_ERROR(avg_pool2d({3}, {}, {0}, false, true, -2), errc::invalid_value, "divisor_override = -2: must be > 0");
}

// PyTorch's own window rule (aten avg_pool2d): the window is clipped to [-pad, X + pad) for
// its size, then to [0, X) for the taps; divisor_override replaces everything.
std::vector<double> torch_reference(const std::vector<double>& x, index_t H, index_t W, index_t k, index_t s,
                                    index_t p, bool ceil_mode, bool count_include_pad, index_t divisor_override,
                                    index_t& Ho, index_t& Wo) {
    auto out_size = [&](index_t X) {
        index_t o = (X + 2 * p - k + (ceil_mode ? s - 1 : 0)) / s + 1;
        if (ceil_mode && (o - 1) * s >= X + p) --o;
        return o;
    };
    Ho = out_size(H);
    Wo = out_size(W);
    std::vector<double> y;
    for (index_t oh = 0; oh < Ho; ++oh)
        for (index_t ow = 0; ow < Wo; ++ow) {
            index_t hs = oh * s - p, ws = ow * s - p;
            index_t he = std::min(hs + k, H + p), we = std::min(ws + k, W + p);
            const index_t pool = (he - hs) * (we - ws);
            hs = std::max<index_t>(hs, 0);
            ws = std::max<index_t>(ws, 0);
            he = std::min(he, H);
            we = std::min(we, W);
            double sum = 0;
            for (index_t h = hs; h < he; ++h)
                for (index_t w = ws; w < we; ++w) sum += x[static_cast<std::size_t>(h * W + w)];
            const index_t div = divisor_override ? divisor_override : count_include_pad ? pool : (he - hs) * (we - ws);
            y.push_back(sum / static_cast<double>(div));
        }
    return y;
}

// The classic docs example: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True) on 1x1x5x5,
// plus a 6x6 input whose last window overhangs the end padding (the overhang is not counted).
TEST(FrontendTorch, AvgPool2dMatchesPyTorchsWindowRule) {
    for (index_t X : {5, 6, 7})
        for (bool ceil_mode : {false, true})
            for (bool include : {true, false})
                for (index_t override_ : {0, 4}) {
                    SCOPED_TRACE("X=" + std::to_string(X) + " ceil=" + std::to_string(ceil_mode) + " include=" +
                                 std::to_string(include) + " override=" + std::to_string(override_));
                    auto a = avgpool::torch::avg_pool2d({3}, {2}, {1}, ceil_mode, include,
                                                        override_ ? std::optional<index_t>(override_) : std::nullopt);
                    ASSERT_TRUE(a.ok()) << why(a);
                    avgpool::dims<4> shape{};
                    const std::vector<float> got = run<2>({1, 1, X, X}, *a, &shape);
                    std::vector<double> x(static_cast<std::size_t>(X * X));
                    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i + 1);
                    index_t Ho = 0, Wo = 0;
                    const std::vector<double> want =
                        torch_reference(x, X, X, 3, 2, 1, ceil_mode, include, override_, Ho, Wo);
                    EXPECT_EQ(shape, (avgpool::dims<4>{1, 1, Ho, Wo}));
                    ASSERT_EQ(got.size(), want.size());
                    for (std::size_t i = 0; i < want.size(); ++i)
                        EXPECT_NEAR(got[i], want[i], 1e-5 * std::fabs(want[i])) << "output " << i;
                }
    // By hand, 5x5 input 1..25, count_include_pad=True: 3x3 output; corner (1+2+6+7)/9,
    // centre (7+8+9+12+13+14+17+18+19)/9 = 13.
    auto a = avgpool::torch::avg_pool2d({3}, {2}, {1}, true);
    avgpool::dims<4> shape{};
    const std::vector<float> y = run<2>({1, 1, 5, 5}, *a, &shape);
    EXPECT_EQ(shape, (avgpool::dims<4>{1, 1, 3, 3}));
    EXPECT_FLOAT_EQ(y[0], 16.0f / 9.0f);
    EXPECT_FLOAT_EQ(y[4], 13.0f);
    EXPECT_FLOAT_EQ(y[8], (19 + 20 + 24 + 25) / 9.0f);
}

// ceil_mode with a kernel past the padded input: PyTorch's output size div_rtn(X + 2p - k + s - 1,
// s) + 1 is 1 while the excess is under the stride, and the window is clipped to [-p, X + p).
TEST(FrontendTorch, CeilModeKernelLongerThanTheInput) {
    using avgpool::torch::avg_pool1d;
    avgpool::dims<3> shape{};
    // F.avg_pool1d([[1, 2]], 3, stride=3, ceil_mode=True) = [[1.5]]
    EXPECT_EQ(run<1>({1, 1, 2}, *avg_pool1d({3}, {3}, {0}, true), &shape), (std::vector<float>{1.5f}));
    EXPECT_EQ(shape, (avgpool::dims<3>{1, 1, 1}));
    // F.avg_pool1d([[1]], 5, stride=3, padding=1, ceil_mode=True): 1 / 3 counting the pads, 1 without.
    EXPECT_EQ(run<1>({1, 1, 1}, *avg_pool1d({5}, {3}, {1}, true, true)), (std::vector<float>{1.0f / 3.0f}));
    EXPECT_EQ(run<1>({1, 1, 1}, *avg_pool1d({5}, {3}, {1}, true, false)), (std::vector<float>{1.0f}));
    // nn.AvgPool2d(1280, ceil_mode=True) on 7x7 (an EfficientNet pooler): the mean of all 49.
    avgpool::dims<4> s2{};
    const std::vector<float> m = run<2>({1, 1, 7, 7}, *avgpool::torch::avg_pool2d({1280}, {}, {0}, true), &s2);
    EXPECT_EQ(s2, (avgpool::dims<4>{1, 1, 1, 1}));
    EXPECT_EQ(m, (std::vector<float>{25.0f}));
    // Without ceil_mode, or with the excess reaching the stride, no window: PyTorch's "output
    // size is too small".
    EXPECT_EQ(avgpool::pooling<1>::create({1, 1, 2}, *avg_pool1d({3}, {3}, {0}, false)).error_code(),
              errc::kernel_too_large);
    EXPECT_EQ(avgpool::pooling<1>::create({1, 1, 2}, *avg_pool1d({5}, {3}, {0}, true)).error_code(),
              errc::kernel_too_large);
    // avg_pool3d: "input image ... smaller than kernel size" in PyTorch.
    EXPECT_EQ(avgpool::pooling<3>::create({1, 1, 2, 2, 2}, *avgpool::torch::avg_pool3d({3}, {3}, {0}, true)).error_code(),
              errc::kernel_too_large);
}

TEST(FrontendTorch, AdaptiveOutputSize) {
    auto o = avgpool::torch::adaptive_avg_pool2d({1, 64, 10, 9}, {5, std::nullopt});  // None keeps 9
    ASSERT_TRUE(o.ok()) << why(o);
    EXPECT_EQ(*o, (avgpool::dims<2>{5, 9}));
    EXPECT_EQ(*avgpool::torch::adaptive_avg_pool2d({1, 512, 7, 7}, {1}), (avgpool::dims<2>{1, 1}));
    EXPECT_EQ(*avgpool::torch::adaptive_avg_pool1d({2, 3, 7}, {3}), (avgpool::dims<1>{3}));
    EXPECT_EQ(*avgpool::torch::adaptive_avg_pool3d({1, 8, 4, 6, 6}, {2, 3, 3}), (avgpool::dims<3>{2, 3, 3}));
    EXPECT_FE_ERROR(avgpool::torch::adaptive_avg_pool2d({1, 3, 8, 8}, {2, 2, 2}), errc::rank_mismatch,
                    "output_size: 3 given; expected a single int or 2");
    EXPECT_FE_ERROR(avgpool::torch::adaptive_avg_pool1d({1, 3, 8}, {2, 2}), errc::rank_mismatch,
                    "output_size: 2 given; expected 1, one per spatial axis");
    EXPECT_FE_ERROR(avgpool::torch::adaptive_avg_pool2d({1, 3, 8, 8}, {0}), errc::invalid_value,
                    "output_size[0] = 0: must be >= 1");
    // None: per axis in 2-D and 3-D only (PyTorch: (None,) and 1-D None are errors).
    EXPECT_EQ(*avgpool::torch::adaptive_avg_pool3d({1, 8, 4, 6, 6}, {std::nullopt, 3, std::nullopt}),
              (avgpool::dims<3>{4, 3, 6}));
    EXPECT_FE_ERROR(avgpool::torch::adaptive_avg_pool2d({1, 3, 8, 8}, {std::nullopt}), errc::invalid_value,
                    "output_size[0]: None keeps an axis only with one entry per axis");
    EXPECT_FE_ERROR(avgpool::torch::adaptive_avg_pool1d({1, 3, 8}, {std::nullopt}), errc::invalid_value,
                    "output_size[0]: None is not a size for adaptive_avg_pool1d");
    EXPECT_FE_ERROR(avgpool::torch::adaptive_avg_pool2d({1, 3, 8, 0}, {2}), errc::invalid_value,
                    "input_shape[3] = 0: spatial extent must be >= 1");
}

// ---- TensorFlow ------------------------------------------------------------------------------

TEST(FrontendTensorFlow, WindowForms) {
    using avgpool::tensorflow::avg_pool;
    const std::vector<avgpool::result<avgpool::pool_attrs<2>>> same = {
        avg_pool<2>({1, 3, 3, 1}, {1, 2, 2, 1}, "SAME"),               // NHWC, TF's full form
        avg_pool<2>({1, 1, 3, 3}, {1, 1, 2, 2}, "SAME", "NCHW"),       // NCHW full form
        avg_pool<2>({3, 3}, {2, 2}, "SAME"),                           // spatial only
        avg_pool<2>({3}, {2}, "same", "channels_first"),               // Keras spellings
        avg_pool<2>({1, 3, 3, 1}, {2}, "SAME", "channels_last")};
    for (const auto& a : same) {
        ASSERT_TRUE(a.ok()) << why(a);
        EXPECT_EQ(a->kernel, (avgpool::dims<2>{3, 3}));
        EXPECT_EQ(a->strides, (avgpool::dims<2>{2, 2}));
        EXPECT_EQ(a->auto_pad, avgpool::pad_type::same_upper);
        EXPECT_EQ(a->divisor, avgpool::divisor_type::exclude_pad);
    }
    auto v = avg_pool<2>({2, 3}, {}, "VALID");  // empty strides: the window (Keras strides=None)
    ASSERT_TRUE(v.ok()) << why(v);
    EXPECT_EQ(v->strides, (avgpool::dims<2>{2, 3}));
    EXPECT_EQ(v->auto_pad, avgpool::pad_type::valid);
    auto d3 = avg_pool<3>({1, 2, 2, 2, 1}, {1, 1, 2, 2, 1}, "valid", "NDHWC");
    ASSERT_TRUE(d3.ok()) << why(d3);
    EXPECT_EQ(d3->strides, (avgpool::dims<3>{1, 2, 2}));
    auto d1 = avg_pool<1>({1, 1, 4}, {1, 1, 2}, "VALID", "NCW");
    ASSERT_TRUE(d1.ok()) << why(d1);
    EXPECT_EQ(d1->kernel, (avgpool::dims<1>{4}));
}

TEST(FrontendTensorFlow, Errors) {
    using avgpool::tensorflow::avg_pool;
    EXPECT_FE_ERROR(avg_pool<2>({2, 3, 3, 1}, {1, 2, 2, 1}, "SAME"), errc::unsupported,
                    "ksize[0] = 2: pooling over the batch dimension is not supported; must be 1");
    EXPECT_FE_ERROR(avg_pool<2>({1, 3, 3, 2}, {1, 2, 2, 1}, "SAME"), errc::unsupported,
                    "ksize[3] = 2: pooling over the channel dimension is not supported; must be 1");
    // A channel stride: TF's 1-D and 2-D AvgPool ignore it (the channel window is 1); 3-D rejects it.
    auto cs = avg_pool<2>({1, 1, 3, 3}, {1, 2, 2, 1}, "SAME", "NCHW");
    ASSERT_TRUE(cs.ok()) << why(cs);
    EXPECT_EQ(cs->strides, (avgpool::dims<2>{2, 1}));
    EXPECT_EQ(avg_pool<1>({1, 2, 1}, {1, 2, 3}, "VALID")->strides, (avgpool::dims<1>{2}));
    EXPECT_FE_ERROR(avg_pool<2>({1, 3, 3, 1}, {1, 2, 2, 0}, "SAME"), errc::invalid_value, "strides[3] = 0: must be >= 1");
    EXPECT_FE_ERROR(avg_pool<3>({1, 1, 2, 2, 2}, {1, 2, 1, 1, 1}, "SAME", "NCDHW"), errc::unsupported,
                    "strides[1] = 2: pooling over the channel dimension is not supported; must be 1");
    EXPECT_FE_ERROR(avg_pool<2>({1, 3, 3}, {2}, "SAME"), errc::rank_mismatch, "ksize: 3 given; expected 1, 2 or 2 + 2");
    EXPECT_FE_ERROR(avg_pool<2>({3, 0}, {2}, "SAME"), errc::invalid_value, "ksize[1] = 0: must be >= 1");
    EXPECT_FE_ERROR(avg_pool<2>({3}, {1, 2, 0, 1}, "SAME"), errc::invalid_value, "strides[2] = 0: must be >= 1");
    EXPECT_FE_ERROR(avg_pool<2>({3}, {2}, "FULL"), errc::parse_error, "padding: unknown value \"FULL\" (expected SAME or VALID)");
    EXPECT_FE_ERROR(avg_pool<2>({3}, {2}, "Same"), errc::parse_error, "padding: unknown value \"Same\" (expected SAME or VALID)");
    EXPECT_FE_ERROR(avg_pool<2>({3}, {2}, "EXPLICIT"), errc::unsupported,
                    "padding: \"EXPLICIT\": average pooling takes only SAME or VALID");
    EXPECT_FE_ERROR(avg_pool<2>({3}, {2}, "SAME", "NHCW"), errc::parse_error,
                    "data_format: unknown value \"NHCW\" for this rank (expected e.g. NHWC or NCHW)");
    EXPECT_FE_ERROR(avg_pool<2>({3}, {2}, "SAME", "NDHWC"), errc::parse_error,
                    "data_format: unknown value \"NDHWC\" for this rank (expected e.g. NHWC or NCHW)");
}

// SAME pads like TF (extra at the end) and divides by the taps inside the input only.
TEST(FrontendTensorFlow, SameGeometryAndExcludedPadding) {
    // tf.nn.avg_pool2d on a 3x3 NHWC image 1..9, ksize 2, stride 1, SAME: pads 0 before, 1 after.
    auto a = avgpool::tensorflow::avg_pool<2>({2}, {1}, "SAME");
    ASSERT_TRUE(a.ok()) << why(a);
    auto plan = avgpool::pooling<2>::create({1, 1, 3, 3}, *a, avgpool::layout::channels_last);
    ASSERT_TRUE(plan.ok()) << why(plan);
    EXPECT_EQ(plan->geometry().pads_begin, (avgpool::dims<2>{0, 0}));
    EXPECT_EQ(plan->geometry().pads_end, (avgpool::dims<2>{1, 1}));
    const std::vector<float> in = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    std::vector<float> out(9);
    ASSERT_TRUE(plan->forward(in.data(), out.data()).ok());
    EXPECT_EQ(out, (std::vector<float>{3, 4, 4.5f, 6, 7, 7.5f, 7.5f, 8.5f, 9}));
    // Odd stride/kernel mix: 7 wide, ksize 3, stride 2 -> 4 outputs, total pad 2 split 1 / 1.
    auto b = avgpool::tensorflow::avg_pool<1>({1, 3, 1}, {1, 2, 1}, "SAME");
    auto g = avgpool::infer_geometry<1>({7}, *b);
    ASSERT_TRUE(g.ok()) << why(g);
    EXPECT_EQ(g->output[0], 4);
    EXPECT_EQ(g->pads_begin[0], 1);
    EXPECT_EQ(g->pads_end[0], 1);
}

TEST(FrontendTensorFlow, TfLiteAveragePool2d) {
    auto a = avgpool::tensorflow::tflite_average_pool_2d(3, 2, 2, 1, "SAME");
    ASSERT_TRUE(a.ok()) << why(a);
    EXPECT_EQ(a->kernel, (avgpool::dims<2>{3, 2}));
    EXPECT_EQ(a->strides, (avgpool::dims<2>{2, 1}));
    EXPECT_EQ(a->auto_pad, avgpool::pad_type::same_upper);
    EXPECT_EQ(a->divisor, avgpool::divisor_type::exclude_pad);
    // TFLite VALID: out = (in - filter + stride) / stride.
    auto v = avgpool::tensorflow::tflite_average_pool_2d(3, 3, 2, 2, "VALID");
    auto g = avgpool::infer_geometry<2>({8, 7}, *v);
    ASSERT_TRUE(g.ok()) << why(g);
    EXPECT_EQ(g->output, (avgpool::dims<2>{(8 - 3 + 2) / 2, (7 - 3 + 2) / 2}));
    EXPECT_FE_ERROR(avgpool::tensorflow::tflite_average_pool_2d(0, 2, 1, 1, "VALID"), errc::invalid_value,
                    "filter_height = 0: must be >= 1");
    EXPECT_FE_ERROR(avgpool::tensorflow::tflite_average_pool_2d(2, 2, 1, -1, "VALID"), errc::invalid_value,
                    "stride_width = -1: must be >= 1");
    EXPECT_FE_ERROR(avgpool::tensorflow::tflite_average_pool_2d(2, 2, 1, 1, "valid"), errc::parse_error,
                    "padding: unknown value \"valid\" (expected SAME or VALID)");
}

}  // namespace
