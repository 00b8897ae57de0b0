// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// Errors come back as values (result<T>, status); the one-call functions also throw
// avgpool::error when exceptions are available. The value form is a literal type so that
// shape inference stays constexpr.
#ifndef AVGPOOL_ERROR_HPP
#define AVGPOOL_ERROR_HPP

#include <array>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "config.hpp"
#include "types.hpp"

AVGPOOL_BEGIN_NAMESPACE

/// What kind of mistake an error reports.
enum class errc {
    ok = 0,
    invalid_value,     ///< an attribute or extent outside its allowed range (kernel 0, pad -1, ...)
    kernel_too_large,  ///< the dilated kernel fits in no window of the padded input
    overflow,          ///< a size or product of sizes does not fit in index_t
    null_pointer,      ///< a required pointer is null
    rank_mismatch,     ///< a list has the wrong number of entries for the tensor's rank
    invalid_enum,      ///< an enum holds a value that is not one of its enumerators
    parse_error,       ///< a framework attribute string could not be read
    unsupported        ///< valid input that the requested framework version rejects
};

/// Printable name of an errc ("invalid_value", ...).
constexpr const char* to_string(errc c) noexcept {
    switch (c) {
        case errc::ok: return "ok";
        case errc::invalid_value: return "invalid_value";
        case errc::kernel_too_large: return "kernel_too_large";
        case errc::overflow: return "overflow";
        case errc::null_pointer: return "null_pointer";
        case errc::rank_mismatch: return "rank_mismatch";
        case errc::invalid_enum: return "invalid_enum";
        case errc::parse_error: return "parse_error";
        case errc::unsupported: return "unsupported";
    }
    return "unknown";
}

/// The facts of an error, as a literal type (usable in constexpr code).
/// `reason` may hold the placeholders {0} and {1} (replaced by arg0 / arg1) and {t}
/// (replaced by `text`, a short copy of the offending string for parse errors).
struct error_info {
    errc code = errc::ok;
    const char* attribute = "";  ///< the attribute at fault: "kernel", "pads_begin", "input_shape"
    int axis = -1;               ///< index into that attribute, or -1 when it is not per axis
    index_t value = 0;           ///< the offending value
    bool has_value = false;      ///< false when there is no number to show (null pointer, parse)
    const char* reason = "";     ///< why it is wrong: "must be >= 1"
    index_t arg0 = 0, arg1 = 0;  ///< numbers the reason refers to
    std::array<char, 40> text{};  ///< short string quoted by the reason, NUL-terminated

    /// "pads_begin[1] = -1: must be >= 0"
    std::string message() const {
        std::string m = attribute;
        if (axis >= 0) m += "[" + std::to_string(axis) + "]";
        if (has_value) m += " = " + std::to_string(value);
        m += ": ";
        for (const char* p = reason; *p != '\0'; ++p) {
            if (p[0] == '{' && p[1] != '\0' && p[2] == '}') {
                if (p[1] == '0') { m += std::to_string(arg0); p += 2; continue; }
                if (p[1] == '1') { m += std::to_string(arg1); p += 2; continue; }
                if (p[1] == 't') { m += text.data(); p += 2; continue; }
            }
            m += *p;
        }
        return m;
    }
};

namespace detail {
// Builders keep call sites short and every error message in one shape.
constexpr error_info make_error(errc code, const char* attribute, int axis, index_t value,
                                const char* reason, index_t arg0 = 0, index_t arg1 = 0) noexcept {
    error_info e{};
    e.code = code;
    e.attribute = attribute;
    e.axis = axis;
    e.value = value;
    e.has_value = true;
    e.reason = reason;
    e.arg0 = arg0;
    e.arg1 = arg1;
    return e;
}

constexpr error_info make_error_novalue(errc code, const char* attribute, int axis,
                                        const char* reason, index_t arg0 = 0,
                                        index_t arg1 = 0) noexcept {
    error_info e = make_error(code, attribute, axis, 0, reason, arg0, arg1);
    e.has_value = false;
    return e;
}

inline error_info make_error_text(errc code, const char* attribute, int axis, const char* reason,
                                  const char* first, const char* last) noexcept {
    error_info e = make_error_novalue(code, attribute, axis, reason);
    std::size_t n = 0;
    // Keep a prefix of the offending text; "..." marks a cut.
    for (const char* p = first; p != last && n + 1 < e.text.size(); ++p) e.text[n++] = *p;
    if (first + n != last && n >= 3) e.text[n - 1] = e.text[n - 2] = e.text[n - 3] = '.';
    e.text[n] = '\0';
    return e;
}
}  // namespace detail

