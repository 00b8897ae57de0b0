// The kernels the examples run, compiled once for all of them: float plans of rank 2 here,
// rank 1 in float_rank1.cpp (two files, so that both build at once). The examples are built
// with AVGPOOL_EXTERN_TEMPLATES (examples/CMakeLists.txt), so no example generates kernels
// itself: the layout the README's Integration section recommends for a project with several
// files that run plans. An example that runs another element type or rank needs a line in a
// file here, or the link fails naming the missing avgpool::pooling<R>::run<T>.
#include <avgpool/avgpool.hpp>

AVGPOOL_INSTANTIATE(float, 2)  // every example
