"""docs/architecture.md lists every module of the package, so a module that is added or moved
without its row fails here."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_is_named_in_the_architecture_doc():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    package = ROOT / "src" / "gorila"
    modules = [p.relative_to(package).as_posix() for p in package.rglob("*.py") if p.name != "__init__.py"]
    missing = [m for m in modules if not _named(doc, m)]
    assert not missing, f"docs/architecture.md does not name {missing}"


def test_every_package_has_a_row_in_the_architecture_doc():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = [p.parent.relative_to(ROOT / "src" / "gorila").as_posix()
                for p in (ROOT / "src" / "gorila").rglob("__init__.py") if p.parent.name != "gorila"]
    missing = [p for p in packages if not _named(doc, p + "/")]
    assert not missing, f"docs/architecture.md has no row for {missing}"


def _named(doc: str, path: str) -> bool:
    """Whether the doc names ``path`` whole or by a tail of it inside its package's row
    (``bench/menger/nodes.py`` as `menger/nodes.py` or `nodes.py`)."""
    parts = path.rstrip("/").split("/")
    tails = ["/".join(parts[k:]) + ("/" if path.endswith("/") else "") for k in range(len(parts))]
    return any(f"`{tail}" in doc for tail in tails)
