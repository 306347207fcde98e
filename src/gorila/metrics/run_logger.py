"""Everything a run writes while it trains: config, metrics CSV, TensorBoard scalars, progress, summary.

::

    display = terminal.progress(Limits(100_000, "env steps"), description="dqn")
    with RunLogger(run_dir, config, ["return", "loss", "lag"], display=display,
                   tags={"return": "eval/return"}) as logger:
        logger.log(step=2_000, row={"loss": 0.013, "lag": 2}, train_s=4.2)   # "return" left blank
        logger.message("eval return 500.0")
        logger.close({"final_return": 500.0})

A run directory then holds ``config.json``, ``metrics.csv`` (``step,time_s,<columns>``),
TensorBoard event files and ``summary.json``.
"""

from __future__ import annotations

import contextlib
import csv
import math
import numbers
import operator
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, cast

from gorila.atomic import disk_full, jsonable, write_json
from gorila.errors import ConfigError
from gorila.metrics.progress import Display, NoProgress
from gorila.run_files import METRICS_HEAD, open_inside, read_metrics
from gorila.validate import clipped

if TYPE_CHECKING:  # torch is imported only by a run that writes TensorBoard events
    import numpy as np
    from torch.utils.tensorboard import SummaryWriter

#: Unless ``shown`` says which, the first this-many columns are shown beside the progress display.
SHOWN_COLUMNS = 4


