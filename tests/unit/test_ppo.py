"""PPO's targets on segments and its learner: epochs of minibatches, each gradient pushed."""

import functools

import numpy as np
import pytest
import torch

from gorila.agents.ppo.config import PPOConfig
from gorila.agents.ppo.gae import gae
from gorila.agents.ppo.learner import PPOLearner
from gorila.agents.ppo.loss import PPOLoss
from gorila.errors import ConfigError
from gorila.nets.actor_critic_env import make_network
from gorila.nets.flat import FlatParams
from gorila.params import LocalEndpoint, ParameterServer, ServerSpec, UpdateRule
from gorila.runtime.local import LocalService
from gorila.trajectory import RemoteQueue, TrajectoryQueue
from gorila.types import Segment

COUNTING = "gorila/Counting-v0"
network_fn = functools.partial(make_network, COUNTING, (8,), False, 0)


def _segment(net, T=4, N=3, seed=0, shift=0.0):
    g = np.random.default_rng(seed)
    obs = g.normal(size=(T, N, 1)).astype(np.float32)
    actions = g.integers(2, size=(T, N))
    with torch.no_grad():
        logits, _ = net(torch.as_tensor(obs))
    log_pi = torch.log_softmax(logits, -1).gather(-1, torch.as_tensor(actions).unsqueeze(-1)).squeeze(-1).numpy()
    valid = np.ones((T, N), bool)
    valid[0, 2] = False
    return Segment(obs=obs, actions=actions, rewards=g.normal(size=(T, N)).astype(np.float32),
                   discounts=np.full((T, N), 0.9, np.float32), truncated=np.zeros((T, N), bool),
                   final_obs=np.zeros((0, 1), np.float32), valid=valid, log_probs=(log_pi + shift).astype(np.float32),
                   policy_version=np.zeros((T, N), np.int64), last_obs=g.normal(size=(N, 1)).astype(np.float32))


def test_targets_are_gae_of_the_valid_steps_normalised():
    net = network_fn()
    seg = _segment(net)
    batch = PPOLoss(gamma=0.9, lam=0.7).targets(net, seg)
    assert len(batch) == seg.valid.sum() == 11
    with torch.no_grad():
        values = net(torch.as_tensor(seg.obs))[1]
        bootstrap = net(torch.as_tensor(seg.last_obs))[1]
    discounts = torch.as_tensor(seg.discounts) * torch.as_tensor(seg.valid)
    advantages, returns = gae(discounts, torch.as_tensor(seg.rewards), values, bootstrap, 0.7)
    valid = torch.as_tensor(seg.valid)
    raw = advantages[valid]
    torch.testing.assert_close(batch.advantages, (raw - raw.mean()) / (raw.std() + 1e-8))
    torch.testing.assert_close(batch.returns, returns[valid])
    assert abs(batch.advantages.mean().item()) < 1e-5


def test_appo_advantages_correct_for_the_behaviour_policy():
    net = network_fn()
    on = PPOLoss(advantages="vtrace", normalize=False).targets(net, _segment(net))
    off = PPOLoss(advantages="vtrace", normalize=False).targets(net, _segment(net, shift=1.0))
    gae_one = PPOLoss(lam=1.0, normalize=False).targets(net, _segment(net))
    torch.testing.assert_close(on.advantages, gae_one.advantages)  # on policy: GAE(1)
    assert not torch.allclose(on.advantages, off.advantages)


def _learner_on_a_queue(epochs: int, minibatches: int):
    """A PPO learner (batches of 2 segments) on one in-process shard, its queue holding 2 segments."""
    params = FlatParams(network_fn()).get()
    spec = ServerSpec(rule=UpdateRule.asynchronous(), optimizer="sgd", lr=0.01)
    shards = spec.build(params)
    server = ParameterServer(tuple(LocalEndpoint(s) for s in shards), spec.layout(params.size), spec.rule)
    queue = TrajectoryQueue(0, capacity=4)
    learner = PPOLearner(0, server, network_fn=network_fn, loss=PPOLoss(), queues=[RemoteQueue(LocalService(queue))],
                         batch_size=2, epochs=epochs, minibatches=minibatches, seed=0)
    for seq in range(2):
        queue.add(_segment(network_fn(), seed=seq), "a", seq)
    return learner, shards, queue


def test_the_learner_pushes_epochs_times_minibatches_gradients_per_batch():
    learner, shards, _ = _learner_on_a_queue(epochs=3, minibatches=2)
    assert learner.step() and learner.pushes == 6 and shards[0].version == 6  # both segments in one take
    assert learner.report()["policy_lag"] == {0: 22}  # the batch's 22 valid steps, acted at version 0
    assert not learner.step() and learner.pushes == 6  # nothing left: blocked


