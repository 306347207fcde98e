"""``gorila bench menger``: Menger's two figures on this machine (or cluster).

Model retrieval: N actors (threads spread over ``--nodes`` simulated nodes, each node a process)
read the newest parameters as fast as they can while a learner publishes a new version every
``--publish-ms``; without a cache (``none``) every read is a pull from the server (Ray calls, as
from another node); with one every node's actors read its cache's shared memory, and the cache is
either sent each version by the server (``push``, as a run's caches are) or long-polls it and
pulls each version (``poll``). Each point reports the read latency and the parameters' age: how
many versions and seconds behind the learner each read was. The seed's own scale is
``--readers 512 --model-mb 16`` (Menger: the cache cut the mean read latency about 4.0 times
there); each point's reduction is printed beside it and written to bench.json.
Replay writes: N writers add one row of a payload at a time to 1 replay shard, or to one shard per
group of writers (``--groups``). The limit beside each latency is a memcpy of the same bytes,
measured in the same run.
"""

from __future__ import annotations

import argparse
import csv
import functools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gorila.bench.menger.age import parameter_age
from gorila.bench.menger.nodes import ReaderNode, WriterNode, bench_cache
from gorila.bench.ps import NATURE_CNN_PARAMS, memcpy_seconds
from gorila.bench.report import bench_dir, write_bench_json
from gorila.cliargs import command_parser, count_list
from gorila.core import ServiceGroup
from gorila.params import ParameterClient, ParameterServer, ServerSpec, UpdateRule
from gorila.params.cache import CacheSpec
from gorila.replay import ReplayShard

if TYPE_CHECKING:
    from gorila.runtime.ray_runtime import RayRuntime

PAYLOADS = {"16K": 16 << 10, "1M": 1 << 20, "16M": 16 << 20}
#: How actors read: from the server, or from their node's cache that is sent each version or polls for it.
READ_MODES = ("none", "poll", "push")
READ_FIELDS = ("cache", "readers", "reads", "read_latency_mean_ms", "read_latency_p99_ms", "read_latency_max_ms",
               "age_versions_mean", "age_versions_p99", "age_ms_mean", "age_ms_p99", "server_reads_per_s",
               "server_reads_per_version_per_node", "versions", "publish_ms", "limit_memcpy_ms", "ratio")
# Menger's reported figure (Google AI, 2020): with the cache, the mean read latency of 512 actors reading a
# 16 MB model was about 4.0 times lower.
SEED_READ_REDUCTION = {"readers": 512, "model_mb": 16, "read_latency_reduction": 4.0}
WRITE_FIELDS = ("shards", "writers", "payload", "adds", "write_latency_mean_ms", "write_latency_p99_ms",
                "write_latency_max_ms", "insert_per_s", "limit_memcpy_ms", "ratio")


def _payloads(text: str) -> list[str]:
    names = text.split(",")
    if not names or any(n not in PAYLOADS for n in names):
        raise argparse.ArgumentTypeError(f"a comma-separated list of {', '.join(PAYLOADS)}, got {text!r}")
    return names


def _positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    """An argument parser of ``kind`` (int or float) that takes values above 0 only."""
    def parse(text: str) -> float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
        return value
    return parse


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = command_parser("gorila bench menger", __doc__)
    parser.add_argument("--part", choices=("reads", "writes", "both"), default="both", help="which figure")
    parser.add_argument("--readers", type=count_list, default="1,4,16,64,256", help="reading actors per point")
    parser.add_argument("--caches", type=_read_modes, default=READ_MODES,
                        help="how the actors read, comma-separated: none (the server), poll or push (a cache per "
                             "node that polls the server, or that the server sends each version)")
    parser.add_argument("--writers", type=count_list, default="1,4,16,64,256", help="writing actors per point")
    parser.add_argument("--payloads", type=_payloads, default="16K,1M,16M", help="row payloads of the writes")
    parser.add_argument("--nodes", type=_positive(int), default=2, help="simulated nodes the actors spread over")
    parser.add_argument("--groups", type=_positive(int), default=4,
                        help="sharded replay: one shard per group of writers (at most one per writer)")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--params", type=_positive(int), default=NATURE_CNN_PARAMS, help="parameters read (float32)")
    size.add_argument("--model-mb", type=_positive(float), default=None,
                      help="the model read, in MiB (the seed's: 16), instead of --params")
    parser.add_argument("--buffers-per-node", type=_positive(int), default=8,
                        help="vectors a node's readers copy into (reader k into k mod this): every read moves "
                             "the whole model without a copy per reader in memory")
    parser.add_argument("--publish-ms", type=_positive(float), default=50.0, help="a new version every this often")
    parser.add_argument("--seconds", type=_positive(float), default=2.0, help="measured time per point")
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: embedded)")
    parser.add_argument("--out", type=Path, default=None, help="directory (default: bench-out/menger-<time>)")
    args = parser.parse_args(argv)
    if args.model_mb is not None:
        args.params = max(1, int(args.model_mb * (1 << 20)) // 4)
    return args


def _read_modes(text: str) -> tuple[str, ...]:
    modes = tuple(dict.fromkeys(text.split(",")))
    if not modes or any(m not in READ_MODES for m in modes):
        raise argparse.ArgumentTypeError(f"a comma-separated list of {', '.join(READ_MODES)}, got {text!r}")
    return modes


class Publisher:
    """The learner: pushes a gradient every ``period_s`` on a thread, timing each push and noting
    when each version became the server's (its reply: ``published``, for the reads' age)."""

    def __init__(self, client: ParameterClient, size: int, period_s: float):
        self.client, self.period_s = client, period_s
        self.grad = np.full(size, 1e-6, np.float32)
        self.times: list[float] = []
        self.published: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.client.params()
        self.published.append((time.time(), self.client.version))
        while not self._stop.wait(self.period_s):
            began = time.perf_counter()
            self.client.push(self.grad)
            self.times.append(time.perf_counter() - began)
            self.published.append((time.time(), self.client.version))

    def __enter__(self) -> Publisher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60.0)


