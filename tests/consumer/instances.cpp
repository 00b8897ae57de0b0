// The kernels both consumer programs run, compiled once, in the layout README's Integration
// section recommends: AVGPOOL_EXTERN_TEMPLATES for every file (CMakeLists.txt), and the
// instantiations in one file of the project's own. Compiled with exceptions; main_noexcept.cpp
// links the same code.
#include <avgpool/avgpool.hpp>

AVGPOOL_INSTANTIATE(float, 1)
