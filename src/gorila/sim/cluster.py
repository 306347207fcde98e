"""The cluster a prediction is for: nodes, cores, network, and the reads of a node's cache.

By default it is the calibrating machine itself (one node, its cores, its measured transport);
a file or flags describe another one by hand::

    cluster = Cluster.of(calibration)                               # this machine
    cluster = Cluster.of(calibration, path="cluster.json", nodes=4)  # file, then flags override

A cluster file is JSON with any of the fields: ``{"nodes": 4, "cores_per_node": 16,
"latency_s": 50e-6, "bandwidth_Bps": 1.25e9, "cache_read_s": 2e-4}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from gorila import validate
from gorila.errors import ConfigError
from gorila.sim.calibration import Calibration

# A node's parameter cache is not measured yet: a worker's read of it costs a shared-memory copy,
# taken by default as this many times the calibrating machine's one-way message latency.
CACHE_READ_LATENCIES = 1.0


@dataclass(frozen=True)
class Cluster:
    """Nodes of ``cores_per_node`` cores; every message costs ``latency_s + bytes / bandwidth_Bps``
    and occupies the link of the shard or cache that sends or receives it for ``bytes /
    bandwidth_Bps``; a worker reads its node's parameter cache in ``cache_read_s``."""

    nodes: int
    cores_per_node: int
    latency_s: float
    bandwidth_Bps: float
    cache_read_s: float

    def __post_init__(self) -> None:
        validate.integer("nodes", self.nodes, low=1)
        validate.integer("cores_per_node", self.cores_per_node, low=1)
        validate.number("latency_s", self.latency_s, low=0.0)
        validate.number("bandwidth_Bps", self.bandwidth_Bps, low=0.0, low_open=True)
        validate.number("cache_read_s", self.cache_read_s, low=0.0)

    @classmethod
    def of(cls, calibration: Calibration, path: Path | None = None, **overrides: float | int | None) -> Cluster:
        """The calibrating machine, then the fields of the file at ``path``, then ``overrides``
        that are not None."""
        base = cls(nodes=1, cores_per_node=calibration.cpus, latency_s=calibration.latency_s,
                   bandwidth_Bps=calibration.bandwidth_Bps,
                   cache_read_s=CACHE_READ_LATENCIES * calibration.latency_s)
        known = {f.name for f in fields(cls)}
        if path is not None:
            try:
                given = json.loads(Path(path).read_text())
            except (OSError, ValueError) as err:
                raise ConfigError("cluster", f"cannot read {path}: {err}") from None
            if not isinstance(given, dict) or set(given) - known:
                raise ConfigError("cluster", f"{path}: expected an object with fields among {', '.join(sorted(known))}")
            base = replace(base, **given)
        given_now: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}  # checked by __post_init__
        return replace(base, **given_now)

    def describe(self) -> str:
        return (f"{self.nodes} node(s) x {self.cores_per_node} cores, latency {self.latency_s * 1e6:.0f} us, "
                f"bandwidth {self.bandwidth_Bps * 8 / 1e9:.2f} Gbit/s, cache read {self.cache_read_s * 1e6:.0f} us")
