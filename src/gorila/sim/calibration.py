"""What the simulator knows of a machine: measured costs, saved as JSON.

``gorila simulate --calibrate --out FILE`` measures them (:mod:`gorila.sim.calibrate`); every
prediction reads them back::

    calibration = Calibration.load("calibration.json")
    work = calibration.workload("a3c")            # a Workload: compute times, parameters, ...
    calibration.apply_s("rmsprop", params=4_000)  # one push applied by a shard, in seconds
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gorila import validate
from gorila.atomic import write_json
from gorila.errors import ConfigError


@dataclass(frozen=True)
class Workload:
    """One algorithm's gradient as measured on the calibrating machine::

        work.compute_s[2]        # seconds per gradient while 2 workers computed at once
        work.gradient_seconds(rng, workers=8, concurrent=2, size=100)   # drawn for a sweep point

    ``compute_s[k]`` holds samples of one gradient's compute time taken while ``k`` workers
    computed at once on the machine (what they share: cores, caches, memory bandwidth).
    ``divides_data``: the workers split one data set (lstsq), so with ``m`` workers a gradient
    covers ``1/m`` of it and takes ``1/m`` of the time; otherwise each worker has its own
    environments and a gradient costs the same however many there are. ``pipelined``: the push's
    reply travels while the next gradient is computed (no barrier). ``env_steps_per_gradient`` is
    for one worker (lstsq: rows).
    """

    algo: str
    params: int
    optimizer: str
    env_steps_per_gradient: float
    divides_data: bool
    pipelined: bool
    compute_s: dict[int, tuple[float, ...]]

    def __post_init__(self) -> None:
        validate.integer("params", self.params, low=1)
        validate.number("env_steps_per_gradient", self.env_steps_per_gradient, low=0.0)
        if not self.compute_s or any(not samples for samples in self.compute_s.values()):
            raise ConfigError("calibration", f"{self.algo}: compute_s needs samples for at least one concurrency")
        for samples in self.compute_s.values():
            for t in samples:
                validate.number("calibration", t, low=0.0, low_open=True)

    def samples(self, concurrent: int, workers: int) -> np.ndarray:
        """Compute times for ``workers`` workers in all, ``concurrent`` of them computing at once on
        a node: the samples measured at the nearest concurrency not above it (the largest
        measured if none), scaled to the worker's share of the data when the data is divided."""
        measured = sorted(self.compute_s)
        k = max([c for c in measured if c <= concurrent], default=measured[0])
        samples = np.asarray(self.compute_s[k], float)
        return samples * (k / workers) if self.divides_data else samples

    def env_steps(self, workers: int) -> float:
        """Env steps (lstsq: rows) one gradient of one of ``workers`` workers covers."""
        return self.env_steps_per_gradient / workers if self.divides_data else self.env_steps_per_gradient


@dataclass(frozen=True)
class Calibration:
    """Measured costs of one machine (see the module doc). The transport is fitted to
    ``latency_s + bytes / bandwidth_Bps`` per message; a shard's apply time is measured at a few
    sizes per optimizer (``apply_points[optimizer] = [[params, seconds], ...]``) and read between
    them on straight lines (beyond the largest, in proportion to the size)."""

    cpus: int
    transport: str
    latency_s: float
    bandwidth_Bps: float
    apply_points: dict[str, list[list[float]]]
    workloads: dict[str, Workload]
    machine: dict[str, Any] = field(default_factory=dict)
    round_trips: list[list[float]] = field(default_factory=list)  # [[bytes, seconds], ...] the fit came from

    def __post_init__(self) -> None:
        validate.integer("cpus", self.cpus, low=1)
        validate.number("latency_s", self.latency_s, low=0.0)
        validate.number("bandwidth_Bps", self.bandwidth_Bps, low=0.0, low_open=True)

    def workload(self, algo: str) -> Workload:
        if algo not in self.workloads:
            raise ConfigError("calibration", f"has no measured workload for --algo {algo} (it has "
                                             f"{', '.join(sorted(self.workloads)) or 'none'}); measure it with "
                                             "gorila simulate --calibrate, or add it to the file by hand")
        return self.workloads[algo]

    def apply_s(self, optimizer: str, params: int) -> float:
        """Seconds a shard takes to apply one push of ``params`` parameters with ``optimizer``."""
        if optimizer not in self.apply_points:
            raise ConfigError("calibration", f"has no apply time for optimizer {optimizer!r}")
        sizes, seconds = zip(*sorted(self.apply_points[optimizer]))
        if params > sizes[-1]:
            return seconds[-1] * params / sizes[-1]
        return float(np.interp(params, sizes, seconds))

    def save(self, path: Path) -> Path:
        data = asdict(self)
        for work in data["workloads"].values():
            work["compute_s"] = {str(k): list(v) for k, v in work["compute_s"].items()}
        write_json(Path(path), data)
        return Path(path)

    @classmethod
    def load(cls, path: Path) -> Calibration:
        """A calibration file; a missing or malformed one is a ``ConfigError`` naming ``--calibration``."""
        try:
            data = json.loads(Path(path).read_text())
            workloads = {name: Workload(**{**w, "compute_s": {int(k): tuple(v) for k, v in w["compute_s"].items()}})
                         for name, w in data.pop("workloads").items()}
            calibration = cls(**data, workloads=workloads)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise ConfigError("calibration", f"cannot read {path}: {err}; write one with "
                                             "gorila simulate --calibrate --out FILE") from None
        for optimizer, points in calibration.apply_points.items():
            if not points or any(len(p) != 2 or not all(math.isfinite(x) and x >= 0 for x in p) for p in points):
                raise ConfigError("calibration",
                                  f"{path}: apply times of {optimizer!r} must be [[params, seconds], ...]")
        return calibration
