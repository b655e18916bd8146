"""Passwords never reach results: redaction of topology and connection strings."""

from harness.redact import REDACTED, redact


def test_redacts_secret_keys_and_connection_strings():
    topo = {"target": {"host": "db1", "user": "sa", "password": "S3cret!", "password_env": "MSSQL_PW"},
            "initiators": [{"conn": "DRIVER={ODBC Driver 18 for SQL Server};SERVER=x;UID=sa;PWD={p@ss;w}"},
                           {"dsn": "host=h user=u password=hunter2 dbname=d"}],
            "api_token": "abc", "notes": ["PWD=xyz;"]}
    out = redact(topo)
    text = repr(out)
    for secret in ("S3cret!", "p@ss", "hunter2", "abc", "xyz"):
        assert secret not in text
    assert out["target"]["password"] == REDACTED
    assert out["target"]["password_env"] == "MSSQL_PW"   # naming the variable is fine
    assert out["target"]["host"] == "db1"


def test_an_error_line_is_one_line_without_its_secrets():
    from harness.errors import TargetError
    from harness.redact import error_line

    e = TargetError("cannot connect: Server=db1;PWD=hunter2;\nlogin failed")
    assert error_line(e) == "TargetError: cannot connect: Server=db1;PWD=***;\\nlogin failed"
    assert error_line(KeyboardInterrupt()) == "KeyboardInterrupt"
    assert len(error_line(TargetError("x" * 2000))) < 520
