// The kernels every example runs, compiled once for all of them. The examples are built with
// AVGPOOL_EXTERN_TEMPLATES (examples/CMakeLists.txt), so no example generates kernels itself: the
// layout the README's Integration section recommends for a project with several files that run
// plans. An example that runs another element type or rank needs a line here, or the link fails
// naming the missing avgpool::pooling<R>::run<T>.
#include <avgpool/avgpool.hpp>

AVGPOOL_INSTANTIATE(float, 1)  // adaptive.cpp's 1-D pool
AVGPOOL_INSTANTIATE(float, 2)  // everything else
