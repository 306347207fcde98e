"""A MinAtar run given no ``--total-steps`` trains to the published budget: its first lines say so and
its ``config.json`` records the budget it resolved (local runtime, a second of training)."""

import json

import pytest

import gorila

pytest.importorskip("minatar")


def test_a_minatar_run_says_and_records_its_published_budget(tmp_path, capfd):
    summary = gorila.train("a3c", env="MinAtar/Breakout-v1", runtime="local", target_return=10, time_limit_s=1,
                           eval_episodes=1, run_dir=tmp_path / "r", verbose=True)
    lines = capfd.readouterr().err.splitlines()
    assert lines[:2] == [f"run directory: {tmp_path / 'r'}",
                         "budget: 5,000,000 env steps (MinAtar's published budget, Young & Tian 2019); stops early "
                         "at --target-return 10; or after 1 s of training (--time-limit-s)"]
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["a3c"]["total_steps"] == 5_000_000
    assert config["run"]["budget_source"] == "MinAtar's published budget, Young & Tian 2019"
    assert summary["stop_reason"] in ("time_limit", "target")
