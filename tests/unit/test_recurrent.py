"""Recurrent policies (``--core lstm``) in one process: the learner's unroll from a segment's core
state gives the actor's log-probabilities bit for bit (acting on its own or through the inference
server), a state not reset at an episode boundary changes the loss, and the inference server
chooses from each env's state what an actor's own sampler chooses (CountingEnv, 5-step episodes)."""

import dataclasses
import functools

import numpy as np
import pytest
import torch

from gorila.actors.segment_actor import SegmentActor
from gorila.agents.impala.loss import ImpalaLoss
from gorila.agents.ppo.builder import make_plan as ppo_plan
from gorila.agents.ppo.config import PPOConfig
from gorila.agents.ppo.loss import PPOLoss
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.envs.spec import EnvSpec
from gorila.errors import ConfigError
from gorila.inference.batching import BatchingRule
from gorila.inference.channel import InferenceChannel, SlotLayout
from gorila.inference.policies import RecurrentSampledPolicy
from gorila.inference.server import InferenceServer
from gorila.losses.vtrace import segment_forward
from gorila.nets.actor_critic_env import make_network
from gorila.nets.flat import FlatParams
from gorila.nets.recurrent import RecurrentActorCritic, RecurrentSampler
from gorila.params import LocalEndpoint, ParameterServer, ServerSpec, UpdateRule
from gorila.runtime.local import LocalService
from gorila.trajectory import RemoteQueue, TrajectoryQueue
from gorila.types import Segment

COUNTING = "gorila/Counting-v0"  # 5-step episodes whose observation is the step index
CORE = 8
network_fn = functools.partial(make_network, COUNTING, (8,), False, 0, core="lstm", core_size=CORE)


def _parameter_server() -> ParameterServer:
    params = FlatParams(network_fn()).get()
    spec = ServerSpec(rule=UpdateRule.asynchronous(), optimizer="sgd", lr=0.1)
    return ParameterServer(tuple(LocalEndpoint(s) for s in spec.build(params)), spec.layout(params.size), spec.rule,
                           timeout_s=10.0)


def _segments(central: bool, count: int = 2) -> list[Segment]:
    """``count`` 7-step segments of 4 envs in a row: an episode ends inside each, and the second
    begins mid-episode, with the states the first left."""
    server = _parameter_server()
    inference = (InferenceServer(0, server, policy=functools.partial(RecurrentSampledPolicy, network_fn, seed=3),
                                 rule=BatchingRule(64, 0.0), refresh_every=1) if central else None)
    queue = TrajectoryQueue(0, capacity=count)
    actor = SegmentActor(0, server, envs=EnvSpec(COUNTING, 4), network_fn=network_fn,
                         queues=[RemoteQueue(LocalService(queue))], unroll_length=7, refresh_every=1, gamma=0.5,
                         seed=0, inference=None if inference is None else LocalService(inference),
                         state_shape=(2, CORE))
    try:
        for _ in range(count):
            assert actor.step()
        taken = queue.take(count)
        assert taken is not None
        return taken
    finally:
        actor.close()
        if inference is not None:
            inference.close()


def _learner_net() -> RecurrentActorCritic:
    net = network_fn()
    assert isinstance(net, RecurrentActorCritic)
    return net


@pytest.mark.parametrize("central", [False, True], ids=["acting on its own", "central inference"])
def test_the_learners_unroll_from_the_segments_core_state_gives_the_actors_log_probabilities_bit_for_bit(central):
    first, second = _segments(central)
    # the first observation of each episode is marked, and the second segment starts mid-episode
    assert first.starts is not None and second.starts is not None and second.core_state is not None
    assert first.starts[:, 0].tolist() == [True, False, False, False, False, True, False]
    assert second.starts[:, 0].tolist() == [False, False, False, True, False, False, False]
    assert np.abs(second.core_state).min() > 0
    net = _learner_net()
    for segment in (first, second):
        with torch.no_grad():
            out = segment_forward(net, segment).out
            log_pi = net.head.log_prob(out, torch.as_tensor(segment.actions))
        np.testing.assert_array_equal(log_pi.numpy(), segment.log_probs)


