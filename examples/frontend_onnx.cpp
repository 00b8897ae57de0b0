// ONNX front end: one AveragePool node (the ONNX operator docs' averagepool_2d_precomputed_pads:
// 5x5 kernel, pads 2 on every side, count_include_pad=0) run on the 1x1x5x5 input 1..25 and
// checked against the output the docs give. Then a node the opset does not allow.
#include <avgpool/avgpool.hpp>
#include <avgpool/frontends/onnx.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
    avgpool::onnx::average_pool_attributes node;  // AveragePool(kernel_shape=[5,5], pads=[2,2,2,2])
    node.kernel_shape = {5, 5};
    node.pads = {2, 2, 2, 2};
    const avgpool::index_t opset = 19;

    auto attrs = avgpool::onnx::average_pool<2>(node, opset);
    if (!attrs) {
        std::printf("error: %s\n", attrs.error().message().c_str());
        return 1;
    }
    auto plan = avgpool::pooling<2>::create({1, 1, 5, 5}, *attrs);
    if (!plan) {
        std::printf("error: %s\n", plan.error().message().c_str());
        return 1;
    }
    std::vector<float> x(25), y(static_cast<std::size_t>(plan->output_size()));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
    plan->forward(x.data(), y.data());

    const float expected[25] = {7,    7.5f, 8,    8.5f, 9,    9.5f, 10,   10.5f, 11,   11.5f, 12,   12.5f, 13,
                                13.5f, 14,  14.5f, 15,  15.5f, 16,  16.5f, 17,   17.5f, 18,   18.5f, 19};
    std::printf("AveragePool-%d (opset %lld): kernel_shape=[5,5] pads=[2,2,2,2] on 1x1x5x5 -> 1x1x%lldx%lld\n",
                avgpool::onnx::average_pool_version(opset), (long long)opset, (long long)plan->output_shape()[2],
                (long long)plan->output_shape()[3]);
    int wrong = y.size() == 25 ? 0 : 1;
    for (std::size_t r = 0; r < 5 && !wrong; ++r) {
        std::printf("  ");
        for (std::size_t c = 0; c < 5; ++c) {
            const float v = y[r * 5 + c];
            std::printf(" %5.1f", v);
            if (std::fabs(v - expected[r * 5 + c]) > 1e-5f) ++wrong;
        }
        std::printf("\n");
    }

    // dilations exist from AveragePool-19 on: an opset 11 model may not use them.
    node.dilations = {2, 2};
    auto old = avgpool::onnx::average_pool<2>(node, 11);
    std::printf("same node with dilations=[2,2] at opset 11: %s\n",
                old ? "accepted (unexpected)" : old.error().message().c_str());
    if (old) ++wrong;

    std::printf(wrong ? "MISMATCH\n" : "matches the ONNX docs\n");
    return wrong ? 1 : 0;
}