def test_a_batch_added_after_the_learners_request_came_back_empty_is_learnt_from_in_the_next_step():
    # The local runtime's turns: the request sent while a batch is learnt from finds the queue
    # empty; the actors then add the next batch, acted on the newest parameters.
    learner, _, queue = _learner_on_a_queue(epochs=1, minibatches=2)
    assert learner.step() and learner.pushes == 2
    for seq in range(2, 4):
        segment = _segment(network_fn(), seed=seq)
        segment.policy_version[:] = 2  # acted on the parameters the first batch produced
        queue.add(segment, "a", seq)
    assert learner.step() and learner.pushes == 4
    assert learner.report()["policy_lag"] == {0: 44}  # both batches learnt at the version they were acted on


def test_more_learners_than_actors_is_refused():
    from gorila.agents.ppo.builder import make_plan
    from gorila.agents.rl_config import RLConfig
    from gorila.config import RunConfig

    with pytest.raises(ConfigError) as refused:
        make_plan(RunConfig(algo="ppo"), PPOConfig(actors=1, learners=2), RLConfig())
    assert refused.value.field == "learners"
    with pytest.raises(ConfigError, match="clip"):
        PPOConfig(clip=0)


def test_sync_on_ray_refuses_a_batch_other_than_one_segment_of_every_actor():
    from gorila.agents.ppo.builder import make_plan
    from gorila.agents.rl_config import RLConfig
    from gorila.config import RunConfig

    with pytest.raises(ConfigError) as refused:  # its actors would wait for a round that never ends
        make_plan(RunConfig(algo="ppo", mode="sync", runtime="ray"), PPOConfig(actors=2, batch_size=4), RLConfig())
    assert refused.value.field == "batch_size"
    for mode, runtime in (("sync", "local"), ("async", "ray")):  # the turns make the rounds; APPO has none
        make_plan(RunConfig(algo="ppo", mode=mode, runtime=runtime), PPOConfig(actors=2, batch_size=4), RLConfig())


def test_linear_lr_decay_falls_to_zero_over_the_runs_updates_and_survives_a_state_round_trip():
    from gorila.agents.ppo.builder import learning_rate
    from gorila.agents.rl_config import RLConfig
    from gorila.params import make_optimizer
    from gorila.params.learning_rate import LinearDecay

    # 2 actors x 8 envs x 16 steps = 256 env steps a batch; 10 epochs x 2 minibatches = 20 pushes
    cfg = PPOConfig(lr=1e-3, lr_decay="linear")
    assert learning_rate(cfg, RLConfig(total_steps=2560), UpdateRule.asynchronous()) == LinearDecay(1e-3, 200)
    # a barrier over 2 learners: 2 pushes per update, half as many optimizer steps
    two = PPOConfig(lr=1e-3, lr_decay="linear", learners=2, actors=2)
    decayed = learning_rate(two, RLConfig(total_steps=2560), UpdateRule.synchronous(2))
    assert isinstance(decayed, LinearDecay) and decayed.steps == 200
    assert learning_rate(PPOConfig(lr=1e-3), RLConfig(total_steps=2560), UpdateRule.asynchronous()) == 1e-3
    with pytest.raises(ConfigError) as refused:
        PPOConfig(lr_decay="cosine")
    assert refused.value.field == "lr_decay"

    opt = make_optimizer("sgd", 1, LinearDecay(0.5, steps=4))
    params, moves = np.zeros(1, np.float32), []
    for _ in range(3):
        before = params.copy()
        opt.step(params, np.ones(1, np.float32))
        moves.append(float(before[0] - params[0]))
    np.testing.assert_allclose(moves, [0.5, 0.375, 0.25])  # lr x (1 - step / 4)
    resumed = make_optimizer("sgd", 1, LinearDecay(0.5, steps=4))
    resumed.load_state_dict(opt.state_dict())  # a resumed run goes on down the same line
    for expected in (0.125, 0.0, 0.0):
        before = params.copy()
        resumed.step(params, np.ones(1, np.float32))
        assert float(before[0] - params[0]) == pytest.approx(expected)


def test_a_server_spec_carries_the_decay_to_every_shard():
    from gorila.params.learning_rate import LinearDecay

    spec = ServerSpec(rule=UpdateRule.asynchronous(), num_shards=2, optimizer="adam", lr=LinearDecay(1e-3, 10))
    shards = spec.build(np.zeros(4, np.float32))
    assert [shard.lr for shard in shards] == [LinearDecay(1e-3, 10)] * 2


def test_a_restarted_shard_keeps_its_decay(tmp_path):
    from gorila.params.learning_rate import LinearDecay
    from gorila.runtime.shard_recovery import ShardRecovery

    rule = UpdateRule.asynchronous()
    (shard,) = ServerSpec(rule=rule, optimizer="adam", lr=LinearDecay(1e-3, 10)).build(np.zeros(4, np.float32))
    recovery = ShardRecovery(tmp_path, 0, rule, "adam")
    recovery.save_start(shard)
    restored, _ = recovery.restore()
    assert restored.lr == LinearDecay(1e-3, 10)
