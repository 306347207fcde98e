"""``gorila bench ps``: parameter-server round trips through the Ray runtime vs a memcpy."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from gorila.bench.report import bench_dir, write_bench_json
from gorila.cliargs import command_parser
from gorila.params import ParameterClient, ServerSpec, UpdateRule

NATURE_CNN_PARAMS = 1_687_206  # the Nature CNN with 6 actions (Pong)


def memcpy_seconds(nbytes: int, repeats: int = 50) -> float:
    """Median time of copying ``nbytes`` between two preallocated buffers."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def round_trips(client: ParameterClient, grad: np.ndarray, rounds: int) -> tuple[float, float]:
    """Median seconds of a push+pull round trip and of a pull alone."""
    client.params()
    for _ in range(5):  # warm-up: first calls pay for worker start, connections and page faults
        client.push(grad)
    rt = []
    for _ in range(rounds):
        t = time.perf_counter()
        result = client.push(grad)  # the reply carries the new parameters: push + pull in one trip
        rt.append(time.perf_counter() - t)
        assert result is not None and result.refreshed
    pulls = []
    for _ in range(rounds):
        t = time.perf_counter()
        client.pull()
        pulls.append(time.perf_counter() - t)
    return float(np.median(rt)), float(np.median(pulls))


def main(argv: list[str]) -> int:
    parser = command_parser("gorila bench ps", __doc__)
    parser.add_argument("--params", type=int, default=NATURE_CNN_PARAMS, help="parameters in the vector")
    parser.add_argument("--shards", type=int, default=1, help="parameter-server shards")
    parser.add_argument("--rounds", type=int, default=50, help="measured round trips")
    parser.add_argument("--transport", choices=("shm", "ray", "both"), default="both",
                        help="shm: same-node fast path (shared memory + Unix socket); ray: Ray calls")
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: embedded)")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for bench.json (default: bench-out/ps-<time>)")
    args = parser.parse_args(argv)
    out = bench_dir(args.out, "ps")
    from gorila.runtime.ray_runtime import RayRuntime
    from gorila.runtime.ray_shard_endpoint import RayShardEndpoint

    transports = ("shm", "ray") if args.transport == "both" else (args.transport,)
    runtime = RayRuntime(address=args.address)
    figures = {}
    try:
        runtime.plan(args.shards + 1)
        spec = ServerSpec(rule=UpdateRule.asynchronous(), num_shards=args.shards, optimizer="sgd", lr=1e-3)
        shards = runtime.start_shards(spec, np.zeros(args.params, np.float32))
        grad = np.full(args.params, 1e-3, np.float32)
        for transport in transports:
            server = shards.server if transport == "shm" else shards.ray_call_server()
            figures[transport] = round_trips(server.client(), grad, args.rounds)
            used = {ep.transport for ep in server.endpoints if isinstance(ep, RayShardEndpoint)}  # all are
            if used != {transport}:  # e.g. shards on another node: say what was measured
                figures[f"{transport} (went by {'+'.join(sorted(used))})"] = figures.pop(transport)
    finally:
        runtime.shutdown()
    copy = memcpy_seconds(args.params * 4)
    mb = args.params * 4 / 1e6
    print(f"parameters       {args.params:,} float32 ({mb:.2f} MB), {args.shards} shard(s)")
    print(f"memcpy           {copy * 1e3:8.3f} ms   (the limit, measured now)")
    rows = []
    for transport, (round_trip, pull) in figures.items():
        print(f"{transport}")
        print(f"  push+pull      {round_trip * 1e3:8.3f} ms   = {round_trip / copy:6.1f} x memcpy  "
              f"(median of {args.rounds})")
        print(f"  pull           {pull * 1e3:8.3f} ms   = {pull / copy:6.1f} x memcpy")
        rows.append({"transport": transport, "push_pull_ms": round_trip * 1e3, "pull_ms": pull * 1e3,
                     "limit_memcpy_ms": copy * 1e3, "ratio": round_trip / copy, "pull_ratio": pull / copy})
    write_bench_json(out, "ps", vars(args), rows, bytes=args.params * 4)
    return 0
