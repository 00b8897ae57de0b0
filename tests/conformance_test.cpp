// Every vector of ../shared/conformance, each through its framework's front end: ONNX node tests
// and pytorch-converted tests via avgpool::onnx (their raw node attributes, their opset);
// OpenVINO reference and shape-inference tests via avgpool::openvino, from attribute strings
// formatted like the IR's, per listed op version. Numeric vectors run in float and double and
// in both layouts; shape-only vectors are checked through shape inference, dynamic dimensions
// included; error vectors must be rejected by the front end or the core, with the error kind
// their message implies.
#include <gtest/gtest.h>

#include <avgpool/avgpool.hpp>
#include <avgpool/frontends/all.hpp>

#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "support/conformance.hpp"

namespace {

using avgpool::index_t;
using avgpool_test::json::value;

// |got - want| <= 1e-5 relative to max(1, |want|): the vectors hold float32 literals.
constexpr double kTolerance = 1e-5;

// One ONNX vector (test_averagepool_2d_ceil_last_window_starts_on_pad) was written by hand
// with 4 decimals, and one of its literals is off in the 4th: channel 1 is
// (0.8816 + 0.4353 + 0.5772 + 0.6623) / 9 = 0.284044, written 0.2841 (ONNX's own runner passes it
// with rtol 1e-3). A 4-decimal literal is good to one unit of its last digit, so vectors whose
// every value is a 4-decimal literal (and some need the 4th decimal) are held to 1e-4.
bool hand_written_four_decimals(const std::vector<double>& want) {
    bool needs_fourth = false;
    for (double w : want) {
        if (std::fabs(w * 1e4 - std::round(w * 1e4)) > 1e-3) return false;
        needs_fourth = needs_fourth || std::fabs(w * 1e3 - std::round(w * 1e3)) > 1e-3;
    }
    return needs_fourth;
}

template <class T>
void expect_close(const std::vector<T>& got, const std::vector<double>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    const double literal_precision = hand_written_four_decimals(want) ? 1e-4 : 0.0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double g = static_cast<double>(got[i]);
        const double tol = std::fmax(kTolerance * std::fmax(1.0, std::fabs(want[i])), literal_precision);
        ASSERT_LE(std::fabs(g - want[i]), tol)
            << what << ": output[" << i << "] = " << g << ", expected " << want[i];
    }
}

// Runs a numeric vector in float and double, channels-first and channels-last.
template <std::size_t R>
void check_numeric(const std::vector<index_t>& shape, const avgpool::pool_attrs<R>& attrs,
                   const std::vector<double>& input, const std::vector<index_t>& want_shape,
                   const std::vector<double>& want, const std::string& name) {
    for (avgpool::layout lay : {avgpool::layout::channels_first, avgpool::layout::channels_last}) {
        const bool last = lay == avgpool::layout::channels_last;
        const std::string what = name + (last ? " [channels_last]" : " [channels_first]");
        // The expected output is channels-first; compare in that order.
        const std::vector<double> want_l = last ? avgpool_test::to_channels_last(want, want_shape) : want;
        {
            std::vector<float> in(input.begin(), input.end()), out;
            if (last) in = avgpool_test::to_channels_last(in, shape);
            std::vector<index_t> got_shape;
            auto st = avgpool_test::run_forward<float, R>(shape, attrs, lay, in, out, &got_shape);
            ASSERT_TRUE(st.ok()) << what << ": " << st.error().message();
            EXPECT_EQ(got_shape, want_shape) << what;
            expect_close(out, want_l, what + " float");
        }
        {
            std::vector<double> in = last ? avgpool_test::to_channels_last(input, shape) : input, out;
            auto st = avgpool_test::run_forward<double, R>(shape, attrs, lay, in, out);
            ASSERT_TRUE(st.ok()) << what << ": " << st.error().message();
            expect_close(out, want_l, what + " double");
        }
    }
}

// ---- ONNX ------------------------------------------------------------------------------------

