"""A run directory names no code. The module of a ``module:EnvId`` its ``config.json`` records is
imported only once the user names the env again (``--env``); and nothing in the directory itself is
imported, not even by ``python -m gorila`` run from inside it (which puts the current directory on
the import path) nor by the ``gorila`` executable under a ``PYTHONPATH`` that ends in ``:``."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.smoke

PLANTED_ENV = "planted:Planted-v0"
#: Modules gorila imports once Python has started (``planted`` the one the config names): each,
#: planted in the run directory, leaves a mark when it is imported.
PLANTED = ("__future__", "json", "argparse", "dataclasses", "typing", "numpy", "torch", "gymnasium",
           "safetensors", "yaml", "planted")
#: What ``planted`` does besides leaving its mark: register its env as CartPole, which the run played.
REGISTER = ("import gymnasium\n"
            "gymnasium.register('Planted-v0', entry_point='gymnasium.envs.classic_control.cartpole:CartPoleEnv',\n"
            "                   max_episode_steps=500)\n")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    import gorila

    run_dir = tmp_path_factory.mktemp("trained") / "run"
    gorila.train("a3c", env="CartPole-v1", runtime="local", total_steps=300, stop_at_target=False, eval_episodes=1,
                 eval_every_s=0.2, run_dir=str(run_dir))
    return run_dir


@pytest.fixture
def planted(trained, tmp_path):
    """A copy of the run whose config.json names ``planted:Planted-v0``, with a ``.py`` beside it for
    every module in :data:`PLANTED`; the marks go to ``marks/``."""
    run_dir, marks = tmp_path / "run", tmp_path / "marks"
    shutil.copytree(trained, run_dir)
    marks.mkdir()
    config = json.loads((run_dir / "config.json").read_text())
    config["a3c"]["env"] = PLANTED_ENV
    (run_dir / "config.json").write_text(json.dumps(config))
    for name in PLANTED:
        (run_dir / f"{name}.py").write_text(f"open({str(marks / name)!r}, 'w').close()\n"
                                            + (REGISTER if name == "planted" else ""))
    return run_dir, marks


def gorila(*args, cwd, pythonpath=None, executable=False, timeout=120):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    command = [str(Path(sys.executable).parent / "gorila")] if executable else [sys.executable, "-m", "gorila"]
    return subprocess.run([*command, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)


def refused_naming_the_flag(result):
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"--env '{PLANTED_ENV}'" in result.stderr and "never makes gorila import code" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", [("eval", "."), ("train", "--resume", ".")], ids=["eval", "resume"])
def test_python_m_gorila_from_inside_a_run_dir_imports_nothing_of_it(planted, command):
    run_dir, marks = planted
    refused_naming_the_flag(gorila(*command, cwd=run_dir))
    assert sorted(p.name for p in marks.iterdir()) == []


def test_the_executable_under_a_pythonpath_ending_in_a_colon_imports_nothing_of_the_directory(planted, tmp_path):
    run_dir, marks = planted
    refused_naming_the_flag(gorila("eval", ".", cwd=run_dir, pythonpath=f"{tmp_path / 'elsewhere'}:",
                                   executable=True))
    assert sorted(p.name for p in marks.iterdir()) == []


def test_the_env_named_again_is_made_from_the_path_the_user_gave(planted, tmp_path):
    """--env naming the module, and PYTHONPATH the directory of the user's own copy of it: made."""
    run_dir, marks = planted
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "planted.py").write_text(f"open({str(marks / 'mine')!r}, 'w').close()\n" + REGISTER)
    result = gorila("eval", str(run_dir), "--env", PLANTED_ENV, "--episodes", "1", cwd=tmp_path, pythonpath=str(mine))
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["env"] == PLANTED_ENV
    assert sorted(p.name for p in marks.iterdir()) == ["mine"]


def test_another_env_given_to_eval_is_refused_by_name(planted, tmp_path):
    run_dir, marks = planted
    result = gorila("eval", str(run_dir), "--env", "CartPole-v1", cwd=tmp_path)
    assert result.returncode == 2 and f"is a run on '{PLANTED_ENV}', not 'CartPole-v1'" in result.stderr, result.stderr
    assert sorted(p.name for p in marks.iterdir()) == []


@pytest.mark.heavy
def test_a_resume_on_ray_from_inside_the_run_dir_imports_nothing_of_it_nor_shows_rays_lines(planted, tmp_path):
    """Ray puts the driver's working directory first on its workers' import path: here the run
    directory. Its workers import nothing of it, and a worker that dies (the env's process, once)
    is restarted with none of Ray's own lines ("(raylet) A worker died ...") on the terminal."""
    run_dir, marks = planted
    config = json.loads((run_dir / "config.json").read_text())
    config["a3c"]["env"] = "dying_env:Dying-v0"
    (run_dir / "config.json").write_text(json.dumps(config))
    os.environ["GORILA_TEST_DYING_MARK"] = str(tmp_path / "died")
    try:
        result = gorila("train", "--resume", ".", "--env", "dying_env:Dying-v0", "--runtime", "ray",
                        "--total-steps", "100000", "--time-limit-s", "4", cwd=run_dir,
                        pythonpath=str(Path(__file__).parents[1]), timeout=300)
    finally:
        del os.environ["GORILA_TEST_DYING_MARK"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in marks.iterdir()) == []
    assert (tmp_path / "died").exists() and json.loads(result.stdout)["worker_restarts"] >= 1
    assert "(raylet)" not in result.stderr and "A worker died" not in result.stderr, result.stderr[-3000:]
