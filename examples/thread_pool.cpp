// One plan, made once and reused for many calls, run on a thread pool that is also made once
// (no thread is created per call). Results are bit-identical to a sequential run: the work is
// split into (n, c) planes and nothing is reduced across threads.
#include <avgpool/avgpool.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.pads_begin = a.pads_end = {1, 1};
    auto plan = avgpool::pooling<2>::create({2, 64, 56, 56}, a);  // {N, C, H, W}
    if (!plan) {
        std::printf("error: %s\n", plan.error().message().c_str());
        return 1;
    }
    avgpool::thread_pool pool(2);  // the calling thread plus one worker
    std::vector<float> in(static_cast<std::size_t>(plan->input_size()));
    std::vector<float> out(static_cast<std::size_t>(plan->output_size())), check(out.size());
    for (int step = 0; step < 10; ++step) {  // e.g. ten inference requests
        for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 7 + step) % 13);
        plan->forward(in.data(), out.data(), pool);
        plan->forward(in.data(), check.data());  // sequential, for comparison
        if (std::memcmp(out.data(), check.data(), out.size() * sizeof(float)) != 0) {
            std::printf("step %d: threaded and sequential results differ\n", step);
            return 1;
        }
    }
    std::printf("10 calls on %u threads: same bits as sequential; out[0] = %.4f\n", pool.size(), out[0]);
    return 0;
}
