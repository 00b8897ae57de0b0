// Tests for the test-suite JSON reader in support/json.hpp.
#include "support/json.hpp"

#include <gtest/gtest.h>

#include <clocale>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace json = avgpool_test::json;

std::uint64_t bits_of(double d) {
    std::uint64_t b;
    std::memcpy(&b, &d, sizeof b);
    return b;
}

// Offset reported for malformed input, or SIZE_MAX if it parsed.
std::size_t error_offset(const std::string& text) {
    try {
        json::parse(text);
    } catch (const json::parse_error& e) {
        return e.offset();
    }
    return std::numeric_limits<std::size_t>::max();
}

TEST(Json, Scalars) {
    EXPECT_TRUE(json::parse("null").is_null());
    EXPECT_TRUE(json::parse("true").as_bool());
    EXPECT_FALSE(json::parse("false").as_bool());
    EXPECT_EQ(json::parse("\"hi\"").as_string(), "hi");
    EXPECT_EQ(json::parse("\"\"").as_string(), "");
    EXPECT_EQ(json::parse("42").as_int(), 42);
    EXPECT_DOUBLE_EQ(json::parse("2.5").as_double(), 2.5);

    const json::value v = json::parse("true");
    EXPECT_TRUE(v.is_bool());
    EXPECT_FALSE(v.is_null() || v.is_number() || v.is_string() || v.is_array() || v.is_object());
    EXPECT_STREQ(v.type_name(), "bool");
    EXPECT_TRUE(json::value().is_null());
}

TEST(Json, WhitespaceAroundTokens) {
    const json::value v = json::parse(" \t\r\n{ \"a\" : [ 1 , 2 ] ,\n\"b\":null }\n ");
    ASSERT_TRUE(v.is_object());
    EXPECT_EQ(v.at("a").as_int_vector(), (std::vector<std::int64_t>{1, 2}));
    EXPECT_TRUE(v.at("b").is_null());
}

TEST(Json, Numbers) {
    EXPECT_EQ(json::parse("-17").as_int(), -17);
    EXPECT_EQ(json::parse("0").as_int(), 0);
    EXPECT_EQ(json::parse("-1.5e3").as_double(), -1500.0);
    EXPECT_EQ(json::parse("1E+2").as_double(), 100.0);
    EXPECT_EQ(json::parse("25e-1").as_double(), 2.5);
    EXPECT_EQ(json::parse("0.5").as_double(), 0.5);
    EXPECT_EQ(json::parse("-0.0").as_double(), 0.0);
    EXPECT_TRUE(std::signbit(json::parse("-0.0").as_double()));

    // -0 is an integer literal (0) but its double keeps the sign.
    const json::value neg_zero = json::parse("-0");
    EXPECT_EQ(neg_zero.as_int(), 0);
    EXPECT_TRUE(std::signbit(neg_zero.as_double()));

    // Underflow to a subnormal/zero is accepted; overflow to inf is not.
    EXPECT_EQ(json::parse("1e-400").as_double(), 0.0);
    EXPECT_THROW(json::parse("1e400"), json::parse_error);
    EXPECT_THROW(json::parse("-1e400"), json::parse_error);
}

// Rule: a literal is an integer iff it has no '.' and no exponent and fits int64.
TEST(Json, IntegerDetection) {
    const json::value three = json::parse("3");
    EXPECT_TRUE(three.is_integer());
    EXPECT_EQ(three.as_int(), 3);
    EXPECT_EQ(three.as_double(), 3.0);

    const json::value three_point_zero = json::parse("3.0");
    EXPECT_TRUE(three_point_zero.is_number());
    EXPECT_FALSE(three_point_zero.is_integer());
    EXPECT_EQ(three_point_zero.as_double(), 3.0);
    EXPECT_THROW(three_point_zero.as_int(), std::runtime_error);

    const json::value hundred = json::parse("1e2");
    EXPECT_FALSE(hundred.is_integer());
    EXPECT_EQ(hundred.as_double(), 100.0);
    EXPECT_THROW(hundred.as_int(), std::runtime_error);

    EXPECT_FALSE(json::parse("true").is_integer());
    EXPECT_THROW(json::parse("\"3\"").as_int(), std::runtime_error);
}

