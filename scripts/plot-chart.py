#!/usr/bin/env python3
"""Draw the README's chart from a benchmark's table.

    python3 scripts/plot-chart.py SUMMARY.tsv OUT.svg

SUMMARY.tsv is what scripts/bench-url.sh writes (`scripts/bench.sh --only chart`): `#` lines
with the date, machine, archive, mirror, build, rounds, method and command, then one row per
contestant: row, group, label, median_s, min_s, max_s, runs_s, rss_mib, load, failed.
The SVG is one horizontal bar chart, one bar per contestant (its median, a line from its
fastest to its slowest run), grouped as the table groups them, on one time scale, with the
date, the machine, the load and the command that made it written under it. Python's
standard library only: it runs from a fresh clone with no network.
"""

import math
import sys
import textwrap
from xml.sax.saxutils import escape

WIDTH = 860
LABEL_RIGHT = 330  # labels end here, bars start 10 px to the right
BAR_LEFT = LABEL_RIGHT + 10
BAR_RIGHT = WIDTH - 90  # room for the figure after the longest bar
ROW = 26
BAR_H = 16
FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"
# fastuntar's own rows, rows that use it after another tool, everyone else.
COLOURS = {"fastuntar": "#d95f02", "partly": "#f4a261", "other": "#7b8794"}


def read(path):
    meta, rows, header = {}, [], None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            if line.startswith("# "):
                key, _, value = line[2:].partition("\t")
                meta[key] = value
            elif header is None:
                header = line.split("\t")
            else:
                rows.append(dict(zip(header, line.split("\t"))))
    if header is None or not rows:
        sys.exit(f"plot-chart.py: {path}: no rows")
    return meta, rows


def nice_step(top):
    """A tick step giving 4-8 ticks up to `top` seconds: 1, 2 or 5 times a power of ten."""
    raw = top / 6
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def colour(label):
    if label.startswith("fastuntar"):
        return COLOURS["fastuntar"]
    return COLOURS["partly"] if "fastuntar" in label else COLOURS["other"]


def text(x, y, s, size=13, anchor="start", weight="normal", fill="#222"):
    return (f"<text x='{x:.1f}' y='{y:.1f}' {FONT} font-size='{size}' text-anchor='{anchor}' "
            f"font-weight='{weight}' fill='{fill}'>{escape(s)}</text>")


def loads(rows):
    values = [float(v) for r in rows for v in r.get("load", "").split() if v]
    if not values:
        return "unknown"
    return f"{min(values):.1f}" if min(values) == max(values) else f"{min(values):.1f}-{max(values):.1f}"


def draw(meta, rows):
    groups = []
    for r in rows:
        if not groups or groups[-1][0] != r["group"]:
            # A group seen before (rows interleaved by mirror) gets its row appended there.
            for g in groups:
                if g[0] == r["group"]:
                    g[1].append(r)
                    break
            else:
                groups.append((r["group"], [r]))
        else:
            groups[-1][1].append(r)
    groups.sort(key=lambda g: not g[0].startswith("From a local"))
    measured = [float(r["max_s"]) for r in rows if r.get("max_s")]
    top = max(measured) if measured else 1.0
    step = nice_step(top)
    top = math.ceil(top / step) * step
    scale = (BAR_RIGHT - BAR_LEFT) / top

    out = []
    y = 34
    out.append(text(20, y, "Time to a restored tree: extract + sync (shorter is better)", 19, weight="bold"))
    y += 22
    out.append(text(20, y, meta.get("archive", ""), 13, fill="#444"))
    y += 18
    out.append(text(20, y, f"URL rows: {meta.get('mirror', '')}", 13, fill="#444"))
    y += 16
    plot_top = y
    for name, members in groups:
        y += 24
        out.append(text(20, y, name, 14, weight="bold"))
        y += 8
        for r in members:
            mid = y + ROW / 2
            out.append(text(LABEL_RIGHT, mid + 4.5, r["label"], 13, anchor="end"))
            if not r.get("median_s"):
                out.append(text(BAR_LEFT, mid + 4.5, f"failed ({r.get('failed', '?')} runs)", 13, fill="#b00"))
                y += ROW
                continue
            med, lo, hi = float(r["median_s"]), float(r["min_s"]), float(r["max_s"])
            w = max(med * scale, 1.0)
            out.append(f"<rect x='{BAR_LEFT}' y='{mid - BAR_H / 2:.1f}' width='{w:.1f}' height='{BAR_H}' "
                       f"fill='{colour(r['label'])}' rx='2'/>")
            x0, x1 = BAR_LEFT + lo * scale, BAR_LEFT + hi * scale
            out.append(f"<path d='M{x0:.1f} {mid:.1f}H{x1:.1f}M{x0:.1f} {mid - 4:.1f}V{mid + 4:.1f}"
                       f"M{x1:.1f} {mid - 4:.1f}V{mid + 4:.1f}' stroke='#222' stroke-width='1.2' fill='none'/>")
            figure = f"{med:.2f} s"
            if r.get("failed", "0") not in ("", "0"):
                figure += f" ({r['failed']} failed)"
            out.append(text(max(BAR_LEFT + w, x1) + 6, mid + 4.5, figure, 13, weight="bold"))
            y += ROW
    plot_bottom = y + 6
    # The time axis: grid lines behind the bars (drawn first), ticks under them.
    grid = []
    t = 0.0
    while t <= top + 1e-9:
        x = BAR_LEFT + t * scale
        grid.append(f"<line x1='{x:.1f}' y1='{plot_top:.1f}' x2='{x:.1f}' y2='{plot_bottom:.1f}' stroke='#e3e3e3'/>")
        grid.append(text(x, plot_bottom + 16, f"{t:g} s", 12, anchor="middle", fill="#555"))
        t += step
    y = plot_bottom + 40
    notes = [
        f"Median of {meta.get('rounds', '?')} interleaved rounds; {meta.get('method', '')}. "
        "The line on each bar runs from the fastest run to the slowest.",
        f"{meta.get('date', '')} on {meta.get('machine', '')}; 1-min load average {loads(rows)} before the runs.",
        f"Build: {meta.get('build', '')}. Regenerate: {meta.get('command', '')}",
    ]
    for n in notes:
        for line in textwrap.wrap(n, 130, subsequent_indent="  "):
            out.append(text(20, y, line, 11.5, fill="#555"))
            y += 16
    height = y + 4
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{height:.0f}' "
            f"viewBox='0 0 {WIDTH} {height:.0f}'>\n"
            f"<rect width='100%' height='100%' fill='white'/>\n"
            + "\n".join(grid + out) + "\n</svg>\n")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot-chart.py SUMMARY.tsv OUT.svg")
    meta, rows = read(sys.argv[1])
    svg = draw(meta, rows)
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write(svg)


if __name__ == "__main__":
    main()