// The node's attributes exactly as the model has them: absent ones stay absent, so the front
// end's defaults are what the vector's canonical fields are checked against.
avgpool::onnx::average_pool_attributes onnx_node(const value& raw) {
    avgpool::onnx::average_pool_attributes n;
    for (const auto& member : raw.as_object()) {
        const std::string& key = member.first;
        const value& v = member.second;
        if (key == "kernel_shape") n.kernel_shape = v.as_int_vector();
        else if (key == "strides") n.strides = v.as_int_vector();
        else if (key == "pads") n.pads = v.as_int_vector();
        else if (key == "dilations") n.dilations = v.as_int_vector();
        else if (key == "auto_pad") n.auto_pad = v.as_string();  // the document outlives n
        else if (key == "ceil_mode") n.ceil_mode = v.as_int();
        else if (key == "count_include_pad") n.count_include_pad = v.as_int();
        else ADD_FAILURE() << "unknown AveragePool attribute " << key;
    }
    return n;
}

avgpool::pad_type onnx_auto_pad(const std::string& s) {
    if (s == "SAME_UPPER") return avgpool::pad_type::same_upper;
    if (s == "SAME_LOWER") return avgpool::pad_type::same_lower;
    if (s == "VALID") return avgpool::pad_type::valid;
    EXPECT_EQ(s, "NOTSET");
    return avgpool::pad_type::explicit_pads;
}

// The vector's canonical fields (n spatial axes) are what the front end must make of the node;
// axes past n (a 1-D pool run as 2-D, as its graph does) must be the identity.
template <std::size_t R>
void check_onnx_canonical(const value& e, const avgpool::pool_attrs<R>& a) {
    const std::vector<index_t> k = e.at("kernel").as_int_vector(), s = e.at("strides").as_int_vector();
    const std::vector<index_t> d = e.at("dilations").as_int_vector(), p = e.at("pads").as_int_vector();
    const std::size_t n = k.size();
    ASSERT_LE(n, R);
    for (std::size_t i = 0; i < R; ++i) {
        SCOPED_TRACE("axis " + std::to_string(i));
        EXPECT_EQ(a.kernel[i], i < n ? k[i] : 1);
        EXPECT_EQ(a.strides[i], i < n ? s[i] : 1);
        EXPECT_EQ(a.dilations[i], i < n ? d[i] : 1);
        if (a.auto_pad == avgpool::pad_type::explicit_pads) {
            EXPECT_EQ(a.pads_begin[i], i < n ? p[i] : 0);
            EXPECT_EQ(a.pads_end[i], i < n ? p[n + i] : 0);
        }
    }
    EXPECT_EQ(a.auto_pad, onnx_auto_pad(e.at("auto_pad").as_string()));
    EXPECT_EQ(a.rounding, e.at("ceil_mode").as_int() != 0 ? avgpool::rounding_type::ceil_torch
                                                          : avgpool::rounding_type::floor);
    EXPECT_EQ(a.divisor, e.at("count_include_pad").as_int() != 0 ? avgpool::divisor_type::include_pad
                                                                 : avgpool::divisor_type::exclude_pad);
    EXPECT_EQ(a.divisor_override, 0);
}

int run_onnx_file(const value& doc) {
    EXPECT_TRUE(doc.is_array());
    int checked = 0;
    for (const value& e : doc.as_array()) {
        const std::string name = e.at("name").as_string();
        SCOPED_TRACE(name);
        const index_t opset = e.at("opset").as_int();
        const bool global = e.at("global_pool").as_bool();
        EXPECT_EQ(e.at("op_type").as_string(), global ? "GlobalAveragePool" : "AveragePool");
        const avgpool::onnx::average_pool_attributes node = onnx_node(e.at("raw_attributes"));
        std::vector<index_t> shape = e.at("input_shape").as_int_vector();
        std::vector<index_t> want_shape = e.at("output_shape").as_int_vector();
        // pytorch-converted 1-D pools are Unsqueeze -> 2-D AveragePool (trailing kernel 1) ->
        // Squeeze: run the node as it is, on the unsqueezed input.
        if (!global && node.kernel_shape.size() == shape.size() - 1) {
            shape.push_back(1);
            want_shape.push_back(1);
        }
        const bool ran = avgpool_test::for_rank(shape.size() - 2, [&](auto r) {
            constexpr std::size_t R = decltype(r)::value;
            auto a = global ? avgpool::onnx::global_average_pool<R>(avgpool_test::to_dims<R + 2>(shape))
                            : avgpool::onnx::average_pool<R>(node, opset);
            ASSERT_TRUE(a.ok()) << a.error().message();
            check_onnx_canonical<R>(e, *a);
            // The runtime-rank entry point makes the same attributes and the same shape.
            auto d = global ? avgpool::onnx::global_average_pool_dynamic(shape)
                            : avgpool::onnx::average_pool_dynamic(node, opset);
            ASSERT_TRUE(d.ok()) << d.error().message();
            auto back = avgpool::to_static<R>(*d);
            ASSERT_TRUE(back.ok()) << back.error().message();
            EXPECT_TRUE(avgpool_test::same_attrs(*back, *a));
            auto inferred = avgpool::infer_output_shape(shape, *d);
            ASSERT_TRUE(inferred.ok()) << inferred.error().message();
            EXPECT_EQ(*inferred, want_shape);
            check_numeric<R>(shape, *a, e.at("input").as_double_vector(), want_shape,
                             e.at("output").as_double_vector(), name);
        });
        EXPECT_TRUE(ran) << "rank " << shape.size();
        ++checked;
    }
    return checked;
}

