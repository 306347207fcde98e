"""Every shell command of the README and of the pages under docs/ is checked, as the Python snippets
are (``test_readme.py``):

* every ``gorila train`` line is validated as the command validates it before starting anything:
  its flags parsed and its settings checked by the config dataclasses (``--resume`` and
  ``--config`` given the files they name; the README's YAML block is its ``a3c.yaml``);
* every other ``gorila`` line (``eval``, ``plot``, ``bench``, ``simulate``, ``presets``, ``info``) is
  parsed by its command's own parser and stopped there: they measure or play for minutes;
* the README's resume recipe runs, with a time limit of a few seconds appended (the last flag wins),
  on the local runtime; the run directory it writes has the files docs/run-directory.md's layout names.

A misspelt flag or setting fails it; lines of other programs (make, pip, ray) are left alone.
"""

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gorila.cli import _configs, main

pytestmark = pytest.mark.smoke

ROOT = Path(__file__).resolve().parents[2]
# architecture.md's unlabelled blocks are diagrams of the design, not commands.
DOCS = (ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "architecture.md"))
#: Programs the docs run besides gorila; a command of any other program fails the test until it is checked too.
OTHER_PROGRAMS = {"make", "pip", "ray", "jq", "tensorboard"}


def _blocks(path: Path, languages=("sh", "bash", "")) -> list[str]:
    return [body for language, body in re.findall(r"^```(\w*)\n(.*?)^```", path.read_text(), flags=re.M | re.S)
            if language in languages]


def _commands(text: str) -> list[list[str]]:
    """The commands of a shell block: continuation lines joined, comments dropped, ``;`` and ``|`` split."""
    commands: list[list[str]] = []
    for line in text.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";|")
        lexer.whitespace_split = True
        words: list[str] = []
        for token in [*lexer, ";"]:
            if token in (";", "|"):
                commands += [words] if words else []
                words = []
            else:
                words.append(token)
    return commands


def _gorila_commands() -> list[list[str]]:
    """Every gorila command of the docs as its arguments (``python -m gorila`` too)."""
    found = []
    for path in DOCS:
        for block in _blocks(path):
            for words in _commands(block):
                if words[:3] == ["python", "-m", "gorila"]:
                    words = ["gorila", *words[3:]]
                if words[0] == "gorila":
                    found.append(words[1:])
                else:
                    assert words[0] in OTHER_PROGRAMS, f"{path.name}: {shlex.join(words)} is checked by no test"
    return found


class _Parsed(Exception):
    """Raised by a command's parser once it has read the command line: nothing is run."""


def _stop_after_parsing(monkeypatch) -> None:
    parse_args = argparse.ArgumentParser.parse_args

    def parse_and_stop(self, args=None, namespace=None):
        namespace = parse_args(self, args, namespace)
        if self.prog != "gorila":  # the command's name alone is read first; its own parser comes next
            raise _Parsed(self.prog)
        return namespace

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_and_stop)


def _files_named(argv: list[str], yaml_block: str) -> None:
    """The run directories (``--resume``) and files (``--config``) a command names, made in the cwd."""
    for flag, value in zip(argv, argv[1:]):
        path = Path(value)
        if flag == "--config" and path.suffix == ".yaml" and not path.exists():
            path.write_text(yaml_block)
        elif flag in ("--resume", "--config") and not path.exists():
            run = path.parent if path.name == "config.json" else path
            algo = run.name.split("-")[0]
            run.mkdir(parents=True, exist_ok=True)
            (run / "config.json").write_text(json.dumps({"algo": algo, "run": {}, algo: {}}))


def check(argv: list[str], monkeypatch, capsys, yaml_block: str = "") -> None:
    """Validate one gorila command as described above; an AssertionError says what is wrong."""
    shown = shlex.join(["gorila", *argv])
    try:
        if argv and argv[0] == "train" and "--help" not in argv:
            _files_named(argv, yaml_block)
            _configs(argv[1:])
            return
        with monkeypatch.context() as patch:
            _stop_after_parsing(patch)
            main(argv)
    except _Parsed:
        return
    except SystemExit as stop:  # --help, --version: exit 0; a refused flag: 2
        assert stop.code == 0, f"{shown}: exit {stop.code}: {capsys.readouterr().err.strip()}"
        return
    raise AssertionError(f"{shown}: ran past its parser")


COMMANDS = _gorila_commands()


def test_the_docs_have_commands_of_every_kind():
    kinds = {argv[0] for argv in COMMANDS}
    assert {"train", "eval", "plot", "bench", "simulate", "presets", "info", "--version"} <= kinds
    assert any("--resume" in argv for argv in COMMANDS) and any("--config" in argv for argv in COMMANDS)


@pytest.mark.parametrize("argv", COMMANDS, ids=shlex.join)
def test_every_gorila_command_in_the_docs_is_valid(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    yaml_block = _blocks(ROOT / "README.md", ("yaml",))[0]
    check(argv, monkeypatch, capsys, yaml_block)


@pytest.mark.parametrize("argv", [
    ["train", "--algo", "a3c", "--envs-per-actr", "2"],                           # a misspelt flag
    ["train", "--algo", "a3c", "--workers", "0"],                                 # a value the config refuses
    ["train", "--config", "a3c.yaml"],                                            # a misspelt setting in a file
    ["bench", "sampling", "--actor", "2"],
    ["simulate", "--workers", "1,2", "--shard", "2"],
    ["eval", "runs/x", "--checkpoint", "newest"],
])
def test_the_check_refuses_what_the_command_refuses(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError, match="exit 2"):
        check(argv, monkeypatch, capsys, yaml_block="algo: a3c\nworkerz: 2\n")


@pytest.mark.heavy
def test_the_resume_recipe_runs_and_writes_the_layout_the_readme_shows(tmp_path):
    recipe = next(block for block in _blocks(ROOT / "README.md") if "--resume runs/a3c-long" in block)
    for words in _commands(recipe):
        assert words[0] == "gorila"
        result = subprocess.run([sys.executable, "-m", "gorila", *words[1:], "--time-limit-s", "3", "--quiet"],
                                cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, (words, result.stderr)
    run = tmp_path / "runs" / "a3c-long"
    layout = _blocks(ROOT / "docs" / "run-directory.md", ("text",))[0]
    names = re.findall(r"[├└]── (\S+)", layout)
    assert {"config.json", "metrics.csv", "summary.json", "checkpoints/", "best/"} <= set(names)
    for name in names:
        if name == "replay-shard0/":  # apex --checkpoint-replay only
            continue
        if name == "best/":
            assert (run / "checkpoints" / "best").is_dir() or json.loads(
                (run / "summary.json").read_text()).get("best_checkpoint") is None
        elif name.startswith("ckpt-"):
            pattern = re.sub(r"\d{6}", "[0-9]" * 6, name)
            assert list((run / "checkpoints").glob(pattern)), name
        else:
            assert list(run.glob(name.rstrip("/"))), name
