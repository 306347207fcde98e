"""The ``gorila`` command tells the truth about itself: version, commands, flags and their defaults,
and names the argument a user got wrong (in-process; ``tests/smoke`` runs the real command)."""

import argparse
import dataclasses
import json
import re

import pytest

from gorila import __version__
from gorila.agents.registry import ALGORITHMS
from gorila.bench import BENCHMARKS
from gorila.cli import COMMANDS, _train_parser, main
from gorila.cliargs import HelpFormatter, shown_default
from gorila.config import RunConfig


def _exit(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    code = exited.value.code
    assert isinstance(code, int)
    return code


def test_version(capsys):
    assert _exit(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"gorila {__version__}"


def test_an_unknown_command_is_an_invalid_choice_with_the_list(capsys):
    assert _exit(["trian"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'trian'" in err
    assert all(f"'{name}'" in err for name in ("train", "eval", "plot", "bench", "info"))


def test_gorila_help_lists_the_commands(capsys):
    assert _exit(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"\n  {name}  " in out for name in ("train", "eval", "plot", "bench", "info"))


def test_train_help_says_how_to_see_another_algorithms_flags(capsys):
    assert _exit(["train", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # unwrapped
    assert "gorila train --algo NAME --help lists another algorithm's flags (a3c, apex, impala, lstsq, ppo)" in out
    assert "--algo {a3c,apex,dqn,impala,lstsq,ppo} algorithm (default: dqn)" in out
    assert "(default: runs/<algo>-<env>-<YYYYmmdd-HHMMSS> in the current directory)" in out
    assert ("start-up (Ray, workers, evaluator) is not counted; with --resume, this many more seconds. "
            "Training ends by the limit + one chunk + 30 s: the chunks and the evaluation under way get that "
            "long") in out
    assert "fail the run, everything saved) (default: no limit)" in out
    assert "--call-timeout-s SECONDS longest wait for any worker call (default: 120 times the plan's chunk " \
           "seconds, at least 60 s)" in out
    assert "(default: None)" not in out


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_every_train_flag_shows_its_default_at_most_once(algo):
    formatter = HelpFormatter("gorila train")
    for action in _train_parser(algo)._actions:
        text = formatter._get_help_string(action) % {"default": action.default}
        assert text.count("default") <= 1, action.option_strings
        assert "None" not in text, action.option_strings


@pytest.mark.parametrize("bench, shown", [("ps", "measured round trips (default: 50)"),
                                          ("speedup", "comma-separated worker counts (default: 1,2,4,8)"),
                                          ("sampling", "random seed (default: 0)")])
def test_bench_help_shows_the_defaults(capsys, bench, shown):
    assert _exit(["bench", bench, "--help"]) == 0
    assert shown in " ".join(capsys.readouterr().out.split())


def test_eval_names_the_run_directory_the_user_gave(capsys, tmp_path):
    missing = tmp_path / "no-such-run"
    assert _exit(["eval", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gorila eval: error: RUN_DIR: {missing} is neither a run directory")
    assert "--run-dir" not in err


def test_plot_overlays_runs_and_prints_where(capsys, tmp_path):
    for mode in ("sync", "async"):
        run = tmp_path / mode
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"algo": "lstsq", "run": {"mode": mode},
                                                     "headline": "suboptimality", "step_unit": "updates"}))
        (run / "metrics.csv").write_text("step,time_s,updates,suboptimality\n10,0.1,10,1.0\n20,0.2,20,0.001\n")
    assert main(["plot", str(tmp_path / "sync"), str(tmp_path / "async"), "--out", str(tmp_path / "c.png")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert _exit(["plot", str(tmp_path / "sync"), "--metric", "reward"]) == 2
    assert "--metric" in capsys.readouterr().err


def test_quiet_and_verbose_exclude_each_other(capsys):
    assert _exit(["train", "--quiet", "--verbose"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_help_formatter_leaves_explained_and_empty_defaults_alone():
    parser = argparse.ArgumentParser(formatter_class=HelpFormatter)
    parser.add_argument("--a", default=3, help="three")
    parser.add_argument("--b", default=None, help="none")
    parser.add_argument("--c", default=2, help="two (default: the second)")
    parser.add_argument("--d", action="store_true", help="a switch")
    text = " ".join(parser.format_help().split())
    assert "three (default: 3)" in text and "none " in text and "(default: the second)" in text
    assert text.count("default") == 2


def _help(capsys, argv: list[str]) -> str:
    assert _exit([*argv, "--help"]) == 0, argv
    return capsys.readouterr().out


def _options(text: str) -> dict[str, str]:
    """A help text's options, each with its help unwrapped: ``{"--lr LR": "server learning rate ..."}``."""
    options: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        head = re.match(r"^  (-\S.*?)(?:\s{2,}(.*))?$", line)
        if head:
            name = head.group(1)
            options[name] = head.group(2) or ""
        elif name is not None and line.startswith("    "):
            options[name] += " " + line.strip()
        else:
            name = None
    return {k: v.strip() for k, v in options.items()}


HELPS = ([["train", "--algo", algo] for algo in sorted(ALGORITHMS)] + [["bench", name] for name in sorted(BENCHMARKS)]
         + [[command] for command in COMMANDS if command != "bench"])


@pytest.mark.parametrize("argv", HELPS, ids=" ".join)
def test_one_help_style_everywhere(capsys, argv):
    """Every command's help: a default shown at most once, as the flag takes it (no Python tuple),
    no reST markup from the docstrings it comes from."""
    text = _help(capsys, argv)
    options = _options(text)
    assert options, argv
    for name, help_text in options.items():
        assert help_text, f"{name} has no help"
        assert help_text.count("default") <= 1, (name, help_text)
        assert "(default: None)" not in help_text and not re.search(r"\(default: [(\[]", help_text), (name, help_text)
    assert "``" not in text and "::\n" not in text and not re.search(r":[a-z]+:`", text)


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_every_train_flag_with_a_value_shows_its_real_default(capsys, algo):
    """A field's default, or the algorithm's where it decides (the optimizer, the evaluation's ε)."""
    options = {name.split()[0].rstrip(","): text
               for name, text in _options(_help(capsys, ["train", "--algo", algo])).items()}
    decided = ALGORITHMS[algo].flag_defaults()
    for cls in [RunConfig, *ALGORITHMS[algo].config_classes()]:
        for f in dataclasses.fields(cls):
            if "help" not in f.metadata or f.name == "algo":
                continue
            default = decided.get(f.name, f.default if f.default is not dataclasses.MISSING else None)
            if default is not None:
                assert options["--" + f.name.replace("_", "-")].endswith(f"(default: {shown_default(default)})"), f.name


def test_the_defaults_the_issue_found_hidden_are_shown(capsys):
    dqn = _options(_help(capsys, ["train", "--algo", "dqn"]))
    apex = _options(_help(capsys, ["train", "--algo", "apex"]))
    a3c = _options(_help(capsys, ["train", "--algo", "a3c"]))
    assert dqn["--lr LR"].endswith("(default: 0.001)")
    assert dqn["--optimizer {sgd,momentum,adagrad,rmsprop,adam}"].endswith("(default: adam)")
    assert apex["--lr LR"].endswith("(default: 0.001)")
    assert apex["--optimizer {sgd,momentum,adagrad,rmsprop,adam}"].endswith("(default: adam)")
    assert apex["--eval-epsilon EVAL_EPSILON"].endswith("(default: 0.05)")
    assert a3c["--optimizer {sgd,momentum,adagrad,rmsprop,adam}"].endswith("(default: rmsprop)")
    assert a3c["--eval-epsilon EVAL_EPSILON"].endswith("(default: 0.0)")
    simulate = _options(_help(capsys, ["simulate"]))
    assert simulate["--mode MODE"].endswith("(default: sync,async,semi-async)")
    assert _options(_help(capsys, ["bench", "apex"]))["--address ADDRESS"] == "Ray cluster to join (default: embedded)"
