"""T-SQL templates: identifier validation and quoting, literals, and every section rendered for
every layout and dialog strategy (no SQL Server needed)."""

from __future__ import annotations

import datetime as dt
import re
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.targets.mssql import tsql
from harness.targets.mssql.session import message_prefix
import tsql_support

MALICIOUS = [
    "x]; DROP TABLE y--",
    "x]; DROP TABLE y",
    "a'b",
    'a"b',
    "a`b",
    "",
    "x" * 129,
    "x;y",
    "x y",
    "x\ny",
    "x\x00y",
    "x--y",
    "x/*y",
    "x*/y",
    "[x]",
    "x)",
    "x,y",
    "1abc",
    "x%y",
    "x=y",
    "ｘ",   # full-width letter: not an ASCII name
]


@pytest.mark.parametrize("bad", MALICIOUS)
def test_validate_name_rejects(bad):
    with pytest.raises(ValueError):
        tsql.validate_name(bad)


@pytest.mark.parametrize("bad", [b for b in MALICIOUS if b not in ("1abc",)])
def test_validate_broker_name_rejects(bad):
    with pytest.raises(ValueError):
        tsql.validate_broker_name(bad)


@pytest.mark.parametrize("bad", MALICIOUS)
def test_quote_ident_rejects_and_render_refuses(bad):
    with pytest.raises(tsql.TemplateError):
        tsql.quote_ident(bad)
    with pytest.raises(tsql.TemplateError):
        tsql.render("DROP QUEUE [dbo].{{ident:queue}};", {"queue": bad})
    if bad != "1abc":
        with pytest.raises(tsql.TemplateError):
            tsql.render("DROP SERVICE {{sbname:service}};", {"service": bad})


@pytest.mark.parametrize("good", ["SSBReceiver", "MySSBLabTestQueue", "SRPerf_Queue_LabTest",
                                  "_x", "db-1", "x" * 128, "ssbench_peer_init1"])
def test_validate_name_accepts(good):
    assert tsql.validate_name(good) == good
    assert tsql.quote_ident(good) == f"[{good}]"


@pytest.mark.parametrize("good", ["//MySSB.com/Lab/S_Test", "//MySSB.com/Lab/M_Test",
                                  "http://example.com/svc", "svc.v2-x"])
def test_broker_names_quote(good):
    assert tsql.validate_broker_name(good) == good
    assert tsql.quote_broker_name(good) == f"[{good}]"


def test_too_long_name_message():
    with pytest.raises(ValueError, match="at most 128"):
        tsql.validate_name("q" * 129, "queue")


def test_literals():
    assert tsql.quote_literal("O'Brien") == "N'O''Brien'"
    assert tsql.quote_literal("x'; DROP TABLE y--") == "N'x''; DROP TABLE y--'"
    assert tsql.quote_literal("") == "N''"
    with pytest.raises(tsql.TemplateError):
        tsql.quote_literal("a\x00b")
    with pytest.raises(tsql.TemplateError):
        tsql.quote_literal(5)
    assert tsql.int_literal(4022) == "4022"
    for bad in (True, "5", 1.5, 2 ** 64):
        with pytest.raises(tsql.TemplateError):
            tsql.int_literal(bad)
    assert tsql.hex_literal(b"\x30\x82\xff") == "0x3082FF"
    with pytest.raises(tsql.TemplateError):
        tsql.hex_literal(b"")
    with pytest.raises(tsql.TemplateError):
        tsql.hex_literal("3082")
    g = "E7044BCF-CFFF-4526-810B-5A33EB763D0B"
    assert tsql.guid_literal(g) == "N'e7044bcf-cfff-4526-810b-5a33eb763d0b'"
    with pytest.raises(tsql.TemplateError):
        tsql.guid_literal("E7044BCF'; DROP TABLE x--")
    assert tsql.keyword("forced") == "FORCED"
    with pytest.raises(tsql.TemplateError):
        tsql.keyword("FORCED; DROP TABLE x")
    assert tsql.date_literal(dt.date(2035, 1, 2)) == "N'20350102'"
    with pytest.raises(tsql.TemplateError):
        tsql.date_literal("20350102")


def test_render_errors():
    with pytest.raises(tsql.TemplateError, match="missing"):
        tsql.render("SELECT {{int:n}}", {})
    with pytest.raises(tsql.TemplateError, match="unknown placeholder kind"):
        tsql.render("SELECT {{raw:n}}", {"n": "1"})
    with pytest.raises(tsql.TemplateError, match="malformed"):
        tsql.render("SELECT {{ int: }}", {})
    assert tsql.render("SELECT {{ int : n }}", {"n": 3, "unused": "x"}) == "SELECT 3"


