"""SIGINT (Ctrl-C) and SIGTERM during a run: stop cleanly, losing nothing.

While the run starts, a signal aborts it at once (there is nothing to save yet). Once the driver's
loop runs, a signal only asks it to stop after the chunk under way: the workers stop, the driver
writes a final checkpoint, ``summary.json`` (``stop_reason: "interrupted"``) and the learning curve,
shuts the runtime down, and raises :class:`Interrupted` carrying the summary. A second signal
aborts at once::

    with StopSignals() as signals:
        runtime = make_runtime(...)          # a signal here raises Interrupted
        signals.install()                    # again: ray.init installs a SIGTERM handler of its own
        signals.arm()
        while not signals.received: ...      # the loop polls between chunks
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A run ended by SIGINT or SIGTERM. ``summary`` is ``summary.json``'s dict when the run had
    started training (and saved everything), None when it was stopped during start-up."""

    def __init__(self, signum: int, summary: dict[str, Any] | None = None):
        self.signum = signum
        self.summary = summary
        super().__init__(f"interrupted by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum


class StopSignals:
    """Catches SIGINT and SIGTERM for the duration of a ``with`` block (see the module doc).

    Signal handlers can only be set from the main thread: elsewhere (a run started from a worker
    thread) this does nothing and the signals keep their usual effect.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._armed = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        self.install()
        return self

    def install(self) -> None:
        """Put this object's handler in place (again, if something replaced it)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNALS:
            previous = signal.signal(signum, self._handle)
            self._previous.setdefault(signum, previous)

    def arm(self) -> None:
        """From now on a first signal asks the loop to stop instead of aborting."""
        self._armed = True

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._armed and self.received is None:
            self.received = signum
            return
        raise Interrupted(signum)

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()
