"""A learner that owns its parameters (``--server learner``): it applies its gradients in its own
shards, sends its parameters to the store actors read when its publication says so and never
waits for the store, and starts from what the store holds."""

from dataclasses import replace
from typing import TypeVar

import numpy as np
import pytest

from gorila.errors import ConfigError
from gorila.params import ServerSpec, UpdateRule
from gorila.params.client import LocalEndpoint
from gorila.params.owned import OwnedEndpoint, Publication, owned_server
from gorila.params.server import ParameterServer
from gorila.params.shard import PushTag
from role_fakes import ShardStandIn

SIZE = 6
SPEC = ServerSpec(rule=UpdateRule.asynchronous(), optimizer="adam", lr=0.1)
E = TypeVar("E", bound=LocalEndpoint)


def _endpoints(server: ParameterServer, kind: type[E]) -> list[E]:
    """The server's endpoints, every one a ``kind`` (its shards in this process)."""
    endpoints = [e for e in server.endpoints if isinstance(e, kind)]
    assert len(endpoints) == len(server.endpoints)
    return endpoints


def _store(params=None) -> ParameterServer:
    shard = SPEC.build(np.arange(SIZE, dtype=np.float32) if params is None else params)[0]
    return ParameterServer((LocalEndpoint(shard),), SPEC.layout(SIZE), SPEC.rule, timeout_s=5.0)


def _push(server: ParameterServer, value: float = 1.0):
    endpoint = server.endpoints[0]
    return endpoint.push(np.full(SIZE, value, np.float32), endpoint.version().result(1.0), 0, PushTag()).result(1.0)


def _held(server: ParameterServer) -> tuple[np.ndarray, int]:
    return server.endpoints[0].pull().result(1.0)


def test_each_update_is_applied_by_the_learner_and_published_to_the_store():
    store = _store()
    owned = owned_server(store, SPEC, Publication(every_updates=1, every_s=0.0))
    for version in (1, 2, 3):
        assert _push(owned).applied
        params, published = _held(store)
        assert published == version and np.array_equal(params, _held(owned)[0])
    assert not np.array_equal(_held(store)[0], np.arange(SIZE, dtype=np.float32))  # Adam moved them


def test_publications_come_at_most_once_every_every_s():
    store = _store()
    owned = owned_server(store, SPEC, Publication(every_updates=1, every_s=1e9))
    for _ in range(3):
        _push(owned)
    assert _held(store)[1] == 0  # none yet: the last (the owned server's start) was less than every_s ago
    _endpoints(owned, OwnedEndpoint)[0].flush()  # the end of a chunk publishes whatever the period
    assert _held(store)[1] == 3


def test_the_store_sees_every_nth_version():
    store = _store()
    owned = owned_server(store, SPEC, Publication(every_updates=3, every_s=0.0))
    seen = []
    for _ in range(7):
        _push(owned)
        seen.append(_held(store)[1])
    assert seen == [0, 0, 3, 3, 3, 6, 6]


def test_a_publication_is_the_learners_own_array_and_the_store_keeps_a_copy_of_it():
    store = _store()
    owned = owned_server(store, SPEC, Publication(every_updates=2, every_s=0.0))
    shard = _endpoints(owned, OwnedEndpoint)[0].shard
    assert np.shares_memory(shard.publication(optimizer=False)["params"], shard.publication(optimizer=True)["params"])
    _push(owned), _push(owned)
    published, version = _held(store)
    assert version == 2 and np.array_equal(published, _held(owned)[0])
    _push(owned)  # version 3 moves the learner's array, and is not published
    assert np.array_equal(_held(store)[0], published) and not np.array_equal(_held(owned)[0], published)


class _Learner:
    """A learner stand-in: each step pushes ``updates`` gradients (PPO's epochs of minibatches)
    while it has batches, then says it waits."""

    def __init__(self, server: ParameterServer, batches: int, updates: int = 1):
        self.client, self.batches, self.updates = server.client(0), batches, updates

    def step(self) -> bool:
        if self.batches == 0:
            return False
        for _ in range(self.updates):
            self.client.params()  # the version the gradient is computed on
            self.client.push(np.ones(SIZE, np.float32), wait=True)
        self.batches -= 1
        return True


