"""What `make` installs, and the license the package declares."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _setup_commands(tmp_path, *variables: str) -> list[str]:
    result = subprocess.run(["make", "-n", "setup", f"VENV={tmp_path / 'venv'}", *variables], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if "pip install" in line]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_torch_comes_pinned_from_pips_own_sources_unless_an_index_is_given(tmp_path):
    torch_line, package_line = _setup_commands(tmp_path)
    assert torch_line.split()[-1] == "torch==2.13.0" and "--index-url" not in torch_line
    assert "[dev,atari,box2d,video,minatar,mujoco,envpool]" in package_line
    cpu = "https://download.pytorch.org/whl/cpu"
    torch_line, _ = _setup_commands(tmp_path, f"TORCH_INDEX={cpu}")
    assert torch_line.split()[-3:] == ["--index-url", cpu, "torch==2.13.0"]


def test_the_license_file_is_the_one_pyproject_declares():
    found = re.search(r'^license = \{ text = "([^"]+)" \}$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert found is not None
    declared = found[1]
    text = (ROOT / "LICENSE").read_text()
    assert declared == "Apache-2.0"
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text


def test_gorila_never_imports_the_gpl_minatar_package_itself():
    """MinAtar (GPL-3) is an optional environment provider: its ids are registered through its own
    entry point when one is made, so no gorila module imports it."""
    sources = "\n".join(p.read_text() for p in (ROOT / "src" / "gorila").rglob("*.py"))
    assert not re.search(r"^\s*(import minatar|from minatar)", sources, re.M)
    assert 'minatar = ["minatar>=' in (ROOT / "pyproject.toml").read_text()
