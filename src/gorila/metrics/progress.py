"""What a run shows while it trains: a live bar on a terminal, sparse plain lines in a log file.

The percentage and the time left follow whichever limit ends the run first, the step budget or
the time limit on training::

    limits = Limits(total=100_000, unit="env steps", time_limit_s=60)
    display = open_progress(console, limits, description="dqn CartPole-v1 async")  # said once
    display.update(2_000, {"eval_return": 21.0, "loss": 0.013}, train_s=4.0)
    # ━━━━━━━━ 2% 2,000/100k env steps 0:06 left | eval 21  loss 0.013
    display.message("eval return 500.0")     # printed above the bar
    display.close()

A status line fits :data:`LINE_WIDTH` columns, bar included: the steps are shown once, counts
compactly (``123.5M``), and the values it is given that do not fit are left out, the last first
(so a caller lists the ones that matter most first).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

#: Plain lines are written at most this often, so a log file stays readable at any step rate.
LINE_INTERVAL_S = 2.0
#: A status line's width at most, the live bar included: a terminal's default width.
LINE_WIDTH = 80
BAR_WIDTH = 8
#: Shorter names of the values a run shows most often.
LABELS = {"eval_return": "eval", "train_return": "train", "env_failures": "env failures",
          "pushes_rejected_nonfinite": "NaN pushes", "eval_env_failures": "eval env failures",
          "env_steps_per_s": "steps/s"}


@dataclass(frozen=True)
class Status:
    """How far a run is: ``fraction`` (0..1) of the limit that ends it first, named by ``by``
    (the step unit, or ``"time limit"``), and the seconds left (``None`` until a rate is known)."""

    fraction: float | None
    eta_s: float | None
    by: str | None


@dataclass(frozen=True)
class Limits:
    """What ends a run: ``total`` steps of ``unit``, or ``time_limit_s`` seconds of training
    (start-up not counted), whichever comes first::

        limits = Limits(total=1_000_000, unit="env steps", time_limit_s=10)
        limits.status(step=20_000, train_s=5.0, rate=4_000.0)  # Status(0.5, 5.0, "time limit")

    A resumed run's time limit counts its own training, after the ``time_before_s`` of the run's
    earlier lives (``train_s`` counts them all); its step budget is the run's total.
    """

    total: float | None
    unit: str = "steps"
    time_limit_s: float | None = None
    time_before_s: float = 0.0

    def status(self, step: float, train_s: float | None, rate: float | None) -> Status:
        """Where the run stands at ``step`` after ``train_s`` seconds of training, ``rate`` steps
        per second: the limit with the least time left (the one with the larger fraction done
        while the step rate is still unknown)."""
        candidates: list[tuple[float | None, float, str]] = []
        if self.total:
            left = max(self.total - step, 0.0)
            candidates.append((left / rate if rate else None, step / self.total, self.unit))
        if self.time_limit_s and train_s is not None:
            own = train_s - self.time_before_s
            candidates.append((max(self.time_limit_s - own, 0.0), own / self.time_limit_s, "time limit"))
        if not candidates:
            return Status(None, None, None)
        timed = [(eta, fraction, by) for eta, fraction, by in candidates if eta is not None]
        if len(timed) == len(candidates):
            soonest, fraction, by = min(timed, key=lambda c: c[0])
            return Status(min(fraction, 1.0), soonest, by)
        eta, fraction, by = max(candidates, key=lambda c: c[1])
        return Status(min(fraction, 1.0), eta, by)

    def describe(self) -> str:
        """``"1,000,000 env steps or 10 s of training (start-up not counted), whichever comes first"``."""
        parts = []
        if self.total:
            parts.append(f"{self.total:,.0f} {self.unit}")
        if self.time_limit_s:
            more = " more" if self.time_before_s else ""
            parts.append(f"{self.time_limit_s:g} s{more} of training (start-up not counted)")
        if not parts:
            return "no limit"
        return " or ".join(parts) + (", whichever comes first" if len(parts) > 1 else "")


class Display(Protocol):
    """Where a run's progress goes: :class:`LiveProgress`, :class:`LineProgress` or :class:`NoProgress`."""

    def update(self, step: int, values: Mapping[str, float], train_s: float | None = None) -> None: ...
    def message(self, text: str) -> None: ...
    def close(self) -> None: ...


def open_progress(console: Console, limits: Limits, *, description: str,
                  clock: Callable[[], float] = time.monotonic) -> LiveProgress | LineProgress:
    """A :class:`LiveProgress` when ``console`` is a terminal, else a :class:`LineProgress`."""
    if console.is_terminal:
        return LiveProgress(console, limits, description=description, clock=clock)
    return LineProgress(console, limits, description=description, clock=clock)


class _Rate:
    """Steps per second since the first update this display saw (a resumed run starts late)."""

    def __init__(self, clock: Callable[[], float]):
        self._clock = clock
        self._first: tuple[float, float] | None = None

    def __call__(self, step: float) -> float | None:
        now = self._clock()
        if self._first is None:
            self._first = (step, now)
            return None
        steps, seconds = step - self._first[0], now - self._first[1]
        return steps / seconds if seconds > 0 and steps > 0 else None


