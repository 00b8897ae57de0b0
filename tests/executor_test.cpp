// Executors: avgpool::sequential, avgpool::thread_pool, and a user lambda. Coverage of every
// index exactly once, a partition fixed by (count, threads), real parallelism, reuse,
// concurrent and nested calls, exception propagation; pooling results bit-identical whatever
// the executor, on every kernel path, few planes split over rows. Also run under TSan
// (avgpool_tsan_tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <avgpool/avgpool.hpp>
#include <avgpool/executor.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/geometry.hpp"
#include "support/random.hpp"

namespace {

using avgpool::index_t;
using avgpool::thread_pool;
using range = std::pair<index_t, index_t>;

static_assert(!std::is_copy_constructible<thread_pool>::value, "not copyable");
static_assert(!std::is_copy_assignable<thread_pool>::value, "not copyable");
static_assert(!std::is_move_constructible<thread_pool>::value, "not movable");
static_assert(!std::is_move_assignable<thread_pool>::value, "not movable");
static_assert(!std::is_convertible<unsigned, thread_pool>::value, "explicit");

// Runs exec over [0, count) and returns the chunks it was given, sorted.
template <class Exec>
std::vector<range> chunks_of(Exec&& exec, index_t count) {
    std::mutex m;
    std::vector<range> seen;
    exec(count, [&](index_t begin, index_t end) {
        std::lock_guard<std::mutex> lock(m);
        seen.emplace_back(begin, end);
    });
    std::sort(seen.begin(), seen.end());
    return seen;
}

// The chunks must tile [0, count) exactly, in at most `most` non-empty pieces.
void expect_tiling(const std::vector<range>& chunks, index_t count, std::size_t most) {
    if (count <= 0) {
        EXPECT_TRUE(chunks.empty());
        return;
    }
    ASSERT_FALSE(chunks.empty());
    EXPECT_LE(chunks.size(), most);
    index_t next = 0;
    for (const range& c : chunks) {
        EXPECT_EQ(c.first, next);
        EXPECT_LT(c.first, c.second);
        next = c.second;
    }
    EXPECT_EQ(next, count);
}

TEST(Executor, PartitionIsBalancedAndContiguous) {
    for (index_t count : {1, 2, 5, 7, 8, 9, 1000, 1001}) {
        for (index_t chunks = 1; chunks <= std::min<index_t>(count, 9); ++chunks) {
            EXPECT_EQ(avgpool::detail::chunk_begin(count, chunks, 0), 0);
            EXPECT_EQ(avgpool::detail::chunk_begin(count, chunks, chunks), count);
            for (index_t i = 0; i < chunks; ++i) {
                const index_t len = avgpool::detail::chunk_begin(count, chunks, i + 1) -
                                    avgpool::detail::chunk_begin(count, chunks, i);
                EXPECT_TRUE(len == count / chunks || len == count / chunks + 1);
            }
        }
    }
    // No overflow at the top of the index range.
    const index_t big = std::numeric_limits<index_t>::max();
    EXPECT_EQ(avgpool::detail::chunk_begin(big, 8, 8), big);
    static_assert(avgpool::detail::chunk_begin(10, 3, 1) == 4, "usable in constant expressions");
}

TEST(Executor, SequentialIsOneChunk) {
    EXPECT_EQ(chunks_of(avgpool::sequential{}, 0), std::vector<range>{});
    EXPECT_EQ(chunks_of(avgpool::sequential{}, 7), (std::vector<range>{{0, 7}}));
}

TEST(ThreadPool, Size) {
    EXPECT_EQ(thread_pool(0).size(), 1u);
    EXPECT_EQ(thread_pool(1).size(), 1u);
    EXPECT_EQ(thread_pool(3).size(), 3u);
    EXPECT_GE(thread_pool().size(), 1u);
}

TEST(ThreadPool, EveryIndexExactlyOnce) {
    for (unsigned threads : {0u, 1u, 2u, 3u, 8u}) {
        thread_pool pool(threads);
        for (index_t count : {0, 1, 2, 3, 7, 8, 9, 1000}) {
            std::vector<std::atomic<int>> hits(static_cast<std::size_t>(count));
            for (auto& h : hits) h.store(0);
            pool(count, [&](index_t begin, index_t end) {
                for (index_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)]++;
            });
            for (index_t i = 0; i < count; ++i)
                ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1)
                    << "threads=" << threads << " count=" << count << " i=" << i;

            // The partition: min(count, size) chunks, fixed by (count, size) alone.
            const std::vector<range> chunks = chunks_of(pool, count);
            expect_tiling(chunks, count, pool.size());
            if (count > 0) {
                const index_t n = std::min<index_t>(count, pool.size());
                ASSERT_EQ(chunks.size(), static_cast<std::size_t>(n));
                for (index_t i = 0; i < n; ++i) {
                    EXPECT_EQ(chunks[static_cast<std::size_t>(i)].first,
                              avgpool::detail::chunk_begin(count, n, i));
                }
            }
            EXPECT_EQ(chunks_of(pool, count), chunks);
            EXPECT_EQ(chunks_of(thread_pool(threads), count), chunks);
        }
    }
}

TEST(ThreadPool, NegativeCountDoesNothing) {
    thread_pool pool(2);
    bool called = false;
    pool(-5, [&](index_t, index_t) { called = true; });
    EXPECT_FALSE(called);
}

TEST(ThreadPool, HugeCountIsPartitionedWithoutOverflow) {
    thread_pool pool(3);
    const index_t big = std::numeric_limits<index_t>::max();
    expect_tiling(chunks_of(pool, big), big, 3);
}

// Each chunk waits until `threads` chunks are running at once, which can only happen on
// `threads` different threads: real parallelism, checked without relying on timing.
TEST(ThreadPool, RunsChunksOnDistinctThreadsAtOnce) {
    for (unsigned threads : {2u, 3u, 8u}) {
        thread_pool pool(threads);
        std::mutex m;
        std::condition_variable cv;
        unsigned inside = 0;
        bool all_met = true;
        std::set<std::thread::id> ids;
        pool(index_t(threads), [&](index_t, index_t) {
            std::unique_lock<std::mutex> lock(m);
            ids.insert(std::this_thread::get_id());
            ++inside;
            cv.notify_all();
            if (!cv.wait_for(lock, std::chrono::seconds(30), [&] { return inside == threads; }))
                all_met = false;
        });
        EXPECT_TRUE(all_met) << threads;
        EXPECT_EQ(ids.size(), threads);
        EXPECT_EQ(ids.count(std::this_thread::get_id()), 1u) << "the caller takes a chunk too";
    }
}

