"""Property-based fuzzing of the matrix and topology loaders (hypothesis).

Documents come from three sources: the grammar (the project's own matrices and topologies with
values replaced, keys dropped or added, at any depth), text mutations of those documents (YAML
syntax a hand-written file may contain by mistake or by malice: anchors, aliases, tags,
directives, brackets, control characters, stray bytes) and raw text and bytes. The only
acceptable outcomes are success or a one-line :class:`~harness.errors.UserError` (exit 2
through the CLI), each within :data:`TIME_BOUND`.
"""

from __future__ import annotations

import copy
import os
import re
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import UserError
from harness.matrix import load_matrix
from harness.load.hosts import client_hosts
from harness.targets.factory import target_class, target_config
from harness.targets.mssql.topology_reader import ENV_NAME_RE

REPO = Path(__file__).resolve().parent.parent.parent
TIME_BOUND = 2.0
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# SSBENCH_FUZZ_EXAMPLES=5000 for a longer hunt; the suite's default keeps it to seconds
EXAMPLES = int(os.environ.get("SSBENCH_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=int(TIME_BOUND * 1000), database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

MATRIX_SEEDS = [yaml.safe_load(p.read_text()) for p in sorted((REPO / "matrices").glob("*.yaml"))]
MATRIX_SEEDS.append(yaml.safe_load((REPO / "tests" / "data" / "tiny.yaml").read_text()))
TOPOLOGY_SEEDS = [yaml.safe_load(p.read_text()) for p in sorted((REPO / "topologies").glob("*.yaml"))]

# values a field may be given by mistake, plus the near misses of the real ones
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2 ** 33), 2 ** 33), st.floats(),
    st.text(max_size=12),
    st.sampled_from([0, -1, 1, 64, 65, 10_000, 10_001, 2 ** 31 - 1, 2 ** 31, 1.5, "", "durable",
                     "delayed", "nosuch", "per_thread", "trick150", "shared", "every0", "every7",
                     "interleaved", "sequential", "SSBENCH_MSSQL_PASSWORD", "1433",
                     "127.0.0.1", "a;b", "x" * 70, "sql2005", "sql2008", "msodbc", "freetds",
                     "single", "distributed", "forced", "disabled", "target", "init1"]),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=10)
keys = st.one_of(st.text(max_size=12), st.sampled_from(
    ["name", "axes", "run", "broker", "embedded_profiles", "every_n", "initiators", "threads",
     "dialogs", "payload_bytes", "server", "max_queue_readers", "receive_top", "order",
     "repetitions", "auth", "password_env", "password", "user", "instances", "profiles", "host",
     "port", "database", "driver", "kind", "layout", "target", "delayed_durability"]))


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


@st.composite
def grammar_docs(draw, seeds):
    """A real document with a few structural mutations anywhere in it."""
    doc = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(0, 4))):
        path = draw(st.sampled_from(list(_paths(doc))))
        if not path:
            continue
        parent = doc
        for p in path[:-1]:
            parent = parent[p]
        op = draw(st.sampled_from(["replace", "delete", "add", "wrap"]))
        if op == "replace":
            parent[path[-1]] = draw(values)
        elif op == "delete":
            del parent[path[-1]]
        elif op == "wrap":
            parent[path[-1]] = [parent[path[-1]]] if draw(st.booleans()) else {"x": parent[path[-1]]}
        elif isinstance(parent, dict):
            parent[draw(keys)] = draw(values)
        else:
            parent.append(draw(values))
    return doc


def render(doc, flow) -> str:
    return yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True, sort_keys=False)


TOKENS = ["&a ", "*a", "&a [*a]", "!!binary ", "!foo ", "!!python/name:os.system ", "!!int ",
          "!!float ", "!!bool ", "!!set ", "!<!x> ", "<<: ", "? ", "---\n", "...\n",
          "%TAG ! tag:x,1:\n", "%YAML 1.1\n", "[" * 60, "{" * 60, "]", "}", "\x00", "\t", "\x1b",
          "\x7f", "\x85", "\u2028", "\ufeff", "\ufffe", '"', "'", ": ", "- ", "\n  ", "\n", "#",
          "9" * 40, ".nan", ".inf", "~", "2024-13-45", "0x", "|\n", ">-\n", "\\"]


@st.composite
def mutated_text(draw, seeds):
    text = render(draw(grammar_docs(seeds)), draw(st.sampled_from([False, True, None])))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "insert", "delete", "dupline", "truncate"]))
        if op == "insert":
            text = text[:pos] + draw(st.sampled_from(TOKENS) | st.text(max_size=3)) + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 20)):]
        elif op == "dupline":
            lines = text.splitlines(keepends=True) or [""]
            i = draw(st.integers(0, len(lines) - 1))
            text = "".join(lines[:i + 1] + lines[i:])
        else:
            text = text[:pos]
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 9)) == 0:  # now and then a stray byte
        pos = draw(st.integers(0, len(data)))
        data = data[:pos] + bytes([draw(st.integers(0x80, 0xff))]) + data[pos:]
    return data


