"""The bare-process ceiling of ``gorila bench speedup``: processes that really run at once."""

import pytest

from gorila.agents.lstsq.config import LstsqConfig
from gorila.bench.machine_limit import map_intervals

SMALL = LstsqConfig(n=4000, d=16)


@pytest.mark.parametrize("synchronized", [False, True])
def test_the_processes_run_their_rounds_at_the_same_time(synchronized):
    # A barrier every round must not deadlock: both processes reach each one (else the timeout fires).
    (a_start, a_end), (b_start, b_end) = map_intervals(SMALL, seed=0, num_workers=2, rounds=1000,
                                                       synchronized=synchronized, timeout_s=120)
    assert a_start < b_end and b_start < a_end  # the two intervals overlap: neither ran after the other
    if synchronized:  # meeting at a barrier every round, neither can finish far ahead of the other
        assert abs(a_end - b_end) < 0.5 * max(a_end - a_start, b_end - b_start)