/// The exception thrown by the one-call functions (and by result::value() on an error) when
/// exceptions are on. what() is the same text as message().
///
///     try { avgpool::avg_pool<float, 2>(in, shape, attrs, out); }
///     catch (const avgpool::error& e) { std::puts(e.what()); }  // "kernel[0] = 0: must be >= 1"
class error : public std::invalid_argument {
public:
    explicit error(const error_info& info) : std::invalid_argument(info.message()), info_(info) {}
    errc code() const noexcept { return info_.code; }
    const char* attribute() const noexcept { return info_.attribute; }
    int axis() const noexcept { return info_.axis; }
    index_t value() const noexcept { return info_.value; }
    std::string message() const { return what(); }
    const error_info& info() const noexcept { return info_; }

private:
    error_info info_;
};

namespace detail {
[[noreturn]] inline void raise(const error_info& e) {
#if AVGPOOL_HAS_EXCEPTIONS
    throw avgpool::error(e);
#else
    (void)e;
    std::abort();  // value() of a failed result with exceptions off: a caller bug
#endif
}
}  // namespace detail

/// A value or the error that prevented it.
///
///     auto plan = avgpool::pooling<2>::create({1, 3, 32, 32}, attrs);
///     if (!plan) { std::puts(plan.error().message().c_str()); return; }
///     plan->forward(in, out);
template <class T>
class result {
public:
    constexpr result(const T& v) : value_(v) {}  // NOLINT: implicit by design, like expected
    constexpr result(T&& v) : value_(std::move(v)) {}  // NOLINT
    constexpr result(const error_info& e) : error_(e) {}  // NOLINT

    constexpr bool ok() const noexcept { return value_.has_value(); }
    constexpr explicit operator bool() const noexcept { return ok(); }

    /// The value; with exceptions on, throws avgpool::error if there is none (else aborts).
    constexpr T& value() & {
        if (!ok()) detail::raise(error_);
        return *value_;
    }
    constexpr const T& value() const& {
        if (!ok()) detail::raise(error_);
        return *value_;
    }
    constexpr T&& value() && {
        if (!ok()) detail::raise(error_);
        return std::move(*value_);
    }
    constexpr T* operator->() { return &value(); }
    constexpr const T* operator->() const { return &value(); }
    constexpr T& operator*() & { return value(); }
    constexpr const T& operator*() const& { return value(); }
    constexpr T&& operator*() && { return std::move(*this).value(); }

    /// The error as an object with message(); code errc::ok when there is a value.
    avgpool::error error() const { return avgpool::error(error_); }
    /// The error facts without building a message (constexpr).
    constexpr const error_info& error_data() const noexcept { return error_; }
    constexpr errc error_code() const noexcept { return error_.code; }

private:
    std::optional<T> value_;
    error_info error_{};
};

/// Success or an error, for operations that produce no value.
template <>
class result<void> {
public:
    constexpr result() = default;
    constexpr result(const error_info& e) : error_(e) {}  // NOLINT

    constexpr bool ok() const noexcept { return error_.code == errc::ok; }
    constexpr explicit operator bool() const noexcept { return ok(); }
    avgpool::error error() const { return avgpool::error(error_); }
    constexpr const error_info& error_data() const noexcept { return error_; }
    constexpr errc error_code() const noexcept { return error_.code; }

private:
    error_info error_{};
};

/// The result of an operation that writes into caller memory.
using status = result<void>;

AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_ERROR_HPP
