#!/usr/bin/env python3
"""Saved-activation bytes against validation bits per byte, one point per variant, as SVG.

    tools/plot_frontier.py FRONTIER_CSV OUT_SVG [--shape moe8] [--title TEXT]

FRONTIER_CSV is what tools/gpu/kitten_memory_bench.sh writes (shape, variant, val_bpb,
saved_bytes, step_ms; step_ms may be empty for runs that shared a GPU). x: saved bytes as a share of the `exact` row's; y: validation bits per
byte. The `exact` and `exact_seed2` rows span a grey band: the seed-to-seed spread, the scale
at which differences in y mean something. A run that ends more than 10 % above exact (it
diverged) is drawn as a triangle on the top edge with its value, so it does not squeeze the
rest. Plain SVG, no plotting library needed.

With --seeds, the runs of one setting over several seeds (NAME, NAME_seed2, NAME_seed3, …)
are one point at their mean with a bar of ±1 standard error, each seed a small grey dot; the
grey band is exact's mean ± its standard error, and a dashed line marks exact's mean + 0.2 %
(the quality the kittens are meant to keep).
"""
import argparse
import csv
import html
import math
import sys


def read_points(path, shape):
    rows = [r for r in csv.DictReader(open(path)) if r["shape"] == shape]
    points = []
    for r in rows:
        try:
            bpb, saved = float(r["val_bpb"]), float(r["saved_bytes"])
            ms = float(r["step_ms"]) if r.get("step_ms") else math.nan
        except ValueError:
            continue
        if math.isfinite(bpb) and math.isfinite(saved):
            points.append({"variant": r["variant"], "bpb": bpb, "saved": saved, "ms": ms})
    return points


def mean_finite(values):
    """Mean of the finite values; nan when there are none (step times of shared-GPU runs)."""
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


def step_text(ms):
    return f", {ms:.0f} ms/step" if math.isfinite(ms) else ""


def seed_groups(points):
    """NAME and NAME_seedN as one point: means of bpb, saved and ms; n, standard error, seeds."""
    groups = {}
    for p in points:
        groups.setdefault(p["variant"].partition("_seed")[0], []).append(p)
    out = []
    for name, g in groups.items():
        n = len(g)
        mean = sum(p["bpb"] for p in g) / n
        se = math.sqrt(sum((p["bpb"] - mean) ** 2 for p in g) / (n - 1) / n) if n > 1 else 0.0
        out.append({"variant": name, "bpb": mean, "se": se, "n": n, "seeds": [p["bpb"] for p in g],
                    "saved": sum(p["saved"] for p in g) / n, "ms": mean_finite(p["ms"] for p in g)})
    return out


