"""A recurrent IMPALA (``--core lstm``) on real Ray: segments acted in the actors' processes, unrolled in
this one from the core states they carry, give the actors' log-probabilities within float tolerance."""

import functools

import numpy as np
import pytest
import torch

from gorila.agents.impala.config import ImpalaConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.losses.vtrace import segment_forward
from gorila.nets.actor_critic_env import make_network
from gorila.nets.recurrent import RecurrentActorCritic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ENV = "gorila/StatelessCartPole-v1"


@pytest.mark.heavy
def test_on_ray_the_learners_unroll_gives_the_actors_log_probabilities_within_float_tolerance(ray_local, tmp_path,
                                                                                                train):
    # Actors that pull once act every segment on the run's first parameters, which this process builds too.
    run = RunConfig(algo="impala", runtime="ray", run_dir=tmp_path, seed=0)
    cfg = ImpalaConfig(core="lstm", core_size=16, hidden=(16,), actor_refresh=10**6)
    rl = RLConfig(env=ENV, total_steps=8000, stop_at_target=False, eval_episodes=1)
    taken = []

    def take(placed):  # whatever the learner has not yet taken
        if len(taken) < 4:
            taken.extend(placed.services["trajectories"].call("take", 1)[0] or [])

    train(run, cfg, rl, on_chunk=take)
    net = functools.partial(make_network, ENV, (16,), False, 0, algo="impala", core="lstm", core_size=16)()
    assert isinstance(net, RecurrentActorCritic)
    assert taken, "the learner took every segment before the driver could"
    for segment in taken:
        assert (segment.policy_version == 0).all()
        with torch.no_grad():
            log_pi = net.head.log_prob(segment_forward(net, segment).out, torch.as_tensor(segment.actions))
        np.testing.assert_allclose(log_pi.numpy()[segment.valid], segment.log_probs[segment.valid], rtol=1e-5,
                                   atol=1e-6)