TEST(Json, Int64Limits) {
    EXPECT_EQ(json::parse("9223372036854775807").as_int(), std::numeric_limits<std::int64_t>::max());
    EXPECT_EQ(json::parse("-9223372036854775808").as_int(), std::numeric_limits<std::int64_t>::min());
    // Above 2^53 the int stays exact even though the double cannot.
    EXPECT_EQ(json::parse("9007199254740993").as_int(), INT64_C(9007199254740993));
    EXPECT_EQ(json::parse("9007199254740993").as_double(), 9007199254740992.0);

    // Just past int64: still a number, but not an integer.
    const json::value too_big = json::parse("9223372036854775808");
    EXPECT_TRUE(too_big.is_number());
    EXPECT_FALSE(too_big.is_integer());
    EXPECT_EQ(too_big.as_double(), 9223372036854775808.0);
    EXPECT_THROW(too_big.as_int(), std::runtime_error);
    EXPECT_FALSE(json::parse("-9223372036854775809").is_integer());
    EXPECT_FALSE(json::parse("123456789012345678901234567890").is_integer());
}

TEST(Json, DoublesRoundTripExactly) {
    const char* const literals[] = {"0.1",
                                    "1.764052391052246",
                                    "0.40015721321105957",
                                    "-0.9772778749465942",
                                    "5e-324",
                                    "2.2250738585072014e-308",
                                    "1.7976931348623157e308",
                                    "0.30000000000000004",
                                    "123456789.12345679"};
    for (const char* lit : literals) {
        SCOPED_TRACE(lit);
        EXPECT_EQ(bits_of(json::parse(lit).as_double()), bits_of(std::strtod(lit, nullptr)));
    }
    EXPECT_EQ(json::parse("0.1").as_double(), 0.1);
    EXPECT_EQ(json::parse("1.764052391052246").as_double(), 1.764052391052246);
}

TEST(Json, RandomDoublesRoundTripThroughShortestText) {
    std::mt19937_64 rng(12345);
    char buf[40];
    for (int k = 0; k < 20000; ++k) {
        std::uint64_t b = rng();
        double d;
        std::memcpy(&d, &b, sizeof d);
        if (!std::isfinite(d)) continue;
        std::snprintf(buf, sizeof buf, "%.17g", d);
        ASSERT_EQ(bits_of(json::parse(buf).as_double()), b) << buf;
    }
}

// strtod follows LC_NUMERIC; the reader must still read '.' under a ',' locale.
TEST(Json, CommaDecimalLocale) {
    // Restores the locale even if parse throws, so other tests are unaffected.
    struct restore_numeric_locale {
        std::string saved = std::setlocale(LC_NUMERIC, nullptr);
        ~restore_numeric_locale() { std::setlocale(LC_NUMERIC, saved.c_str()); }
    } guard;
    const char* got = nullptr;
    for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"}) {
        if ((got = std::setlocale(LC_NUMERIC, name)) != nullptr) break;
    }
    if (got == nullptr) GTEST_SKIP() << "no locale with a ',' decimal point installed";
    ASSERT_STREQ(std::localeconv()->decimal_point, ",");
    EXPECT_EQ(json::parse("[0.1, 1.764052391052246, -2.5e-3]").as_double_vector(),
              (std::vector<double>{0.1, 1.764052391052246, -2.5e-3}));
}

TEST(Json, StringEscapes) {
    EXPECT_EQ(json::parse(R"("a\"b\\c\/d")").as_string(), "a\"b\\c/d");
    EXPECT_EQ(json::parse(R"("\b\f\n\r\t")").as_string(), "\b\f\n\r\t");
    EXPECT_EQ(json::parse(R"("\u0041\u00e9\u20AC")").as_string(), "A\xC3\xA9\xE2\x82\xAC");
    const std::string nul = json::parse(R"("x\u0000y")").as_string();
    EXPECT_EQ(nul, std::string("x\0y", 3));
    // Raw UTF-8 passes through untouched.
    EXPECT_EQ(json::parse("\"\xC3\xA9\"").as_string(), "\xC3\xA9");
}

TEST(Json, SurrogatePairsBecomeUtf8) {
    EXPECT_EQ(json::parse(R"("\ud83d\ude00")").as_string(), "\xF0\x9F\x98\x80");  // U+1F600
    EXPECT_EQ(json::parse(R"("\uD800\uDC00")").as_string(), "\xF0\x90\x80\x80");  // U+10000
    EXPECT_EQ(json::parse(R"("\uDBFF\uDFFF")").as_string(), "\xF4\x8F\xBF\xBF");  // U+10FFFF

    EXPECT_THROW(json::parse(R"("\ud83d")"), json::parse_error);        // lone high
    EXPECT_THROW(json::parse(R"("\ud83dx")"), json::parse_error);       // high + char
    EXPECT_THROW(json::parse(R"("\ud83d\u0041")"), json::parse_error);  // high + non-low
    EXPECT_THROW(json::parse(R"("\ude00")"), json::parse_error);        // lone low
    EXPECT_THROW(json::parse(R"("\u12g4")"), json::parse_error);
    EXPECT_THROW(json::parse(R"("\u12")"), json::parse_error);
}

