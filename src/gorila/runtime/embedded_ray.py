"""The embedded Ray of ``gorila train`` without ``--address``: started inside this process, on
loopback, with no dashboard and none of the helper processes a run does not use::

    start_embedded_ray()        # Ray up; runtimes made meanwhile join it (a benchmark's runs, the tests')
    embedded_ray_is_up()        # whether the Ray this process is connected to is that one

Its processes inherit one thread each and run at the driver's priority; it records no task events.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from gorila.runtime import ONE_THREAD
from gorila.runtime.ray_calls import ray

#: Helper processes that an embedded Ray starts and a gorila run never uses, by the method of
#: Ray's ``Node`` that starts each. The autoscaler monitor has nothing to scale on one machine (as
#: with ``ray start --no-monitor``). The dashboard head, started in minimal mode even without a
#: dashboard, serves job submission and usage statistics, and ``ray.init`` waits for it to answer.
#: With the log monitor they took ~2 CPU-seconds of ``ray.init`` on 2 cores; without them the first
#: env step of ``gorila bench startup`` came 2 s sooner (with :func:`gorila.runtime.preload`).
UNUSED_HELPERS = ("start_monitor", "start_api_server")
#: The log monitor forwards the workers' output to drivers that asked for it (``log_to_driver``:
#: gorila's ``--verbose`` only).
LOG_MONITOR = "start_log_monitor"

#: How often the start looks for its raylet among the GCS's nodes. Ray's own wait for it looks
#: once a second, so a raylet that registered just after a look cost the start most of a second
#: more (Ray up after 4.0 s instead of 3.0 s in a third of the starts on 2 cores).
REGISTERED_POLL_S = 0.02
#: How long the start looks before it leaves the wait to Ray, which then reports what is wrong
#: (Ray's own bound on a raylet's start).
REGISTERED_WAIT_S = 30.0

#: The interval between a Ray process's tries to connect to its node's object store or raylet.
CONNECT_RETRY_MS = 20

# The node of the embedded Ray this process started last (its id is unique to that start).
_embedded = {"node_id": None}


def start_embedded_ray(num_cpus: int | None = None, verbose: bool = False) -> None:
    """Start Ray inside this process, on loopback, as ``gorila train`` does without ``--address``.
    Its processes inherit one thread each from here; runtimes made while it is up (a benchmark's
    runs, a test's) join it and start their processes the same way."""
    os.environ.update(ONE_THREAD)
    # Nothing reads task events without a dashboard; recorded, they fill the GCS (up to 100,000
    # tasks' worth) over a long run.
    os.environ.setdefault("RAY_task_events_report_interval_ms", "0")
    # Ray starts its workers at nice 15, behind its own raylet and GCS. Here the workers are the
    # run: at 15 every learner, shard and actor yields to any process of ordinary priority (the
    # driver, the raylet, whatever else the machine runs), and each push waits for the shard it
    # wakes to get a core. At 0 they compete as the local runtime's one process does, and a
    # group's own nice (Ape-X's actors) lowers it below the learners' as meant.
    os.environ.setdefault("RAY_worker_niceness", "0")
    # The raylet connects to its object store, which its own thread is starting, and its workers
    # to the raylet, retrying once a second by default: a store not yet listening at the first try
    # cost a start a whole second (a third of the starts on 2 cores). The same ten seconds of
    # patience, in tries 20 ms apart.
    os.environ.setdefault("RAY_raylet_client_connect_timeout_milliseconds", str(CONNECT_RETRY_MS))
    os.environ.setdefault("RAY_raylet_client_num_connect_attempts", str(10_000 // CONNECT_RETRY_MS))
    with _lean_node(UNUSED_HELPERS if verbose else (*UNUSED_HELPERS, LOG_MONITOR)):
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                 logging_level=logging.INFO if verbose else logging.ERROR, log_to_driver=verbose)
    _embedded["node_id"] = ray.get_runtime_context().get_node_id()


def embedded_ray_is_up() -> bool:
    """Whether the Ray this process is connected to is one :func:`start_embedded_ray` started."""
    return ray.is_initialized() and ray.get_runtime_context().get_node_id() == _embedded["node_id"]


@contextlib.contextmanager
def _lean_node(helpers: tuple[str, ...]) -> Iterator[None]:
    """Within: a Ray node started by this process starts none of ``helpers`` (see
    :data:`UNUSED_HELPERS`), and once it has started its raylet it waits for it to register
    (:func:`_registered_after`). ``ray.init`` has no option for either (``ray start`` has
    ``--no-monitor`` only), so the node's methods are replaced for the start. A Ray whose node names
    them otherwise starts the helpers as it always does, and ``tests/integration/test_ray_helpers_ray.py``
    fails."""
    from ray._private.node import Node

    saved = {name: Node.__dict__[name] for name in (*helpers, "start_ray_processes") if name in Node.__dict__}
    try:
        for name, method in saved.items():
            setattr(Node, name, _registered_after(method) if name == "start_ray_processes" else _started_nothing)
        yield
    finally:
        for name, method in saved.items():
            setattr(Node, name, method)


def _started_nothing(node: Any, **_: Any) -> None:
    """Stands in for a ``Node`` method that would start a helper process (:func:`_lean_node`)."""


def _registered_after(start_ray_processes: Callable[[Any], None]) -> Callable[[Any], None]:
    """``Node.start_ray_processes`` (the raylet and its agents), then a wait of its own until the
    raylet is among the GCS's nodes, looking every :data:`REGISTERED_POLL_S`. ``ray.init`` then
    finds it at its first look."""

    def start_and_wait(node: Any) -> None:
        start_ray_processes(node)
        client, deadline = node.get_gcs_client(), time.monotonic() + REGISTERED_WAIT_S
        while time.monotonic() < deadline:
            try:
                if any(node_id.hex() == node.node_id for node_id in client.get_all_node_info(timeout=1)):
                    return
            except Exception:  # noqa: BLE001  (the GCS not answering yet: Ray's own wait reports it)
                pass
            time.sleep(REGISTERED_POLL_S)

    return start_and_wait
