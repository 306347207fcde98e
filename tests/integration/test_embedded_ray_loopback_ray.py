"""The embedded Ray of ``gorila train`` listens on 127.0.0.1 only and serves no dashboard: every
process it starts (its own and its workers) listens on loopback, and nothing on the dashboard's
port, while a task runs on it."""

import psutil
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

LOOPBACK = ("127.0.0.1", "::ffff:127.0.0.1", "::1")
DASHBOARD_PORT = 8265


def test_the_embedded_ray_listens_on_loopback_only_and_serves_no_dashboard(ray_local):
    assert ray_local.get(ray_local.remote(lambda: 7).remote(), timeout=60) == 7  # a worker is up too
    lines, listening = [], []
    for process in psutil.Process().children(recursive=True):
        try:
            lines.append(" ".join(process.cmdline()))
            listening += [c.laddr for c in process.net_connections("inet") if c.status == psutil.CONN_LISTEN]
        except psutil.NoSuchProcess:
            continue
    assert any("gcs_server" in line for line in lines) and any("raylet" in line for line in lines), lines
    assert listening, "nothing listens: nothing was checked"
    assert all(addr.ip in LOOPBACK for addr in listening), listening
    assert DASHBOARD_PORT not in {addr.port for addr in listening}


@pytest.mark.timeout(60)
def test_a_gpu_asked_of_the_embedded_ray_without_one_is_refused_at_once_not_after_the_scheduling_timeout(ray_local):
    """No node joins this machine's own Ray, so a GPU it was not started with never comes: the
    refusal must not wait out the 600 s asked for here (60 s by default) before naming the flag."""
    from gorila.errors import SchedulingError
    from gorila.replay.shard import ReplayShard  # any service factory: it is never built
    from gorila.runtime.ray_runtime import RayRuntime

    if ray_local.cluster_resources().get("GPU", 0.0):
        pytest.skip("this machine's Ray has a GPU")
    runtime = RayRuntime(schedule_timeout_s=600.0)
    runtime.plan(2)
    try:
        with pytest.raises(SchedulingError, match="could not be placed: each asks for 0.5 GPU .*--device cuda"):
            runtime.start_services(ReplayShard, 2, name="learner", gpus=0.5)
    finally:
        runtime.shutdown()


def test_address_local_starts_the_embedded_ray_not_rays_own_local_one(tmp_path):
    """A resumed run's config.json names the cluster it ran on; ``--address local`` resumes it on this
    machine. Ray's own ``address="local"`` would start a Ray with its defaults: a dashboard, a usage
    report to Ray's servers, its workers at nice 15."""
    import ray

    from gorila.runtime.embedded_ray import embedded_ray_is_up
    from gorila.runtime.ray_runtime import RayRuntime

    assert not ray.is_initialized()  # no test before this one left a Ray up in this process
    runtime = RayRuntime(address="local")
    try:
        assert embedded_ray_is_up()
    finally:
        runtime.shutdown()
