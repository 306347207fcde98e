"""What a run will take of the machine it starts on, estimated from its settings before anything
starts; a run that cannot fit is refused with the estimate (a :class:`~gorila.errors.ConfigError`
naming the setting that makes it too big, exit 2 on the command line)::

    check_fits(run, configs)                                  # this machine, now
    check_fits(run, configs, Machine(cpus=2, memory_bytes=8 * 2**30))
    estimate(run, configs).total_bytes                        # what it counts

The estimate is a floor, never more than the run will take, so a refusal is never wrong: every
Ray process imports PyTorch (:data:`PROCESS_BYTES`), every process holds at least one copy of the
network and the server three more (its parameters, their gradient, its optimizer's state), and each
replay is as big as :func:`~gorila.replay.memory.estimate_storage_bytes` says. A run that joins a
cluster (``--address``, ``RAY_ADDRESS``) puts its processes on other machines: it is not checked
here (the Ray runtime refuses a plan the cluster's CPUs cannot place as soon as it has joined).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from gorila.config import RunConfig
from gorila.errors import ConfigError
from gorila.machine import Machine

#: The memory of one Ray process of a run once it has imported PyTorch (docs/benchmarks.md, ``gorila
#: bench memory``: a bundle takes about 210 MiB PSS with its small replay, the shard 60 without torch).
PROCESS_BYTES = 150 * 2**20
#: Ray places a process on at least this share of a CPU (:func:`gorila.runtime.placement.fitting_share`).
MIN_CPU_SHARE = 0.01
#: Copies of the network the parameter server holds besides the workers' own: the parameters, a
#: gradient, an optimizer's state.
SERVER_COPIES = 3
FLOAT_BYTES = 4


@dataclass(frozen=True)
class Estimate:
    """A run's floor of processes and memory, and the setting each part comes from::

        e = estimate(run, configs)
        e.processes, e.network_bytes, e.replay_bytes, e.total_bytes
    """

    processes: int  # on Ray: workers, services, shards and the evaluator; 1 on the local runtime
    count_field: str  # the setting that sets most of the processes (workers, actors, learners)
    network_bytes: int  # every copy of the network together
    replay_bytes: int  # every replay together
    process_bytes: int  # the processes' own memory, before any network or replay

    @property
    def total_bytes(self) -> int:
        return self.network_bytes + self.replay_bytes + self.process_bytes


def check_fits(run: RunConfig, configs: list[Any], machine: Machine | None = None) -> Estimate | None:
    """Refuse a run whose :func:`estimate` does not fit in ``machine`` (this one by default): more
    processes than Ray can place on its CPUs, or more memory than the share of what is free that
    a run may use (:data:`~gorila.replay.memory.MAX_FRACTION`). None for a run that joins a cluster."""
    from gorila.replay.memory import MAX_FRACTION

    if run.runtime == "ray" and (run.address or os.environ.get("RAY_ADDRESS")):
        return None
    machine = machine or Machine.here()
    found = estimate(run, configs)
    main = configs[0]
    count = getattr(main, found.count_field, None)
    if run.runtime == "ray" and found.processes * MIN_CPU_SHARE > machine.cpus:
        raise ConfigError(found.count_field, f"{count} makes {found.processes} processes, and Ray places each on at "
                                             f"least {MIN_CPU_SHARE:g} of a CPU: that needs "
                                             f"{math.ceil(found.processes * MIN_CPU_SHARE)} CPUs, this machine has "
                                             f"{machine.cpus} (room for {int(machine.cpus / MIN_CPU_SHARE)} "
                                             "processes in all); lower it")
    allowed = MAX_FRACTION * machine.memory_bytes
    if found.total_bytes > allowed:
        parts = {found.count_field: found.process_bytes, "hidden": found.network_bytes,
                 "replay_capacity": found.replay_bytes}
        field = max(parts, key=lambda name: parts[name])
        value = getattr(main, field, count)
        shown = ",".join(map(str, value)) if isinstance(value, tuple) else value
        raise ConfigError(field, f"{shown} needs about {_gib(found.total_bytes)} of memory ({_parts(found)}); "
                                 f"{_gib(machine.memory_bytes)} is available and a run may use "
                                 f"{MAX_FRACTION:.0%} of it; lower it")
    return found


def estimate(run: RunConfig, configs: list[Any]) -> Estimate:
    """The floor of processes and memory of the run ``run`` and ``configs`` describe."""
    main = configs[0]
    workers, count_field = _workers(run.algo, main)
    on_ray = run.runtime == "ray"
    # the shards are processes under either server (an owning learner's store), and the evaluator one
    processes = workers + (run.shards + 1 if on_ray else 0)
    observation, actions = _spaces(configs)
    copies = workers + SERVER_COPIES
    network = _network_parameters(run.algo, main, observation, actions) * FLOAT_BYTES * copies
    return Estimate(processes=processes if on_ray else 1, count_field=count_field, network_bytes=network,
                    replay_bytes=_replay_bytes(run.algo, main, observation),
                    process_bytes=processes * PROCESS_BYTES if on_ray else 0)


def _workers(algo: str, cfg: Any) -> tuple[int, str]:
    """The processes that work (the builders' ``processes``), and the setting that sets most of them."""
    if algo in ("lstsq", "a3c"):
        return cfg.workers, "workers"
    if algo == "dqn":
        if cfg.replay == "local":
            return cfg.actors, "actors"
        return cfg.actors + cfg.num_learners + cfg.replay_shards, "actors"
    if algo == "apex":
        return cfg.actors + cfg.learners + cfg.replay_shards, "actors"
    # impala, ppo: a learner and its queue are two processes
    return cfg.actors + 2 * cfg.learners, "actors" if cfg.actors >= 2 * cfg.learners else "learners"


def _spaces(configs: list[Any]) -> tuple[Any, Any]:
    """The env's observation and action spaces (None for lstsq), as the builders will read them."""
    env = getattr(configs[-1], "env", None)
    if not isinstance(env, str):
        return None, None
    from gorila.envs.make import env_spaces  # gymnasium, not PyTorch; cached for the builders

    return env_spaces(env)


def _network_parameters(algo: str, cfg: Any, observation: Any, actions: Any) -> int:
    """Parameters of the MLP(s) ``hidden`` makes for a vector observation (0 for images, whose
    networks ``hidden`` does not shape, and for lstsq)."""
    hidden = getattr(cfg, "hidden", None)
    shape = getattr(observation, "shape", None)
    if hidden is None or shape is None or len(shape) != 1:
        return 0
    outputs = int(getattr(actions, "n", 1))

    def mlp(out: int) -> int:
        widths = [int(shape[0]), *hidden, out]
        return sum(a * b + b for a, b in zip(widths, widths[1:]))

    if algo in ("a3c", "impala", "ppo") and not getattr(cfg, "shared_torso", False):
        return mlp(outputs) + mlp(1)  # a policy network and a value network
    return mlp(outputs)


def _replay_bytes(algo: str, cfg: Any, observation: Any) -> int:
    """Every replay of DQN (one per bundle, or one per shard) and of Ape-X (one per shard)."""
    if algo not in ("dqn", "apex") or observation is None:
        return 0
    from gorila.replay.memory import estimate_storage_bytes

    replays: int = cfg.actors if algo == "dqn" and cfg.replay == "local" else cfg.replay_shards
    return replays * estimate_storage_bytes(cfg.replay_capacity, tuple(observation.shape), observation.dtype)


def _gib(size: float) -> str:
    return f"{size / 2**30:,.1f} GiB" if size >= 2**30 else f"{size / 2**20:,.0f} MiB"


def _parts(found: Estimate) -> str:
    parts = [(f"{found.processes} processes", found.process_bytes), ("the networks", found.network_bytes),
             ("the replays", found.replay_bytes)]
    return ", ".join(f"{name} {_gib(size)}" for name, size in parts if size)