TEST(Conformance, OnnxNodeTests) {
    AVGPOOL_REQUIRE_CONFORMANCE(doc, "onnx_node_tests.json");
    EXPECT_GT(run_onnx_file(*doc), 20);
}

TEST(Conformance, OnnxPytorchConverted) {
    AVGPOOL_REQUIRE_CONFORMANCE(doc, "onnx_pytorch_converted.json");
    EXPECT_GT(run_onnx_file(*doc), 5);
}

// ---- OpenVINO -------------------------------------------------------------------------------

// A dimension in the OpenVINO vectors: a number, -1 (unknown), or [lo, hi] (hi -1: unbounded).
struct dim {
    index_t lo = 0, hi = -1;
    bool is_static() const { return lo == hi; }
};

dim read_dim(const value& v) {
    if (v.is_array()) return dim{v[0].as_int(), v[1].as_int()};
    const index_t x = v.as_int();
    return x < 0 ? dim{0, -1} : dim{x, x};
}

std::vector<dim> read_dims(const value& v) {
    std::vector<dim> d;
    for (const value& x : v.as_array()) d.push_back(read_dim(x));
    return d;
}

// A concrete shape standing for a possibly dynamic one: static dims as they are, a dynamic N
// or C as 1, a dynamic spatial dim as a large extent (so that an error must come from
// something else).
std::vector<index_t> probe_shape(const std::vector<dim>& in) {
    std::vector<index_t> probe;
    for (std::size_t i = 0; i < in.size(); ++i) probe.push_back(in[i].is_static() ? in[i].lo : (i < 2 ? 1 : 1000));
    return probe;
}

std::string join(const std::vector<index_t>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s;
}

// One AvgPool layer's <data .../> attributes as the IR spells them, made from the vector's
// arrays; the strings live here, the front end's data views them.
struct openvino_layer {
    std::string kernel, strides, pads_begin, pads_end, dilations, exclude_pad, rounding, auto_pad;
    bool has_dilations = false;

    explicit openvino_layer(const value& e)
        : kernel(join(e.at("kernel").as_int_vector())),
          strides(join(e.at("strides").as_int_vector())),
          pads_begin(join(e.at("pads_begin").as_int_vector())),
          pads_end(join(e.at("pads_end").as_int_vector())),
          exclude_pad(e.at("exclude_pad").as_bool() ? "true" : "false"),
          rounding(e.at("rounding").as_string()),
          auto_pad(e.at("auto_pad").as_string()) {
        if (const value* d = e.find("dilations")) {
            dilations = join(d->as_int_vector());
            has_dilations = true;
        }
    }

    avgpool::openvino::avg_pool_data data() const {
        avgpool::openvino::avg_pool_data d;
        d.kernel = kernel;
        d.strides = strides;
        d.pads_begin = pads_begin;
        d.pads_end = pads_end;
        d.exclude_pad = exclude_pad;
        d.rounding_type = rounding;
        d.auto_pad = auto_pad;
        if (has_dilations) d.dilations = dilations;
        return d;
    }
};

int version_number(const std::string& v) {
    EXPECT_TRUE(v.size() > 1 && v[0] == 'v') << v;
    return std::stoi(v.substr(1));
}

