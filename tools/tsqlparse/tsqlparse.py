"""Microsoft's T-SQL parsers on Mono: fetch, build and run (used by the test suite).

The parsers are the ones Microsoft ships in the ``mssql-cli`` 1.0.0 wheel on PyPI:
``Microsoft.SqlServer.TransactSql.ScriptDom.dll`` (15.0; TSql130/140/150 grammars) and
``Microsoft.SqlServer.SqlParser.dll`` (15.2). Nothing is committed: :func:`toolchain` downloads
the wheel with pip into ``~/.cache/ssbench/tsqlparse/`` (``$SSBENCH_TSQLPARSE_CACHE``
overrides), extracts the two DLLs, and compiles ScriptDomCheck.cs and SqlParserCheck.cs
(this folder) with ``mcs``; :func:`parse` runs them with ``mono``. Debian packages:
``apt-get install mono-mcs mono-runtime mono-devel``.

:class:`Unavailable` says why the parsers cannot run here (no Mono, no download) and what to
install; callers skip on it.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
WHEEL_REQ = "mssql-cli==1.0.0"
DLLS = {"scriptdom": "Microsoft.SqlServer.TransactSql.ScriptDom.dll",
        "sqlparser": "Microsoft.SqlServer.SqlParser.dll"}
PROGRAMS = {"scriptdom": "ScriptDomCheck", "sqlparser": "SqlParserCheck"}
APT = "apt-get install mono-mcs mono-runtime mono-devel"
RS = "\x1e"


class Unavailable(Exception):
    """The parsers cannot run on this machine; the message says what to install."""


@dataclass(frozen=True)
class Toolchain:
    mono: str
    exes: dict[str, Path]       # scriptdom / sqlparser -> compiled program next to its DLL


@dataclass(frozen=True)
class Finding:
    index: int                  # batch index
    variant: str                # TSql130 ... / Version130 ...
    ok: bool
    message: str = ""           # "LINE:COLUMN message" when not ok


def cache_dir() -> Path:
    env = os.environ.get("SSBENCH_TSQLPARSE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "ssbench" / "tsqlparse"


def _netstandard() -> str:
    found = sorted(glob.glob("/usr/lib/mono/4.5/Facades/netstandard.dll")
                   + glob.glob("/usr/lib/mono/*/Facades/netstandard.dll"))
    if not found:
        raise Unavailable(f"Mono's netstandard facade is missing (mono-devel): {APT}")
    return found[0]


def _fetch_dlls(cache: Path) -> dict[str, Path]:
    dlls = {k: cache / name for k, name in DLLS.items()}
    if all(p.exists() for p in dlls.values()):
        return dlls
    wheels = cache / "wheel"
    wheels.mkdir(parents=True, exist_ok=True)
    if not list(wheels.glob("mssql_cli-1.0.0-*.whl")):
        out = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                              "--only-binary", ":all:", "--platform", "manylinux1_x86_64",
                              "--python-version", "3.8", WHEEL_REQ, "-d", str(wheels)],
                             capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            tail = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise Unavailable(f"cannot download {WHEEL_REQ} from PyPI (pip download: {tail}); "
                              f"the T-SQL parsers come from that wheel")
    wheel = sorted(wheels.glob("mssql_cli-1.0.0-*.whl"))[-1]
    with zipfile.ZipFile(wheel) as z:
        names = {Path(n).name: n for n in z.namelist() if n.endswith(".dll")}
        for key, name in DLLS.items():
            if name not in names:
                raise Unavailable(f"{wheel.name} has no {name}")
            tmp = dlls[key].with_suffix(".part")
            with z.open(names[name]) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.replace(tmp, dlls[key])
    return dlls


def toolchain() -> Toolchain:
    """Download, extract and compile as needed (cached); raise :class:`Unavailable`."""
    mono, mcs = shutil.which("mono"), shutil.which("mcs")
    if not mono or not mcs:
        raise Unavailable(f"Mono is not installed (need mono and mcs): {APT}")
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    dlls = _fetch_dlls(cache)
    netstandard = _netstandard()
    exes: dict[str, Path] = {}
    for key, prog in PROGRAMS.items():
        src = HERE / f"{prog}.cs"
        digest = hashlib.sha256(src.read_bytes()).hexdigest()[:12]
        exe = cache / f"{prog}-{digest}.exe"
        if not exe.exists():
            tmp = cache / f"{prog}-{digest}.part.exe"
            out = subprocess.run([mcs, "-nologo", "-optimize+", f"-r:{dlls[key]}", f"-r:{netstandard}",
                                  str(src), f"-out:{tmp}"], capture_output=True, text=True,
                                 timeout=300)
            if out.returncode != 0:
                raise RuntimeError(f"mcs failed on {src}:\n{out.stdout}{out.stderr}")
            os.replace(tmp, exe)
        exes[key] = exe
    return Toolchain(mono, exes)


def parse(tc: Toolchain, which: str, batches: list[str]) -> tuple[str, list[Finding]]:
    """Run one parser over ``batches``: (assembly version line, findings)."""
    if any(RS in b for b in batches):
        raise ValueError("a batch contains U+001E")
    env = dict(os.environ, MONO_PATH=str(tc.exes[which].parent))
    out = subprocess.run([tc.mono, str(tc.exes[which])], input=RS.join(batches).encode("utf-8"),
                         capture_output=True, timeout=900, env=env, cwd=tc.exes[which].parent)
    if out.returncode != 0:
        raise RuntimeError(f"{which} parser failed ({out.returncode}): "
                           f"{out.stderr.decode('utf-8', 'replace')[-2000:]}")
    version = ""
    findings: list[Finding] = []
    for line in out.stdout.decode("utf-8").splitlines():
        if line.startswith("# "):
            version = line[2:].strip()
            continue
        parts = line.split("\t", 3)
        findings.append(Finding(int(parts[0]), parts[1], parts[2] == "ok",
                                parts[3] if len(parts) > 3 else ""))
    return version, findings


if __name__ == "__main__":  # python tools/tsqlparse/tsqlparse.py FILE.sql ... (one batch each)
    tc = toolchain()
    texts = [Path(p).read_text(encoding="utf-8") for p in sys.argv[1:]]
    for which in PROGRAMS:
        ver, found = parse(tc, which, texts)
        print(ver)
        for f in found:
            if not f.ok:
                print(f"  {sys.argv[1 + f.index]} {f.variant}: {f.message}")
