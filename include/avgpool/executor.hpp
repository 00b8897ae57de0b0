// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// Executors: anything callable as exec(count, fn) that runs fn(begin, end) over a partition
// of [0, count), possibly in parallel. Results never depend on the executor: every work item
// writes its own outputs and nothing is reduced across items. The plan methods pass fn as a
// small copyable callable (detail::work_ref, two pointers) that stays valid until exec returns.
#ifndef AVGPOOL_EXECUTOR_HPP
#define AVGPOOL_EXECUTOR_HPP

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "config.hpp"
#include "types.hpp"

#if AVGPOOL_HAS_EXCEPTIONS
#include <exception>
#endif

AVGPOOL_BEGIN_NAMESPACE

/// Runs everything on the calling thread, in one call.
///
///     plan->forward(in, out, avgpool::sequential{});
struct sequential {
    template <class F>
    void operator()(index_t count, F&& fn) const {
        if (count > 0) fn(index_t(0), count);
    }
};

namespace detail {

/// Start of chunk i when [0, count) is cut into `chunks` contiguous pieces whose lengths differ
/// by at most one (the first count % chunks are the longer ones). Chunk i is
/// [chunk_begin(count, chunks, i), chunk_begin(count, chunks, i + 1)).
constexpr index_t chunk_begin(index_t count, index_t chunks, index_t i) noexcept {
    return i * (count / chunks) + (i < count % chunks ? i : count % chunks);
}

// Below this many planes (N * C), a call's work items are blocks of rows instead of planes,
// so that N = 1 with few channels still keeps every thread busy...
constexpr index_t split_below_planes = 32;
// ... when the call reads at least this many input elements: below, waking threads costs
// more than the work, and per-plane kernels beat per-row ones on small planes.
constexpr index_t split_min_elements = index_t(1) << 14;
// Items a split call aims for: a few per thread on common machines, while a block keeps
// enough rows to amortize a kernel's per-call setup.
constexpr index_t split_target_items = 64;

/// The work items of a channels-first call over `planes` planes of `rows` rows each, reading
/// `elements` input elements in all: item i is block (i % blocks) of plane (i / blocks), a
/// block being a chunk_begin() range of the rows. blocks is 1 (one item per plane) unless
/// there are few, large planes. It depends on the shape alone, never on the executor, so every
/// executor computes each output with the same code (bit-identical results).
struct plane_blocks {
    index_t planes = 0, rows = 1, blocks = 1;

    constexpr plane_blocks(index_t plane_count, index_t row_count, index_t elements) noexcept
        : planes(plane_count), rows(row_count > 0 ? row_count : 1) {
        if (planes < split_below_planes && rows > 1 && elements >= split_min_elements) {
            const index_t want = (split_target_items + planes - 1) / planes;
            blocks = want < rows ? want : rows;
        }
    }

    constexpr bool split() const noexcept { return blocks > 1; }
    constexpr index_t items() const noexcept { return planes * blocks; }

    /// Calls fn(plane, row_begin, row_end) for items [begin, end), once per plane touched
    /// (neighbouring blocks of one plane merged into one range of rows).
    template <class F>
    void for_each(index_t begin, index_t end, F&& fn) const {
        if (begin >= end) return;
        const index_t first = begin / blocks, last = (end - 1) / blocks;
        for (index_t plane = first; plane <= last; ++plane) {
            const index_t b0 = plane == first ? begin % blocks : 0;
            const index_t b1 = plane == last ? (end - 1) % blocks + 1 : blocks;
            fn(plane, chunk_begin(rows, blocks, b0), chunk_begin(rows, blocks, b1));
        }
    }

