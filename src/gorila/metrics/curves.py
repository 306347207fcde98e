"""Runs' curves read back from their directories, for ``gorila plot``: each run's headline by steps
and by seconds of training, placed where the evaluated parameters were taken, with the spread of the
evaluation's episodes; named by algorithm and settings; runs of one setting grouped across seeds::

    curves = [RunCurve.read(d) for d in ("runs/a-1", "runs/a-2", "runs/b-1")]
    name_runs(curves)                  # labels: "a3c async" + the settings that differ between them
    groups = group_runs(curves)        # one CurveGroup per setting: median and band over its seeds
    title(curves, groups)              # "eval return of a3c on CartPole-v1: 2 settings, 3 runs"
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from gorila.errors import ConfigError
from gorila.settings_file import read_settings
from gorila.validate import clipped, excerpt

#: metrics.csv's column of seconds of training (start-up not counted).
TIME_COLUMN = "time_s"
#: Where an evaluation's parameters were taken, by the row's own step and time columns.
EVALUATED_AT = {"env_steps": "eval_env_steps", "step": "eval_env_steps", TIME_COLUMN: "eval_train_time_s"}
#: Settings that never tell runs apart in a legend (where and when they ran, how they are watched).
_NOT_SETTINGS = {"run_dir", "resume", "stamp", "address", "call_timeout_s", "checkpoint_every_s", "actor_timeout_s",
                 "time_limit_s", "eval_every_s", "algo"}


def read_columns(csv_path: Path, x: str, y: str, extra: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """Columns ``x``, ``y`` and ``extra`` of ``csv_path`` as floats, keeping rows where ``x`` and ``y``
    are filled (a blank ``extra`` cell is NaN). ``x`` is read where ``y``'s parameters were taken when
    ``y`` is an evaluation's and the file says where (:data:`EVALUATED_AT`). A column the file lacks
    is a :class:`ConfigError` naming ``metric``; a file that is not UTF-8 CSV of numbers one naming
    ``run_dir`` (:func:`read_rows`)."""
    header, rows = read_rows(csv_path)
    missing = [name for name in (x, y) if name not in header]
    if missing:
        raise ConfigError("metric", f"{csv_path} has no column {', '.join(map(repr, missing))}; it has "
                                    f"{clipped(', '.join(header))}")
    at = EVALUATED_AT.get(x)
    source = at if y.startswith("eval_") and at in header else x
    rows = [row for row in rows if row.get(y) and row.get(source)]
    out = {x: [_number(csv_path, row, source) for row in rows], y: [_number(csv_path, row, y) for row in rows]}
    for name in extra:
        out[name] = [_number(csv_path, row, name) if row.get(name) else np.nan for row in rows]
    return {name: np.asarray(values, dtype=float) for name, values in out.items()}


def read_rows(csv_path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """``csv_path``'s header and its rows by column; a file that cannot be read, is not UTF-8, or is
    not CSV (a cell longer than the csv module's limit, 128 KiB, among them: no gorila row has one) is
    a :class:`ConfigError` naming ``run_dir`` and the file."""
    def damaged(why: str) -> ConfigError:
        return ConfigError("run_dir", f"{csv_path} is damaged ({why}): it was edited, or is not a run's metrics")

    try:
        with open(csv_path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            return list(reader.fieldnames or []), list(reader)
    except UnicodeDecodeError as err:
        raise damaged(f"not UTF-8 text at byte {err.start:,}") from None
    except csv.Error as err:
        raise damaged(f"not CSV: {err}") from None
    except OSError as err:
        raise ConfigError("run_dir", f"{csv_path} cannot be read: {err.strerror or err}") from None


def _number(csv_path: Path, row: dict[str, str], column: str) -> float:
    try:
        return float(row[column])
    except (TypeError, ValueError):  # TypeError: a row of fewer cells than the header leaves None
        raise ConfigError("run_dir", f"{csv_path} is damaged (its {column!r} column holds "
                                     f"{excerpt(row[column])}, not a number): it was edited, or is not a run's "
                                     "metrics") from None


def read_series(csv_path: Path, x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
    """Columns ``x`` and ``y`` of ``csv_path`` as floats (see :func:`read_columns`)."""
    columns = read_columns(csv_path, x, y)
    return columns[x], columns[y]


@dataclass(frozen=True)
class RunCurve:
    """A run directory's headline metric over its steps and its seconds of training::

        curve = RunCurve.read("runs/a3c-CartPole-v1-20261122-081500")
        curve.label, curve.metric, curve.steps, curve.seconds, curve.values, curve.target
        curve.low, curve.high     # the worst and best evaluation episode (NaN where not logged)

    ``settings`` are the run's settings (``config.json``'s run and algorithm sections, flat), which
    :func:`name_runs` turns into labels; ``label`` is the algorithm and mode until then.
    """

    label: str
    metric: str
    step_unit: str
    steps: np.ndarray
    seconds: np.ndarray
    values: np.ndarray
    target: float | None
    low: np.ndarray = field(default_factory=lambda: np.zeros(0))
    high: np.ndarray = field(default_factory=lambda: np.zeros(0))
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, run_dir: Path | str, metric: str | None = None) -> RunCurve:
        run_dir = Path(run_dir)
        config_path, csv_path = run_dir / "config.json", run_dir / "metrics.csv"
        if not config_path.is_file() or not csv_path.is_file():
            raise ConfigError("run_dir", f"{run_dir} is not a gorila run directory (no config.json and metrics.csv)")
        config = _run_record(config_path)
        header = read_rows(csv_path)[0]
        metric = metric or config.get("headline") or _first_metric(csv_path, header)
        band = ("eval_min", "eval_max") if metric == "eval_return" and "eval_max" in header else ()
        by_steps = read_columns(csv_path, "step", metric, band)
        seconds = read_columns(csv_path, TIME_COLUMN, metric)[TIME_COLUMN]
        algo = config.get("algo", "?")
        settings = {**config.get("run", {}), **config.get(algo, {})}
        label = f"{algo} {settings.get('mode', '')}".strip()
        nan = np.full(by_steps[metric].shape, np.nan)
        return cls(label, metric, config.get("step_unit", "steps"), by_steps["step"], seconds, by_steps[metric],
                   config.get("target") if metric == config.get("headline") else None,
                   by_steps.get("eval_min", nan), by_steps.get("eval_max", nan),
                   {k: v for k, v in settings.items() if k not in _NOT_SETTINGS})


@dataclass(frozen=True)
class CurveGroup:
    """Runs of one setting over seeds: ``median`` of their values at each of ``steps`` (and of
    ``seconds``), and the band between the lowest and the highest run (``low``, ``high``), each
    run's curve interpolated where the runs overlap."""

    label: str
    runs: int
    steps: np.ndarray
    seconds: np.ndarray
    median: np.ndarray
    low: np.ndarray
    high: np.ndarray
    median_by_time: np.ndarray
    low_by_time: np.ndarray
    high_by_time: np.ndarray


