"""Every measured time the README quotes is found, rounded as the README rounds it, in a docs section
that its README section links to (docs/benchmarks.md's, or another page's): a figure left behind when
its measurement changed fails, and so does a section quoting figures with no link to where they were
measured."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# "36 s", "1.5 min", "43 minutes", "9.8 k frames/s": a number and the unit of a measured time or rate
VALUE = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"  # 27,717 and 0.89, not "31,116,"
FIGURE = re.compile(rf"(?<![\w.,-])({VALUE})\s?(?:k\s)?(s|min|minutes|frames/s|steps/s|samples/s)(?!\w)")
NUMBER = re.compile(rf"(?<![\w.]){VALUE}")
LINK = re.compile(r"\]\((docs/[\w/.-]+\.md)(?:#([\w-]+))?\)")
# What the README states in seconds without measuring it: settings (evaluate every 10 s)
SETTINGS = {"10 s"}


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def doc_section(path: Path, anchor: str | None) -> str:
    """The text of ``path`` under the heading whose anchor is ``anchor`` (the whole page for none)."""
    lines = path.read_text().splitlines()
    if anchor is None:
        return "\n".join(lines)
    fenced = [line.startswith("```") for line in lines]
    in_code = [sum(fenced[:i]) % 2 == 1 for i in range(len(lines))]  # "# a comment" in a code block is no heading
    headings = [(i, len(m.group(1)), m.group(2)) for i, line in enumerate(lines)
                if not in_code[i] and (m := re.match(r"(#+) (.*)$", line))]
    for n, (start, level, title) in enumerate(headings):
        if slug(title) == anchor:
            end = next((i for i, lv, _ in headings[n + 1:] if lv <= level), len(lines))
            return "\n".join(lines[start:end])
    raise AssertionError(f"README links {path.name}#{anchor}, which has no such heading")


def sources(section: str) -> list[str]:
    """The numbers of every docs section that a README section links to."""
    numbers = []
    for page, anchor in LINK.findall(section):
        numbers += NUMBER.findall(doc_section(ROOT / page, anchor or None))
    return numbers


def figures(section: str) -> list[str]:
    """The measured figures of a README section's prose (its code blocks are commands)."""
    prose = re.sub(r"^```.*?^```", "", section, flags=re.M | re.S)
    return [m.group(0) for m in FIGURE.finditer(prose) if m.group(0) not in SETTINGS]


def found(figure: str, numbers: list[str]) -> bool:
    value = FIGURE.match(figure)
    assert value
    quoted = value.group(1).replace(",", "")
    places = len(quoted.split(".")[1]) if "." in quoted else 0
    return any(abs(round(float(n.replace(",", "")), places) - float(quoted)) < 1e-9 for n in numbers)


def test_every_time_the_readme_quotes_is_in_the_section_it_links():
    sections = re.split(r"^## ", (ROOT / "README.md").read_text(), flags=re.M)
    quoted = [(s.splitlines()[0], f, sources(s)) for s in sections for f in figures(s)]
    assert len(quoted) >= 10  # the README quotes its measurements: a broken pattern would find none
    missing = [f"{title}: {figure}" for title, figure, numbers in quoted if not found(figure, numbers)]
    assert not missing, "figures the README quotes that the docs it links do not have: " + "; ".join(missing)


def test_a_figure_not_in_the_linked_section_is_reported(tmp_path):
    numbers = ["35.6", "1,500", "93.6"]
    assert found("36 s", numbers) and found("1,500 s", numbers) and found("93.6 s", numbers)
    assert not found("37 s", numbers) and not found("35.7 s", numbers)
    assert figures("took 36 s\n```bash\ngorila train  # 99 s\n```\nand 10 s") == ["36 s"]
    assert sources("no link, 36 s") == []  # a quote with no source finds nothing
    section = sources("[x](docs/benchmarks.md#each-learner-against-its-bare-loop-gorila-bench-learner)")
    assert "27,717" in section and "31,116" in section
