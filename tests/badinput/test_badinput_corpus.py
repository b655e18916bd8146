"""The bad-input corpus: every malformed matrix or topology is refused with one
``file:line: field: message`` line (harness.errors.UserError, exit 2 through the CLI), fast,
without echoing a password.

Two sources, both meant to grow:

- ``corpus/*.yaml``: hand-readable files. The first line is ``# expect: <text the message
  contains>``; the line the message must name carries the comment ``#<`` (a file without it
  expects no line; ``# line: N`` on the second line names one no comment can mark, such as the
  end of the file). ``matrix-*`` files go through the matrix loader, ``matrix_embedded-*`` also
  through the server-axis check against the embedded target, ``topology-*`` through what
  ``--target FILE`` reads: the SQL Server target's topology, and the load layer's
  ``client_hosts:`` section (harness.load.hosts).
- :data:`GENERATED`: inputs a text file cannot hold (NUL and other control characters,
  non-UTF-8 bytes, files over the size bound, documents deeper or larger than the bounds).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.matrix import load_matrix
from harness.load.hosts import client_hosts
from harness.targets.factory import target_class, target_config
from harness.yamlsrc import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CORPUS = sorted((HERE / "corpus").glob("*.yaml"))
TIME_BOUND = 2.0  # seconds per input (the loaders take milliseconds)
SECRETS = ("S3cr3t", "83291746")  # the corpus's passwords: never in a message
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")

GOOD = (
    "name: t\n"
    "axes:\n"
    "  initiators: [1, 2]\n"
    "  threads: [1, 5]\n"
    "  dialogs: [per_thread, trick150]\n"
    "  payload_bytes: [100, 8192]\n"
    "  server: [durable]\n"
)


def load_topology(path: Path):
    """A topology file as ``--target FILE`` reads it: the SQL Server target's topology, then
    the load layer's ``client_hosts:`` section."""
    config = target_class("mssql").read_config(str(path))
    client_hosts(config)
    return config


def load(kind: str, path: Path):
    if kind == "topology":
        return load_topology(path)
    embedded = target_config("embedded")
    m = load_matrix(path, embedded_profiles=embedded.alias_profiles())
    if kind == "matrix_embedded":
        embedded.check_matrix(m)
    return m


def check_refused(kind: str, path: Path, line: int | None, expect: str, tally) -> str:
    """Load ``path``: it must raise one clean UserError within the time bound."""
    tally.tried()
    t0 = time.monotonic()
    with pytest.raises(UserError) as e:
        load(kind, path)
    elapsed = time.monotonic() - t0
    msg = str(e.value)
    assert elapsed < TIME_BOUND, f"{elapsed:.2f}s"
    assert not CONTROL.search(msg), msg  # one line, nothing raw for a terminal
    assert "Located" not in msg and " object at 0x" not in msg, msg
    assert len(msg) < len(str(path)) + 450, msg
    prefix = f"{path}:{line}: " if line else f"{path}: "
    assert msg.startswith(prefix), f"{msg!r} does not start with {prefix!r}"
    if line is None:
        assert not re.match(re.escape(str(path)) + r":\d+:", msg), msg
    assert expect in msg, f"{expect!r} not in {msg!r}"
    for secret in SECRETS:
        assert secret not in msg, msg
    tally.clean()
    return msg


def corpus_case(path: Path) -> tuple[str, int | None, str]:
    text = path.read_text(encoding="utf-8")
    first, _, _ = text.partition("\n")
    assert first.startswith("# expect: "), f"{path.name}: the first line must be '# expect: ...'"
    lines = [i for i, ln in enumerate(text.splitlines(), start=1) if ln.rstrip().endswith("#<")]
    assert len(lines) <= 1, f"{path.name}: more than one '#<' line"
    given = re.match(r"# line: (\d+)\n", text.partition("\n")[2])
    if given:
        lines = [int(given.group(1))]
    return first[len("# expect: "):], (lines[0] if lines else None), path.name.split("-", 1)[0]


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_file_is_refused_cleanly(path, tally):
    expect, line, kind = corpus_case(path)
    assert kind in ("matrix", "matrix_embedded", "topology"), path.name
    check_refused(kind, path, line, expect, tally)


def _deep_block(levels: int) -> bytes:
    return "".join(" " * i + f"k{i}:\n" for i in range(levels)).encode() + b" " * levels + b"1\n"


