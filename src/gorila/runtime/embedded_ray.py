"""The embedded Ray of ``gorila train`` without ``--address``: started inside this process by
``ray.init``, on loopback, without the dashboard's web server::

    start_embedded_ray()        # Ray up; runtimes made meanwhile join it (a benchmark's runs, the tests')
    embedded_ray_is_up()        # whether the Ray this process is connected to is that one

Ray starts in an empty directory, not the one the command was run in (:mod:`gorila.runtime.ray_cwd`).
Its processes inherit one thread each and run at the driver's priority; it records no task events
and sends no usage statistics. ``ray.init`` also starts the helpers a node always has (the
autoscaler monitor, the dashboard's head process with its web frontend off, the log monitor): Ray
offers no public setting to leave them out.
"""

from __future__ import annotations

import functools
import logging
import os

from gorila.errors import SchedulingError
from gorila.runtime import ONE_THREAD
from gorila.runtime.address_space import object_store_bytes
from gorila.runtime.ray_calls import ray
from gorila.runtime.ray_cwd import away_from_working_directory

#: The interval between a Ray process's tries to connect to its node's object store or raylet.
CONNECT_RETRY_MS = 20

# The node of the embedded Ray this process started last (its id is unique to that start).
_embedded: dict[str, str | None] = {"node_id": None}


def start_embedded_ray(num_cpus: int | None = None, verbose: bool = False) -> None:
    """Start Ray inside this process, on loopback, as ``gorila train`` does without ``--address``.
    Its processes inherit one thread each from here; runtimes made while it is up (a benchmark's
    runs, a test's) join it and start their processes the same way."""
    os.environ.update(ONE_THREAD)
    # Nothing reads task events without a dashboard; recorded, they fill the GCS (up to 100,000
    # tasks' worth) over a long run.
    os.environ.setdefault("RAY_task_events_report_interval_ms", "0")
    # The dashboard's head process reports usage statistics to Ray's servers unless this says no
    # (Ray's documented opt-out); a run on loopback sends nothing off the machine.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
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
    # include_dashboard=False: the head process loads no dashboard module and serves no web page.
    # log_to_driver: the workers' output reaches this console only with --verbose.
    # object_store_memory: under a limited address space, a store that fits beside each process (address_space).
    init = functools.partial(ray.init, address="local", num_cpus=num_cpus, include_dashboard=False,
                             logging_level=logging.INFO if verbose else logging.ERROR, log_to_driver=verbose,
                             object_store_memory=object_store_bytes())
    # Ray gives its raylet 30 s to register, fixed; on 2 cores already busy (a test suite's two-node
    # clusters beside it) it once took longer. One more start, as patient again, then a named error.
    for last in (False, True):
        try:
            with away_from_working_directory():  # never from the directory the command was run in (ray_cwd)
                init()
            break
        except Exception as err:  # Ray raises a bare Exception for this one
            if STARTUP_TIMED_OUT not in str(err):
                raise
            ray.shutdown()
            if last:
                raise SchedulingError(
                    f"Ray did not start on this machine, twice ({err}): its processes did not come up within "
                    f"its 30 s, at a load average of {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs. Try "
                    "again once the machine is quieter, or train in this process (--runtime local)") from None
    _embedded["node_id"] = ray.get_runtime_context().get_node_id()


#: What Ray's error says when its raylet did not register in time.
STARTUP_TIMED_OUT = "timed out during startup"


def embedded_ray_is_up() -> bool:
    """Whether the Ray this process is connected to is one :func:`start_embedded_ray` started."""
    return ray.is_initialized() and ray.get_runtime_context().get_node_id() == _embedded["node_id"]
