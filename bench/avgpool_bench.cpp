// Average pooling benchmarks over ../shared/bench/shapes.txt (N = 1, f32, one thread): avgpool,
// a memcpy of the same input + output bytes, and oneDNN when it was found, all in this process;
// channels-first rows (avgpool/, onednn/) and, for the average and global shapes,
// channels-last rows (avgpool_cl/, onednn_cl/: N[D]HWC, oneDNN's nwc / nhwc / ndhwc). Counters: bytes_per_second of input + output; compare times across the rows
// of one shape (avgpool / memcpy, avgpool / oneDNN). threads/<shape>/<t> rows: forward through
// an avgpool::thread_pool of t = 1 or 2 threads (real time).
//
//   build/release/bench/avgpool_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <avgpool/avgpool.hpp>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#if defined(__linux__)
#include <unistd.h>
#endif

#if AVGPOOL_BENCH_HAVE_DNNL
#include <dnnl.hpp>
#endif

namespace {

using avgpool::index_t;

// Every contender's buffers start on a 64-byte boundary, as oneDNN's own memory objects and
// the tensors of PyTorch, ONNX Runtime and OpenVINO do. (std::vector's large blocks come from
// mmap at 16 bytes past a page: every 64-byte vector load would straddle two cache lines.)
// AVGPOOL_BENCH_OFFSET=<bytes> shifts avgpool's buffers by that many bytes (rounded down to a
// multiple of the element's alignment), to measure misaligned callers.
std::size_t buffer_offset() {
    static const std::size_t off = [] {
        const char* e = std::getenv("AVGPOOL_BENCH_OFFSET");
        return e == nullptr ? std::size_t{0} : static_cast<std::size_t>(std::strtoul(e, nullptr, 10));
    }();
    return off;
}

// n elements of T, value-initialized or filled with `fill`, at 64 bytes + offset.
template <class T>
class buffer {
public:
    explicit buffer(std::size_t n, T fill = T(), std::size_t offset = 0)
        : raw_(static_cast<char*>(std::aligned_alloc(64, round_up(n * sizeof(T) + offset)))), n_(n) {
        if (raw_ == nullptr) throw std::bad_alloc();
        offset -= offset % alignof(T);  // a T must stay aligned as a T
        data_ = reinterpret_cast<T*>(raw_ + offset);
        std::fill_n(data_, n, fill);
    }
    buffer(const buffer&) = delete;
    buffer& operator=(const buffer&) = delete;
    ~buffer() { std::free(raw_); }
    T* data() noexcept { return data_; }
    std::size_t size() const noexcept { return n_; }

private:
    static std::size_t round_up(std::size_t b) { return (b + 63) / 64 * 64 + 64; }
    char* raw_;
    T* data_;
    std::size_t n_;
};

struct shape {
    std::string name, kind;
    int nd = 0;
    index_t C = 0, in[3]{}, k[3]{}, s[3]{}, pb[3]{}, pe[3]{}, out[3]{};
};

std::vector<shape> read_shapes(const char* path) {
    std::vector<shape> out;
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ls(line);
        shape sh;
        std::string source;
        index_t N = 0;
        ls >> sh.name >> source >> sh.kind >> sh.nd >> N >> sh.C;
        for (auto* arr : {sh.in, sh.k, sh.s, sh.pb, sh.pe, sh.out})
            for (int i = 0; i < 3; ++i) ls >> arr[i];
        if (!ls || (sh.kind != "avg" && sh.kind != "global" && sh.kind != "adaptive")) continue;
        bool negative_pad = false;
        for (int i = 0; i < 3; ++i) negative_pad = negative_pad || sh.pe[i] < 0;
        if (!negative_pad) out.push_back(sh);  // negative end pads: not an average-pool feature
    }
    return out;
}

// The shape as an R-D problem over its last R spatial axes (R = nd).
template <std::size_t R>
struct problem {
    avgpool::dims<R + 2> in_shape{};
    avgpool::pool_attrs<R> attrs;
    avgpool::layout lay = avgpool::layout::channels_first;
};

