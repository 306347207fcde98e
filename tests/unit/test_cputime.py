import os

from gorila.metrics import CpuClock, process_cpu_seconds


def test_process_cpu_seconds_matches_os_times():
    before = os.times()
    measured = process_cpu_seconds()
    after = os.times()
    # psutil and os.times read the same kernel counters; allow for their tick granularity.
    assert before.user + before.system - 0.05 <= measured <= after.user + after.system + 0.05


def test_cpu_clock_counts_work_done_since_creation():
    clock = CpuClock()
    start_total = process_cpu_seconds()
    assert 0 <= clock.seconds() < 1.0
    x = 0
    while process_cpu_seconds() - start_total < 0.05:  # burn CPU until the counter moves
        x += sum(range(10_000))
    used = clock.seconds()
    assert used >= 0.05
    assert used <= process_cpu_seconds() - start_total + 0.05
