"""gorila reaches Ray and CPython through their public APIs only: no module under src/ names Ray's
private package or CPython's private shared-memory module."""

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PRIVATE = re.compile(r"\bray\._private\b|\bfrom\s+ray\s+import\s+[^#\n]*\b_private\b|\b_posixshmem\b")


def test_no_module_uses_rays_private_package_or_posixshmem():
    modules = sorted(SRC.rglob("*.py"))
    assert len(modules) > 50, "the scan found no package to read"  # it must read gorila, not pass vacuously
    found = [f"{path.relative_to(SRC)}:{n}: {line.strip()}" for path in modules
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if PRIVATE.search(line)]
    assert not found, found


def test_the_scan_sees_each_private_name():
    for line in ("from ray._private import worker", "import ray._private.node as node", "from ray import _private",
                 "import _posixshmem"):
        assert PRIVATE.search(line), line
    assert not PRIVATE.search('("autoscaler/_private/monitor.py", "ray:monitor")')  # a process name, no import
