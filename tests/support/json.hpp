// Minimal JSON reader for the avgpool test suite (reading conformance data).
// Test-only and dependency-free by design; not part of the public headers.
#ifndef AVGPOOL_TESTS_SUPPORT_JSON_HPP
#define AVGPOOL_TESTS_SUPPORT_JSON_HPP

#include <algorithm>
#include <cerrno>
#include <clocale>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ios>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace avgpool_test {
namespace json {

class value;
using array = std::vector<value>;
// A vector, not a map: keeps file order so failures can be reported in order.
using object = std::vector<std::pair<std::string, value>>;

// Nesting limit: the parser recurses, so hostile input must not blow the stack.
constexpr std::size_t max_depth = 512;

// Still a std::runtime_error; offset() lets tests check where an error was found.
class parse_error : public std::runtime_error {
public:
    parse_error(std::size_t offset, const std::string& what_arg)
        : std::runtime_error(what_arg), offset_(offset) {}
    std::size_t offset() const noexcept { return offset_; }

private:
    std::size_t offset_;
};

namespace detail {
class parser;
}

class value {
public:
    value() noexcept = default;  // null

    bool is_null() const noexcept { return data_.index() == 0; }
    bool is_bool() const noexcept { return data_.index() == 1; }
    bool is_number() const noexcept { return data_.index() == 2; }
    bool is_string() const noexcept { return data_.index() == 3; }
    bool is_array() const noexcept { return data_.index() == 4; }
    bool is_object() const noexcept { return data_.index() == 5; }

    // "null", "bool", "number", "string", "array" or "object", for messages.
    const char* type_name() const noexcept {
        static const char* const names[] = {"null", "bool", "number", "string", "array", "object"};
        return names[data_.index()];
    }

    // Integer means: the literal had no '.' and no exponent and fits int64
    // exactly. So 3 is an integer; 3.0 and 1e2 are not.
    bool is_integer() const noexcept {
        const number_data* n = std::get_if<number_data>(&data_);
        return n != nullptr && n->integral;
    }

    bool as_bool() const { return get<bool>("bool"); }
    double as_double() const { return get<number_data>("number").d; }
    std::int64_t as_int() const {
        const number_data& n = get<number_data>("number");
        if (!n.integral) {
            throw std::runtime_error("json: number is not an integer literal (has '.' or exponent, or exceeds int64)");
        }
        return n.i;
    }
    const std::string& as_string() const { return get<std::string>("string"); }
    const array& as_array() const { return get<array>("array"); }
    const object& as_object() const { return get<object>("object"); }

    // Element or member count; throws for scalars.
    std::size_t size() const {
        if (const array* a = std::get_if<array>(&data_)) return a->size();
        if (const object* o = std::get_if<object>(&data_)) return o->size();
        throw std::runtime_error(std::string("json: size() needs an array or object, got ") + type_name());
    }

    // Bounds-checked: a test reading past the data should fail, not crash.
    const value& operator[](std::size_t index) const {
        const array& a = as_array();
        if (index >= a.size()) {
            throw std::out_of_range("json: index " + std::to_string(index) + " out of range (size " +
                                    std::to_string(a.size()) + ")");
        }
        return a[index];
    }

    // Linear search: conformance objects have a few dozen keys at most.
    const value* find(std::string_view key) const {
        for (const auto& member : as_object()) {
            if (member.first == key) return &member.second;
        }
        return nullptr;
    }
    bool contains(std::string_view key) const { return find(key) != nullptr; }
    const value& at(std::string_view key) const {
        if (const value* v = find(key)) return *v;
        throw std::out_of_range("json: key not found: \"" + std::string(key) + "\"");
    }

    std::vector<std::int64_t> as_int_vector() const {
        const array& a = as_array();
        std::vector<std::int64_t> out;
        out.reserve(a.size());
        for (std::size_t k = 0; k < a.size(); ++k) {
            if (!a[k].is_integer()) {
                throw std::runtime_error("json: as_int_vector: element " + std::to_string(k) + " is not an integer");
            }
            out.push_back(a[k].as_int());
        }
        return out;
    }

