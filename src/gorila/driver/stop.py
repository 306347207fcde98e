"""SIGINT (Ctrl-C), SIGTERM and SIGHUP during a run: stop cleanly, losing nothing.

While the run starts, a signal aborts it at once (there is nothing to save yet), with one delay that
is Ray's: a SIGTERM to the whole process group in the first moment of Ray's GCS (before it has named
its port) ends the GCS, and ``ray.init`` waits for that port up to 30 s in C++, holding Python's
lock, so no handler runs until the wait gives up. Once the driver's loop runs, a signal only asks it
to stop after the chunk under way: the workers stop, the driver writes a final checkpoint,
``summary.json`` (``stop_reason: "interrupted"``) and the learning curve, shuts the runtime down,
and raises :class:`Interrupted` carrying the summary. A second signal hurries that end: the waits it
marks :meth:`~StopSignals.abandonable` (the chunks under way on Ray) are given up, and the final
checkpoint (the shards' parameters as they are) and the full summary are still written; only a third
quits at once. SIGHUP (a closed terminal, a dropped ssh session) stops a run as SIGTERM does: a run
on a terminal that went away is saved, not lost (what it would still have written to that terminal
goes to /dev/null)::

    with StopSignals() as signals:
        runtime = make_runtime(...)          # a signal here raises Interrupted
        signals.install()                    # again: ray.init installs a SIGTERM handler of its own
        signals.arm()
        while not signals.received: ...      # the loop polls between chunks
        signals.abandonable(chunks.drain, until)   # a second signal gives this wait up (skips it if it came before)
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A run ended by SIGINT, SIGTERM or SIGHUP. ``summary`` is ``summary.json``'s dict when the run had
    started training (and saved everything), None when it was stopped during start-up."""

    def __init__(self, signum: int, summary: dict[str, Any] | None = None):
        self.signum = signum
        self.summary = summary
        super().__init__(f"interrupted by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM, 129
        for SIGHUP)."""
        return 128 + self.signum


class _Abandon(Exception):
    """Raised by a second signal inside :meth:`StopSignals.abandonable` to end the wait there."""


class StopSignals:
    """Catches SIGINT, SIGTERM and SIGHUP for the duration of a ``with`` block (see the module doc):
    ``received`` is the first signal once armed, ``hurried`` whether a second one came.

    Signal handlers can only be set from the main thread: elsewhere (a run started from a worker
    thread) this does nothing and the signals keep their usual effect.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.hurried = False
        self._armed = False
        self._abandonable = False
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

    @contextlib.contextmanager
    def foreign(self) -> Iterator[None]:
        """Within: code that starts processes (they inherit SIGHUP held, see below) and puts a
        handler of its own in place of this object's (``ray.init``'s for SIGTERM calls
        ``sys.exit(15)``, which Python even drops where it lands in a callback). A signal it took
        still ends the start as :class:`Interrupted` when the block ends, this object's handler
        back in place: the C-level handler writes every signal to a wakeup file descriptor,
        whichever Python handler then runs."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        # SIGHUP held meanwhile: the processes started within (Ray's, the reaper) inherit it held,
        # so a closed terminal, which hangs up its whole process group, leaves them for the driver
        # to stop once it has saved the run. Held here, it is taken once the block ends.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        hook = sys.unraisablehook
        sys.unraisablehook = functools.partial(_unless_a_signal, hook)  # the wakeup fd tells those
        failed: BaseException | None = None
        try:
            yield
        except SystemExit as exit_:
            if exit_.code not in SIGNALS:
                raise
            raise Interrupted(int(exit_.code)) from None
        except Interrupted:
            raise
        except BaseException as error:  # a signal to the job also stops the processes being started
            failed = error
        finally:
            signal.set_wakeup_fd(previous)
            sys.unraisablehook = hook
            self.install()
            try:
                taken = [n for n in os.read(read, 4096) if n in SIGNALS]
            except BlockingIOError:
                taken = []
            os.close(read)
            os.close(write)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a SIGHUP that came meanwhile: Interrupted here
        if taken and not self._armed:  # a signal came, and the start went on or failed of it: it ends here
            raise Interrupted(taken[0]) from None
        if failed is not None:
            raise failed

    def abandonable(self, wait: Callable[..., T], *args: Any) -> T | None:
        """``wait(*args)``, which a second signal gives up: None then, or at once when the second
        signal came before it. Only for waits whose abandonment leaves nothing half-done in this
        process (replies from other processes)."""
        if self.hurried:
            return None
        self._abandonable = True
        try:
            return wait(*args)
        except _Abandon:
            return None
        finally:
            self._abandonable = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGHUP:
            _detach_terminal()
        if not self._armed:
            raise Interrupted(signum)
        if self.received is None:
            self.received = signum
        elif not self.hurried:
            # Raised only inside an abandonable wait: anywhere else (a checkpoint or a row being
            # written) an exception would leave the write half-done.
            self.hurried = True
            if self._abandonable:
                self._abandonable = False
                raise _Abandon
        else:
            raise Interrupted(self.received)

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()


def _unless_a_signal(hook: Callable[[Any], object], unraisable: Any) -> None:
    """``hook(unraisable)``, unless what Python could not raise is a signal's exception (dropped
    where a signal landed in a callback, such as the one ``os.fork`` runs): not a traceback to
    show, since :meth:`StopSignals.foreign` raises it again."""
    if not isinstance(unraisable.exc_value, (KeyboardInterrupt, SystemExit)):
        hook(unraisable)


def _detach_terminal() -> None:
    """After SIGHUP the terminal is most likely gone (closed, or its ssh session dropped), and every
    write to it fails (EIO), which would fail the very saving the signal asks for: the output that
    went to a terminal goes to /dev/null from now on. Pipes and files keep theirs."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        devnull = os.fstat(null).st_rdev
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                mode = os.fstat(fd)
                # a character device other than /dev/null: a terminal (isatty may fail once it hung up)
                if stat.S_ISCHR(mode.st_mode) and mode.st_rdev != devnull:
                    os.dup2(null, fd)
    finally:
        os.close(null)