std::vector<std::string> versions_of(const value& e) {
    const value& v = e.at("op_version");
    if (v.is_string()) return {v.as_string()};
    std::vector<std::string> out;
    for (const value& x : v.as_array()) out.push_back(x.as_string());
    return out;
}

// What kind of error an OpenVINO message means, and (when it names one) the attribute prefix
// the library's error must name.
struct expected_error {
    avgpool::errc code;
    const char* attribute_prefix;
};

std::optional<expected_error> expected_error_for(const std::string& message) {
    struct row {
        const char* substring;
        expected_error error;
    };
    static const row rows[] = {
        {"Expected a 3D, 4D or 5D tensor", {avgpool::errc::rank_mismatch, ""}},
        {"size to be equal to input size - 2", {avgpool::errc::rank_mismatch, ""}},
        {"Strides has zero dimension", {avgpool::errc::invalid_value, "strides"}},
        {"larger than the data shape after padding", {avgpool::errc::kernel_too_large, "kernel"}},
        {"entirely in the padding area", {avgpool::errc::invalid_value, "pads_"}},
        {"Rounding CEIL_TORCH is not supported", {avgpool::errc::unsupported, "rounding_type"}},
        {"Output shape for spatial dimension not compatible", {avgpool::errc::rank_mismatch, "output_size"}},
    };
    for (const row& r : rows)
        if (message.find(r.substring) != std::string::npos) return r.error;
    return std::nullopt;
}

void expect_error_matches(const value& e, const avgpool::error_info& got) {
    const std::string want = e.at("error_substring").as_string();
    const std::string msg = avgpool::error(got).message();
    const std::optional<expected_error> x = expected_error_for(want);
    ASSERT_TRUE(x.has_value()) << "no error kind known for OpenVINO's \"" << want << "\"";
    EXPECT_EQ(got.code, x->code) << msg << " (OpenVINO: " << want << ")";
    EXPECT_EQ(std::string(got.attribute).rfind(x->attribute_prefix, 0), 0u) << msg << " (OpenVINO: " << want << ")";
}

// The vector must be rejected: by the front end (strings, counts, values, version rules), or by
// the core (rank, fit) on a concrete stand-in for its input shape.
void check_openvino_error(const value& e, const avgpool::result<avgpool::pool_attrs_dynamic>& attrs) {
    if (!attrs) {
        expect_error_matches(e, attrs.error_data());
        return;
    }
    const value& in_v = e.at("input_shape");
    const std::vector<index_t> probe =
        in_v.is_null() ? std::vector<index_t>(attrs->kernel.size() + 2, 1000) : probe_shape(read_dims(in_v));
    auto r = avgpool::infer_output_shape(probe, *attrs);
    ASSERT_FALSE(r.ok()) << "accepted; expected an error like: " << e.at("error_substring").as_string();
    expect_error_matches(e, r.error_data());
}

