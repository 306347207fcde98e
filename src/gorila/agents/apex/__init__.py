"""Ape-X: many actors with their own exploration, prioritized replay as a sharded service, n-step returns,
and a learner fed by prefetch."""

from __future__ import annotations

from gorila.agents.agent import Agent, PlanBuilder
from gorila.agents.apex.config import ApexConfig
from gorila.agents.rl_config import RLConfig


def _builder() -> PlanBuilder:
    from gorila.agents.apex import builder  # torch: imported once a run asks for a plan or a policy

    return builder


APEX = Agent("apex", (ApexConfig, RLConfig), _builder)
