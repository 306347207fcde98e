"""MapReduce parallel gradient descent on synthetic least squares (the first workload)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gorila.agents.lstsq.config import LstsqConfig

if TYPE_CHECKING:  # annotations only: importing the registry stays cheap (``gorila --help``)
    from gorila.config import RunConfig
    from gorila.driver.plan import Plan


class LstsqAgent:
    """lstsq as the registry holds it (:class:`~gorila.agents.registry.Builder`): its config, and
    its builder, :mod:`gorila.agents.lstsq.builder`, imported only once a run asks for a plan::

        plan = LSTSQ.make_plan(run, LstsqConfig())
    """

    name = "lstsq"
    config_classes = (LstsqConfig,)
    evaluation_policy = None  # its data are synthetic: no policy to play
    check = None  # one config: nothing to agree with

    def make_plan(self, run: RunConfig, cfg: LstsqConfig) -> Plan:
        from gorila.agents.lstsq.builder import make_plan

        return make_plan(run, cfg)


LSTSQ = LstsqAgent()
