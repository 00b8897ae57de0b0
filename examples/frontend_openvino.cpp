// OpenVINO front end: the five AvgPool layers of the AvgPool-1 specification, read from their
// IR <data .../> attribute strings and run on 1x3x32x32. The spec prints 32x32 for the two
// same_upper layers; its formulas (and OpenVINO) give 16x16, which is what we check for.
// Then two layers OpenVINO rejects, to show the errors.
#include <avgpool/avgpool.hpp>
#include <avgpool/frontends/openvino.hpp>

#include <cstdio>
#include <string_view>
#include <vector>

namespace {

// Splits `name="value" name="value" ...` into the layer's attribute views (the text must outlive
// them). An engine's XML reader would hand over the same strings.
bool read_data(std::string_view xml, avgpool::openvino::avg_pool_data& d) {
    while (true) {
        const std::size_t eq = xml.find("=\"");
        if (eq == std::string_view::npos) return true;
        const std::size_t end = xml.find('"', eq + 2);
        if (end == std::string_view::npos) return false;
        std::string_view name = xml.substr(0, eq);
        const std::size_t first = name.find_first_not_of(' ');
        if (first == std::string_view::npos) return false;
        name.remove_prefix(first);
        const std::string_view value = xml.substr(eq + 2, end - eq - 2);
        if (name == "kernel") d.kernel = value;
        else if (name == "strides") d.strides = value;
        else if (name == "pads_begin") d.pads_begin = value;
        else if (name == "pads_end") d.pads_end = value;
        else if (name == "exclude-pad") d.exclude_pad = value;
        else if (name == "rounding_type") d.rounding_type = value;
        else if (name == "auto_pad") d.auto_pad = value;
        else if (name == "dilations") d.dilations = value;
        else return false;
        xml.remove_prefix(end + 1);
    }
}

}  // namespace

int main() {
    struct layer {
        const char* data;   // the spec's <data .../> attributes
        avgpool::index_t out;  // output extent OpenVINO computes
    };
    const layer layers[] = {
        {R"(auto_pad="same_upper" exclude-pad="true" kernel="2,2" pads_begin="0,0" pads_end="1,1" strides="2,2")", 16},
        {R"(auto_pad="same_upper" exclude-pad="false" kernel="5,5" pads_begin="0,0" pads_end="1,1" strides="2,2")", 16},
        {R"(auto_pad="explicit" exclude-pad="true" kernel="5,5" pads_begin="1,1" pads_end="1,1" strides="3,3")", 10},
        {R"(auto_pad="explicit" exclude-pad="false" kernel="5,5" pads_begin="1,1" pads_end="1,1" strides="2,2")", 15},
        {R"(auto_pad="valid" exclude-pad="true" kernel="5,5" pads_begin="1,1" pads_end="1,1" strides="2,2")", 14},
    };
    std::vector<float> in(1 * 3 * 32 * 32, 1.0f);
    int failures = 0;
    for (const layer& l : layers) {
        avgpool::openvino::avg_pool_data d;
        if (!read_data(l.data, d)) {
            std::printf("<data %s/>: unreadable\n", l.data);
            return 1;
        }
        auto attrs = avgpool::openvino::avg_pool<2>(d, 1);  // AvgPool-1
        if (!attrs) {
            std::printf("<data %s/>\n  error: %s\n", l.data, attrs.error().message().c_str());
            return 1;
        }
        auto plan = avgpool::pooling<2>::create({1, 3, 32, 32}, *attrs);
        if (!plan) {
            std::printf("<data %s/>\n  error: %s\n", l.data, plan.error().message().c_str());
            return 1;
        }
        std::vector<float> out(static_cast<std::size_t>(plan->output_size()));
        plan->forward(in.data(), out.data());
        const auto& s = plan->output_shape();
        const auto& g = plan->geometry();
        const bool ok = s[2] == l.out && s[3] == l.out;
        failures += ok ? 0 : 1;
        std::printf("<data %s/>\n  output %lldx%lldx%lldx%lld, pads %lld/%lld, out[0] = %.4f%s\n", l.data,
                    (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3], (long long)g.pads_begin[0],
                    (long long)g.pads_end[0], out[0], ok ? "" : "  <-- unexpected");
    }

    // Layers OpenVINO rejects: the front end says which attribute, which axis, which value.
    const char* rejected[] = {
        R"(exclude-pad="true" kernel="2,x" pads_begin="0,0" pads_end="0,0" strides="1,1")",
        R"(exclude-pad="true" kernel="3,3" pads_begin="3,0" pads_end="0,0" strides="1,1")",
        R"(exclude-pad="true" kernel="2,2" pads_begin="1,1" pads_end="1,1" strides="2,2" rounding_type="ceil_torch")",
    };
    for (const char* r : rejected) {
        avgpool::openvino::avg_pool_data d;
        if (!read_data(r, d)) return 1;
        auto attrs = avgpool::openvino::avg_pool<2>(d, 1);  // AvgPool-1
        if (attrs) {
            std::printf("<data %s/>: accepted, expected an error\n", r);
            ++failures;
        } else {
            std::printf("<data %s/>\n  rejected: %s\n", r, attrs.error().message().c_str());
        }
    }
    return failures == 0 ? 0 : 1;
}
