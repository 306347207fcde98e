"""PNG figures of a run and of a benchmark, drawn off-screen (matplotlib's Agg canvas).

::

    plot_learning_curve(run_dir / "metrics.csv", "step", "return", run_dir / "return.png", "DQN CartPole")
    plot_speedup([1, 2, 4], [1.0, 1.8, 3.1], out / "speedup.png", "sync, lstsq",
                 efficiency=[1.0, 0.9, 0.78])
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gorila.atomic import write_bytes


def read_series(csv_path: Path, x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
    """Columns ``x`` and ``y`` of ``csv_path`` as floats, keeping rows where both cells are filled."""
    with open(csv_path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [name for name in (x, y) if name not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{csv_path} has no column {', '.join(map(repr, missing))}; it has "
                             f"{', '.join(reader.fieldnames or [])}")
        pairs = [(float(row[x]), float(row[y])) for row in reader if row[x] and row[y]]
    xs, ys = zip(*pairs) if pairs else ((), ())
    return np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)


def plot_learning_curve(csv_path: Path, x: str, y: str | Sequence[str], out_png: Path, title: str) -> Path:
    """One line per column in ``y`` against ``x``, blank cells skipped; returns ``out_png``."""
    names = [y] if isinstance(y, str) else list(y)
    fig, ax = _figure()
    for name in names:
        ax.plot(*read_series(csv_path, x, name), label=name, linewidth=1.5)
    ax.set_xlabel(x)
    ax.set_ylabel(names[0] if len(names) == 1 else "value")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if len(names) > 1:
        ax.legend()
    return _save(fig, out_png)


def plot_speedup(workers: Sequence[int], speedup: Sequence[float], out_png: Path, title: str,
                 efficiency: Sequence[float] | None = None, limit: Sequence[float] | None = None,
                 runs: Sequence[tuple[int, float]] = ()) -> Path:
    """Measured speedup against the ideal ``y = x`` and, if given, the machine's ``limit`` for the
    same work; ``efficiency`` on a right-hand axis; ``runs``, ``(workers, speedup)`` of single runs
    behind a line of medians, as faint dots. Returns ``out_png``."""
    if not workers or len(workers) != len(speedup) or (efficiency is not None and len(efficiency) != len(workers)):
        raise ValueError(f"need one speedup (and efficiency) per worker count; got {len(workers)} worker "
                         f"counts, {len(speedup)} speedups"
                         + ("" if efficiency is None else f", {len(efficiency)} efficiencies"))
    fig, ax = _figure()
    ideal = [min(workers), max(workers)]
    ax.plot(ideal, ideal, "--", color="grey", label="ideal (y = x)")
    if limit is not None:
        if len(limit) != len(workers):
            raise ValueError(f"need one limit per worker count; got {len(workers)} worker counts, {len(limit)} limits")
        ax.plot(workers, limit, "^--", color="tab:red", label="machine limit (bare processes)")
    if runs:
        ax.plot([w for w, _ in runs], [s for _, s in runs], ".", color="tab:blue", alpha=0.35,
                label="single runs")
    ax.plot(workers, speedup, "o-", color="tab:blue", label="measured speedup")
    ax.set_xlabel("workers")
    ax.set_ylabel("speedup over 1 worker")
    ax.set_xticks(sorted(set(workers)))
    ax.set_title(title)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if efficiency is not None:
        right = ax.twinx()
        right.plot(workers, efficiency, "s:", color="tab:orange", label="efficiency")
        right.set_ylabel("parallel efficiency (speedup / workers)")
        right.set_ylim(0, max(1.05, max(efficiency) * 1.05))
        more_handles, more_labels = right.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    # Below the axes: inside, the efficiency axis would draw over it and hide measured points.
    fig.legend(handles, labels, loc="outside lower center", ncols=3)  # five entries do not fit one row
    return _save(fig, out_png)


def _figure():
    # Imported on first use so that processes importing gorila.metrics for the logger or the
    # CPU clock (every worker) don't load matplotlib. A bare Figure on an Agg canvas needs no
    # display and shares no global pyplot state between threads.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _save(fig, out_png: Path) -> Path:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    return write_bytes(out_png, buffer.getvalue())