    /// As for_each(), but each run of whole planes goes to planes_fn(first, end) in one call:
    /// for kernels whose run() over planes gives each row the bits run_rows() gives it, and
    /// whose per-call set-up (buffers, padding) a call per plane would repeat (24 planes of
    /// 56x56 at stride 2, one thread: a fifth of the time zeroing the block kernel's buffers).
    template <class F, class G>
    void for_each_run(index_t begin, index_t end, F&& rows_fn, G&& planes_fn) const {
        if (begin >= end) return;
        index_t run = -1;  // first plane of the pending run of whole planes, if any
        for_each(begin, end, [&](index_t plane, index_t r0, index_t r1) {
            if (r0 == 0 && r1 == rows) {
                if (run < 0) run = plane;
                return;
            }
            if (run >= 0) planes_fn(run, plane);
            run = -1;
            rows_fn(plane, r0, r1);
        });
        if (run >= 0) planes_fn(run, (end - 1) / blocks + 1);
    }
};

// The plan methods take any executor, but run their dispatch through these two non-owning
// references, so each method's dispatch and kernel code is compiled once per element type
// and rank instead of once per executor type (a test program using four executors compiled
// in 60% of the time at -O0, 89% at -O3). The cost is one indirect call per executor call and
// per chunk.

/// A reference to a work function fn(begin, end): what an executor receives. Copyable;
/// valid while the call that made it runs (executors finish every chunk before returning).
class work_ref {
public:
    template <class F>
    explicit work_ref(const F& fn) noexcept
        : fn_(static_cast<const void*>(std::addressof(fn))),
          call_([](const void* f, index_t begin, index_t end) { (*static_cast<const F*>(f))(begin, end); }) {}

    void operator()(index_t begin, index_t end) const { call_(fn_, begin, end); }

private:
    const void* fn_;
    void (*call_)(const void*, index_t, index_t);
};

/// A reference to an executor exec(count, fn); calls it with a work_ref prvalue, as the plan
/// methods always called executors with a temporary.
class exec_ref {
public:
    template <class E>
    explicit exec_ref(E& exec) noexcept {
        if constexpr (std::is_function<E>::value) {
            // A plain function (taking, say, a std::function): kept as a function pointer,
            // which has no conversion to void*.
            fexec_ = reinterpret_cast<void (*)()>(&exec);
            call_ = [](const exec_ref& self, index_t count, const work_ref& fn) {
                reinterpret_cast<E*>(self.fexec_)(count, work_ref(fn));
            };
        } else {
            exec_ = const_cast<void*>(static_cast<const void*>(std::addressof(exec)));
            call_ = [](const exec_ref& self, index_t count, const work_ref& fn) {
                (*static_cast<E*>(self.exec_))(count, work_ref(fn));
            };
        }
    }

    template <class F>
    void operator()(index_t count, const F& fn) const {
        call_(*this, count, work_ref(fn));
    }

private:
    void* exec_ = nullptr;
    void (*fexec_)() = nullptr;
    void (*call_)(const exec_ref&, index_t, const work_ref&) = nullptr;
};
}  // namespace detail

/// A fixed set of std::threads, created once and reused by every call.
///
///     avgpool::thread_pool pool(4);          // the caller plus 3 workers
///     plan->forward(in, out, pool);
///     pool(n, [&](avgpool::index_t begin, avgpool::index_t end) { /* items [begin, end) */ });
///
/// pool(count, fn) cuts [0, count) into min(count, size()) contiguous chunks (a function of
/// count and size() only), runs fn(begin, end) once per chunk, on the workers and the calling
/// thread at once, and returns when all chunks are done. fn is called concurrently, so its
/// operator() must be safe for that. If fn throws, every other chunk still runs, then the first
/// exception is rethrown to the caller.
///
/// Calls from several threads at once are safe but take turns: one call runs at a time. A call
/// made from inside fn on the same pool runs its chunks one after another on that thread
/// instead of deadlocking. Calls allocate nothing.
class thread_pool {
public:
    /// Starts threads - 1 workers; 0 or 1 runs every call on the calling thread.
    explicit thread_pool(unsigned threads = std::thread::hardware_concurrency())
        : size_(threads > 1 ? threads : 1u) {
        workers_.reserve(size_ - 1);
#if AVGPOOL_HAS_EXCEPTIONS
        try {
#endif
            for (unsigned i = 1; i < size_; ++i) workers_.emplace_back([this] { work(); });
#if AVGPOOL_HAS_EXCEPTIONS
        } catch (...) {
            stop();  // a std::thread left joinable would call std::terminate
            throw;
        }
#endif
    }