def _stats(latencies: list[float]) -> tuple[float, float, float]:
    """The mean, 99th percentile and largest of ``latencies`` (seconds), in ms."""
    ms = np.asarray(latencies) * 1e3
    return (float(ms.mean()), float(np.percentile(ms, 99)), float(ms.max())) if ms.size else (float("nan"),) * 3


def _reads(runtime: RayRuntime, args: argparse.Namespace) -> list[dict[str, Any]]:
    spec = ServerSpec(rule=UpdateRule.asynchronous(), optimizer="sgd", lr=1e-3)
    shards = runtime.start_shards(spec, np.zeros(args.params, np.float32))
    server = shards.ray_call_server()  # readers on other nodes reach the server by Ray calls
    tag = time.monotonic_ns() % 10**8
    nodes = runtime.start_services(functools.partial(_reader_node, server, args.buffers_per_node), args.nodes,
                                   name="reader-node")
    limit = memcpy_seconds(args.params * 4) * 1e3
    rows: list[dict[str, Any]] = []
    for mode in args.caches:
        cache = CacheSpec(prefix=f"gorila-bench-{tag}-{mode}-params", size=args.params)
        caches: ServiceGroup | None = None
        if mode != "none":  # started only now: they would load the server during the other modes' runs
            caches = runtime.start_services(functools.partial(bench_cache, server, cache, mode == "push"),
                                            args.nodes, name=f"cache-{mode}")
        for readers in args.readers:
            rows.append(_read_point(shards, nodes, caches, cache, mode, readers, args, limit))
            _print_read(rows[-1])
        if caches is not None:  # unlinks their shared memory (the runtime's shutdown kills the processes)
            caches.call("close")
    return rows


def _read_point(shards: Any, nodes: ServiceGroup, caches: ServiceGroup | None, cache: CacheSpec, mode: str,
                readers: int, args: argparse.Namespace, limit: float) -> dict[str, Any]:
    """One point: ``readers`` actors reading for ``args.seconds`` while the learner publishes."""
    per_node = [len(range(k, readers, args.nodes)) for k in range(args.nodes)]
    pulls_before = sum(s["pulls"] for s in caches.call("stats")) if caches is not None else 0
    version_before = shards.pull()[1][0]
    with Publisher(shards.server.client(0), args.params, args.publish_ms / 1e3) as publisher:
        pending = [ep.call("read", n, cache, mode != "none", args.seconds)
                   for ep, n in zip(nodes.endpoints(), per_node) if n]
        results = [p.result(600.0) for p in pending]
    versions = shards.pull()[1][0] - version_before
    latencies = [x for r in results for x in r["latencies_s"]]
    server_reads = sum(r["server_reads"] for r in results)
    if caches is not None:  # what the caches pulled: a poller every version, a pushed cache its catch-ups
        server_reads += sum(s["pulls"] for s in caches.call("stats")) - pulls_before
    behind, seconds = parameter_age(publisher.published, np.concatenate([r["read_at"] for r in results]),
                                    np.concatenate([r["versions"] for r in results]))
    mean, p99, most = _stats(latencies)
    # Without caches the nodes with readers pull; with them, every node's cache does.
    used_nodes = args.nodes if caches is not None else sum(1 for n in per_node if n)
    return {"cache": mode, "readers": readers, "reads": len(latencies), "read_latency_mean_ms": mean,
            "read_latency_p99_ms": p99, "read_latency_max_ms": most,
            "age_versions_mean": float(behind.mean()) if behind.size else float("nan"),
            "age_versions_p99": float(np.percentile(behind, 99)) if behind.size else float("nan"),
            "age_ms_mean": float(seconds.mean()) * 1e3 if seconds.size else float("nan"),
            "age_ms_p99": float(np.percentile(seconds, 99)) * 1e3 if seconds.size else float("nan"),
            "server_reads_per_s": server_reads / args.seconds,
            "server_reads_per_version_per_node": server_reads / max(versions, 1) / used_nodes,
            "versions": versions, "publish_ms": _stats(publisher.times)[0], "limit_memcpy_ms": limit,
            "ratio": mean / limit}