def test_split_batches():
    sql = "SELECT 1;\nGO\n-- only a comment\nGO\n  go  \nSELECT 2;\nGO;\n"
    assert tsql.split_batches(sql) == ["SELECT 1;", "SELECT 2;"]


def test_parameter_markers():
    assert tsql_support.parameter_markers("SELECT ? , N'?' -- ?\n, '''?'''") == 1


def _markers_char_by_char(sql: str) -> list[int]:
    """The reference: the scanner tsql_support.marker_positions was before its regular expression."""
    out, in_str, i = [], False, 0
    while i < len(sql):
        c = sql[i]
        if in_str:
            if c == "'":
                if sql[i + 1:i + 2] == "'":
                    i += 1
                else:
                    in_str = False
        elif c == "'":
            in_str = True
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = len(sql) if j < 0 else j
            continue
        elif c == "?":
            out.append(i)
        i += 1
    return out


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="'?-\nN a", max_size=40))
def test_marker_positions_match_a_char_by_char_scan(sql):
    assert tsql_support.marker_positions(sql) == _markers_char_by_char(sql)


# --------------------------------------------------------------------------- every section

def params(layout: str, every_n: int, initiator: int = 1) -> dict:
    """What the target passes, for one layout and dialog strategy."""
    return {
        "message_type": "//MySSB.com/Lab/M_Test", "contract": "//MySSB.com/Lab/C_Test",
        "service": "//MySSB.com/Lab/S_Test", "queue": "MySSBLabTestQueue",
        "activation_procedure": "SRPerf_Queue_LabTest", "database": "SSBReceiver",
        "delayed_durability": "FORCED", "password": "Ss1!pa'ss",
        "certificate": "ssbench_dialog_init1", "subject": "ssbench dialog security init1",
        "start_date": dt.date(2025, 1, 1), "expiry_date": dt.date(2035, 1, 1),
        "user": "ssbench_peer_init1", "certificate_bytes": bytes(range(1, 200)),
        "endpoint": "ssbench_broker_endpoint", "port": 4022, "encryption": "DISABLED",
        "login": "ssbench_peer_sqlinit1", "route": "ssbench_to_target",
        "broker_instance": str(uuid.uuid4()),
        "address": "LOCAL" if layout == "single" else "TCP://sqltarget.lab.example:4022",
        "binding": "ssbench_rsb_target",
        "receive_top": 10000 if every_n == 150 else 100, "waitfor_timeout_ms": 3000,
        "max_queue_readers": 16, "initiator_readers": 16, "processing_us_per_message": 0 if every_n == 150 else 1500,
        "data_prefix": message_prefix(initiator),
        "warmup_prefix": message_prefix(initiator, warmup=True),
        "dialog_encryption": "ON", "procedure": "SRPerf_Queue_LabTest", "table": "messageDrop",
        "honor": 1, "honor_kw": "ON", "file": "SSBReceiver_log", "size_mb": 1024, "growth_mb": 256,
    }


ALL_SECTIONS = [(f.stem, s) for f in tsql_support.template_files() for s in tsql_support.sections(f.stem)]


def test_templates_exist():
    files = {f.stem for f in tsql_support.template_files()}
    assert {"server", "objects", "target", "initiator", "collectors", "teardown"} <= files
    assert len(ALL_SECTIONS) > 50


@pytest.mark.parametrize("layout", ["distributed", "single"])
@pytest.mark.parametrize("every_n", [1, 150])
@pytest.mark.parametrize("file,section", ALL_SECTIONS)
def test_every_section_renders(layout, every_n, file, section):
    p = params(layout, every_n)
    out = tsql.batches(file, section, p)
    assert out, f"{file}.{section} renders to nothing"
    text = "\n".join(out)
    assert "{{" not in text and "}}" not in text
    assert not re.search(r"^\s*GO\s*$", text, re.M | re.I)
    # every identifier placeholder came out bracket-quoted, every literal N'...'
    for kind, name in tsql_support.placeholders(file, section):
        if kind in ("ident", "sbname"):
            assert f"[{p[name]}]" in text
        elif kind == "lit":
            assert "N'" + p[name].replace("'", "''") + "'" in text
        elif kind == "int":
            assert str(p[name]) in text
    # '?' markers only where the code binds parameters
    markers = sum(tsql_support.parameter_markers(b) for b in out)
    assert markers == EXPECTED_MARKERS.get((file, section), 0), (file, section, markers)


