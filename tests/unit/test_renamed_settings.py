"""One name per idea across algorithms: a renamed setting's old name is refused with its new one,
on the command line (exit 2), in a config file and in ``gorila.train``; a run's own ``config.json``
written under the old name resumes with its settings (gorila wrote it, and nothing is lost)."""

import argparse
import json

import pytest

from gorila.cli import _configs, _train_parser
from gorila.errors import ConfigError
from gorila.launch import configs_from_values, file_values, saved_values


@pytest.mark.parametrize("algo, old, new, field", [
    ("a3c", "--envs-per-worker", "--envs-per-actor", "envs_per_actor"),
    ("dqn", "--apex-alpha", "--eps-alpha", "eps_alpha"),
    ("a3c", "--rollout-steps", "--unroll-length", "unroll_length"),
])
def test_an_old_flag_is_refused_naming_the_new_one(capsys, algo, old, new, field):
    with pytest.raises(SystemExit) as stopped:
        _configs(["--algo", algo, old, "3", "--runtime", "local"])
    assert stopped.value.code == 2
    assert f"{old}: not a flag of --algo {algo} (it is now {new})" in capsys.readouterr().err
    _, configs, _ = _configs(["--algo", algo, new, "3", "--runtime", "local"])
    assert getattr(configs[0], field) == 3


def _shown_flags(algo: str) -> set[str]:
    return {o for a in _train_parser(algo)._actions if a.help is not argparse.SUPPRESS for o in a.option_strings}


@pytest.mark.parametrize("algos, name, old", [
    (("dqn", "apex", "a3c", "impala", "ppo"), "--envs-per-actor", "--envs-per-worker"),
    (("dqn", "apex"), "--eps-alpha", "--apex-alpha"),
    (("a3c", "impala", "ppo"), "--unroll-length", "--rollout-steps"),
])
def test_one_name_per_idea_across_algorithms(algos, name, old):
    for algo in algos:
        flags = {o for a in _train_parser(algo)._actions for o in a.option_strings}
        assert name in _shown_flags(algo) and old not in flags, algo


def test_the_python_api_and_config_files_refuse_old_names_naming_the_new_one(tmp_path):
    with pytest.raises(ConfigError, match="envs_per_worker: now envs_per_actor"):
        configs_from_values("a3c", {"envs_per_worker": 2})
    path = tmp_path / "a3c.yaml"
    path.write_text("algo: a3c\nenvs-per-worker: 4\n")
    with pytest.raises(ConfigError, match=f"envs_per_worker: {path}: now envs_per_actor"):
        file_values(path)


def test_a_run_saved_with_old_names_resumes_with_its_settings(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(
        {"algo": "a3c", "run": {"mode": "async", "seed": 3}, "a3c": {"envs_per_worker": 5, "workers": 1}}))
    algo, values = saved_values(tmp_path)
    assert algo == "a3c" and values["envs_per_actor"] == 5 and "envs_per_worker" not in values
    assert file_values(tmp_path / "config.json")[1]["envs_per_actor"] == 5  # the same record as --config


def test_where_a_saved_run_holds_both_names_the_new_one_wins(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(
        {"algo": "dqn", "run": {"seed": 1}, "dqn": {"apex_alpha": 7.0, "eps_alpha": 3.0}}))
    assert saved_values(tmp_path)[1]["eps_alpha"] == 3.0
