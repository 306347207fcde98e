"""PNG figures of runs and of a benchmark, drawn off-screen (matplotlib's Agg canvas).

::

    plot_learning_curve(run_dir / "metrics.csv", "env_steps", "eval_return", run_dir / "learning_curve.png",
                        "dqn on CartPole-v1", target=475.0)
    plot_runs(["runs/a3c-sync", "runs/a3c-async"], "compare.png")    # overlaid, by steps and by time
    plot_runs(["runs/a-1", "runs/a-2", "runs/b-1"], "seeds.png", group=True)   # median and range over seeds
    plot_speedup([1, 2, 4], [1.0, 1.8, 3.1], out / "speedup.png", "sync, lstsq",
                 efficiency=[1.0, 0.9, 0.78])
    plot_against_references({"dqn": (frames, seconds, returns)}, {"DQN (Young & Tian)": 10.0},
                            out / "Breakout.png", "MinAtar/Breakout-v1", reference_frames=5e6)
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gorila.atomic import write_bytes
from gorila.errors import ConfigError
from gorila.metrics.curves import TIME_COLUMN, RunCurve, group_runs, name_runs, read_columns
from gorila.metrics.curves import title as plot_title

if TYPE_CHECKING:  # matplotlib is imported on first use (load_matplotlib)
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure


def plot_learning_curve(csv_path: Path, x: str, y: str | Sequence[str], out_png: Path, title: str, *,
                        target: float | None = None, wall_time: bool = True) -> Path:
    """One line per column in ``y`` against ``x``, blank cells skipped, and with ``wall_time``
    (unless ``x`` is time already) a second panel of the same against the seconds of training;
    ``target`` as a dashed line. Returns ``out_png``."""
    names = [y] if isinstance(y, str) else list(y)
    axes_x = [x] + ([TIME_COLUMN] if wall_time and x != TIME_COLUMN else [])
    fig, axes = _figure(panels=len(axes_x))
    y_label = names[0] if len(names) == 1 else "return" if all(n.endswith("return") for n in names) else "value"
    for ax, column in zip(axes, axes_x):
        for name in names:
            # an evaluation at the steps and time where its parameters were taken, with its episodes' range
            band = ("eval_min", "eval_max") if name == "eval_return" else ()
            read = read_columns(csv_path, column, name, band)
            xs, ys = read[column], read[name]
            # sparse series (evaluations) get a dot per point, so each one can be seen
            line, = ax.plot(xs, ys, label=name, linewidth=1.5, marker="o" if len(xs) <= 30 else None, markersize=3)
            if band and np.isfinite(read["eval_min"]).any():  # blank in files from before it was logged
                ax.fill_between(xs, read["eval_min"], read["eval_max"], color=line.get_color(), alpha=0.15,
                                label="evaluation episodes: min to max" if ax is axes[0] else None)
        _decorate(ax, column, y_label, target)
        if len(names) > 1 or target is not None:
            ax.legend()
    fig.suptitle(title)
    return _save(fig, out_png)


def plot_runs(run_dirs: Sequence[Path | str], out_png: Path, metric: str | None = None,
              title: str | None = None, group: bool = False) -> Path:
    """The runs' headline metric (or ``metric``) overlaid, one line per run named by its algorithm and
    settings, with the range of each evaluation's episodes as a band: by steps on the left, by
    seconds of training on the right; a target they share as a dashed line. With ``group``, runs of
    one setting are one line, their median, in a band from the lowest to the highest seed.
    Returns ``out_png``. A damaged run is a :class:`ConfigError` naming ``run_dir``, a metric the runs
    lack one naming ``metric``, and a PNG that cannot be written one naming ``out``."""
    curves = [RunCurve.read(d, metric) for d in run_dirs]
    units = sorted({c.step_unit for c in curves})
    if len(units) > 1:
        raise ConfigError("run_dir", f"the runs count steps differently ({', '.join(units)}): "
                                     "plot runs of one kind together")
    targets = {c.target for c in curves}
    target = targets.pop() if len(targets) == 1 else None
    fig, (by_steps, by_time) = _figure(panels=2)
    groups = group_runs(curves) if group else None
    if groups is not None:
        for g in groups:
            seeds = f"{g.runs} seed{'' if g.runs == 1 else 's'}"
            line, = by_steps.plot(g.steps, g.median, linewidth=1.5, label=f"{g.label} ({seeds})")
            by_steps.fill_between(g.steps, g.low, g.high, color=line.get_color(), alpha=0.2)
            by_time.plot(g.seconds, g.median_by_time, linewidth=1.5, color=line.get_color())
            by_time.fill_between(g.seconds, g.low_by_time, g.high_by_time, color=line.get_color(), alpha=0.2)
    else:
        for curve in name_runs(curves):
            marker = "o" if len(curve.values) <= 30 else None
            line, = by_steps.plot(curve.steps, curve.values, linewidth=1.5, label=curve.label, marker=marker,
                                  markersize=3)
            by_time.plot(curve.seconds, curve.values, linewidth=1.5, color=line.get_color(), marker=marker,
                         markersize=3)
            if np.isfinite(curve.low).any():  # the evaluation episodes' range
                for ax, xs in ((by_steps, curve.steps), (by_time, curve.seconds)):
                    ax.fill_between(xs, curve.low, curve.high, color=line.get_color(), alpha=0.15)
    _decorate(by_steps, units[0], curves[0].metric, target)
    _decorate(by_time, TIME_COLUMN, curves[0].metric, target)
    labels = len(groups) if groups is not None else len(curves)
    fig.legend(*by_steps.get_legend_handles_labels(), loc="outside lower center", ncols=min(labels, 2))
    fig.suptitle(title or plot_title(curves, groups))
    try:
        return _save(fig, out_png)
    except OSError as err:  # a file where a directory of the path belongs, a read-only directory, a full disk
        raise ConfigError("out", f"{out_png} cannot be written: {err.strerror or err}"
                                 + (f" ({err.filename})" if err.filename else "")) from None


def _decorate(ax: Axes, x: str, y: str, target: float | None) -> None:
    if target is not None:
        ax.axhline(target, linestyle="--", color="grey", linewidth=1, label=f"target {target:g}")
    values = [v for line in ax.get_lines() for v in np.asarray(line.get_ydata())]
    # A loss-like headline that shrinks by orders of magnitude (lstsq's suboptimality) reads on a log scale.
    if values and min(values) > 0 and max(values) / min(values) > 1e3:
        ax.set_yscale("log")
    ax.set_xlabel("seconds of training (start-up not counted)" if x == TIME_COLUMN else x.replace("_", " "))
    ax.set_ylabel(y.replace("_", " "))
    ax.grid(alpha=0.3)


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


def plot_predictions(curves: Mapping[str, tuple[Sequence[int], Sequence[float], Sequence[float]]], out_png: Path,
                     title: str) -> Path:
    """``gorila simulate``'s figure: predicted speedup (left) and mean staleness (right) against
    workers, on log axes, one curve per label. ``curves[label] = (workers, speedup,
    staleness_mean)``; a label ending in ``" + stragglers"`` is drawn dashed in the colour of the
    label before it, so each rule's straggler effect sits beside it."""
    fig, (left, right) = _figure(2)
    everyone = sorted({w for workers, _, _ in curves.values() for w in workers})
    left.plot(everyone, everyone, ":", color="grey", label="ideal (y = x)")
    colours: dict[str, str] = {}
    for label, (workers, speedup, staleness) in curves.items():
        base = label.removesuffix(" + stragglers")
        colour = colours.setdefault(base, f"C{len(colours)}")
        style = "o--" if base != label else "o-"
        left.plot(workers, speedup, style, color=colour, label=label, markersize=4)
        right.plot(workers, [max(s, 1e-2) for s in staleness], style, color=colour, label=label, markersize=4)
    for ax, ylabel in ((left, "predicted speedup over 1 worker"),
                       (right, "mean staleness (versions; 0 drawn at 0.01)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("workers")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
    left.legend(fontsize="small")
    fig.suptitle(title)
    return _save(fig, out_png)


def plot_against_references(curves: dict[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
                            references: dict[str, float], out_png: Path, title: str, *,
                            reference_frames: float | None = None) -> Path:
    """Return curves ``label -> (frames, seconds, returns)`` by frames on the left and by wall time on
    the right, each published reference score ``label -> score`` a dashed line across both (reached
    after ``reference_frames``, said in its label). Returns ``out_png``."""
    fig, (by_frames, by_time) = _figure(panels=2)
    for label, (frames, seconds, returns) in curves.items():
        line, = by_frames.plot(frames, returns, linewidth=1.5, label=label)
        by_time.plot(seconds, returns, linewidth=1.5, color=line.get_color())
    at = f" at {reference_frames / 1e6:g} M frames" if reference_frames else ""
    for (label, score), style in zip(references.items(), ("--", ":", "-.")):
        for ax in (by_frames, by_time):
            ax.axhline(score, linestyle=style, color="grey", linewidth=1,
                       label=f"{label}{at}: {score:g}" if ax is by_frames else None)
    for ax, x in ((by_frames, "frames"), (by_time, "seconds from the command's start")):
        ax.set_xlabel(x)
        ax.set_ylabel("return")
        ax.grid(alpha=0.3)
    by_frames.legend(fontsize="small")
    fig.suptitle(title)
    return _save(fig, out_png)


def load_matplotlib() -> tuple[type[Figure], type[FigureCanvasAgg]]:
    """matplotlib's ``Figure`` and Agg canvas, imported on first use so that processes importing
    gorila.metrics for the logger or the CPU clock (every worker) don't load matplotlib; a run's
    driver calls it early, on a thread, to have them ready for its learning curve. A bare Figure on
    an Agg canvas needs no display and shares no global pyplot state between threads."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    return Figure, FigureCanvasAgg


def _figure(panels: int | None = None) -> tuple[Figure, Any]:
    """A figure and its one axes, or a row of ``panels`` axes (a list: Any, as the callers unpack either)."""
    Figure, FigureCanvasAgg = load_matplotlib()
    fig = Figure(figsize=(7 if panels is None else 5.5 * panels, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot() if panels is None else list(fig.subplots(1, panels, squeeze=False)[0])


def _save(fig: Figure, out_png: Path) -> Path:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    return write_bytes(out_png, buffer.getvalue())