    std::vector<double> as_double_vector() const {
        const array& a = as_array();
        std::vector<double> out;
        out.reserve(a.size());
        for (std::size_t k = 0; k < a.size(); ++k) {
            if (!a[k].is_number()) {
                throw std::runtime_error("json: as_double_vector: element " + std::to_string(k) + " is " +
                                         a[k].type_name() + ", not a number");
            }
            out.push_back(a[k].as_double());
        }
        return out;
    }

private:
    friend class detail::parser;

    struct number_data {
        double d;        // strtod of the literal text: correctly rounded
        std::int64_t i;  // exact value; meaningful only when integral
        bool integral;
    };

    // Private: values are only built by the parser. Concrete overloads, not a
    // forwarding template, so copying a non-const value still uses the copy ctor.
    explicit value(bool b) : data_(b) {}
    explicit value(number_data n) : data_(n) {}
    explicit value(std::string&& s) : data_(std::move(s)) {}
    explicit value(array&& a) : data_(std::move(a)) {}
    explicit value(object&& o) : data_(std::move(o)) {}

    template <typename T>
    const T& get(const char* wanted) const {
        if (const T* p = std::get_if<T>(&data_)) return *p;
        throw std::runtime_error(std::string("json: expected ") + wanted + ", got " + type_name());
    }

    // Alternative order is what is_*() and type_name() index by.
    std::variant<std::monostate, bool, number_data, std::string, array, object> data_;
};

// Arrays of values must grow by move, not copy, or large files parse slowly.
static_assert(std::is_nothrow_move_constructible<value>::value, "json::value must be nothrow movable");

namespace detail {

class parser {
public:
    parser(const char* begin, const char* end) : begin_(begin), p_(begin), end_(end) {}

    value parse_document() {
        skip_ws();
        value v = parse_value(0);
        skip_ws();
        if (p_ != end_) fail("unexpected data after the JSON value");
        return v;
    }

private:
    const char* begin_;
    const char* p_;
    const char* end_;

    [[noreturn]] void fail_at(const char* at, const std::string& msg) const {
        const std::size_t offset = static_cast<std::size_t>(at - begin_);
        throw parse_error(offset, "json: parse error at byte " + std::to_string(offset) + ": " + msg);
    }
    [[noreturn]] void fail(const std::string& msg) const { fail_at(p_, msg); }

    static bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

    void skip_ws() noexcept {
        while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
    }

    value parse_value(std::size_t depth) {
        if (p_ == end_) fail("unexpected end of input, expected a value");
        switch (*p_) {
            case '{': return parse_object(depth + 1);
            case '[': return parse_array(depth + 1);
            case '"': {
                std::string s;
                parse_string(s);
                return value(std::move(s));
            }
            case 't': expect_literal("true", 4); return value(true);
            case 'f': expect_literal("false", 5); return value(false);
            case 'n': expect_literal("null", 4); return value();
            default:
                if (*p_ == '-' || is_digit(*p_)) return parse_number();
                fail("expected a value");
        }
    }

    void expect_literal(const char* lit, std::size_t n) {
        if (static_cast<std::size_t>(end_ - p_) < n || std::memcmp(p_, lit, n) != 0) fail("invalid literal");
        p_ += n;
    }

    value parse_array(std::size_t depth) {
        if (depth > max_depth) fail("nesting deeper than " + std::to_string(max_depth));
        ++p_;  // '['
        array items;
        skip_ws();
        if (p_ != end_ && *p_ == ']') {
            ++p_;
            return value(std::move(items));
        }
        for (;;) {
            skip_ws();
            items.push_back(parse_value(depth));
            skip_ws();
            if (p_ == end_) fail("unterminated array");
            if (*p_ == ']') {
                ++p_;
                return value(std::move(items));
            }
            if (*p_ != ',') fail("expected ',' or ']' in array");
            ++p_;
        }
    }