def test_at_step_end_a_step_of_several_updates_is_published_once_with_its_newest_version():
    """The local runtime's publication: nothing reads the store while a worker steps there, so a
    step's newest version is sent when it ends, not after each of its updates."""
    from gorila.config import RunConfig
    from gorila.params.owned import PublishingWorker

    store = _store()
    publication = RunConfig(runtime="local", server="learner").publication()
    assert publication is not None
    owned = owned_server(store, SPEC, publication)
    worker = PublishingWorker(_Learner(owned, batches=2, updates=4), _endpoints(owned, OwnedEndpoint))
    for step in (1, 2):
        assert worker.step() is True
        params, version = _held(store)
        assert version == 4 * step and np.array_equal(params, _held(owned)[0])
        assert _endpoints(owned, OwnedEndpoint)[0].publications == step
    on_ray = RunConfig(runtime="ray", server="learner").publication()
    assert on_ray is not None and not on_ray.at_step_end  # Ray's actors read meanwhile
    periodic = RunConfig(runtime="local", server="learner", publish_every=3).publication()
    assert periodic is not None and not periodic.at_step_end
    with pytest.raises(ConfigError, match="publish_every"):
        Publication(every_updates=3, at_step_end=True)


def test_publish_every_s_sets_the_period_on_ray_only_and_a_negative_one_is_refused_by_name(capsys):
    from gorila.cli import main
    from gorila.config import RunConfig

    def period(**values) -> float:
        publication = RunConfig(server="learner", **values).publication()
        assert publication is not None
        return publication.every_s

    assert period(runtime="ray") == 0.1
    assert period(runtime="ray", publish_every_s=0.02) == 0.02
    assert period(runtime="local", publish_every_s=0.02) == 0.0  # the local runtime's rows must not depend on time
    with pytest.raises(SystemExit) as refused:
        main(["train", "--algo", "impala", "--publish-every-s", "-1"])
    assert refused.value.code == 2
    assert "--publish-every-s: must be >= 0.0" in capsys.readouterr().err


def test_a_learner_waiting_for_data_publishes_its_newest_version_whatever_the_period():
    """Synchronous PPO's actors wait for the version that ends the learner's batch: held back by
    the period, it would come only with the chunk's end."""
    from gorila.params.owned import PublishingWorker

    store = _store()
    owned = owned_server(store, SPEC, Publication(every_updates=1, every_s=1e9))
    worker = PublishingWorker(_Learner(owned, batches=3), _endpoints(owned, OwnedEndpoint))
    assert [worker.step() for _ in range(3)] == [True] * 3
    assert _held(store)[1] == 0  # while the learner learns, the period holds publications back
    assert worker.step() is False
    params, version = _held(store)
    assert version == 3 and np.array_equal(params, _held(owned)[0])
    assert worker.step() is False and _endpoints(owned, OwnedEndpoint)[0].publications == 1  # nothing new: nothing sent


class SlowStore(LocalEndpoint):
    """The store's shard, whose publications arrive only when released (a busy store process)."""

    def __init__(self, shard):
        super().__init__(shard)
        self.held = []

    def publish(self, state):
        reply = Held(lambda: super(SlowStore, self).publish(state))
        self.held.append(reply)
        return reply


class Held:
    def __init__(self, deliver):
        self.deliver, self.arrived = deliver, False

    def release(self):
        self.deliver()
        self.arrived = True

    def ready(self):
        return self.arrived

    def result(self, timeout_s):
        assert self.arrived, "waited for a publication that had not arrived"


def test_the_learner_never_waits_for_a_publication_and_sends_the_newest_next():
    shard = SPEC.build(np.zeros(SIZE, np.float32))[0]
    store = SlowStore(shard)
    owned = OwnedEndpoint(SPEC.build(np.zeros(SIZE, np.float32))[0], store, Publication(every_s=0.0), 5.0)
    server = ParameterServer((owned,), SPEC.layout(SIZE), SPEC.rule, 5.0)
    for _ in range(3):  # the first publication is on its way: the learner goes on, sending no second
        assert _push(server).applied
    assert len(store.held) == 1 and shard.version == 0
    store.held[0].release()
    _push(server)  # version 4: the publication after the one that arrived is the newest
    store.held[1].release()
    assert shard.version == 4 and np.array_equal(shard.pull()[0], owned.shard.pull()[0])


