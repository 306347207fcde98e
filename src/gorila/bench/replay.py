"""``gorila bench replay``: a prioritized replay shard's add / sample / update_priorities rates,
in-process (the limit) and through the runtime with concurrent writers; and the sum-tree behind
prioritized sampling, numpy against TorchRL's C++ segment trees where those load."""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gorila import validate
from gorila.bench.report import bench_dir, write_bench_json
from gorila.cliargs import command_parser
from gorila.core import ReplayClient
from gorila.params import ParameterServer
from gorila.replay import Prioritization, PrioritizedSampler, RemoteReplay, ReplayShard
from gorila.types import Batch, Transitions


def rows_for(obs_shape: tuple[int, ...], obs_dtype: npt.DTypeLike, count: int, rng: np.random.Generator, streams: int,
             start: int = 0) -> Transitions:
    """``count`` one-step rows of random observations over ``streams`` streams (frames continue per stream)."""
    if len(obs_shape) == 3:  # stacked frames: each stream's next observation shifts its stack by one frame
        frames = rng.integers(0, 255, (count + obs_shape[0], *obs_shape[1:]), dtype=np.uint8)
        obs = np.stack([frames[i:i + obs_shape[0]] for i in range(count)])
        next_obs = np.stack([frames[i + 1:i + 1 + obs_shape[0]] for i in range(count)])
        env = np.zeros(count, np.int64) + start % streams
    else:
        obs = rng.standard_normal((count, *obs_shape)).astype(obs_dtype)
        next_obs = rng.standard_normal((count, *obs_shape)).astype(obs_dtype)
        env = (start + np.arange(count)) % streams
    return Transitions(obs, rng.integers(0, 4, count), rng.standard_normal(count).astype(np.float32), next_obs,
                       np.zeros(count, bool), np.zeros(count, bool), env.astype(np.int64),
                       policy_version=np.zeros(count, np.int64), discount=np.full(count, 0.99, np.float32),
                       steps=np.ones(count, np.int64))


def sampled(batch: Batch | None) -> Batch:
    """The rows a shard sampled; a refusal (its rate limiter holding sampling back) is an error
    here, where shards are filled first and sample without a limit."""
    if batch is None:
        raise RuntimeError("the replay shard refused a sample: too few rows for its rate limiter")
    return batch


def rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls of ``fn`` per second over ``seconds``."""
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        calls += 1
    return calls / (time.perf_counter() - t0)


class TorchRLTrees:
    """TorchRL's C++ sum and min segment trees behind :class:`PrioritizedSampler`'s interface (the
    part the comparison measures: updates and proportional sampling)."""

    def __init__(self, capacity: int, alpha: float):
        # fails where the build does not fit torch; TorchRL is optional and its extension has no type hints
        from torchrl._torchrl import (  # type: ignore[import-not-found]  # see above
            MinSegmentTreeFp32,
            SumSegmentTreeFp32,
        )

        self.alpha, self.sum, self.min = alpha, SumSegmentTreeFp32(capacity), MinSegmentTreeFp32(capacity)
        self.capacity = capacity

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        scaled = (priorities ** self.alpha).astype(np.float32)
        self.sum.update(indices, scaled)
        self.min.update(indices, scaled)

    def sample(self, batch_size: int, beta: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        total = self.sum.query(0, self.capacity)
        targets = ((np.arange(batch_size) + rng.random(batch_size)) * total / batch_size).astype(np.float32)
        indices = np.asarray(self.sum.scan_lower_bound(targets))
        weights = (self.sum.at(indices) / total * self.capacity) ** -beta
        return indices, weights / (self.min.query(0, self.capacity) / total * self.capacity) ** -beta


def compare_samplers(capacity: int, batch_size: int, seconds: float, seed: int) -> list[dict[str, Any]]:
    """Batched update and sample rates of each sum-tree implementation on a full tree."""
    makers: dict[str, Callable[[], PrioritizedSampler | TorchRLTrees]] = {
        "numpy": lambda: PrioritizedSampler(capacity, 0.6), "torchrl": lambda: TorchRLTrees(capacity, 0.6)}
    rows: list[dict[str, Any]] = []
    for name, make in makers.items():
        try:
            sampler = make()
        except ImportError as err:  # TorchRL absent, or its C++ extension built for another torch
            rows.append({"sampler": name, "capacity": capacity, "available": False, "why": str(err)[:200]})
            continue
        rng = np.random.default_rng(seed)
        for start in range(0, capacity, 65536):  # fill it
            index = np.arange(start, min(start + 65536, capacity))
            sampler.update(index, rng.uniform(0.1, 2.0, len(index)))
        update = rate(lambda: sampler.update(rng.integers(0, capacity, batch_size), rng.uniform(0.1, 2, batch_size)),
                      seconds)
        sample = rate(lambda: sampler.sample(batch_size, 0.4, rng), seconds)
        rows.append({"sampler": name, "capacity": capacity, "available": True, "update_per_s": update,
                     "sample_per_s": sample})
    return rows


def shard_rates(shard: ReplayShard, rows_per_add: int, batch_size: int, obs_shape: tuple[int, ...],
                obs_dtype: npt.DTypeLike, seconds: float, rng: np.random.Generator) -> dict[str, float]:
    """Adds, samples and priority updates per second of one prioritized shard (in this process)."""
    seq = iter(range(10**9))
    counter = iter(range(10**9))
    streams = shard.storage.num_streams if hasattr(shard.storage, "num_streams") else 1
    batches = [rows_for(obs_shape, obs_dtype, rows_per_add, rng, streams, start=k) for k in range(8)]
    add = rate(lambda: shard.add(batches[next(counter) % 8], "bench", next(seq), rng.uniform(0.1, 2, rows_per_add)),
               seconds)
    sample = rate(lambda: shard.sample(batch_size), seconds)
    keys = sampled(shard.sample(batch_size)).indices
    update = rate(lambda: shard.update_priorities(keys, rng.uniform(0.1, 2, batch_size)), seconds)
    return {"add_per_s": add, "sample_per_s": sample, "update_priorities_per_s": update}


class Writer:
    """A worker that adds the same prepared batches to one shard as fast as replies come back."""

    def __init__(self, worker_id: int, server: ParameterServer, *, replay: ReplayClient, rows: Transitions,
                 seconds: float):
        self.replay, self.rows, self.seconds = replay, rows, seconds
        self.writer, self.seq = f"writer{worker_id}", 0

    def step(self) -> None:
        self.replay.add(self.rows, self.writer, self.seq).result(60.0)
        self.seq += 1

    def report(self) -> dict[str, Any]:
        return {"adds": self.seq}

    def run_for(self) -> float:
        """Adds per second for ``seconds``."""
        return rate(self.step, self.seconds)


class Sampler:
    """A worker that samples one shard and sends priorities back, as a learner does."""

    def __init__(self, worker_id: int, server: ParameterServer, *, replay: ReplayClient, batch_size: int,
                 seconds: float):
        self.replay, self.batch_size, self.seconds = replay, batch_size, seconds
        self.rng = np.random.default_rng(worker_id)

    def step(self) -> None:
        batch = sampled(self.replay.sample(self.batch_size).result(60.0))
        self.replay.update_priorities(batch.indices, self.rng.uniform(0.1, 2, self.batch_size)).result(60.0)

    def report(self) -> dict[str, Any]:
        return {}

    def run_for(self) -> float:
        """Samples (each followed by its priority update) per second for ``seconds``."""
        return rate(self.step, self.seconds)


def through_runtime(args: argparse.Namespace, writers: int, make_shard: Callable[[int], ReplayShard],
                    rows: Transitions) -> dict[str, float]:
    """``writers`` writer processes and one sampler on one shard, for ``args.seconds`` at once."""
    import functools

    from gorila.params import ServerSpec, UpdateRule
    from gorila.runtime import make_runtime

    runtime = make_runtime("ray", args.address)
    try:
        runtime.plan(writers + 3)
        replay = runtime.start_services(make_shard, 1, name="replay")
        (endpoint,) = replay.endpoints()
        remote = RemoteReplay(endpoint)
        remote.add(rows, "fill", 0, np.ones(len(rows))).result(60.0)  # so the sampler can start at once
        server = runtime.start_shards(ServerSpec(UpdateRule.asynchronous()), np.zeros(1, np.float32)).server
        add_group = runtime.start_workers(functools.partial(Writer, replay=remote, rows=rows, seconds=args.seconds),
                                          writers, server, name="writer")
        sample_group = runtime.start_workers(functools.partial(Sampler, replay=remote, batch_size=args.batch_size,
                                                               seconds=args.seconds), 1, server, name="sampler")
        results: dict[str, list[float]] = {}
        threads = [threading.Thread(target=lambda n, g: results.__setitem__(n, g.call("run_for")), args=(n, g))
                   for n, g in (("add", add_group), ("sample", sample_group))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(args.seconds + 120)
        return {"add_per_s": sum(results["add"]), "sample_per_s": sum(results["sample"])}
    finally:
        runtime.shutdown()


def main(argv: list[str]) -> int:
    import functools

    parser = command_parser("gorila bench replay", __doc__)
    parser.add_argument("--obs", default="4", help="observation shape: 4 (CartPole) or 4,84,84 (Atari frames)")
    parser.add_argument("--capacity", type=int, default=100_000, help="rows per shard")
    parser.add_argument("--rows-per-add", type=int, default=64, help="rows in each add")
    parser.add_argument("--batch-size", type=int, default=64, help="rows in each sample")
    parser.add_argument("--writers", default="1,2,4,8", help="concurrent writer processes, comma-separated")
    parser.add_argument("--tree-capacity", type=int, default=1_000_000, help="slots of the compared sum-trees")
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time of each figure")
    parser.add_argument("--runtime", default="both", choices=("local", "ray", "both"),
                        help="local: the in-process limit and the sum-trees only")
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: embedded)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for bench.json (default: bench-out/replay-<time>)")
    args = parser.parse_args(argv)
    validate.number("seconds", args.seconds, low=0.0, low_open=True)
    for name in ("capacity", "rows_per_add", "batch_size", "tree_capacity"):
        validate.integer(name, getattr(args, name), low=1)
    try:
        obs_shape = tuple(int(x) for x in args.obs.split(","))
        writer_counts = [int(x) for x in args.writers.split(",")]
    except ValueError:
        parser.error("--obs and --writers take comma-separated integers")
    if min(writer_counts) < 1:
        parser.error("--writers: counts must be >= 1")
    obs_dtype = np.uint8 if len(obs_shape) == 3 else np.float32
    out = bench_dir(args.out, "replay")
    rng = np.random.default_rng(args.seed)

    trees = compare_samplers(args.tree_capacity, args.batch_size, args.seconds, args.seed)
    print(f"sum-trees, {args.tree_capacity:,} slots, batches of {args.batch_size}:")
    for row in trees:
        print(f"  {row['sampler']:>8}: "
              + (f"{row['update_per_s']:10,.0f} updates/s {row['sample_per_s']:10,.0f} samples/s"
                 if row["available"] else f"not available ({row['why']})"))

    streams = 1 if len(obs_shape) == 3 else 8
    make_shard = functools.partial(ReplayShard, capacity=args.capacity, obs_shape=obs_shape, obs_dtype=obs_dtype,
                                   num_streams=streams, prioritization=Prioritization())
    limit = shard_rates(make_shard(0), args.rows_per_add, args.batch_size, obs_shape, obs_dtype, args.seconds, rng)
    print(f"one prioritized shard in this process ({args.rows_per_add} rows per add, batches of {args.batch_size}): "
          f"{limit['add_per_s']:,.0f} adds/s, {limit['sample_per_s']:,.0f} samples/s, "
          f"{limit['update_priorities_per_s']:,.0f} priority updates/s  (the limit)")
    rows = [{"runtime": "local", "writers": 1, **limit, "ratio_to_inprocess": 1.0}]
    if args.runtime in ("ray", "both"):
        batch = rows_for(obs_shape, obs_dtype, args.rows_per_add, rng, streams)
        print(f"{'writers':>8} {'adds/s':>10} {'ratio':>6} {'samples/s':>10} {'ratio':>6}  (through Ray, one sampler)")
        for count in writer_counts:
            got = through_runtime(args, count, make_shard, batch)
            ratio = got["add_per_s"] / limit["add_per_s"]
            sample_ratio = got["sample_per_s"] / limit["sample_per_s"]
            print(f"{count:>8} {got['add_per_s']:>10,.0f} {ratio:>6.2f} "
                  f"{got['sample_per_s']:>10,.0f} {sample_ratio:>6.2f}")
            rows.append({"runtime": "ray", "writers": count, **got, "ratio_to_inprocess": ratio,
                         "sample_ratio_to_inprocess": sample_ratio})
    write_bench_json(out, "replay", vars(args), rows, sum_trees=trees)
    return 0
