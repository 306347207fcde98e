"""The embedded Ray's processes run at the driver's scheduling priority, not Ray's default nice
15, under which every learner, shard and actor yields to any ordinary process on the machine."""

import os

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_the_embedded_rays_processes_run_at_the_drivers_priority(ray_local):
    from gorila.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime(call_timeout_s=60)
    runtime.plan(1)
    try:
        services = runtime.start_services(lambda k: os, 1, name="priority")  # the process's own os module
        runtime.wait_started()
        (endpoint,) = services.endpoints()
        assert endpoint.call("nice", 0).result(timeout_s=30) == os.nice(0)  # nice(0) reads the niceness
    finally:
        runtime.shutdown()
