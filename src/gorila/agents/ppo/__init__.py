"""PPO (``--mode sync``) and APPO (``--mode async``): segment actors, trajectory queues, and learners
running epochs of clipped-surrogate minibatches."""

from __future__ import annotations

from gorila.agents.agent import Agent, PlanBuilder
from gorila.agents.ppo.config import PPOConfig
from gorila.agents.rl_config import RLConfig


def _builder() -> PlanBuilder:
    from gorila.agents.ppo import builder  # torch: imported once a run asks for a plan or a policy

    return builder


PPO = Agent("ppo", (PPOConfig, RLConfig), _builder)
