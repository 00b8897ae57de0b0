// The five XML examples of the OpenVINO AvgPool-1 specification (../shared/specs), each on a
// 1x3x32x32 input with rounding_type absent (floor). Examples 1 and 2 print a 32x32 output;
// the spec's own formulas, OpenVINO's shape inference and every implementation give 16x16, so
// that is what is asserted (DESIGN.md, "known traps").
#include <gtest/gtest.h>

#include <avgpool/avgpool.hpp>

#include <vector>

namespace {

struct xml_example {
    const char* data;  // the <data .../> line of the spec, for the failure message
    avgpool::pool_attrs<2> attrs;
    avgpool::dims<4> output;   // what the formulas give
    avgpool::dims<4> claimed;  // what the spec prints
};

std::vector<xml_example> examples() {
    auto make = [](avgpool::index_t k, avgpool::index_t s, avgpool::index_t pb, avgpool::index_t pe,
                   avgpool::pad_type p, bool exclude) {
        avgpool::pool_attrs<2> a;
        a.kernel = {k, k};
        a.strides = {s, s};
        a.pads_begin = {pb, pb};
        a.pads_end = {pe, pe};
        a.auto_pad = p;
        a.divisor = exclude ? avgpool::divisor_type::exclude_pad : avgpool::divisor_type::full_kernel_if_padded;
        return a;
    };
    using P = avgpool::pad_type;
    return {
        {R"(auto_pad="same_upper" exclude-pad="true" kernel="2,2" pads_begin="0,0" pads_end="1,1" strides="2,2")",
         make(2, 2, 0, 1, P::same_upper, true), {1, 3, 16, 16}, {1, 3, 32, 32}},
        {R"(auto_pad="same_upper" exclude-pad="false" kernel="5,5" pads_begin="0,0" pads_end="1,1" strides="2,2")",
         make(5, 2, 0, 1, P::same_upper, false), {1, 3, 16, 16}, {1, 3, 32, 32}},
        {R"(auto_pad="explicit" exclude-pad="true" kernel="5,5" pads_begin="1,1" pads_end="1,1" strides="3,3")",
         make(5, 3, 1, 1, P::explicit_pads, true), {1, 3, 10, 10}, {1, 3, 10, 10}},
        {R"(auto_pad="explicit" exclude-pad="false" kernel="5,5" pads_begin="1,1" pads_end="1,1" strides="2,2")",
         make(5, 2, 1, 1, P::explicit_pads, false), {1, 3, 15, 15}, {1, 3, 15, 15}},
        {R"(auto_pad="valid" exclude-pad="true" kernel="5,5" pads_begin="1,1" pads_end="1,1" strides="2,2")",
         make(5, 2, 1, 1, P::valid, true), {1, 3, 14, 14}, {1, 3, 14, 14}},
    };
}

TEST(OpenVinoSpecExamples, OutputShapesFollowTheFormulas) {
    int disagreements = 0;
    for (const xml_example& ex : examples()) {
        SCOPED_TRACE(ex.data);
        auto plan = avgpool::pooling<2>::create({1, 3, 32, 32}, ex.attrs);
        ASSERT_TRUE(plan.ok()) << plan.error().message();
        EXPECT_EQ(plan->output_shape(), ex.output);
        if (plan->output_shape() != ex.claimed) ++disagreements;
    }
    EXPECT_EQ(disagreements, 2);  // examples 1 and 2 only
}

// Values, not only shapes: example 2 (same_upper, k5 s2, pads 1 / 2, exclude-pad false so the
// full 25 divides every window) on a constant input gives the fraction of each window that
// lies inside the input.
TEST(OpenVinoSpecExamples, Example2DividesByTheFullKernel) {
    const xml_example ex = examples()[1];
    auto plan = avgpool::pooling<2>::create({1, 1, 32, 32}, ex.attrs);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->divisor_mode(), avgpool::divisor_type::full_kernel);
    std::vector<float> in(32 * 32, 1.0f), out(16 * 16);
    plan->forward(in.data(), out.data());
    // Row 0 starts at -1: 4 of 5 rows inside; the last row (o = 15) starts at 29: taps 29..33,
    // 3 inside. Interior windows: all 25 inside.
    EXPECT_FLOAT_EQ(out[0], 16.0f / 25);
    EXPECT_FLOAT_EQ(out[1], 20.0f / 25);
    EXPECT_FLOAT_EQ(out[5 * 16 + 5], 1.0f);
    EXPECT_FLOAT_EQ(out[15 * 16 + 15], 9.0f / 25);
}

}  // namespace
