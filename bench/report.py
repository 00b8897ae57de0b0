#!/usr/bin/env python3
"""Turns avgpool_bench's JSON output into the ratio table of bench/README.md.

    avgpool_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
                  --benchmark_format=json > out.json
    python3 bench/report.py out.json ../shared/bench/shapes.txt

Uses the median of the repetitions. Also prints the thread-scaling table of the threads/ rows
(time with 1 thread / time with 2, bar >= 1.6). Ratios are time(avgpool) / time(other), both measured in the
same process; memcpy copies the same input + output bytes. A shape is memory-bound when its
kernel volume is at most 9.
"""
import json
import math
import sys


def read_shapes(path):
    shapes = {}
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split()
            name, kind = fields[0], fields[2]
            k = [int(x) for x in fields[9:12]]
            shapes[name] = {"kind": kind, "kvol": k[0] * k[1] * k[2]}
    return shapes


def channels_last_table(times, shapes):
    """Channels-last rows (avgpool_cl against onednn_cl, N[D]HWC) and their bar: on every row
    time(avgpool) <= max(1.0 x oneDNN, 1.2 x memcpy of in + out), and a geometric mean of
    time(avgpool) / time(oneDNN) <= 0.7 for each divisor type."""
    rows = sorted((k for k in times if k[0] == "avgpool_cl" and k[1] in shapes), key=lambda k: (k[1], k[2]))
    if not rows:
        return
    print()
    print("Channels-last (N[D]HWC):")
    print()
    print("| shape | divisor | kernel volume | avgpool_cl us | / oneDNN cl | / memcpy | bar |")
    print("|---|---|---|---|---|---|---|")
    logs = {}
    fails = []
    fmt = lambda r: f"{r:.2f}" if r is not None else "-"
    for key in rows:
        _, shape, divisor = key
        t = times[key]
        dnnl = times.get(("onednn_cl", shape, divisor))
        mem = times.get(("memcpy", shape, "exclude"))
        r_dnnl = t / dnnl if dnnl else None
        r_mem = t / mem if mem else None
        ok = None
        if dnnl and mem:
            ok = t <= max(1.0 * dnnl, 1.2 * mem)
            logs.setdefault(divisor, []).append(math.log(r_dnnl))
            if not ok:
                fails.append(f"{shape}/{divisor}")
        status = "-" if ok is None else ("ok" if ok else "MISS")
        print(f"| {shape} | {divisor} | {shapes[shape]['kvol']} | {t / 1000:.1f} | {fmt(r_dnnl)} | "
              f"{fmt(r_mem)} | {status} |")
    print()
    for divisor, l in sorted(logs.items()):
        g = math.exp(sum(l) / len(l))
        print(f"Channels-last geometric mean of time(avgpool_cl) / time(oneDNN cl), {divisor}: {g:.3f} over "
              f"{len(l)} rows (bar <= 0.7: {'ok' if g <= 0.7 else 'MISS'})")
    n = sum(len(l) for l in logs.values())
    print(f"Channels-last rows missing the per-shape bar: {len(fails)} of {n}" +
          (": " + ", ".join(fails) if fails else ""))


def sixteen_bit_table(times):
    """16-bit storage rows (avgpool_bf16, avgpool_f16, avgpool_cl_bf16) against the float rows of
    the same shape and layout (exclude-pad, memory-bound shapes); bar bf16 <= 0.65 x f32."""
    pairs = [("avgpool_bf16", "avgpool"), ("avgpool_f16", "avgpool"), ("avgpool_cl_bf16", "avgpool_cl")]
    rows = sorted({k[1] for k in times if k[0] in dict(pairs)})
    if not rows:
        return
    print()
    print("16-bit storage against float (exclude-pad, memory-bound shapes):")
    print()
    print("| shape | f32 us | bf16 / f32 | f16 / f32 | f32 cl us | bf16 cl / f32 cl |")
    print("|---|---|---|---|---|---|")
    ratios = {}
    fmt = lambda r: f"{r:.2f}" if r is not None else "-"
    for shape in rows:
        cells = []
        for impl, base in pairs:
            t, f = times.get((impl, shape, "exclude")), times.get((base, shape, "exclude"))
            r = t / f if t and f else None
            if r is not None:
                ratios.setdefault(impl, []).append(r)
            cells.append(r)
        f32 = times.get(("avgpool", shape, "exclude"))
        f32cl = times.get(("avgpool_cl", shape, "exclude"))
        print(f"| {shape} | {f32 / 1000 if f32 else 0:.1f} | {fmt(cells[0])} | {fmt(cells[1])} | "
              f"{f32cl / 1000 if f32cl else 0:.1f} | {fmt(cells[2])} |")
    print()
    for impl, rs in sorted(ratios.items()):
        rs.sort()
        bar = f", {sum(r > 0.65 for r in rs)} of {len(rs)} above the 0.65 bar" if "bf16" in impl else ""
        print(f"{impl} / float: median {rs[len(rs) // 2]:.2f}, max {rs[-1]:.2f}{bar}")


