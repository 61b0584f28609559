"""The plots of docs/benchmarks.md, drawn at build time from that page's own tables.

matplotlib's plot directive runs this file (``{plot} benchmarks_plot.py of_limit``) and calls
one of its functions; each reads the numbers from the Markdown tables of benchmarks.md, so a
plot can never disagree with its table. Run alone (``python docs/benchmarks_plot.py``) it
writes the three plots as PNG files into the current directory.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

PAGE = Path(sys.argv[0]).resolve().with_name("benchmarks.md")
GOAL = 0.8  # issue 21's goal: at least 0.8 of the raw loop


def table(header_start: str) -> List[Dict[str, str]]:
    """The rows of the page's first Markdown table whose header starts with ``header_start``."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.startswith(header_start):
            names = [c.strip() for c in line.strip().strip("|").split("|")]
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in row.strip().strip("|").split("|")]
                rows.append(dict(zip(names, cells)))
            return rows
    raise LookupError(f"no table starting {header_start!r} in {PAGE}")


def number(cell: str) -> Optional[float]:
    """The first number of a cell ("214,308", "**0.87**", a range), or None ("n/a", a dash)."""
    m = re.search(r"\d[\d,]*(?:\.\d+)?", cell)
    return float(m.group(0).replace(",", "")) if m else None


def span(cell: str) -> Optional[Tuple[float, float]]:
    """A range such as "0.66 to 2.72" as (low, high); one number as (x, x); None for none."""
    found = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", cell)]
    if not found:
        return None
    return min(found), max(found)


def label(cell: str) -> str:
    """A row's name without Markdown code marks."""
    return cell.replace("`", "")


def of_limit() -> None:
    """jetstream_sync against the raw-socket limit, per row: this run, and the earlier range."""
    rows = [r for r in table("| metric | jetstream_sync |") if number(r["of limit"]) is not None]
    names = [label(r["metric"]) for r in rows]
    values = [number(r["of limit"]) or 0.0 for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(rows) + 1.4))
    ys = list(range(len(rows)))[::-1]
    colors = ["#2b7bba" if v >= GOAL else "#e08a1e" for v in values]
    ax.barh(ys, values, color=colors, height=0.6, label="this run")
    right = 1.6
    for y, r in zip(ys, rows):
        earlier = span(r["of limit, earlier"])
        if earlier:
            low, high = earlier[0], min(earlier[1], right - 0.02)
            ax.plot((low, high), (y, y), color="black", linewidth=1.2, marker="|", markersize=8)
            if earlier[1] > right:  # off the scale: say how far
                ax.text(right - 0.03, y + 0.25, f"to {earlier[1]:.2f}", ha="right", fontsize=7)
    ax.plot([], [], color="black", marker="|", label="earlier runs, range")
    ax.axvline(GOAL, color="#c0392b", linestyle="--", linewidth=1, label=f"goal {GOAL}")
    ax.axvline(1.0, color="grey", linestyle=":", linewidth=1, label="raw socket loop")
    ax.set_yticks(ys)
    ax.set_yticklabels(names, fontsize=8)
    ax.set_xlabel("of limit: jetstream_sync / raw socket (latency: raw / jetstream_sync)")
    ax.set_xlim(0, right)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()


def against_nats_py() -> None:
    """jetstream_sync / nats-py per row, on a log scale (1 is a tie)."""
    rows = [r for r in table("| metric | jetstream_sync |") if number(r["ratio"]) is not None]
    rows = [r for r in rows if number(r["nats-py"]) is not None]
    names = [label(r["metric"]) for r in rows]
    values = [number(r["ratio"]) or 0.0 for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(rows) + 1.2))
    ys = list(range(len(rows)))[::-1]
    ax.barh(ys, values, color="#2b7bba", height=0.6)
    for y, v in zip(ys, values):
        ax.text(v * 1.04, y, f"{v:.2f}x", va="center", fontsize=8)
    ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_yticks(ys)
    ax.set_yticklabels(names, fontsize=8)
    ax.set_xlabel("jetstream_sync against nats-py (x times better; log scale)")
    ax.set_xlim(0.9, max(values) * 1.6)
    fig.tight_layout()


def spark() -> None:
    """The Spark source and sink against their own limits, rows/s."""
    rows = [r for r in table("| path | jetstream_sync rows/s |") if number(r["of limit"])]
    series = [
        ("jetstream_sync", "jetstream_sync rows/s", "#2b7bba"),
        ("client alone (no Spark)", "client alone (no Spark)", "#7fb3d5"),
        ("raw socket loop (no client)", "raw socket loop (no client)", "#95a5a6"),
        ("Python Data Source API limit", "Python Data Source API limit", "#e08a1e"),
    ]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    height = 0.8 / len(series)
    for k, (name, column, color) in enumerate(series):
        ys = [len(rows) - 1 - i + (len(series) / 2 - k - 0.5) * height for i in range(len(rows))]
        xs = [(number(r[column]) or 0.0) / 1000 for r in rows]
        ax.barh(ys, xs, height=height * 0.95, color=color, label=name)
        for y, x in zip(ys, xs):
            ax.text(x + 5, y, f"{x:,.0f}k", va="center", fontsize=7)
    ax.set_yticks(range(len(rows))[::-1])
    ax.set_yticklabels(
        [f"{label(r['path']).split(' (')[0]}\nof limit {number(r['of limit'])}" for r in rows],
        fontsize=8,
    )
    ax.set_xlabel("thousand rows/s (local[2], 2 partitions, 128 B rows)")
    ax.set_xlim(0, ax.get_xlim()[1] * 1.12)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4, fontsize=7)
    fig.tight_layout()


if __name__ == "__main__" and "__file__" in globals():  # run alone, not by the directive
    for draw in (of_limit, against_nats_py, spark):
        draw()
        plt.savefig(f"benchmarks-{draw.__name__}.png", dpi=100)
        plt.close("all")
