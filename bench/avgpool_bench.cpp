// Average pooling benchmarks over ../shared/bench/shapes.txt (N = 1, channels-first, f32, one
// thread): avgpool, a memcpy of the same input + output bytes, and oneDNN when it was found, all
// in this process. Counters: bytes_per_second of input + output; compare times across the rows
// of one shape (avgpool / memcpy, avgpool / oneDNN).
//
//   build/release/bench/avgpool_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <avgpool/avgpool.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#if AVGPOOL_BENCH_HAVE_DNNL
#include <dnnl.hpp>
#endif

namespace {

using avgpool::index_t;

struct shape {
    std::string name, kind;
    int nd = 0;
    index_t C = 0, in[3]{}, k[3]{}, s[3]{}, pb[3]{}, pe[3]{};
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
        index_t N = 0, od[3];
        ls >> sh.name >> source >> sh.kind >> sh.nd >> N >> sh.C;
        for (auto* arr : {sh.in, sh.k, sh.s, sh.pb, sh.pe, od})
            for (int i = 0; i < 3; ++i) ls >> arr[i];
        if (!ls || (sh.kind != "avg" && sh.kind != "global")) continue;
        bool negative_pad = false;
        for (int i = 0; i < 3; ++i) negative_pad = negative_pad || sh.pe[i] < 0;
        if (!negative_pad) out.push_back(sh);  // negative end pads: not an average-pool feature
    }
    return out;
}

// The shape's spatial axes (the last nd of D, H, W) as a 2-D or 3-D problem; 1-D shapes run
// as 2-D with H = 1, which is the same computation.
struct problem {
    avgpool::dims<5> in_shape{};
    avgpool::pool_attrs<3> attrs;
};

problem make_problem(const shape& sh, avgpool::divisor_type div) {
    problem p;
    p.in_shape = {1, sh.C, sh.in[0], sh.in[1], sh.in[2]};
    for (int i = 0; i < 3; ++i) {
        p.attrs.kernel[i] = sh.k[i];
        p.attrs.strides[i] = sh.s[i];
        p.attrs.pads_begin[i] = sh.pb[i];
        p.attrs.pads_end[i] = sh.pe[i];
    }
    p.attrs.divisor = div;
    return p;
}

void bench_avgpool(benchmark::State& state, problem p) {
    auto plan = avgpool::pooling<3>::create(p.in_shape, p.attrs);
    if (!plan) {
        state.SkipWithError(plan.error().message().c_str());
        return;
    }
    std::vector<float> in(static_cast<std::size_t>(plan->input_size()), 1.0f);
    std::vector<float> out(static_cast<std::size_t>(plan->output_size()));
    for (auto _ : state) {
        plan->forward(in.data(), out.data());
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>((in.size() + out.size()) * sizeof(float)));
}

void bench_memcpy(benchmark::State& state, problem p) {
    auto plan = avgpool::pooling<3>::create(p.in_shape, p.attrs);
    if (!plan) {
        state.SkipWithError(plan.error().message().c_str());
        return;
    }
    const std::size_t bytes = static_cast<std::size_t>(plan->input_size() + plan->output_size()) * sizeof(float);
    std::vector<char> a(bytes, 1), b(bytes);
    for (auto _ : state) {
        std::memcpy(b.data(), a.data(), bytes);
        benchmark::DoNotOptimize(b.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

#if AVGPOOL_BENCH_HAVE_DNNL
void bench_onednn(benchmark::State& state, problem p, bool include_padding) {
    using namespace dnnl;
    auto plan = avgpool::pooling<3>::create(p.in_shape, p.attrs);
    if (!plan) {
        state.SkipWithError(plan.error().message().c_str());
        return;
    }
    engine eng(engine::kind::cpu, 0);
    stream strm(eng);
    const auto& is = p.in_shape;
    const auto& os = plan->output_shape();
    memory::desc src_md({is[0], is[1], is[2], is[3], is[4]}, memory::data_type::f32, memory::format_tag::ncdhw);
    memory::desc dst_md({os[0], os[1], os[2], os[3], os[4]}, memory::data_type::f32, memory::format_tag::ncdhw);
    const auto& a = p.attrs;
    pooling_v2_forward::desc d(prop_kind::forward_inference,
                               include_padding ? algorithm::pooling_avg_include_padding
                                               : algorithm::pooling_avg_exclude_padding,
                               src_md, dst_md, {a.strides[0], a.strides[1], a.strides[2]},
                               {a.kernel[0], a.kernel[1], a.kernel[2]}, {0, 0, 0},
                               {a.pads_begin[0], a.pads_begin[1], a.pads_begin[2]},
                               {a.pads_end[0], a.pads_end[1], a.pads_end[2]});
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

}  // namespace

int main(int argc, char** argv) {
    // One thread for every contender: oneDNN's OpenMP reads this at its first parallel region.
    setenv("OMP_NUM_THREADS", "1", 1);
    const char* path = std::getenv("AVGPOOL_BENCH_SHAPES");
    if (path == nullptr) path = AVGPOOL_BENCH_SHAPES;
    const std::vector<shape> shapes = read_shapes(path);
    if (shapes.empty()) {
        std::fprintf(stderr, "no shapes read from %s (set AVGPOOL_BENCH_SHAPES)\n", path);
        return 1;
    }
    for (const shape& sh : shapes) {
        // exclude-pad, and the full-kernel divisor that oneDNN's include-padding means.
        for (bool include : {false, true}) {
            const problem p = make_problem(sh, include ? avgpool::divisor_type::full_kernel
                                                       : avgpool::divisor_type::exclude_pad);
            const std::string tag = sh.name + (include ? "/include" : "/exclude");
            benchmark::RegisterBenchmark(("avgpool/" + tag).c_str(), bench_avgpool, p);
#if AVGPOOL_BENCH_HAVE_DNNL
            benchmark::RegisterBenchmark(("onednn/" + tag).c_str(), bench_onednn, p, include);
#endif
            if (!include) benchmark::RegisterBenchmark(("memcpy/" + tag).c_str(), bench_memcpy, p);
        }
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