// With slow enough work and more items than threads, several threads take part.
TEST(ThreadPool, SlowWorkIsShared) {
    thread_pool pool(4);
    std::mutex m;
    std::set<std::thread::id> ids;
    pool(64, [&](index_t, index_t) {
        {
            std::lock_guard<std::mutex> lock(m);
            ids.insert(std::this_thread::get_id());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    });
    EXPECT_GE(ids.size(), 2u);
}

TEST(ThreadPool, ReusedAcrossManyCalls) {
    thread_pool pool(4);
    std::vector<index_t> data(1000);
    for (int call = 0; call < 1000; ++call) {
        const index_t count = 1 + call % 97;
        pool(count, [&](index_t begin, index_t end) {
            for (index_t i = begin; i < end; ++i) data[static_cast<std::size_t>(i)] = call;
        });
        for (index_t i = 0; i < count; ++i)
            ASSERT_EQ(data[static_cast<std::size_t>(i)], call) << "call " << call;
    }
}

TEST(ThreadPool, ConcurrentCallersTakeTurnsSafely) {
    thread_pool pool(3);
    std::atomic<int> failures{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < 4; ++t) {
        callers.emplace_back([&pool, &failures, t] {
            std::vector<int> out(257);
            for (int call = 0; call < 200; ++call) {
                const int tag = t * 1000 + call;
                pool(index_t(out.size()), [&](index_t begin, index_t end) {
                    for (index_t i = begin; i < end; ++i) out[static_cast<std::size_t>(i)] = tag;
                });
                for (int v : out)
                    if (v != tag) failures++;
            }
        });
    }
    for (auto& c : callers) c.join();
    EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPool, NestedCallRunsInlineWithTheSamePartition) {
    thread_pool pool(3);
    std::atomic<int> total{0};
    std::mutex m;
    std::vector<std::vector<range>> inner;
    pool(3, [&](index_t, index_t) {
        std::vector<range> mine;
        pool(10, [&](index_t begin, index_t end) {
            mine.emplace_back(begin, end);  // inline: no other thread touches `mine`
            total += static_cast<int>(end - begin);
        });
        std::lock_guard<std::mutex> lock(m);
        inner.push_back(mine);
    });
    EXPECT_EQ(total.load(), 30);
    ASSERT_EQ(inner.size(), 3u);
    for (const auto& r : inner) EXPECT_EQ(r, (std::vector<range>{{0, 4}, {4, 7}, {7, 10}}));
}

TEST(ThreadPool, AcceptsAnyCallable) {
    thread_pool pool(2);
    struct counter {  // non-const operator(), passed as an lvalue
        std::atomic<index_t>* sum;
        void operator()(index_t begin, index_t end) { *sum += end - begin; }
    };
    std::atomic<index_t> sum{0};
    counter c{&sum};
    pool(10, c);
    const counter cc{&sum};
    pool(10, [cc](index_t b, index_t e) { counter{cc}(b, e); });
    const thread_pool& shared = pool;  // calls are const: a shared pool is usable
    shared(10, counter{&sum});
    EXPECT_EQ(sum.load(), 30);
}

TEST(ThreadPool, OnEachThreadRunsOncePerThread) {
    for (unsigned threads : {1u, 2u, 3u}) {
        thread_pool pool(threads);
        for (int round = 0; round < 40; ++round) {
            std::mutex m;
            std::multiset<std::thread::id> ids;
            ASSERT_TRUE(pool.on_each_thread([&] {
                std::lock_guard<std::mutex> lock(m);
                ids.insert(std::this_thread::get_id());
            }));
            // Once on each thread, the caller among them.
            EXPECT_EQ(ids.size(), threads);
            EXPECT_EQ(std::set<std::thread::id>(ids.begin(), ids.end()).size(), threads);
            EXPECT_EQ(ids.count(std::this_thread::get_id()), 1u);
            // Calls in between still see every index once (the rounds and calls share state).
            std::atomic<index_t> sum{0};
            pool(round + 1, [&](index_t b, index_t e) { sum += e - b; });
            EXPECT_EQ(sum.load(), round + 1);
        }
    }
}

std::atomic<int> g_each_count{0};
void count_each() { g_each_count++; }

TEST(ThreadPool, OnEachThreadTakesAPlainFunction) {
    thread_pool pool(3);
    g_each_count = 0;
    ASSERT_TRUE(pool.on_each_thread(count_each));
    ASSERT_TRUE(pool.on_each_thread(&count_each));
    EXPECT_EQ(g_each_count.load(), 6);
}

TEST(ThreadPool, OnEachThreadWaitsForSlowWorkers) {
    thread_pool pool(3);
    std::atomic<int> done{0};
    ASSERT_TRUE(pool.on_each_thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        done++;
    }));
    EXPECT_EQ(done.load(), 3);  // all finished before it returned
}

TEST(ThreadPool, OnEachThreadNestingAndConcurrentCallers) {
    thread_pool pool(2);
    // From inside a chunk of the pool's own call: the workers are busy, so it runs nothing.
    std::atomic<int> ran{0}, refused{0};
    pool(2, [&](index_t, index_t) {
        if (!pool.on_each_thread([&] { ran++; })) refused++;
    });
    EXPECT_EQ(ran.load(), 0);
    EXPECT_EQ(refused.load(), 2);
    // Also from a call of one chunk, and on a pool without workers (whose rounds and calls
    // run on the caller alone): refused, not run again and again.
    pool(1, [&](index_t, index_t) {
        if (!pool.on_each_thread([&] { ran++; })) refused++;
    });
    thread_pool one(1);
    int depth = 0;
    ASSERT_TRUE(one.on_each_thread([&] {
        ++depth;
        if (!one.on_each_thread([&] { ++depth; })) refused++;
    }));
    one(8, [&](index_t, index_t) {
        if (!one.on_each_thread([&] { ++depth; })) refused++;
    });
    EXPECT_EQ(depth, 1);
    EXPECT_EQ(ran.load(), 0);
    EXPECT_EQ(refused.load(), 5);
    // A call fn makes on the same pool runs inline on that thread, without deadlocking.
    std::atomic<index_t> inner{0};
    ASSERT_TRUE(pool.on_each_thread([&] { pool(10, [&](index_t b, index_t e) { inner += e - b; }); }));
    EXPECT_EQ(inner.load(), 20);
    // Two outside threads at once take turns, as calls do.
    std::atomic<int> count{0};
    std::thread other([&] {
        for (int i = 0; i < 50; ++i) pool.on_each_thread([&] { count++; });
    });
    for (int i = 0; i < 50; ++i) pool.on_each_thread([&] { count++; });
    other.join();
    EXPECT_EQ(count.load(), 2 * 50 * 2);
    // Rounds from one thread while another makes calls.
    std::atomic<index_t> covered{0};
    std::thread caller([&] {
        for (int i = 0; i < 50; ++i) pool(7, [&](index_t b, index_t e) { covered += e - b; });
    });
    for (int i = 0; i < 50; ++i) pool.on_each_thread([&] { count++; });
    caller.join();
    EXPECT_EQ(count.load(), 2 * 50 * 2 + 50 * 2);
    EXPECT_EQ(covered.load(), 50 * 7);
}

#if AVGPOOL_HAS_EXCEPTIONS
TEST(ThreadPool, OnEachThreadExceptionAfterEveryThread) {
    thread_pool pool(3);
    std::atomic<int> ran{0};
    const std::thread::id caller = std::this_thread::get_id();
    try {
        pool.on_each_thread([&] {
            ran++;
            if (std::this_thread::get_id() != caller) throw std::runtime_error("worker");
        });
        ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "worker");
    }
    EXPECT_EQ(ran.load(), 3);
    // The caller's own exception wins over the workers'; the pool stays usable.
    EXPECT_THROW(pool.on_each_thread([&] {
                     if (std::this_thread::get_id() == caller) throw std::logic_error("caller");
                     throw std::runtime_error("worker");
                 }),
                 std::logic_error);
    std::atomic<index_t> sum{0};
    pool(100, [&](index_t b, index_t e) { sum += e - b; });
    EXPECT_EQ(sum.load(), 100);
}

