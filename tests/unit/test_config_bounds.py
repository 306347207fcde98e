"""Config input is bounded before it is used: a settings file's size, depth, aliases and values
are limited while it is parsed, every value's type is checked before any field is read, integers
stay within their field's range, and an error shows only an excerpt of a bad value. Each refusal
is one line naming the field (exit 2 on the command line) with nothing started and nothing written."""

import json

import pytest

from gorila import validate
from gorila.cli import main
from gorila.errors import ConfigError
from gorila.launch import configs_from_values, file_values


def refused(capsys, argv: list[str]) -> str:
    """``gorila`` run with ``argv`` in this process; it must refuse with exit code 2 in one line."""
    code: str | int | None
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 or "usage:" in err, err
    return err


def alias_bomb(key: str) -> str:
    """1.4 KB of YAML whose aliases expand to 9^9 values under ``key``."""
    lines = [f"{key}:", '  - &a ["x","x","x","x","x","x","x","x","x"]']
    for this, before in zip("bcdefgh", "abcdefg"):
        lines.append(f"  - &{this} [" + ",".join([f"*{before}"] * 9) + "]")
    lines.append("  - [" + ",".join(["*h"] * 9) + "]")
    return "algo: lstsq\n" + "\n".join(lines) + "\n"


@pytest.mark.parametrize("key", ["lr", "hidden", "run_dir"])
def test_a_yaml_alias_bomb_under_a_known_key_is_refused_as_it_is_parsed(tmp_path, capsys, key):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(key).replace("algo: lstsq", "algo: a3c" if key == "hidden" else "algo: lstsq"))
    with pytest.raises(ConfigError) as refusal:
        file_values(path)
    assert refusal.value.field == "config" and "aliases" in refusal.value.message
    err = refused(capsys, ["train", "--config", str(path), "--run-dir", str(tmp_path / "run")])
    assert "--config" in err and "anchors and aliases" in err and len(err) < 400
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name, text", [
    ("big.yaml", "algo: lstsq\nn: " + "9" * 5000 + "\n"),
    ("big.json", '{"algo": "lstsq", "n": ' + "9" * 5000 + "}"),
    ("deep.json", '{"algo": "lstsq", "n": ' + "[" * 20_000 + "]" * 20_000 + "}"),
    ("deep.yaml", "algo: lstsq\nn: " + "[" * 20_000 + "]" * 20_000 + "\n"),
    ("wide.yaml", "algo: lstsq\nn: [" + ",".join(["1"] * 20_000) + "]\n"),
    ("huge.yaml", "algo: lstsq\n# " + "x" * 300_000 + "\n"),
    ("binary.yaml", "algo: lstsq\nn: \udcff\n"),
])
def test_a_file_too_big_deep_or_long_is_refused_naming_it(tmp_path, capsys, name, text):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(ConfigError) as refusal:
        file_values(path)
    assert refusal.value.field == "config" and str(path) in refusal.value.message
    assert len(str(refusal.value)) < 400
    refused(capsys, ["train", "--config", str(path), "--run-dir", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("text, field", [
    ("algo: dqn\nenv: 5\n", "env"),
    ("algo: dqn\nenv: [CartPole-v1, Pong]\n", "env"),
    ("algo: lstsq\nrun_dir: {a: 1}\n", "run_dir"),
    ("algo: lstsq\nworkers: 2.5\n", "workers"),
    ("algo: lstsq\nmode: [sync]\n", "mode"),
    ("algo: dqn\npreset: [nature-dqn]\n", "preset"),
    ("algo: dqn\ntarget_update: 5\n", "target_update"),
    ("algo: a3c\nhidden: 64\n", "hidden"),
])
def test_a_value_of_the_wrong_type_is_refused_before_any_field_is_read(tmp_path, capsys, monkeypatch, text, field):
    path = tmp_path / "a.yaml"
    path.write_text(text)
    algo, values = file_values(path)
    with pytest.raises(ConfigError) as refusal:
        configs_from_values(algo, values)
    assert refusal.value.field == field
    monkeypatch.chdir(tmp_path)  # where a run given no --run-dir would write
    err = refused(capsys, ["train", "--config", str(path), "--runtime", "local"])
    assert f"{field}: must be" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml"]


def test_an_algorithm_given_as_a_list_is_refused_naming_the_file(tmp_path, capsys):
    path = tmp_path / "a.yaml"
    path.write_text("algo: [lstsq]\n")
    with pytest.raises(ConfigError, match="unknown algorithm"):
        file_values(path)
    refused(capsys, ["train", "--config", str(path)])


def test_a_runs_config_json_with_an_algorithm_list_is_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"algo": ["lstsq"], "run": {}}))
    with pytest.raises(ConfigError, match="does not describe"):
        file_values(path)


def test_integers_are_bounded_by_their_fields_range_and_shown_as_an_excerpt():
    with pytest.raises(ConfigError) as refusal:
        configs_from_values("lstsq", {"n": 10**4000})
    assert refusal.value.field == "n" and "4,001 digits" in refusal.value.message
    assert len(refusal.value.message) < 120
    for algo, name in (("dqn", "actors"), ("apex", "actors"), ("apex", "replay_shards"), ("dqn", "learners")):
        with pytest.raises(ConfigError) as refusal:
            configs_from_values(algo, {name: 100_000, **({"replay": "global"} if name == "learners" else {})})
        assert refusal.value.field == name and "<= 1024" in refusal.value.message
    with pytest.raises(ConfigError, match="hidden: must be <= 1048576"):
        configs_from_values("a3c", {"hidden": (64, 10**30)})


def test_a_huge_value_is_shown_as_a_bounded_excerpt():
    nested: list = ["x"]
    for _ in range(9):
        nested = [nested] * 9  # 9^9 leaves, a few hundred objects
    for value in (nested, "x" * 10**6, {"a": list(range(10**6))}):
        with pytest.raises(ConfigError) as refusal:
            configs_from_values("lstsq", {"lr": value})
        assert len(str(refusal.value)) < 200
    assert validate.excerpt(10**5000) == "an integer of about 5,001 digits"


def test_an_integer_flag_of_thousands_of_digits_is_refused_in_one_short_line(capsys):
    err = refused(capsys, ["train", "--algo", "lstsq", "--n", "9" * 5000])
    assert "--n" in err and "5,000 characters" in err and len(err.splitlines()[-1]) < 200