def threads_table(data):
    """threads/<shape>/<t> rows (forward through a thread_pool of t threads, real time): the
    speedup time(t = 1) / time(t = 2) per shape, bar >= 1.6 on a 2-core machine."""
    times = {}  # (shape, threads) -> median real time in ns
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median" or not b["run_name"].startswith("threads/"):
            continue
        parts = b["run_name"].split("/")  # threads, shape, t [, real_time]
        times[(parts[1], int(parts[2]))] = b["real_time"]
    shapes = sorted({shape for shape, _ in times})
    if not shapes:
        return
    print()
    print("Threads (thread_pool, real time):")
    print()
    print("| shape | 1 thread us | 2 threads us | speedup | bar (>= 1.6) |")
    print("|---|---|---|---|---|")
    misses = 0
    for shape in shapes:
        t1, t2 = times.get((shape, 1)), times.get((shape, 2))
        if not (t1 and t2):
            continue
        speedup = t1 / t2
        misses += speedup < 1.6
        print(f"| {shape} | {t1 / 1000:.1f} | {t2 / 1000:.1f} | {speedup:.2f} | "
              f"{'ok' if speedup >= 1.6 else 'MISS'} |")
    print(f"\nThread rows missing the 1.6x bar: {misses} of {len(shapes)}")


