"""What a run shows while it trains: a live bar on a terminal, sparse plain lines in a log file.

::

    display = open_progress(console, total=100_000, unit="steps", description="dqn")
    display.update(2_000, {"return": 21.0, "loss": 0.013})
    display.message("eval return 500.0")     # printed above the bar
    display.close()
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from rich.console import Console
from rich.progress import (BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

#: Plain lines are written at most this often, so a log file stays readable at any step rate.
LINE_INTERVAL_S = 2.0


def open_progress(console: Console, *, total: float | None, unit: str, description: str,
                  clock: Callable[[], float] = time.monotonic) -> LiveProgress | LineProgress:
    """A :class:`LiveProgress` when ``console`` is a terminal, else a :class:`LineProgress`."""
    if console.is_terminal:
        return LiveProgress(console, total=total, unit=unit, description=description)
    return LineProgress(console, total=total, unit=unit, description=description, clock=clock)


class LiveProgress:
    """A ``rich`` progress bar with the latest values beside it; redrawn in place."""

    def __init__(self, console: Console, *, total: float | None, unit: str, description: str):
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.completed:,.0f} {task.fields[unit]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[values]}"),
            console=console,
        )
        self._task = self._progress.add_task(description, total=total, unit=unit, values="")
        self._progress.start()

    def update(self, step: int, values: Mapping[str, float]) -> None:
        """Move the bar to ``step`` and show ``values``."""
        self._progress.update(self._task, completed=step, values=format_values(values))

    def message(self, text: str) -> None:
        """Print ``text`` above the bar."""
        self._progress.console.print(text, markup=False, highlight=False)

    def close(self) -> None:
        """Draw the bar a last time and leave it on screen."""
        self._progress.stop()


class LineProgress:
    """One plain line per update, at most one every :data:`LINE_INTERVAL_S` seconds.

    The last update is always shown by :meth:`close`, so the final values reach the log
    even when they arrived inside the interval.
    """

    def __init__(self, console: Console, *, total: float | None, unit: str, description: str,
                 clock: Callable[[], float] = time.monotonic):
        self._console = console
        self._total = total
        self._unit = unit
        self._prefix = f"{description} " if description else ""
        self._clock = clock
        self._last_print: float | None = None
        self._pending: str | None = None

    def update(self, step: int, values: Mapping[str, float]) -> None:
        """Print the line for ``step`` unless one was printed within the interval."""
        line = self._line(step, values)
        now = self._clock()
        if self._last_print is not None and now - self._last_print < LINE_INTERVAL_S:
            self._pending = line
            return
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

    def _line(self, step: int, values: Mapping[str, float]) -> str:
        where = f"{step:,} {self._unit}"
        if self._total:
            where = f"{step:,}/{self._total:,.0f} {self._unit} ({100 * step / self._total:.0f}%)"
        shown = format_values(values)
        return f"{self._prefix}{where}" + (f" | {shown}" if shown else "")

    def _print(self, text: str) -> None:
        self._console.print(text, markup=False, highlight=False, soft_wrap=True)


def format_values(values: Mapping[str, float]) -> str:
    """``{"loss": 0.01234, "return": 500.0}`` -> ``"loss 0.01234  return 500"``."""
    return "  ".join(f"{name} {value:.4g}" for name, value in values.items())
