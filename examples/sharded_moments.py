"""The mean and variance of a sharded data set with ``gorila.mapreduce`` (seed 000, §12.1).

Each of ``--shards`` workers generates its own rows where it runs (they never travel); the server
then runs three jobs over them, each a broadcast, a map and a reduction::

    n  = count of the rows
    mu = mean of x                       (a vector: one mean per column)
    var = mean of (x - mu)^2             (mu broadcast to every worker first)

Two passes, as the chapter's broadcast → map → reduce round has it, rather than E[x^2] - E[x]^2,
which loses the variance to rounding when the mean is large against the spread::

    python examples/sharded_moments.py --shards 4 --rows 100000 --runtime ray
"""

from __future__ import annotations

import argparse
import functools
import json
from typing import Any

import numpy as np

from gorila.mapreduce import DataShard, MapReduce, rows_of
from gorila.runtime import RUNTIMES, make_runtime


def make_shard(shard_id: int, rows: int, columns: int, seed: int) -> DataShard:
    """Shard ``shard_id``'s rows: normal, each column with its own mean and scale (a large mean,
    so that the one-pass formula would show its rounding)."""
    rng = np.random.default_rng([seed, shard_id])
    means = 1000.0 + np.arange(columns)
    scales = 1.0 + np.arange(columns)
    return DataShard(rng.normal(means, scales, size=(rows, columns)).astype(np.float32))


def in_float64(x: np.ndarray) -> np.ndarray:
    """The map of the first pass: the rows as they are, summed in float64."""
    return x.astype(np.float64)


def squared_deviation(x: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """The map of the second pass: ``(x_i - mu)^2`` per row, in float64."""
    return (x.astype(np.float64) - mu) ** 2


def moments(runtime_name: str = "local", shards: int = 4, rows: int = 10_000, columns: int = 3,
            seed: int = 0) -> dict[str, Any]:
    """The row count, mean and (population) variance of ``shards`` shards of ``rows`` rows each."""
    runtime = make_runtime(runtime_name)
    try:
        job = MapReduce(runtime, functools.partial(make_shard, rows=rows, columns=columns, seed=seed), shards)
        n = job.run(rows_of, "count")
        mu = job.run(in_float64, "mean")
        var = job.run(squared_deviation, "mean", mu)
    finally:
        runtime.shutdown()
    return {"rows": int(n), "mean": mu.tolist(), "variance": var.tolist()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", choices=RUNTIMES, default="local")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--rows", type=int, default=10_000, help="rows per shard")
    parser.add_argument("--columns", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(json.dumps(moments(args.runtime, args.shards, args.rows, args.columns, args.seed), indent=2))


if __name__ == "__main__":
    main()
