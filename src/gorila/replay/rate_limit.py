"""How fast a replay may be sampled relative to how fast it is filled: a value object."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gorila import validate
from gorila.errors import ConfigError


@dataclass(frozen=True)
class RateLimiter:
    """Four numbers decide whether an insert or a sample may go ahead now (Reverb's rule)::

        RateLimiter.min_size(1000)                                 # sample once 1000 rows are in
        RateLimiter.sample_to_insert_ratio(8.0, min_size_to_sample=1000, error_buffer=400)
        limiter.can_sample(inserts, samples, 32); limiter.can_insert(inserts, samples, 64)

    With ``diff = inserts · samples_per_insert − samples`` (rows, not calls): nothing is sampled
    before ``min_size_to_sample`` rows were inserted; a sample of ``k`` rows needs
    ``diff − k >= min_diff`` and an insert of ``k`` rows needs ``(inserts + k) · samples_per_insert −
    samples <= max_diff`` once past the minimum size. ``sample_to_insert_ratio`` centres the band
    ``[min_diff, max_diff]`` on the ratio with ``error_buffer`` either side, so samples per insert
    stay near ``samples_per_insert`` whichever side is faster: the faster side is told to wait.
    The shard only answers; the caller waits (with a timeout) and asks again.
    """

    samples_per_insert: float = 1.0
    min_size_to_sample: int = 1
    min_diff: float = -math.inf
    max_diff: float = math.inf

    def __post_init__(self) -> None:
        validate.number("samples_per_insert", self.samples_per_insert, low=0.0, low_open=True)
        validate.integer("learning_starts", self.min_size_to_sample, low=1)
        if self.min_diff > self.max_diff:
            raise ConfigError("error_buffer", f"the band is empty: min_diff {self.min_diff} > max_diff {self.max_diff}")

    @classmethod
    def min_size(cls, min_size_to_sample: int) -> RateLimiter:
        """Sampling starts once ``min_size_to_sample`` rows were inserted; nothing else is limited."""
        return cls(min_size_to_sample=min_size_to_sample)

    @classmethod
    def sample_to_insert_ratio(cls, samples_per_insert: float, min_size_to_sample: int,
                               error_buffer: float) -> RateLimiter:
        """Keep sampled rows per inserted row near ``samples_per_insert`` (within ``error_buffer`` rows)."""
        validate.number("error_buffer", error_buffer, low=0.0, low_open=True)
        offset = samples_per_insert * min_size_to_sample
        return cls(samples_per_insert, min_size_to_sample, offset - error_buffer, offset + error_buffer)

    def can_insert(self, inserts: int, samples: int, rows: int) -> bool:
        if inserts + rows <= self.min_size_to_sample:
            return True
        return (inserts + rows) * self.samples_per_insert - samples <= self.max_diff

    def can_sample(self, inserts: int, samples: int, rows: int) -> bool:
        if inserts < self.min_size_to_sample:
            return False
        return inserts * self.samples_per_insert - samples - rows >= self.min_diff
