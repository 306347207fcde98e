"""What one parameter shard counts: pushes by outcome, updates, bytes, pulls and the staleness
histogram (:class:`ShardStats`), which a run's metrics sum over its shards and a checkpoint stores."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ShardStats:
    """Counters of one shard; ``merge`` adds another shard's."""

    pushes_counted: int = 0
    pushes_accepted: int = 0
    pushes_rejected_stale: int = 0
    pushes_rejected_nonfinite: int = 0
    updates: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    # After the fields above: a checkpoint stores the counters by position (new ones go last;
    # an older checkpoint's shorter list leaves them at 0).
    pushes_rejected_restarted: int = 0
    pushes_rejected_duplicate: int = 0
    updates_rolled_back: int = 0  # rounds whose step was undone: it left parameters or state non-finite
    pulls: int = 0  # whole reads of the parameters (a push's reply is not one): what caches save the server
    staleness: Counter[int] = field(default_factory=Counter)

    @property
    def pushes_rejected(self) -> int:
        return (self.pushes_rejected_stale + self.pushes_rejected_nonfinite + self.pushes_rejected_restarted
                + self.pushes_rejected_duplicate)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "staleness"}
        out["pushes_rejected"] = self.pushes_rejected
        out["staleness"] = {int(k): int(v) for k, v in sorted(self.staleness.items())}
        return out

    def merge(self, other: ShardStats) -> ShardStats:
        merged = ShardStats(staleness=self.staleness + other.staleness)
        for name in self.__dataclass_fields__:
            if name != "staleness":
                setattr(merged, name, getattr(self, name) + getattr(other, name))
        return merged


#: The counters a checkpoint stores, by position.
STAT_FIELDS = tuple(f for f in ShardStats.__dataclass_fields__ if f != "staleness")
