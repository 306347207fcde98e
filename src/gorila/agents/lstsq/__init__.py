"""MapReduce parallel gradient descent on synthetic least squares (the first workload)."""

from __future__ import annotations

from gorila.agents.agent import Agent, PlanBuilder
from gorila.agents.lstsq.config import LstsqConfig


def _builder() -> PlanBuilder:
    from gorila.agents.lstsq import builder  # imported once a run asks for a plan, as the others are

    return builder


LSTSQ = Agent("lstsq", (LstsqConfig,), _builder, plays=False)  # synthetic data: no policy to play
