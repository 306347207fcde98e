"""The A3C worker against in-process shards, with CountingEnv so every step can be traced."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from gorila.agents.a3c.builder import make_plan
from gorila.agents.a3c.config import A3CConfig
from gorila.agents.a3c.loss import a3c_gradients, rollout_targets
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.envs import CountingEnv
from gorila.errors import ConfigError
from gorila.nets.actor_critic_env import GreedyPolicy, greedy_policy, learning_rates, make_network, network_for
from gorila.nets.flat import FlatParams
from gorila.nets.heads import GaussianHead
from gorila.params import LocalEndpoint, ParameterServer

# Counting-v0 episodes last 5 steps; a 7-step rollout crosses an end, then a hidden reset step.
COUNTING = "gorila/Counting-v0"
TRUNCATING = "gorila-test/CountingTruncated-v0"
if TRUNCATING not in gym.registry:
    gym.register(TRUNCATING, entry_point="gorila.envs.fake:CountingEnv", kwargs={"truncate": True})



class CountingImageEnv(CountingEnv):
    """CountingEnv whose observation is a 1x1 image: not a vector."""

    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Box(0.0, np.inf, shape=(1, 1), dtype=np.float32)

    def _obs(self):
        return super()._obs().reshape(1, 1)


LONG = "gorila-test/CountingLong-v0"  # 100-step episodes: longer than a rollout's first allotment
if LONG not in gym.registry:
    gym.register(LONG, entry_point="gorila.envs.fake:CountingEnv", kwargs={"episode_length": 100})

IMAGE = "gorila-test/CountingImage-v0"
if IMAGE not in gym.registry:
    # gymnasium's EnvCreator wants **kwargs; an env class is its documented entry point
    gym.register(IMAGE, entry_point=CountingImageEnv)  # type: ignore[arg-type]

CFG = A3CConfig(envs_per_actor=2, unroll_length=7, gamma=0.5, hidden=(8,), max_grad_norm=None)


class RecordingEndpoint(LocalEndpoint):
    """An in-process shard that also keeps every gradient pushed to it."""

    def __init__(self, shard):
        super().__init__(shard)
        self.pushed = []

    def push(self, grad, version, worker_id, tag=None):
        self.pushed.append(grad.copy())
        return super().push(grad, version, worker_id, tag)


def _plan(env_id, cfg, num_shards=1):
    """The builder's plan: an asynchronous SGD server and the worker factory `gorila train` would use."""
    run = RunConfig(algo="a3c", shards=num_shards, optimizer="sgd", seed=3)
    return make_plan(run, cfg, RLConfig(env=env_id))


def _server(env_id, cfg, num_shards=1, params=None):
    """In-process shards holding ``params`` (default: the plan's initial parameters)."""
    plan = _plan(env_id, cfg, num_shards)
    params = plan.initial_params() if params is None else params
    shards = plan.spec.build(params)
    endpoints = [RecordingEndpoint(s) for s in shards]
    return shards, ParameterServer(tuple(endpoints), plan.spec.layout(params.size), plan.spec.rule), endpoints


def _worker(server, env_id=COUNTING, cfg=CFG, worker_id=0):
    (workers,) = _plan(env_id, cfg).groups({})
    return workers.factory(worker_id, server)


def test_one_step_pushes_one_gradient_and_counts_every_env_step():
    shards, server, endpoints = _server(COUNTING, CFG, num_shards=2)
    worker = _worker(server)
    worker.step()

    size = FlatParams(worker.net).size
    assert [len(ep.pushed) for ep in endpoints] == [1, 1]
    assert sum(ep.pushed[0].size for ep in endpoints) == size
    assert [s.version for s in shards] == [1, 1]
    report = worker.report()
    # Per env: steps 0-4 finish an episode (resetting within step 4), steps 5-6 start the next.
    assert report["env_steps"] == 2 * 7 == CFG.unroll_length * CFG.envs_per_actor
    assert report["episodes"] == 2 and report["recent_returns"] == [5.0, 5.0]
    assert report["updates_pushed"] == 1
    worker.client.complete()  # asynchronous rule: the push's reply is collected with the next push
    assert worker.report()["pushes_counted"] == 1
    assert report["pushes_rejected"] == 0 and report["version"] == 0
    worker.step()
    assert worker.report()["version"] == 1 and [s.version for s in shards] == [2, 2]


class Travelling:
    """A push's reply on its way: the push reaches the shard only when the pusher waits for it."""

    def __init__(self, deliver):
        self._deliver, self._result = deliver, None

    def ready(self):
        return self._result is not None

    def result(self, timeout_s):
        if self._result is None:
            self._result = self._deliver()
        return self._result


