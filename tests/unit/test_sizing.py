"""A run's processes and memory are estimated against the machine before anything starts, and a run
that cannot fit is refused with the estimate, naming the setting (exit 2, nothing started or written)."""

import pytest

from gorila.cli import main
from gorila.errors import ConfigError
from gorila.launch import configs_from_values
from gorila.machine import Machine
from gorila.sizing import PROCESS_BYTES, check_fits, estimate

SMALL = Machine(cpus=2, memory_bytes=8 * 2**30)


def fits(algo: str, machine: Machine = SMALL, **values):
    run, configs = configs_from_values(algo, values)
    return check_fits(run, configs, machine)


def test_the_default_runs_fit_a_small_machine():
    for algo in ("lstsq", "a3c", "dqn", "apex", "impala", "ppo"):
        assert fits(algo) is not None


def test_hidden_layers_too_wide_for_memory_are_refused_with_the_estimate():
    with pytest.raises(ConfigError) as refusal:
        fits("a3c", runtime="local", hidden=(100_000, 100_000))
    assert refusal.value.field == "hidden"
    assert "100000,100000 needs about" in refusal.value.message and "GiB" in refusal.value.message
    assert "8.0 GiB is available" in refusal.value.message


def test_more_actors_than_ray_can_place_on_the_cpus_are_refused_before_ray_starts():
    with pytest.raises(ConfigError) as refusal:
        fits("dqn", actors=500)
    assert refusal.value.field == "actors"
    assert "502 processes" in refusal.value.message and "this machine has 2" in refusal.value.message


def test_processes_that_would_not_fit_in_memory_are_refused():
    with pytest.raises(ConfigError) as refusal:
        fits("impala", Machine(cpus=64, memory_bytes=4 * 2**30), actors=60)
    assert refusal.value.field == "actors" and "processes" in refusal.value.message


def test_replays_too_big_for_memory_are_refused_naming_replay_capacity():
    with pytest.raises(ConfigError) as refusal:
        fits("dqn", runtime="local", actors=1000, replay_capacity=1_000_000)
    assert refusal.value.field == "replay_capacity" and "the replays" in refusal.value.message


def test_the_estimate_counts_what_the_builders_start():
    run, configs = configs_from_values("dqn", {"replay": "global", "actors": 4, "replay_shards": 2})
    found = estimate(run, configs)
    assert found.processes == 4 + 1 + 2 + 1 + 1  # actors, learner, replay shards, parameter shard, evaluator
    assert found.process_bytes == found.processes * PROCESS_BYTES
    run, configs = configs_from_values("a3c", {"runtime": "local"})
    assert estimate(run, configs).processes == 1 and estimate(run, configs).process_bytes == 0


def test_a_run_that_joins_a_cluster_is_left_to_the_cluster():
    run, configs = configs_from_values("dqn", {"actors": 500, "address": "10.0.0.1:6379"})
    assert check_fits(run, configs, SMALL) is None


@pytest.mark.parametrize("argv, flag", [
    (["--algo", "dqn", "--actors", "500"], "--actors"),
    (["--algo", "a3c", "--runtime", "local", "--hidden", "100000,100000"], "--hidden"),
    (["--algo", "apex", "--runtime", "local", "--replay-capacity", "2000000000"], "--replay-capacity"),
])
def test_the_command_refuses_in_one_line_with_exit_2_and_starts_nothing(tmp_path, capsys, monkeypatch, argv, flag):
    monkeypatch.setattr(Machine, "here", classmethod(lambda cls: SMALL))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert main(["train", *argv, "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gorila train: error: {flag}: ") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()
