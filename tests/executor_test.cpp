// Executors: avgpool::sequential, avgpool::thread_pool, and a user lambda. Coverage of every
// index exactly once, a partition fixed by (count, threads), real parallelism, reuse,
// concurrent and nested calls, exception propagation. Also meant to run under TSan.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <avgpool/executor.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

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

#if AVGPOOL_HAS_EXCEPTIONS
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

}  // namespace