TEST(ThreadPool, ExceptionReachesTheCallerAfterAllChunks) {
    for (unsigned threads : {1u, 2u, 4u}) {
        thread_pool pool(threads);
        std::atomic<int> ran{0};
        try {
            pool(8, [&](index_t begin, index_t) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
                ran++;
                if (begin == 0) throw std::runtime_error("chunk 0");
            });
            ADD_FAILURE() << "no exception";
        } catch (const std::runtime_error& e) {
            EXPECT_STREQ(e.what(), "chunk 0");
        }
        EXPECT_EQ(ran.load(), static_cast<int>(std::min(8u, pool.size())));

        // Several throw: exactly one arrives; the pool stays usable.
        EXPECT_THROW(pool(8, [](index_t, index_t) { throw std::logic_error("every chunk"); }),
                     std::logic_error);
        std::atomic<index_t> sum{0};
        pool(100, [&](index_t b, index_t e) { sum += e - b; });
        EXPECT_EQ(sum.load(), 100);
    }
}

TEST(ThreadPool, NestedExceptionPropagates) {
    thread_pool pool(2);
    EXPECT_THROW(pool(2,
                      [&](index_t, index_t) {
                          pool(4, [](index_t b, index_t) {
                              if (b == 2) throw std::out_of_range("inner");
                          });
                      }),
                 std::out_of_range);
}
#endif

// Anything callable as exec(count, fn) is an executor: library code calls it like this.
template <class Exec>
index_t sum_indices(Exec&& exec, index_t count) {
    std::atomic<index_t> sum{0};
    exec(count, [&](index_t begin, index_t end) {
        index_t s = 0;
        for (index_t i = begin; i < end; ++i) s += i;
        sum += s;
    });
    return sum.load();
}

TEST(Executor, AllKindsAgree) {
    const index_t n = 12345, want = n * (n - 1) / 2;
    thread_pool pool(3);
    EXPECT_EQ(sum_indices(avgpool::sequential{}, n), want);
    EXPECT_EQ(sum_indices(pool, n), want);
    EXPECT_EQ(sum_indices([](avgpool::index_t c, auto&& fn) { fn(avgpool::index_t(0), c); }, n),
              want);
    // A user's own engine: here, two halves on two std::threads.
    auto two_threads = [](index_t c, auto&& fn) {
        std::thread t([&] { fn(c / 2, c); });
        fn(index_t(0), c / 2);
        t.join();
    };
    EXPECT_EQ(sum_indices(two_threads, n), want);
}

// ---------------------------------------------------------------------------------------------
// Pooling through every executor: bit-identical outputs.
// ---------------------------------------------------------------------------------------------

// A user's engine that cuts unevenly (pieces of 1, 2, 3, ... items) and runs the pieces out of
// order on two std::threads.
struct uneven_executor {
    template <class F>
    void operator()(index_t count, F&& fn) const {
        std::vector<range> pieces;
        for (index_t b = 0, len = 1; b < count; b += len, ++len) pieces.emplace_back(b, std::min(count, b + len));
        std::thread other([&] {
            for (std::size_t i = 1; i < pieces.size(); i += 2) fn(pieces[i].first, pieces[i].second);
        });
        for (std::size_t i = pieces.size(); i-- > 0;)
            if (i % 2 == 0) fn(pieces[i].first, pieces[i].second);
        other.join();
    }
};

template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    avgpool_test::uniform<double> dist(-4.0, 4.0);
    std::vector<T> v(n);
    for (T& x : v) x = static_cast<T>(dist(gen));
    return v;
}

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// call(exec, out) through sequential, thread_pool(2), thread_pool(3) and uneven_executor: the
// same bytes each time. Outputs start as different garbage, so a skipped output shows too.
template <class T, class Call>
void expect_bit_identical(std::size_t n, const Call& call, const std::string& what) {
    SCOPED_TRACE(what);
    static const thread_pool pool2(2), pool3(3);  // created once, reused by every case
    std::vector<T> want(n, T(1e30));
    call(avgpool::sequential{}, want.data());
    std::vector<T> got(n, T(-7));
    call(pool2, got.data());
    EXPECT_TRUE(same_bytes(want, got)) << "thread_pool(2)";
    std::fill(got.begin(), got.end(), T(-8));
    call(pool3, got.data());
    EXPECT_TRUE(same_bytes(want, got)) << "thread_pool(3)";
    std::fill(got.begin(), got.end(), T(-9));
    call(uneven_executor{}, got.data());
    EXPECT_TRUE(same_bytes(want, got)) << "uneven user executor";
}

// forward, sum and backward of one plan through every executor.
template <class T, std::size_t R>
void check_plan(const avgpool::result<avgpool::pooling<R>>& plan, const std::string& what) {
    ASSERT_TRUE(plan) << what;
    const std::size_t n_in = static_cast<std::size_t>(plan->input_size());
    const std::size_t n_out = static_cast<std::size_t>(plan->output_size());
    const std::vector<T> in = random_values<T>(n_in, 1234 + n_in);
    const std::vector<T> grad = random_values<T>(n_out, 5678 + n_out);
    expect_bit_identical<T>(n_out, [&](auto&& exec, T* out) { ASSERT_TRUE(plan->forward(in.data(), out, exec)); },
                            what + " forward");
    expect_bit_identical<T>(n_out, [&](auto&& exec, T* out) { ASSERT_TRUE(plan->sum(in.data(), out, exec)); },
                            what + " sum");
    expect_bit_identical<T>(
        n_in, [&](auto&& exec, T* g) { ASSERT_TRUE(plan->backward(grad.data(), g, exec)); }, what + " backward");
}

template <std::size_t R>
avgpool::pool_attrs<R> attrs_of(index_t k, index_t s, index_t pad, index_t dil = 1) {
    avgpool::pool_attrs<R> a;
    for (std::size_t i = 0; i < R; ++i) {
        a.kernel[i] = k;
        a.strides[i] = s;
        a.pads_begin[i] = a.pads_end[i] = pad;
        a.dilations[i] = dil;
    }
    return a;
}

std::string name(const char* path, index_t C) { return std::string(path) + " C=" + std::to_string(C); }

// Whether forward() of a plan cuts its planes into blocks of rows (the few-plane split).
template <std::size_t R>
bool rows_split(const avgpool::result<avgpool::pooling<R>>& plan) {
    const auto& d = avgpool::detail::plan_access::data(*plan);
    index_t outer_rows = 1;
    for (std::size_t a = 0; a + 1 < R; ++a) outer_rows *= d.output_shape[a + 2];
    return avgpool::detail::plane_blocks(d.input_shape[0] * d.input_shape[1], outer_rows, plan->input_size()).split();
}

