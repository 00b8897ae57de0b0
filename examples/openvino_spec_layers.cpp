// The five AvgPool layers of the OpenVINO AvgPool-1 specification, run on their 1x3x32x32
// inputs. The spec prints 32x32 for the two same_upper layers; its own formulas (and OpenVINO)
// give 16x16, which is what the library computes.
#include <avgpool/avgpool.hpp>

#include <cstdio>
#include <vector>

namespace {

struct layer {
    const char* xml;  // the spec's <data .../> attributes
    avgpool::index_t kernel, stride, pad_begin, pad_end;
    avgpool::pad_type auto_pad;
    bool exclude_pad;
    const char* spec_says;
};

}  // namespace

int main() {
    using P = avgpool::pad_type;
    const layer layers[] = {
        {"auto_pad=\"same_upper\" exclude-pad=\"true\" kernel=\"2,2\" pads_begin=\"0,0\" pads_end=\"1,1\" strides=\"2,2\"",
         2, 2, 0, 1, P::same_upper, true, "1x3x32x32"},
        {"auto_pad=\"same_upper\" exclude-pad=\"false\" kernel=\"5,5\" pads_begin=\"0,0\" pads_end=\"1,1\" strides=\"2,2\"",
         5, 2, 0, 1, P::same_upper, false, "1x3x32x32"},
        {"auto_pad=\"explicit\" exclude-pad=\"true\" kernel=\"5,5\" pads_begin=\"1,1\" pads_end=\"1,1\" strides=\"3,3\"",
         5, 3, 1, 1, P::explicit_pads, true, "1x3x10x10"},
        {"auto_pad=\"explicit\" exclude-pad=\"false\" kernel=\"5,5\" pads_begin=\"1,1\" pads_end=\"1,1\" strides=\"2,2\"",
         5, 2, 1, 1, P::explicit_pads, false, "1x3x15x15"},
        {"auto_pad=\"valid\" exclude-pad=\"true\" kernel=\"5,5\" pads_begin=\"1,1\" pads_end=\"1,1\" strides=\"2,2\"",
         5, 2, 1, 1, P::valid, true, "1x3x14x14"},
    };
    std::vector<float> in(1 * 3 * 32 * 32, 1.0f);
    for (const layer& l : layers) {
        avgpool::pool_attrs<2> a;
        a.kernel = {l.kernel, l.kernel};
        a.strides = {l.stride, l.stride};
        a.pads_begin = {l.pad_begin, l.pad_begin};
        a.pads_end = {l.pad_end, l.pad_end};
        a.auto_pad = l.auto_pad;
        // OpenVINO: exclude-pad="false" divides by the whole kernel once any pad is non-zero.
        a.divisor = l.exclude_pad ? avgpool::divisor_type::exclude_pad : avgpool::divisor_type::full_kernel_if_padded;
        auto plan = avgpool::pooling<2>::create({1, 3, 32, 32}, a);
        if (!plan) {
            std::printf("%s\n  error: %s\n", l.xml, plan.error().message().c_str());
            return 1;
        }
        std::vector<float> out(static_cast<std::size_t>(plan->output_size()));
        plan->forward(in.data(), out.data());
        const auto& s = plan->output_shape();
        const auto& g = plan->geometry();
        std::printf("<data %s/>\n  output %lldx%lldx%lldx%lld (spec prints %s), resolved pads %lld/%lld, out[0] = %.4f\n",
                    l.xml, (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3], l.spec_says,
                    (long long)g.pads_begin[0], (long long)g.pads_end[0], out[0]);
    }
    return 0;
}
