"""The documentation, checked as code: README.md is short and every command in it parses (each
``ssbench`` command with the real parser, each ``make`` target with ``make -n``); reference pages
(README.md, docs/*.md) carry no dated measurement, findings pages (docs/findings/) each carry
their date, machine and reproduction command; and every relative link resolves, anchors
included."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from harness.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
FINDINGS = REPO / "docs" / "findings"
REFERENCE = [README, *sorted((REPO / "docs").glob("*.md"))]
PAGES = [*REFERENCE, *sorted(FINDINGS.glob("*.md")), REPO / "benchmarks" / "README.md"]
#: a date as a measurement is dated (2026-11-27); a run id (20261127-222122) is a name
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
FENCE = re.compile(r"^```(\w*)\s*$")


def fenced(text: str) -> list[tuple[str, list[str]]]:
    """The fenced blocks of a Markdown text: (language, lines)."""
    blocks, lang, lines = [], None, []
    for line in text.splitlines():
        m = FENCE.match(line)
        if m and lang is None:
            lang, lines = m.group(1), []
        elif line.startswith("```") and lang is not None:
            blocks.append((lang, lines))
            lang = None
        elif lang is not None:
            lines.append(line)
    return blocks


def prose(text: str) -> str:
    """The text outside fenced blocks."""
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
        elif not inside:
            out.append(line)
    return "\n".join(out)


def readme_commands() -> list[str]:
    """Every command the README shows: the lines of its ``sh`` blocks, the ``$ `` lines of its
    captures, and its inline code that starts with ``ssbench`` or ``make``."""
    text = README.read_text()
    cmds = []
    for lang, lines in fenced(text):
        for line in lines:
            line = line.split("  #")[0].strip()
            if lang == "sh" and line and not line.startswith("#"):
                cmds.append(line)
            elif lang == "text" and line.startswith("$ "):
                cmds.append(line[2:])
    cmds += [c for c in re.findall(r"`([^`\n]+)`", prose(text)) if re.match(r"(ssbench|make) ", c)]
    return cmds


def _argv(cmd: str) -> list[str]:
    argv = shlex.split(cmd)
    while argv and re.match(r"^[A-Z_]+=", argv[0]):      # VAR=value before the command
        argv.pop(0)
    return argv


def test_readme_is_short_and_leads_to_the_architecture():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, len(lines)
    nxt = README.read_text().split("## Where to read next", 1)[1]
    assert nxt.index("docs/architecture.md") < nxt.index("docs/findings/")


def test_every_ssbench_command_in_the_readme_parses():
    cmds = [_argv(c) for c in readme_commands()]
    ssbench = [a for a in cmds if a and a[0] == "ssbench"]
    assert len(ssbench) >= 10, ssbench
    parser = build_parser()
    for argv in ssbench:
        args = parser.parse_args(argv[1:])               # exits 2 on a flag the CLI does not take
        assert getattr(args, "func", None), argv
        words = [w for w in argv[1:3] if not w.startswith("-") and "/" not in w and "." not in w]
        with pytest.raises(SystemExit) as e:             # its subcommand's --help
            parser.parse_args([*words, "--help"])
        assert e.value.code == 0, argv


def test_every_make_target_in_the_readme_exists():
    targets = {a[1] for a in map(_argv, readme_commands()) if a and a[0] == "make" and len(a) > 1}
    assert {"bench", "test", "web", "gate"} <= targets
    for t in sorted(targets):
        out = subprocess.run(["make", "-n", t], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, (t, out.stderr)
    assert subprocess.run(["make", "-n", "no-such-target"], cwd=REPO, capture_output=True).returncode != 0


@pytest.mark.parametrize("page", REFERENCE, ids=lambda p: p.name)
def test_reference_pages_carry_no_dated_measurement(page):
    """A measured finding goes to docs/findings/ with its date; the reference page links it.
    Dates in fenced blocks (a JSON example, a terminal capture) are examples, not findings."""
    dated = [line for line in prose(page.read_text()).splitlines() if DATE.search(line)]
    assert not dated, f"{page.relative_to(REPO)} carries dated text (move it to docs/findings/): {dated[:3]}"


def test_the_date_check_catches_a_dated_narrative():
    text = "Measured on the 2-vCPU VM (2026-11-27): 6 of 6 decided.\n```json\n{\"started\": \"2026-11-21\"}\n```\n"
    assert [line for line in prose(text).splitlines() if DATE.search(line)] == [text.splitlines()[0]]
    assert not DATE.search("results/20261127-222122-bench")


FINDING_PAGES = sorted(p for p in FINDINGS.glob("*.md") if p.name != "README.md")


@pytest.mark.parametrize("page", FINDING_PAGES, ids=lambda p: p.name)
def test_every_finding_names_its_date_machine_and_reproduction_command(page):
    text = page.read_text()
    head = text.split("\n\n", 2)[1]
    assert re.search(r"^- \*\*Date:\*\* .*\b20\d\d-[01]\d-[0-3]\d", head, re.M), page.name
    assert re.search(r"^- \*\*Machine:\*\* \S", head, re.M), page.name
    repro = re.search(r"^- \*\*Reproduce\*\*.*?(?=^- \*\*Figure)", head, re.M | re.S)
    assert repro and re.search(r"`[^`]*(make |ssbench|python|pytest)[^`]*`", repro.group(0)), page.name
    for script in re.findall(r"(?<!tests/)((?:docs/findings/scripts|benchmarks)/\w+\.py)", text):
        assert (REPO / script).is_file(), f"{page.name} names {script}, which does not exist"
    assert f"]({page.name})" in (FINDINGS / "README.md").read_text(), f"findings/README.md does not list {page.name}"


def test_every_findings_script_reproduces_a_finding():
    named = "".join(p.read_text() for p in FINDING_PAGES)
    for script in sorted((FINDINGS / "scripts").glob("*.py")):
        assert f"docs/findings/scripts/{script.name}" in named, f"no findings page uses {script.name}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return s.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", prose(page.read_text()), re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page):
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose(page.read_text())):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)}: {broken}"