// Planes 1-3 (few planes: split over rows where the shape allows) and 40 (one item per plane),
// every channels-first kernel path. The few-plane cases read just over split_min_elements
// input elements in all (the split cases are asserted below), and C = 40 cuts its outer
// extents by 4: the suite also runs under the sanitizers, where every element costs ~50x more.
template <class T>
void pooling_suite() {
    using avgpool::pooling;
    for (index_t C : {1, 2, 3, 40}) {
        // Under AddressSanitizer C = 2 is left out: its splits are those of C = 1 and 3 (the
        // ThreadSanitizer and release runs keep it).
        if (avgpool_test::under_asan && C == 2) continue;
        // An outer extent e for one plane, cut to reach the same total over C planes.
        const auto outer = [C](index_t e) { return C == 40 ? std::max<index_t>(3, e / 4) : (e + C - 1) / C; };
        const index_t H = C == 40 ? 21 : outer(128), W = C == 40 ? 27 : 131;
        if (C != 40) {  // the cut extents still reach the split
            EXPECT_TRUE(rows_split(pooling<2>::create({1, C, H, W}, attrs_of<2>(3, 1, 1)))) << C;
            EXPECT_TRUE(rows_split(pooling<2>::create_adaptive({1, C, outer(100), 170}, {130, 200}))) << C;
            EXPECT_TRUE(rows_split(pooling<3>::create({1, C, outer(12), 36, 40}, attrs_of<3>(3, 1, 1)))) << C;
            EXPECT_TRUE(rows_split(pooling<3>::create({1, C, outer(10), 34, 50}, attrs_of<3>(2, 2, 0, 2)))) << C;
        }
        check_plan<T, 2>(pooling<2>::create({1, C, H, W}, attrs_of<2>(3, 1, 1)), name("same-grid 3x3 s1 p1", C));
        check_plan<T, 2>(pooling<2>::create({1, C, H, W}, attrs_of<2>(2, 2, 0)), name("2x2 s2", C));
        avgpool::pool_attrs<2> inc = attrs_of<2>(3, 2, 1);
        inc.divisor = avgpool::divisor_type::include_pad;
        inc.rounding = avgpool::rounding_type::ceil_torch;
        check_plan<T, 2>(pooling<2>::create({1, C, H, W}, inc), name("3x3 s2 include-pad ceil", C));
        check_plan<T, 2>(pooling<2>::create({1, C, H, W}, attrs_of<2>(5, 3, 2, 2)), name("5x5 s3 dilation 2", C));
        check_plan<T, 2>(pooling<2>::create({1, C, H, W}, attrs_of<2>(9, 1, 4)), name("9x9 s1 p4", C));
        avgpool::pool_attrs<2> global;
        global.kernel = {H, W};
        check_plan<T, 2>(pooling<2>::create({1, C, H, W}, global), name("global", C));
        check_plan<T, 2>(pooling<2>::create_adaptive({1, C, H, W}, {7, 10}), name("adaptive 7x10", C));
        check_plan<T, 2>(pooling<2>::create_adaptive({1, C, outer(100), 170}, {130, 200}), name("adaptive up", C));
        check_plan<T, 3>(pooling<3>::create({1, C, outer(12), 36, 40}, attrs_of<3>(3, 1, 1)), name("3-D 3x3x3 s1 p1", C));
        check_plan<T, 3>(pooling<3>::create({1, C, outer(10), 34, 50}, attrs_of<3>(2, 2, 0, 2)),
                         name("3-D 2x2x2 s2 dil 2", C));
        check_plan<T, 3>(pooling<3>::create_adaptive({1, C, outer(10), 34, 50}, {3, 4, 5}), name("3-D adaptive", C));
        check_plan<T, 1>(pooling<1>::create({1, C, 1000}, attrs_of<1>(5, 2, 2)), name("1-D 5 s2", C));
        check_plan<T, 4>(pooling<4>::create({1, C, outer(8), 9, 10, 24}, attrs_of<4>(3, 2, 1)), name("4-D (reference)", C));
        // A divisor not exact in float: the reference path for float, the row kernel for double.
        avgpool::pool_attrs<2> big = attrs_of<2>(3, 1, 1);
        big.divisor_override = 20000001;
        check_plan<T, 2>(pooling<2>::create({1, C, H, W}, big), name("divisor_override 20000001", C));
        if (::testing::Test::HasFailure()) return;
    }
    // N > 1 with few planes in all, and N * C just below / at the split limit.
    check_plan<T, 2>(pooling<2>::create({2, 1, 128, 131}, attrs_of<2>(3, 1, 1)), "N=2 C=1");
    check_plan<T, 2>(pooling<2>::create({3, 10, 30, 31}, attrs_of<2>(3, 1, 1)), "N=3 C=10");  // small: no split
    check_plan<T, 2>(pooling<2>::create({3, 10, 60, 31}, attrs_of<2>(3, 1, 1)), "N=3 C=10 large");
    check_plan<T, 2>(pooling<2>::create({4, 8, 30, 31}, attrs_of<2>(3, 1, 1)), "N=4 C=8");
}

TEST(ExecutorPooling, BitIdenticalAcrossExecutorsFloat) { pooling_suite<float>(); }
TEST(ExecutorPooling, BitIdenticalAcrossExecutorsDouble) { pooling_suite<double>(); }

// Channels-last: items are output rows (forward) and input rows (backward) already; few
// channels, 1-D to 3-D.
template <class T>
void channels_last_suite() {
    using avgpool::pooling;
    const auto cl = avgpool::layout::channels_last;
    for (index_t C : {1, 3, 17}) {
        check_plan<T, 2>(pooling<2>::create({1, C, 40, 41}, attrs_of<2>(3, 1, 1), cl), name("NHWC 3x3 s1 p1", C));
        check_plan<T, 2>(pooling<2>::create({1, C, 40, 41}, attrs_of<2>(2, 2, 0), cl), name("NHWC 2x2 s2", C));
        check_plan<T, 2>(pooling<2>::create({1, C, 40, 41}, attrs_of<2>(7, 3, 3, 2), cl), name("NHWC 7x7 s3 dil 2", C));
        check_plan<T, 2>(pooling<2>::create_adaptive({1, C, 40, 41}, {6, 5}, cl), name("NHWC adaptive", C));
        check_plan<T, 3>(pooling<3>::create({1, C, 6, 15, 16}, attrs_of<3>(3, 1, 1), cl), name("NDHWC 3x3x3", C));
        check_plan<T, 1>(pooling<1>::create({1, C, 300}, attrs_of<1>(4, 3, 1), cl), name("NWC 4 s3", C));
        check_plan<T, 4>(pooling<4>::create({1, C, 4, 5, 6, 7}, attrs_of<4>(2, 1, 1), cl), name("4-D NC (reference)", C));
        if (::testing::Test::HasFailure()) return;
    }
}

TEST(ExecutorPooling, ChannelsLastBitIdenticalFloat) { channels_last_suite<float>(); }
TEST(ExecutorPooling, ChannelsLastBitIdenticalDouble) { channels_last_suite<double>(); }