# id -> (kind, content, line, expected text)
GENERATED: dict[str, tuple[str, bytes, int | None, str]] = {
    "nul": ("matrix", GOOD.replace("[1, 5]", "[1, 5]\x00").encode(), 4, "control character U+0000"),
    "soh": ("matrix", GOOD.replace("trick150", "tri\x01ck").encode(), 5, "control character U+0001"),
    "escape": ("matrix", ("description: \x1b[31mred\n" + GOOD).encode(), 1, "U+001B"),
    "delete": ("matrix", (GOOD + "x: a\x7f\n").encode(), 8, "U+007F"),
    "c1-csi": ("matrix", (GOOD + "x: a\x9b2J\n").encode(), 8, "U+009B"),
    "form-feed": ("matrix", GOOD.replace("name: t", "name: t\x0c").encode(), 1, "U+000C"),
    "noncharacter": ("matrix", (GOOD + "x: \ufffe\n").encode(), 8, "U+FFFE"),
    "cr-line-ends-nul": ("matrix", GOOD.replace("\n", "\r").replace("[1, 5]", "[\x00]").encode(), 4,
                         "U+0000"),
    "nul-topology": ("topology", b"name: t\nlayout: \x00single\n", 2, "U+0000"),
    "latin-1": ("matrix", GOOD.replace("name: t", "name: t\ndescription: caf\xe9").encode("latin-1"),
                2, "not UTF-8"),
    "utf-16": ("matrix", GOOD.encode("utf-16"), 1, "not UTF-8"),
    "surrogate-bytes": ("matrix", GOOD.encode() + b"x: \xed\xa0\x80\n", 8, "not UTF-8"),
    "only-bom": ("matrix", "\ufeff".encode(), None, "empty matrix file"),
    "zero-bytes": ("matrix", b"", None, "empty matrix file"),
    "whitespace": ("topology", b"  \n\n# nothing\n", None, "empty topology file"),
    "over-size-bound": ("matrix", GOOD.encode() + b"#" * MAX_FILE_BYTES, None,
                        f"larger than {MAX_FILE_BYTES} bytes"),
    "over-size-topology": ("topology", b"a: " + b"x" * (MAX_FILE_BYTES + 1), None, "larger than"),
    "too-many-values": ("matrix", GOOD.encode() + b"x: [" + b"1," * MAX_NODES + b"1]\n", 8,
                        f"more than {MAX_NODES} values"),
    "deep-block": ("matrix", _deep_block(3 * MAX_DEPTH), MAX_DEPTH + 1, f"nested more than {MAX_DEPTH}"),
    "deep-flow-topology": ("topology", b"x: " + b"[" * 100_000 + b"]" * 100_000, 1, "nested more than"),
    "long-key": ("matrix", GOOD.encode() + b"k" * 1000 + b": 1\n", 8, "unknown key"),
    "over-long-simple-key": ("matrix", GOOD.encode() + b"k" * 100_000 + b": 1\n", 8, "invalid YAML"),
    "long-value": ("matrix", GOOD.replace("[1, 5]", "[" + "x" * 100_000 + "]").encode(), 4,
                   "must be an integer, got str"),
    "long-list-topology": ("topology", b"name: t\nlayout: [" + b"x, " * 5000 + b"x]\n", 2,
                           "must be a string, got list ['x', 'x'"),
    "nested-laughs-in-flow": ("matrix", GOOD.encode() + b"x: [&a [1], *a, *a]\n", 8, "anchors"),
}


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_input_is_refused_cleanly(name, tmp_path, tally):
    kind, data, line, expect = GENERATED[name]
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(data)
    check_refused(kind, path, line, expect, tally)


@pytest.mark.parametrize("kind", ["matrix", "topology"])
def test_missing_file_and_directory_are_refused(kind, tmp_path, tally):
    check_refused(kind, tmp_path / "nope.yaml", None, "no such file", tally)
    check_refused(kind, tmp_path, None, "cannot read", tally)


def test_payload_limit_is_varbinary_max(tmp_path):
    """2^31 - 1 bytes is the largest varbinary(max): accepted; one more is refused (corpus)."""
    p = tmp_path / "m.yaml"
    p.write_text(GOOD.replace("[100, 8192]", "[2147483647]"))
    assert load_matrix(p).axes["payload_bytes"] == [2147483647]


def test_the_hardened_loader_still_reads_the_projects_files():
    """Every matrix and topology the project ships still loads, and bench.yaml's servers resolve
    on both example topologies (the bounds refuse nothing a hand-written file needs)."""
    for path in sorted((REPO / "matrices").glob("*.yaml")):
        load("matrix_embedded", path)
    for path in sorted((REPO / "topologies").glob("*.yaml")):
        load_topology(path).check_matrix(load_matrix(REPO / "matrices" / "bench.yaml"))


def test_core_tags_and_quoting_are_still_allowed(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text(GOOD.replace("name: t", "name: !!str t\ndescription: !<tag:yaml.org,2002:str> 2024-01-01")
                 .replace("[1, 5]", "[!!int 1, 0x05]"))
    m = load_matrix(p)
    assert m.name == "t" and m.description == "2024-01-01" and m.axes["threads"] == [1, 5]