# ODBC parameters each query binds (the target passes exactly these).
EXPECTED_MARKERS = {
    ("initiator", "call_send_retiring"): 5, ("collectors", "endpoint_states"): 1,
    ("objects", "contract_check"): 4, ("objects", "config_keep"): 3, ("objects", "dialog_certificates"): 3,
    ("initiator", "sender_user_of"): 1, ("server", "login_exists"): 1, ("collectors", "backups_between"): 3,
    ("server", "log_file"): 1,
    ("server", "database_info"): 1,
    ("server", "certificate_public"): 1, ("server", "certificate_thumbprint"): 1,
    ("objects", "config_set"): 4, ("objects", "objects_present"): 4,
    ("objects", "owned_record"): 4, ("objects", "ownership"): 5,
    ("target", "e2e_latencies"): 2, ("target", "e2e_latencies_by_priority"): 2,
    ("target", "e2e_sent_latencies"): 2,
    ("initiator", "call_create_dialogs"): 3, ("initiator", "call_send"): 2,
    ("initiator", "dialog_handle"): 1,
    ("collectors", "activated_tasks"): 1,
    ("collectors", "queue_state"): 1, ("collectors", "queue_fast"): 1,
    # the diagnosis' evidence (harness.targets.mssql.telemetry: a page's database, file, page id;
    # the window's start and end in the order the query uses them)
    ("collectors", "page_info"): 3, ("target", "procedure_time"): 9,
    ("collectors", "session_waits"): 1,    # the load's program name
}


def test_statements_drop_comment_lines():
    sql = tsql.statement("target", "e2e_latencies")
    assert "--" not in sql and sql.count("?") == 2


def test_activation_procedure_is_the_papers():
    p = params("distributed", 150)
    [proc] = tsql.batches("target", "activation_procedure", p)
    assert proc.lstrip().startswith("--") or proc.startswith("CREATE OR ALTER PROCEDURE")
    assert "CREATE OR ALTER PROCEDURE [dbo].[SRPerf_Queue_LabTest]" in proc
    assert "RECEIVE TOP (10000)" in proc and "TIMEOUT 3000;" in proc
    assert "FROM [dbo].[MySSBLabTestQueue]" in proc and "INTO @receive" in proc
    assert "CAST(r.message_body AS varbinary(2000))" in proc
    assert "INSERT INTO [dbo].[receiveTally]" in proc
    assert "BEGIN TRY" in proc and "BEGIN CATCH" in proc and "XACT_STATE()" in proc
    assert "END CONVERSATION @dh;" in proc
    assert "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog" in proc
    # the statement before WAITFOR (RECEIVE ...) ends with a semicolon, as RECEIVE requires
    before = proc[:proc.index("WAITFOR (")].rstrip().splitlines()
    code = [line for line in before if line.strip() and not line.strip().startswith("--")]
    assert code[-1].rstrip().endswith(";")
    [on] = tsql.batches("target", "activation_on", p)
    assert "MAX_QUEUE_READERS = 16" in on and "EXECUTE AS OWNER" in on
    assert "PROCEDURE_NAME = [dbo].[SRPerf_Queue_LabTest]" in on


def test_150_trick_script():
    p = params("distributed", 150)
    [proc] = tsql.batches("initiator", "create_dialogs_procedure", p)
    [begin] = tsql.batches("initiator", "begin_dialog_procedure", p)
    assert "EXEC [dbo].[ssbench_begin_dialog] @high, @dh OUTPUT;" in proc
    assert "BEGIN DIALOG @dh FROM SERVICE [//MySSB.com/Lab/S_Test]" in begin
    assert "TO SERVICE N'//MySSB.com/Lab/S_Test', @service_broker_guid" in begin
    assert "ON CONTRACT [//MySSB.com/Lab/C_Test]" in begin
    assert "WITH ENCRYPTION = ON;" in begin
    assert "IF ((@i % @every_n) = 0)" in proc
    assert "INSERT INTO [dbo].[dialogs] (k, handle, high) VALUES (@k, @dh, @high);" in proc
    # a `priority` axis: the slot's dialogs begun on the high-priority contract
    assert "ON CONTRACT [ssbench_high_priority]" in begin and "@high_permille int = 0" in proc
    # dialog security uses the certificate of the user who begins the dialog: dbo, always
    assert "WITH EXECUTE AS OWNER" in proc


