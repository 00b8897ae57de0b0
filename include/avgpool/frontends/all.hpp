// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// Every framework front end: avgpool::onnx, avgpool::openvino, avgpool::torch and
// avgpool::tensorflow, each turning that framework's attributes into pool_attrs<R>.
#ifndef AVGPOOL_FRONTENDS_ALL_HPP
#define AVGPOOL_FRONTENDS_ALL_HPP

#include "onnx.hpp"
#include "openvino.hpp"
#include "tensorflow.hpp"
#include "torch.hpp"

#endif  // AVGPOOL_FRONTENDS_ALL_HPP
