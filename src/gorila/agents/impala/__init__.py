"""IMPALA: actors emit segments into trajectory queues, learners push V-trace gradients to the parameter server."""

from __future__ import annotations

from gorila.agents.agent import Agent, PlanBuilder
from gorila.agents.impala.config import ImpalaConfig
from gorila.agents.rl_config import RLConfig


def _builder() -> PlanBuilder:
    from gorila.agents.impala import builder  # torch: imported once a run asks for a plan or a policy

    return builder


IMPALA = Agent("impala", (ImpalaConfig, RLConfig), _builder)
