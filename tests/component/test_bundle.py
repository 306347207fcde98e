"""Gorila's bundles, built as ``gorila train`` builds them, on in-process shards."""

import hashlib

import numpy as np
import pytest

from gorila.agents.dqn.builder import make_plan
from gorila.agents.dqn.config import DQNConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.learners.q_learner import QLearner
from gorila.params import LocalEndpoint, ParameterServer

ENV = "gorila/Counting-v0"   # observation = step index in a 5-step episode


def digest(params: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(params).tobytes()).hexdigest()


class InFlight:
    """A reply that is still travelling when the worker next looks (as over a network): it is
    collected only when the worker waits for it."""

    def __init__(self, value):
        self.value = value

    def ready(self):
        return False

    def result(self, timeout_s):
        return self.value


class RecordingEndpoint(LocalEndpoint):
    """An in-process shard whose push replies arrive late, and that remembers the parameters of
    every version it reached and, for every push, the version it was labelled with."""

    def __init__(self, shard):
        super().__init__(shard)
        self.versions = {digest(shard.pull()[0]): 0}
        self.labels = []

    def push(self, grad, version, worker_id, tag=None):
        self.labels.append(version)
        reply = super().push(grad, version, worker_id, tag)
        self.versions.setdefault(digest(self.shard.pull()[0]), self.shard.version)
        return InFlight(reply.value)


def bundles(mode="async", count=2, **dqn):
    cfg = DQNConfig(**{"actors": count, "learning_starts": 40, "batch_size": 8, "hidden": (8,),
                       "actor_refresh": 3, **dqn})
    plan = make_plan(RunConfig(algo="dqn", mode=mode), cfg, RLConfig(env=ENV))
    params = plan.initial_params()
    (shard,) = plan.spec.build(params)
    endpoint = RecordingEndpoint(shard)
    server = ParameterServer((endpoint,), plan.spec.layout(params.size), plan.spec.rule)
    (spec,) = plan.groups({})
    return shard, endpoint, [spec.factory(k, server) for k in range(count)]


def test_a_bundle_acts_until_learning_starts_then_pushes_one_gradient_per_step():
    shard, endpoint, (bundle,) = bundles(count=1)
    for _ in range(39):
        bundle.step()
    assert shard.version == 0 and bundle.pushes == 0 and len(bundle.replay) == 39
    bundle.step()  # the 40th transition: learning starts
    assert bundle.pushes == 1 and bundle.report()["env_steps"] == 40
    for _ in range(10):
        bundle.step()
    bundle.client.complete()
    assert shard.version == bundle.pushes == 11
    batch = bundle.sample_batch()  # CountingEnv: every stored transition is (k -> k + 1)
    assert np.array_equal(batch.next_obs, batch.obs + 1)


def test_a_bundle_reports_the_mean_q_of_its_last_batch_so_that_divergence_shows_in_the_rows():
    shard, endpoint, (bundle,) = bundles(count=1)
    for _ in range(39):
        bundle.step()
    assert bundle.report()["q_mean"] is None  # nothing learnt yet
    bundle.step()
    assert bundle.report()["q_mean"] == pytest.approx(bundle.last_info["q_mean"])
    assert isinstance(bundle.report()["q_mean"], float)


def test_the_actor_reloads_the_parameters_every_actor_refresh_steps():
    shard, endpoint, (bundle,) = bundles(count=1, learning_starts=16, actor_refresh=3)
    loaded = []
    for _ in range(30):
        bundle.step()
        loaded.append(bundle.actor.version)
    # reloaded at steps 0, 3, 6, ...: between reloads the actor keeps the version it was given
    assert all(loaded[i] == loaded[i - 1] for i in range(1, 30) if i % 3 != 0)
    assert loaded[-1] >= 30 - 16 - 3  # and it follows the server


@pytest.mark.parametrize("mode", ["async", "semi-async"])
def test_the_staleness_histogram_is_the_true_staleness(monkeypatch, mode):
    """Every push's label must be the version of the parameters its gradient was computed on."""
    computed_on = []
    gradient = QLearner.gradient

    def recording(self, params, version, batch):
        computed_on.append(digest(params))
        return gradient(self, params, version, batch)

    monkeypatch.setattr(QLearner, "gradient", recording)
    shard, endpoint, workers = bundles(mode=mode, count=3)
    for _ in range(120):
        for bundle in workers:  # in turn, as the local runtime steps them
            bundle.step()
    true_versions = [endpoint.versions[h] for h in computed_on]
    assert endpoint.labels == true_versions[:len(endpoint.labels)]
    recorded = dict(shard.stats.staleness)
    assert sum(recorded.values()) == len(endpoint.labels) > 200
    if mode == "async":  # three bundles pushing in turn: each gradient is two updates old when it lands
        assert max(recorded) >= 2


def test_a_learner_that_copies_ahead_is_handed_each_minibatch_before_it_trains_on_it(monkeypatch):
    """On a GPU (``--device-copy async``) the next minibatch must be on its way while this one trains:
    the bundle stages it before asking for this one's gradient, and that staged batch is the one it
    trains on next."""
    events = []
    gradient = QLearner.gradient

    def recording(self, params, version, batch):
        events.append(("gradient", batch))
        return gradient(self, params, version, batch)

    monkeypatch.setattr(QLearner, "gradient", recording)
    shard, endpoint, (bundle,) = bundles(count=1)
    bundle.learner.stages_ahead = True
    monkeypatch.setattr(bundle.learner, "stage", lambda batch: events.append(("stage", batch)))
    for _ in range(40 + 5):
        bundle.step()
    kinds = [kind for kind, _ in events]
    assert kinds == ["stage", "gradient"] * 6
    staged = [batch for kind, batch in events if kind == "stage"]
    trained = [batch for kind, batch in events if kind == "gradient"]
    assert all(trained[k] is staged[k - 1] for k in range(1, 6))
    assert trained[0] is not staged[0]