// The permute kernel (AVX-512 builds, float) over whole planes, where the split takes it (not
// where the stride-2 row kernel takes the plan): returns whether it ran.
template <class T, std::size_t R>
bool permute_forward(const avgpool::detail::plan_data<R>& d, avgpool::detail::pool_op op, const T* in, T* out, index_t planes) {
#if AVGPOOL_PERM_KERNEL
    if constexpr (std::is_same<T, float>::value) {
        if (!avgpool::detail::perm_applicable<T, R>(d) || avgpool::detail::s2_applicable<T, R>(d)) return false;
        avgpool::detail::perm_kernel<R>(d, op).run(in, out, 0, planes);
        return true;
    }
#endif
    (void)d, (void)op, (void)in, (void)out, (void)planes;
    return false;
}
// The stride-2 row kernel (float; with AVX-512 2-D planes only) over whole planes, where the
// split takes it.
template <class T, std::size_t R>
bool stride2_forward(const avgpool::detail::plan_data<R>& d, avgpool::detail::pool_op op, const T* in, T* out, index_t planes) {
#if AVGPOOL_STRIDE2_KERNEL
    if constexpr (std::is_same<T, float>::value) {
        if (!avgpool::detail::s2_applicable<T, R>(d)) return false;
        const avgpool::detail::s2_kernel<R> k(d, op);
        if (!k.splits_rows()) return false;
        k.run(in, out, 0, planes);
        return true;
    }
#endif
    (void)d, (void)op, (void)in, (void)out, (void)planes;
    return false;
}
template <class T, std::size_t R>
bool permute_backward(const avgpool::detail::plan_data<R>& d, const T* grad, T* grad_in, index_t planes) {
#if AVGPOOL_PERM_KERNEL
    if constexpr (std::is_same<T, float>::value) {
        // (The stride-2 kernel, first where it applies, gives backward_cf's bits.)
        if (!avgpool::detail::perm_backward_applicable<T, R>(d) || avgpool::detail::s2_backward_applicable<T, R>(d))
            return false;
        avgpool::detail::perm_backward<R>(d).run(grad, grad_in, 0, planes);
        return true;
    }
#endif
    (void)d, (void)grad, (void)grad_in, (void)planes;
    return false;
}

// The row split computes each output with the same code as the whole-plane kernels: forward()
// of a few-plane plan equals, bit for bit, the first whole-plane kernel the split takes, run
// directly over whole planes: the permute kernel (AVX-512, rows up to 32 or in chunks at
// stride 2), the 2x2 stride-2 kernel, the same-grid kernel (where its rows split), the
// stride-2 row kernel (AVX2, float, but narrow rows), the block kernel (rows up to 128 wide),
// the row kernel, else the reference. Both a thread pool and the
// uneven executor, whose pieces start on odd rows where the blocks do.
template <class T, std::size_t R>
void expect_split_matches_whole_planes(const avgpool::result<avgpool::pooling<R>>& plan, const std::string& what) {
    SCOPED_TRACE(what);
    ASSERT_TRUE(plan);
    namespace dt = avgpool::detail;
    const auto& d = dt::plan_access::data(*plan);
    const index_t planes = d.input_shape[0] * d.input_shape[1];
    const std::vector<T> in = random_values<T>(static_cast<std::size_t>(plan->input_size()), 99);
    const std::size_t n = static_cast<std::size_t>(plan->output_size());
    static const thread_pool pool(2);
    for (auto op : {dt::pool_op::average, dt::pool_op::sum}) {
        const bool avg = op == dt::pool_op::average;
        std::vector<T> whole(n, T(4));
        if (permute_forward<T, R>(d, op, in.data(), whole.data(), planes)) {
        } else if (dt::pair_applicable<T, R>(d)) {
            dt::pair_kernel<T, R>(d, op).run(in.data(), whole.data(), 0, planes);
        } else if (dt::same_applicable<T, R>(d) && dt::same_kernel<T, R>(d, op).splits_rows()) {
            dt::same_kernel<T, R>(d, op).run(in.data(), whole.data(), 0, planes);
        } else if (stride2_forward<T, R>(d, op, in.data(), whole.data(), planes)) {
        } else if (dt::flat_split_applicable<T, R>(d)) {
            dt::flat_kernel<T, R>(d, op).run(in.data(), whole.data(), 0, planes);
        } else if (dt::cf_applicable<T, R>(d)) {
            dt::cf_kernel<T, R>(d, op).run(in.data(), whole.data(), 0, planes);
        } else {
            dt::reference_pool<T, R>(d, in.data(), whole.data(), op, 0, planes);
        }
        auto call = [&](const auto& exec, T* out) { return avg ? plan->forward(in.data(), out, exec) : plan->sum(in.data(), out, exec); };
        std::vector<T> split(n, T(3));
        ASSERT_TRUE(call(pool, split.data()));
        EXPECT_TRUE(same_bytes(split, whole)) << (avg ? "average" : "sum") << ", thread_pool(2)";
        std::fill(split.begin(), split.end(), T(5));
        ASSERT_TRUE(call(uneven_executor{}, split.data()));
        EXPECT_TRUE(same_bytes(split, whole)) << (avg ? "average" : "sum") << ", uneven executor";
    }
    // Backward splits input rows; each row is computed as the whole-plane order computes it.
    const bool pair = dt::pair_applicable<T, R>(d);
    const bool same = dt::same_applicable<T, R>(d) && dt::same_kernel<T, R>(d, dt::pool_op::sum, true).splits_backward_rows();
    if (!d.global && (pair || same || dt::backward_cf_applicable<T, R>(d))) {
        const std::vector<T> grad = random_values<T>(n, 77);
        const std::size_t n_in = static_cast<std::size_t>(plan->input_size());
        std::vector<T> whole(n_in, T(4));
        const bool permuted = permute_backward<T, R>(d, grad.data(), whole.data(), planes);
        if (permuted) {
        } else if (pair) {
            dt::pair_kernel<T, R>(d, dt::pool_op::average).run_backward(grad.data(), whole.data(), 0, planes);
        } else if (same) {
            dt::same_kernel<T, R>(d, dt::pool_op::sum, true).run_backward(grad.data(), whole.data(), 0, planes);
        } else {
            dt::backward_cf<T, R>(d).run(grad.data(), whole.data(), 0, planes);
        }
        if ((pair || same) && !permuted && R == 2) {
            // Ownership: a call for input rows [r0, r1) of a plane writes those rows only (two
            // threads' ranges never share an element), each as the whole plane's run gives it.
            const index_t H = d.input_shape[2], W = plan->input_size() / (planes * H);
            const index_t a = H / 3 + 1, b = std::max(a, 2 * H / 3);  // (odd starts for odd H)
            std::vector<T> one(n_in);
            for (index_t item = 0; item < planes; ++item) {
                for (auto part : {std::make_pair(index_t(0), a), std::make_pair(a, b), std::make_pair(b, H)}) {
                    if (part.first >= part.second) continue;
                    std::fill(one.begin(), one.end(), T(-7));
                    if (pair) {
                        dt::pair_kernel<T, R>(d, dt::pool_op::average)
                            .run_backward_rows(grad.data(), one.data(), item, part.first, part.second);
                    } else {
                        dt::same_kernel<T, R>(d, dt::pool_op::sum, true)
                            .run_backward_rows(grad.data(), one.data(), item, part.first, part.second);
                    }
                    const index_t lo = (item * H + part.first) * W, hi = (item * H + part.second) * W;
                    for (index_t i = 0; i < static_cast<index_t>(n_in); ++i) {
                        const T want = i >= lo && i < hi ? whole[static_cast<std::size_t>(i)] : T(-7);
                        ASSERT_EQ(0, std::memcmp(&one[static_cast<std::size_t>(i)], &want, sizeof(T)))
                            << "backward rows [" << part.first << ", " << part.second << ") of plane " << item
                            << ": input " << i;
                    }
                }
            }
        }
        std::vector<T> split(n_in, T(3));
        ASSERT_TRUE(plan->backward(grad.data(), split.data(), pool));
        EXPECT_TRUE(same_bytes(split, whole)) << "backward, thread_pool(2)";
        std::fill(split.begin(), split.end(), T(5));
        ASSERT_TRUE(plan->backward(grad.data(), split.data(), uneven_executor{}));
        EXPECT_TRUE(same_bytes(split, whole)) << "backward, uneven executor";
    }
}

