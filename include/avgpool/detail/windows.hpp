// avgpool: header-only N-D average pooling.
// SPDX-License-Identifier: MIT
//
// Per-axis window tables. Every pooling mode is separable: the taps of an output are a
// product of per-axis tap sets and every divisor is a product of per-axis counts (or a
// constant), so one table entry per axis and output index describes everything.
#ifndef AVGPOOL_DETAIL_WINDOWS_HPP
#define AVGPOOL_DETAIL_WINDOWS_HPP

#include <cstddef>

#include "../shape.hpp"
#include "../types.hpp"

AVGPOOL_BEGIN_NAMESPACE
namespace detail {

/// The valid taps of one output index on one axis are first + i * dilation, i < count.
/// `divisor` is this axis's factor of the window divisor (0: the window counts no tap).
struct window {
    index_t first = 0;
    index_t count = 0;
    index_t divisor = 0;
};

/// Window `o` of an axis with resolved pads. `div` must be exclude_pad, include_pad or
/// full_kernel (full_kernel_if_padded is resolved per plan before this).
constexpr window axis_window(index_t o, index_t X, index_t k, index_t s, index_t d, index_t pb,
                             index_t pe, divisor_type div) noexcept {
    const index_t start = o * s - pb;  // fits: o * s <= X + pb + pe, checked at inference
    // Taps start + j * d, j in [0, k). Those inside [0, X):
    const index_t j_lo = start >= 0 ? 0 : ceil_div(-start, d);
    index_t j_hi = X - 1 - start < 0 ? 0 : floor_div(X - 1 - start, d) + 1;
    if (j_hi > k) j_hi = k;
    window w{};
    w.count = j_hi > j_lo ? j_hi - j_lo : 0;
    w.first = w.count > 0 ? start + j_lo * d : 0;
    switch (div) {
        case divisor_type::exclude_pad: w.divisor = w.count; break;
        case divisor_type::include_pad: {
            // Taps inside [-pb, X + pe): the padding counts, a ceil overhang past it does not.
            // start >= -pb always, so only the upper end clips.
            const index_t last = X + pe - 1 - start;
            index_t n = last < 0 ? 0 : floor_div(last, d) + 1;
            w.divisor = n > k ? k : n;
            break;
        }
        default: w.divisor = k; break;
    }
    return w;
}

/// floor(a * b / c) and whether it was exact, for 0 <= a, b and c > 0, exact even when a * b
/// does not fit in 64 bits (adaptive windows on huge extents). The quotient must fit in index_t,
/// which holds for adaptive windows (it is at most the extent).
struct quotient {
    index_t value;
    bool exact;
};

// 64 x 64 -> 128 bits by 32-bit halves, then restoring division bit by bit: the path for
// compilers without __int128 (kept callable everywhere so the tests cover it).
constexpr quotient mul_div_portable(index_t a, index_t b, index_t c) noexcept {
    using u64 = unsigned long long;
    const u64 x = static_cast<u64>(a), y = static_cast<u64>(b), d = static_cast<u64>(c);
    const u64 xl = x & 0xffffffffu, xh = x >> 32, yl = y & 0xffffffffu, yh = y >> 32;
    const u64 ll = xl * yl, lh = xl * yh, hl = xh * yl, hh = xh * yh;
    const u64 mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
    const u64 hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
    const u64 lo = (mid << 32) | (ll & 0xffffffffu);
    u64 q = 0, r = 0;
    for (int i = 127; i >= 0; --i) {
        const u64 bit = i >= 64 ? (hi >> (i - 64)) & 1u : (lo >> i) & 1u;
        const bool carry = (r >> 63) != 0;
        r = (r << 1) | bit;
        q <<= 1;  // quotient bits above 63 are zero by the precondition
        if (carry || r >= d) {
            r -= d;
            q |= 1u;
        }
    }
    return {static_cast<index_t>(q), r == 0};
}

constexpr quotient mul_div(index_t a, index_t b, index_t c) noexcept {
#if defined(__SIZEOF_INT128__)
    __extension__ using wide = unsigned __int128;  // __extension__: no -Wpedantic noise
    const wide m = static_cast<wide>(a) * static_cast<wide>(b);
    return {static_cast<index_t>(m / static_cast<wide>(c)), m % static_cast<wide>(c) == 0};
#else
    return mul_div_portable(a, b, c);
#endif
}

/// Adaptive window o of an axis of extent X split into O outputs: [floor(o * X / O),
/// ceil((o + 1) * X / O)), divisor = its length (OpenVINO AdaptiveAvgPool-8, PyTorch).
constexpr window adaptive_window(index_t o, index_t X, index_t O) noexcept {
    const index_t first = mul_div(o, X, O).value;
    const quotient end = mul_div(o + 1, X, O);
    window w{};
    w.first = first;
    w.count = end.value + (end.exact ? 0 : 1) - first;
    w.divisor = w.count;
    return w;
}

/// full_kernel_if_padded becomes full_kernel or exclude_pad once the pads are known.
template <std::size_t R>
constexpr divisor_type resolve_divisor(divisor_type div, const pool_geometry<R>& g) noexcept {
    if (div != divisor_type::full_kernel_if_padded) return div;
    for (std::size_t a = 0; a < R; ++a)
        if (g.pads_begin[a] != 0 || g.pads_end[a] != 0) return divisor_type::full_kernel;
    return divisor_type::exclude_pad;
}

}  // namespace detail
AVGPOOL_END_NAMESPACE

#endif  // AVGPOOL_DETAIL_WINDOWS_HPP