    thread_pool(const thread_pool&) = delete;
    thread_pool& operator=(const thread_pool&) = delete;

    /// Waits for the workers to finish (there is no work left: calls block until done).
    ~thread_pool() { stop(); }

    /// Number of threads that share the work of a call, the calling thread included.
    unsigned size() const noexcept { return size_; }

    /// Runs fn(begin, end) over the chunks of [0, count); blocks until all have finished.
    template <class F>
    void operator()(index_t count, F&& fn) const {
        if (count <= 0) return;
        const index_t chunks = count < index_t(size_) ? count : index_t(size_);
        if (chunks == 1) {
            const scoped_running_here mark(this);  // inside fn, this is the pool's own call too
            fn(index_t(0), count);
            return;
        }
        using Fn = std::remove_reference_t<F>;
        void* const target = const_cast<void*>(static_cast<const void*>(std::addressof(fn)));
        if (running_here() == this) {  // nested call from a chunk: the workers are all taken
            run_inline(&invoke<Fn>, target, count, chunks);
            return;
        }
        std::lock_guard<std::mutex> one_call_at_a_time(s_.call_mutex);
        const scoped_running_here mark(this);
        {
            std::lock_guard<std::mutex> lock(s_.mutex);
            s_.invoke = &invoke<Fn>;
            s_.fn = target;
            s_.count = count;
            s_.chunks = chunks;
            s_.next.store(0, std::memory_order_relaxed);   // published by the unlock below
            s_.slots = static_cast<unsigned>(chunks - 1);  // chunks <= size_: fits, <= workers
            s_.open = true;
            s_.generation.fetch_add(1, std::memory_order_release);
        }
        s_.wake.notify_all();
        run_chunks();
        // Every chunk is claimed by now, but workers that joined may still run theirs. Poll
        // for them a while before sleeping, as idle workers poll for calls: a sleeping caller
        // is woken late (tens of microseconds on a VM), which a short call notices.
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
        while (s_.active.load(std::memory_order_acquire) != 0 && std::chrono::steady_clock::now() < until)
            std::this_thread::yield();
        {
            // Close the call so that late-waking workers skip it, then wait only for the
            // workers that joined.
            std::unique_lock<std::mutex> lock(s_.mutex);
            s_.open = false;
            s_.done.wait(lock, [this] { return s_.active.load(std::memory_order_relaxed) == 0; });
        }
#if AVGPOOL_HAS_EXCEPTIONS
        if (s_.error) {
            std::exception_ptr e = s_.error;
            s_.error = nullptr;
            std::rethrow_exception(e);
        }
#endif
    }

    /// Runs fn() once on each worker thread and once on the calling thread, and returns when
    /// all have; the way to reach per-thread state the workers keep, such as their scratch
    /// (`avgpool::release_thread_scratch(pool)`). Takes turns with calls, as calls do. From
    /// inside a chunk of this pool's own call (its workers are busy) it runs nothing and
    /// returns false. fn runs on several threads at once, as a call's chunks do. If it throws,
    /// it still runs on every other thread, then one of the exceptions is rethrown (the
    /// calling thread's first).
    ///
    ///     pool.on_each_thread([] { avgpool::release_thread_scratch(); });
    template <class F>
    bool on_each_thread(F&& fn) const {
        if (running_here() == this) return false;
        if constexpr (std::is_function<std::remove_reference_t<F>>::value) {  // no object address to pass
            const auto call = [&fn] { fn(); };
            return each_thread(call);
        } else {
            return each_thread(fn);
        }
    }

private:
    using invoker = void (*)(void*, index_t, index_t);