// Checks a shape-inference vector, dynamic dimensions included: static spatial dims must match
// exactly; an interval's bounds are the library's extents at its ends (outputs grow with the
// input); an unbounded end stays unbounded; with auto_pad a dynamic dim stays dynamic.
void check_openvino_shape(const value& e, const avgpool::pool_attrs_dynamic& a) {
    const value& in_v = e.at("input_shape");
    const value& out_v = e.at("output_shape");
    if (in_v.is_null()) {
        // Dynamic rank: only the attribute lists can be checked; the rank follows the kernel.
        const std::size_t R = a.kernel.size();
        std::vector<index_t> probe(R + 2, 1000);
        probe[0] = probe[1] = 1;
        auto r = avgpool::infer_output_shape(probe, a);
        ASSERT_TRUE(r.ok()) << r.error().message();
        ASSERT_TRUE(out_v.is_string());
        EXPECT_EQ(out_v.as_string(), "dynamic(" + std::to_string(R + 2) + ")");
        return;
    }
    const std::vector<dim> in = read_dims(in_v);
    const std::vector<dim> out = read_dims(out_v);
    ASSERT_EQ(in.size(), out.size());
    ASSERT_GE(in.size(), 3u);
    // N and C pass through untouched.
    for (std::size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(in[i].lo, out[i].lo) << "axis " << i;
        EXPECT_EQ(in[i].hi, out[i].hi) << "axis " << i;
    }
    // The whole shape with the dynamic dims replaced by a large extent must be accepted.
    auto whole = avgpool::infer_output_shape(probe_shape(in), a);
    ASSERT_TRUE(whole.ok()) << whole.error().message();

    auto pads_b = e.find("expected_pads_begin");
    auto pads_e = e.find("expected_pads_end");
    for (std::size_t i = 2; i < in.size(); ++i) {
        const std::size_t ax = i - 2;
        SCOPED_TRACE("spatial axis " + std::to_string(ax));
        const index_t k = a.kernel[ax], s = a.strides[ax], d = a.dilations[ax];
        const index_t pb = a.pads_begin[ax], pe = a.pads_end[ax];
        auto extent = [&](index_t X) { return avgpool::output_extent(X, k, s, d, pb, pe, a.auto_pad, a.rounding); };
        if (in[i].is_static()) {
            EXPECT_EQ(out[i].lo, out[i].hi);
            EXPECT_EQ((*whole)[i], out[i].lo);
            auto one = extent(in[i].lo);
            ASSERT_TRUE(one.ok());
            EXPECT_EQ(*one, out[i].lo);
            continue;
        }
        if (a.auto_pad != avgpool::pad_type::explicit_pads) {
            // Pads depend on the unknown extent: output unknown, pads reported as 0.
            EXPECT_EQ(out[i].lo, 0);
            EXPECT_EQ(out[i].hi, -1);
            if (pads_b) {
                EXPECT_EQ((*pads_b)[ax].as_int(), 0);
            }
            if (pads_e) {
                EXPECT_EQ((*pads_e)[ax].as_int(), 0);
            }
            continue;
        }
        // Lower bound: the extent at the smallest input, or 1 when no window fits there
        // (OpenVINO clamps interval lower bounds at 1).
        auto lo = extent(in[i].lo);
        EXPECT_EQ(out[i].lo, lo.ok() ? *lo : 1);
        if (in[i].hi < 0) {
            EXPECT_EQ(out[i].hi, -1);
        } else {
            auto hi = extent(in[i].hi);
            ASSERT_TRUE(hi.ok());
            EXPECT_EQ(out[i].hi, *hi);
        }
    }
}

// Expected pads on fully static shapes come from the resolved geometry.
void check_openvino_pads(const value& e, const avgpool::pool_attrs_dynamic& a) {
    const value* pb = e.find("expected_pads_begin");
    const value* pe = e.find("expected_pads_end");
    const value& in_v = e.at("input_shape");
    if (!pb || !pe || in_v.is_null()) return;
    const std::vector<dim> in = read_dims(in_v);
    for (std::size_t i = 2; i < in.size(); ++i) {
        if (!in[i].is_static()) continue;  // checked in check_openvino_shape
        const std::size_t ax = i - 2;
        // One axis through 1-D shape inference gives that axis's resolved pads.
        avgpool::pool_attrs<1> one;
        one.kernel = {a.kernel[ax]};
        one.strides = {a.strides[ax]};
        one.dilations = {a.dilations[ax]};
        one.pads_begin = {a.pads_begin[ax]};
        one.pads_end = {a.pads_end[ax]};
        one.auto_pad = a.auto_pad;
        one.rounding = a.rounding;
        auto g = avgpool::infer_geometry<1>({in[i].lo}, one);
        ASSERT_TRUE(g.ok()) << g.error().message();
        EXPECT_EQ(g->pads_begin[0], (*pb)[ax].as_int()) << "pads_begin axis " << ax;
        EXPECT_EQ(g->pads_end[0], (*pe)[ax].as_int()) << "pads_end axis " << ax;
    }
}

