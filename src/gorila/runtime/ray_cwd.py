"""Where this process works while Ray starts or joins a cluster: an empty directory of its own.

``ray.init`` puts the driver's working directory first on the import path of every worker of the
run, and starts the embedded Ray's processes in it. Run from inside a run directory (``gorila train
--resume .``), every worker would then import the ``.py`` files the directory holds in place of
numpy, torch or gorila's own modules. So Ray starts here instead, and the driver goes back to its
own directory as soon as ``ray.init`` returns::

    with away_from_working_directory():     # os.getcwd() is an empty directory made for it
        ray.init(...)
    release_empty_directory()                # once Ray is shut down (its processes worked there)

Nothing of the run may depend on the driver's working directory in its processes: the paths they
are given (checkpoint directories) are absolute.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator

_empty: dict[str, str | None] = {"dir": None}  # this process's empty directory, while Ray may work there


@contextlib.contextmanager
def away_from_working_directory() -> Iterator[str]:
    """Work in an empty directory of this process's (private, made on first use) within the block;
    back in the directory it was in afterwards, however the block ends. Yields that directory."""
    empty = _empty["dir"] or tempfile.mkdtemp(prefix="gorila-ray-")
    _empty["dir"] = empty
    here = os.getcwd()
    os.chdir(empty)
    try:
        yield empty
    finally:
        os.chdir(here)


def release_empty_directory() -> None:
    """Remove the empty directory once no Ray process of this one works there (a directory
    something was written into is left as it is)."""
    directory, _empty["dir"] = _empty["dir"], None
    if directory is not None:
        with contextlib.suppress(OSError):
            os.rmdir(directory)