template <class T>
void split_suite() {
    using avgpool::pooling;
    // A plan the few-plane split takes, against the whole-plane kernels.
    const auto split_case = [](const avgpool::result<pooling<2>>& plan, const std::string& what) {
        EXPECT_TRUE(rows_split(plan)) << what;
        expect_split_matches_whole_planes<T, 2>(plan, what);
    };
    for (index_t C : {1, 3}) {
        expect_split_matches_whole_planes<T, 2>(pooling<2>::create({1, C, 128, 131}, attrs_of<2>(3, 1, 1)), name("3x3 s1", C));
        expect_split_matches_whole_planes<T, 2>(pooling<2>::create({1, C, 128, 131}, attrs_of<2>(2, 2, 0)), name("2x2 s2", C));
        expect_split_matches_whole_planes<T, 2>(pooling<2>::create({1, C, 128, 131}, attrs_of<2>(5, 3, 2, 2)),
                                                name("5x5 s3 dil 2", C));
        // Rows wider than one row-buffer tile (several tiles per row).
        expect_split_matches_whole_planes<T, 2>(pooling<2>::create({1, C, 9, 5000}, attrs_of<2>(3, 1, 1)), name("wide", C));
        expect_split_matches_whole_planes<T, 2>(pooling<2>::create_adaptive({1, C, 128, 131}, {7, 10}), name("adaptive", C));
        expect_split_matches_whole_planes<T, 3>(pooling<3>::create({1, C, 12, 36, 40}, attrs_of<3>(3, 1, 1)), name("3-D", C));
        // Narrow rows: the split takes the block kernel.
        EXPECT_TRUE(rows_split(pooling<2>::create({1, C, 300, 56}, attrs_of<2>(3, 2, 1)))) << C;
        EXPECT_TRUE(rows_split(pooling<3>::create({1, C, 128, 16, 8}, attrs_of<3>(3, 2, 1)))) << C;
        expect_split_matches_whole_planes<T, 2>(pooling<2>::create({1, C, 300, 56}, attrs_of<2>(3, 2, 1)),
                                                name("3x3 s2 56 wide", C));
        expect_split_matches_whole_planes<T, 3>(pooling<3>::create({1, C, 128, 16, 8}, attrs_of<3>(3, 2, 1)),
                                                name("3-D 8 wide s2", C));
        expect_split_matches_whole_planes<T, 4>(pooling<4>::create({1, C, 8, 9, 10, 24}, attrs_of<4>(3, 2, 1)), name("4-D", C));
        avgpool::pool_attrs<2> big = attrs_of<2>(3, 1, 1);
        big.divisor_override = 20000001;  // the reference path for float
        expect_split_matches_whole_planes<T, 2>(pooling<2>::create({1, C, 128, 131}, big), name("override", C));
        // The same-grid and 2x2 kernels' row ranges, on planes of at least split_min_elements
        // (C = 1 splits too); these row counts put block starts on odd rows.
        split_case(pooling<2>::create({1, C, 151, 131}, attrs_of<2>(3, 1, 1)), name("3x3 s1 odd rows", C));
        split_case(pooling<2>::create({1, C, 127, 131}, attrs_of<2>(5, 1, 2)), name("5x5 s1", C));
        split_case(pooling<2>::create({1, C, 251, 67}, attrs_of<2>(7, 1, 3)), name("7x7 s1", C));
        split_case(pooling<2>::create({1, C, 751, 23}, attrs_of<2>(5, 1, 2)), name("5x5 s1 narrow", C));
        avgpool::pool_attrs<2> k2 = attrs_of<2>(2, 1, 0);  // output = input: pads (0, 1)
        k2.pads_end = {1, 1};
        split_case(pooling<2>::create({1, C, 151, 131}, k2), name("2x2 s1", C));
        split_case(pooling<2>::create({1, C, 231, 75}, attrs_of<2>(2, 2, 0)), name("2x2 s2 odd", C));
        split_case(pooling<2>::create({1, C, 1301, 13}, attrs_of<2>(2, 2, 0)), name("2x2 s2 narrow", C));
    }
    // The same-grid kernel's general path row by row: rows narrower than a vector (forward),
    // and backward on planes up to same_split_backward_max (the planes above are larger,
    // so their backward splits through backward_cf); include-pad and a divisor_override.
    split_case(pooling<2>::create({1, 2, 1200, 7}, attrs_of<2>(5, 1, 2)), "5x5 s1, 7 wide");
    split_case(pooling<2>::create({1, 2, 1700, 5}, attrs_of<2>(7, 1, 3)), "7x7 s1, 5 wide");
    split_case(pooling<2>::create({1, 1, 128, 128}, attrs_of<2>(5, 1, 2)), "5x5 s1, one 128x128 plane");
    split_case(pooling<2>::create({1, 2, 92, 92}, attrs_of<2>(7, 1, 3)), "7x7 s1, 92x92 planes");
    avgpool::pool_attrs<2> inc = attrs_of<2>(5, 1, 2);
    inc.divisor = avgpool::divisor_type::include_pad;
    split_case(pooling<2>::create({1, 1, 128, 128}, inc), "5x5 s1 include-pad");
    inc = attrs_of<2>(3, 1, 1);
    inc.divisor_override = 7;
    split_case(pooling<2>::create({1, 1, 151, 131}, inc), "3x3 s1 divisor_override 7");
    // Planes whose sums fit one segment (kernel width x plane <= 8192): 14 planes of 30x40.
    EXPECT_TRUE(rows_split(pooling<2>::create({1, 14, 30, 40}, attrs_of<2>(5, 1, 2))));
    expect_split_matches_whole_planes<T, 2>(pooling<2>::create({1, 14, 30, 40}, attrs_of<2>(5, 1, 2)), "5x5 s1 small planes");
    EXPECT_TRUE(rows_split(pooling<2>::create({1, 13, 33, 41}, attrs_of<2>(3, 1, 1))));
    expect_split_matches_whole_planes<T, 2>(pooling<2>::create({1, 13, 33, 41}, attrs_of<2>(3, 1, 1)), "3x3 s1 small planes");
    // Those cases reach the kernels' row ranges: the same-grid kernel's (its strip and general
    // paths) and the 2x2 kernel's.
    namespace dt = avgpool::detail;
    const auto op = dt::pool_op::average;
    for (const auto& plan : {pooling<2>::create({1, 1, 151, 131}, attrs_of<2>(3, 1, 1)),
                             pooling<2>::create({1, 1, 127, 131}, attrs_of<2>(5, 1, 2)),
                             pooling<2>::create({1, 14, 30, 40}, attrs_of<2>(5, 1, 2))}) {
        const auto& d = dt::plan_access::data(*plan);
        const bool same = dt::same_applicable<T, 2>(d) && dt::same_kernel<T, 2>(d, op).splits_rows();
        EXPECT_TRUE(same);
    }
    const auto pair = pooling<2>::create({1, 1, 231, 75}, attrs_of<2>(2, 2, 0));
    EXPECT_TRUE((dt::pair_applicable<T, 2>(dt::plan_access::data(*pair))));
}