def nice_ticks(lo, hi, count=5):
    span = hi - lo
    step = 10 ** math.floor(math.log10(span / count))
    for m in (1, 2, 2.5, 5, 10):
        if span / (step * m) <= count:
            step *= m
            break
    first = math.ceil(lo / step) * step
    ticks, t = [], first
    while t <= hi + 1e-12:
        ticks.append(round(t, 10))
        t += step
    return ticks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("svg")
    ap.add_argument("--shape", default="moe8")
    ap.add_argument("--title", default="")
    ap.add_argument("--seeds", action="store_true", help="one point per setting over its seeds")
    a = ap.parse_args()
    points = read_points(a.csv, a.shape)
    if a.seeds:
        points = seed_groups(points)
    exact = next((p for p in points if p["variant"] == "exact"), None)
    if not exact:
        sys.exit(f"{a.csv}: no finite `exact` row for shape {a.shape}")
    for p in points:
        p["x"] = p["saved"] / exact["saved"]
    W, H, L, R, T, B = 640, 400, 70, 20, 40, 55
    for p in points:
        p["off"] = p["bpb"] > 1.1 * exact["bpb"]
    xs = [p["x"] for p in points]
    ys = [y for p in points if not p["off"] for y in [p["bpb"]] + p.get("seeds", [])]
    if a.seeds:
        ys.append(exact["bpb"] * 1.002)
    x_lo, x_hi = 0.0, max(1.05, max(xs) * 1.05)
    pad = max(1e-3, (max(ys) - min(ys)) * 0.25)
    y_lo, y_hi = min(ys) - pad, max(ys) + pad
    sx = lambda x: L + (x - x_lo) / (x_hi - x_lo) * (W - L - R)
    sy = lambda y: H - B - (y - y_lo) / (y_hi - y_lo) * (H - T - B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    seed2 = next((p for p in points if p["variant"] == "exact_seed2"), None)
    if a.seeds:
        lo, hi = exact["bpb"] - exact["se"], exact["bpb"] + exact["se"]
        out.append(f'<rect x="{L}" y="{sy(hi):.1f}" width="{W - L - R}" height="{max(1.0, sy(lo) - sy(hi)):.1f}" '
                   f'fill="#ddd"><title>exact: mean ± standard error over {exact["n"]} seeds</title></rect>')
        goal = sy(exact["bpb"] * 1.002)
        out.append(f'<line x1="{L}" y1="{goal:.1f}" x2="{W - R}" y2="{goal:.1f}" stroke="#888" stroke-dasharray="5,4"/>')
        # At the left edge: the points sit at shares of 0.13 and more, exact's at the right.
        out.append(f'<text x="{L + 6}" y="{goal - 5:.1f}" fill="#666">exact + 0.2 %</text>')
    elif seed2:
        lo, hi = sorted([exact["bpb"], seed2["bpb"]])
        out.append(f'<rect x="{L}" y="{sy(hi):.1f}" width="{W - L - R}" height="{max(1.0, sy(lo) - sy(hi)):.1f}" '
                   f'fill="#ddd"><title>seed-to-seed spread of exact</title></rect>')
    for t in nice_ticks(x_lo, x_hi):
        out.append(f'<line x1="{sx(t):.1f}" y1="{H - B}" x2="{sx(t):.1f}" y2="{H - B + 5}" stroke="black"/>')
        out.append(f'<text x="{sx(t):.1f}" y="{H - B + 18}" text-anchor="middle">{t:g}</text>')
    for t in nice_ticks(y_lo, y_hi):
        out.append(f'<line x1="{L - 5}" y1="{sy(t):.1f}" x2="{L}" y2="{sy(t):.1f}" stroke="black"/>')
        out.append(f'<text x="{L - 8}" y="{sy(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    out.append(f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>')
    out.append(f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">saved activations, share of exact '
               f'(peak, allocator bytes)</text>')
    out.append(f'<text transform="translate(16 {(T + H - B) / 2}) rotate(-90)" text-anchor="middle">'
               f'validation bits per byte</text>')
    if a.title:
        out.append(f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{html.escape(a.title)}</text>')
    diverged = 0  # their labels go one per line, so that close points stay readable
    for p in points:
        x = sx(p["x"])
        label = html.escape(f'{p["variant"]} ({p["x"]:.2f}, {p["bpb"]:.4f}{step_text(p["ms"])})')
        if p["off"]:
            y = T + 4
            out.append(f'<path d="M{x - 5:.1f},{y + 5:.1f} L{x + 5:.1f},{y + 5:.1f} L{x:.1f},{y - 4:.1f} Z" '
                       f'fill="#b22"><title>{label}</title></path>')
            out.append(f'<text x="{x + 8:.1f}" y="{y + 5 + 14 * diverged:.1f}">{html.escape(p["variant"])}: '
                       f'diverged, {p["bpb"]:.2f}</text>')
            diverged += 1
            continue
        y = sy(p["bpb"])
        for b in p.get("seeds", []):
            out.append(f'<circle cx="{x:.1f}" cy="{sy(b):.1f}" r="2" fill="#aaa"/>')
        if p.get("n", 1) > 1:
            top, bottom = sy(p["bpb"] + p["se"]), sy(p["bpb"] - p["se"])
            out.append(f'<path d="M{x:.1f},{top:.1f} V{bottom:.1f} M{x - 4:.1f},{top:.1f} H{x + 4:.1f} '
                       f'M{x - 4:.1f},{bottom:.1f} H{x + 4:.1f}" stroke="#1f5fa8" fill="none"/>')
            label = html.escape(f'{p["variant"]} ({p["x"]:.2f}, mean {p["bpb"]:.4f} ± {p["se"]:.4f} over '
                                f'{p["n"]} seeds{step_text(p["ms"])})')
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#1f5fa8"><title>{label}</title></circle>')
        right = x > W - R - 120  # near the right edge: the label goes left of the point
        out.append(f'<text x="{x - 7 if right else x + 7:.1f}" y="{y - 6:.1f}" '
                   f'text-anchor="{"end" if right else "start"}">{html.escape(p["variant"])}</text>')
    out.append("</svg>")
    open(a.svg, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
