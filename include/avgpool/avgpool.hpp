// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// The one include for the whole library.
#ifndef AVGPOOL_AVGPOOL_HPP
#define AVGPOOL_AVGPOOL_HPP

#include "config.hpp"
#include "dynamic.hpp"
#include "error.hpp"
#include "executor.hpp"
#include "float16.hpp"
#include "frontends/all.hpp"
#include "pooling.hpp"
#include "shape.hpp"
#include "types.hpp"
#include "version.hpp"

#endif  // AVGPOOL_AVGPOOL_HPP