def test_a_flush_sends_the_optimizer_state_and_a_new_learner_starts_from_it():
    store = _store()
    owned = owned_server(store, SPEC, Publication(every_s=0.0, state_every_s=1e9))
    for value in (1.0, -2.0, 3.0):
        _push(owned, value)
    mine = _endpoints(owned, OwnedEndpoint)[0].shard.state_dict()
    assert any(not np.array_equal(v, mine[k]) for k, v in _endpoints(store, LocalEndpoint)[0].shard.state_dict().items()
               if k.startswith("optim."))
    _endpoints(owned, OwnedEndpoint)[0].flush()
    restarted = owned_server(store, SPEC, Publication())  # a learner restarted from the store
    again = _endpoints(restarted, LocalEndpoint)[0].shard.state_dict()
    for key in [k for k in mine if k.startswith(("params", "counters", "optim."))]:
        assert np.array_equal(again[key], mine[key]), key


def test_a_non_finite_gradient_changes_nothing_and_publishes_nothing():
    store = _store()
    owned = owned_server(store, SPEC, Publication(every_s=0.0))
    before = _held(owned)[0].copy()
    assert not _push(owned, float("nan")).applied
    assert np.array_equal(_held(owned)[0], before) and _held(store)[1] == 0


def test_the_store_counts_its_own_pulls_and_the_parameters_published():
    store = _store()
    owned = owned_server(store, SPEC, Publication(every_s=0.0))
    for _ in range(3):
        _held(store)  # an actor's pull
    _push(owned)
    stats = _endpoints(store, LocalEndpoint)[0].shard.stats
    assert stats.pulls == 3 and stats.updates == 1 and stats.pushes_counted == 1
    assert stats.bytes_in == SIZE * 4


def test_workers_placement_cannot_be_published_to():
    class Unpublishable(ShardStandIn):
        """A shard reached without ``publish``."""

    store = ParameterServer((Unpublishable(),), SPEC.layout(SIZE), SPEC.rule, 5.0)
    with pytest.raises(Exception, match="publish"):
        owned_server(store, SPEC, Publication())


def test_only_queue_or_replay_fed_learners_may_own_the_parameters_and_several_only_on_ray():
    from gorila.agents.impala.builder import make_plan
    from gorila.agents.impala.config import ImpalaConfig
    from gorila.agents.rl_config import RLConfig
    from gorila.config import RunConfig
    from gorila.errors import ConfigError

    with pytest.raises(ConfigError, match="apex and dqn and impala and ppo, not a3c") as err:
        RunConfig(algo="a3c", server="learner")
    assert err.value.field == "server"
    run = RunConfig(algo="impala", runtime="local", server="learner")
    with pytest.raises(ConfigError, match="use --runtime ray") as err:
        make_plan(run, ImpalaConfig(learners=2, actors=2), RLConfig())
    assert err.value.field == "learners"
    plan = make_plan(replace(run, runtime="ray"), ImpalaConfig(learners=2, actors=2), RLConfig())
    assert plan.spec.placement == "replicas" and plan.spec.processes == 2  # the shard and the rendezvous


def test_a_gorila_dqn_bundle_owns_the_parameters_only_when_it_is_the_one_bundle():
    """With --replay local every bundle holds a learner: one bundle may own the parameters (its
    actor reads them in its own process); several are refused, naming the ways out."""
    from gorila.agents.dqn.builder import make_plan
    from gorila.agents.dqn.config import DQNConfig
    from gorila.agents.rl_config import RLConfig
    from gorila.config import RunConfig
    from gorila.errors import ConfigError
    from gorila.params import ParameterServer
    from gorila.params.client import LocalEndpoint
    from gorila.params.owned import PublishingWorker

    run = RunConfig(algo="dqn", runtime="local", server="learner")
    with pytest.raises(ConfigError, match="--actors 1") as err:
        make_plan(run, DQNConfig(actors=2, learners=2), RLConfig())
    assert err.value.field == "server"
    plan = make_plan(run, DQNConfig(actors=1, learners=1, learning_starts=64, batch_size=32), RLConfig())
    (bundles,) = plan.groups({})
    init = plan.initial_params()
    store_shard = plan.spec.build_shard(init, init.size, 0)
    store = ParameterServer((LocalEndpoint(store_shard),), plan.spec.layout(init.size), plan.spec.rule, 10.0)
    worker = bundles.factory(0, store)
    assert isinstance(worker, PublishingWorker)
    for _ in range(200):
        worker.step()
    report = worker.report()  # ends with a publication of the newest version
    assert report["updates_pushed"] > 0 and store_shard.version == report["updates_pushed"]
    assert np.array_equal(store_shard.pull()[0], worker.learner.client.params())
    worker.close()
