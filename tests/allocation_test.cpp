// The API promises allocation-free runs: once a thread has run a plan (its scratch cache warm),
// forward, sum, divisor and backward allocate nothing. This program replaces the global
// operator new to count the allocations made inside a window; everything else (plan creation,
// GoogleTest) allocates as usual.
#include <avgpool/avgpool.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/geometry.hpp"

// Not under the sanitizers: they supply operator new themselves (and ASan checks new / delete
// pairs through it), so a replacement here would weaken the rest of their checks.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define AVGPOOL_TEST_COUNT_NEW 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define AVGPOOL_TEST_COUNT_NEW 0
#else
#define AVGPOOL_TEST_COUNT_NEW 1
#endif
#else
#define AVGPOOL_TEST_COUNT_NEW 1
#endif

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};

#if AVGPOOL_TEST_COUNT_NEW  // (unused under the sanitizers: clang warned)
void* counted_alloc(std::size_t n, std::size_t align) {
    if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (n == 0) n = 1;
    void* p = align <= alignof(std::max_align_t) ? std::malloc(n) : std::aligned_alloc(align, (n + align - 1) / align * align);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}
#endif
}  // namespace

#if AVGPOOL_TEST_COUNT_NEW
// These operators are the allocator: every pointer operator delete frees came from
// counted_alloc's malloc or aligned_alloc, which GCC's -Wmismatched-new-delete cannot see
// when it inlines a delete expression into std::free.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) { return counted_alloc(n, 0); }
void* operator new[](std::size_t n) { return counted_alloc(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif

namespace {

using avgpool::index_t;

// Allocations made by f() on any thread.
template <class F>
long allocations_in(F&& f) {
    g_allocations.store(0);
    g_counting.store(true);
    f();
    g_counting.store(false);
    return g_allocations.load();
}

// An executor that runs its pieces (1, 2, 3, ... items long) on the calling thread.
struct pieces_executor {
    template <class F>
    void operator()(index_t count, F&& fn) const {
        for (index_t b = 0, len = 1; b < count; b += len, ++len) fn(b, std::min(count, b + len));
    }
};

// Every run of a plan, sequential and in pieces: once to warm this thread's scratch, then
// counted.
template <class T, std::size_t R>
void expect_runs_allocate_nothing(const avgpool::pooling<R>& plan, const std::string& what) {
    SCOPED_TRACE(what);
    std::vector<T> in(static_cast<std::size_t>(plan.input_size()), T(1.5f));
    std::vector<T> out(static_cast<std::size_t>(plan.output_size()));
    std::vector<T> div(static_cast<std::size_t>(plan.output_size()));  // (more than divisor() writes)
    std::vector<T> grad_in(in.size());
    auto runs = [&] {
        for (int e = 0; e < 2; ++e) {
            const auto go = [&](const auto& exec) {
                ASSERT_TRUE(plan.forward(in.data(), out.data(), exec));
                ASSERT_TRUE(plan.sum(in.data(), out.data(), exec));
                ASSERT_TRUE(plan.backward(out.data(), grad_in.data(), exec));
            };
            if (e == 0) {
                go(avgpool::sequential{});
            } else {
                go(pieces_executor{});
            }
        }
        ASSERT_TRUE(plan.divisor(div.data()));
    };
    runs();
    EXPECT_EQ(0, allocations_in(runs));
}

template <class T>
void fixed_cases() {
    using avgpool::layout;
    using avgpool::pooling;
    auto attrs2 = [](index_t k, index_t s, index_t p) {
        avgpool::pool_attrs<2> a;
        a.kernel = {k, k};
        a.strides = {s, s};
        a.pads_begin = a.pads_end = {p, p};
        return a;
    };
    auto attrs3 = [](index_t k, index_t s, index_t p) {
        avgpool::pool_attrs<3> a;
        a.kernel = {k, k, k};
        a.strides = {s, s, s};
        a.pads_begin = a.pads_end = {p, p, p};
        return a;
    };
    // Shapes whose runs used scratch from the heap before (the same-grid kernel's sums and
    // scaled planes, the permute backward's scaled gradients, the 16-bit staging planes, the
    // channels-last backward's rings, walks and row homes, channels-first backward's row
    // tables past the plan's bound), and a few of each layout besides.
    for (layout lay : {layout::channels_first, layout::channels_last}) {
        const std::string l = lay == layout::channels_first ? "channels-first " : "channels-last ";
        expect_runs_allocate_nothing<T, 2>(*pooling<2>::create({1, 64, 56, 56}, attrs2(5, 1, 2), lay), l + "5x5 s1 64x56x56");
        expect_runs_allocate_nothing<T, 2>(*pooling<2>::create({1, 3, 224, 224}, attrs2(5, 1, 2), lay), l + "5x5 s1 3x224x224");
        expect_runs_allocate_nothing<T, 2>(*pooling<2>::create({1, 64, 56, 56}, attrs2(3, 1, 1), lay), l + "3x3 s1 64x56x56");
        expect_runs_allocate_nothing<T, 2>(*pooling<2>::create({1, 64, 14, 14}, attrs2(3, 1, 1), lay), l + "3x3 s1 64x14x14");
        expect_runs_allocate_nothing<T, 2>(*pooling<2>::create({1, 64, 20, 20}, attrs2(4, 2, 1), lay), l + "4x4 s2 64x20x20");
        expect_runs_allocate_nothing<T, 2>(*pooling<2>::create({2, 32, 57, 300}, attrs2(3, 2, 1), lay), l + "3x3 s2 32x57x300");
        expect_runs_allocate_nothing<T, 2>(*pooling<2>::create({1, 8, 40, 700}, attrs2(2, 2, 0), lay), l + "2x2 s2 8x40x700");
        expect_runs_allocate_nothing<T, 3>(*pooling<3>::create({1, 16, 32, 16, 8}, attrs3(3, 2, 0), lay), l + "3x3x3 s2");
        expect_runs_allocate_nothing<T, 3>(*pooling<3>::create({1, 16, 16, 16, 16}, attrs3(3, 1, 1), lay), l + "3x3x3 s1");
        // More outer input rows than the plan keeps backward row tables for: built per call.
        expect_runs_allocate_nothing<T, 3>(*pooling<3>::create({1, 1, 200, 400, 8}, attrs3(3, 1, 1), lay),
                                           l + "3x3x3 s1, 80000 outer rows");
        expect_runs_allocate_nothing<T, 2>(*pooling<2>::create_adaptive({1, 32, 60, 60}, {6, 6}, lay), l + "adaptive 6x6");
        expect_runs_allocate_nothing<T, 2>(*pooling<2>::create({1, 96, 7, 7}, attrs2(7, 1, 0), lay), l + "global 7x7");
    }
}

// Random geometries of every mode, both layouts.
template <class T, std::size_t R>
void random_cases(int cases, std::uint64_t seed0) {
    for (int c = 0; c < cases; ++c) {
        std::mt19937_64 gen(seed0 + static_cast<std::uint64_t>(c));
        auto pick = [&](index_t lo, index_t hi) { return std::uniform_int_distribution<index_t>(lo, hi)(gen); };
        avgpool::dims<R + 2> shape{};
        shape[0] = pick(1, 2);
        shape[1] = pick(1, 40);
        avgpool::dims<R> spatial{};
        for (std::size_t ax = 0; ax < R; ++ax) shape[ax + 2] = spatial[ax] = pick(1, R == 1 ? 200 : R == 2 ? 60 : 14);
        const auto a = avgpool_test::random_attrs<R>(gen, spatial);
        const avgpool::layout lay = c % 2 == 0 ? avgpool::layout::channels_first : avgpool::layout::channels_last;
        const auto plan = avgpool::pooling<R>::create(shape, a, lay);
        if (!plan) continue;  // rejected geometries are covered elsewhere
        expect_runs_allocate_nothing<T, R>(*plan, avgpool_test::describe<R>(shape, a, "seed " + std::to_string(seed0 + c)));
        if (::testing::Test::HasFailure()) return;
    }
}

}  // namespace

#if AVGPOOL_TEST_COUNT_NEW
TEST(Allocation, CountingWorks) {
    // The counter sees an allocation made inside the window, so a zero below means something.
    EXPECT_EQ(1, allocations_in([] { ::operator delete(::operator new(16)); }));
}

TEST(Allocation, RunsAllocateNothingFixed) {
    fixed_cases<float>();
    fixed_cases<double>();
    fixed_cases<avgpool::bfloat16>();
    fixed_cases<avgpool::float16>();
}

TEST(Allocation, RunsAllocateNothingRandom) {
    random_cases<float, 1>(40, 7100);
    random_cases<float, 2>(60, 7200);
    random_cases<float, 3>(40, 7300);
    random_cases<double, 2>(30, 7400);
    random_cases<avgpool::bfloat16, 2>(30, 7500);
    random_cases<avgpool::float16, 3>(20, 7600);
}
namespace {
// A plan whose runs take heap scratch (the same-grid kernel's plane of sums: padding all on
// one side, which its vertical-first path for centred pads does not take).
avgpool::result<avgpool::pooling<2>> scratch_plan() {
    avgpool::pool_attrs<2> a;
    a.kernel = {5, 5};
    a.pads_begin = {0, 0};
    a.pads_end = {4, 4};
    return avgpool::pooling<2>::create({1, 64, 56, 56}, a);
}
}  // namespace

TEST(Allocation, ReleaseThreadScratch) {
    const auto plan = scratch_plan();
    ASSERT_TRUE(plan);
    std::vector<float> in(static_cast<std::size_t>(plan->input_size()), 1.5f), out(static_cast<std::size_t>(plan->output_size()));
    auto run = [&] { ASSERT_TRUE(plan->forward(in.data(), out.data())); };
    run();
    ASSERT_EQ(0, allocations_in(run));  // warm
    EXPECT_GT(avgpool::release_thread_scratch(), 0u);
    EXPECT_EQ(0u, avgpool::release_thread_scratch());  // nothing left
    EXPECT_GT(allocations_in(run), 0);                 // cold again
    EXPECT_EQ(0, allocations_in(run));                 // and warm
    // Another thread's cache is its own: releasing it leaves this one's blocks.
    std::size_t other = 1;
    std::thread([&] { other = avgpool::release_thread_scratch(); }).join();
    EXPECT_EQ(0u, other);
    EXPECT_EQ(0, allocations_in(run));
}

TEST(Allocation, ReleasePoolScratch) {
    const auto plan = scratch_plan();
    ASSERT_TRUE(plan);
    std::vector<float> in(static_cast<std::size_t>(plan->input_size()), 1.5f);
    // What one thread keeps after a sequential run of the plan.
    auto warm_here = [&] {
        std::vector<float> out(static_cast<std::size_t>(plan->output_size()));
        ASSERT_TRUE(plan->forward(in.data(), out.data()));
    };
    avgpool::release_thread_scratch();
    warm_here();
    const std::size_t one = avgpool::release_thread_scratch();
    ASSERT_GT(one, 0u);
    avgpool::thread_pool pool(3);
    pool.on_each_thread(warm_here);  // each of the three threads warms its own cache
    EXPECT_EQ(3 * one, avgpool::release_thread_scratch(pool));
    EXPECT_EQ(0u, avgpool::release_thread_scratch(pool));  // nothing left anywhere
    EXPECT_EQ(0u, avgpool::release_thread_scratch());
    // Runs on the pool: cold after a release, then warm.
    std::vector<float> out(static_cast<std::size_t>(plan->output_size()));
    auto run = [&] { ASSERT_TRUE(plan->forward(in.data(), out.data(), pool)); };
    run();
    run();
    EXPECT_GT(avgpool::release_thread_scratch(pool), 0u);
    EXPECT_GT(allocations_in(run), 0);
}
#else
TEST(Allocation, RunsAllocateNothing) { GTEST_SKIP() << "not counted under a sanitizer (it supplies operator new)"; }
#endif
