// Shared by two_tu_main.cpp and two_tu_other.cpp: what the second translation unit computes
// with the single header, for the first one to compare against its own results.
#ifndef AVGPOOL_TESTS_SINGLE_HEADER_TWO_TU_HPP
#define AVGPOOL_TESTS_SINGLE_HEADER_TWO_TU_HPP

#include <cstdint>
#include <string>
#include <vector>

namespace two_tu {

/// avg_pool<float, 2> over the 1x1x4x4 tensor 1..16 with a 2x2 kernel, stride 2.
std::vector<float> pool_2x2(const std::vector<float>& in);
/// infer_output_shape({1, 3, 9, 9}, kernel 3x3, stride 2): an inline function of the library.
std::vector<std::int64_t> inferred_shape();
/// The message of pooling<2>::create with a zero stride (an error returned as a value).
std::string zero_stride_message();

}  // namespace two_tu

#endif  // AVGPOOL_TESTS_SINGLE_HEADER_TWO_TU_HPP
