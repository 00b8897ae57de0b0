// avgpool_single_header_two_tu: two translation units (this one and two_tu_other.cpp) include
// the generated single header and use the same templates and inline functions. A function
// defined in a header without `inline`, or a non-inline variable, makes the link fail with a
// duplicate symbol; a wrong result returns non-zero.
#include <avgpool/avgpool.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "two_tu.hpp"

#ifndef AVGPOOL_SINGLE_HEADER
#error "avgpool/avgpool.hpp is not the generated single header: check the include path"
#endif

namespace {

int failures = 0;

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "FAIL: %s\n", what);
        ++failures;
    }
}

}  // namespace

int main() {
    std::vector<float> in(16);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i + 1);

    // The same instantiation of avg_pool<float, 2> in both translation units.
    avgpool::pool_attrs<2> attrs;
    attrs.kernel = {2, 2};
    attrs.strides = {2, 2};
    std::vector<float> here(4, -1.0f);
    avgpool::avg_pool<float, 2>(in.data(), {1, 1, 4, 4}, attrs, here.data());
    const std::vector<float> expected{3.5f, 5.5f, 11.5f, 13.5f};
    check(here == expected, "avg_pool<float, 2> in this translation unit");
    check(two_tu::pool_2x2(in) == expected, "avg_pool<float, 2> in the other translation unit");

    // An inline (non-template) function of the library, called from both.
    avgpool::pool_attrs_dynamic d;
    d.kernel = {3, 3};
    d.strides = {2, 2};
    auto shape = avgpool::infer_output_shape({1, 3, 9, 9}, d);
    const std::vector<std::int64_t> expected_shape{1, 3, 4, 4};
    check(shape.ok() && std::vector<std::int64_t>(shape->begin(), shape->end()) == expected_shape,
          "infer_output_shape in this translation unit");
    check(two_tu::inferred_shape() == expected_shape,
          "infer_output_shape in the other translation unit");

    // An error as a value, with its message, from both.
    attrs.strides = {2, 0};
    auto plan = avgpool::pooling<2>::create({1, 1, 4, 4}, attrs);
    check(!plan && plan.error_code() == avgpool::errc::invalid_value, "zero stride is refused");
    const std::string message =
        plan ? std::string("no error")
             : std::string(avgpool::to_string(plan.error_code())) + ": " + plan.error().message();
    check(message == two_tu::zero_stride_message(), "the same error message in both units");
    check(message.find("strides[1]") != std::string::npos, "the message names strides[1]");

    if (failures != 0) return 1;
    std::printf("avgpool %d.%d.%d single header, two translation units: OK (%s)\n",
                AVGPOOL_VERSION_MAJOR, AVGPOOL_VERSION_MINOR, AVGPOOL_VERSION_PATCH,
                message.c_str());
    return 0;
}
