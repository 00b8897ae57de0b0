// The float rank-1 kernels of the examples (adaptive.cpp's 1-D pool); see float_rank2.cpp.
#include <avgpool/avgpool.hpp>

AVGPOOL_INSTANTIATE(float, 1)