def test_priority_sections():
    """CREATE BROKER PRIORITY matching the high-priority contract at level 10, and
    HONOR_BROKER_PRIORITY set per permutation (seed 003)."""
    p = params("distributed", 1)
    objs = "\n".join(tsql.batches("objects", "priority_objects", p))
    assert "CREATE CONTRACT [ssbench_high_priority] AUTHORIZATION [dbo]" in objs
    assert "([//MySSB.com/Lab/M_Test] SENT BY ANY)" in objs
    assert "ALTER SERVICE [//MySSB.com/Lab/S_Test] (ADD CONTRACT [ssbench_high_priority])" in objs
    assert re.search(r"CREATE BROKER PRIORITY \[ssbench_high\] FOR CONVERSATION\s+SET \(CONTRACT_NAME = "
                     r"\[ssbench_high_priority\],\s+LOCAL_SERVICE_NAME = ANY,\s+REMOTE_SERVICE_NAME = ANY,"
                     r"\s+PRIORITY_LEVEL = 10\);", objs)
    [honor] = tsql.batches("objects", "honor_priority", p)
    assert "ALTER DATABASE [SSBReceiver] SET HONOR_BROKER_PRIORITY ON;" in honor
    [off] = tsql.batches("objects", "honor_priority", {**p, "honor": 0, "honor_kw": "OFF"})
    assert "<> 0" in off and "SET HONOR_BROKER_PRIORITY OFF;" in off
    # the target records which messages came on high-priority dialogs, for e2e latency per priority
    [proc] = tsql.batches("target", "activation_procedure", p)
    assert "service_contract_name" in proc
    assert "CASE WHEN r.contract = N'ssbench_high_priority' THEN 1 ELSE 0 END" in proc
    tables = "\n".join(tsql.batches("target", "tables", p))
    assert "ALTER TABLE [dbo].[messageDrop] ADD high bit NOT NULL DEFAULT 0;" in tables


def test_send_procedure_header():
    [proc] = tsql.batches("initiator", "send_procedure", params("single", 1, initiator=3))
    assert "0x535342313030333B" in proc          # 'SSB1' '003' ';'
    assert "SEND ON CONVERSATION @dh MESSAGE TYPE [//MySSB.com/Lab/M_Test] (@body);" in proc
    assert "CONVERT(char(27), SYSUTCDATETIME(), 121)" in proc
    assert message_prefix(3) == b"SSB003;"[:0] + b"SSB1003;"
    assert len(message_prefix(12)) == 8
    with pytest.raises(ValueError):
        message_prefix(1000)


def test_warm_up_is_the_papers_cursor():
    [proc] = tsql.batches("initiator", "warm_up_procedure", params("single", 1))
    assert "DECLARE conv CURSOR" in proc and "sys.conversation_endpoints" in proc
    assert ";SEND ON CONVERSATION @dh MESSAGE TYPE [//MySSB.com/Lab/M_Test] (@s);" in proc
    assert "0x535342573030313B" in proc          # 'SSBW' '001' ';'


def test_injection_through_every_identifier_is_refused():
    base = params("distributed", 1)
    for file, section in ALL_SECTIONS:
        for kind, name in tsql_support.placeholders(file, section):
            if kind not in ("ident", "sbname"):
                continue
            bad = dict(base, **{name: "x]; DROP TABLE y--"})
            with pytest.raises(tsql.TemplateError):
                tsql.batches(file, section, bad)


def test_literal_values_cannot_escape():
    p = params("distributed", 1)
    p["address"] = "TCP://h:1'; DROP DATABASE x; --"
    [_, create] = tsql.batches("objects", "route", p)
    assert "ADDRESS = N'TCP://h:1''; DROP DATABASE x; --';" in create


def test_keywords_only_from_the_list():
    p = params("distributed", 1)
    p["encryption"] = "DISABLED) ; DROP ENDPOINT x --"
    with pytest.raises(tsql.TemplateError):
        tsql.batches("server", "endpoint_create", p)


def test_unknown_section():
    with pytest.raises(tsql.TemplateError, match="no section"):
        tsql.section("target", "nope")
    with pytest.raises(tsql.TemplateError, match="no template file"):
        tsql.section("nope", "x")


def test_validate_host():
    for good in ("sqltarget.lab.example", "127.0.0.1", "h", "a-b.c"):
        assert tsql.validate_host(good) == good
    for bad in ("", "a b", "h:1", "-h", "256.1.1.1", "h;x", "a'b", "x" * 300):
        with pytest.raises(ValueError):
            tsql.validate_host(bad)