def name_runs(curves: Sequence[RunCurve], ignore: Sequence[str] = ()) -> list[RunCurve]:
    """The curves labelled by algorithm and mode and the settings that differ between them
    (``ignore``: settings left out, e.g. the seed when runs are grouped over seeds)."""
    keys = sorted({k for c in curves for k in c.settings} - set(ignore) - {"mode", "env"})
    differ = [k for k in keys if len({json.dumps(c.settings.get(k), default=str) for c in curves}) > 1]
    out = []
    for curve in curves:
        algo, _, mode = curve.label.partition(" ")
        base = f"{algo} {curve.settings.get('mode', mode)}".strip()
        parts = [f"{k.replace('_', '-')} {_short(curve.settings.get(k))}" for k in differ]
        out.append(replace(curve, label=", ".join([base, *parts])))
    return out


def group_runs(curves: Sequence[RunCurve]) -> list[CurveGroup]:
    """The curves grouped by their settings but the seed, in the order each setting first appears."""
    named = name_runs(curves, ignore=("seed",))
    by_label: dict[str, list[RunCurve]] = {}
    for curve in named:
        by_label.setdefault(curve.label, []).append(curve)
    return [_group(label, members) for label, members in by_label.items()]


def title(curves: Sequence[RunCurve], groups: Sequence[CurveGroup] | None = None) -> str:
    """What a figure shows: the metric, of what on which env, and how many runs (and settings)."""
    algos = sorted({c.label.split(" ")[0] for c in curves})
    envs = sorted({str(c.settings["env"]) for c in curves if "env" in c.settings})
    what = f"{curves[0].metric.replace('_', ' ')} of {', '.join(algos)}" + (f" on {', '.join(envs)}" if envs else "")
    count = _count(len(curves), "run")
    if groups is not None:
        count = f"median and range over seeds, {_count(len(groups), 'setting')}, {count}"
    return f"{what}: {count}"


def _group(label: str, members: list[RunCurve]) -> CurveGroup:
    steps = _common_axis([c.steps for c in members])
    seconds = _common_axis([c.seconds for c in members])
    by_steps = np.stack([np.interp(steps, c.steps, c.values) if steps.size else steps for c in members])
    by_time = np.stack([np.interp(seconds, c.seconds, c.values) if seconds.size else seconds for c in members])
    return CurveGroup(label, len(members), steps, seconds, np.median(by_steps, axis=0), by_steps.min(axis=0),
                      by_steps.max(axis=0), np.median(by_time, axis=0), by_time.min(axis=0), by_time.max(axis=0))


def _common_axis(axes: list[np.ndarray], points: int = 50) -> np.ndarray:
    """Points where every run has a value: from the latest first point to the earliest last one."""
    nonempty = [a for a in axes if a.size]
    if len(nonempty) < len(axes):
        return np.zeros(0)
    start, stop = max(a.min() for a in axes), min(a.max() for a in axes)
    return np.linspace(start, stop, points) if stop > start else np.asarray([start])


def _run_record(config_path: Path) -> dict[str, Any]:
    """A run's ``config.json`` with the fields a plot reads of the types it reads them as, else a
    :class:`ConfigError` naming ``run_dir``."""
    config = read_settings(config_path, "run_dir")
    algo = config.get("algo", "?") if isinstance(config, dict) else None
    fits = (isinstance(algo, str) and all(isinstance(config.get(k, {}), dict) for k in ("run", algo))
            and all(isinstance(config.get(k), (str, type(None))) for k in ("headline", "step_unit"))
            and isinstance(config.get("target"), (int, float, type(None))))
    if not fits:
        raise ConfigError("run_dir", f"{config_path} does not describe a gorila run: it was damaged or edited")
    return config


def _first_metric(csv_path: Path, header: list[str]) -> str:
    """A run directory without a named headline: the first column after the step counters."""
    rest = [c for c in header if c not in ("step", TIME_COLUMN, "env_steps", "updates")]
    if not rest:
        raise ConfigError("run_dir", f"{csv_path} has no metric columns")
    return rest[0]


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return "x".join(map(str, value)) if isinstance(value, list) else str(value)  # hidden sizes: 64x64


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
