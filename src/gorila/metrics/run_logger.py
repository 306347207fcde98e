"""Everything a run writes while it trains: config, metrics CSV, TensorBoard scalars, progress, summary.

::

    with RunLogger(run_dir, config, ["return", "loss", "lag"], total=100_000) as logger:
        logger.log(step=2_000, row={"loss": 0.013, "lag": 2})     # "return" left blank
        logger.message("eval return 500.0")
        logger.close({"final_return": 500.0})

A run directory then holds ``config.json``, ``metrics.csv`` (``step,time_s,<columns>``),
TensorBoard event files and ``summary.json``.
"""

from __future__ import annotations

import csv
import io
import math
import numbers
import operator
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from rich.console import Console

from gorila.atomic import jsonable, write_json
from gorila.metrics.progress import open_progress

#: The first this-many columns are shown beside the progress display: list the ones to watch first.
SHOWN_COLUMNS = 4
_RESERVED = ("step", "time_s")


class RunLogger:
    """Writes one run's outputs into ``run_dir``.

    * ``config.json``: ``config`` as JSON, written on construction (tuples become lists,
      numpy scalars numbers, ``inf`` the string ``"inf"``; see :func:`gorila.atomic.jsonable`).
    * ``metrics.csv``: a row per :meth:`log`, flushed at once so a killed run keeps its rows.
      ``time_s`` counts seconds since the logger started, continuing across a resume.
    * TensorBoard scalars, tagged by column name (``tensorboard=False`` to skip).
    * A live ``rich`` bar when ``console`` is a terminal, otherwise a plain line at most every
      2 s. ``console`` defaults to stderr (stdout is for results).
    * ``summary.json`` on :meth:`close`.

    ``resume=True`` appends to an existing ``metrics.csv`` (its header must match); without it
    an existing ``metrics.csv`` is refused rather than overwritten.
    """

    def __init__(self, run_dir: Path, config: Mapping[str, object], columns: Sequence[str], *,
                 total: float | None = None, unit: str = "steps", description: str = "",
                 tensorboard: bool = True, console: Console | None = None, resume: bool = False):
        self.columns = tuple(columns)
        _check_columns(self.columns)
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path = self.run_dir / "metrics.csv"
        self.summary_path = self.run_dir / "summary.json"
        header = [*_RESERVED, *self.columns]

        if self.csv_path.exists() and not resume:
            raise FileExistsError(f"{self.csv_path} exists; pass resume=True to append to it, "
                                  "or log into a new run directory")
        elapsed_before = _prepare_resume(self.csv_path, header) if self.csv_path.exists() else None
        fresh = elapsed_before is None

        write_json(self.run_dir / "config.json", config)
        self._file = open(self.csv_path, "a", newline="", encoding="utf-8")
        self._csv = csv.writer(self._file)
        if fresh:
            self._write(header)

        self._tb = None
        if tensorboard:
            # Imported here: it pulls in TensorBoard, which a logger without it shouldn't pay for.
            from torch.utils.tensorboard import SummaryWriter
            self._tb = SummaryWriter(log_dir=str(self.run_dir), flush_secs=10)
        self._progress = open_progress(console or Console(stderr=True), total=total, unit=unit,
                                       description=description)
        self._latest: dict[str, float] = {}
        self._start = time.monotonic() - (elapsed_before or 0.0)
        self._closed = False

    def log(self, step: int, row: Mapping[str, float | None]) -> None:
        """Record ``row`` at ``step``: a CSV row (absent or ``None`` columns blank), scalars, progress."""
        if self._closed:
            raise RuntimeError(f"RunLogger for {self.run_dir} is closed")
        step = operator.index(step)
        unknown = sorted(set(row) - set(self.columns))
        if unknown:
            raise ValueError(f"unknown metric column(s) {', '.join(map(repr, unknown))}; this run logs "
                             f"{', '.join(self.columns)}")
        values = {name: _number(name, row[name]) for name in self.columns if row.get(name) is not None}
        self._write([step, f"{self.elapsed_s():.3f}",
                     *(_cell(values[name]) if name in values else "" for name in self.columns)])
        if self._tb is not None:
            for name, value in values.items():
                self._tb.add_scalar(name, value, global_step=step)
        self._latest.update(values)
        shown = {name: self._latest[name] for name in self.columns[:SHOWN_COLUMNS] if name in self._latest}
        self._progress.update(step, shown)

    def message(self, text: str) -> None:
        """Print ``text`` as its own line (above the bar when there is one)."""
        self._progress.message(text)

    def elapsed_s(self) -> float:
        """Seconds since the logger started (including earlier runs this one resumed)."""
        return time.monotonic() - self._start

    def close(self, summary: Mapping[str, object]) -> Path:
        """Write ``summary.json`` (``time_s`` plus ``summary``) and close everything; returns its path.

        Later calls change nothing and return the same path. A ``summary`` that can't be stored
        as JSON raises ``TypeError`` before anything is closed, so the call can be repeated.
        """
        if self._closed:
            return self.summary_path
        record = jsonable({"time_s": round(self.elapsed_s(), 3), **summary})
        self._closed = True
        try:
            write_json(self.summary_path, record)
        finally:
            self._file.close()
            if self._tb is not None:
                self._tb.close()
            self._progress.close()
        return self.summary_path

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
        self._csv.writerow(cells)
        self._file.flush()


def _check_columns(columns: tuple[str, ...]) -> None:
    for name in columns:
        if not isinstance(name, str) or not name:
            raise ValueError(f"metric column names must be non-empty strings, got {name!r}")
        if name in _RESERVED:
            raise ValueError(f"metric column {name!r} is reserved (metrics.csv starts with step,time_s)")
    duplicates = sorted({name for name in columns if columns.count(name) > 1})
    if duplicates:
        raise ValueError(f"metric columns repeat: {', '.join(duplicates)}")


def _prepare_resume(csv_path: Path, header: list[str]) -> float | None:
    """Check ``csv_path``'s header, drop a half-written last line; returns its last ``time_s``.

    ``None`` when the file holds no complete line (not even the header): start it afresh.
    """
    data = csv_path.read_bytes()
    if not data.endswith(b"\n"):
        # A run killed mid-write leaves a partial row; the resumed run starts on a clean line.
        data = data[: data.rfind(b"\n") + 1]
        with open(csv_path, "r+b") as f:
            f.truncate(len(data))
    if not data:
        return None
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    if rows[0] != header:
        raise ValueError(f"cannot resume {csv_path}: its header is {','.join(rows[0])}, this run logs "
                         f"{','.join(header)}")
    return float(rows[-1][1]) if len(rows) > 1 else 0.0


def _number(name: str, value: object) -> float:
    if isinstance(value, numbers.Real):
        return value
    raise TypeError(f"metric {name!r} must be a real number, got {type(value).__name__} {value!r}")


def _cell(value: float) -> str:
    if isinstance(value, numbers.Integral):
        return str(int(value))
    value = float(value)
    return repr(value) if math.isfinite(value) else str(value)