    value parse_object(std::size_t depth) {
        if (depth > max_depth) fail("nesting deeper than " + std::to_string(max_depth));
        const char* start = p_;
        ++p_;  // '{'
        object members;
        skip_ws();
        if (p_ != end_ && *p_ == '}') {
            ++p_;
            return value(std::move(members));
        }
        for (;;) {
            skip_ws();
            if (p_ == end_ || *p_ != '"') fail("expected a string key in object");
            std::string key;
            parse_string(key);
            skip_ws();
            if (p_ == end_ || *p_ != ':') fail("expected ':' after object key");
            ++p_;
            skip_ws();
            value v = parse_value(depth);
            members.emplace_back(std::move(key), std::move(v));
            skip_ws();
            if (p_ == end_) fail("unterminated object");
            if (*p_ == '}') {
                ++p_;
                break;
            }
            if (*p_ != ',') fail("expected ',' or '}' in object");
            ++p_;
        }
        reject_duplicate_keys(members, start);
        return value(std::move(members));
    }

    // RFC 8259 leaves duplicate keys undefined; for test data they mean a
    // generator bug, and find() would silently pick one. Sorting keeps it
    // O(n log n) on hostile input.
    void reject_duplicate_keys(const object& members, const char* start) const {
        if (members.size() < 2) return;
        std::vector<const std::string*> keys;
        keys.reserve(members.size());
        for (const auto& m : members) keys.push_back(&m.first);
        std::sort(keys.begin(), keys.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
        for (std::size_t k = 1; k < keys.size(); ++k) {
            if (*keys[k] == *keys[k - 1]) fail_at(start, "duplicate key \"" + *keys[k] + "\" in object");
        }
    }

    void parse_string(std::string& out) {
        const char* start = p_;
        ++p_;  // opening quote
        for (;;) {
            // Append plain runs in one go rather than char by char.
            const char* run = p_;
            while (p_ != end_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20) ++p_;
            out.append(run, p_);
            if (p_ == end_) fail_at(start, "unterminated string");
            if (*p_ == '"') {
                ++p_;
                return;
            }
            if (*p_ == '\\') {
                parse_escape(out);
            } else {
                fail("unescaped control character in string");
            }
        }
    }

    void parse_escape(std::string& out) {
        const char* esc = p_;
        ++p_;  // backslash
        if (p_ == end_) fail_at(esc, "unterminated escape sequence");
        const char c = *p_++;
        switch (c) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                std::uint32_t cp = parse_hex4(esc);
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    // UTF-16 pair: the low half must follow immediately.
                    if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
                        fail_at(esc, "high surrogate not followed by a \\u low surrogate");
                    }
                    p_ += 2;
                    const std::uint32_t lo = parse_hex4(esc);
                    if (lo < 0xDC00 || lo > 0xDFFF) fail_at(esc, "high surrogate followed by a non-low surrogate");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    fail_at(esc, "unpaired low surrogate");
                }
                append_utf8(out, cp);
                break;
            }
            default: fail_at(esc, "invalid escape sequence");
        }
    }

    std::uint32_t parse_hex4(const char* esc) {
        if (end_ - p_ < 4) fail_at(esc, "truncated \\u escape");
        std::uint32_t cp = 0;
        for (int k = 0; k < 4; ++k) {
            const char h = *p_++;
            std::uint32_t digit;
            if (h >= '0' && h <= '9') {
                digit = static_cast<std::uint32_t>(h - '0');
            } else if (h >= 'a' && h <= 'f') {
                digit = static_cast<std::uint32_t>(h - 'a' + 10);
            } else if (h >= 'A' && h <= 'F') {
                digit = static_cast<std::uint32_t>(h - 'A' + 10);
            } else {
                fail_at(esc, "invalid hex digit in \\u escape");
            }
            cp = (cp << 4) | digit;
        }
        return cp;
    }

    static void append_utf8(std::string& out, std::uint32_t cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    value parse_number() {
        const char* start = p_;
        const bool negative = (*p_ == '-');
        if (negative) ++p_;
        // Validate the JSON grammar ourselves: strtod alone would also accept
        // hex, "inf", leading '+', "01" and so on.
        if (p_ == end_ || !is_digit(*p_)) fail_at(start, "invalid number");
        const char* digits = p_;
        if (*p_ == '0') {
            ++p_;
        } else {
            while (p_ != end_ && is_digit(*p_)) ++p_;
        }
        const char* digits_end = p_;
        bool integral = true;
        if (p_ != end_ && *p_ == '.') {
            integral = false;
            ++p_;
            if (p_ == end_ || !is_digit(*p_)) fail("expected a digit after the decimal point");
            while (p_ != end_ && is_digit(*p_)) ++p_;
        }
        if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
            integral = false;
            ++p_;
            if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
            if (p_ == end_ || !is_digit(*p_)) fail("expected a digit in the exponent");
            while (p_ != end_ && is_digit(*p_)) ++p_;
        }

        value::number_data n{to_double(start, p_), 0, false};
        if (integral) {
            // Exact int64 from the digits; too-large literals stay double-only.
            const std::uint64_t limit = negative ? (std::uint64_t{1} << 63) : (std::uint64_t{1} << 63) - 1;
            std::uint64_t acc = 0;
            bool fits = true;
            for (const char* d = digits; d != digits_end; ++d) {
                const auto digit = static_cast<std::uint64_t>(*d - '0');
                if (acc > (limit - digit) / 10) {
                    fits = false;
                    break;
                }
                acc = acc * 10 + digit;
            }
            if (fits) {
                n.integral = true;
                if (!negative) {
                    n.i = static_cast<std::int64_t>(acc);
                } else if (acc == (std::uint64_t{1} << 63)) {
                    n.i = INT64_MIN;
                } else {
                    n.i = -static_cast<std::int64_t>(acc);
                }
            }
        }
        return value(n);
    }

    // strtod on the exact literal text, so doubles round-trip bit for bit.
    // The literal is copied out because strtod needs a terminator and must not
    // read past the JSON token (e.g. the "x10" of "0x10").
    double to_double(const char* first, const char* last) const {
        const auto len = static_cast<std::size_t>(last - first);
        char small[64];
        std::string large;
        char* buf = small;
        if (len < sizeof small) {
            std::memcpy(small, first, len);
            small[len] = '\0';
        } else {
            large.assign(first, last);
            buf = &large[0];
        }
        errno = 0;
        char* endp = nullptr;
        double d = std::strtod(buf, &endp);
        if (endp != buf + len) {
            // strtod follows LC_NUMERIC; if a test changed the locale, use its decimal point.
            const char* dp = std::localeconv()->decimal_point;
            if (dp != nullptr && dp[0] != '\0' && dp[0] != '.' && dp[1] == '\0') {
                std::replace(buf, buf + len, '.', dp[0]);
                errno = 0;
                d = std::strtod(buf, &endp);
            }
            if (endp != buf + len) fail_at(first, "number could not be converted");
        }
        // Overflow would silently become inf; underflow to 0/subnormal is fine.
        if (errno == ERANGE && std::isinf(d)) fail_at(first, "number out of double range");
        return d;
    }
};

}  // namespace detail

inline value parse(const std::string& text) {
    return detail::parser(text.data(), text.data() + text.size()).parse_document();
}

inline value parse_file(const std::string& path) {
    std::error_code ec;
    // A directory opens fine as an ifstream on Linux and then just reads as empty.
    if (std::filesystem::is_directory(path, ec)) throw std::runtime_error("json: cannot read file (a directory): " + path);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("json: cannot open file: " + path);
    std::string text;
    const std::uintmax_t size_hint = std::filesystem::file_size(path, ec);
    if (!ec) text.reserve(static_cast<std::size_t>(size_hint));
    // Read in chunks rather than trusting the size: pipes and /proc files report none.
    char chunk[1 << 14];
    while (in.read(chunk, sizeof chunk), in.gcount() > 0) text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (in.bad()) throw std::runtime_error("json: error reading file: " + path);
    try {
        return parse(text);
    } catch (const parse_error& e) {
        throw parse_error(e.offset(), path + ": " + e.what());
    }
}

}  // namespace json
}  // namespace avgpool_test

#endif  // AVGPOOL_TESTS_SUPPORT_JSON_HPP