class RunLogger:
    """Writes one run's outputs into ``run_dir``.

    * ``config.json``: ``config`` as JSON, written on construction (tuples become lists,
      numpy scalars numbers, ``inf`` the string ``"inf"``; see :func:`gorila.atomic.jsonable`).
    * ``metrics.csv``: a row per :meth:`log`, flushed at once so a killed run keeps its rows.
      ``time_s`` is ``train_s`` where :meth:`log` is given it, else the seconds since the logger
      started, continuing across a resume.
    * TensorBoard scalars (``tensorboard=False`` to skip), tagged ``tags[column]`` (default: the
      column's name) against ``step``, which ``step_axis`` names in a text note; ``hparams``
      (flat name -> number, string or bool) go to TensorBoard's HParams dashboard with
      ``hparam_metrics``, tags of scalars to show beside them.
    * Progress on ``display`` (see :mod:`gorila.metrics.progress`; nothing when ``None``): the
      ``flagged`` columns (counts of faults) once they are non-zero, with a warning line each time
      one of them rises, then the ``shown`` ones (default: the first ``SHOWN_COLUMNS``), in the
      order the display keeps them when its line is short of room.
    * ``summary.json`` on :meth:`close` (none after :meth:`discard`), with what :meth:`amend` adds.

    ``resume=True`` appends to an existing ``metrics.csv`` (its header must match); without it
    an existing ``metrics.csv`` is refused rather than overwritten. ``resume_at`` is the step of the
    checkpoint the run resumes from: rows logged after it (work the resumed run does again) are
    cut, so steps never go backwards and no row is repeated.
    """

    def __init__(self, run_dir: Path, config: Mapping[str, object], columns: Sequence[str], *,
                 display: Display | None = None, tensorboard: bool = True, tags: Mapping[str, str] | None = None,
                 step_axis: str = "step", hparams: Mapping[str, object] | None = None,
                 hparam_metrics: Sequence[str] = (), resume: bool = False, resume_at: float | None = None,
                 flagged: Sequence[str] = (), shown: Sequence[str] | None = None):
        self.columns = tuple(columns)
        self.flagged = tuple(name for name in flagged if name in self.columns)
        self.shown = tuple(name for name in (self.columns[:SHOWN_COLUMNS] if shown is None else shown)
                           if name in self.columns)
        _check_columns(self.columns)
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path = self.run_dir / "metrics.csv"
        self.summary_path = self.run_dir / "summary.json"
        header = [*METRICS_HEAD, *self.columns]

        if self.csv_path.exists() and not resume:
            raise FileExistsError(f"{self.csv_path} exists; pass resume=True to append to it, "
                                  "or log into a new run directory")
        elapsed_before = _prepare_resume(self.csv_path, header, resume_at) if self.csv_path.exists() else None
        fresh = elapsed_before is None

        write_json(self.run_dir / "config.json", config)
        # Never through a link planted in the run directory: the run would write to where it points.
        fd = open_inside(self.csv_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "resume" if resume else "run_dir")
        self._file = open(fd, "a", newline="", encoding="utf-8")
        self._csv = csv.writer(self._file)
        if fresh:
            self._write(header)

        self._tags = {name: (tags or {}).get(name, name) for name in self.columns}
        self._tb = None
        if tensorboard:
            # Imported here: it pulls in TensorBoard, which a logger without it shouldn't pay for.
            from torch.utils.tensorboard import SummaryWriter
            self._tb = SummaryWriter(log_dir=str(self.run_dir), flush_secs=10)
            self._tb.add_text("run/step_axis", f"The step axis of every scalar is **{step_axis}**.")
            if hparams:
                _write_hparams(self._tb, hparams, hparam_metrics)
        self._progress = display or NoProgress()
        self._latest: dict[str, float] = {}
        self._last_step: int | None = None  # the step, place in the file and values of the last row
        self._last_offset = 0
        self._last_values: dict[str, float] = {}
        self._start = time.monotonic() - (elapsed_before or 0.0)
        self._closed = False
        self._summary: dict | None = None  # as summary.json holds it, once written

    def log(self, step: int, row: Mapping[str, float | np.floating | np.integer | None],
            train_s: float | None = None, steps: Mapping[str, int] | None = None) -> None:
        """Record ``row`` at ``step``: a CSV row (absent or ``None`` columns blank), scalars, progress
        (``train_s``, seconds of training so far, measures it against a time limit). ``steps`` puts
        a column's scalar at a step of its own (an evaluation where its parameters were taken)."""
        if self._closed:
            raise RuntimeError(f"RunLogger for {self.run_dir} is closed")
        step = operator.index(step)
        unknown = sorted(set(row) - set(self.columns))
        if unknown:
            raise ValueError(f"unknown metric column(s) {', '.join(map(repr, unknown))}; this run logs "
                             f"{', '.join(self.columns)}")
        values = {name: _number(name, row[name]) for name in self.columns if row.get(name) is not None}
        if step == self._last_step:
            # A row at the last row's step (the final row, or an evaluation that came in after the
            # last chunk) completes that row instead of repeating its step: metrics.csv's steps
            # stay strictly increasing.
            values = {**self._last_values, **values}
            self._file.truncate(self._last_offset)
            self._file.seek(self._last_offset)
        self._last_step, self._last_offset, self._last_values = step, self._file.tell(), values
        self._write([step, f"{self.elapsed_s() if train_s is None else train_s:.3f}",
                     *(_cell(values[name]) if name in values else "" for name in self.columns)])
        if self._tb is not None:
            for name, value in values.items():
                self._tb.add_scalar(self._tags[name], value, global_step=(steps or {}).get(name, step))
        for name in self.flagged:
            before, now = self._latest.get(name, 0.0), values.get(name, 0.0)
            if now > before:
                self.message(f"warning: {name} rose to {now:,.0f} (+{now - before:,.0f} since the last row)")
        self._latest.update(values)
        shown = {name: self._latest[name] for name in self.flagged if self._latest.get(name)}
        shown.update({name: self._latest[name] for name in self.shown if name in self._latest and name not in shown})
        self._progress.update(step, shown, train_s)

    def message(self, text: str) -> None:
        """Print ``text`` as its own line (above the bar when there is one)."""
        self._progress.message(text)

    def elapsed_s(self) -> float:
        """Seconds since the logger started (including earlier runs this one resumed)."""
        return time.monotonic() - self._start

    def close(self, summary: Mapping[str, object]) -> Path:
        """Write ``summary.json`` and close everything; returns its path.

        Later calls change nothing and return the same path. A ``summary`` that can't be stored
        as JSON raises ``TypeError`` before anything is closed, so the call can be repeated.
        """
        if self._closed:
            return self.summary_path
        record = cast(dict, jsonable(dict(summary)))  # jsonable keeps a dict a dict
        self._closed = True
        try:
            write_json(self.summary_path, record)
            self._summary = record
        finally:
            self._close_files()
        return self.summary_path

    def amend(self, fields: Mapping[str, object]) -> None:
        """Add ``fields`` to the ``summary.json`` that :meth:`close` wrote (what is known only once
        the run's processes are stopped, after the summary had to be safe on disk); nothing if
        none was written."""
        if self._summary is None:
            return
        self._summary = {**self._summary, **cast(dict, jsonable(dict(fields)))}  # jsonable keeps a dict a dict
        write_json(self.summary_path, self._summary)

    def discard(self) -> None:
        """Close everything without writing ``summary.json`` (a resumed run that failed before
        training keeps the summary its earlier life wrote); later calls of :meth:`close` write nothing."""
        if self._closed:
            return
        self._closed = True
        self._close_files()

    def __enter__(self) -> RunLogger:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        # A run that ends by an exception still leaves a summary saying how it ended.
        if exc is None:
            self.close({})
        else:
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            self.close({"status": status, "error": f"{type(exc).__name__}: {exc}"})

    def _write(self, cells: Sequence[object]) -> None:
        try:
            self._csv.writerow(cells)
            self._file.flush()
        except OSError as err:
            full = disk_full(err, self.csv_path, len(",".join(map(str, cells))) + 1)
            if full is None:
                raise
            raise full from err

    def _close_files(self) -> None:
        # Rows are flushed as they are written, so closing writes nothing new, unless a row found
        # no room (already raised as a DiskFullError): it is dropped, and a resume ignores the half
        # of it the file may hold.
        with contextlib.suppress(OSError):
            self._file.close()
        if self._tb is not None:
            self._tb.close()
        self._progress.close()