def _without_resets(segment: Segment) -> Segment:
    assert segment.starts is not None
    return dataclasses.replace(segment, starts=np.zeros_like(segment.starts))


def test_a_state_not_reset_at_an_episode_boundary_changes_the_loss_and_the_advantages():
    segment = _segments(central=False, count=1)[0]
    net = _learner_net()
    flat = FlatParams(net)
    _, reset = ImpalaLoss().gradients(net, segment, flat)
    _, carried = ImpalaLoss().gradients(net, _without_resets(segment), flat)
    assert reset["loss"] != carried["loss"]
    loss = PPOLoss(advantages="gae")
    advantages = loss.targets(net, segment).advantages
    assert not torch.equal(advantages, loss.targets(net, _without_resets(segment)).advantages)
    # reset means from zero: the step that begins an episode is what a fresh state gives
    with torch.no_grad():
        out = segment_forward(net, segment).out
        fresh, _, _ = net.step(torch.as_tensor(segment.obs[5]), net.initial_state(4), torch.ones(4, dtype=torch.bool))
    torch.testing.assert_close(out[5], fresh, rtol=0, atol=0)


def test_ppo_minibatches_of_a_recurrent_network_are_whole_sequences_from_their_first_state():
    segment = _segments(central=False, count=1)[0]
    net = _learner_net()
    batch = PPOLoss().targets(net, segment)
    assert len(batch) == 4 and segment.core_state is not None  # envs, not steps
    chosen = batch.select(np.array([2, 0]))
    assert chosen.obs.shape[:2] == (7, 2) and chosen.core_state is not None
    np.testing.assert_array_equal(chosen.actions.numpy(), segment.actions[:, [2, 0]])
    np.testing.assert_array_equal(chosen.core_state.numpy(), segment.core_state[[2, 0]])
    grad, info = PPOLoss().gradient(net, FlatParams(net), chosen)
    assert np.isfinite(grad).all() and np.abs(grad).sum() > 0 and info["approx_kl"] == pytest.approx(0, abs=1e-6)


def test_the_inference_server_chooses_what_a_local_sampler_chooses_from_the_same_states():
    """Central inference keeps each env's state as an actor's own sampler does: the same actions,
    log-probabilities and carried states, step by step, with episodes beginning on the way."""
    net = _learner_net()
    server = _parameter_server()
    inference = InferenceServer(0, server, policy=functools.partial(RecurrentSampledPolicy, network_fn, seed=5),
                                rule=BatchingRule(64, 0.0), refresh_every=1)
    channel = InferenceChannel(inference.address(), SlotLayout((1,), np.dtype(np.float32).str, (3,), (), "<i8",
                                                               (2, CORE)), timeout_s=10.0)
    local = RecurrentSampler(net, seed=5, num_envs=3)
    rng = np.random.default_rng(0)
    try:
        for step in range(12):
            obs = rng.normal(size=(3, 1)).astype(np.float32)
            starts = np.array([step == 0, step % 4 == 3, step % 5 == 2])
            carried = local.state
            expected = local.sample_with_log_prob(obs, starts)
            channel.send(0, obs, starts)
            actions, log_probs, _ = channel.receive_sampled(0)
            np.testing.assert_array_equal(channel.slots.core_state[0], carried)
            np.testing.assert_array_equal(actions, expected[0])
            np.testing.assert_array_equal(log_probs, expected[1])
    finally:
        channel.close()
        inference.close()


def test_ppo_refuses_more_minibatches_than_a_batch_has_sequences(tmp_path):
    run = RunConfig(algo="ppo", runtime="local", run_dir=tmp_path)
    def config(minibatches: int) -> PPOConfig:  # a batch: 2 segments of 4 envs
        return PPOConfig(actors=2, envs_per_actor=4, minibatches=minibatches, core="lstm", core_size=8)

    with pytest.raises(ConfigError) as refused:
        ppo_plan(run, config(9), RLConfig(env=COUNTING))
    assert refused.value.field == "minibatches"
    ppo_plan(run, config(8), RLConfig(env=COUNTING))
