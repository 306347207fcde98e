"""gorila from Python: ``gorila.train`` as the command trains, ``gorila.load_policy`` and the exported
weights used outside gorila (local runtime)."""

import csv
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import safetensors.torch
import torch
from torch import nn

import gorila
from gorila.errors import ConfigError

A3C_QUICK = dict(runtime="local", total_steps=3_000, stop_at_target=False, eval_episodes=2, eval_every_s=0.2)


@pytest.fixture(scope="module")
def a3c_run(tmp_path_factory):
    """One short A3C run on CartPole-v1: its directory and summary."""
    run_dir = tmp_path_factory.mktemp("a3c") / "run"
    return run_dir, gorila.train("a3c", run_dir=run_dir, **A3C_QUICK)


def test_import_gorila_loads_neither_torch_nor_ray():
    code = "import gorila, sys; print(sorted(m for m in ('torch', 'ray') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_train_returns_the_summary_it_saved_and_prints_nothing(tmp_path, capfd):
    summary = gorila.train("lstsq", runtime="local", workers=2, mode="sync", n=2_000, d=8, run_dir=tmp_path / "r")
    assert capfd.readouterr() == ("", "")  # quiet by default: a library does not print
    assert json.loads(json.dumps(summary)) == json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["run_dir"] == str(tmp_path / "r") and summary["stop_reason"] == "target"
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["lstsq"]["workers"] == 2 and config["run"]["mode"] == "sync"


def test_verbose_shows_the_run_as_the_command_does(tmp_path, capfd):
    gorila.train("lstsq", runtime="local", n=2_000, d=8, run_dir=tmp_path / "r", verbose=True)
    out, err = capfd.readouterr()
    assert out == ""
    assert err.splitlines()[0] == f"run directory: {tmp_path / 'r'}"
    assert "starting 1 parameter shard, 2 workers" in err


@pytest.mark.parametrize("settings, name", [
    (dict(workers=0), "workers"),                 # checked as the flag is
    (dict(actors=2), "actors"),                   # a dqn setting, not lstsq's
    (dict(mode="bogus"), "mode"),
    (dict(count_within=5, accept_within=3, mode="semi-async"), "accept_within"),
])
def test_bad_settings_are_refused_by_name_before_anything_starts(tmp_path, settings, name):
    with pytest.raises(ConfigError) as refused:
        gorila.train("lstsq", runtime="local", run_dir=tmp_path / "r", **settings)
    assert refused.value.field == name
    assert not (tmp_path / "r").exists()


def test_a_setting_of_another_algorithm_says_which():
    with pytest.raises(ConfigError, match=r"not a setting of lstsq \(it is a setting of apex, dqn, impala, ppo\)"):
        gorila.train("lstsq", actors=2)


def test_resume_continues_with_the_saved_settings(a3c_run, tmp_path):
    run_dir, first = shutil.copytree(a3c_run[0], tmp_path / "run"), a3c_run[1]
    summary = gorila.train(resume=run_dir, total_steps=6_000)
    assert summary["algo"] == "a3c" and summary["run_dir"] == str(run_dir)
    assert summary["env_steps"] >= 6_000 > first["env_steps"]
    config = json.loads((run_dir / "config.json").read_text())
    assert config["a3c"]["eval_episodes"] == 2  # kept from the first run


def test_a_loaded_policy_acts_like_the_trained_network(a3c_run):
    run_dir, summary = a3c_run
    policy = gorila.load_policy(run_dir, checkpoint="last")
    env = policy.make_env(seed=3)
    obs, _ = env.reset(seed=3)
    action = policy(obs)
    assert isinstance(action, int) and env.action_space.contains(action)
    batch = np.stack([obs, obs * 0.5])
    with torch.no_grad():
        logits, _ = policy.network(torch.as_tensor(batch))
    np.testing.assert_array_equal(policy(batch), logits.argmax(-1).numpy())
    assert policy.env_steps == summary["env_steps"] and policy.epsilon == 0.0


def test_the_exported_state_dict_loads_into_plain_pytorch(a3c_run):
    run_dir, _ = a3c_run
    newest = max((run_dir / "checkpoints").glob("ckpt-*.json"))
    export = run_dir / "checkpoints" / json.loads(newest.read_text())["exports"]["model"]
    # The A3C policy network for CartPole as anyone would write it, without gorila.
    policy_net = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))
    state = safetensors.torch.load_file(export)
    policy_net.load_state_dict({k.removeprefix("policy."): v for k, v in state.items() if k.startswith("policy.")})
    obs = torch.randn(16, 4)
    with torch.no_grad():
        expected, _ = gorila.load_policy(run_dir, checkpoint="last").network(obs)
        np.testing.assert_allclose(policy_net(obs).numpy(), expected.numpy(), rtol=1e-6)


def test_load_policy_names_a_directory_that_is_no_run(tmp_path):
    with pytest.raises(ConfigError) as refused:
        gorila.load_policy(tmp_path)
    assert refused.value.field == "run_dir" and str(tmp_path) in refused.value.message


def test_evaluate_plays_the_saved_policy_and_records_videos(a3c_run, tmp_path):
    report = gorila.evaluate(a3c_run[0], episodes=2, noop_max=0, seed=1, video_dir=tmp_path / "v", checkpoint="last")
    assert report["episodes"] == 2 and report["epsilon"] == 0.0 and len(report["scores"]) == 2
    assert report["mean"] == np.mean(report["scores"]) and report["checkpoint_env_steps"] == a3c_run[1]["env_steps"]
    videos = sorted((tmp_path / "v").glob("*.mp4"))
    assert [v.name for v in videos] == ["eval-0-episode-0.mp4", "eval-1-episode-0.mp4"]
    assert report["videos"] == [str(v) for v in videos] and all(v.stat().st_size > 1000 for v in videos)


def test_a_callback_sees_every_row_and_stops_the_run_by_returning_false(tmp_path):
    seen = []

    def callback(row):
        seen.append(dict(row))
        return len(seen) < 3  # False at the third row

    summary = gorila.train("lstsq", runtime="local", n=2_000, d=8, lr=1e-4, iterations=10**6, run_dir=tmp_path / "r",
                           callback=callback)
    assert summary["stop_reason"] == "callback" and len(seen) == 3
    with open(tmp_path / "r" / "metrics.csv", newline="") as f:
        logged = list(csv.DictReader(f))
    assert [int(r["step"]) for r in logged] == [row["step"] for row in seen]
    assert [float(r["suboptimality"]) for r in logged] == [row["suboptimality"] for row in seen]
    assert all(row["time_s"] == pytest.approx(float(r["time_s"]), abs=1e-3) for r, row in zip(logged, seen))


def test_a_callback_can_stop_at_an_evaluation_of_its_choosing(tmp_path):
    evaluations = []

    def first_evaluation(row):
        if "eval_return" in row:
            evaluations.append(row["eval_return"])
            return False
        return None  # None goes on: only False stops

    summary = gorila.train("a3c", run_dir=tmp_path / "r", callback=first_evaluation, **A3C_QUICK)
    assert summary["stop_reason"] == "callback" and len(evaluations) == 1
    assert summary["evaluations"][0]["eval_return"] == evaluations[0]
