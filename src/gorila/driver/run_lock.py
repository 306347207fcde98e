"""One live run per run directory: an OS lock on ``RUN_DIR/run.lock``, held from before the run
writes anything there until its process ends.

Two runs in one directory (a ``--resume`` of a run that is still going, say) would interleave their
``metrics.csv`` rows, prune each other's checkpoints and overwrite each other's summary. The lock
is ``fcntl.flock`` on a file in the directory: the kernel releases it whenever its process ends
(SIGKILL and the OOM killer included), so a lock is never left held by a dead run. The file holds
the owner's PID while it is held and is emptied on a clean release; a PID found in it by the next
run is that of a run that ended without releasing it (killed), whose lock is taken over with a
message::

    with hold_run_dir(run_dir, "resume", terminal.line):   # RunDirLockedError (exit 2) if a live run holds it
        ...                                                 # write the run

Holding is re-entrant within a process (``launch`` holds the directory, and the driver it calls
holds it again), and the lock's descriptor is not inherited by the processes the run starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

from gorila.errors import RunDirLockedError

LOCK_NAME = "run.lock"

# The directories this process holds: resolved path -> [descriptor, depth].
_held: dict[Path, list[int]] = {}


@contextlib.contextmanager
def hold_run_dir(run_dir: Path, field: str = "run_dir",
                 message: Callable[[str], None] = lambda text: None) -> Iterator[None]:
    """Hold ``run_dir``'s lock within the block (creating the directory if need be). A directory
    that a live run holds is a :class:`RunDirLockedError` naming ``field`` (the flag that chose the
    directory) and the live run's PID; one whose last owner died holding it is taken over, and
    ``message`` says so."""
    path = Path(run_dir).resolve()
    if path in _held:
        _held[path][1] += 1
        try:
            yield
        finally:
            _held[path][1] -= 1
        return
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = _owner(fd)
        os.close(fd)
        who = f"PID {owner}" if owner else "another process"
        raise RunDirLockedError(field, f"{run_dir} is in use by a live run ({who}): a run directory holds one "
                                       f"run at a time. Wait for it to end, or stop it (kill -INT {owner or 'PID'}: "
                                       "it saves everything) and resume it then") from None
    except BaseException:
        os.close(fd)
        raise
    stale = _owner(fd)
    if stale:
        message(f"{run_dir}: taking over the lock of PID {stale}, which ended without releasing it (killed?)")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
    _held[path] = [fd, 1]
    try:
        yield
    finally:
        del _held[path]
        # Emptied first: a PID left in the file means its owner died while holding it.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the last descriptor of the open file releases the lock


def _owner(fd: int) -> str:
    """What the lock file says of its owner: ``PID`` (with ``on HOST`` when that is another
    machine's), or '' for an empty file."""
    text = os.pread(fd, 256, 0).decode("utf-8", "replace").split()
    if not text:
        return ""
    pid, host = text[0], text[1] if len(text) > 1 else ""
    return pid if host in ("", socket.gethostname()) else f"{pid} on {host}"