TEST(Json, NestingAndObjectOrder) {
    const json::value v = json::parse(R"({"z": 1, "a": [true, {"k": "v"}, []], "m": {}})");
    ASSERT_TRUE(v.is_object());
    ASSERT_EQ(v.size(), 3u);
    const json::object& members = v.as_object();
    EXPECT_EQ(members[0].first, "z");
    EXPECT_EQ(members[1].first, "a");
    EXPECT_EQ(members[2].first, "m");

    const json::value& a = v.at("a");
    ASSERT_TRUE(a.is_array());
    ASSERT_EQ(a.size(), 3u);
    EXPECT_TRUE(a[0].as_bool());
    EXPECT_EQ(a[1].at("k").as_string(), "v");
    EXPECT_EQ(a[2].size(), 0u);
    EXPECT_EQ(v.at("m").size(), 0u);

    EXPECT_TRUE(v.contains("z"));
    EXPECT_FALSE(v.contains("missing"));
    ASSERT_NE(v.find("z"), nullptr);
    EXPECT_EQ(v.find("z")->as_int(), 1);
    EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(Json, AccessErrors) {
    const json::value v = json::parse(R"({"list": [1, 2]})");
    try {
        v.at("nope");
        FAIL() << "at() should throw";
    } catch (const std::out_of_range& e) {
        EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos) << e.what();
    }
    EXPECT_THROW(v.at("list")[2], std::out_of_range);
    EXPECT_THROW(v.as_array(), std::runtime_error);
    EXPECT_THROW(v.at("list").at("x"), std::runtime_error);
    EXPECT_THROW(v.at("list")[0].size(), std::runtime_error);
    EXPECT_THROW(v.at("list")[0].as_string(), std::runtime_error);
    EXPECT_THROW(json::parse("null").as_bool(), std::runtime_error);
}

TEST(Json, NumberVectors) {
    EXPECT_EQ(json::parse("[1, -2, 3]").as_int_vector(), (std::vector<std::int64_t>{1, -2, 3}));
    EXPECT_EQ(json::parse("[]").as_int_vector(), std::vector<std::int64_t>{});
    EXPECT_EQ(json::parse("[1, 2.5, -1e1]").as_double_vector(), (std::vector<double>{1.0, 2.5, -10.0}));

    EXPECT_THROW(json::parse("[1, 2.5]").as_int_vector(), std::runtime_error);
    EXPECT_THROW(json::parse("[1, 2.0]").as_int_vector(), std::runtime_error);
    EXPECT_THROW(json::parse("[1, \"2\"]").as_double_vector(), std::runtime_error);
    EXPECT_THROW(json::parse("[1, null]").as_double_vector(), std::runtime_error);
    EXPECT_THROW(json::parse("{\"a\": 1}").as_double_vector(), std::runtime_error);
    EXPECT_THROW(json::parse("3").as_int_vector(), std::runtime_error);
}

TEST(Json, MalformedInputThrows) {
    const char* const bad[] = {
        "",                // empty
        "   ",             // only whitespace
        "[1,]",            // trailing comma
        "{\"a\":1,}",      // trailing comma in object
        "[1 2]",           // missing comma
        "\"abc",           // unterminated string
        "\"a\\qb\"",       // bad escape
        "\"a\\",           // escape at end of input
        "\"tab\there\"",   // raw control character
        "1 2",             // garbage after value
        "[1] x",           // garbage after value
        "{} {}",           // two documents
        "tru",             // truncated literal
        "nul",             //
        "True",            // wrong case
        "01",              // leading zero
        "-01",             //
        "1.",              // no digits after '.'
        ".5",              // no leading digit
        "-",               //
        "+1",              // leading plus
        "1e",              // empty exponent
        "1e+",             //
        "0x10",            // hex
        "NaN",             //
        "Infinity",        //
        "[",               // unterminated array
        "{",               // unterminated object
        "{\"a\"}",         // missing ':'
        "{\"a\" 1}",       //
        "{a:1}",           // unquoted key
        "{1:1}",           //
        "'x'",             // single quotes
        "[,1]",            //
        "{\"a\":1,\"a\":2}",  // duplicate key
    };
    for (const char* text : bad) {
        SCOPED_TRACE(std::string("input: ") + text);
        EXPECT_THROW(json::parse(text), json::parse_error);
        EXPECT_THROW(json::parse(text), std::runtime_error);  // parse_error is-a runtime_error
    }
}

