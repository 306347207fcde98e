"""Service calls on real Ray: from the service's node they go over its socket once it has said
where that is, and a service process that dies is called again through Ray, then over its new
process's socket."""

import os
import sys
import threading

import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


class Where:
    """A service that says which process and thread answered, and counts its calls."""

    def __init__(self, service_id):
        self.calls = 0

    def where(self):
        self.calls += 1
        return os.getpid(), threading.current_thread().name, self.calls


@pytest.fixture
def runtime(ray_local):
    import ray.cloudpickle

    from gorila.runtime.ray_runtime import RayRuntime

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the tests' modules are not installed
    rt = RayRuntime(call_timeout_s=60)
    rt.plan(2)
    yield rt
    rt.shutdown()
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def _until_over_the_socket(endpoint, calls=500):
    """Call until a reply comes from the service's socket thread (it says where its socket is in
    reply to the first call's question); every reply seen."""
    seen = []
    for _ in range(calls):
        seen.append(endpoint.call("where").result(timeout_s=60))
        if seen[-1][1] == "service-call":
            return seen
    raise AssertionError(f"no call went over the socket in {calls}: {seen[-3:]}")


def test_calls_from_the_service_s_node_go_over_its_socket_in_order(runtime):
    services = runtime.start_services(Where, 1, name="replay")
    (endpoint,) = services.endpoints()
    seen = _until_over_the_socket(endpoint)
    assert seen[0][1] != "service-call"  # the first, before the service said where its socket is: Ray's call
    assert [count for _, _, count in seen] == list(range(1, len(seen) + 1))
    pending = [endpoint.call("where") for _ in range(5)]
    assert [p.result(timeout_s=60)[1:] for p in pending] == [("service-call", len(seen) + k) for k in range(1, 6)]


def test_a_service_that_dies_is_called_through_ray_then_over_its_new_socket(runtime):
    services = runtime.start_services(Where, 1, name="replay")
    (endpoint,) = services.endpoints()
    first_pid = _until_over_the_socket(endpoint)[-1][0]
    services.kill(0)
    psutil.Process(first_pid).wait(timeout=60)  # Ray's kill is under way when it returns
    again = endpoint.call("where").result(timeout_s=60)  # the socket lost: made again through Ray
    assert again[0] != first_pid
    pid, thread, _ = _until_over_the_socket(endpoint)[-1]
    assert (pid, thread) == (again[0], "service-call")
