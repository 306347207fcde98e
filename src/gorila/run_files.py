"""A run directory's own files: opened without following a symbolic link out of the directory,
and checked before a run starts, so that a damaged or hostile directory is refused by name (a
:class:`~gorila.errors.ConfigError`, exit 2) with nothing started and nothing written::

    check_run_dir(Path("runs/a3c"), "resume", resume=True)   # before the run builds anything
    fd = open_inside(run_dir / "metrics.csv", os.O_RDWR)      # ConfigError if it is a link

A link planted in a run directory (``metrics.csv -> ~/.bashrc``) would otherwise have the run
truncate or append to the file it points at. Nor does a run directory name code: an env id of
Gymnasium's ``module:EnvId`` form imports ``module``, so the one a run's ``config.json`` records is
made only once the user names it again (:func:`check_recorded_env`)::

    check_recorded_env(run_dir, "my_envs:Maze-v0", given=None, field="resume")   # ConfigError: say --env
"""

from __future__ import annotations

import csv
import io
import math
import os
import tempfile
from pathlib import Path

from gorila.errors import ConfigError
from gorila.validate import clipped, excerpt

#: The files and directories a run writes in its directory, none of which may be a link.
RUN_FILES = ("metrics.csv", "config.json", "summary.json", "checkpoints", "checkpoints/best")
#: The first two columns of every metrics.csv row.
METRICS_HEAD = ("step", "time_s")


def open_inside(path: Path, flags: int, field: str = "run_dir", mode: int = 0o644) -> int:
    """``os.open(path, flags)`` that refuses a symbolic link at ``path`` (``O_NOFOLLOW``) as a
    :class:`ConfigError` naming ``field`` and the file; other errors are raised as they come."""
    try:
        return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), mode)
    except OSError:
        if os.path.islink(path):
            raise ConfigError(field, _link(Path(path))) from None
        raise


def env_module(env_id: str) -> str | None:
    """The module Gymnasium imports to make ``env_id`` (``my_envs`` of ``my_envs:Maze-v0``), or None."""
    return env_id.partition(":")[0] if ":" in env_id else None


def check_recorded_env(run_dir: Path, recorded: object, given: str | None, field: str) -> None:
    """Refuse, naming ``field``, to make the env id ``recorded`` in ``run_dir``'s ``config.json``
    where it names a module to import and the user has not named the same id (``given``: ``--env``,
    or ``env=`` from Python): whoever wrote the directory chose that module, not the user."""
    module = env_module(recorded) if isinstance(recorded, str) else None
    if module is None or given == recorded:
        return
    raise ConfigError(field, f"{Path(run_dir) / 'config.json'} names the env {excerpt(recorded)}, which is made by "
                             f"importing the module {excerpt(module)}: a run directory never makes gorila import "
                             f"code. If you trust that module, name the env again: --env {excerpt(recorded)} "
                             f"(env={excerpt(recorded)} from Python)")


def writable_directory(directory: Path, field: str) -> Path:
    """``directory``, made if need be (its parents too) and written once with a file of gorila's own
    (gone at once), so that a directory gorila could not write in (a file where a directory of its
    path belongs, a read-only one, a full disk) is refused by name before anything is done for it."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as err:
        where = f" ({err.filename})" if err.filename and Path(err.filename) != directory else ""
        raise ConfigError(field, f"{directory} cannot be written: {err.strerror or err}{where}; choose another "
                                 "directory") from None
    return directory


def check_recorded_address(run_dir: Path, recorded: object, given: str | None, field: str) -> None:
    """Refuse, naming ``field``, to join the Ray cluster at ``recorded`` (a run's ``config.json``)
    unless the user names an address again (``given``: ``--address``, or ``address=`` from Python):
    a cluster the driver joins runs its processes and sends it replies the driver unpickles, so the
    directory's writer would choose who does. ``local`` (this machine's embedded Ray) needs no naming."""
    if recorded is None or recorded == "local" or given is not None:
        return
    raise ConfigError(field, f"{Path(run_dir) / 'config.json'} names the Ray cluster at {excerpt(recorded)}, which "
                             "a resume would join and run its processes on: a run directory never chooses where "
                             f"gorila connects. To join it, name it again: --address {excerpt(recorded)} "
                             f"(address={excerpt(recorded)} from Python); --address local runs on this machine")


def check_run_dir(run_dir: Path, field: str, *, resume: bool) -> None:
    """Refuse, naming ``field`` (``run_dir`` or ``resume``), a run directory the run could not
    write (it, or the nearest directory above it that exists, read-only or not a directory) or
    one whose files are links; with ``resume``, one whose ``metrics.csv`` is damaged."""
    run_dir = Path(run_dir)
    for name in RUN_FILES:
        if (run_dir / name).is_symlink():
            raise ConfigError(field, _link(run_dir / name))
    existing = run_dir
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(field, f"{existing} is not a directory, so {run_dir} cannot be made there; "
                                 "choose another directory")
    writable = [existing] + [run_dir / d for d in ("checkpoints", "checkpoints/best") if (run_dir / d).is_dir()]
    for directory in writable:
        if not os.access(directory, os.W_OK | os.X_OK):
            raise ConfigError(field, f"{directory} is read-only: the run could not write "
                                     f"{'there' if directory != existing else run_dir}; make it writable, "
                                     "or choose another directory")
    if resume and os.path.lexists(run_dir / "metrics.csv"):
        read_metrics(run_dir / "metrics.csv")  # refuses a damaged one by name


def _link(path: Path) -> str:
    return (f"{path} is a symbolic link: gorila writes a run's files only inside its directory and does not "
            "follow links out of it; remove the link")


def read_metrics(csv_path: Path) -> tuple[int, list[str], list[list[str]]]:
    """``metrics.csv``'s size in bytes, its complete lines and their rows (a half-written last line
    left out), read without following a link; a file that is not UTF-8, not CSV, or whose rows do not
    start with ``step,time_s`` and two numbers is a :class:`ConfigError` naming it (``resume``)."""
    fd = open_inside(csv_path, os.O_RDONLY, "resume")
    with open(fd, "rb") as f:
        data = f.read()
    complete = data[: data.rfind(b"\n") + 1]

    def damaged(why: str) -> ConfigError:
        return ConfigError("resume", f"{csv_path} is damaged ({why}): move it aside to resume without its rows, "
                                     "or start a new run")

    try:
        text = complete.decode("utf-8")
        rows = list(csv.reader(io.StringIO(text)))
    except UnicodeDecodeError as err:
        raise damaged(f"not UTF-8 text at byte {err.start:,}") from None
    except csv.Error as err:
        raise damaged(f"not CSV: {err}") from None
    if rows and rows[0][:2] != list(METRICS_HEAD):
        raise damaged(f"its header starts {clipped(','.join(rows[0][:2]))}, not step,time_s")
    for number, row in enumerate(rows[1:], start=2):
        try:
            if len(row) < 2 or not all(math.isfinite(float(cell)) for cell in row[:2]):
                raise ValueError
        except ValueError:
            raise damaged(f"line {number} does not start with a step and a time: "
                          f"{excerpt(','.join(row[:3]))}") from None
    return len(data), text.splitlines(keepends=True), rows
