"""The sharded parameter server: how to build its shards (:class:`ServerSpec`), how workers reach
them once placed (:class:`ParameterServer`), and their counters and checkpoint layout."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gorila import validate
from gorila.errors import CheckpointError, ConfigError
from gorila.params.cache import CachedSource, CacheSpec
from gorila.params.client import ParameterClient, ShardEndpoint
from gorila.params.layout import ShardLayout
from gorila.params.learning_rate import LearningRate, LinearDecay
from gorila.params.optim import OPTIMIZERS, optimizer_slots
from gorila.params.rendezvous import RendezvousSpec
from gorila.params.rule import UpdateRule
from gorila.params.shard import ParameterShard
from gorila.params.shard_stats import ShardStats
from gorila.params.tiers import ServerUpstream

#: Where a runtime puts the shards: ``process``, each in a process of its own; ``replicas``, the
#: same shard processes as the store of several learners that each hold a replica
#: (:mod:`gorila.params.replicas`), beside the rendezvous where those learners meet.
PLACEMENTS = ("process", "replicas")


@dataclass(frozen=True)
class ServerSpec:
    """Everything needed to build the shards, except the initial parameters::

        spec = ServerSpec(rule=UpdateRule.synchronous(4), num_shards=2, optimizer="sgd", lr=0.1)
        shards = spec.build(initial_params)

    ``lr`` may be a float32 vector over the whole flat vector (per-parameter rates), or a
    :class:`~gorila.params.learning_rate.LinearDecay` that every shard steps down alike. ``placement``
    says where a runtime puts the shards (:data:`PLACEMENTS`).
    A worker whose ``nonfinite_limit``-th non-finite gradient in a row arrives stops the run.
    """

    rule: UpdateRule
    num_shards: int = 1
    optimizer: str = "sgd"
    lr: LearningRate = 0.1
    placement: str = "process"
    nonfinite_limit: int = 10

    def __post_init__(self) -> None:
        validate.integer("shards", self.num_shards, low=1)
        validate.integer("nonfinite_limit", self.nonfinite_limit, low=1)
        validate.choice("server", self.placement, PLACEMENTS)
        validate.choice("optimizer", self.optimizer, OPTIMIZERS)
        if not isinstance(self.lr, np.ndarray | LinearDecay):  # those check themselves
            validate.number("lr", self.lr, low=0.0, low_open=True)

    def layout(self, size: int) -> ShardLayout:
        return ShardLayout(size, self.num_shards)

    @property
    def processes(self) -> int:
        """The processes a distributed runtime starts for this server: its shards, and with
        ``replicas`` the learners' rendezvous."""
        return self.num_shards + (self.placement == "replicas")

    def build_shard(self, part: np.ndarray, size: int, shard_id: int) -> ParameterShard:
        """Shard ``shard_id`` holding ``part``, its slice of a flat vector of ``size`` parameters."""
        lr = self.lr[self.layout(size).slices[shard_id]] if isinstance(self.lr, np.ndarray) else self.lr
        return ParameterShard(part, rule=self.rule, optimizer=self.optimizer, lr=lr, shard_id=shard_id,
                              nonfinite_limit=self.nonfinite_limit)

    def build(self, params: np.ndarray) -> list[ParameterShard]:
        """Every shard of the flat ``params``."""
        parts = self.layout(params.size).split(params)
        return [self.build_shard(part, params.size, i) for i, part in enumerate(parts)]


@dataclass(frozen=True)
class ParameterServer:
    """The placed shards as a worker sees them (picklable: every worker factory receives one)::

        client = server.client(worker_id=3)    # its layout and barrier come from here
        client.params(); client.push(grad)

    A runtime builds it when it starts the shards (``runtime.start_shards(spec, params).server``).
    With ``cache`` (``runtime.start_param_caches``), :meth:`source` is the actor's node cache;
    ``rendezvous`` is where learners holding replicas meet (placement ``replicas`` on Ray).
    """

    endpoints: tuple[ShardEndpoint, ...]
    layout: ShardLayout
    rule: UpdateRule
    timeout_s: float = 600.0
    cache: CacheSpec | None = None
    rendezvous: RendezvousSpec | None = None

    def client(self, worker_id: int = 0, *, cached: bool = False) -> ParameterClient:
        """A new client with its own copy of the parameters. With ``cached``, where caches are
        placed, it reads them from its node's cache and its pushes ask for none back (a worker
        that acts and learns, A3C's)."""
        return ParameterClient(list(self.endpoints), self.layout, worker_id=worker_id,
                               barrier=self.rule.barrier, timeout_s=self.timeout_s,
                               wait_when_behind=self.rule.waits_when_behind,
                               cache=self.cache if cached else None, pipelined=self.rule.pipelined)

    def source(self, worker_id: int = 0) -> ParameterClient | CachedSource:
        """Where an actor gets its parameters (both play :class:`~gorila.core.ParamSource`): its
        node's cache when there is one (falling back to the server while the cache is gone), else a
        client of its own."""
        client = self.client(worker_id)
        return client if self.cache is None else CachedSource(self.cache, client)

    def upstream(self) -> ServerUpstream:
        """The server as a cache's upstream (a version probe, and pulls of the whole vector)."""
        return ServerUpstream(self.client(-1))


