"""The Python snippets of the README and then of docs/python.md run as written, in order, as a reader
would paste them (docs/python.md goes on from the README's first example)."""

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.smoke

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", ROOT / "docs" / "python.md")


def _snippets() -> list[tuple[Path, str]]:
    return [(page, snippet) for page in PAGES
            for snippet in re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.M | re.S)]


def test_the_readme_has_python_snippets_that_train_evaluate_and_load():
    code = "\n".join(snippet for _, snippet in _snippets())
    assert all(call in code for call in ("gorila.train(", "gorila.evaluate(", "gorila.load_policy(",
                                         "safetensors.torch.load_file(", "ParameterShard("))


def test_the_readme_python_snippets_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the runs they start land here
    namespace: dict = {}
    for page, snippet in _snippets():
        exec(compile(snippet, str(page), "exec"), namespace)
    summary = namespace["summary"]
    assert summary["stop_reason"] in ("target", "time_limit") and (tmp_path / summary["run_dir"]).is_dir()
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"{summary['stop_reason']} ")
    assert "counted False 0" in out  # the ParameterShard snippet's printed outcome
