"""Where the Locust workers run: the defaults of a swarm's workers, declared once, and the
``client_hosts:`` section of a target's configuration file (a SQL Server topology file):
Locust workers on client hosts of their own, declared next to the servers they load (the SQLCAT
paper drove each initiator from its own client machine). A file with this section makes
``ssbench run``, ``bench`` and ``saturate`` wait for ``ssbench worker`` on the client hosts, as
``--remote-workers`` does; the command line's flags override its values (docs/scale-out.md)::

    client_hosts:
      master_bind: 0.0.0.0:5557      # where the master listens (default 0.0.0.0:5557)
      worker_wait_seconds: 120       # how long each repetition waits for every worker
      workers_per_initiator: 1       # optional: else the matrix's run.workers_per_initiator
      hosts:                         # optional: which client host drives which initiator
        client1: {initiators: [init1]}
        client2: {initiators: [init2]}

The section is the load layer's: the target reads the rest of its file and says which
initiator names the section may use (:attr:`harness.targets.base.TargetConfig.initiator_names`).
Every error names the file, the line and the field (exit code 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # (the defaults above are read at the CLI's start-up: no YAML import then)
    from ..targets.base import TargetConfig
    from ..yamlsrc import Located, Reader

#: where a master for remote workers listens, and the port ``ssbench worker --master HOST``
#: and ``ssbench web``'s workers connect to, unless told otherwise
MASTER_HOST = "0.0.0.0"
MASTER_PORT = 5557
#: how long each repetition's master waits for every remote worker
WORKER_WAIT_SECONDS = 120.0
#: workers per initiator come from the matrix (run.workers_per_initiator, harness.matrix), a
#: flag or this section; the section has no default of its own

CLIENT_HOSTS_KEYS = {"master_bind", "worker_wait_seconds", "workers_per_initiator", "hosts"}
HOST_KEYS = {"initiators", "description"}
HOST_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class ClientHosts:
    bind_host: str = MASTER_HOST
    port: int = MASTER_PORT
    worker_wait_seconds: float = WORKER_WAIT_SECONDS
    workers_per_initiator: int | None = None
    #: client host name -> the initiator instances it drives (informational: the operator starts
    #: ``ssbench worker --initiator K`` there; printed when the run waits for its workers)
    hosts: dict[str, tuple[str, ...]] = field(default_factory=dict)


def parse_bind(value: str) -> tuple[str, int]:
    """``HOST``, ``HOST:PORT`` or ``[V6]:PORT``; ValueError with a one-line reason otherwise."""
    host, port = value.strip(), str(MASTER_PORT)
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            raise ValueError(f"{value!r}: unclosed '['")
        rest, host = host[end + 1:], host[1:end]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"{value!r}: expected [HOST]:PORT")
            port = rest[1:]
    elif host.count(":") == 1:
        host, port = host.split(":")
    if not port.isdigit() or not host or not 1 <= int(port) <= 65535:
        raise ValueError(f"{value!r}: expected HOST or HOST:PORT with a port in 1..65535")
    return host, int(port)


def client_hosts(config: TargetConfig) -> ClientHosts | None:
    """The ``client_hosts:`` section of the target's configuration file (None: the target has
    no file, or the file no section)."""
    from ..yamlsrc import Reader, load_located

    if config.file is None:
        return None
    top, _ = load_located(config.file, "topology")
    return read_client_hosts(Reader(str(config.file), top.line), top.value.get("client_hosts"),
                             set(config.initiator_names))


def read_client_hosts(r: Reader, loc: Located | None, initiators: set[str]) -> ClientHosts | None:
    """The section at ``loc`` (None: absent), its hosts checked against the initiator names
    ``initiators``."""
    if loc is None or loc.value is None:
        return None
    m = r.mapping(loc, "client_hosts", CLIENT_HOSTS_KEYS)
    bind = (MASTER_HOST, MASTER_PORT)
    if "master_bind" in m:
        text = r.string(m, "master_bind", "client_hosts.master_bind")
        try:
            bind = parse_bind(text or "")
        except ValueError as e:
            raise r.err(str(e), m["master_bind"], "client_hosts.master_bind") from None
    wait = r.number(m, "worker_wait_seconds", "client_hosts.worker_wait_seconds", WORKER_WAIT_SECONDS, 1, 86_400)
    wpi = r.number(m, "workers_per_initiator", "client_hosts.workers_per_initiator", None, 1, 64, integer=True)
    return ClientHosts(bind_host=bind[0], port=bind[1], worker_wait_seconds=wait,
                       workers_per_initiator=wpi, hosts=_hosts(r, m.get("hosts"), initiators))


def _hosts(r: Reader, hloc: Located | None, initiators: set[str]) -> dict[str, tuple[str, ...]]:
    hosts: dict[str, tuple[str, ...]] = {}
    if hloc is None or hloc.value is None:
        return hosts
    if not isinstance(hloc.value, dict) or not hloc.value:
        raise r.err("must map client host names to {initiators: [...]}", hloc, "client_hosts.hosts")
    owner: dict[str, str] = {}
    for name, hl in hloc.value.items():
        fld = f"client_hosts.hosts.{name}"
        if not isinstance(name, str) or not HOST_NAME_RE.match(name):
            raise r.err("a client host name is 1-64 letters, digits, '_', '-' or '.'", hl, fld)
        h = r.mapping(hl, fld, HOST_KEYS)
        il = h.get("initiators")
        if il is None or not isinstance(il.value, list) or not il.value:
            raise r.err("must be a non-empty list of initiator instance names", il or hl, f"{fld}.initiators")
        names = []
        for i, x in enumerate(il.value):
            f = f"{fld}.initiators[{i}]"
            if not isinstance(x.value, str) or x.value not in initiators:
                raise r.err(f"{x.value!r} is not an initiator of this topology "
                            f"({', '.join(sorted(initiators))})", x, f)
            if x.value in owner:
                raise r.err(f"{x.value} is driven by client host {owner[x.value]} already", x, f)
            owner[x.value] = name
            names.append(x.value)
        hosts[name] = tuple(names)
    return hosts
