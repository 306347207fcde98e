"""The Ray runtime: shards, services and workers as Ray processes (hosted by
:mod:`~gorila.runtime.ray_processes`, :mod:`~gorila.runtime.ray_shards` and
:mod:`~gorila.runtime.ray_caches`); like them, and like no module outside :mod:`gorila.runtime`,
it imports Ray.

With neither ``address`` nor ``RAY_ADDRESS`` it starts an embedded Ray on this machine,
bound to loopback with no dashboard, and a reaper (:mod:`~gorila.runtime.reaper`) that takes
Ray's processes down should this process be killed; otherwise it joins that cluster.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from gorila.core import ServiceFactory, ServiceGroup, WorkerFactory
from gorila.errors import ClusterUnreachableError, SchedulingError
from gorila.metrics.cputime import process_cpu_seconds
from gorila.params import ParameterServer, ServerSpec
from gorila.params.rendezvous import Rendezvous, RendezvousSpec
from gorila.params.tiers import CacheTiers
from gorila.reply import Pending
from gorila.runtime import EMBEDDED, ONE_THREAD
from gorila.runtime.address_space import limited
from gorila.runtime.cluster_auth import join_cluster
from gorila.runtime.embedded_ray import embedded_ray_is_up, start_embedded_ray
from gorila.runtime.gloo import gloo_interface
from gorila.runtime.placement import (
    alive_nodes,
    available_resources,
    cluster_resources,
    fitting_share,
    node_cpus,
    pinned,
)
from gorila.runtime.ray_caches import CACHE_CPUS, start_caches
from gorila.runtime.ray_calls import NamedActor, RayPending, ray
from gorila.runtime.ray_cwd import release_empty_directory
from gorila.runtime.ray_processes import RayServices, RayWorkers, ServiceProcess, WorkerProcess, titled
from gorila.runtime.ray_shards import RayShards, ShardProcess
from gorila.runtime.reaper import Reaper
from gorila.runtime.shard_recovery import ShardRecovery

# isort: split
# Imports Ray: after gorila.runtime.ray_calls, which sets the environment Ray reads as it is imported.
from ray.exceptions import GetTimeoutError


def _ray_ref(pending: Pending[Any]) -> ray.ObjectRef:
    """The object a reply of this runtime's processes waits for."""
    if not isinstance(pending, RayPending):
        raise TypeError(f"the Ray runtime waits on its processes' replies, not a {type(pending).__name__}")
    return pending.ref


def check_reachable(address: str, source: str, timeout_s: float) -> None:
    """Raise :class:`ClusterUnreachableError` unless a gRPC server (as Ray's GCS and Ray Client
    servers are) answers at ``address`` (``host:port`` or ``ray://host:port``) within ``timeout_s``;
    ``auto`` is left to Ray."""
    if address == "auto":
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        raise ClusterUnreachableError(f"{source} {address!r} is not a Ray address: expected HOST:PORT, "
                                      "e.g. 10.0.0.5:6379")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as conn:
            speaks_grpc = _answers_http2(conn, min(timeout_s, GRPC_ANSWER_S))
    except OSError as err:
        raise ClusterUnreachableError(
            f"no Ray cluster answers at {address} (from {source}): {err.strerror or err}. Start one there "
            f"(ray start --head --port {port}), or run on an embedded Ray on this machine: leave out --address "
            f"and RAY_ADDRESS, or pass --address {EMBEDDED} (a resumed run's config.json names its cluster)") from None
    if not speaks_grpc:
        # Ray's own connect would retry such a port for minutes, printing only its warnings.
        raise ClusterUnreachableError(
            f"something listens at {address} (from {source}) but it is not a Ray cluster: it gave no gRPC "
            f"answer within {min(timeout_s, GRPC_ANSWER_S):.0f} s. Give the address of a Ray head node "
            "(its GCS port, 6379 by default, or ray://HOST:10001), or run on an embedded Ray: leave out --address "
            f"and RAY_ADDRESS, or pass --address {EMBEDDED}")


#: How long a run whose call failed gives its cluster's GCS to answer before it takes the cluster for gone.
LOST_PROBE_S = 5.0
#: How long a server that accepted the connection has to answer the HTTP/2 preface: a gRPC server
#: answers from its network thread at once, however busy its workers are.
GRPC_ANSWER_S = 3.0
#: The HTTP/2 client preface and an empty SETTINGS frame: the first bytes of any gRPC call.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_HTTP2_SETTINGS = 4


