// nGraph's definition of average pooling, shown tensor by tensor: the window sums, the divisor
// of each output position, and the average (sum / divisor). A 3x3 window, stride 1, one pad,
// on a 4x4 input of ones, with the exclude-pad and the include-pad divisors.
#include <avgpool/avgpool.hpp>

#include <cstdio>
#include <vector>

namespace {

void print(const char* title, const std::vector<float>& v, avgpool::index_t w) {
    std::printf("  %s\n", title);
    for (std::size_t i = 0; i < v.size(); ++i)
        std::printf("%s%6.3f%s", i % static_cast<std::size_t>(w) == 0 ? "    " : "", v[i],
                    (i + 1) % static_cast<std::size_t>(w) == 0 ? "\n" : " ");
}

}  // namespace

int main() {
    avgpool::pool_attrs<2> a;
    a.kernel = {3, 3};
    a.pads_begin = a.pads_end = {1, 1};
    const std::vector<float> ones(16, 1.0f);
    for (auto div : {avgpool::divisor_type::exclude_pad, avgpool::divisor_type::include_pad}) {
        a.divisor = div;
        auto plan = avgpool::pooling<2>::create({1, 1, 4, 4}, a);
        if (!plan) return 1;
        std::vector<float> sum(16), divisor(16), avg(16);
        plan->sum(ones.data(), sum.data());
        plan->divisor(divisor.data());
        plan->forward(ones.data(), avg.data());
        std::printf("%s:\n", div == avgpool::divisor_type::exclude_pad ? "exclude_pad" : "include_pad");
        print("sum", sum, 4);
        print("divisor", divisor, 4);
        print("average = sum / divisor", avg, 4);
        for (std::size_t i = 0; i < 16; ++i)
            if (avg[i] != sum[i] / divisor[i]) return 1;
    }
    return 0;
}
