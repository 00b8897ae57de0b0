// Second translation unit of avgpool_single_header_two_tu: includes the generated single header
// and instantiates the same templates and inline functions as two_tu_main.cpp.
#include <avgpool/avgpool.hpp>

#include "two_tu.hpp"

#ifndef AVGPOOL_SINGLE_HEADER
#error "avgpool/avgpool.hpp is not the generated single header: check the include path"
#endif

namespace two_tu {

std::vector<float> pool_2x2(const std::vector<float>& in) {
    avgpool::pool_attrs<2> attrs;
    attrs.kernel = {2, 2};
    attrs.strides = {2, 2};
    std::vector<float> out(4, -1.0f);
    avgpool::avg_pool<float, 2>(in.data(), {1, 1, 4, 4}, attrs, out.data());
    return out;
}

std::vector<std::int64_t> inferred_shape() {
    avgpool::pool_attrs_dynamic d;
    d.kernel = {3, 3};
    d.strides = {2, 2};
    auto shape = avgpool::infer_output_shape({1, 3, 9, 9}, d);
    if (!shape) return {};
    return std::vector<std::int64_t>(shape->begin(), shape->end());
}

std::string zero_stride_message() {
    avgpool::pool_attrs<2> attrs;
    attrs.kernel = {2, 2};
    attrs.strides = {2, 0};
    auto plan = avgpool::pooling<2>::create({1, 1, 4, 4}, attrs);
    if (plan) return "no error";
    return std::string(avgpool::to_string(plan.error_code())) + ": " + plan.error().message();
}

}  // namespace two_tu
