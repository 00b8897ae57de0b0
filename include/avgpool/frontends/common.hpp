// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// What the framework front ends share: reading attribute strings, checking list lengths and
// ranges in the framework's own attribute names, and turning runtime-rank attributes into
// fixed-rank ones. Everything here is internal (avgpool::detail::frontend).
#ifndef AVGPOOL_FRONTENDS_COMMON_HPP
#define AVGPOOL_FRONTENDS_COMMON_HPP

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "../dynamic.hpp"
#include "../error.hpp"
#include "../shape.hpp"
#include "../types.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {
namespace frontend {

using list = std::vector<index_t>;

inline bool failed(const error_info& e) noexcept { return e.code != errc::ok; }

inline bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline std::string_view trim(std::string_view s) noexcept {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

inline char to_lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline bool iequals(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (to_lower(a[i]) != to_lower(b[i])) return false;
    return true;
}

/// An error quoting `s` through the reason's {t}.
inline error_info error_text(errc code, const char* attribute, int axis, const char* reason,
                             std::string_view s) noexcept {
    return make_error_text(code, attribute, axis, reason, s.data(), s.data() + s.size());
}

/// `e` with `s` attached as its quoted text (for errors that also carry a value).
inline error_info with_text(error_info e, std::string_view s) noexcept {
    const error_info t = error_text(e.code, e.attribute, e.axis, e.reason, s);
    e.text = t.text;
    return e;
}

/// One decimal integer with an optional sign, nothing else: "12", "-3", "+4".
inline error_info parse_int(std::string_view item, const char* attribute, int axis,
                            index_t& value) noexcept {
    std::size_t i = 0;
    const bool negative = !item.empty() && item[0] == '-';
    if (!item.empty() && (item[0] == '-' || item[0] == '+')) i = 1;
    if (i == item.size())
        return error_text(errc::parse_error, attribute, axis, "not an integer: \"{t}\"", item);
    // Accumulate the magnitude unsigned, so that the check needs no signed overflow.
    const std::uint64_t limit = negative ? std::uint64_t{1} << 63 : (std::uint64_t{1} << 63) - 1;
    std::uint64_t magnitude = 0;
    for (; i < item.size(); ++i) {
        const char c = item[i];
        if (c < '0' || c > '9')
            return error_text(errc::parse_error, attribute, axis, "not an integer: \"{t}\"", item);
        const auto digit = static_cast<std::uint64_t>(c - '0');
        if (magnitude > (limit - digit) / 10)
            return error_text(errc::overflow, attribute, axis, "\"{t}\" does not fit in int64", item);
        magnitude = magnitude * 10 + digit;
    }
    if (!negative) value = static_cast<index_t>(magnitude);
    else if (magnitude == limit) value = std::numeric_limits<index_t>::min();
    else value = -static_cast<index_t>(magnitude);
    return error_info{};
}

/// Reads a comma-separated integer list ("2,2", " 1, 2 "). A blank string is an empty list;
/// an empty entry ("1,,2", "1,") is an error.
inline error_info parse_int_list(std::string_view text, const char* attribute, list& out) {
    out.clear();
    if (trim(text).empty()) return error_info{};
    int axis = 0;
    for (std::size_t pos = 0;; ++axis) {
        const std::size_t comma = text.find(',', pos);
        const std::string_view item =
            trim(text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
        if (item.empty())
            return error_text(errc::parse_error, attribute, axis, "empty entry in \"{t}\"", text);
        index_t v = 0;
        const error_info e = parse_int(item, attribute, axis, v);
        if (failed(e)) return e;
        out.push_back(v);
        if (comma == std::string_view::npos) return error_info{};
        pos = comma + 1;
    }
}

/// "true" / "false" (any case) or "1" / "0".
inline error_info parse_bool(std::string_view text, const char* attribute, bool& out) noexcept {
    const std::string_view t = trim(text);
    if (iequals(t, "true") || t == "1") out = true;
    else if (iequals(t, "false") || t == "0") out = false;
    else return error_text(errc::parse_error, attribute, -1, "not a boolean: \"{t}\" (expected true or false)", text);
    return error_info{};
}

/// The number of spatial axes: `wanted` when it is fixed (R), else the kernel's entry count.
inline error_info resolve_rank(const char* kernel_name, std::size_t kernel_entries,
                               std::size_t wanted, std::size_t& rank) noexcept {
    if (wanted == 0 && kernel_entries == 0)
        return make_error_novalue(errc::rank_mismatch, kernel_name, -1,
                                  "0 given; expected at least 1, one per spatial axis");
    if (wanted != 0 && kernel_entries != wanted)
        return list_length_error(kernel_name, kernel_entries, wanted);
    rank = wanted != 0 ? wanted : kernel_entries;
    return error_info{};
}

inline error_info check_length(const list& v, const char* attribute, std::size_t rank) noexcept {
    return v.size() == rank ? error_info{} : list_length_error(attribute, v.size(), rank);
}

/// The first entry below `min`, reported as "attribute[i] = v: must be >= min".
inline error_info check_at_least(const list& v, const char* attribute, index_t min) noexcept {
    for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] < min)
            return make_error(errc::invalid_value, attribute, static_cast<int>(i), v[i], "must be >= {0}", min);
    return error_info{};
}

/// (k - 1) * d + 1, or false when it overflows (k, d >= 1).
inline bool dilated_extent(index_t k, index_t d, index_t& ke) noexcept {
    return checked_mul(k - 1, d, ke) && checked_add(ke, 1, ke);
}

/// Fixed-rank attributes from the runtime-rank translation (whose lists already have R entries).
template <std::size_t R>
result<pool_attrs<R>> to_fixed(const result<pool_attrs_dynamic>& r) {
    if (!r) return r.error_data();
    return to_static<R>(*r);
}

/// A {N, C, spatial...} shape with fewer than 3 entries (worded as the core's
/// infer_output_shape words it).
inline error_info input_rank_error(std::size_t size) noexcept {
    return make_error_novalue(errc::rank_mismatch, "input_shape", -1, "rank {0}; expected {N, C, spatial...}, rank >= 3",
                              static_cast<index_t>(size));
}

/// The spatial extents of a {N, C, spatial...} shape, each checked >= 1.
inline error_info check_spatial(const index_t* shape, std::size_t rank) noexcept {
    for (std::size_t i = 2; i < rank + 2; ++i)
        if (shape[i] < 1)
            return make_error(errc::invalid_value, "input_shape", static_cast<int>(i), shape[i],
                              "spatial extent must be >= 1");
    return error_info{};
}

}  // namespace frontend
}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_FRONTENDS_COMMON_HPP
