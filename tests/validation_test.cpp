// Bad input: every error names the attribute, the axis and the value; nothing is written.
#include <gtest/gtest.h>

#include <avgpool/avgpool.hpp>

#include <limits>
#include <string>
#include <vector>

namespace {

using avgpool::errc;
using avgpool::index_t;

avgpool::pool_attrs<2> good() {
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.strides = {2, 2};
    a.pads_begin = {1, 1};
    a.pads_end = {1, 1};
    return a;
}

struct bad_case {
    const char* what;
    avgpool::dims<4> shape;
    avgpool::pool_attrs<2> attrs;
    errc code;
    const char* attribute;
    int axis;
    const char* message;
};

std::vector<bad_case> bad_cases() {
    std::vector<bad_case> v;
    auto add = [&](const char* what, avgpool::dims<4> shape, auto edit, errc code, const char* attribute,
                   int axis, const char* message) {
        avgpool::pool_attrs<2> a = good();
        edit(a);
        v.push_back({what, shape, a, code, attribute, axis, message});
    };
    const avgpool::dims<4> s{2, 3, 8, 8};
    const index_t big = index_t(1) << 62;
    add("kernel 0", s, [](auto& a) { a.kernel[1] = 0; }, errc::invalid_value, "kernel", 1, "kernel[1] = 0: must be >= 1");
    add("kernel < 0", s, [](auto& a) { a.kernel[0] = -3; }, errc::invalid_value, "kernel", 0, "kernel[0] = -3: must be >= 1");
    add("stride 0", s, [](auto& a) { a.strides[0] = 0; }, errc::invalid_value, "strides", 0, "strides[0] = 0: must be >= 1");
    add("dilation 0", s, [](auto& a) { a.dilations[1] = 0; }, errc::invalid_value, "dilations", 1, "dilations[1] = 0: must be >= 1");
    add("negative pad", s, [](auto& a) { a.pads_begin[1] = -1; }, errc::invalid_value, "pads_begin", 1, "pads_begin[1] = -1: must be >= 0");
    add("negative end pad", s, [](auto& a) { a.pads_end[0] = -2; }, errc::invalid_value, "pads_end", 0, "pads_end[0] = -2: must be >= 0");
    add("override < 0", s, [](auto& a) { a.divisor_override = -1; }, errc::invalid_value, "divisor_override", -1,
        "divisor_override = -1: must be >= 0 (0 means no override)");
    add("batch 0", {0, 3, 8, 8}, [](auto&) {}, errc::invalid_value, "input_shape", 0, "input_shape[0] = 0: batch N must be >= 1");
    add("channels 0", {2, 0, 8, 8}, [](auto&) {}, errc::invalid_value, "input_shape", 1, "input_shape[1] = 0: channels C must be >= 1");
    add("negative batch", {-1, 3, 8, 8}, [](auto&) {}, errc::invalid_value, "input_shape", 0, "input_shape[0] = -1: batch N must be >= 1");
    add("spatial 0", {2, 3, 8, 0}, [](auto&) {}, errc::invalid_value, "input_shape", 3, "input_shape[3] = 0: spatial extent must be >= 1");
    add("kernel fits nowhere", s, [](auto& a) { a.kernel[1] = 11; }, errc::kernel_too_large, "kernel", 1,
        "kernel[1] = 11: dilated kernel extent 11 is larger than the padded input extent 10: no window fits");
    add("dilated kernel fits nowhere", s, [](auto& a) { a.dilations[0] = 5; }, errc::kernel_too_large, "kernel", 0,
        "kernel[0] = 3: dilated kernel extent 11 is larger than the padded input extent 10: no window fits");
    add("valid kernel fits nowhere", s, [](auto& a) { a.kernel[0] = 9; a.auto_pad = avgpool::pad_type::valid; },
        errc::kernel_too_large, "kernel", 0,
        "kernel[0] = 9: dilated kernel extent 9 is larger than the input extent 8 (auto_pad valid: no padding): no window fits");
    add("dilation overflow", s, [big](auto& a) { a.dilations[0] = big; }, errc::overflow, "kernel", 0,
        "kernel[0] = 3: dilated extent (kernel - 1) * 4611686018427387904 + 1 overflows int64");
    add("pad overflow", s, [big](auto& a) { a.pads_begin[1] = big; a.pads_end[1] = big; }, errc::overflow, "pads_end", 1,
        "pads_end[1] = 4611686018427387904: input extent 8 + pads_begin 4611686018427387904 + pads_end overflows int64");
    add("element count overflow", {big, big, 8, 8}, [](auto&) {}, errc::overflow, "input_shape", -1,
        "input_shape: element count N * C * spatial overflows int64");
    // Extents that fit int64 but not a plan's per-axis tables: an error, not a failed allocation.
    add("input extent past the plan's tables", {1, 1, 8, big}, [big](auto& a) { a.strides[1] = big; }, errc::invalid_value,
        "input_shape", 3, "input_shape[3] = 4611686018427387904: must be <= 4294967296 (a plan's per-axis tables)");
    add("output extent past the plan's tables", {1, 1, 8, 1}, [](auto& a) { a.kernel[1] = 1; a.pads_end[1] = index_t(1) << 44; },
        errc::invalid_value, "output_shape", 3, "output_shape[3] = 8796093022209: must be <= 4294967296 (a plan's per-axis tables)");
    add("kernel volume overflow", {1, 1, big, big}, [big](auto& a) { a.kernel = {big, big}; a.pads_begin = a.pads_end = {0, 0}; },
        errc::overflow, "kernel", 1, "kernel[1] = 4611686018427387904: kernel volume overflows int64");
    add("bad pad_type", s, [](auto& a) { a.auto_pad = static_cast<avgpool::pad_type>(7); }, errc::invalid_enum, "auto_pad", -1,
        "auto_pad = 7: not a pad_type");
    add("bad rounding", s, [](auto& a) { a.rounding = static_cast<avgpool::rounding_type>(-1); }, errc::invalid_enum, "rounding", -1,
        "rounding = -1: not a rounding_type");
    add("bad divisor", s, [](auto& a) { a.divisor = static_cast<avgpool::divisor_type>(9); }, errc::invalid_enum, "divisor", -1,
        "divisor = 9: not a divisor_type");
    return v;
}

TEST(Validation, EveryErrorNamesAttributeAxisAndValue) {
    for (const bad_case& c : bad_cases()) {
        SCOPED_TRACE(c.what);
        auto plan = avgpool::pooling<2>::create(c.shape, c.attrs);
        ASSERT_FALSE(plan.ok());
        EXPECT_EQ(plan.error_code(), c.code);
        EXPECT_STREQ(plan.error().attribute(), c.attribute);
        EXPECT_EQ(plan.error().axis(), c.axis);
        EXPECT_EQ(plan.error().message(), c.message);
        EXPECT_EQ(plan.error().code(), c.code);
    }
}

TEST(Validation, OneCallLeavesTheOutputUntouched) {
    std::vector<float> in(2 * 3 * 8 * 8, 1.0f);
    for (const bad_case& c : bad_cases()) {
        SCOPED_TRACE(c.what);
        std::vector<float> out(2 * 3 * 8 * 8, -7.0f);
#if AVGPOOL_HAS_EXCEPTIONS
        try {
            avgpool::avg_pool<float, 2>(in.data(), c.shape, c.attrs, out.data());
            ADD_FAILURE() << "no exception";
        } catch (const avgpool::error& e) {
            EXPECT_EQ(e.code(), c.code);
            EXPECT_EQ(std::string(e.what()), c.message);
            const std::invalid_argument& base = e;  // the documented base class
            EXPECT_EQ(std::string(base.what()), c.message);
        }
#else
        EXPECT_FALSE(avgpool::avg_pool<float, 2>(in.data(), c.shape, c.attrs, out.data()).ok());
#endif
        for (float v : out) ASSERT_EQ(v, -7.0f);
    }
}

TEST(Validation, NullPointersAreErrorsNotCrashes) {
    auto plan = avgpool::pooling<2>::create({1, 1, 4, 4}, good());
    ASSERT_TRUE(plan.ok());
    std::vector<float> in(16, 1.0f), out(4, -7.0f);
    auto st = plan->forward(static_cast<const float*>(nullptr), out.data());
    EXPECT_EQ(st.error_code(), errc::null_pointer);
    EXPECT_EQ(st.error().message(), "in: null pointer");
    st = plan->sum(in.data(), static_cast<float*>(nullptr));
    EXPECT_EQ(st.error().message(), "out: null pointer");
    EXPECT_EQ(plan->divisor(static_cast<float*>(nullptr)).error_code(), errc::null_pointer);
    for (float v : out) EXPECT_EQ(v, -7.0f);
#if AVGPOOL_HAS_EXCEPTIONS
    EXPECT_THROW((avgpool::avg_pool<float, 2>(nullptr, {1, 1, 4, 4}, good(), out.data())), avgpool::error);
    EXPECT_THROW((avgpool::avg_pool<float, 2>(in.data(), {1, 1, 4, 4}, good(), nullptr)), avgpool::error);
#endif
    for (float v : out) EXPECT_EQ(v, -7.0f);
}

// A moved-from plan has lost its tables: each call reports it and writes nothing, in both
// layouts (channels-last plans of few channels hold a second plan) and for backward, whose
// tables are built on first use.
TEST(Validation, MovedFromPlanIsAnErrorNotACrash) {
    for (avgpool::layout lay : {avgpool::layout::channels_first, avgpool::layout::channels_last}) {
        SCOPED_TRACE(static_cast<int>(lay));
        auto made = avgpool::pooling<2>::create({1, 2, 6, 6}, good(), lay);
        ASSERT_TRUE(made.ok());
        avgpool::pooling<2> plan = std::move(made.value());
        avgpool::pooling<2> taken = std::move(plan);
        std::vector<float> in(72, 1.0f), out(18, -7.0f), grad(72, -7.0f);
        auto st = plan.forward(in.data(), out.data());
        EXPECT_EQ(st.error_code(), errc::invalid_value);
        EXPECT_EQ(st.error().message(), "plan: the plan was moved from");
        EXPECT_EQ(plan.sum(in.data(), out.data()).error_code(), errc::invalid_value);
        EXPECT_EQ(plan.divisor(out.data()).error_code(), errc::invalid_value);
        EXPECT_EQ(plan.backward(out.data(), grad.data()).error_code(), errc::invalid_value);
        for (float v : out) EXPECT_EQ(v, -7.0f);
        for (float v : grad) EXPECT_EQ(v, -7.0f);
        // The plan it moved to works, and a moved-from plan can be assigned to again.
        ASSERT_TRUE(taken.forward(in.data(), out.data()).ok());
        for (float v : out) EXPECT_EQ(v, 1.0f);
        plan = std::move(taken);
        std::fill(out.begin(), out.end(), -7.0f);
        ASSERT_TRUE(plan.backward(in.data(), grad.data()).ok());
        EXPECT_TRUE(plan.forward(in.data(), out.data()).ok());
        for (float v : out) EXPECT_EQ(v, 1.0f);
    }
}

TEST(Validation, ResultValueOfAnErrorThrows) {
    avgpool::pool_attrs<1> a;  // kernel left at 0
    auto g = avgpool::infer_geometry<1>({4}, a);
    ASSERT_FALSE(g);
#if AVGPOOL_HAS_EXCEPTIONS
    EXPECT_THROW(g.value(), avgpool::error);
#endif
    EXPECT_EQ(g.error().message(), "kernel[0] = 0: must be >= 1");
    auto ok = avgpool::infer_geometry<1>({4}, [] { avgpool::pool_attrs<1> x; x.kernel = {2}; return x; }());
    EXPECT_EQ(ok.error_code(), errc::ok);
}

TEST(Validation, RuntimeRankListsMustMatchTheRank) {
    avgpool::pool_attrs_dynamic d;
    d.kernel = {2, 2};
    d.strides = {2};
    auto r = avgpool::infer_output_shape({1, 3, 8, 8}, d);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error_code(), errc::rank_mismatch);
    EXPECT_EQ(r.error().message(), "strides: 1 given; expected 2, one per spatial axis");
    d.strides = {};
    d.pads_end = {1, 1, 1};
    EXPECT_EQ(avgpool::infer_output_shape({1, 3, 8, 8}, d).error().message(),
              "pads_end: 3 given; expected 2, one per spatial axis");
    d.pads_end = {};
    EXPECT_EQ(avgpool::infer_output_shape({1, 3, 8}, d).error().message(),
              "kernel: 2 given; expected 1, one per spatial axis");
    EXPECT_EQ(avgpool::infer_output_shape({3, 8}, d).error().message(),
              "input_shape: rank 2; expected {N, C, spatial...}, rank >= 3");
    auto ok = avgpool::infer_output_shape({1, 3, 8, 8}, d);  // empty strides / pads: defaults
    ASSERT_TRUE(ok.ok());
    EXPECT_EQ(*ok, (std::vector<index_t>{1, 3, 7, 7}));
}

TEST(Validation, ParseErrorTextIsQuotedAndCut) {
    const char* s = "2,x";
    auto e = avgpool::detail::make_error_text(errc::parse_error, "kernel", 1, "cannot read '{t}'", s + 2, s + 3);
    EXPECT_EQ(e.message(), "kernel[1]: cannot read 'x'");
    const std::string long_text(100, 'z');
    e = avgpool::detail::make_error_text(errc::parse_error, "kernel", -1, "'{t}'", long_text.data(),
                                         long_text.data() + long_text.size());
    EXPECT_EQ(e.message(), "kernel: '" + std::string(36, 'z') + "...'");
}

}  // namespace