def _write_hparams(writer: SummaryWriter, hparams: Mapping[str, object], metrics: Sequence[str]) -> None:
    """TensorBoard's HParams record, in this run's own event file, so the dashboard shows the
    run's real scalars (``metrics``) beside its settings (``SummaryWriter.add_hparams`` would
    write them into a run directory of their own)."""
    from torch.utils.tensorboard.summary import hparams as hparams_summaries

    values = {name: value if isinstance(value, (bool, int, float, str)) else str(value)
              for name, value in hparams.items()}
    # no-untyped-call: torch leaves its TensorBoard summaries unannotated
    for summary in hparams_summaries(values, {tag: 0.0 for tag in metrics}):  # type: ignore[no-untyped-call]
        # attr-defined: torch types file_writer by the None it starts as; SummaryWriter opens it at once
        writer.file_writer.add_summary(summary)  # type: ignore[attr-defined]


def _check_columns(columns: tuple[str, ...]) -> None:
    for name in columns:
        if not isinstance(name, str) or not name:
            raise ValueError(f"metric column names must be non-empty strings, got {name!r}")
        if name in METRICS_HEAD:
            raise ValueError(f"metric column {name!r} is reserved (metrics.csv starts with step,time_s)")
    duplicates = sorted({name for name in columns if columns.count(name) > 1})
    if duplicates:
        raise ValueError(f"metric columns repeat: {', '.join(duplicates)}")


def _prepare_resume(csv_path: Path, header: list[str], resume_at: float | None) -> float | None:
    """Check ``csv_path``'s header, drop a half-written last line and the rows after step
    ``resume_at``; returns its last ``time_s``.

    ``None`` when the file holds no complete line (not even the header): start it afresh. A
    damaged file is a :class:`ConfigError` naming it (see :func:`read_metrics`).
    """
    size, lines, rows = read_metrics(csv_path)
    kept = len(lines)
    if rows and rows[0] != header:
        raise ConfigError("resume", f"cannot resume {csv_path}: its header is {clipped(','.join(rows[0]), 1000)}, this "
                                    f"run logs {','.join(header)}")
    if resume_at is not None and len(rows) == len(lines):  # one line per row: no cell holds a newline
        kept = next((k for k, row in enumerate(rows) if k and float(row[0]) > resume_at), len(rows))
        rows = rows[:kept]
    length = len("".join(lines[:kept]).encode("utf-8"))
    if length < size:
        # A run killed mid-write leaves a partial row, and rows after the checkpoint are work the
        # resumed run does again: the file is cut back, on a clean line.
        fd = open_inside(csv_path, os.O_WRONLY, "resume")
        try:
            os.ftruncate(fd, length)
        finally:
            os.close(fd)
    if not rows:
        return None
    return float(rows[-1][1]) if len(rows) > 1 else 0.0


def _number(name: str, value: object) -> float:
    if isinstance(value, numbers.Real):
        return value  # type: ignore[return-value]  # any real number, kept as it came: _cell writes integers as such
    raise TypeError(f"metric {name!r} must be a real number, got {type(value).__name__} {value!r}")


def _cell(value: float) -> str:
    if isinstance(value, numbers.Integral):
        return str(int(value))
    value = float(value)
    return repr(value) if math.isfinite(value) else str(value)
