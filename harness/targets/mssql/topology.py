"""SQL Server topology files: which instances, which layout, which server profiles, which driver.

Instances (a server and a database), target and initiators, layout, driver, login (a password
only by its environment variable's name) and server profiles; docs/sqlserver.md has an example
and every key. Errors name the file, line and field (exit code 2).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ...errors import UserError
from ...matrix import MAX_INITIATORS
from ...yamlsrc import Located, Reader, load_located
from . import tsql
from .topology_reader import (NOT_ENV_NAME, check_driver_name, check_env_name, check_tds_version,
                              refuse_literal_passwords)

LAYOUTS = ("distributed", "single")
DRIVER_KINDS = ("msodbc", "freetds")
DEFAULT_DRIVER_NAMES = {"msodbc": "ODBC Driver 18 for SQL Server", "freetds": "FreeTDS"}
ENCRYPT_VALUES = ("mandatory", "optional", "strict")
FREETDS_ENCRYPTION = ("off", "request", "require")
AUTH_KINDS = ("sql", "integrated")
DURABILITY = ("disabled", "allowed", "forced")
ENDPOINT_ENCRYPTION = ("disabled", "supported", "required")
RESET_MODES = ("cleanup", "new_broker")
PROFILE_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,39}$")   # the matrix's server-axis rule
INSTANCE_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")
#: a SQL Server named instance (host: HOST\\INSTANCE): at most 16 characters, a letter, '_' or '#'
#: first, then letters, digits, '_', '$' or '#'
NAMED_INSTANCE_RE = re.compile(r"^[A-Za-z_#][A-Za-z0-9_$#]{0,15}$")

# The paper's names (its configuration script): every one may be overridden under `broker:`.
PAPER_NAMES = {
    "message_type": "//MySSB.com/Lab/M_Test",
    "contract": "//MySSB.com/Lab/C_Test",
    "service": "//MySSB.com/Lab/S_Test",
    "queue": "MySSBLabTestQueue",
    "activation_procedure": "SRPerf_Queue_LabTest",
}

#: ``client_hosts:`` is the load layer's section (Locust workers on client hosts): read and
#: checked by harness.load.hosts, not here
TOP_KEYS = {"name", "description", "layout", "driver", "auth", "sender_auth", "instances",
            "target", "initiators", "profiles", "broker", "client_hosts"}


# --------------------------------------------------------------------------- model

def _keys(cls, *but: str) -> set[str]:
    """A section's YAML keys: its dataclass's fields, ``but`` those the file does not give."""
    return {f.name for f in fields(cls)} - set(but)


def check_server(value: str, what: str = "host") -> str:
    """A host name or IPv4 address, or ``HOST\\INSTANCE`` for a named instance."""
    host, sep, named = str(value).partition("\\")
    tsql.validate_host(host, what)
    if sep and not NAMED_INSTANCE_RE.match(named):
        raise ValueError(f"{named!r} is not a SQL Server instance name (up to 16 letters, digits, "
                         "'_', '$' or '#', not starting with a digit or '$')")
    return value


def server_address(host: str, instance: str, port: int) -> str:
    """``host:port``, or ``host\\INSTANCE`` (``,port`` when given) for a named instance."""
    return host + (f"\\{instance}" + (f",{port}" if port else "") if instance else f":{port}")


def msodbc_major(driver_name: str) -> int | None:
    """17 for 'ODBC Driver 17 for SQL Server'; None for a name that does not say."""
    m = re.search(r"ODBC Driver (\d+) for SQL Server", driver_name, re.IGNORECASE)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class Auth:
    kind: str = "sql"                 # sql | integrated
    user: str | None = None
    password_env: str | None = None   # name of the environment variable holding the password

    def describe(self) -> str:
        if self.kind == "integrated":
            return "integrated (Kerberos / trusted connection)"
        return f"SQL login {self.user} (password from ${self.password_env})"


@dataclass(frozen=True)
class DriverConfig:
    kind: str = "msodbc"
    name: str = DEFAULT_DRIVER_NAMES["msodbc"]
    encrypt: str = "mandatory"                  # msodbc: Encrypt=
    trust_server_certificate: bool = False      # msodbc: TrustServerCertificate=
    host_name_in_certificate: str | None = None
    tds_version: str = "7.4"                    # freetds: TDS_Version=
    encryption: str | None = None               # freetds: Encryption=
    login_timeout_seconds: float = 15.0
    query_timeout_seconds: float = 60.0         # telemetry and sender calls
    admin_timeout_seconds: float = 3600.0       # provisioning, dialog creation, reset


@dataclass(frozen=True)
class Instance:
    """A database on a SQL Server instance, in one role (target or initiator)."""

    name: str
    host: str
    port: int
    database: str
    auth: Auth
    sender_auth: Auth
    broker_host: str
    broker_port: int = 4022
    description: str = ""
    #: a named instance (``host: HOST\\INSTANCE``): its port from SQL Browser when ``port`` is 0
    instance_name: str = ""

    @property
    def server(self) -> str:
        return server_address(self.host, self.instance_name, self.port)

    @property
    def server_key(self) -> str:
        """Identifies the SQL Server instance (several databases may share one)."""
        return self.server.lower()

    @property
    def broker_address(self) -> str:
        return f"TCP://{self.broker_host}:{self.broker_port}"

    def where(self) -> str:
        return f"{self.name} ({self.server}, database {self.database})"


@dataclass(frozen=True)
class Profile:
    """A value of the matrix's ``server`` axis: which instances, which settings. Nothing
    else: a profile is not a SQL Server build unless its instances run that build."""

    name: str
    target: str
    initiators: tuple[str, ...]
    delayed_durability: str = "disabled"
    description: str = ""

    def settings(self) -> str:
        """What the profile changes on the servers, as reports show it."""
        return f"DELAYED_DURABILITY = {self.delayed_durability.upper()}"


@dataclass(frozen=True)
class BrokerConfig:
    message_type: str = PAPER_NAMES["message_type"]
    contract: str = PAPER_NAMES["contract"]
    service: str = PAPER_NAMES["service"]
    queue: str = PAPER_NAMES["queue"]
    activation_procedure: str = PAPER_NAMES["activation_procedure"]
    dialog_encryption: bool = True          # BEGIN DIALOG ... WITH ENCRYPTION = ON (the paper)
    endpoint_name: str = "ssbench_broker_endpoint"
    endpoint_encryption: str = "disabled"   # the paper: ENCRYPTION = DISABLED
    use_existing_endpoint: bool = False     # use an endpoint ssbench did not create, as it is
    reset: str = "cleanup"                  # cleanup: END CONVERSATION WITH CLEANUP; new_broker
    create_databases: bool = True
    certificate_years: int = 10
    log_size_mb: int = 1024                 # the log of a database ssbench creates (0: model's)


@dataclass
class Topology:
    path: Path | None
    name: str
    description: str
    layout: str
    driver: DriverConfig
    instances: dict[str, Instance]
    profiles: dict[str, Profile]
    broker: BrokerConfig
    sha256: str = ""
    default_profile: str = ""

    # ------------------------------------------------------------------ queries
    def profile(self, name: str | None) -> Profile:
        if name is None:
            return self.profiles[self.default_profile]
        try:
            return self.profiles[name]
        except KeyError:
            raise UserError(f"server profile {name!r} is not in the topology (it has: "
                            f"{', '.join(self.profiles)}); add it under profiles:",
                            file=str(self.path) if self.path else None, field="profiles") from None

    def active(self, profile: str | None, initiators: int) -> tuple[Instance, list[Instance]]:
        p = self.profile(profile)
        if initiators < 1 or initiators > len(p.initiators):
            raise UserError(f"the permutation needs {initiators} initiator(s) but server profile "
                            f"{p.name!r} has {len(p.initiators)} ({', '.join(p.initiators)})",
                            file=str(self.path) if self.path else None,
                            field=f"profiles.{p.name}.initiators")
        return self.instances[p.target], [self.instances[n] for n in p.initiators[:initiators]]

    def pairs(self, max_initiators: int | None = None) -> list[tuple[Instance, Instance, int]]:
        """Every (target, initiator, 1-based index) any profile uses, up to ``max_initiators``
        initiators per profile, without duplicates."""
        seen: dict[tuple[str, str], tuple[Instance, Instance, int]] = {}
        for p in self.profiles.values():
            names = p.initiators if max_initiators is None else p.initiators[:max_initiators]
            for idx, n in enumerate(names, start=1):
                seen.setdefault((p.target, n), (self.instances[p.target], self.instances[n], idx))
        return list(seen.values())

    def used_instances(self, max_initiators: int | None = None) -> list[Instance]:
        out: dict[str, Instance] = {}
        for t, i, _ in self.pairs(max_initiators):
            out.setdefault(t.name, t)
            out.setdefault(i.name, i)
        return list(out.values())

    def role(self, inst: Instance) -> str:
        targets = {p.target for p in self.profiles.values()}
        return "target" if inst.name in targets else "initiator"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able description for run.json: no passwords (there are none: only the names
        of the environment variables that hold them)."""
        return {
            "file": str(self.path) if self.path else None, "sha256": self.sha256,
            "name": self.name, "description": self.description, "layout": self.layout,
            "driver": asdict(self.driver),
            "instances": {k: {"host": v.host, "port": v.port, "instance_name": v.instance_name or None,
                              "database": v.database,
                              "broker_address": v.broker_address if self.layout == "distributed" else None,
                              "auth": asdict(v.auth), "sender_auth": asdict(v.sender_auth)}
                          for k, v in self.instances.items()},
            "profiles": {k: {"target": v.target, "initiators": list(v.initiators),
                             "delayed_durability": v.delayed_durability,
                             "settings": v.settings(), "description": v.description}
                         for k, v in self.profiles.items()},
            "broker": asdict(self.broker),
        }


