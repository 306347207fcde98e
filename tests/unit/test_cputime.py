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


def test_a_process_start_time_falls_between_its_launch_and_its_first_line():
    """psutil's ``create_time`` puts it up to a second early (boot time in whole seconds), which
    inflated every start-up figure by that much."""
    import subprocess
    import sys
    import time

    launched = time.time()
    out = subprocess.run([sys.executable, "-c", "import time; first = time.time()\n"
                          "from gorila.metrics.cputime import process_start_time\n"
                          "print(process_start_time(), first)"], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    started, first_line = map(float, out.split())
    assert launched - 0.03 <= started <= first_line  # the kernel's ticks are 10 ms
