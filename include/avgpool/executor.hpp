// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// Executors: anything callable as exec(count, fn) that runs fn(begin, end) over a partition
// of [0, count), possibly in parallel. Results never depend on the executor: every work item
// writes its own outputs and nothing is reduced across items.
#ifndef AVGPOOL_EXECUTOR_HPP
#define AVGPOOL_EXECUTOR_HPP

#include "types.hpp"

namespace avgpool {

/// Runs everything on the calling thread, in one call.
///
///     plan->forward(in, out, avgpool::sequential{});
struct sequential {
    template <class F>
    void operator()(index_t count, F&& fn) const {
        if (count > 0) fn(index_t(0), count);
    }
};

}  // namespace avgpool

#endif  // AVGPOOL_EXECUTOR_HPP
