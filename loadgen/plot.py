"""`--plot FILE.png`: throughput (records/s and MB/s) and latency (avg and max) over time, two
stacked axes sharing the time axis. matplotlib with the Agg backend (no display needed); it is
imported only when a plot is asked for."""
from __future__ import annotations

import os
from typing import Mapping, Sequence

__all__ = ["write_plot", "PNG_MAGIC"]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_plot(path: str | os.PathLike, timeline: Sequence[Mapping[str, float]], *,
               title: str = "", latency_label: str = "latency") -> None:
    """Write the PNG. `timeline` rows are the JSON's: t_s, records_per_sec, mb_per_sec,
    latency_avg_ms, latency_max_ms. An empty timeline still gives a (blank) plot."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure   # no pyplot: no global state, thread-safe

    t = [r["t_s"] for r in timeline]
    fig = Figure(figsize=(9, 6), dpi=100)
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    ax1.plot(t, [r["records_per_sec"] for r in timeline], marker="o", ms=3, color="tab:blue",
             label="records/s")
    ax1.set_ylabel("records/s", color="tab:blue")
    ax1.set_ylim(bottom=0)
    ax1.grid(True, alpha=0.3)
    ax1b = ax1.twinx()
    ax1b.plot(t, [r["mb_per_sec"] for r in timeline], ls="--", color="tab:green", label="MB/s")
    ax1b.set_ylabel("MB/s", color="tab:green")
    ax1b.set_ylim(bottom=0)
    ax2.plot(t, [r["latency_avg_ms"] for r in timeline], marker="o", ms=3, color="tab:orange",
             label=f"avg {latency_label}")
    ax2.plot(t, [r["latency_max_ms"] for r in timeline], ls="--", color="tab:red",
             label=f"max {latency_label}")
    ax2.set_ylabel("ms")
    ax2.set_xlabel("time since start (s)")
    ax2.set_ylim(bottom=0)
    ax2.grid(True, alpha=0.3)
    ax2.legend(loc="upper left", fontsize="small")
    if title:
        ax1.set_title(title)
    fig.tight_layout()
    fig.savefig(os.fspath(path), format="png")
