"""What a run shows the person who started it, on stderr (stdout is for results), and since when.

::

    terminal = Terminal(NORMAL)                     # QUIET: nothing; VERBOSE: Ray's own logs too
    terminal.line(f"run directory: {run_dir}")
    with terminal.stage("starting Ray"):            # "   2.1 s  starting Ray", a live timer on a terminal
        ...
    at = terminal.stamp("runtime shut down")        # seconds since the start; the line with VERBOSE only
    display = terminal.progress(Limits(100_000, "env steps"), description="dqn CartPole-v1 async")

Times are counted from ``started_at``: the start of the command (the process), or of the call
that started the run when gorila is used as a library.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from gorila.metrics.cputime import process_start_time
from gorila.metrics.progress import Display, Limits, NoProgress, open_progress

QUIET, NORMAL, VERBOSE = 0, 1, 2


class Terminal:
    """The run's lines, start-up stages and progress display, at a verbosity::

        Terminal(QUIET)     # nothing at all (``--quiet``; ``gorila.train`` by default)
        Terminal(NORMAL)    # run directory, stages, progress, evaluations, checkpoints
        Terminal(VERBOSE)   # and Ray's own start-up and worker logs
    """

    def __init__(self, verbosity: int = NORMAL, *, started_at: float | None = None,
                 console: Console | None = None):
        self.verbosity = verbosity
        self.started_at = process_start_time() if started_at is None else started_at
        self.console = console or Console(stderr=True)

    @property
    def verbose(self) -> bool:
        return self.verbosity >= VERBOSE

    def elapsed(self) -> float:
        """Seconds since ``started_at``."""
        return time.time() - self.started_at

    def line(self, text: str) -> None:
        """Print ``text`` unless quiet."""
        if self.verbosity >= NORMAL:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def stamp(self, text: str) -> float:
        """The time since the start; with ``VERBOSE`` also ``text``'s line stamped with it (the
        stages of a run's end, which a person watching needs no more than the last line's)."""
        elapsed = self.elapsed()
        if self.verbose:
            self.line(f"{elapsed:7.1f} s  {text}")
        return elapsed

    @contextmanager
    def stage(self, text: str) -> Iterator[None]:
        """A step of the start-up: its line, stamped with the time since the start, and on a
        terminal a spinner with the stage's own running time until it is done."""
        self.line(f"{self.elapsed():7.1f} s  {text}")
        if self.verbosity < NORMAL or not self.console.is_terminal:
            yield
            return
        spinner = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                           console=self.console, transient=True)
        spinner.add_task(text)
        with spinner:
            yield

    def progress(self, limits: Limits, *, description: str) -> Display:
        """The progress display: a live bar on a terminal, plain lines otherwise, none when quiet."""
        if self.verbosity < NORMAL:
            return NoProgress()
        return open_progress(self.console, limits, description=description)
