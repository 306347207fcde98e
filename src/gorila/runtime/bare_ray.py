"""What any Ray program that trains with torch must wait for — Ray up, one process with torch in
it — timed in a fresh interpreter: ``python -m gorila.runtime.bare_ray`` prints the seconds since
that interpreter started. ``gorila bench startup`` uses it as its limit.

``--torch N --plain M`` starts N processes that import torch and M that import nothing, all at once,
and waits for every one: with a run's own counts (its workers; its shards and evaluator) it is
what the run's layout of processes alone costs this machine, the floor beneath that run's start.
``--torch 0 --plain 1`` (an idle Ray process) with ``--hold-s S``, which keeps Ray up S seconds once
the processes are up, is what ``gorila bench memory`` reads as its limit."""

import argparse
import os
import time
from typing import Any

from gorila.metrics.cputime import process_start_time

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before Ray starts: loopback only

import ray


class _Process:
    def ready(self, with_torch: bool) -> int:
        if not with_torch:
            return 0
        import torch

        return torch.get_num_threads()


# Made by a call, not a class decorator: mypy keeps a decorated class's own type, without ``options``.
_PROCESS = ray.remote(_Process)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m gorila.runtime.bare_ray", description=__doc__)
    parser.add_argument("--torch", type=int, default=1, help="Ray processes that import torch")
    parser.add_argument("--plain", type=int, default=0, help="Ray processes that import nothing")
    parser.add_argument("--hold-s", type=float, default=0.0, help="seconds Ray stays up once the processes are up")
    args = parser.parse_args()
    if args.torch < 0 or args.plain < 0 or args.torch + args.plain < 1:
        parser.error(f"--torch and --plain must be 0 or more, at least one process in all; got {args.torch} and "
                     f"{args.plain}")
    ray.init(address="local", include_dashboard=False, logging_level=40)
    # Each asks for its share of the CPUs, as gorila's processes do, so that every one is placed at once.
    cpus = ray.cluster_resources()["CPU"]  # type: ignore[no-untyped-call]  # Ray leaves it unannotated
    share = cpus / max(2, args.torch + args.plain)
    # Handles as the runtime holds them (Any): Ray types an actor's methods without their .remote.
    processes: list[tuple[Any, bool]] = [(_PROCESS.options(num_cpus=share).remote(), k < args.torch)
                                         for k in range(args.torch + args.plain)]
    ray.get([process.ready.remote(torch) for process, torch in processes], timeout=600)
    print(time.time() - process_start_time(), flush=True)
    time.sleep(args.hold_s)