    template <class Fn>
    bool each_thread(Fn& fn) const {
        if (workers_.empty()) {
            const scoped_running_here mark(this);  // as below: fn's own uses of the pool
            fn();
            return true;
        }
        void* const target = const_cast<void*>(static_cast<const void*>(std::addressof(fn)));
        std::lock_guard<std::mutex> one_call_at_a_time(s_.call_mutex);
        {
            std::lock_guard<std::mutex> lock(s_.mutex);
            s_.each = &invoke_each<Fn>;
            s_.fn = target;
            s_.each_left = static_cast<unsigned>(workers_.size());
            s_.open = false;  // not a call: no worker joins one
            ++s_.each_round;
            s_.generation.fetch_add(1, std::memory_order_release);
        }
        s_.wake.notify_all();
        const scoped_running_here mark(this);  // a call fn makes on this pool runs inline
#if AVGPOOL_HAS_EXCEPTIONS
        std::exception_ptr mine;
        try {
            fn();
        } catch (...) {
            mine = std::current_exception();
        }
#else
        fn();
#endif
        std::unique_lock<std::mutex> lock(s_.mutex);
        s_.done.wait(lock, [this] { return s_.each_left == 0; });
#if AVGPOOL_HAS_EXCEPTIONS
        std::exception_ptr e = mine ? mine : s_.error;
        s_.error = nullptr;
        lock.unlock();
        if (e) std::rethrow_exception(e);
#endif
        return true;
    }

    template <class Fn>
    static void invoke_each(void* fn) {
        (*static_cast<Fn*>(fn))();
    }

    template <class Fn>
    static void invoke(void* fn, index_t begin, index_t end) {
        (*static_cast<Fn*>(fn))(begin, end);
    }

    // The pool whose chunk this thread is running, if any: spots nested calls.
    static const thread_pool*& running_here() noexcept {
        static thread_local const thread_pool* pool = nullptr;
        return pool;
    }

    struct scoped_running_here {
        const thread_pool* saved;
        explicit scoped_running_here(const thread_pool* p) noexcept : saved(running_here()) {
            running_here() = p;
        }
        ~scoped_running_here() { running_here() = saved; }
        scoped_running_here(const scoped_running_here&) = delete;
        scoped_running_here& operator=(const scoped_running_here&) = delete;
    };

    // Same partition and error rule as a parallel call, on this thread alone.
    static void run_inline(invoker f, void* fn, index_t count, index_t chunks) {
#if AVGPOOL_HAS_EXCEPTIONS
        std::exception_ptr first;
        for (index_t i = 0; i < chunks; ++i) {
            try {
                f(fn, detail::chunk_begin(count, chunks, i),
                  detail::chunk_begin(count, chunks, i + 1));
            } catch (...) {
                if (!first) first = std::current_exception();
            }
        }
        if (first) std::rethrow_exception(first);
#else
        for (index_t i = 0; i < chunks; ++i)
            f(fn, detail::chunk_begin(count, chunks, i), detail::chunk_begin(count, chunks, i + 1));
#endif
    }

    // Claims chunks until none are left; shared by the caller and the workers of a call.
    void run_chunks() const noexcept {
        for (;;) {
            const index_t i = s_.next.fetch_add(1, std::memory_order_relaxed);
            if (i >= s_.chunks) return;
            const index_t begin = detail::chunk_begin(s_.count, s_.chunks, i);
            const index_t end = detail::chunk_begin(s_.count, s_.chunks, i + 1);
#if AVGPOOL_HAS_EXCEPTIONS
            try {
                s_.invoke(s_.fn, begin, end);
            } catch (...) {
                std::lock_guard<std::mutex> lock(s_.mutex);
                if (!s_.error) s_.error = std::current_exception();
            }
#else
            s_.invoke(s_.fn, begin, end);
#endif
        }
    }