def _writes(runtime: RayRuntime, args: argparse.Namespace) -> list[dict[str, Any]]:
    nodes = runtime.start_services(functools.partial(_writer_node, args.nodes), args.nodes, name="writer-node")
    rows = []
    for name in args.payloads:
        payload = PAYLOADS[name]
        limit = memcpy_seconds(payload) * 1e3
        # A few rows per shard: the ring's copy is what a write costs, not its size.
        factory = functools.partial(ReplayShard, capacity=max(2, min(8, (64 << 20) // payload)),
                                    obs_shape=(payload // 2,), obs_dtype=np.uint8)
        single = runtime.start_services(factory, 1, name=f"replay-{name}").endpoints()
        sharded = runtime.start_services(factory, args.groups, name=f"replay-{name}-sharded").endpoints()
        for writers in args.writers:
            for endpoints in ([single] if writers == 1 or args.groups == 1 else [single, sharded[:writers]]):
                tag = f"{name}-{writers}-{len(endpoints)}"  # new writer names: no add is taken for a redelivery
                pending = [ep.call("write", endpoints, writers, payload, args.seconds, tag)
                           for ep in nodes.endpoints()]
                latencies = [x for p in pending for x in p.result(600.0)["latencies_s"]]
                mean, p99, most = _stats(latencies)
                rows.append({"shards": len(endpoints), "writers": writers, "payload": name, "adds": len(latencies),
                             "write_latency_mean_ms": mean, "write_latency_p99_ms": p99, "write_latency_max_ms": most,
                             "insert_per_s": len(latencies) / args.seconds, "limit_memcpy_ms": limit,
                             "ratio": mean / limit})
                _print_write(rows[-1])
    return rows


def _reader_node(server: ParameterServer, buffers: int, node: int) -> ReaderNode:
    return ReaderNode(server, node, buffers)


def reductions(reads: list[dict], mode: str = "push") -> dict[int, float]:
    """Per count of readers: the mean read latency without a cache over that with one (``mode``'s)."""
    by = {(r["cache"], r["readers"]): r["read_latency_mean_ms"] for r in reads}
    return {n: by[("none", n)] / by[(mode, n)] for (m, n) in by if m == mode and ("none", n) in by}


def _print_reductions(reads: list[dict], params: int) -> None:
    seed = SEED_READ_REDUCTION
    for mode in ("poll", "push"):
        for readers, reduction in reductions(reads, mode).items():
            print(f"read latency {reduction:5.1f}x lower with the {mode} cache at {readers} readers, "
                  f"{params * 4 / (1 << 20):.1f} MiB  (seed, Menger: ~{seed['read_latency_reduction']:.1f}x at "
                  f"{seed['readers']} actors, {seed['model_mb']} MB)", flush=True)


def _writer_node(nodes: int, node: int) -> WriterNode:
    return WriterNode(node, nodes)


def _print_read(r: dict) -> None:
    print(f"reads   cache={r['cache']:4s} readers={r['readers']:4d}  mean {r['read_latency_mean_ms']:8.2f} ms  "
          f"p99 {r['read_latency_p99_ms']:8.2f} ms  max {r['read_latency_max_ms']:8.2f} ms  "
          f"(memcpy {r['limit_memcpy_ms']:.2f} ms, x{r['ratio']:.1f})  age {r['age_versions_mean']:.2f} "
          f"versions, {r['age_ms_mean']:.1f} ms (p99 {r['age_ms_p99']:.1f} ms)  "
          f"server {r['server_reads_per_s']:8.1f} reads/s = {r['server_reads_per_version_per_node']:.2f} "
          f"per version per node  publish {r['publish_ms']:.1f} ms", flush=True)


def _print_write(r: dict) -> None:
    print(f"writes  payload={r['payload']:3s} shards={r['shards']:2d} writers={r['writers']:4d}  "
          f"mean {r['write_latency_mean_ms']:8.2f} ms  p99 {r['write_latency_p99_ms']:8.2f} ms  "
          f"max {r['write_latency_max_ms']:8.2f} ms  "
          f"(memcpy {r['limit_memcpy_ms']:.3f} ms, x{r['ratio']:.0f})  {r['insert_per_s']:8.1f} inserts/s",
          flush=True)


def _csv(path: Path, fields: tuple[str, ...], rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def _plot(out: Path, reads: list[dict], writes: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if reads:
        fig, (lat, age, load) = plt.subplots(1, 3, figsize=(15, 4))
        for mode in READ_MODES:
            mine = [r for r in reads if r["cache"] == mode]
            label = {"none": "no cache", "poll": "node cache, polling", "push": "node cache, sent each version"}[mode]
            for ax, key in ((lat, "read_latency_mean_ms"), (age, "age_ms_mean"), (load, "server_reads_per_s")):
                ax.plot([r["readers"] for r in mine], [max(r[key], 1e-3) for r in mine], "o-", label=label)
        lat.axhline(reads[0]["limit_memcpy_ms"], color="gray", ls=":", label="memcpy (limit)")
        for ax, what in ((lat, "mean read latency (ms)"), (age, "mean age of the parameters read (ms)"),
                         (load, "reads reaching the server per s")):
            ax.set(xscale="log", yscale="log", xlabel="reading actors", ylabel=what)
            ax.legend()
        fig.suptitle("Model retrieval with and without a cache per node")
        fig.tight_layout()
        fig.savefig(out / "reads.png", dpi=120)
        plt.close(fig)
    if writes:
        fig, ax = plt.subplots(figsize=(6.5, 4.5))
        for k, payload in enumerate(dict.fromkeys(r["payload"] for r in writes)):
            for sharded in (False, True):  # a colour per payload, a line style per replay layout
                mine = [r for r in writes if r["payload"] == payload and (r["shards"] > 1) == sharded]
                if mine:
                    ax.plot([r["writers"] for r in mine], [r["write_latency_mean_ms"] for r in mine],
                            "o-" if sharded else "s--", color=f"C{k}",
                            label=f"{payload}, {'sharded' if sharded else '1 shard'}")
        ax.set(xscale="log", yscale="log", xlabel="writing actors", ylabel="mean write latency (ms)",
               title="Replay writes: one shard vs one per writer group")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "writes.png", dpi=120)
        plt.close(fig)


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    out = bench_dir(args.out, "menger")
    from gorila.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime(address=args.address)
    try:
        # Every process started over the sweep (they are not stopped between points).
        runtime.plan(1 + (1 + len(args.caches)) * args.nodes + len(args.payloads) * (1 + args.groups))
        reads = _reads(runtime, args) if args.part in ("reads", "both") else []
        _print_reductions(reads, args.params)
        writes = _writes(runtime, args) if args.part in ("writes", "both") else []
    finally:
        runtime.shutdown()
    _csv(out / "reads.csv", READ_FIELDS, reads)
    _csv(out / "writes.csv", WRITE_FIELDS, writes)
    _plot(out, reads, writes)
    read_latency = {mode: {r["readers"]: {"mean": r["read_latency_mean_ms"], "p99": r["read_latency_p99_ms"],
                                          "max": r["read_latency_max_ms"]}
                           for r in reads if r["cache"] == mode} for mode in args.caches}
    server_reads = {mode: {r["readers"]: r["server_reads_per_s"] for r in reads if r["cache"] == mode}
                    for mode in args.caches}
    age = {mode: {r["readers"]: {"versions_mean": r["age_versions_mean"], "versions_p99": r["age_versions_p99"],
                                 "ms_mean": r["age_ms_mean"], "ms_p99": r["age_ms_p99"]}
                  for r in reads if r["cache"] == mode} for mode in args.caches}
    write_latency: dict = {}
    inserts: dict = {}
    for r in writes:
        mode = "single" if r["shards"] == 1 else "sharded"
        write_latency.setdefault(mode, {}).setdefault(r["payload"], {})[r["writers"]] = {
            "mean": r["write_latency_mean_ms"], "p99": r["write_latency_p99_ms"], "max": r["write_latency_max_ms"]}
        inserts.setdefault(mode, {}).setdefault(r["payload"], {})[r["writers"]] = r["insert_per_s"]
    write_bench_json(out, "menger", {**vars(args), "out": str(out)},
                     [{"figure": "reads", **r} for r in reads] + [{"figure": "writes", **r} for r in writes],
                     read_latency_ms=read_latency, parameter_age=age, server_reads_per_s=server_reads,
                     read_latency_reduction={"model_mb": args.params * 4 / (1 << 20), "by_readers": reductions(reads),
                                             "by_readers_poll": reductions(reads, "poll"),
                                             "seed": SEED_READ_REDUCTION},
                     write_latency_ms=write_latency, insert_per_s=inserts)
    print(f"wrote {out / 'reads.csv'}, {out / 'writes.csv'} and their plots")
    return 0