class SlowLinkEndpoint(LocalEndpoint):
    """An in-process shard behind a slow link; keeps the version each push was labelled with."""

    def __init__(self, shard):
        super().__init__(shard)
        self.labels = []

    def push(self, grad, version, worker_id, tag=None):
        self.labels.append(version)
        grad = grad.copy()
        return Travelling(lambda: LocalEndpoint.push(self, grad, version, worker_id, tag).value)


def test_a_semi_async_worker_one_version_behind_computes_its_next_gradient_on_the_new_parameters():
    """Seed 002's client: each push waits for its reply, which brings the version the push made,
    so the next rollout acts and learns on it (a pipelining worker labels its second gradient 0)."""
    run = RunConfig(algo="a3c", optimizer="sgd", seed=3, mode="semi-async", aggregate=1, count_within=1,
                    accept_within=2)
    plan = make_plan(run, CFG, RLConfig(env=COUNTING))
    shard = plan.spec.build(plan.initial_params())[0]
    slow = SlowLinkEndpoint(shard)
    server = ParameterServer((slow,), plan.spec.layout(shard.size), plan.spec.rule)
    (workers,) = plan.groups({})
    worker = workers.factory(0, server)
    worker.step()                             # computed on version 0; the push makes version 1
    worker.step()
    assert slow.labels == [0, 1] and shard.version == 2
    assert worker.report()["version"] == 1 and worker.report()["push_blocked_fraction"] > 0.0


def test_rollout_holds_exactly_the_steps_that_arrived():
    _, server, endpoints = _server(COUNTING, CFG)
    worker = _worker(server)
    worker.refresh()
    rollout = worker.collect()
    # CountingEnv's observation is the step index: 0..4, then 0 again (reset in the step that ended).
    assert rollout.valid[:, 0].tolist() == [True] * 7
    assert rollout.obs[:, 0, 0].tolist() == [0, 1, 2, 3, 4, 0, 1]
    assert rollout.dones[:, 0].tolist() == [False] * 4 + [True, False, False]
    assert rollout.last_obs[:, 0].tolist() == [2.0, 2.0]


def test_pushed_gradient_is_the_a3c_gradient_of_the_same_rollout():
    _, server, endpoints = _server(COUNTING, CFG)
    worker, twin = _worker(server), _worker(_server(COUNTING, CFG)[1])  # same seed: same rollout
    twin.refresh()
    expected, _ = a3c_gradients(twin.net, twin.target_net, twin.collect(), CFG.gamma, CFG.entropy_coef,
                                twin.flat)
    worker.step()
    np.testing.assert_array_equal(endpoints[0].pushed[0], expected)


@pytest.mark.parametrize("env_id", [COUNTING, TRUNCATING])
def test_returns_never_mix_two_episodes(env_id):
    _, server, _ = _server(env_id, CFG)
    worker = _worker(server, env_id=env_id)
    worker.refresh()
    rollout = worker.collect()
    targets = rollout_targets(worker.target_net, rollout, CFG.gamma)[:, 0].tolist()

    def value(k):
        with torch.no_grad():
            return float(worker.target_net(torch.tensor([[float(k)]]))[1])
    # Episode 1 is steps 0..4 (reward 1 each); its last step bootstraps only when truncated at obs 5.
    tail = CFG.gamma * value(5) if env_id == TRUNCATING else 0.0
    expected_end = 1.0 + tail
    assert targets[4] == pytest.approx(expected_end, abs=1e-6)
    assert targets[3] == pytest.approx(1.0 + CFG.gamma * expected_end, abs=1e-6)
    # Episode 2's steps (obs 0 and 1) bootstrap from the rollout's last observation, 2, only.
    assert targets[6] == pytest.approx(1.0 + CFG.gamma * value(2), abs=1e-6)
    assert targets[5] == pytest.approx(1.0 + CFG.gamma * targets[6], abs=1e-6)


def test_unroll_length_zero_rolls_out_to_the_episode_s_end():
    cfg = A3CConfig(envs_per_actor=1, unroll_length=0, gamma=0.5, hidden=(8,))
    _, server, endpoints = _server(COUNTING, cfg)
    worker = _worker(server, cfg=cfg)
    worker.step()
    report = worker.report()
    assert report["env_steps"] == 5 and report["episodes"] == 1 and len(endpoints[0].pushed) == 1
    rollout = worker.collect()  # the second rollout starts where the first ended: a new episode
    assert rollout.obs[:, 0, 0].tolist() == [0, 1, 2, 3, 4]
    assert rollout.dones[:, 0].tolist() == [False] * 4 + [True] and rollout.valid.all()