template <std::size_t R>
problem<R> make_problem(const shape& sh, avgpool::divisor_type div,
                        avgpool::layout lay = avgpool::layout::channels_first) {
    problem<R> p;
    p.lay = lay;
    p.in_shape[0] = 1;
    p.in_shape[1] = sh.C;
    for (std::size_t i = 0; i < R; ++i) {
        const std::size_t j = 3 - R + i;
        p.in_shape[i + 2] = sh.in[j];
        p.attrs.kernel[i] = sh.k[j];
        p.attrs.strides[i] = sh.s[j];
        p.attrs.pads_begin[i] = sh.pb[j];
        p.attrs.pads_end[i] = sh.pe[j];
    }
    p.attrs.divisor = div;
    return p;
}

template <std::size_t R, class T = float>
void bench_avgpool(benchmark::State& state, problem<R> p) {
    auto plan = avgpool::pooling<R>::create(p.in_shape, p.attrs, p.lay);
    if (!plan) {
        state.SkipWithError(plan.error().message().c_str());
        return;
    }
    buffer<T> in(static_cast<std::size_t>(plan->input_size()), T(1.0f), buffer_offset());
    buffer<T> out(static_cast<std::size_t>(plan->output_size()), T(), buffer_offset());
    for (auto _ : state) {
        plan->forward(in.data(), out.data());
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>((in.size() + out.size()) * sizeof(T)));
}

// forward() through an avgpool::thread_pool of `threads` threads, made once before the timed
// loop (its workers are started and reused; no thread is created per call). Real time: the
// work is spread over threads, so the caller's CPU time would undercount it.
template <std::size_t R>
void bench_threads(benchmark::State& state, problem<R> p, unsigned threads) {
    auto plan = avgpool::pooling<R>::create(p.in_shape, p.attrs, p.lay);
    if (!plan) {
        state.SkipWithError(plan.error().message().c_str());
        return;
    }
    buffer<float> in(static_cast<std::size_t>(plan->input_size()), 1.0f, buffer_offset());
    buffer<float> out(static_cast<std::size_t>(plan->output_size()), 0.0f, buffer_offset());
    const avgpool::thread_pool pool(threads);
    plan->forward(in.data(), out.data(), pool);  // touch the pages and wake the workers once
    for (auto _ : state) {
        plan->forward(in.data(), out.data(), pool);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>((in.size() + out.size()) * sizeof(float)));
}

// threads/<shape>/<t> rows: t = 1 and 2, k = 3, stride 1, pad 1, N = 1.
template <std::size_t R>
void register_threads(const std::string& name, const avgpool::dims<R + 2>& in_shape) {
    problem<R> p;
    p.in_shape = in_shape;
    for (std::size_t i = 0; i < R; ++i) {
        p.attrs.kernel[i] = 3;
        p.attrs.pads_begin[i] = p.attrs.pads_end[i] = 1;
    }
    for (unsigned t : {1u, 2u})
        benchmark::RegisterBenchmark(("threads/" + name + "/" + std::to_string(t)).c_str(), bench_threads<R>, p, t)
            ->UseRealTime();
}