// Duplicates would make find() silently pick one, so they are rejected.
TEST(Json, DuplicateKeysRejected) {
    std::string many = "{";
    for (int k = 0; k < 100; ++k) many += "\"k" + std::to_string(k) + "\": " + std::to_string(k) + ", ";
    EXPECT_EQ(json::parse(many + "\"end\": 0}").size(), 101u);
    EXPECT_THROW(json::parse(many + "\"k0\": 0}"), json::parse_error);
    EXPECT_EQ(error_offset("[0, {\"a\": 1, \"b\": 2, \"a\": 3}]"), 4u);  // reported at the '{'
    EXPECT_NO_THROW(json::parse(R"([{"a": 1}, {"a": 2}])"));                 // per object, not global
}

TEST(Json, ErrorsReportByteOffset) {
    EXPECT_EQ(error_offset("[1, 2, x]"), 7u);
    EXPECT_EQ(error_offset("[1,]"), 3u);
    EXPECT_EQ(error_offset("  \"abc"), 2u);  // unterminated string: where it started
    EXPECT_EQ(error_offset("\"ab\\qc\""), 3u);
    EXPECT_EQ(error_offset("1 2"), 2u);
    try {
        json::parse("[1, 2, x]");
        FAIL() << "should throw";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("byte 7"), std::string::npos) << e.what();
    }
}

TEST(Json, DepthLimit) {
    const std::size_t limit = json::max_depth;
    const std::string ok = std::string(limit, '[') + std::string(limit, ']');
    EXPECT_NO_THROW(json::parse(ok));

    const std::string too_deep = std::string(limit + 1, '[') + std::string(limit + 1, ']');
    EXPECT_THROW(json::parse(too_deep), json::parse_error);

    std::string objects;
    for (std::size_t k = 0; k <= limit; ++k) objects += "{\"a\":";
    objects += "1";
    objects += std::string(limit + 1, '}');
    EXPECT_THROW(json::parse(objects), json::parse_error);

    // Hostile input: must fail cleanly rather than overflow the stack.
    EXPECT_THROW(json::parse(std::string(1000000, '[')), json::parse_error);
}

TEST(Json, ParseFile) {
    EXPECT_THROW(json::parse_file("/nonexistent/avgpool/none.json"), std::runtime_error);
    EXPECT_THROW(json::parse_file(::testing::TempDir()), std::runtime_error);  // a directory

    const std::string path = ::testing::TempDir() + "avgpool_json_test.json";
    {
        std::ofstream out(path, std::ios::binary);
        out << "{\"name\": \"x\", \"v\": [0.1, 2]}";
    }
    const json::value v = json::parse_file(path);
    EXPECT_EQ(v.at("name").as_string(), "x");
    EXPECT_EQ(v.at("v").as_double_vector(), (std::vector<double>{0.1, 2.0}));

    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out << "[1,]";
    }
    try {
        json::parse_file(path);
        FAIL() << "should throw";
    } catch (const json::parse_error& e) {
        EXPECT_EQ(e.offset(), 3u);
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    std::remove(path.c_str());
}

// Real data: the shared conformance files, when the build says where they are.
TEST(Json, ConformanceFiles) {
#ifndef AVGPOOL_CONFORMANCE_DIR
    GTEST_SKIP() << "AVGPOOL_CONFORMANCE_DIR not defined";
#else
    const std::filesystem::path dir(AVGPOOL_CONFORMANCE_DIR);
    if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " does not exist";
    for (const char* file : {"onnx_node_tests.json", "onnx_pytorch_converted.json", "openvino_tests.json"}) {
        SCOPED_TRACE(file);
        const json::value cases = json::parse_file((dir / file).string());
        ASSERT_TRUE(cases.is_array());
        ASSERT_GT(cases.size(), 0u);
        for (std::size_t k = 0; k < cases.size(); ++k) {
            const json::value& entry = cases[k];
            ASSERT_TRUE(entry.is_object()) << "entry " << k;
            const json::value* name = entry.find("name");
            ASSERT_NE(name, nullptr) << "entry " << k;
            ASSERT_TRUE(name->is_string()) << "entry " << k;
            EXPECT_FALSE(name->as_string().empty()) << "entry " << k;

            // Cross-check number reading: element count matches a fully known shape.
            const json::value* input = entry.find("input");
            const json::value* shape = entry.find("input_shape");
            if (input == nullptr || shape == nullptr || !input->is_array() || !shape->is_array()) continue;
            std::int64_t count = 1;
            bool known = true;
            for (std::int64_t dim : shape->as_int_vector()) {
                if (dim < 0) known = false;
                count *= dim;
            }
            if (known) {
                EXPECT_EQ(static_cast<std::int64_t>(input->as_double_vector().size()), count)
                    << name->as_string();
            }
        }
    }
#endif
}

}  // namespace
