"""The injected straggler of real runs (``--straggler F``): only worker 0, only F >= 1."""

import time

import pytest

from gorila.agents.a3c.config import A3CConfig
from gorila.agents.lstsq.builder import make_plan
from gorila.agents.lstsq.config import LstsqConfig
from gorila.agents.lstsq.learner import LstsqWorker
from gorila.config import RunConfig
from gorila.errors import ConfigError
from gorila.learners.straggler import Straggler
from gorila.runtime.local import LocalShards


def test_only_worker_zero_is_slowed():
    assert Straggler.for_worker(0, 3.0).factor == 3.0
    assert Straggler.for_worker(1, 3.0).factor == 1.0


def test_stretch_makes_the_time_since_start_factor_times_as_long():
    started = time.perf_counter() - 0.02  # a gradient that took 20 ms
    Straggler(3.0).stretch(started)
    assert time.perf_counter() - started >= 0.06


@pytest.mark.parametrize("make", [lambda: Straggler(0.5), lambda: LstsqConfig(straggler=0.5),
                                  lambda: A3CConfig(straggler=0.99)])
def test_a_factor_below_one_is_refused_by_name(make):
    with pytest.raises(ConfigError) as err:
        make()
    assert err.value.flag == "--straggler"


def test_the_lstsq_builder_slows_worker_zero_of_the_run():
    run = RunConfig(algo="lstsq", mode="async", runtime="local")
    plan = make_plan(run, LstsqConfig(workers=2, n=1000, d=4, straggler=4.0))
    shards = LocalShards(plan.spec, plan.initial_params(), 10.0)
    factory = plan.groups({})[0].factory
    workers = [factory(k, shards.server) for k in (0, 1)]
    assert [w.slow.factor for w in workers if isinstance(w, LstsqWorker)] == [4.0, 1.0]