@pytest.mark.parametrize("env_id, length", [(COUNTING, 5), (LONG, 100)])
def test_unroll_length_zero_waits_for_every_env_s_episode(env_id, length):
    cfg = A3CConfig(envs_per_actor=2, unroll_length=0, gamma=0.5, hidden=(8,))
    _, server, _ = _server(env_id, cfg)
    worker = _worker(server, env_id=env_id, cfg=cfg)
    worker.refresh()
    worker.runner.backend.envs[1].unwrapped._t = 2  # env 1 two steps into its episode, env 0 at its start
    worker.runner.observations[1] = 2.0
    rollout = worker.collect()
    assert len(rollout.dones) == length  # until env 0's episode ended, the later of the two
    assert np.flatnonzero(rollout.dones[:, 0]).tolist() == [length - 1]
    assert np.flatnonzero(rollout.dones[:, 1]).tolist() == [length - 3]  # then into its next episode
    assert rollout.valid.all() and rollout.obs[:, 0, 0].tolist() == list(range(length))


def test_a_run_to_the_episodes_ends_starts_with_a_chunk_of_one_rollout():
    # An Atari episode can take minutes: twenty of them would be a first chunk past any timeout.
    assert _plan(COUNTING, A3CConfig(unroll_length=0)).chunk_steps(0) == 1
    assert _plan(COUNTING, A3CConfig(unroll_length=5)).chunk_steps(0) == 20


def test_actions_are_drawn_from_the_policy_it_pulled():
    """A policy whose logits are (0, ln 3) for every observation takes action 1 three times in four."""
    params = _plan(COUNTING, CFG).initial_params()
    slices = FlatParams(make_network(COUNTING, CFG.hidden, False, 0)).slices()
    params[slices["policy.2.weight"]] = 0.0
    params[slices["policy.2.bias"]] = [0.0, np.log(3.0)]
    worker = _worker(_server(COUNTING, CFG, params=params)[1])
    worker.refresh()
    actions = np.concatenate([worker.collect().actions.ravel() for _ in range(100)])  # 1,400 draws
    assert abs(actions.mean() - 0.75) < 0.05  # 4 standard deviations of 1,400 draws


def test_target_value_network_moves_by_tau_once_per_new_version():
    cfg = A3CConfig(envs_per_actor=1, unroll_length=2, hidden=(4,), target_tau=0.25)
    shards, server, _ = _server(COUNTING, cfg)
    worker = _worker(server, cfg=cfg)
    worker.step()                       # target starts at version 0's parameters
    w0 = worker.target_flat.get()
    worker.refresh()                    # version 1 arrived with the push's reply
    w1 = shards[0].pull()[0]
    np.testing.assert_allclose(worker.target_flat.get(), 0.25 * w1 + 0.75 * w0, rtol=1e-6, atol=1e-7)
    moved = worker.target_flat.get()
    worker.refresh()                    # same version: the target stays put
    np.testing.assert_array_equal(worker.target_flat.get(), moved)


# --- builder ---------------------------------------------------------------------------------

def test_network_is_determined_by_the_seed_and_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a, b = make_network("CartPole-v1", (8,), False, 1), make_network("CartPole-v1", (8,), False, 1)
    np.testing.assert_array_equal(FlatParams(a).get(), FlatParams(b).get())
    assert not np.array_equal(FlatParams(a).get(), FlatParams(make_network("CartPole-v1", (8,), False, 2)).get())
    assert torch.equal(state, torch.random.get_rng_state())


def test_learning_rates_follow_the_parameter_groups():
    net = make_network("CartPole-v1", (8,), False, 0)
    flat = FlatParams(net)
    lr = learning_rates(net, lr_policy=0.5, lr_value=0.25)
    assert lr.dtype == np.float32 and lr.shape == (flat.size,)
    assert set(lr[flat.slices()["policy.0.weight"]]) == {0.5}
    assert set(lr[flat.slices()["value.0.weight"]]) == {0.25}


def test_greedy_policy_takes_the_argmax_of_the_logits():
    net = make_network("CartPole-v1", (8,), False, 0)
    obs = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    logits, _ = net(torch.as_tensor(obs))
    policy = greedy_policy(net)
    assert isinstance(policy, GreedyPolicy)  # a feed-forward network's: no core state
    np.testing.assert_array_equal(policy(obs), logits.argmax(-1).numpy())


def test_only_vector_or_image_observations():
    with pytest.raises(ConfigError, match="a3c takes vector or") as e:
        make_network(IMAGE, (64, 64), False, 0)
    assert e.value.field == "env"


def test_box_actions_get_a_gaussian_policy_named_by_its_algorithm():
    net = make_network("Pendulum-v1", (8,), False, 0, algo="ppo")
    assert net.head == GaussianHead(1)
    out, value = net(torch.zeros(5, 3))
    assert out.shape == (5, 2) and value.shape == (5,)
    np.testing.assert_array_equal(out[:, 1].detach().numpy(), 0.0)  # log-std starts at 0
    with pytest.raises(ConfigError, match="ppo takes Discrete or Box actions") as e:
        network_for(gym.spaces.Box(0, 1, (3,)), gym.spaces.MultiBinary(2), (8,), False, algo="ppo")
    assert e.value.field == "env"
