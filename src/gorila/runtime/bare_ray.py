"""What any Ray program that trains with torch must wait for — Ray up, one process with torch in
it — timed in a fresh interpreter: ``python -m gorila.runtime.bare_ray`` prints the seconds since
that interpreter started. ``gorila bench startup`` uses it as its limit.

``--idle`` leaves torch out (an idle Ray process) and ``--hold-s S`` keeps Ray up S seconds once
that process is up: ``gorila bench memory`` reads the memory of both as its limit."""

import argparse
import os
import time

from gorila.metrics.cputime import process_start_time

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before Ray starts: loopback only

import ray  # noqa: E402


@ray.remote(num_cpus=0.5)
class _Torch:
    def ready(self, torch: bool) -> int:
        if not torch:
            return 0
        import torch

        return torch.get_num_threads()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m gorila.runtime.bare_ray", description=__doc__)
    parser.add_argument("--idle", action="store_true", help="the Ray process imports nothing (no torch)")
    parser.add_argument("--hold-s", type=float, default=0.0, help="seconds Ray stays up once the process is up")
    args = parser.parse_args()
    ray.init(address="local", include_dashboard=False, logging_level=40)
    ray.get(_Torch.remote().ready.remote(not args.idle), timeout=600)
    print(time.time() - process_start_time(), flush=True)
    time.sleep(args.hold_s)
