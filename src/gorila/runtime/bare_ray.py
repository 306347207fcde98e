"""What any Ray program that trains with torch must wait for — Ray up, one process with torch in
it — timed in a fresh interpreter: ``python -m gorila.runtime.bare_ray`` prints the seconds since
that interpreter started. ``gorila bench startup`` uses it as its limit."""

import os
import time

import psutil

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before Ray starts: loopback only

import ray  # noqa: E402


@ray.remote(num_cpus=0.5)
class _Torch:
    def ready(self) -> int:
        import torch

        return torch.get_num_threads()


if __name__ == "__main__":
    ray.init(address="local", include_dashboard=False, logging_level=40)
    ray.get(_Torch.remote().ready.remote(), timeout=600)
    print(time.time() - psutil.Process().create_time())
