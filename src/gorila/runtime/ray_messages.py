"""Which of Ray's own messages reach the console.

Ray's driver prints the errors its cluster reports (a thread polls them and prints each with a
``(raylet)`` prefix), whatever ``log_to_driver`` says. A worker process that dies while its task
runs gives two such lines, "A worker died or was killed while executing a task ..." and "Task
... failed. There are N retries remaining, so the task will be retried", though gorila restarts
the worker and says so itself. Without ``--verbose`` those two are left out; every other message
of Ray's still shows::

    show_retry_lines(verbose)    # after ray.init, in the driver

Ray offers no setting for this, so the filter wraps the function its error thread prints with
(a private name: where a Ray release lacks it, nothing is filtered, nothing breaks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The lines of a retried task, as Ray words them.
RETRY_LINES = ("retries remaining, so the task will be retried",
               "A worker died or was killed while executing a task by an unexpected system error")

_original: dict[str, Callable[..., Any]] = {}  # Ray's printer, while the filter stands in for it


def show_retry_lines(shown: bool) -> None:
    """Let Ray's lines about retried tasks through (``shown``), or leave them out."""
    from ray._private import worker as ray_worker  # the module whose error thread prints

    if not hasattr(ray_worker, "print_to_stdstream"):
        return
    if shown:
        if "print" in _original:
            ray_worker.print_to_stdstream = _original.pop("print")
        return
    if "print" in _original:
        return
    original = _original["print"] = ray_worker.print_to_stdstream

    def without_retries(data: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        lines = [line for line in data.get("lines", []) if not any(noise in str(line) for noise in RETRY_LINES)]
        if lines or not data.get("lines"):
            return original({**data, "lines": lines}, *args, **kwargs)
        return None

    ray_worker.print_to_stdstream = without_retries
