"""Shared fixtures: one embedded Ray shared by the tests that ask for it, training through the
builder and the driver as ``gorila train`` does, and the ``gorila`` command run as a job."""

import contextlib
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


_shared_ray = {"up": False}  # whether the embedded Ray of ``ray_local`` is running


@pytest.fixture
def ray_local():
    """The embedded Ray of ``gorila train`` (loopback, one thread per process); runtimes made inside
    join it. It is started once for a run of consecutive tests that ask for it, across modules
    (starting one takes seconds), and shut down before the first test that does not."""
    import ray

    from gorila.runtime.embedded_ray import start_embedded_ray

    if not _shared_ray["up"]:
        start_embedded_ray(num_cpus=2)
        _shared_ray["up"] = True
    return ray


@pytest.fixture
def ray_runtime(ray_local):
    """A :class:`~gorila.runtime.ray_runtime.RayRuntime` on the shared embedded Ray, planned for two
    processes (a shard and one more), shut down after the test."""
    from gorila.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime()
    runtime.plan(2)
    yield runtime
    runtime.shutdown()


def pytest_collection_modifyitems(items):
    """Run the tests that ask for ``ray_local`` first, in their collected order, so that one shared
    Ray serves them all (each start and shutdown costs seconds); the others follow, also in order.
    The ``ray_local`` tests are also the long ones: started first, they leave the short ones to
    even out the end of a run spread over several pytest workers."""
    items.sort(key=lambda item: "ray_local" not in item.fixturenames)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    if _shared_ray["up"] and (nextitem is None or "ray_local" not in nextitem.fixturenames):
        import ray

        from gorila.runtime.ray_cwd import release_empty_directory

        ray.shutdown()
        release_empty_directory()  # the directory Ray's processes worked in
        _shared_ray["up"] = False


def _train(run_config, *configs, on_chunk=None):
    from gorila.agents.registry import ALGORITHMS
    from gorila.driver.loop import run

    return run(run_config, ALGORITHMS[run_config.algo].plan_fn()(run_config, *configs), on_chunk)


@contextlib.contextmanager
def _loopback_cluster(nodes):
    """A Ray cluster of ``nodes`` nodes of one CPU each, simulated on loopback and joined; shut down on exit."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="module")
def two_nodes():
    """A two-node Ray cluster simulated on loopback (one CPU each) for this module; yields ``ray``."""
    import ray

    with _loopback_cluster(2):
        yield ray


@pytest.fixture(scope="module")
def three_nodes():
    """A three-node Ray cluster simulated on loopback (one CPU each) for this module; yields it."""
    with _loopback_cluster(3) as cluster:
        yield cluster


@pytest.fixture
def gpu_refusal():
    """``gpu_refusal(factory, gpus)``: the :class:`SchedulingError` of a Ray runtime asked, on the
    cluster this test joined, for a service of two processes each asking ``gpus`` of a GPU (never
    built: it cannot be placed within the 3 s scheduling timeout)."""
    def refusal(factory, gpus):
        from gorila.errors import SchedulingError
        from gorila.runtime.ray_runtime import RayRuntime

        runtime = RayRuntime(schedule_timeout_s=3.0)
        runtime.plan(2)
        try:
            with pytest.raises(SchedulingError, match="--device cuda") as err:
                runtime.start_services(factory, 2, name="learner", gpus=gpus)
            return err.value
        finally:
            runtime.shutdown()
    return refusal


@pytest.fixture
def wait_until():
    """``wait_until(condition, timeout_s, what)``: call ``condition`` until it holds; an AssertionError
    naming ``what`` once ``timeout_s`` has passed."""
    def wait(condition, timeout_s, what):
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} within {timeout_s} s")
    return wait


@pytest.fixture
def train():
    """``train(run_config, *configs, on_chunk=None)``: the algorithm's builder, then the driver."""
    return _train


class GorilaProcess:
    """``python -m gorila ARGS`` in a session of its own, as a shell runs a job: ``signal`` reaches
    its whole process group, as Ctrl-C does; stderr is read line by line while it runs::

        job = GorilaProcess("train", "--algo", "a3c", cwd=tmp_path)
        job.wait_for("checkpoint ", timeout_s=120)   # the first line that holds this
        job.signal(signal.SIGINT)
        code, stdout = job.finish(timeout_s=10)
    """

    def __init__(self, *args: str, cwd=None):
        self.proc = subprocess.Popen([sys.executable, "-m", "gorila", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=cwd)
        self.stderr: list[str] = []
        self._lines: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, text: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} within {timeout_s} s:\n{''.join(self.stderr)}") from None
            if line is None:
                raise AssertionError(f"gorila ended before a line with {text!r}:\n{''.join(self.stderr)}")
            if text in line:
                return line

    def signal(self, signum: int) -> None:
        os.killpg(self.proc.pid, signum)

    def finish(self, timeout_s: float) -> tuple[int, str]:
        """Wait for the exit; its code and everything it wrote on stdout."""
        code = self.proc.wait(timeout=timeout_s)
        self._reader.join(timeout=timeout_s)
        return code, self.proc.stdout.read()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


@pytest.fixture
def gorila_process():
    """``gorila_process(*args, cwd=None)`` starts a :class:`GorilaProcess`; any still running at the
    end of the test is killed."""
    started: list[GorilaProcess] = []

    def start(*args: str, cwd=None) -> GorilaProcess:
        started.append(GorilaProcess(*args, cwd=cwd))
        return started[-1]

    yield start
    for job in started:
        job.kill()


class _WriteFile:
    """A pickled payload that writes a file when unpickled: what a shared run directory could hold."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        from gorila.atomic import write_bytes

        return write_bytes, (self.path, b"owned")


@pytest.fixture
def tampered_run(tmp_path):
    """A small local A3C run whose newest checkpoint's workers' snapshot was replaced by a pickled
    payload and sealed again (a plain hash protects against damage, not against whoever rewrites
    the file): ``(run_dir, marker)``, where the payload would write ``marker``."""
    import numpy as np

    import gorila
    from gorila.checkpoint import load_checkpoint, save_checkpoint

    run_dir, marker = tmp_path / "run", tmp_path / "written"
    gorila.train("a3c", run_dir=run_dir, runtime="local", seed=3, total_steps=400, stop_at_target=False, workers=2,
                 envs_per_actor=2, unroll_length=5, eval_episodes=2, checkpoint_every_s=1000.0)
    arrays, meta = load_checkpoint(run_dir / "checkpoints")
    assert "workers.snapshot" in arrays
    arrays["workers.snapshot"] = np.frombuffer(pickle.dumps({"workers": _WriteFile(marker)}), dtype=np.uint8)
    save_checkpoint(run_dir / "checkpoints", arrays, meta)
    return run_dir, marker
