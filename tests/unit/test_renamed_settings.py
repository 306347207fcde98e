"""One name per idea across algorithms: a renamed setting's old name still works, from the command
line (a hidden flag that says so on stderr), a config file or ``gorila.train`` (a FutureWarning),
and a resumed run's ``config.json`` (quietly: gorila wrote it)."""

import argparse
import json

import pytest

from gorila.cli import _configs, _train_parser
from gorila.launch import configs_from_values, file_values, saved_values


@pytest.mark.parametrize("algo, old, new, field", [
    ("a3c", "--envs-per-worker", "--envs-per-actor", "envs_per_actor"),
    ("dqn", "--apex-alpha", "--eps-alpha", "eps_alpha"),
    ("a3c", "--rollout-steps", "--unroll-length", "unroll_length"),
])
def test_an_old_flag_sets_the_new_setting_and_says_so(capsys, algo, old, new, field):
    _, configs, _ = _configs(["--algo", algo, old, "3", "--runtime", "local"])
    assert getattr(configs[0], field) == 3
    err = capsys.readouterr().err
    assert f"{old} is now {new}" in err
    _, configs, _ = _configs(["--algo", algo, new, "3", "--runtime", "local"])
    assert getattr(configs[0], field) == 3
    assert capsys.readouterr().err == ""


def test_old_flags_are_hidden_from_help():
    text = _train_parser("a3c").format_help() + _train_parser("dqn").format_help()
    assert "--envs-per-actor" in text and "--eps-alpha" in text and "--unroll-length" in text
    assert "--envs-per-worker" not in text and "--apex-alpha" not in text and "--rollout-steps" not in text


def _shown_flags(algo: str) -> set[str]:
    return {o for a in _train_parser(algo)._actions if a.help is not argparse.SUPPRESS for o in a.option_strings}


@pytest.mark.parametrize("algos, name, old", [
    (("dqn", "apex", "a3c", "impala", "ppo"), "--envs-per-actor", "--envs-per-worker"),
    (("dqn", "apex"), "--eps-alpha", "--apex-alpha"),
    (("a3c", "impala", "ppo"), "--unroll-length", "--rollout-steps"),
])
def test_one_name_per_idea_across_algorithms(algos, name, old):
    for algo in algos:
        assert name in _shown_flags(algo) and old not in _shown_flags(algo), algo


def test_the_python_api_and_config_files_take_old_names_with_a_warning(tmp_path):
    with pytest.warns(FutureWarning, match="envs_per_worker is now envs_per_actor"):
        _, (a3c, _) = configs_from_values("a3c", {"envs_per_worker": 2})
    assert a3c.envs_per_actor == 2
    path = tmp_path / "a3c.yaml"
    path.write_text("algo: a3c\nenvs-per-worker: 4\n")
    with pytest.warns(FutureWarning, match=f"{path}: envs_per_worker is now envs_per_actor"):
        algo, values = file_values(path)
    assert (algo, values) == ("a3c", {"envs_per_actor": 4})


def test_the_new_name_wins_where_both_are_given():
    with pytest.warns(FutureWarning):
        _, (dqn, _) = configs_from_values("dqn", {"apex_alpha": 7.0, "eps_alpha": 3.0})
    assert dqn.eps_alpha == 3.0


def test_a_run_saved_with_old_names_resumes_with_its_settings(tmp_path, recwarn):
    (tmp_path / "config.json").write_text(json.dumps(
        {"algo": "a3c", "run": {"mode": "async", "seed": 3}, "a3c": {"envs_per_worker": 5, "workers": 1}}))
    algo, values = saved_values(tmp_path)
    assert algo == "a3c" and values["envs_per_actor"] == 5 and "envs_per_worker" not in values
    assert not [w for w in recwarn if issubclass(w.category, FutureWarning)]