def load_topology(path: str | Path) -> Topology:
    """Load and validate a topology file; raises UserError naming file, line and field."""
    p = Path(path)
    file = str(path)
    top, sha256 = load_located(p, "topology")
    refuse_literal_passwords(top, file)
    t = _TopologyParser(Reader(file, top.line), top)
    doc = t.doc
    name = t.r.string(doc, "name", "name", p.stem)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name or ""):
        raise t.r.err("must be 1-64 letters, digits, '_', '-' or '.'", doc.get("name"), "name")
    layout = t.r.choice(doc, "layout", "layout", LAYOUTS, "distributed")
    driver = t.driver()
    instances = t.instances()
    profiles = t.profiles()
    t.check_roles(layout)
    return Topology(path=p, name=name, description=t.r.string(doc, "description", "description", "") or "",
                    layout=layout, driver=driver, instances=instances, profiles=profiles, broker=t.broker(),
                    sha256=sha256, default_profile=next(iter(profiles)))


class _TopologyParser:
    """The sections of a topology document, each read and checked by one method (UserError at
    the offending field's line)."""

    def __init__(self, r: Reader, top: Located):
        self.r = r
        self.doc = r.mapping(top, "", TOP_KEYS)
        self.instances_: dict[str, Instance] = {}
        self.profiles_: dict[str, Profile] = {}
        self.ploc: Located | None = None

    def driver(self) -> DriverConfig:
        r = self.r
        d = r.mapping(self.doc.get("driver"), "driver", _keys(DriverConfig))
        kind = r.choice(d, "kind", "driver.kind", DRIVER_KINDS, "msodbc")
        driver = DriverConfig(
            kind=kind,
            name=r.string(d, "name", "driver.name", DEFAULT_DRIVER_NAMES[kind], check=check_driver_name),
            encrypt=r.choice(d, "encrypt", "driver.encrypt", ENCRYPT_VALUES, "mandatory"),
            trust_server_certificate=r.boolean(d, "trust_server_certificate",
                                               "driver.trust_server_certificate", False),
            host_name_in_certificate=r.string(d, "host_name_in_certificate",
                                              "driver.host_name_in_certificate", None,
                                              check=tsql.validate_host),
            tds_version=r.string(d, "tds_version", "driver.tds_version", "7.4", check=check_tds_version),
            encryption=(r.choice(d, "encryption", "driver.encryption", FREETDS_ENCRYPTION, "request")
                        if "encryption" in d else None),
            login_timeout_seconds=r.number(d, "login_timeout_seconds", "driver.login_timeout_seconds",
                                           15.0, 1, 600),
            query_timeout_seconds=r.number(d, "query_timeout_seconds", "driver.query_timeout_seconds",
                                           60.0, 1, 86_400),
            admin_timeout_seconds=r.number(d, "admin_timeout_seconds", "driver.admin_timeout_seconds",
                                           3600.0, 1, 86_400),
        )
        self._check_driver(d, driver)
        return driver

    def _check_driver(self, d: dict[str, Located], driver: DriverConfig) -> None:
        r = self.r
        if driver.kind == "msodbc":
            for k in ("tds_version", "encryption"):
                if k in d:
                    raise r.err("only for driver.kind: freetds", d[k], f"driver.{k}")
            major = msodbc_major(driver.name)
            if major is not None and major < 18 and driver.encrypt == "strict":
                raise r.err(f"Encrypt=Strict needs ODBC Driver 18 or later; {driver.name} takes "
                            "encrypt: mandatory (Encrypt=yes) or optional (Encrypt=no)",
                            d.get("encrypt") or d.get("name"), "driver.encrypt")
            if driver.encrypt == "strict" and driver.trust_server_certificate:
                raise r.err("Encrypt=strict validates the server certificate: it cannot be combined "
                            "with trust_server_certificate: true", d.get("trust_server_certificate"),
                            "driver.trust_server_certificate")
        else:
            for k in ("encrypt", "trust_server_certificate", "host_name_in_certificate"):
                if k in d:
                    raise r.err("only for driver.kind: msodbc (FreeTDS takes encryption:)", d[k],
                                f"driver.{k}")

    def auth(self, loc: Located | None, fld: str, default: Auth | None) -> Auth | None:
        r = self.r
        if loc is None:
            return default
        a = r.mapping(loc, fld, _keys(Auth))
        akind = r.choice(a, "kind", f"{fld}.kind", AUTH_KINDS, "sql")
        if akind == "integrated":
            for k in ("user", "password_env"):
                if k in a:
                    raise r.err("integrated authentication takes no user or password_env", a[k],
                                f"{fld}.{k}")
            return Auth("integrated")
        user = r.string(a, "user", f"{fld}.user", required=True, parent=loc)
        if not user or any(c in user for c in "{};\0\r\n"):
            raise r.err(f"{user!r} is not a login name", a.get("user"), f"{fld}.user")
        if not isinstance(getattr(a.get("password_env"), "value", ""), (str, type(None))):
            raise r.err(NOT_ENV_NAME, a["password_env"], f"{fld}.password_env")  # never echoed
        env = r.string(a, "password_env", f"{fld}.password_env", required=True, parent=loc,
                       check=check_env_name)
        return Auth("sql", user, env)

    def instances(self) -> dict[str, Instance]:
        r, doc = self.r, self.doc
        default_auth = self.auth(doc.get("auth"), "auth", None)
        default_sender = self.auth(doc.get("sender_auth"), "sender_auth", None)
        if "instances" not in doc:
            raise r.err("missing (name the target and initiator databases under instances:)", None,
                        "instances")
        iloc = doc["instances"]
        if not isinstance(iloc.value, dict) or not iloc.value:
            raise r.err("must map instance names to {host, port, database, ...}", iloc, "instances")
        self.inst_map: dict[str, Located] = iloc.value
        instances = self.instances_
        for key, loc in self.inst_map.items():
            fld = f"instances.{key}"
            if not INSTANCE_NAME_RE.match(key):
                raise r.err("instance names are a letter then up to 31 letters, digits or '_'", loc, fld)
            m = r.mapping(loc, fld, _keys(Instance, "name", "instance_name"))
            host, _, named = r.string(m, "host", f"{fld}.host", required=True, parent=loc,
                                      check=check_server).partition("\\")
            # a named instance's port comes from SQL Browser (UDP 1434) unless given
            port = r.number(m, "port", f"{fld}.port", 0 if named else 1433, 1, 65535, integer=True)
            database = r.string(m, "database", f"{fld}.database", required=True, parent=loc,
                                check=tsql.validate_name)
            auth = self.auth(m.get("auth"), f"{fld}.auth", default_auth)
            if auth is None:
                raise r.err("no authentication: give auth: at the top level or for this instance",
                            loc, f"{fld}.auth")
            sender = self.auth(m.get("sender_auth"), f"{fld}.sender_auth", default_sender) or auth
            broker_host = r.string(m, "broker_host", f"{fld}.broker_host", host, check=tsql.validate_host)
            broker_port = r.number(m, "broker_port", f"{fld}.broker_port", 4022, 1024, 32767, integer=True)
            instances[key] = Instance(key, host, port, database, auth, sender, broker_host, broker_port,
                                      r.string(m, "description", f"{fld}.description", "") or "", named)
        seen_db: dict[tuple[str, str], str] = {}
        for inst in instances.values():
            k = (inst.server_key, inst.database.lower())
            if k in seen_db:
                raise r.err(f"database {inst.database} on {inst.server} is also instance "
                            f"{seen_db[k]}: every role needs its own database", self.inst_map[inst.name],
                            f"instances.{inst.name}.database")
            seen_db[k] = inst.name
        return instances

    def ref(self, loc: Located, fld: str) -> str:
        if not isinstance(loc.value, str) or loc.value not in self.instances_:
            raise self.r.err(f"{loc.value!r} is not one of instances: ({', '.join(self.instances_)})", loc, fld)
        return loc.value

    def ref_list(self, loc: Located, fld: str) -> tuple[str, ...]:
        r = self.r
        if not isinstance(loc.value, list) or not loc.value:
            raise r.err("must be a non-empty list of instance names", loc, fld)
        out = [self.ref(x, f"{fld}[{i}]") for i, x in enumerate(loc.value)]
        for i, n in enumerate(out):
            if out.index(n) != i:
                raise r.err(f"{n} is listed twice", loc.value[i], f"{fld}[{i}]")
        if len(out) > MAX_INITIATORS:
            raise r.err(f"at most {MAX_INITIATORS} initiators", loc, fld)
        return tuple(out)

    def profiles(self) -> dict[str, Profile]:
        r, doc, profiles = self.r, self.doc, self.profiles_
        top_target = self.ref(doc["target"], "target") if "target" in doc else None
        top_inits = self.ref_list(doc["initiators"], "initiators") if "initiators" in doc else None
        ploc = doc.get("profiles") if getattr(doc.get("profiles"), "value", None) is not None else None
        self.ploc = ploc
        if ploc is None:
            if top_target is None:
                raise r.err("missing (which instance is the target?)", None, "target")
            if top_inits is None:
                raise r.err("missing (which instances are the initiators?)", None, "initiators")
            profiles["default"] = Profile("default", top_target, top_inits)
            return profiles
        if not isinstance(ploc.value, dict) or not ploc.value:
            raise r.err("must map server profile names (the matrix's server axis) to settings", ploc,
                        "profiles")
        for pname, loc in ploc.value.items():
            fld = f"profiles.{pname}"
            if not PROFILE_NAME_RE.match(pname):
                raise r.err("a profile name is a letter then up to 39 letters, digits or '_' "
                            "(the matrix's server-axis rule)", loc, fld)
            m = r.mapping(loc, fld, _keys(Profile, "name"))
            tgt = self.ref(m["target"], f"{fld}.target") if "target" in m else top_target
            ins = self.ref_list(m["initiators"], f"{fld}.initiators") if "initiators" in m else top_inits
            if tgt is None:
                raise r.err("no target: give target: here or at the top level", loc, f"{fld}.target")
            if ins is None:
                raise r.err("no initiators: give initiators: here or at the top level", loc,
                            f"{fld}.initiators")
            profiles[pname] = Profile(pname, tgt, ins,
                                      r.choice(m, "delayed_durability", f"{fld}.delayed_durability",
                                               DURABILITY, "disabled"),
                                      r.string(m, "description", f"{fld}.description", "") or "")
        return profiles

    def check_roles(self, layout: str) -> None:
        """A database is a target or an initiator; an initiator sends to one target; the layout
        puts them on one server or on several (with one broker endpoint per server)."""
        r, ploc, instances = self.r, self.ploc, self.instances_
        targets = {p.target for p in self.profiles_.values()}
        partner: dict[str, tuple[str, str]] = {}
        for prof in self.profiles_.values():
            for i, n in enumerate(prof.initiators):
                fld = f"profiles.{prof.name}.initiators[{i}]" if ploc is not None else f"initiators[{i}]"
                where = (ploc.value[prof.name] if ploc is not None else self.doc.get("initiators"))
                if n in targets:
                    raise r.err(f"{n} is a target elsewhere: a database is either a target or an "
                                "initiator", where, fld)
                if n in partner and partner[n][0] != prof.target:
                    raise r.err(f"{n} is paired with target {partner[n][0]} in profile {partner[n][1]}: "
                                "an initiator database sends to one target (its remote service "
                                "binding names one certificate); give it another database", where, fld)
                partner[n] = (prof.target, prof.name)
                tgt, ini = instances[prof.target], instances[n]
                same = tgt.server_key == ini.server_key
                if layout == "single" and not same:
                    raise r.err(f"layout: single puts every database on one server, but {n} is on "
                                f"{ini.server_key} and target {tgt.name} on {tgt.server_key}", where, fld)
                if layout == "distributed" and same:
                    raise r.err(f"layout: distributed routes each initiator over Service Broker "
                                f"endpoints, but {n} is on the target's server {tgt.server_key}; use "
                                "layout: single for one server", where, fld)
        if layout == "distributed":
            ports: dict[str, tuple[int, str]] = {}
            for inst in instances.values():
                prev = ports.get(inst.server_key)
                if prev and prev[0] != inst.broker_port:
                    raise r.err(f"{inst.name} and {prev[1]} share server {inst.server_key} but give "
                                "different broker_port values (an instance has one Service Broker "
                                "endpoint)", self.inst_map[inst.name], f"instances.{inst.name}.broker_port")
                ports[inst.server_key] = (inst.broker_port, inst.name)

    def broker(self) -> BrokerConfig:
        r = self.r
        b = r.mapping(self.doc.get("broker"), "broker", _keys(BrokerConfig))
        names = {k: r.string(b, k, f"broker.{k}", PAPER_NAMES[k], check=check)
                 for k, check in (("message_type", tsql.validate_broker_name), ("contract", tsql.validate_broker_name),
                                  ("service", tsql.validate_broker_name), ("queue", tsql.validate_name),
                                  ("activation_procedure", tsql.validate_name))}
        broker = BrokerConfig(
            **names,
            dialog_encryption=r.boolean(b, "dialog_encryption", "broker.dialog_encryption", True),
            endpoint_name=r.string(b, "endpoint_name", "broker.endpoint_name", "ssbench_broker_endpoint",
                                   check=tsql.validate_name),
            endpoint_encryption=r.choice(b, "endpoint_encryption", "broker.endpoint_encryption",
                                         ENDPOINT_ENCRYPTION, "disabled"),
            use_existing_endpoint=r.boolean(b, "use_existing_endpoint", "broker.use_existing_endpoint",
                                            False),
            reset=r.choice(b, "reset", "broker.reset", RESET_MODES, "cleanup"),
            create_databases=r.boolean(b, "create_databases", "broker.create_databases", True),
            certificate_years=r.number(b, "certificate_years", "broker.certificate_years", 10, 1, 100,
                                       integer=True),
            log_size_mb=r.number(b, "log_size_mb", "broker.log_size_mb", 1024, 0, 1_048_576, integer=True),
        )
        if broker.queue.lower().startswith("ssbench_") or broker.activation_procedure.lower().startswith("ssbench_"):
            raise r.err("names starting with ssbench_ are reserved for ssbench's own objects",
                        b.get("queue") or b.get("activation_procedure"), "broker")
        return broker