TEST(Conformance, OpenVinoAvgPool) {
    AVGPOOL_REQUIRE_CONFORMANCE(doc, "openvino_tests.json");
    int numeric = 0, shapes = 0, errors = 0;
    for (const value& e : doc->as_array()) {
        if (e.at("op").as_string() != "avg_pool") continue;
        const openvino_layer layer(e);
        for (const std::string& version : versions_of(e)) {
            const std::string name = e.at("name").as_string() + " (" + version + ")";
            SCOPED_TRACE(name);
            const int v = version_number(version);
            const auto attrs = avgpool::openvino::avg_pool_dynamic(layer.data(), v);
            const value& in_v = e.at("input_shape");
            if (const value* err = e.find("expect_error"); err && err->as_bool()) {
                check_openvino_error(e, attrs);
                // With a usable static rank, the fixed-rank entry point must reject it too.
                if (!in_v.is_null() && in_v.size() >= 3) {
                    avgpool_test::for_rank(in_v.size() - 2, [&](auto r) {
                        constexpr std::size_t R = decltype(r)::value;
                        auto a = avgpool::openvino::avg_pool<R>(layer.data(), v);
                        if (!a) {
                            expect_error_matches(e, a.error_data());
                            return;
                        }
                        auto plan = avgpool::pooling<R>::create(
                            avgpool_test::to_dims<R + 2>(probe_shape(read_dims(in_v))), *a);
                        ASSERT_FALSE(plan.ok()) << "accepted by the fixed-rank front end";
                        expect_error_matches(e, plan.error_data());
                    });
                }
                ++errors;
                continue;
            }
            ASSERT_TRUE(attrs.ok()) << attrs.error().message();
            if (in_v.is_null()) {  // dynamic rank: the runtime-rank attributes only
                check_openvino_shape(e, *attrs);
                ++shapes;
                continue;
            }
            // With the rank known, the fixed-rank entry point must make the same attributes.
            const std::size_t rank = in_v.size() - 2;
            const bool ran = avgpool_test::for_rank(rank, [&](auto r) {
                constexpr std::size_t R = decltype(r)::value;
                auto a = avgpool::openvino::avg_pool<R>(layer.data(), v);
                ASSERT_TRUE(a.ok()) << a.error().message();
                auto back = avgpool::to_static<R>(*attrs);
                ASSERT_TRUE(back.ok()) << back.error().message();
                EXPECT_TRUE(avgpool_test::same_attrs(*back, *a));
                if (e.at("input").is_null()) {
                    check_openvino_shape(e, *attrs);
                    check_openvino_pads(e, *attrs);
                    ++shapes;
                } else {
                    check_numeric<R>(e.at("input_shape").as_int_vector(), *a, e.at("input").as_double_vector(),
                                     e.at("output_shape").as_int_vector(), e.at("output").as_double_vector(), name);
                    ++numeric;
                }
            });
            EXPECT_TRUE(ran) << "rank " << in_v.size();
        }
    }
    // Guards against a data file that silently lost its entries.
    EXPECT_GT(numeric, 20);
    EXPECT_GT(shapes, 20);
    EXPECT_GT(errors, 20);
}