def image_table(data):
    """image/<impl>/<name> rows (few-channel images, channels-last, outside shapes.txt): the
    channels-last time against the same pool channels-first, oneDNN nhwc and memcpy, and the
    backward pass in both layouts."""
    times = {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median" or not b["run_name"].startswith("image/"):
            continue
        _, impl, name = b["run_name"].split("/")[:3]
        times[(impl, name)] = b["real_time"]
    names = sorted({n for (_, n) in times})
    if not names:
        return
    fmt = lambda r: f"{r:.2f}" if r is not None else "-"
    print()
    print("Few-channel images, channels-last (not in shapes.txt):")
    print()
    print("| image pool | channels-last us | / channels-first | / oneDNN nhwc | / memcpy | backward cl us | "
          "/ backward cf |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        t = times.get(("cl", n))
        if not t:
            continue
        ratio = lambda impl: t / times[(impl, n)] if times.get((impl, n)) else None
        b, bcf = times.get(("backward_cl", n)), times.get(("backward_cf", n))
        print(f"| {n} | {t / 1000:.1f} | {fmt(ratio('cf'))} | {fmt(ratio('onednn_cl'))} | {fmt(ratio('memcpy'))} | "
              f"{b / 1000 if b else 0:.1f} | {fmt(b / bcf if b and bcf else None)} |")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data = json.load(open(sys.argv[1]))
    shapes = read_shapes(sys.argv[2])
    times = {}  # (impl, shape, divisor) -> median real time in ns
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median" or b["run_name"].startswith(("threads/", "image/")):
            continue
        impl, rest = b["run_name"].split("/", 1)
        shape, _, divisor = rest.rpartition("/") if "/" in rest else (rest, "", "")
        times[(impl, shape, divisor)] = b["real_time"]
    ctx = data.get("context", {})
    print(f"Machine: {ctx.get('num_cpus')} CPUs at {ctx.get('mhz_per_cpu')} MHz; "
          f"caches: " + ", ".join(f"L{c['level']} {c['size'] // 1024} KiB" for c in ctx.get("caches", [])))
    print()
    print("| shape | divisor | kernel volume | avgpool us | / oneDNN | / memcpy | bar |")
    print("|---|---|---|---|---|---|---|")
    logs, fails = [], []
    for (impl, shape, divisor), t in sorted(times.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        if impl != "avgpool" or shape not in shapes:
            continue
        info = shapes[shape]
        dnnl = times.get(("onednn", shape, divisor))
        mem = times.get(("memcpy", shape, "exclude"))
        r_dnnl = t / dnnl if dnnl else None
        r_mem = t / mem if mem else None
        ok = True
        if dnnl and mem:
            ok = t <= max(0.5 * dnnl, 1.3 * mem)
            logs.append(math.log(r_dnnl))
        if info["kvol"] <= 9 and mem:
            ok = ok and t <= 1.3 * mem
        if not ok:
            fails.append(f"{shape}/{divisor}")
        fmt = lambda r: f"{r:.2f}" if r is not None else "-"
        print(f"| {shape} | {divisor} | {info['kvol']} | {t / 1000:.1f} | {fmt(r_dnnl)} | {fmt(r_mem)} | "
              f"{'ok' if ok else 'MISS'} |")
    print()
    if logs:
        print(f"Geometric mean of time(avgpool) / time(oneDNN) over {len(logs)} rows: "
              f"{math.exp(sum(logs) / len(logs)):.3f}")
    print(f"Rows missing a bar: {len(fails)} of {len(logs)}")

    channels_last_table(times, shapes)
    sixteen_bit_table(times)
    threads_table(data)
    image_table(data)

    # Backward against forward (same shape and layout, exclude-pad), bar <= 1.5. The floors
    # (floor_fwd / floor_bwd: read the pass's source bytes, memset its destination's) show
    # which rows the cache's read and write rates bind: a row whose backward runs near its
    # floor while its forward runs near its own cannot go below floor_bwd / floor_fwd.
    for bwd_impl, fwd_impl, label in (("backward", "avgpool", "Backward"),
                                      ("backward_cl", "avgpool_cl", "Channels-last backward")):
        print()
        print(f"| shape | {label.lower()} / forward | floor bwd / floor fwd | backward / floor bwd | "
              f"forward / floor fwd |")
        print("|---|---|---|---|---|")
        ratios, bound = [], 0
        for (impl, shape, divisor), t in sorted(times.items()):
            fwd = times.get((fwd_impl, shape, divisor))
            if impl == bwd_impl and fwd:
                ratios.append(t / fwd)
                ff, fb = times.get(("floor_fwd", shape, divisor)), times.get(("floor_bwd", shape, divisor))
                cells = [f"{fb / ff:.2f}", f"{t / fb:.2f}", f"{fwd / ff:.2f}"] if ff and fb else ["-"] * 3
                if ff and fb and t / fwd > 1.5 and fb / ff > 1.5:
                    bound += 1
                print(f"| {shape} | {t / fwd:.2f} | " + " | ".join(cells) + " |")
        if ratios:
            ratios.sort()
            print(f"\n{label} / forward: median {ratios[len(ratios) // 2]:.2f}, "
                  f"{sum(r > 1.5 for r in ratios)} of {len(ratios)} rows above 1.5, {bound} of them "
                  f"with floor bwd / floor fwd above 1.5 too")

    # Adaptive against the plain pool over the same bytes, bar <= 1.5.
    print()
    print("| adaptive shape | adaptive us | plain pool us | ratio |")
    print("|---|---|---|---|")
    for (impl, shape, divisor), t in sorted(times.items()):
        plain = times.get(("adaptive_plain", shape, divisor))
        if impl == "adaptive" and plain:
            print(f"| {shape} | {t / 1000:.0f} | {plain / 1000:.0f} | {t / plain:.2f} |")

    # Kernel-size independence, bar <= 1.5.
    print()
    for divisor in ("exclude", "include"):
        k3 = times.get(("avgpool", "kernel_size_k3_c64_112x112", divisor))
        k7 = times.get(("avgpool", "kernel_size_k7_c64_112x112", divisor))
        if k3 and k7:
            print(f"Kernel-size independence ({divisor}): time(k=7) / time(k=3) = {k7 / k3:.2f}")


if __name__ == "__main__":
    main()