// 16-bit storage through the row ranges: the split (forward) gives each output as the float
// result on the same values, rounded once, whatever the executor's pieces.
template <class H>
void split_16bit_case(const avgpool::result<avgpool::pooling<2>>& plan, const std::string& what) {
    SCOPED_TRACE(what);
    ASSERT_TRUE(plan);
    EXPECT_TRUE(rows_split(plan));
    const std::size_t n_in = static_cast<std::size_t>(plan->input_size()), n = static_cast<std::size_t>(plan->output_size());
    std::vector<float> xf = random_values<float>(n_in, 31);
    std::vector<H> x(n_in);
    for (std::size_t i = 0; i < n_in; ++i) {
        x[i] = H(xf[i]);
        xf[i] = static_cast<float>(x[i]);
    }
    std::vector<float> yf(n);
    ASSERT_TRUE(plan->forward(xf.data(), yf.data()));
    std::vector<H> seq(n), split(n, H(5.0f));
    ASSERT_TRUE(plan->forward(x.data(), seq.data()));
    ASSERT_TRUE(plan->forward(x.data(), split.data(), uneven_executor{}));
    for (std::size_t o = 0; o < n; ++o) ASSERT_EQ(seq[o].bits(), H(yf[o]).bits()) << "output " << o;
    EXPECT_EQ(0, std::memcmp(seq.data(), split.data(), n * sizeof(H))) << "uneven executor";
}

TEST(ExecutorPooling, RowSplitSixteenBit) {
    using avgpool::pooling;
    for (index_t C : {1, 3}) {
        split_16bit_case<avgpool::bfloat16>(pooling<2>::create({1, C, 151, 131}, attrs_of<2>(3, 1, 1)), name("bf16 3x3 s1", C));
        split_16bit_case<avgpool::float16>(pooling<2>::create({1, C, 127, 131}, attrs_of<2>(5, 1, 2)), name("f16 5x5 s1", C));
        split_16bit_case<avgpool::bfloat16>(pooling<2>::create({1, C, 231, 75}, attrs_of<2>(2, 2, 0)), name("bf16 2x2 s2", C));
    }
    split_16bit_case<avgpool::float16>(pooling<2>::create({1, 2, 1200, 7}, attrs_of<2>(5, 1, 2)), "f16 5x5 s1, 7 wide");
}

TEST(ExecutorPooling, RowSplitMatchesWholePlanesFloat) { split_suite<float>(); }
TEST(ExecutorPooling, RowSplitMatchesWholePlanesDouble) { split_suite<double>(); }

// N = 1, C = 1: a thread_pool(2) gets at least two chunks of real work, channels-first
// (every kernel path) and channels-last (one channel runs as channels-first; 16 run the
// channels-last kernels); a small plane stays one item (not worth a thread).
TEST(ExecutorPooling, SinglePlaneIsSplitAcrossThreads) {
    using avgpool::pooling;
    const thread_pool pool(2);
    // Items the call hands the executor (forward, or backward: its input rows are split).
    auto items = [&](const auto& plan, const std::string& what, bool backward = false) {
        SCOPED_TRACE(what);
        EXPECT_TRUE(plan);
        if (!plan) return index_t(-1);
        const auto n_in = static_cast<std::size_t>(plan->input_size()), n_out = static_cast<std::size_t>(plan->output_size());
        std::vector<float> src(backward ? n_out : n_in, 1.0f), dst(backward ? n_in : n_out);
        index_t count = 0;
        std::atomic<int> chunks{0};
        auto counting = [&](index_t n, auto&& fn) {
            count = n;
            pool(n, [&](index_t b, index_t e) {
                chunks++;
                fn(b, e);
            });
        };
        EXPECT_TRUE(backward ? plan->backward(src.data(), dst.data(), counting)
                             : plan->forward(src.data(), dst.data(), counting));
        EXPECT_EQ(chunks.load(), static_cast<int>(std::min<index_t>(count, 2)));
        return count;
    };
    EXPECT_GE(items(pooling<2>::create({1, 1, 128, 128}, attrs_of<2>(5, 3, 2, 2)), "backward 5x5 s3 dil 2", true), 2);
    EXPECT_GE(items(pooling<3>::create({1, 2, 16, 56, 56}, attrs_of<3>(3, 2, 1)), "backward 3-D", true), 2);
    EXPECT_EQ(items(pooling<1>::create({1, 1, 100000}, attrs_of<1>(3, 2, 1)), "backward 1-D: one row", true), 1);
    EXPECT_GE(items(pooling<2>::create({1, 1, 224, 224}, attrs_of<2>(3, 1, 1)), "3x3 s1 p1 224x224"), 2);
    EXPECT_GE(items(pooling<2>::create({1, 1, 224, 224}, attrs_of<2>(2, 2, 0)), "2x2 s2 224x224"), 2);
    EXPECT_GE(items(pooling<2>::create({1, 1, 128, 128}, attrs_of<2>(5, 3, 2, 2)), "5x5 s3 dil 2 128x128"), 2);
    EXPECT_GE(items(pooling<3>::create({1, 1, 16, 56, 56}, attrs_of<3>(3, 1, 1)), "3-D 16x56x56"), 2);
    EXPECT_GE(items(pooling<2>::create_adaptive({1, 1, 180, 180}, {6, 6}), "adaptive 6x6"), 2);
    EXPECT_GE(items(pooling<4>::create({1, 1, 8, 9, 10, 24}, attrs_of<4>(3, 2, 1)), "4-D reference"), 2);
    EXPECT_GE(items(pooling<2>::create({1, 16, 40, 41}, attrs_of<2>(3, 1, 1), avgpool::layout::channels_last), "NHWC"),
              2);
    // One channel runs the channels-first kernels: split as NCHW is.
    EXPECT_GE(items(pooling<2>::create({1, 1, 224, 224}, attrs_of<2>(3, 1, 1), avgpool::layout::channels_last),
                    "NHWC, one channel"),
              2);
    EXPECT_EQ(items(pooling<2>::create({1, 1, 8, 8}, attrs_of<2>(3, 1, 1), avgpool::layout::channels_last),
                    "NHWC, one channel, 8x8"),
              1);
    EXPECT_EQ(items(pooling<2>::create({1, 1, 8, 8}, attrs_of<2>(3, 1, 1)), "3x3 s1 p1 8x8"), 1);
    EXPECT_EQ(items(pooling<2>::create({1, 3, 56, 56}, attrs_of<2>(3, 1, 1)), "3x3 s1 p1 3x56x56"), 3);
}

