"""Every batch the SQL Server target sends, parsed by Microsoft's own T-SQL parsers.

No SQL Server exists where this project is built and tested, so the T-SQL is checked with what
Microsoft ships: ScriptDom 15.0 (TSql130/140/150 grammars) and SqlParser 15.2, both from the
``mssql-cli`` 1.0.0 wheel on PyPI, driven by the C# programs in tools/tsqlparse/ on Mono.

The batches are captured by driving MssqlTarget and MssqlSender against the recording fake
(mssql_fake.py): check, provision twice, prepare for every profile, dialogs, warm-up, sends,
every collector, describe, teardown with and without dropping databases; for both example
topologies, every reset mode and the option variants. ``?`` markers become ``@P1``... as the
ODBC driver sends them. Any parse error fails the test unless it is a documented parser gap
matched by the exact statement shape (GAPS). The figures go to the terminal summary.
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import pytest
import yaml
from mssql_fake import SENDER_CALLS, install, install_senders
import tsql_support

from harness.matrix import BrokerSettings
from harness.targets.mssql import tsql
from harness.targets.mssql.sender import MssqlSender
from harness.targets.mssql.target import MssqlTarget
from harness.targets.mssql.topology import RESET_MODES

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tools" / "tsqlparse"))
import tsqlparse  # noqa: E402

TOPOLOGIES = {"distributed": REPO / "topologies" / "example-distributed.yaml",
              "single": REPO / "topologies" / "example-single.yaml"}

#: Documented parser gaps: (parser, exact statement shape, error text). ScriptDom 15.0 rejects
#: CREATE CERTIFICATE ... FROM BINARY = 0x... (documented syntax since SQL Server 2012) even
#: in its minimal form; SqlParser 15.2 accepts it.
GAPS = [
    ("scriptdom",
     re.compile(r"CREATE CERTIFICATE \[[A-Za-z0-9_]+\]\s+AUTHORIZATION \[[A-Za-z0-9_]+\]\s+"
                r"FROM BINARY = 0x[0-9A-F]+;"),
     "Expected EXECUTABLE but encountered BINARY instead."),
]

FIGURES = pytest.StashKey[dict]()


def _variants(tmp_path: Path) -> list[Path]:
    """Both examples, every reset mode, and the options that change the T-SQL."""
    out = []
    for layout, path in TOPOLOGIES.items():
        base = yaml.safe_load(path.read_text())
        out.append(path)
        for reset in RESET_MODES:
            for opts in ({}, {"dialog_encryption": False, "endpoint_encryption": "required"},
                         {"endpoint_encryption": "supported"}):
                doc = copy.deepcopy(base)
                doc.setdefault("broker", {}).update(reset=reset, **opts)
                if opts:                  # the load's own login: its user and grants
                    doc["sender_auth"] = {"kind": "sql", "user": "ssbench_sender",
                                          "password_env": "SSBENCH_MSSQL_SENDER_PASSWORD"}
                for prof in doc.get("profiles", {}).values():
                    prof.setdefault("delayed_durability", "disabled")
                p = tmp_path / f"{layout}-{reset}-{len(out)}.yaml"
                p.write_text(yaml.safe_dump(doc))
                out.append(p)
    return out


def _drive(path: Path, fake) -> None:
    """Every operation of the target and the sender, as the CLI, the runner and the web UI
    call them."""
    t = MssqlTarget.from_file(str(path))
    t.check()
    first = t.topology.instances[t.topology.profile(None).initiators[0]]
    if t.topology.broker.reset == "cleanup":
        fake.db(first.server_key, first.database)["broker"] = False   # the DBA's: DISABLE_BROKER at teardown
    else:                                 # NEW_BROKER runs only on databases ssbench creates
        for part in (fake.dbs, fake.owned, fake.owned_tables):
            part.clear()
    t.provision()
    for db in fake.dbs.values():         # a database with the broker disabled: ENABLE_BROKER
        db["broker"] = False
    tgt = t.topology.instances[t.topology.profile(None).target]
    fake.db(tgt.server_key, tgt.database).key_by_server = 0        # restored elsewhere: a new master key
    t.provision()                        # idempotent: the second run sends its own batches
    t.check()
    for i, prof in enumerate(t.profiles()):
        n = len(t.topology.profile(prof).initiators)
        t.prepare(n, prof, BrokerSettings(max_queue_readers=16 - i, receive_top=10000,
                                          waitfor_timeout_ms=3000 if i else 50,
                                          high_priority_share=0.0 if i else 0.5,
                                          processing_us_per_message=0 if i else 1000))
        for k in range(1, n + 1):
            t.create_dialogs(k, 5, 150)
            t.warm_up(k)
            s = MssqlSender(t.sender_spec(k))
            s.send(s.dialog(1), bytes(100))
            s.send(s.dialog(2), bytes(8192))
            for ff in (False, True):      # dialog lifetime: begin, send, retire (and END)
                s.set_dialog_lifetime(2, ff)
                for _ in range(3):
                    s.send(s.dialog(1), bytes(100))
            s.close()
        t.counts()
        t.drain(0.05, poll=0.01)
        t.queue_depths()
        t.queue_depths(exact=True)
        t.wait_stats()
        t.perf_counters()
        t.activated_tasks()
        t.dialog_stats()
        t.dialog_counts()                 # every tick (the dialog collector)
        t.server_cpu_ms()
        t.log_sizes_mb()
        t.log_events(0.0, 1e9)
        t.messages_processed()
        t.e2e_latencies_us(0.0, 1e9)
        t.e2e_latencies_by_priority_us(0.0, 1e9)
        t.e2e_sent_latencies_us(0.0, 1e9)       # an alternated window (run.alternate)
        t.activated_tasks()               # the diagnosis' evidence (docs/diagnosis.md)
        t.procedure_time(0.0, 1e9)
        t.broker_waits()
        t.page_latch_waiters()
        t.session_waits()
        t.describe()
    t.teardown()
    t.teardown(drop_databases=True)
    t.close()


def _capture(monkeypatch, tmp_path) -> tuple[list[tuple[str, str]], set[tuple[str, str]]]:
    f = install(monkeypatch)
    install_senders(monkeypatch, f)
    f.created_broker_enabled = False      # ENABLE_BROKER at provision, DISABLE_BROKER at teardown
    for path in _variants(tmp_path):
        _drive(path, f)
    sent = [(SENDER_CALLS.get(w, w), tsql_support.named_markers(q)) for _, _, w, q, _ in f.log]
    sections = {tuple(w.split(".sql ")) for w, _ in sent if ".sql " in w}
    return sent, sections


def _gap(parser: str, batch: str, message: str) -> bool:
    code = "\n".join(ln for ln in batch.splitlines() if not ln.lstrip().startswith("--")).strip()
    return any(p == parser and shape.fullmatch(code) and message.endswith(text)
               for p, shape, text in GAPS)


def test_every_template_section_is_sent(monkeypatch, tmp_path):
    """A section no operation sends is dead code: it must not linger in workloads/mssql/."""
    _, used = _capture(monkeypatch, tmp_path)
    every = {(f.stem, s) for f in tsql_support.template_files() for s in tsql_support.sections(f.stem)}
    assert every - used == set(), f"template sections never sent: {sorted(every - used)}"


def test_microsoft_parsers_accept_every_batch(monkeypatch, tmp_path, request):
    try:
        tc = tsqlparse.toolchain()
    except tsqlparse.Unavailable as e:
        pytest.skip(f"Microsoft's T-SQL parsers cannot run here: {e}")
    sent, _ = _capture(monkeypatch, tmp_path)
    batches = sorted({q for _, q in sent})
    origin = {}
    for w, q in sent:
        origin.setdefault(q, w)
    figures = {"sends": len(sent), "batches": len(batches)}
    failures = []
    for which in ("scriptdom", "sqlparser"):
        version, findings = tsqlparse.parse(tc, which, batches)
        bad: dict[int, list[str]] = {}
        for f in findings:
            if not f.ok:
                bad.setdefault(f.index, []).append(f"{f.variant}: {f.message}")
        gaps = {i for i, msgs in bad.items()
                if all(_gap(which, batches[i], m.split(": ", 1)[1]) for m in msgs)}
        for i in sorted(set(bad) - gaps):
            failures.append(f"{version} rejects {origin[batches[i]]}: {bad[i][0]}\n{batches[i]}")
        variants = sorted({f.variant for f in findings})
        assert {f.index for f in findings} == set(range(len(batches)))
        figures[which] = {"version": version, "variants": variants,
                          "parsed": len(batches) - len(bad), "allowed_gaps": len(gaps),
                          "errors": len(set(bad) - gaps)}
    request.config.stash[FIGURES] = figures
    print(summary_line(figures))
    assert not failures, "\n\n".join(failures)


def summary_line(fig: dict) -> str:
    parts = [f"T-SQL parser check: {fig['batches']} distinct batches ({fig['sends']} sends)"]
    for which in ("scriptdom", "sqlparser"):
        f = fig.get(which)
        if f:
            parts.append(f"{f['version']} ({'/'.join(f['variants'])}) parsed {f['parsed']}, "
                         f"allowed gaps {f['allowed_gaps']}, errors {f['errors']}")
    return "; ".join(parts)