    // A worker's share of on_each_thread (s_.mutex held on entry and on return).
    void run_each(std::unique_lock<std::mutex>& lock) const noexcept {
        void (*const each)(void*) = s_.each;
        void* const fn = s_.fn;
        lock.unlock();
#if AVGPOOL_HAS_EXCEPTIONS
        std::exception_ptr e;
        try {
            each(fn);
        } catch (...) {
            e = std::current_exception();
        }
        lock.lock();
        if (e && !s_.error) s_.error = e;
#else
        each(fn);
        lock.lock();
#endif
        if (--s_.each_left == 0) s_.done.notify_all();
    }

    void work() const {
        running_here() = this;
        std::uint64_t seen = 0, each_seen = 0;
        std::unique_lock<std::mutex> lock(s_.mutex);
        for (;;) {
            // Poll for the next call for a while before sleeping: a woken thread can take
            // longer to start (tens of microseconds, more on a VM) than a whole call runs, and
            // then the caller ends up running every chunk itself. Back-to-back calls (a
            // network's layers) find the worker still awake.
            if (s_.generation.load(std::memory_order_acquire) == seen) {
                lock.unlock();
                const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
                while (s_.generation.load(std::memory_order_acquire) == seen &&
                       std::chrono::steady_clock::now() < until)
                    std::this_thread::yield();
                lock.lock();
            }
            s_.wake.wait(lock, [&] { return s_.stopping || s_.generation.load(std::memory_order_relaxed) != seen; });
            if (s_.stopping) return;
            seen = s_.generation.load(std::memory_order_relaxed);
            if (s_.each_round != each_seen) {  // on_each_thread: every worker runs it once
                each_seen = s_.each_round;
                run_each(lock);
                continue;
            }
            if (!s_.open || s_.slots == 0) continue;  // call already over, or enough helpers
            --s_.slots;
            s_.active.fetch_add(1, std::memory_order_relaxed);
            lock.unlock();
            run_chunks();
            lock.lock();
            // Release: a caller polling `active` sees this worker's outputs.
            if (s_.active.fetch_sub(1, std::memory_order_release) == 1) s_.done.notify_one();
        }
    }

    void stop() noexcept {
        {
            std::lock_guard<std::mutex> lock(s_.mutex);
            s_.stopping = true;
        }
        s_.wake.notify_all();
        for (std::thread& t : workers_) t.join();
        workers_.clear();
    }

    // Everything a call changes. Calls are const (a pool is shared and thread-safe), so it is
    // mutable. The job fields are written under `mutex` before the generation bump and read
    // by a worker only after it saw that bump under `mutex`, and only while it is active.
    struct shared_state {
        std::mutex call_mutex;  // one call at a time
        std::mutex mutex;       // guards what follows, except `next`
        std::condition_variable wake;
        std::condition_variable done;
        // Atomic so idle workers can poll it without the mutex (see work()); written under it.
        std::atomic<std::uint64_t> generation{0};
        bool open = false;  // workers may still join the current call
        bool stopping = false;
        unsigned slots = 0;   // workers that may still join
        std::atomic<unsigned> active{0};  // workers inside the current call (polled by the caller)
        invoker invoke = nullptr;
        void* fn = nullptr;
        index_t count = 0;
        index_t chunks = 0;
        std::atomic<index_t> next{0};  // next chunk to claim
        // on_each_thread: its function (with fn), its round (each worker runs a round once)
        // and the workers yet to run it.
        void (*each)(void*) = nullptr;
        std::uint64_t each_round = 0;
        unsigned each_left = 0;
#if AVGPOOL_HAS_EXCEPTIONS
        std::exception_ptr error;  // first exception of the current call
#endif
    };

    unsigned size_;
    mutable shared_state s_;
    std::vector<std::thread> workers_;
};

AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_EXECUTOR_HPP
