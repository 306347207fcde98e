"""PPO (--mode sync) and APPO (--mode async) on the local runtime, built as `gorila train --algo ppo`
builds them, reach CartPole's target with the greedy policy."""

import pytest

from gorila.agents.ppo.builder import make_plan
from gorila.agents.ppo.config import PPOConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.driver.loop import run

MAX_ENV_STEPS = 200_000  # the defaults reach 475 within ~15-40k steps on this seed


@pytest.mark.parametrize("mode", ["sync", "async"], ids=["ppo", "appo"])
def test_ppo_learns_cartpole(tmp_path, mode):
    run_config = RunConfig(algo="ppo", runtime="local", mode=mode, seed=0, run_dir=tmp_path)
    summary = run(run_config, make_plan(run_config, PPOConfig(), RLConfig(total_steps=MAX_ENV_STEPS, eval_every_s=0.5)))
    assert summary["reached_target"] and summary["best_eval_return"] >= 475, summary["evaluations"][-3:]
    assert summary["env_steps"] < MAX_ENV_STEPS
    assert summary["updates"] % (10 * 2) == 0  # whole batches: 10 epochs x 2 minibatches each