template <std::size_t R>
void bench_backward(benchmark::State& state, problem<R> p) {
    auto plan = avgpool::pooling<R>::create(p.in_shape, p.attrs, p.lay);
    if (!plan) {
        state.SkipWithError(plan.error().message().c_str());
        return;
    }
    buffer<float> grad_out(static_cast<std::size_t>(plan->output_size()), 1.0f, buffer_offset());
    buffer<float> grad_in(static_cast<std::size_t>(plan->input_size()), 0.0f, buffer_offset());
    for (auto _ : state) {
        plan->backward(grad_out.data(), grad_in.data());
        benchmark::DoNotOptimize(grad_in.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() *
                            static_cast<int64_t>((grad_in.size() + grad_out.size()) * sizeof(float)));
}

// Adaptive pooling (PSPNet bins) and the plain average pool reading the same bytes: a kernel
// and stride of X / O (the bins divide 60 evenly).
void bench_adaptive(benchmark::State& state, avgpool::dims<4> shape, avgpool::dims<2> out) {
    auto plan = avgpool::pooling<2>::create_adaptive(shape, out);
    if (!plan) {
        state.SkipWithError(plan.error().message().c_str());
        return;
    }
    buffer<float> in(static_cast<std::size_t>(plan->input_size()), 1.0f, buffer_offset());
    buffer<float> y(static_cast<std::size_t>(plan->output_size()), 0.0f, buffer_offset());
    for (auto _ : state) {
        plan->forward(in.data(), y.data());
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>((in.size() + y.size()) * sizeof(float)));
}

template <std::size_t R>
void bench_memcpy(benchmark::State& state, problem<R> p) {
    auto plan = avgpool::pooling<R>::create(p.in_shape, p.attrs);
    if (!plan) {
        state.SkipWithError(plan.error().message().c_str());
        return;
    }
    const std::size_t bytes = static_cast<std::size_t>(plan->input_size() + plan->output_size()) * sizeof(float);
    buffer<char> a(bytes, 1), b(bytes);
    for (auto _ : state) {
        std::memcpy(b.data(), a.data(), bytes);
        benchmark::DoNotOptimize(b.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

// The traffic floors of a pass, for the backward / forward bar: forward reads the input and
// writes the output; backward reads the output's gradients and writes the input's. floor/fwd
// reads `in` bytes (an XOR of 64-bit words, which the compiler vectorizes: nothing to
// compute) and memsets `out` bytes; floor/bwd the other way round. A pass that takes about
// its floor is bound by the cache's read and write rates, not by its instructions.
void touch_floor(benchmark::State& state, std::size_t read_bytes, std::size_t write_bytes) {
    buffer<std::uint64_t> src(read_bytes / 8 + 1, 1);
    buffer<char> dst(write_bytes + 1);
    const std::size_t words = src.size();
    for (auto _ : state) {
        std::uint64_t acc[8] = {};
        const std::uint64_t* w = src.data();
        std::size_t i = 0;
        for (; i + 8 <= words; i += 8)
            for (int j = 0; j < 8; ++j) acc[j] ^= w[i + static_cast<std::size_t>(j)];
        for (; i < words; ++i) acc[0] ^= w[i];
        std::memset(dst.data(), static_cast<int>(acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ acc[4] ^ acc[5] ^ acc[6] ^ acc[7]) & 1,
                    write_bytes);
        benchmark::DoNotOptimize(dst.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(read_bytes + write_bytes));
}

template <std::size_t R>
void bench_floor(benchmark::State& state, problem<R> p, bool backward) {
    auto plan = avgpool::pooling<R>::create(p.in_shape, p.attrs);
    if (!plan) {
        state.SkipWithError(plan.error().message().c_str());
        return;
    }
    const std::size_t in = static_cast<std::size_t>(plan->input_size()) * sizeof(float);
    const std::size_t out = static_cast<std::size_t>(plan->output_size()) * sizeof(float);
    touch_floor(state, backward ? out : in, backward ? in : out);
}

#if AVGPOOL_BENCH_HAVE_DNNL
template <std::size_t R>
void bench_onednn(benchmark::State& state, problem<R> p, bool include_padding) {
    using namespace dnnl;
    auto plan = avgpool::pooling<R>::create(p.in_shape, p.attrs);
    if (!plan) {
        state.SkipWithError(plan.error().message().c_str());
        return;
    }
    engine eng(engine::kind::cpu, 0);
    stream strm(eng);
    const bool last = p.lay == avgpool::layout::channels_last;
    const memory::format_tag tag = R == 1 ? (last ? memory::format_tag::nwc : memory::format_tag::ncw)
                                   : R == 2 ? (last ? memory::format_tag::nhwc : memory::format_tag::nchw)
                                            : (last ? memory::format_tag::ndhwc : memory::format_tag::ncdhw);
    const memory::dims src_dims(p.in_shape.begin(), p.in_shape.end());
    const memory::dims dst_dims(plan->output_shape().begin(), plan->output_shape().end());
    memory::desc src_md(src_dims, memory::data_type::f32, tag);
    memory::desc dst_md(dst_dims, memory::data_type::f32, tag);
    const auto& a = p.attrs;
    pooling_v2_forward::desc d(prop_kind::forward_inference,
                               include_padding ? algorithm::pooling_avg_include_padding
                                               : algorithm::pooling_avg_exclude_padding,
                               src_md, dst_md, memory::dims(a.strides.begin(), a.strides.end()),
                               memory::dims(a.kernel.begin(), a.kernel.end()), memory::dims(R, 0),
                               memory::dims(a.pads_begin.begin(), a.pads_begin.end()),
                               memory::dims(a.pads_end.begin(), a.pads_end.end()));
    pooling_v2_forward::primitive_desc pd(d, eng);
    pooling_v2_forward prim(pd);
    memory src(src_md, eng), dst(dst_md, eng);
    std::fill_n(static_cast<float*>(src.get_data_handle()), plan->input_size(), 1.0f);
    for (auto _ : state) {
        prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
        strm.wait();
    }
    state.SetBytesProcessed(state.iterations() *
                            static_cast<int64_t>((plan->input_size() + plan->output_size()) * sizeof(float)));
    state.SetLabel(pd.impl_info_str());
}
#endif

// Kernel volume at most 9: the shapes whose bars are set against memcpy.
bool memory_bound(const shape& sh) { return sh.k[0] * sh.k[1] * sh.k[2] <= 9; }

template <std::size_t R>
void register_shape(const shape& sh) {
    // exclude-pad, and the full-kernel divisor that oneDNN's include-padding means.
    for (bool include : {false, true}) {
        const problem<R> p = make_problem<R>(sh, include ? avgpool::divisor_type::full_kernel
                                                         : avgpool::divisor_type::exclude_pad);
        const std::string tag = sh.name + (include ? "/include" : "/exclude");
        benchmark::RegisterBenchmark(("avgpool/" + tag).c_str(), bench_avgpool<R>, p);
#if AVGPOOL_BENCH_HAVE_DNNL
        benchmark::RegisterBenchmark(("onednn/" + tag).c_str(), bench_onednn<R>, p, include);
#endif
        if (!include) {
            benchmark::RegisterBenchmark(("memcpy/" + tag).c_str(), bench_memcpy<R>, p);
            benchmark::RegisterBenchmark(("backward/" + tag).c_str(), bench_backward<R>, p);
            benchmark::RegisterBenchmark(("floor_fwd/" + tag).c_str(), bench_floor<R>, p, false);
            benchmark::RegisterBenchmark(("floor_bwd/" + tag).c_str(), bench_floor<R>, p, true);
            if (memory_bound(sh)) {  // 16-bit storage against these float rows
                benchmark::RegisterBenchmark(("avgpool_bf16/" + tag).c_str(), bench_avgpool<R, avgpool::bfloat16>, p);
                benchmark::RegisterBenchmark(("avgpool_f16/" + tag).c_str(), bench_avgpool<R, avgpool::float16>, p);
            }
        }
    }
}

// The same problems in channels-last memory (the memcpy rows above copy the same bytes).
template <std::size_t R>
void register_shape_cl(const shape& sh) {
    for (bool include : {false, true}) {
        const problem<R> p = make_problem<R>(sh, include ? avgpool::divisor_type::full_kernel
                                                         : avgpool::divisor_type::exclude_pad,
                                             avgpool::layout::channels_last);
        const std::string tag = sh.name + (include ? "/include" : "/exclude");
        benchmark::RegisterBenchmark(("avgpool_cl/" + tag).c_str(), bench_avgpool<R>, p);
#if AVGPOOL_BENCH_HAVE_DNNL
        benchmark::RegisterBenchmark(("onednn_cl/" + tag).c_str(), bench_onednn<R>, p, include);
#endif
        if (!include) benchmark::RegisterBenchmark(("backward_cl/" + tag).c_str(), bench_backward<R>, p);
        if (!include && memory_bound(sh))
            benchmark::RegisterBenchmark(("avgpool_cl_bf16/" + tag).c_str(), bench_avgpool<R, avgpool::bfloat16>, p);
    }
}

// image/<impl>/<name> rows, outside shapes.txt and its bars: few-channel images (RGB, RGBA)
// in channels-last memory, the layout image code holds them in, with a stride on the last
// axis (the pixel kernel); the same pool channels-first, oneDNN nhwc and memcpy beside them.
void register_image(const std::string& name, const avgpool::dims<4>& in_shape, avgpool::index_t k,
                    avgpool::index_t s, avgpool::index_t pad) {
    problem<2> p;
    p.in_shape = in_shape;
    for (std::size_t i = 0; i < 2; ++i) {
        p.attrs.kernel[i] = k;
        p.attrs.strides[i] = s;
        p.attrs.pads_begin[i] = p.attrs.pads_end[i] = pad;
    }
    problem<2> cl = p;
    cl.lay = avgpool::layout::channels_last;
    benchmark::RegisterBenchmark(("image/cl/" + name).c_str(), bench_avgpool<2>, cl);
    benchmark::RegisterBenchmark(("image/cf/" + name).c_str(), bench_avgpool<2>, p);
#if AVGPOOL_BENCH_HAVE_DNNL
    benchmark::RegisterBenchmark(("image/onednn_cl/" + name).c_str(), bench_onednn<2>, cl, false);
#endif
    benchmark::RegisterBenchmark(("image/memcpy/" + name).c_str(), bench_memcpy<2>, p);
    benchmark::RegisterBenchmark(("image/backward_cl/" + name).c_str(), bench_backward<2>, cl);
    benchmark::RegisterBenchmark(("image/backward_cf/" + name).c_str(), bench_backward<2>, p);
}

}  // namespace

int main(int argc, char** argv) {
    // One thread for every contender. libgomp reads OMP_NUM_THREADS when it is loaded, before
    // main, so setting it here is too late: re-run this program with it set (without this,
    // oneDNN ran on every core of a shared machine and its times were 10-1000x too slow).
    const char* omp = std::getenv("OMP_NUM_THREADS");
    if (omp == nullptr || std::strcmp(omp, "1") != 0) {
        setenv("OMP_NUM_THREADS", "1", 1);
#if defined(__linux__)
        execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
#endif
    }
    const char* path = std::getenv("AVGPOOL_BENCH_SHAPES");
    if (path == nullptr) path = AVGPOOL_BENCH_SHAPES;
    const std::vector<shape> shapes = read_shapes(path);
    if (shapes.empty()) {
        std::fprintf(stderr, "no shapes read from %s (set AVGPOOL_BENCH_SHAPES)\n", path);
        return 1;
    }
    for (const shape& sh : shapes) {
        if (sh.kind == "adaptive") {
            if (sh.nd != 2) continue;  // the 1-D Swin head is an (N, L, C) transpose case
            const avgpool::dims<4> in{1, sh.C, sh.in[1], sh.in[2]};
            const avgpool::dims<2> out{sh.out[1], sh.out[2]};
            benchmark::RegisterBenchmark(("adaptive/" + sh.name).c_str(), bench_adaptive, in, out);
            problem<2> plain;  // the plain pool over the same bytes: k = s = X / O
            plain.in_shape = in;
            for (std::size_t i = 0; i < 2; ++i) plain.attrs.kernel[i] = plain.attrs.strides[i] = in[i + 2] / out[i];
            benchmark::RegisterBenchmark(("adaptive_plain/" + sh.name).c_str(), bench_avgpool<2>, plain);
            continue;
        }
        switch (sh.nd) {
            case 1: register_shape<1>(sh), register_shape_cl<1>(sh); break;
            case 2: register_shape<2>(sh), register_shape_cl<2>(sh); break;
            default: register_shape<3>(sh), register_shape_cl<3>(sh); break;
        }
    }
    // Kernel-size independence: 1x64x112x112, stride 1, same padding, k = 3 and k = 7.
    for (avgpool::index_t k : {3, 7}) {
        shape sh;
        sh.name = "kernel_size_k" + std::to_string(k) + "_c64_112x112";
        sh.kind = "avg";
        sh.nd = 2;
        sh.C = 64;
        sh.in[0] = 1, sh.in[1] = 112, sh.in[2] = 112;
        sh.k[0] = 1, sh.k[1] = k, sh.k[2] = k;
        sh.s[0] = sh.s[1] = sh.s[2] = 1;
        sh.pb[1] = sh.pb[2] = sh.pe[1] = sh.pe[2] = k / 2;
        register_shape<2>(sh);
    }
    // Thread scaling: many planes (2-D and 3-D), and few channels (split over rows).
    register_threads<2>("1x256x56x56_k3s1", {1, 256, 56, 56});
    register_threads<3>("1x64x16x56x56_k3s1", {1, 64, 16, 56, 56});
    register_threads<2>("1x3x224x224_k3s1", {1, 3, 224, 224});
    register_image("rgb_224x224_2x2s2", {1, 3, 224, 224}, 2, 2, 0);
    register_image("rgb_224x224_3x3s2p1", {1, 3, 224, 224}, 3, 2, 1);
    register_image("rgba_512x512_2x2s2", {1, 4, 512, 512}, 2, 2, 0);
    register_image("rgb_1080x1920_2x2s2", {1, 3, 1080, 1920}, 2, 2, 0);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