def _answers_http2(conn: socket.socket, timeout_s: float) -> bool:
    """Whether the server at ``conn`` answers an HTTP/2 preface with its SETTINGS frame, as every
    gRPC server (a Ray GCS, a Ray Client server) does at once."""
    conn.settimeout(timeout_s)
    try:
        conn.sendall(_HTTP2_PREFACE)
        header = b""
        while len(header) < 9:
            part = conn.recv(9 - len(header))
            if not part:
                return False
            header += part
    except OSError:  # timed out, or reset
        return False
    return header[3] == _HTTP2_SETTINGS


class RayRuntime:
    """Places shards and workers as Ray processes::

        runtime = RayRuntime()                       # embedded local Ray, loopback only
        runtime = RayRuntime(address="ray://...")    # or join a cluster (also via RAY_ADDRESS)

    Every process asks for ``cpus_per_process`` CPUs (a fraction on a small machine, so no
    worker waits forever for a CPU that does not exist), and a group started with ``gpus`` its
    share of a GPU (``num_gpus``: on a node with GPUs only); a worker that cannot be placed
    within ``schedule_timeout_s`` is a :class:`SchedulingError`. An address where nothing
    answers within ``connect_timeout_s`` is a :class:`ClusterUnreachableError` naming it (Ray
    itself would retry for minutes). Ray's own logs (start-up warnings, the workers' output)
    reach the console only when ``verbose``.
    """

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 schedule_timeout_s: float = 60.0, call_timeout_s: float = 600.0,
                 max_restarts: int = 10, verbose: bool = False, connect_timeout_s: float = 10.0):
        self.schedule_timeout_s = schedule_timeout_s
        self.call_timeout_s = call_timeout_s
        self.max_restarts = max_restarts
        self._tag, self._serial = uuid.uuid4().hex[:8], itertools.count()
        self._owns = not ray.is_initialized()
        self._reaper: Reaper | None = None
        if self._owns:
            source = "--address" if address else "RAY_ADDRESS"
            address = address or os.environ.get("RAY_ADDRESS")
            try:
                # "local" is this machine's own Ray, started as without an address (loopback only,
                # no dashboard, no usage report): Ray's own "local" would start one with its defaults.
                if address and address != EMBEDDED:
                    check_reachable(address, source, connect_timeout_s)
                    join_cluster(address, source, connect_timeout_s, verbose)
                else:
                    start_embedded_ray(num_cpus, verbose)
                    self._reaper = Reaper.start()  # Ray's own processes must not outlive a killed driver
            except BaseException:
                ray.shutdown()  # a start cut short (Ctrl-C, an error) leaves no Ray process behind
                release_empty_directory()
                raise
        # Processes of an embedded Ray inherit one thread per process from this one, and reuse the
        # Python workers Ray starts in advance (four workers importing torch came up in ~3 s instead
        # of ~7 s); elsewhere they get it through a runtime_env, which makes Ray start fresh ones.
        self._runtime_env: dict | None = None if embedded_ray_is_up() else {"env_vars": ONE_THREAD}
        self.cpus_per_process = 1.0
        self._handles: list[Any] = []  # every process this runtime started, ended by shutdown()
        self._pending_start: list[tuple[Any, list, str, float]] = []
        # Closed before the processes are killed (fast paths, caches' shared memory).
        self._shard_groups: list[Any] = []

    @property
    def total_cpus(self) -> float:
        return float(cluster_resources().get("CPU", 1.0))

    def plan(self, processes: int, caches: CacheTiers | None = None) -> None:
        """Share the cluster's CPUs among ``processes`` processes (at most one CPU each), so that
        all of them fit on its nodes (:func:`fitting_share`) beside the ``caches`` (their small
        share kept free on every node: a rack's cache lives on one of its nodes)."""
        kept = 0.0 if caches is None else CACHE_CPUS * (2 if caches.rack else 1)
        self.cpus_per_process = fitting_share([c - kept for c in node_cpus()], processes)

    def _worker_options(self, gpus: float = 0.0) -> dict:
        """A worker's or service's Ray options; with ``gpus`` its share of a GPU, so that Ray places it
        on a node with GPUs (and sets its ``CUDA_VISIBLE_DEVICES``)."""
        return dict(num_cpus=self.cpus_per_process, max_restarts=self.max_restarts, max_task_retries=3,
                    **({"num_gpus": gpus} if gpus else {}), **self._env())

    def _env(self) -> dict:
        return {} if self._runtime_env is None else {"runtime_env": self._runtime_env}

    def _names(self, kind: str, count: int) -> list[str]:
        """Cluster-unique actor names: a run shares a cluster with other runs."""
        return [f"gorila-{self._tag}-{kind}-{next(self._serial)}" for _ in range(count)]

    def _starting(self, group: Any, refs: list, what: str, wait: bool, gpus: float = 0.0) -> None:
        """Note the replies that say ``group``'s processes are up (each asking ``gpus`` of a GPU);
        wait for them now, or with :meth:`wait_started` together with every other group started
        meanwhile. GPUs the embedded Ray lacks are refused at once (a :class:`SchedulingError`)."""
        if gpus and embedded_ray_is_up():
            # This machine's own Ray has the GPUs it started with and no node will join it: no wait places them.
            total = cluster_resources().get("GPU", 0.0)
            if total < gpus:
                raise SchedulingError.no_gpu(what, None, gpus, total)
        self._pending_start.append((group, refs, what, gpus))
        if wait:
            self.wait_started()

    def wait_started(self) -> None:
        """Wait until every process started so far is up (their starts overlap meanwhile); a group
        that cannot be placed within ``schedule_timeout_s`` is a :class:`SchedulingError`."""
        pending, self._pending_start = self._pending_start, []
        deadline = time.monotonic() + self.schedule_timeout_s
        for group, refs, what, gpus in pending:
            try:
                group.node_ids = ray.get(refs, timeout=max(deadline - time.monotonic(), 0.0))
            except GetTimeoutError as err:
                if gpus and available_resources().get("GPU", 0.0) < gpus:
                    raise SchedulingError.no_gpu(what, self.schedule_timeout_s, gpus,
                                                 cluster_resources().get("GPU", 0.0)) from err
                raise SchedulingError.not_started(what, self.schedule_timeout_s, self.cpus_per_process,
                                                  available_resources().get("CPU", 0.0), self.total_cpus,
                                                  limited()) from err

    def start_shards(self, spec: ServerSpec, params: np.ndarray, *, wait: bool = True,
                     checkpoints: Path | None = None) -> RayShards:
        """Shard processes; with ``spec.placement == "replicas"`` also the rendezvous where the
        learners that hold replicas meet (a service process, :mod:`gorila.params.rendezvous`), named
        in the server the workers receive. With ``checkpoints`` (the run's checkpoint directory) a
        shard process that dies is restarted and comes back from the newest good checkpoint there."""
        restarts = {} if checkpoints is None else dict(max_restarts=self.max_restarts, max_task_retries=3)
        handles = [NamedActor(titled(ShardProcess, f"shard-{k}")
                              .options(num_cpus=self.cpus_per_process, scheduling_strategy="SPREAD",
                                       max_concurrency=1000, name=name, **restarts, **self._env()).remote(
                       self.call_timeout_s, None if checkpoints is None else ShardRecovery(
                           Path(checkpoints).absolute(), k, spec.rule, spec.optimizer, spec.nonfinite_limit)),
                   name)
                   for k, name in enumerate(self._names("shard", spec.num_shards))]
        self._handles += handles
        group = RayShards(handles, spec, params.size, self.call_timeout_s)
        self._shard_groups.append(group)
        loads = [h.load.remote(shard) for h, shard in zip(handles, spec.build(params))]
        self._starting(group, loads, f"{spec.num_shards} parameter shards", wait)
        if spec.placement == "replicas":
            rendezvous = self.start_services(Rendezvous, 1, name="rendezvous", wait=wait)
            group.server = replace(group.server, rendezvous=RendezvousSpec(rendezvous.endpoints()[0], gloo_interface))
        return group

    def start_param_caches(self, server: ParameterServer, tiers: CacheTiers = CacheTiers(),
                           wait_s: float = 0.25) -> tuple[ParameterServer, dict[str, ServiceGroup]]:
        """A parameter cache on every alive node, and with a rack tier one per rack of
        ``tiers.nodes_per_rack`` nodes in between (:mod:`gorila.runtime.ray_caches`), restarted by
        Ray when they die and closed before the processes are killed; the server whose ``source()``
        reads the node caches, and each tier's group by name (``param_cache``, ``rack_cache``)."""
        nodes = alive_nodes()
        names = self._names("param-cache", len(nodes)) + self._names("rack-cache", tiers.racks(len(nodes)))
        spec, groups = start_caches(server, f"gorila-{self._tag}-params", wait_s, nodes, names, self.call_timeout_s,
                                    dict(max_restarts=self.max_restarts, max_task_retries=3, **self._env()), tiers)
        for name, caches in groups.items():
            self._handles += caches.handles
            self._shard_groups.insert(0, caches)  # node caches closed first, then the racks they read
            self._starting(caches, [h.ready.remote() for h in caches.handles],
                           f"{len(caches.handles)} {caches.name}s", wait=False)
        return replace(server, cache=spec), dict(groups)

    def start_services(self, factory: ServiceFactory, count: int, *, name: str, wait: bool = True,
                       node_of: Callable[[int], int] | None = None, gpus: float = 0.0) -> RayServices:
        nodes = alive_nodes() if node_of else []
        handles = [NamedActor(titled(ServiceProcess, f"{name}-{k}")  # its processes titled by role and index in ps
                              .options(**self._worker_options(gpus), name=actor,
                                       **(pinned(nodes, node_of(k)) if node_of else {})).remote(factory, k),
                              actor)
                   for k, actor in enumerate(self._names(name, count))]
        self._handles += handles
        group = RayServices(handles, name, self.call_timeout_s)
        self._starting(group, [h.ready.remote() for h in handles], f"{count} {name}s", wait, gpus)
        return group

    def start_workers(self, factory: WorkerFactory, count: int, server: ParameterServer, *,
                      name: str, nice: int = 0, wait: bool = True,
                      node_of: Callable[[int], int] | None = None, gpus: float = 0.0,
                      spread: bool = False) -> RayWorkers:
        nodes = alive_nodes() if node_of else []
        # Ray's SPREAD is best effort: a member goes where there is room when its turn's node has none.
        unpinned = {"scheduling_strategy": "SPREAD"} if spread else {}
        handles = [NamedActor(titled(WorkerProcess, f"{name}-{k}")  # its processes titled by role and index in ps
                              .options(**self._worker_options(gpus), name=actor,
                                       **(pinned(nodes, node_of(k)) if node_of else unpinned))
                              .remote(factory, k, server, nice),
                              actor)
                   for k, actor in enumerate(self._names(name, count))]
        self._handles += handles
        group = RayWorkers(handles, name, self.call_timeout_s)
        self._starting(group, [h.ready.remote() for h in handles], f"{count} {name}s", wait, gpus)
        return group

    def wait(self, pending: list[Pending[Any]], timeout_s: float) -> list[int]:
        """Block in Ray until at least one reply is ready (or ``timeout_s`` passed); the replies are
        those of this runtime's processes (:class:`~gorila.runtime.ray_calls.RayPending`)."""
        refs = [_ray_ref(p) for p in pending]
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout_s)
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0) if ready else (ready, None)
        done = {r.hex() for r in ready}
        return [k for k, ref in enumerate(refs) if ref.hex() in done]

    def cluster_lost(self) -> str | None:
        """The address of this runtime's cluster if its GCS no longer answers (the head node died,
        or the network to it), else None: what a failed call into the run's processes means."""
        address = ray.get_runtime_context().gcs_address
        try:
            check_reachable(address, "the cluster", LOST_PROBE_S)
        except ClusterUnreachableError:
            return address
        return None

    def cpu_seconds(self) -> float:
        """This (driver) process's CPU time; groups report their own."""
        return process_cpu_seconds()

    def shutdown(self) -> None:
        """End this runtime's processes (and the embedded Ray, if this runtime started it)."""
        if not ray.is_initialized():
            return
        try:
            for group in self._shard_groups:
                group.close()
        finally:
            self._shard_groups.clear()
            for actor in self._handles:
                ray.kill(actor.handle, no_restart=True)
            self._handles.clear()
            if self._owns:
                ray.shutdown()
                release_empty_directory()
            if self._reaper is not None:
                self._reaper.stop()
                self._reaper = None
