"""Typed errors. Every failure a user or a worker can act on has its own class."""

from __future__ import annotations

import errno


class GorilaError(Exception):
    """Base class of every error gorila raises on purpose."""


class ConfigError(GorilaError, ValueError):
    """Invalid configuration, raised before anything starts.

    ``field`` is the config field (and, with dashes, the CLI flag) at fault::

        raise ConfigError("aggregate", "must be an integer >= 1, got 0")
    """

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # Rebuilt from its two parts (an exception pickles its message alone), as it crosses processes.
        return type(self), (self.field, self.message)

    @property
    def flag(self) -> str:
        """The CLI flag spelling of ``field`` (``count_within`` -> ``--count-within``)."""
        return "--" + self.field.replace("_", "-")


class GradientError(GorilaError, ValueError):
    """A pushed gradient has the wrong shape or dtype; the message names both."""


class VersionError(GorilaError, ValueError):
    """A push claims a version the shard has not reached yet (a version from the future)."""


class NonFiniteError(GorilaError, ArithmeticError):
    """A worker pushed too many non-finite gradients in a row: the run stops rather than train on garbage."""


class EnvFailedError(GorilaError, RuntimeError):
    """An actor's environments failed too often (raised in step or reset, or returned bad observations).
    ``failures`` is how many of them had failed in all: the run counts them (``env_failures``) though
    the actor never reported the last ones."""

    def __init__(self, message: str, failures: int = 0):
        super().__init__(message)
        self.failures = failures

    def __reduce__(self) -> tuple[type, tuple[str, int]]:
        # Rebuilt from its message and count (an exception pickles its message alone), as it crosses processes.
        return type(self), (str(self), self.failures)


class ShardRestartedError(GorilaError, ConnectionError):
    """A parameter shard's process went away during a call (it is restarted from its last checkpoint)."""


class WorkerTimeoutError(GorilaError, TimeoutError):
    """A remote call or a wait did not finish within its ``timeout_s``."""


class SchedulingError(GorilaError, RuntimeError):
    """A worker could not be placed (e.g. it asks for more CPUs than the cluster has), or did not start in time."""

    @classmethod
    def not_started(cls, what: str, timeout_s: float, asks: float, free: float, total: float,
                    limited: str = "") -> SchedulingError:
        """Why ``what`` is not up after ``timeout_s``: no room for it in the cluster, a process
        ``limited`` in its address space (the limit in words; its processes die as they start), or
        (room enough) a start too slow, as on a machine whose cores other programs keep busy."""
        cpus = f"each asks for {asks} CPU and the cluster has {free:.2f} of {total} CPUs free"
        if free < asks:
            return cls(f"{what} could not be placed within {timeout_s:.0f} s: {cpus}. "
                       "Use fewer workers or a bigger cluster.")
        if limited:
            return cls(f"{what} did not start within {timeout_s:.0f} s ({cpus}): this process is {limited}, which "
                       "its processes inherit, and Ray's processes die as they start when the limit does not hold "
                       "them. Raise the limit (ulimit -v unlimited) or train in this process (--runtime local).")
        return cls(f"{what} did not start within {timeout_s:.0f} s, though there is room for them ({cpus}): "
                   "starting is slow, as on a machine whose cores other programs keep busy. Try again on a "
                   "quieter machine, or see Ray's own logs (--verbose).")

    @classmethod
    def no_gpu(cls, what: str, timeout_s: float | None, asks: float, total: float) -> SchedulingError:
        """``what`` asked for a GPU share and none was free within ``timeout_s`` (None: none can be,
        on a cluster that no node joins: the embedded Ray)."""
        asked = (f"each asks for {asks:g} GPU (--device cuda, or --inference-device cuda for an inference server) "
                 "and the cluster")
        cpu = "or use --device cpu (auto picks cpu where the driver's machine has no GPU)"
        if timeout_s is None:
            have = "has no GPU" if total == 0 else f"has {total:g} GPUs"
            return cls(f"{what} could not be placed: {asked} {have}, the embedded Ray of this machine, which no "
                       f"node joins. Run on a Ray cluster with GPUs (--address), {cpu}.")
        have = "has no GPU" if total == 0 else f"has {total:g} GPUs, not enough of them free"
        return cls(f"{what} could not be placed within {timeout_s:.0f} s: {asked} {have}. "
                   f"Add a node with a GPU (ray start --num-gpus N), {cpu}.")


class ClusterUnreachableError(GorilaError, ConnectionError):
    """No Ray cluster answers at the address given (``--address`` or ``RAY_ADDRESS``); the message names it."""


class CheckpointError(GorilaError, RuntimeError):
    """A checkpoint is missing, corrupt (checksum mismatch) or of another run."""


class RunDirLockedError(ConfigError):
    """The run directory is held by a live run (its lock, ``RUN_DIR/run.lock``); the message names
    its PID. A usage error (exit 2): the directory chosen is the thing to change, or to wait for."""


class DiskFullError(GorilaError, OSError):
    """A file of the run could not be written for want of space (the disk, or the user's quota, is
    full): the message names the file, what the write needed and what was free. A checkpoint cut
    short this way leaves nothing behind; the ones before it stay whole, and ``--resume`` continues
    from the last of them once there is room::

        raise DiskFullError("no room for checkpoint 7 in run/checkpoints: ...", errno.ENOSPC)

    It is the ``OSError`` it was, ``errno`` and all (``ENOSPC``, or ``EDQUOT`` for a quota), in words.
    """

    def __init__(self, message: str, code: int | None = errno.ENOSPC):
        super().__init__(message)
        self.errno = code

    def __reduce__(self) -> tuple[type, tuple[str, int | None]]:
        # Rebuilt from its message and its errno (OSError pickles its arguments alone), as it crosses processes.
        return type(self), (str(self), self.errno)


class SnapshotRefusedError(ConfigError, CheckpointError):
    """The workers' snapshot of the checkpoint a ``--resume`` continues from holds what a snapshot
    may not (code, a class of another package, a malformed tree): the run directory is refused
    before anything trains, naming ``resume`` (exit 2), and nothing the snapshot names is run. It is
    a :class:`CheckpointError` as well, the checkpoint being what is at fault::

        raise SnapshotRefusedError("resume", "the workers' snapshot names builtins:open, ...")
    """


class ClusterLostError(GorilaError, ConnectionError):
    """The Ray cluster the run was on stopped answering while it trained (its head node died, the
    network to it went down); the run saved what the driver held, and the message says where."""