// The item layout of a split call: blocks tile each plane's rows, items tile the planes.
TEST(ExecutorPooling, PlaneBlocksTileEveryRowOnce) {
    using avgpool::detail::plane_blocks;
    const index_t big = avgpool::detail::split_min_elements;
    EXPECT_FALSE(plane_blocks(32, 100, big).split());   // enough planes: one item each
    EXPECT_FALSE(plane_blocks(1, 1, big).split());      // one row: nothing to split
    EXPECT_FALSE(plane_blocks(2, 100, big - 1).split());  // too little work for threads
    EXPECT_EQ(plane_blocks(1, 1000, big).items(), avgpool::detail::split_target_items);
    EXPECT_EQ(plane_blocks(3, 5, big).blocks, 5);  // never more blocks than rows
    for (index_t planes : {1, 2, 3, 7, 31})
        for (index_t rows : {1, 2, 5, 56, 224}) {
            const plane_blocks pb(planes, rows, big);
            for (index_t cut : {1, 2, 3, 5}) {
                std::vector<int> hits(static_cast<std::size_t>(planes * rows), 0);
                for (index_t c = 0; c < cut; ++c) {
                    const index_t b = avgpool::detail::chunk_begin(pb.items(), cut, c);
                    const index_t e = avgpool::detail::chunk_begin(pb.items(), cut, c + 1);
                    int calls = 0;
                    pb.for_each(b, e, [&](index_t plane, index_t r0, index_t r1) {
                        ++calls;
                        ASSERT_LT(r0, r1);
                        for (index_t r = r0; r < r1; ++r) hits[static_cast<std::size_t>(plane * rows + r)]++;
                    });
                    if (b < e) {
                        EXPECT_LE(calls, (e - b) / pb.blocks + 2);  // one call per plane touched
                    }
                }
                for (int h : hits) ASSERT_EQ(h, 1) << planes << "x" << rows << " cut " << cut;
                // for_each_run(): the same rows, whole planes in maximal runs, the rest by rows.
                std::fill(hits.begin(), hits.end(), 0);
                for (index_t c = 0; c < cut; ++c) {
                    const index_t b = avgpool::detail::chunk_begin(pb.items(), cut, c);
                    const index_t e = avgpool::detail::chunk_begin(pb.items(), cut, c + 1);
                    index_t run_end = -1;  // end of the previous call's planes, if it took a run
                    pb.for_each_run(
                        b, e,
                        [&](index_t plane, index_t r0, index_t r1) {
                            ASSERT_LT(r0, r1);
                            ASSERT_FALSE(r0 == 0 && r1 == rows) << "a whole plane went by rows";
                            for (index_t r = r0; r < r1; ++r) hits[static_cast<std::size_t>(plane * rows + r)]++;
                            run_end = -1;
                        },
                        [&](index_t first, index_t end) {
                            ASSERT_LT(first, end);
                            ASSERT_NE(first, run_end) << "two runs of whole planes side by side";
                            for (index_t i = first * rows; i < end * rows; ++i) hits[static_cast<std::size_t>(i)]++;
                            run_end = end;
                        });
                }
                for (int h : hits) ASSERT_EQ(h, 1) << planes << "x" << rows << " cut " << cut << " (runs)";
            }
        }
}

// Executors of every shape the API allows: a plain function taking std::function, an object
// with a non-const call operator passed as an lvalue, one taking fn by value, a temporary
// lambda, a const object. Each gives sequential's bytes, and each is called (plan methods pass
// executors on through a reference, so a missed call would leave the garbage in place).
int function_executor_calls = 0;
void function_executor(index_t count, std::function<void(index_t, index_t)> fn) {
    ++function_executor_calls;
    for (index_t b = 0; b < count; b += 3) fn(b, std::min(count, b + 3));
}

struct counting_executor {  // non-const call operator
    int calls = 0;
    template <class F>
    void operator()(index_t count, F&& fn) {
        ++calls;
        fn(index_t(0), count);
    }
};
struct by_value_executor {
    template <class F>
    void operator()(index_t count, F fn) const {
        for (index_t i = count; i-- > 0;) fn(i, i + 1);  // one item at a time, backwards
    }
};

TEST(ExecutorPooling, EveryKindOfExecutor) {
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.strides = {2, 1};
    a.pads_begin = a.pads_end = {1, 1};
    const auto plan = avgpool::pooling<2>::create({2, 5, 9, 13}, a);
    ASSERT_TRUE(plan);
    const std::vector<float> in = random_values<float>(static_cast<std::size_t>(plan->input_size()), 99);
    const std::size_t n = static_cast<std::size_t>(plan->output_size());
    std::vector<float> want(n, -1.0f);
    ASSERT_TRUE(plan->forward(in.data(), want.data()));

    auto check = [&](const char* what, auto&& run) {
        std::vector<float> got(n, 7.0f);
        ASSERT_TRUE(run(got.data())) << what;
        EXPECT_TRUE(same_bytes(want, got)) << what;
    };
    check("plain function", [&](float* o) { return plan->forward(in.data(), o, function_executor); });
    EXPECT_EQ(function_executor_calls, 1);
    check("function pointer", [&](float* o) { return plan->forward(in.data(), o, &function_executor); });
    EXPECT_EQ(function_executor_calls, 2);
    counting_executor c;
    check("non-const object", [&](float* o) { return plan->forward(in.data(), o, c); });
    EXPECT_EQ(c.calls, 1);
    check("fn by value", [&](float* o) { return plan->forward(in.data(), o, by_value_executor{}); });
    check("temporary lambda", [&](float* o) {
        return plan->forward(in.data(), o, [](index_t count, auto&& fn) { fn(index_t(0), count); });
    });
    const by_value_executor cv{};
    check("const object", [&](float* o) { return plan->forward(in.data(), o, cv); });
}

// A plan's backward tables are built by its first backward call (detail::backward_tables):
// threads calling backward at once on fresh plans, and on copies made before any backward,
// each get the bits of a plan that built them alone. Under TSan this checks the once flag.
TEST(ExecutorPooling, FirstBackwardCallsAtOnce) {
    struct shape_case {
        avgpool::dims<4> shape;
        avgpool::layout lay;
        index_t k, s, p;
    };
    const shape_case cases[] = {
        {{1, 3, 32, 32}, avgpool::layout::channels_first, 3, 2, 1},   // stride-2 / permute tables
        {{2, 24, 9, 11}, avgpool::layout::channels_last, 3, 1, 1},     // column lists, flipped plan
        {{1, 20, 12, 10}, avgpool::layout::channels_last, 3, 2, 0},    // column lists
        {{1, 16, 7, 7}, avgpool::layout::channels_first, 3, 1, 1},     // whole-plane tables
        {{1, 5, 14, 14}, avgpool::layout::channels_last, 2, 2, 0},     // pixel kernel
    };
    for (const shape_case& c : cases) {
        avgpool::pool_attrs<2> a;
        a.kernel = {c.k, c.k};
        a.strides = {c.s, c.s};
        a.pads_begin = a.pads_end = {c.p, c.p};
        const auto ref_plan = avgpool::pooling<2>::create(c.shape, a, c.lay);
        ASSERT_TRUE(ref_plan);
        const std::vector<float> g = random_values<float>(static_cast<std::size_t>(ref_plan->output_size()), 5);
        const std::size_t n = static_cast<std::size_t>(ref_plan->input_size());
        std::vector<float> want(n, -1.0f);
        ASSERT_TRUE(ref_plan->backward(g.data(), want.data()));
        for (int round = 0; round < 4; ++round) {
            const auto plan = avgpool::pooling<2>::create(c.shape, a, c.lay);
            ASSERT_TRUE(plan);
            const avgpool::pooling<2> copy = *plan;  // shares the tables still to be built
            constexpr int threads = 4;
            std::vector<std::vector<float>> got(threads, std::vector<float>(n, 7.0f));
            std::atomic<int> ready{0};
            std::vector<std::thread> pool;
            for (int t = 0; t < threads; ++t)
                pool.emplace_back([&, t] {
                    ready.fetch_add(1);
                    while (ready.load() < threads) std::this_thread::yield();
                    const avgpool::pooling<2>& mine = t % 2 == 0 ? *plan : copy;
                    (void)mine.backward(g.data(), got[static_cast<std::size_t>(t)].data());
                });
            for (std::thread& th : pool) th.join();
            for (int t = 0; t < threads; ++t)
                EXPECT_TRUE(same_bytes(want, got[static_cast<std::size_t>(t)])) << "case " << c.shape[1] << " thread " << t;
        }
    }
}

}  // namespace
