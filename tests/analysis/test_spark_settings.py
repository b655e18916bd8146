"""The local session's settings for small inputs (harness.analysis.spark): expressions
interpreted, unless SSBENCH_SPARK_CODEGEN asks for code generation; large inputs keep it."""

from __future__ import annotations

from harness.analysis import spark as S


def test_small_inputs_interpret_and_large_ones_generate_code(monkeypatch):
    monkeypatch.delenv("SSBENCH_SPARK_CODEGEN", raising=False)
    assert S.local_sql_settings(0) == S.local_sql_settings(S.SMALL_INPUT_BYTES - 1) == {
        "spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
    assert S.local_sql_settings(S.SMALL_INPUT_BYTES) == {}
    assert S.local_sql_settings(None) == {}          # unknown: as large
    monkeypatch.setenv("SSBENCH_SPARK_CODEGEN", "1")
    assert S.local_sql_settings(0) == {}
    monkeypatch.setenv("SSBENCH_SPARK_CODEGEN", "0")
    assert S.local_sql_settings(0) == S.SMALL_INPUT_SQL


def test_the_suites_session_interprets(spark):
    """The session tests/analysis share is a small-input local one (input_bytes=0)."""
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
    assert spark.range(5).selectExpr("sum(id * 2) AS s").collect()[0].s == 20
