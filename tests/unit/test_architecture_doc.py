"""docs/architecture.md is the map: its layers table places every top-level package and module of
gorila, so one added without a place on the map fails here; what a module holds is its own
docstring's to say, so a module without one fails too."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "gorila"


def _layers_table() -> str:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## Layers", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("|"))


def test_the_layers_table_places_every_top_level_package_and_module():
    table = _layers_table()
    names = [f"{p.name}/" if p.is_dir() else p.name for p in PACKAGE.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")]
    missing = [name for name in names if f"`{name}`" not in table]
    assert not missing, f"the layers table of docs/architecture.md places no {missing}"


def test_every_module_says_what_it_holds_in_its_docstring():
    bare = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
            if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))]
    assert not bare, f"modules without a docstring: {bare}"
