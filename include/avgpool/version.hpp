// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
#ifndef AVGPOOL_VERSION_HPP
#define AVGPOOL_VERSION_HPP

// CMake reads these three lines to set the project version: keep their form.
#define AVGPOOL_VERSION_MAJOR 0
#define AVGPOOL_VERSION_MINOR 1
#define AVGPOOL_VERSION_PATCH 0

// One number for preprocessor comparisons: 10203 is 1.2.3.
#define AVGPOOL_VERSION (AVGPOOL_VERSION_MAJOR * 10000 + AVGPOOL_VERSION_MINOR * 100 + AVGPOOL_VERSION_PATCH)

#endif  // AVGPOOL_VERSION_HPP
