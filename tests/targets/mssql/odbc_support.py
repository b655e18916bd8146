"""Skipping tests that need the ODBC stack, with the reason and the install command.

``pytest.importorskip`` skips only on ModuleNotFoundError (pytest 9): pyodbc installed from its
wheel but without unixODBC raises ``ImportError: libodbc.so.2: cannot open shared object
file``, which would fail collection. :func:`require_pyodbc` skips on either.
"""

from __future__ import annotations

import pytest

UNIXODBC = "apt-get install unixodbc"


def pyodbc_or_reason():
    """(pyodbc, None), or (None, why it cannot be used and what to install)."""
    try:
        import pyodbc  # noqa: PLC0415
    except ModuleNotFoundError as e:
        return None, f"pyodbc is not installed ({e}): pip install pyodbc, and {UNIXODBC}"
    except ImportError as e:
        return None, f"pyodbc cannot load the ODBC driver manager ({e}): {UNIXODBC}"
    return pyodbc, None


def require_pyodbc(module_level: bool = False):
    """pyodbc, or skip the test (or the whole module) saying what to install."""
    pyodbc, why = pyodbc_or_reason()
    if pyodbc is None:
        pytest.skip(why, allow_module_level=module_level)
    return pyodbc


def require_odbc_driver(name: str, package: str, module_level: bool = False):
    """pyodbc with ``name`` registered in unixODBC, or skip naming the Debian package."""
    pyodbc = require_pyodbc(module_level)
    if name not in pyodbc.drivers():
        pytest.skip(f"the ODBC driver {name!r} is not registered with unixODBC: "
                    f"apt-get install {package}", allow_module_level=module_level)
    return pyodbc
