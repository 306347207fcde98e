"""How a flat parameter vector is cut into contiguous shards."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from gorila import validate
from gorila.errors import ConfigError


@dataclass(frozen=True)
class ShardLayout:
    """Contiguous, near-equal slices of ``size`` parameters over ``num_shards`` shards::

        layout = ShardLayout(size=10, num_shards=3)
        layout.slices   # (slice(0, 4), slice(4, 7), slice(7, 10))
        parts = layout.split(flat)
    """

    size: int
    num_shards: int

    def __post_init__(self) -> None:
        validate.integer("shards", self.num_shards, low=1)
        if self.num_shards > self.size:
            raise ConfigError("shards", f"must be <= the number of parameters ({self.size}), "
                                        f"got {self.num_shards}")

    @cached_property  # split() runs on every push: compute the bounds once
    def slices(self) -> tuple[slice, ...]:
        bounds = np.linspace(0, self.size, self.num_shards + 1).round().astype(int)
        return tuple(slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]))

    def split(self, flat: np.ndarray) -> list[np.ndarray]:
        """Views of ``flat`` for each shard (no copy)."""
        return [flat[s] for s in self.slices]
