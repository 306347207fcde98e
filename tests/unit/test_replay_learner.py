"""The global-replay learner keeps drawing from the replay shards that answer (fault matrix, row 2)."""

import threading

import numpy as np
import pytest
import torch

from gorila.errors import WorkerTimeoutError
from gorila.learners import replay_learner
from gorila.learners.q_learner import QLearner
from gorila.learners.replay_learner import ReplayLearner
from gorila.learners.target import TargetUpdate
from gorila.nets import FlatParams
from gorila.nets.q import VectorQNetwork
from gorila.params import LocalEndpoint, ParameterServer, ServerSpec, UpdateRule
from gorila.types import Batch


def network():
    torch.manual_seed(0)
    return VectorQNetwork(3, (8,), 2)


def rows(n, seed):
    rng = np.random.default_rng(seed)
    return Batch(rng.standard_normal((n, 3)).astype(np.float32), rng.integers(0, 2, n), np.ones(n, np.float32),
                 rng.standard_normal((n, 3)).astype(np.float32), np.full(n, 0.9, np.float32),
                 np.arange(n), np.ones(n, np.float32), np.zeros(n, np.int64))


class Reply:
    """A sample reply that comes when its shard is up (``result`` waits for it, as a real one does)."""

    def __init__(self, shard):
        self.shard = shard

    def ready(self):
        return self.shard.up.is_set()

    def result(self, timeout_s):
        if not self.shard.up.wait(timeout_s):
            raise WorkerTimeoutError(f"shard {self.shard.shard_id}.sample did not answer within {timeout_s} s")
        self.shard.served += 1
        return rows(self.shard.n, self.shard.shard_id)


class FakeShard:
    """A replay shard's client whose process is up or down (``up``), counting the samples it served."""

    def __init__(self, shard_id, up=True):
        self.shard_id, self.n, self.served = shard_id, 0, 0
        self.up = threading.Event()
        if up:
            self.up.set()

    def ready(self, learner, step, min_size):
        return self.Done(True)

    def sample(self, batch_size):
        self.n = batch_size
        return Reply(self)

    class Done:
        def __init__(self, value):
            self.value = value

        def result(self, timeout_s):
            return self.value

        def ready(self):
            return True


def make_learner(shards, timeout_s=30.0):
    spec = ServerSpec(rule=UpdateRule.asynchronous(), num_shards=1, optimizer="sgd", lr=0.01)
    params = FlatParams(network()).get()
    server = ParameterServer(tuple(LocalEndpoint(s) for s in spec.build(params)), spec.layout(params.size),
                             spec.rule, timeout_s=timeout_s)
    learner = lambda: QLearner(network, loss="mse", target="double", target_update=TargetUpdate.hard(100),  # noqa: E731
                               outlier_k=None, max_grad_norm=None)
    return ReplayLearner(0, server, learner=learner, replay=shards, batch_size=8, learning_starts=0, prefetch=2)


@pytest.fixture(autouse=True)
def short_patience(monkeypatch):
    monkeypatch.setattr(replay_learner, "SHARD_PATIENCE_S", 0.05)


def test_a_dead_shard_is_passed_over_and_the_learner_keeps_drawing_from_the_others():
    dead, alive = FakeShard(0, up=False), FakeShard(1)
    learner = make_learner([dead, alive])
    for _ in range(20):
        assert learner.step()
    assert learner.pushes == 20
    assert alive.served == 10 and dead.served == 0  # two minibatches per request
    assert learner.report()["shards_passed_over"] == 10  # its one request stays in flight meanwhile

    dead.up.set()  # restarted: its pending request is answered and used
    for _ in range(6):
        learner.step()
    assert dead.served >= 1 and dead.served + alive.served == 13  # three more requests, the dead one first


def test_when_no_shard_answers_within_the_timeout_it_is_a_worker_timeout():
    shards = [FakeShard(0, up=False), FakeShard(1, up=False)]
    learner = make_learner(shards, timeout_s=0.3)
    with pytest.raises(WorkerTimeoutError, match="no replay shard answered"):
        learner.step()


def test_a_learner_that_copies_ahead_is_handed_the_requests_next_minibatch_while_this_one_trains(monkeypatch):
    learner = make_learner([FakeShard(0)])
    staged: list[Batch] = []
    trained: list[Batch] = []
    gradient = learner.learner.gradient
    learner.learner.stages_ahead = True

    def trains(params, version, batch):
        trained.append(batch)
        return gradient(params, version, batch)

    monkeypatch.setattr(learner.learner, "stage", staged.append)
    monkeypatch.setattr(learner.learner, "gradient", trains)
    for _ in range(4):
        learner.step()
    # prefetch=2: each request brings two minibatches; the second is staged while the first trains
    assert len(trained) == 4 and len(staged) == 2
    assert staged[0] is trained[1] and staged[1] is trained[3]


def test_the_learner_reports_the_mean_q_of_its_last_minibatch():
    learner = make_learner([FakeShard(0)])
    assert learner.report()["q_mean"] is None  # nothing learnt yet
    learner.step()
    q_mean = learner.report()["q_mean"]
    assert isinstance(q_mean, float) and q_mean == pytest.approx(learner.last_info["q_mean"])
