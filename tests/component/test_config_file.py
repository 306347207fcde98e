"""gorila train --config FILE: YAML or JSON settings (a run's own config.json as written), flags
overriding the file, checked by the same dataclasses as the flags."""

import json
import re
from pathlib import Path

import pytest

from gorila.cli import main
from gorila.errors import ConfigError
from gorila.launch import configs_from_values, file_values
from gorila.learners.target import TargetUpdate

LSTSQ_YAML = """\
algo: lstsq
runtime: local
mode: sync
n: 2000
d: 8
lr: 1e-1          # YAML reads this as text: it is read as --lr reads it
iterations: 40
"""


def _config(run_dir):
    return json.loads((run_dir / "config.json").read_text())


def test_a_yaml_file_trains_with_flags_overriding_it(tmp_path, capsys):
    (tmp_path / "a.yaml").write_text(LSTSQ_YAML)
    assert main(["train", "--config", str(tmp_path / "a.yaml"), "--workers", "3", "--quiet",
                 "--run-dir", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    config = _config(tmp_path / "r")
    assert (config["algo"], config["run"]["mode"], config["run"]["runtime"]) == ("lstsq", "sync", "local")
    assert (config["lstsq"]["workers"], config["lstsq"]["lr"], config["lstsq"]["iterations"]) == (3, 0.1, 40)


def test_a_runs_own_config_json_starts_a_new_run_with_its_settings(tmp_path, capsys):
    (tmp_path / "a.yaml").write_text(LSTSQ_YAML)
    assert main(["train", "--config", str(tmp_path / "a.yaml"), "--quiet", "--run-dir", str(tmp_path / "first")]) == 0
    assert main(["train", "--config", str(tmp_path / "first" / "config.json"), "--seed", "7", "--quiet",
                 "--run-dir", str(tmp_path / "second")]) == 0
    capsys.readouterr()
    first, second = _config(tmp_path / "first"), _config(tmp_path / "second")
    assert second["lstsq"] == first["lstsq"] and second["run"]["seed"] == 7
    assert {k: v for k, v in second["run"].items() if k not in ("seed", "run_dir", "stamp")} == \
        {k: v for k, v in first["run"].items() if k not in ("seed", "run_dir", "stamp")}


def test_settings_are_named_as_flags_and_read_as_flags_read_them(tmp_path):
    path = tmp_path / "dqn.json"
    path.write_text(json.dumps({"algo": "dqn", "target-update": "soft:0.01", "hidden": [32, 32], "lr": "3e-4",
                                "stop_at_target": "false", "time_limit_s": 60}))
    algo, values = file_values(path)
    assert algo == "dqn" and values["target_update"] == TargetUpdate.parse("soft:0.01")
    assert values["hidden"] == (32, 32) and values["lr"] == 3e-4 and values["stop_at_target"] is False
    assert file_values(path, algo="apex")[0] == "apex"  # --algo given beside the file wins


@pytest.mark.parametrize("text, says", [
    ("algo: lstsq\nwrkers: 2\n", "'wrkers' is not a setting of lstsq"),
    ("algo: lstsq\nlr: fast\n", "lr: could not convert"),
    ("algo: sac\n", "unknown algorithm 'sac'"),
    ("- workers: 2\n", "holds a list, not a mapping"),
    ("algo: [unclosed\n", "cannot be read as YAML"),
])
def test_a_bad_file_is_refused_naming_the_file_and_the_setting(tmp_path, text, says):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        file_values(path)
    assert refused.value.field == "config" and says in refused.value.message and str(path) in refused.value.message


def test_a_value_the_dataclasses_refuse_is_named_by_the_file_from_the_command_line(tmp_path, capsys):
    (tmp_path / "a.yaml").write_text("algo: lstsq\nruntime: local\nworkers: 0\n")
    for argv, says in (([], f"--config: {tmp_path / 'a.yaml'}: workers: must be >= 1"),
                       (["--resume", str(tmp_path)], "--config: a resumed run keeps its own settings")):
        with pytest.raises(SystemExit) as refused:
            main(["train", "--config", str(tmp_path / "a.yaml"), "--run-dir", str(tmp_path / "r"), *argv])
        assert refused.value.code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_the_readme_config_file_is_read_as_written(tmp_path):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    (block,) = re.findall(r"^```yaml\n(.*?)^```", readme, flags=re.M | re.S)
    (tmp_path / "a3c.yaml").write_text(block)
    algo, values = file_values(tmp_path / "a3c.yaml")
    assert algo == "a3c" and values["lr_policy"] == 7e-4 and values["time_limit_s"] == 60
    configs_from_values(algo, values)  # the dataclasses take it


def test_gorila_train_reads_the_same_file_with_keywords_overriding_it(tmp_path):
    import gorila

    (tmp_path / "a.yaml").write_text(LSTSQ_YAML)
    summary = gorila.train(config=tmp_path / "a.yaml", workers=3, run_dir=tmp_path / "r")
    config = _config(tmp_path / "r")
    assert summary["algo"] == "lstsq" and config["lstsq"]["workers"] == 3 and config["lstsq"]["iterations"] == 40