def status_line(step: int, values: Mapping[str, float], limits: Limits, status: Status, width: int) -> str:
    """Where the run is and the values that fit in ``width`` columns, in the order given::

        42% 123.5M/200M env steps 1:23:45 left | eval 487.3  train 450.2
        42% of 3600 s, 1.2M env steps 34:48 left | env failures 3

    The value that counts the steps themselves (``env_steps`` beside env steps) is not repeated."""
    line = _where(step, limits, status)
    shown = ""
    for name, value in values.items():
        if name == limits.unit.replace(" ", "_"):
            continue
        item = f"{LABELS.get(name, name)} {_number(value)}"
        candidate = f"{shown}  {item}" if shown else f" | {item}"
        if len(line) + len(candidate) <= width:
            shown = candidate
    return line + shown


def _where(step: int, limits: Limits, status: Status) -> str:
    """What the percentage is of, the steps taken and the time left:
    ``"25% of 10 s, 30.7k env steps 0:06 left"``."""
    if status.by is None:
        return f"{_count(step)} {limits.unit}"
    percent = f"{100 * (status.fraction or 0.0):.0f}%"
    if status.by == limits.unit:
        text = f"{percent} {_count(step)}/{_count(limits.total)} {limits.unit}"
    else:
        text = f"{percent} of {limits.time_limit_s:g} s, {_count(step)} {limits.unit}"
    if status.eta_s is not None:
        text += f" {_clock_time(status.eta_s)} left"
    return text


def _count(value: float | None) -> str:
    """A count in at most six characters: ``9,999``, ``45.7k``, ``123.5M``, ``2.1G``."""
    value = float(value or 0)
    for threshold, scale, suffix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if abs(value) >= threshold:
            return f"{value / scale:.1f}".removesuffix(".0") + suffix
    return f"{value:,.0f}"


def _number(value: float) -> str:
    """A value as the line shows it: counts compactly, the rest with four significant digits."""
    if float(value).is_integer() or abs(value) >= 1e4:
        return _count(value)
    return f"{value:.4g}"


def _clock_time(seconds: float) -> str:
    """``"1:02:03"``, or ``"2:03"`` under an hour."""
    seconds = int(round(seconds))
    if seconds < 3600:
        return f"{seconds // 60}:{seconds % 60:02d}"
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class LiveProgress:
    """A ``rich`` progress bar with the status line beside it, redrawn in place; the description
    is said once, above it."""

    def __init__(self, console: Console, limits: Limits, *, description: str,
                 clock: Callable[[], float] = time.monotonic):
        self._limits = limits
        self._rate = _Rate(clock)
        # the bar and the one space rich puts between columns come out of the line's width
        self._width = min(console.width, LINE_WIDTH) - BAR_WIDTH - 1
        self._progress = Progress(BarColumn(bar_width=BAR_WIDTH), TextColumn("{task.fields[line]}"), console=console)
        # The bar runs from 0 to 1 of whichever limit ends the run first.
        self._task = self._progress.add_task("", total=1.0 if limits.total or limits.time_limit_s else None, line="")
        if description:
            console.print(description, markup=False, highlight=False)
        self._progress.start()

    def update(self, step: int, values: Mapping[str, float], train_s: float | None = None) -> None:
        """Move the bar to ``step`` (``train_s`` seconds into training) and show ``values``."""
        status = self._limits.status(step, train_s, self._rate(step))
        self._progress.update(self._task, completed=status.fraction or 0.0,
                              line=status_line(step, values, self._limits, status, self._width))

    def message(self, text: str) -> None:
        """Print ``text`` above the bar."""
        self._progress.console.print(text, markup=False, highlight=False)

    def close(self) -> None:
        """Draw the bar a last time and leave it on screen."""
        self._progress.stop()


class LineProgress:
    """One plain status line per update, at most one every :data:`LINE_INTERVAL_S` seconds; the
    description is said once, on the first.

    The last update is always shown by :meth:`close`, so the final values reach the log
    even when they arrived inside the interval.
    """

    def __init__(self, console: Console, limits: Limits, *, description: str,
                 clock: Callable[[], float] = time.monotonic):
        self._console = console
        self._limits = limits
        self._description = description
        self._clock = clock
        self._rate = _Rate(clock)
        self._last_print: float | None = None
        self._pending: str | None = None

    def update(self, step: int, values: Mapping[str, float], train_s: float | None = None) -> None:
        """Print the line for ``step`` unless one was printed within the interval."""
        status = self._limits.status(step, train_s, self._rate(step))
        line = status_line(step, values, self._limits, status, LINE_WIDTH)
        now = self._clock()
        if self._last_print is not None and now - self._last_print < LINE_INTERVAL_S:
            self._pending = line
            return
        if self._last_print is None and self._description:
            self._print(self._description)
        self._last_print = now
        self._pending = None
        self._print(line)

    def message(self, text: str) -> None:
        """Print ``text`` on its own line."""
        self._print(text)

    def close(self) -> None:
        """Print the last update if the interval held it back."""
        if self._pending is not None:
            self._print(self._pending)
            self._pending = None

    def _print(self, text: str) -> None:
        self._console.print(text, markup=False, highlight=False, soft_wrap=True)


class NoProgress:
    """Shows nothing (``--quiet``, or a library call that asked for silence)."""

    def update(self, step: int, values: Mapping[str, float], train_s: float | None = None) -> None:
        """Nothing to show."""

    def message(self, text: str) -> None:
        """Nothing to show."""

    def close(self) -> None:
        """Nothing to close."""