def merge_stats(stats: list[ShardStats]) -> ShardStats:
    """Counters of all shards. Every worker push (and pull) reaches every shard, so push counts,
    updates, pulls and the staleness histogram are averaged over shards (one worker push counts once);
    bytes, and pushes refused by a restarted shard (one shard's own), are summed."""
    total = ShardStats()
    for s in stats:
        total = total.merge(s)
    n = max(len(stats), 1)
    for name in ("pushes_counted", "pushes_accepted", "pushes_rejected_stale", "pushes_rejected_nonfinite",
                 "pushes_rejected_duplicate", "updates", "pulls"):
        setattr(total, name, getattr(total, name) // n)
    for k in total.staleness:
        total.staleness[k] //= n
    return total


def shard_state(states: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per-shard state dicts as one flat dict with ``shard<i>.`` prefixes (a checkpoint's layout)."""
    return {f"shard{i}.{k}": v for i, state in enumerate(states) for k, v in state.items()}


def server_params(state: dict[str, np.ndarray]) -> np.ndarray:
    """The server's whole flat parameter vector from a checkpoint's shard states (shards in order)."""
    shards = sorted({int(k.split(".", 1)[0][len("shard"):]) for k in state if k.endswith(".params")})
    return np.concatenate([state[f"shard{i}.params"] for i in shards])


def check_shard_state(state: dict[str, np.ndarray], layout: ShardLayout, where: str) -> None:
    """Raise :class:`CheckpointError`, in words, unless ``state`` (a checkpoint's shard states) fits
    a server of ``layout``: the same number of shards and parameters."""
    shards = sorted({k.split(".", 1)[0] for k in state if k.startswith("shard") and k.endswith(".params")})
    sizes = [state[f"{name}.params"].size for name in shards]
    if len(sizes) != layout.num_shards or sum(sizes) != layout.size:
        raise CheckpointError(
            f"{where} holds {sum(sizes):,} parameters in {len(sizes)} shard(s), but this run's network has "
            f"{layout.size:,} in {layout.num_shards}: it was saved by another algorithm, network or --shards. "
            "Resume with the settings it was saved with, or start a new run directory")


def check_optimizer_state(state: dict[str, np.ndarray], optimizer: str, where: str) -> None:
    """Raise :class:`ConfigError` naming ``--optimizer`` unless ``state`` (a checkpoint's shard
    states) holds the state of ``optimizer``: another optimizer's would be dropped or missing."""
    held = {key.split(".optim.", 1)[1] for key in state if key.startswith("shard0.optim.")} - {"steps"}
    if held == set(optimizer_slots(optimizer)):
        return
    saved = [name for name in OPTIMIZERS if set(optimizer_slots(name)) == held]
    said = f"the state of {saved[0]}" if saved else f"optimizer state {sorted(held)}"
    raise ConfigError("optimizer", f"{where} holds {said}, not {optimizer}'s: resume with "
                                   f"--optimizer {saved[0] if saved else '(the one it was saved with)'}, "
                                   "or start a new run directory")


def split_shard_state(state: dict[str, np.ndarray], num_shards: int) -> list[dict[str, np.ndarray]]:
    """The inverse of :func:`shard_state`."""
    out: list[dict[str, np.ndarray]] = [{} for _ in range(num_shards)]
    for key, value in state.items():
        head, _, rest = key.partition(".")
        if head.startswith("shard"):
            out[int(head[len("shard"):])][rest] = value
    return out