_DIR = tempfile.TemporaryDirectory(prefix="ssbench-fuzz-")


def _load_matrix(path: Path) -> None:
    embedded = target_config("embedded")
    m = load_matrix(path, embedded_profiles=embedded.alias_profiles())
    assert len(m) == len(list(m.permutations()))
    embedded.check_matrix(m)


def load_topology(path: Path):
    """A topology file as ``--target FILE`` reads it (the topology, then its client_hosts:)."""
    config = target_class("mssql").read_config(str(path))
    client_hosts(config)
    return config


def _load_topology(path: Path) -> None:
    load_topology(path)


def outcome(loader, data: bytes, tally) -> str:
    """Load ``data`` from a file: success, or one clean UserError, within the time bound."""
    path = Path(_DIR.name) / "input.yaml"
    path.write_bytes(data)
    t0 = time.monotonic()
    try:
        loader(path)
    except UserError as e:
        tally.tried()
        elapsed = time.monotonic() - t0
        msg = str(e)
        assert elapsed < TIME_BOUND, f"{elapsed:.2f}s"
        assert msg.startswith(f"{path}:") or msg.startswith(f"{path}: "), msg
        assert not CONTROL.search(msg), msg
        assert "Located" not in msg and " object at 0x" not in msg, msg
        assert len(msg) < len(str(path)) + 450, msg
        tally.clean()
        return "refused"
    elapsed = time.monotonic() - t0
    assert elapsed < TIME_BOUND, f"{elapsed:.2f}s"
    return "accepted"


@pytest.mark.parametrize("loader, seeds", [(_load_matrix, MATRIX_SEEDS), (_load_topology, TOPOLOGY_SEEDS)],
                         ids=["matrix", "topology"])
def test_grammar_mutations(loader, seeds, tally):
    @FUZZ
    @given(doc=grammar_docs(seeds), flow=st.sampled_from([False, True, None]))
    def run(doc, flow):
        outcome(loader, render(doc, flow).encode(), tally)

    run()


@pytest.mark.parametrize("loader, seeds", [(_load_matrix, MATRIX_SEEDS), (_load_topology, TOPOLOGY_SEEDS)],
                         ids=["matrix", "topology"])
def test_text_mutations(loader, seeds, tally):
    @FUZZ
    @given(data=mutated_text(seeds))
    def run(data):
        outcome(loader, data, tally)

    run()


@pytest.mark.parametrize("loader", [_load_matrix, _load_topology], ids=["matrix", "topology"])
def test_raw_text_and_bytes(loader, tally):
    @settings(FUZZ, max_examples=max(EXAMPLES * 3 // 4, 1))
    @given(data=st.binary(max_size=400) | st.text(max_size=400).map(
        lambda t: t.encode("utf-8", "surrogatepass")))
    def run(data):
        outcome(loader, data, tally)

    run()


@FUZZ
@given(secret=st.from_regex(r"[A-Za-z0-9!@#$%^&*()_+=.,;:/?-]{8,40}", fullmatch=True)
       .filter(lambda s: not ENV_NAME_RE.match(s)) | st.integers(10 ** 7, 10 ** 15),
       where=st.sampled_from(["auth", "sender_auth", "instance"]))
def test_a_password_in_password_env_is_never_echoed(secret, where, tally):
    """Someone writes the password itself where the variable's name goes: refused, and the
    message does not contain it (in any spelling)."""
    doc = copy.deepcopy(TOPOLOGY_SEEDS[0])
    auth = {"kind": "sql", "user": "ssbench", "password_env": secret}
    if where == "instance":
        next(iter(doc["instances"].values()))["auth"] = auth
    else:
        doc[where] = auth
    path = Path(_DIR.name) / "input.yaml"
    path.write_text(render(doc, False))
    tally.tried()
    with pytest.raises(UserError) as e:
        load_topology(path)
    msg = str(e.value)
    assert "password_env" in msg
    for spelling in {str(secret), repr(secret), yaml.safe_dump(secret).split("\n")[0]}:
        assert spelling not in msg, msg
    tally.clean()


def test_the_seeds_load():
    """The fuzzers start from valid documents (so mutations test the validators, not only the
    parser)."""
    for doc in MATRIX_SEEDS:
        p = Path(_DIR.name) / "seed.yaml"
        p.write_text(render(doc, False))
        _load_matrix(p)
    for doc in TOPOLOGY_SEEDS:
        p = Path(_DIR.name) / "seed.yaml"
        p.write_text(render(doc, False))
        _load_topology(p)
