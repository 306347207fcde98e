"""A run directory's own files: opened without following a symbolic link out of the directory,
and checked before a run starts, so that a damaged or hostile directory is refused by name (a
:class:`~gorila.errors.ConfigError`, exit 2) with nothing started and nothing written::

    check_run_dir(Path("runs/a3c"), "resume", resume=True)   # before the run builds anything
    fd = open_inside(run_dir / "metrics.csv", os.O_RDWR)      # ConfigError if it is a link

A link planted in a run directory (``metrics.csv -> ~/.bashrc``) would otherwise have the run
truncate or append to the file it points at.
"""

from __future__ import annotations

import os
from pathlib import Path

from gorila.errors import ConfigError

#: The files and directories a run writes in its directory, none of which may be a link.
RUN_FILES = ("metrics.csv", "config.json", "summary.json", "checkpoints", "checkpoints/best")


def open_inside(path: Path, flags: int, field: str = "run_dir", mode: int = 0o644) -> int:
    """``os.open(path, flags)`` that refuses a symbolic link at ``path`` (``O_NOFOLLOW``) as a
    :class:`ConfigError` naming ``field`` and the file; other errors are raised as they come."""
    try:
        return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), mode)
    except OSError:
        if os.path.islink(path):
            raise ConfigError(field, _link(Path(path))) from None
        raise


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
        from gorila.metrics.run_logger import read_metrics

        read_metrics(run_dir / "metrics.csv")  # refuses a damaged one by name


def _link(path: Path) -> str:
    return (f"{path} is a symbolic link: gorila writes a run's files only inside its directory and does not "
            "follow links out of it; remove the link")
