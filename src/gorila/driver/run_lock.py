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
holds it again), and the lock's descriptor is not inherited by the processes the run starts. The
lock is truncated and written, so it is opened without following a link and used only when it is
a plain file of its own (not a link, hard or symbolic, to a file elsewhere, nor a directory or a
pipe): anything else is refused by name (a :class:`~gorila.errors.ConfigError`, exit 2), untouched.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from gorila.errors import ConfigError, RunDirLockedError
from gorila.run_files import open_inside

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
    fd = _open_lock(path / LOCK_NAME, field)
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


def _open_lock(path: Path, field: str) -> int:
    """The lock file's descriptor: ``path`` opened (made if need be) without following a link,
    without blocking on a pipe, and refused unless it is a plain file with no other name."""
    def refused(what: str) -> ConfigError:
        return ConfigError(field, f"{path} is {what}, not the lock file gorila makes there: a run writes only its own "
                                  "files and follows no link out of its directory; remove it, or choose another "
                                  "directory")

    try:
        fd = open_inside(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, field)
    except ConfigError:  # O_NOFOLLOW met a symbolic link
        raise refused("a symbolic link") from None
    except IsADirectoryError:
        raise refused("a directory") from None
    except OSError as err:  # a socket (ENXIO), a file of another user's (EACCES), ...
        raise refused(f"a file gorila cannot open ({err.strerror})") from None
    info = os.fstat(fd)
    kind = None
    if not stat.S_ISREG(info.st_mode):
        kind = "not a plain file (a pipe or a device)"
    elif info.st_nlink > 1:  # the same file under another name, maybe outside the directory
        kind = f"a hard link, one of {info.st_nlink} names of one file"
    if kind is not None:
        os.close(fd)
        raise refused(kind)
    return fd


def _owner(fd: int) -> str:
    """What the lock file says of its owner: ``PID`` (with ``on HOST`` when that is another
    machine's), or '' for an empty file."""
    text = os.pread(fd, 256, 0).decode("utf-8", "replace").split()
    if not text:
        return ""
    pid, host = text[0], text[1] if len(text) > 1 else ""
    return pid if host in ("", socket.gethostname()) else f"{pid} on {host}"
