"""Issue 32, item 9: every Ray process of a run is titled by its role and index in ``ps``, not
all alike as ``ray::WorkerProcess``."""

import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def titles() -> set[str]:
    """The titles of the Ray processes under this one (the embedded Ray's), not another run's."""
    out = set()
    for process in psutil.Process().children(recursive=True):
        try:
            cmdline = process.cmdline()
        except psutil.Error:
            continue
        if cmdline and cmdline[0].startswith("ray::"):
            out.add(cmdline[0].split()[0])
    return out


def test_service_processes_are_titled_by_role_and_index(ray_local):
    from gorila.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime(call_timeout_s=60)
    runtime.plan(2)
    try:
        services = runtime.start_services(int, 2, name="replay")  # int(k): the smallest object a process can host
        runtime.wait_started()
        for endpoint in services.endpoints():  # a call each has answered: each process is up and titled
            endpoint.call("bit_length").result(timeout_s=30)
        assert {"ray::replay-0", "ray::replay-1"} <= titles(), f"titles seen: {sorted(titles())}"
        assert "ray::ServiceProcess" not in titles()
    finally:
        runtime.shutdown()
