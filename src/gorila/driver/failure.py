"""What a run that fails while it trains keeps, and what it says ended it. The loop
(:mod:`gorila.driver.loop`) calls both when its chunk loop raises::

    lost = cluster_lost(runtime, report, error)            # a ClusterLostError, or None
    summary = save_after_failure(report, runtime, lost or error, offline=lost is not None)
    raise out_of_space(report, error)      # a DiskFullError: the same, with what the run kept and how to go on

A run whose cluster is gone cannot ask its shards for anything: it writes the summary from what
the driver holds (the counters of its last row) and names the last checkpoint it saved, the one a
``--resume`` continues from.
"""

from __future__ import annotations

from typing import Any

from gorila.core import Runtime
from gorila.driver.report import Report
from gorila.errors import ClusterLostError, DiskFullError, EnvFailedError, NonFiniteError, WorkerTimeoutError

#: ``stop_reason`` of a run that failed, by the error that ended it.
FAILURE_REASONS = ((WorkerTimeoutError, "timeout"), (EnvFailedError, "env_failures"),
                   (NonFiniteError, "nonfinite_gradients"), (ClusterLostError, "cluster_lost"),
                   (DiskFullError, "disk_full"))


def cluster_lost(runtime: Runtime, report: Report, error: Exception) -> ClusterLostError | None:
    """The :class:`ClusterLostError` that ``error`` (raised by a call into the run's processes)
    means when the runtime's cluster no longer answers at all, saying what the run kept; None when
    the cluster is there (the error is the run's own) or the runtime has no cluster."""
    if isinstance(error, (EnvFailedError, NonFiniteError)):
        return None  # gorila's own verdict on the run, not a cluster's failure
    probe = getattr(runtime, "cluster_lost", None)  # the Ray runtime's; the local one has no cluster to lose
    address = probe() if probe is not None else None
    if address is None:
        return None
    return ClusterLostError(
        f"the Ray cluster at {address} stopped answering while the run trained (its head node or the network to "
        f"it went down; the call that failed: {type(error).__name__}). The run is saved up to {_kept(report)}; "
        f"continue it with gorila train --resume {report.out.run_dir} once a cluster is up")


def out_of_space(report: Report, error: DiskFullError) -> DiskFullError:
    """``error`` (a file of the run that found no room) with what the run kept and how to go on."""
    room = "make room on that disk (or move the run directory to a larger one)"
    if report.last_checkpoint is None and report.run_config.resume is None:
        return DiskFullError(f"{error}. The run saved no checkpoint to continue from: {room} and start it again")
    return DiskFullError(f"{error}. The run is saved up to {_kept(report)}: {room}, then continue it with "
                         f"gorila train --resume {report.out.run_dir}")


def _kept(report: Report) -> str:
    """The checkpoint a ``--resume`` of the run would continue from, in words."""
    kept = report.last_checkpoint
    return (f"its last checkpoint, {kept['path']} ({kept['progress']})" if kept is not None
            else "the checkpoint it started from" if report.run_config.resume is not None else "no checkpoint")


def save_after_failure(report: Report, runtime: Runtime, error: Exception, *, offline: bool = False) -> dict[str, Any]:
    """What a failed run keeps: a final row, a final checkpoint of the shards' parameters (the last
    good ones: a shard never applies a non-finite update) and the full summary, ``status: "failed"``, its
    ``stop_reason`` (the kind of failure) and ``error``; each part as far as it can be had (a part
    that fails says why in the summary instead). ``offline``: the cluster is gone, so nothing is
    asked of its processes: the last checkpoint saved stays the last (``last_checkpoint``)."""
    reason = next((name for kind, name in FAILURE_REASONS if isinstance(error, kind)), "error")
    failed: dict[str, Any] = {"status": "failed", "stop_reason": reason, "error": f"{type(error).__name__}: {error}"}
    train_s = report.progress.train_s()
    report.workers = None  # a worker may have failed part-way through a step: its state is not saved
    if offline:
        report.hurried = True  # no worker answers either
        report.out.logger.message(f"the run failed ({failed['error']}): saving the summary")
    else:
        report.out.logger.message(f"the run failed ({failed['error']}): saving a final checkpoint and the summary")
        try:
            report.row(train_s, final=True)  # the servers' counters as they are now, for the checkpoint too
        except Exception as err:
            failed["final_row_error"] = f"{type(err).__name__}: {err}"
        try:
            report.checkpoint(train_s)
        except Exception as err:  # a dead shard: the checkpoints before stay the last
            failed["final_checkpoint_error"] = f"{type(err).__name__}: {err}"
    failed["last_checkpoint"] = report.last_checkpoint
    try:
        return {**report.summary(runtime, train_s, reason, offline=offline), **failed}
    except Exception as err:
        return {**failed, "summary_error": f"{type(err).__name__}: {err}"}
