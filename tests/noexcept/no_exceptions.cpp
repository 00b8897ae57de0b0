// Built with -fno-exceptions: every error comes back as a value, nothing throws or aborts.
#include <avgpool/avgpool.hpp>

#include <cstdio>
#include <cstring>
#include <mutex>

#if AVGPOOL_HAS_EXCEPTIONS
#error "this file must be compiled with -fno-exceptions"
#endif

int main() {
    float in[16], out[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 16; ++i) in[i] = static_cast<float>(i);

    avgpool::pool_attrs<2> a;
    a.kernel = {2, 2};
    a.strides = {2, 2};
    avgpool::status st = avgpool::avg_pool<float, 2>(in, {1, 1, 4, 4}, a, out);
    if (!st || out[0] != 2.5f || out[3] != 12.5f) {
        std::puts("FAIL: valid pooling");
        return 1;
    }

    a.strides = {0, 2};
    out[0] = -1;
    st = avgpool::avg_pool<float, 2>(in, {1, 1, 4, 4}, a, out);
    if (st || st.error_code() != avgpool::errc::invalid_value || out[0] != -1 ||
        std::strcmp(st.error().message().c_str(), "strides[0] = 0: must be >= 1") != 0) {
        std::puts("FAIL: error as value");
        return 1;
    }

    auto plan = avgpool::pooling<2>::create({1, 1, 4, 4}, a);
    if (plan.ok() || plan.error_code() != avgpool::errc::invalid_value) {
        std::puts("FAIL: create error");
        return 1;
    }
    // The thread pool's calls and rounds (their no-exceptions branches).
    a.strides = {2, 2};
    auto good = avgpool::pooling<2>::create({1, 1, 4, 4}, a);
    avgpool::thread_pool pool(2);
    float pooled[4] = {-1, -1, -1, -1};
    int rounds = 0;
    std::mutex m;
    if (!good || !good->forward(in, pooled, pool) || pooled[0] != 2.5f ||
        !pool.on_each_thread([&] { std::lock_guard<std::mutex> lock(m); ++rounds; }) || rounds != 2) {
        std::puts("FAIL: thread pool");
        return 1;
    }
    avgpool::release_thread_scratch(pool);
    std::printf("no-exceptions build: errors are values (%s)\n", plan.error().message().c_str());
    return 0;
}
