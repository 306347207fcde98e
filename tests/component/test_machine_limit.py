"""The bare-process ceiling of ``gorila bench speedup``: processes that really run at once."""

import pytest

from gorila.algos.lstsq.config import LstsqConfig
from gorila.bench.machine_limit import map_limits, map_seconds

SMALL = LstsqConfig(n=4000, d=16)


@pytest.mark.parametrize("synchronized", [False, True])
def test_two_processes_finish_their_rounds(synchronized):
    # A barrier every round must not deadlock: both processes reach each one (else the timeout fires).
    assert 0 < map_seconds(SMALL, seed=0, num_workers=2, rounds=50, synchronized=synchronized, timeout_s=120) < 120


def test_limit_of_one_process_is_one():
    assert map_limits(SMALL, seed=0, counts=[1, 2], rounds=20, synchronized=True)[1] == 1.0