// AdaptiveAvgPool-8 through avgpool::openvino (and, where the shape is static, the same
// extents from avgpool::torch, since both frameworks define the op alike). Only shapes and
// errors: the numeric vectors' values are checked once the core has pooling::create_adaptive.
TEST(Conformance, OpenVinoAdaptiveAvgPool) {
    AVGPOOL_REQUIRE_CONFORMANCE(doc, "openvino_tests.json");
    int shapes = 0, errors = 0;
    for (const value& e : doc->as_array()) {
        if (e.at("op").as_string() != "adaptive_avg_pool") continue;
        SCOPED_TRACE(e.at("name").as_string());
        EXPECT_EQ(e.at("op_version").as_string(), "v8");
        const value& in_v = e.at("input_shape");
        const value& size_v = e.at("output_size");
        const value& out_v = e.at("output_shape");
        if (const value* err = e.find("expect_error"); err && err->as_bool()) {
            ASSERT_FALSE(in_v.is_null());
            std::vector<index_t> sizes;
            if (size_v.is_string()) {  // a Parameter of known shape [n]: n unknown extents
                const std::string s = size_v.as_string();
                const std::size_t open = s.find("shape [");
                ASSERT_NE(open, std::string::npos) << s;
                sizes.assign(static_cast<std::size_t>(std::stoi(s.substr(open + 7))), 1);
            } else {
                sizes = size_v.as_int_vector();
            }
            auto r = avgpool::openvino::adaptive_avg_pool_shape(probe_shape(read_dims(in_v)), sizes);
            ASSERT_FALSE(r.ok()) << "accepted; expected: " << e.at("error_substring").as_string();
            expect_error_matches(e, r.error_data());
            ++errors;
            continue;
        }
        if (size_v.is_null()) {
            // output_size unknown at compile time: only the rank carries over.
            if (in_v.is_null()) {
                EXPECT_EQ(out_v.as_string(), "dynamic");
            } else {
                const std::vector<dim> in = read_dims(in_v), out = read_dims(out_v);
                ASSERT_EQ(in.size(), out.size());
                for (std::size_t i = 2; i < out.size(); ++i) EXPECT_FALSE(out[i].is_static());
            }
            ++shapes;
            continue;
        }
        const std::vector<dim> in = read_dims(in_v), sizes = read_dims(size_v), out = read_dims(out_v);
        ASSERT_EQ(in.size(), out.size());
        for (std::size_t i = 0; i < 2; ++i) {
            EXPECT_EQ(in[i].lo, out[i].lo) << "axis " << i;
            EXPECT_EQ(in[i].hi, out[i].hi) << "axis " << i;
        }
        // output_size may hold intervals: each bound gives that bound of the output.
        std::vector<index_t> lo, hi;
        for (const dim& d : sizes) {
            lo.push_back(d.lo);
            hi.push_back(d.hi);
        }
        const std::vector<index_t> probe = probe_shape(in);
        auto r_lo = avgpool::openvino::adaptive_avg_pool_shape(probe, lo);
        auto r_hi = avgpool::openvino::adaptive_avg_pool_shape(probe, hi);
        ASSERT_TRUE(r_lo.ok()) << r_lo.error().message();
        ASSERT_TRUE(r_hi.ok()) << r_hi.error().message();
        for (std::size_t i = 2; i < out.size(); ++i) {
            EXPECT_EQ((*r_lo)[i], out[i].lo) << "axis " << i;
            EXPECT_EQ((*r_hi)[i], out[i].hi) << "axis " << i;
        }
        avgpool_test::for_rank(in.size() - 2, [&](auto r) {
            constexpr std::size_t R = decltype(r)::value;
            auto ov = avgpool::openvino::adaptive_avg_pool<R>(avgpool_test::to_dims<R + 2>(probe), lo);
            ASSERT_TRUE(ov.ok()) << ov.error().message();
            std::vector<std::optional<index_t>> torch_size(lo.begin(), lo.end());
            auto pt = avgpool::torch::adaptive_avg_pool<R>(avgpool_test::to_dims<R + 2>(probe), torch_size);
            ASSERT_TRUE(pt.ok()) << pt.error().message();
            for (std::size_t i = 0; i < R; ++i) {
                EXPECT_EQ((*ov)[i], (*r_lo)[i + 2]);
                EXPECT_EQ((*pt)[i], (*r_lo)[i + 2]);
            }
        });
        if (!e.at("input").is_null()) {
            // Numeric vector: its output count must match the shape; values wait for create_adaptive.
            index_t count = 1;
            for (index_t x : *r_lo) count *= x;
            EXPECT_EQ(static_cast<std::size_t>(count), e.at("output").size());
        }
        ++shapes;
    }
    EXPECT_GT(shapes, 8);
    EXPECT_GE(errors, 3);
}

// The OpenVINO AvgPool spec's same_upper examples claim 32x32 outputs; the formulas (and every
// implementation) give 16x16. The vectors carry both; the front end plus the core must give the
// computed one.
TEST(Conformance, OpenVinoDocExamplesDisagreeWithTheirClaims) {
    AVGPOOL_REQUIRE_CONFORMANCE(doc, "openvino_tests.json");
    int wrong_docs = 0;
    for (const value& e : doc->as_array()) {
        const value* claimed = e.find("doc_claimed_output_shape");
        if (!claimed) continue;
        SCOPED_TRACE(e.at("name").as_string() + " (" + e.at("op_version").as_string() + ")");
        const openvino_layer layer(e);
        auto a = avgpool::openvino::avg_pool_dynamic(layer.data(), version_number(e.at("op_version").as_string()));
        ASSERT_TRUE(a.ok()) << a.error().message();
        auto r = avgpool::infer_output_shape(e.at("input_shape").as_int_vector(), *a);
        ASSERT_TRUE(r.ok()) << r.error().message();
        EXPECT_EQ(*r, e.at("output_shape").as_int_vector());
        if (*r != claimed->as_int_vector()) ++wrong_docs;
    }
    EXPECT_EQ(wrong_docs, 6);  // examples 1 and 2, listed for v1, v14 and v16
}

}  // namespace
