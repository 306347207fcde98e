"""The driver's counters: totals that survive restarts, and the run's latest 100 episodes."""

from gorila.driver.counters import Counters


def report(pid, episodes, returns, env_steps=0):
    return {"pid": pid, "episodes": episodes, "recent_returns": returns, "env_steps": env_steps}


def test_the_latest_100_episodes_are_the_runs_whichever_worker_played_them():
    counters = Counters(summed=("env_steps", "episodes"))
    counters.update("actor", [report(1, 60, [1.0] * 60), report(2, 0, [])])
    assert counters.recent_return() == 1.0 and not counters.window_full()
    # worker 1 has played 60 more (its report lists its latest 100), worker 0 nothing new
    counters.update("actor", [report(1, 60, [1.0] * 60), report(2, 60, [3.0] * 60)])
    assert counters.window_full()
    assert counters.recent_return() == (40 * 1.0 + 60 * 3.0) / 100  # the oldest 20 of worker 0 left the window


def test_a_report_read_twice_adds_nothing_and_a_restarted_worker_counts_from_zero():
    counters = Counters(summed=("env_steps", "episodes"))
    counters.update("actor", [report(1, 3, [5.0, 5.0, 5.0])])
    counters.update("actor", [report(1, 3, [5.0, 5.0, 5.0])])  # the same report again
    assert list(counters.returns) == [5.0, 5.0, 5.0]
    counters.update("actor", [report(9, 1, [0.0])])  # a new process: its one episode is new
    assert list(counters.returns) == [5.0, 5.0, 5.0, 0.0]
    assert counters.total("episodes") == 4 and counters.restarts == 1
