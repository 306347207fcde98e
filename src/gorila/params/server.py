"""The sharded parameter server as a plain object: what a runtime places, shard by shard."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gorila import validate
from gorila.params.layout import ShardLayout
from gorila.params.optim import OPTIMIZERS, LearningRate
from gorila.params.rule import UpdateRule
from gorila.params.shard import ParameterShard, ShardStats


@dataclass(frozen=True)
class ServerSpec:
    """Everything needed to build the shards, except the initial parameters::

        spec = ServerSpec(rule=UpdateRule.synchronous(4), num_shards=2, optimizer="sgd", lr=0.1)
        shards = spec.build(initial_params)

    ``lr`` may be a float32 vector over the whole flat vector (per-parameter rates).
    """

    rule: UpdateRule
    num_shards: int = 1
    optimizer: str = "sgd"
    lr: LearningRate = 0.1

    def __post_init__(self) -> None:
        validate.integer("shards", self.num_shards, low=1)
        validate.choice("optimizer", self.optimizer, OPTIMIZERS)
        if not isinstance(self.lr, np.ndarray):
            validate.number("lr", self.lr, low=0.0, low_open=True)

    def layout(self, size: int) -> ShardLayout:
        return ShardLayout(size, self.num_shards)

    def build_shard(self, part: np.ndarray, size: int, shard_id: int) -> ParameterShard:
        """Shard ``shard_id`` holding ``part``, its slice of a flat vector of ``size`` parameters."""
        lr = self.lr[self.layout(size).slices[shard_id]] if isinstance(self.lr, np.ndarray) else self.lr
        return ParameterShard(part, rule=self.rule, optimizer=self.optimizer, lr=lr, shard_id=shard_id)

    def build(self, params: np.ndarray) -> list[ParameterShard]:
        """Every shard of the flat ``params``."""
        parts = self.layout(params.size).split(params)
        return [self.build_shard(part, params.size, i) for i, part in enumerate(parts)]


def merge_stats(stats: list[ShardStats]) -> ShardStats:
    """Counters of all shards. Every worker push reaches every shard, so push counts, updates
    and the staleness histogram are averaged over shards (one worker push counts once);
    bytes are summed."""
    total = ShardStats()
    for s in stats:
        total = total.merge(s)
    n = max(len(stats), 1)
    for name in ("pushes_counted", "pushes_accepted", "pushes_rejected_stale",
                 "pushes_rejected_nonfinite", "updates"):
        setattr(total, name, getattr(total, name) // n)
    for k in total.staleness:
        total.staleness[k] //= n
    return total
