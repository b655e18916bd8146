"""The SQL Server target: the SQLCAT whitepaper's Service Broker topology, driven through pyodbc.

:class:`MssqlTarget` is the run-time flow (prepare, dialogs, warm-up, accounting, draining) over
templates from ``workloads/mssql/``; :mod:`.session`, :mod:`.provision`, :mod:`.telemetry` and
:mod:`.check` hold the rest. ``sent`` and ``received`` are exact counts kept by the procedures
(docs/sqlserver.md, "Accounting"); :meth:`MssqlTarget.close` puts changed options back.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ...errors import FULL_DISK, TargetError, UserError, full_disk
from ...matrix import BrokerSettings, high_priority_permille
from ..base import Capabilities, Counts, InitiatorCounts, Target, TargetConfig, wait_until
from . import check as _check, db_options, driver, exclusive, provision as _provision
from .session import EPOCH, ServerSession, as_datetime
from .telemetry import MssqlTelemetry
from .topology import Instance, Topology, load_topology

log = logging.getLogger(__name__)

#: "Invalid object name" and "Could not find stored procedure": the topology is not (or not
#: fully) provisioned by this version of ssbench
MISSING_OBJECT_ERRORS = (208, 2812)


def _phantoms(c: InitiatorCounts, gaps: int) -> int:
    """Messages the target holds that were never sent, as far as SQL Server's tally tells: it has
    no sequence number sent per dialog, so the more received than sent (a phantom for certain),
    or the gaps inside the dialogs' received sequences (target.sql gaps_by_initiator) that the
    totals do not explain: each was sent and is found nowhere, so as many messages held stand in
    for none sent. With them, ``lost`` counts the gaps even when the totals match."""
    return max(0, gaps - (c.sent - c.received - c.poison - c.in_flight))


class MssqlTarget(ServerSession, MssqlTelemetry, Target):
    """A topology of real SQL Server databases (see :mod:`harness.targets.mssql.topology`)."""

    kind = "mssql"
    capabilities = Capabilities(priority=True, backlog=True, dialog_lifetime=True, alternate=True)
    option = "a topology YAML file"
    opens_files = True

    def __init__(self, topology: Topology):
        ServerSession.__init__(self, topology)
        self.label = "SQL Server"
        self._baseline: dict[int, tuple[int, int, int]] = {}

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_file(cls, path: str) -> "MssqlTarget":
        return cls(load_topology(path))

    @classmethod
    def read_config(cls, arg: str | None) -> TargetConfig:
        """Load and check the topology file ``arg`` (nothing connects)."""
        if not arg:
            raise UserError("the mssql target needs a topology file: --target mssql:FILE, or the file alone",
                            field="--target")
        topo = load_topology(arg)
        return TargetConfig(name=cls.kind, profiles=tuple(topo.profiles), capabilities=cls.capabilities,
                            file=Path(arg), detail=topo,
                            initiator_names=tuple(dict.fromkeys(n for p in topo.profiles.values() for n in p.initiators)))

    @classmethod
    def from_config(cls, config: TargetConfig) -> "MssqlTarget":
        return cls(config.detail)

    # ------------------------------------------------------------------ provenance
    def describe(self) -> dict[str, Any]:
        target, inits = self._active()
        for inst in self._servers([target, *inits]).values():
            if inst.server_key not in self._versions:
                self._server_info(inst)
        label = self._make_label(with_profile=False)
        if self.label == "SQL Server":          # before the first prepare
            self.label = label
        prof = self.topology.profile(self._profile)
        return {
            **self.declared(), "label": label, "notes": self.notes(),
            "versions": {self._server_label(k): v for k, v in self._versions.items()},
            "layout": self.topology.layout, "profile": self._profile,
            "profile_settings": prof.settings(), "profile_description": prof.description,
            "profiles": {p.name: {"settings": p.settings(), "description": p.description,
                                  "target": p.target, "initiators": list(p.initiators),
                                  "label": f"profile {p.name} ({p.settings()})"}
                         for p in self.topology.profiles.values()},
            "initiators": [i.name for i in inits], "target_instance": target.name,
            "topology": self.topology.to_dict(),
            "settings": {"reset": self.topology.broker.reset,
                         "dialog_encryption": self.topology.broker.dialog_encryption,
                         "endpoint_encryption": self.topology.broker.endpoint_encryption,
                         "queue_monitor_interval_seconds": 5,
                         "broker": {"max_queue_readers": self._broker.max_queue_readers,
                                    "receive_top": self._broker.receive_top,
                                    "waitfor_timeout_ms": self._broker.waitfor_timeout_ms,
                                    "high_priority_share": self._broker.high_priority_share}},
            "clock_offsets_ms": {self._server_label(k): round(v * 1000, 3)
                                 for k, v in self._offsets_s.items()},
            "databases": self._databases([target, *inits]),
        }

    def _databases(self, insts: list[Instance]) -> dict[str, dict[str, Any]]:
        """Each database's recovery model, log size and whether ssbench created it (run.json):
        a DBA's log backups and a FULL log that grows are part of what a run measured."""
        out: dict[str, dict[str, Any]] = {}
        for inst in insts:
            info = self._database_info(inst)
            log_file = self._query(inst, "server", "log_file", [inst.database], database="master", purpose="admin")
            out[inst.name] = {"recovery_model": info[8] if info and len(info) > 8 else None,
                              "log_mb": int(log_file[0][1]) if log_file else None,
                              "created_by_ssbench": exclusive.created(self, inst) if info else None}
        return out

    def profiles(self) -> list[str]:
        return list(self.topology.profiles)

    def _make_label(self, with_profile: bool = True) -> str:
        """What the active permutation runs on, exactly: the build, the profile's name and
        settings, the layout, the dialog security. E.g. "SQL Server 16.0.4135.4, profile delayed
        (DELAYED_DURABILITY = FORCED), distributed, dialog security: full (encrypted)". Without
        the profile for the run as a whole (run.json: a run may use several profiles; each is in
        ``profiles``). :meth:`notes` says the same in sentences."""
        target, _ = self._active()
        version = self._versions.get(target.server_key) or self._server_info(target)[0]
        prof = self.topology.profile(self._profile)
        single = self.topology.layout == "single"
        layout = ("single instance (no transmission queue; SENDs cross databases: fully durable; "
                  "priority orders RECEIVE only)" if single else "distributed")
        if not self.topology.broker.dialog_encryption:
            security = "dialog security: none (ENCRYPTION = OFF, no remote service binding)"
        else:
            security = ("dialog security: full (never encrypted within one instance)" if single
                        else "dialog security: full (encrypted)")
        if not with_profile:
            return f"SQL Server {version}, {layout}, {security}"
        return f"SQL Server {version}, profile {prof.name} ({prof.settings()}), {layout}, {security}"

    def notes(self) -> list[str]:
        """Caveats every report of a run on this topology must carry (run.json target.notes)."""
        out = []
        if self.topology.layout == "single":
            out += ["single-instance layout: a SEND to a service in the same SQL Server "
                    "instance is put straight into the target queue, bypassing the "
                    "transmission queue and the Service Broker endpoints, so the paper's "
                    "initiator-side bottleneck (transmission queue, endpoint transport) "
                    "cannot appear in these results",
                    "single-instance layout: each SEND's transaction writes to two databases "
                    "(the initiator's and the target queue's), and a cross-database transaction "
                    "is fully durable whatever DELAYED_DURABILITY says (Control Transaction "
                    "Durability): a profile's delayed durability applies to the target's "
                    "RECEIVE transactions only",
                    "single-instance layout: broker priorities are not used when messages pass "
                    "between services of one instance (CREATE BROKER PRIORITY): a priority axis "
                    "orders only RECEIVE (which takes higher-priority conversations first)"]
        if not self.topology.broker.dialog_encryption:
            out.append("broker.dialog_encryption: false: no dialog security (BEGIN DIALOG ... WITH "
                       "ENCRYPTION = OFF and no remote service binding, which would encrypt "
                       "anyway); the paper measured full dialog security")
        return out

    # ------------------------------------------------------------------ permutations
    def prepare(self, initiators: int, profile: str, broker: BrokerSettings) -> None:
        try:
            self._prepare(initiators, profile, broker)
        except driver.QueryError as e:
            if e.native not in MISSING_OBJECT_ERRORS:
                raise
            raise TargetError(f"{e}. Is the topology provisioned (with this version of ssbench)? "
                              f"Run: ssbench mssql provision {self.topology.path or 'TOPOLOGY.yaml'}") from None

    def _prepare(self, initiators: int, profile: str, broker: BrokerSettings) -> None:
        topo = self.topology
        target, inits = topo.active(profile, initiators)
        prof = topo.profile(profile)
        family = [topo.instances[n] for n in prof.initiators]
        self._profile, self._n_initiators, self._broker = prof.name, initiators, broker
        if topo.broker.reset == "new_broker":       # refused before anything changes
            for inst in [target, *family]:
                refusal = exclusive.new_broker_refusal(self, inst, "broker.reset: new_broker")
                if refusal:
                    raise TargetError(refusal + ": use broker.reset: cleanup")
        # 1. no new receive tasks (the initiators' readers neither); let the running ones finish
        # their WAITFOR
        for inst in family:
            self._run(inst, "initiator", "initiator_end_off", self._names())
        self.set_activation(False)
        # 2. every conversation and message gone
        if topo.broker.reset == "new_broker":
            for inst in [target, *family]:
                exclusive.new_broker(self, inst, "broker.reset: new_broker")
            # every route naming one of the new GUIDs, in whatever profile
            renamed = {target.name, *(i.name for i in family)}
            _provision.routing(self, [p for p in topo.pairs()
                                      if p[0].name in renamed or p[1].name in renamed])
            self._run(target, "target", "truncate_tables", self._names())
            for inst in family:
                self._run(inst, "initiator", "truncate_tables")
        else:
            for inst in [*family, target]:
                left = self._reset(inst)
                if left:
                    log.warning("%s", left)
        # 3. the server profile, once the options as the DBA had them are recorded (restored by
        # close() after the run and by teardown)
        for inst in [target, *family]:
            if inst.name not in self._changed:
                db_options.remember(self, inst)
                self._changed[inst.name] = inst
            self._run(inst, "server", "delayed_durability",
                      {"database": inst.database, "delayed_durability": prof.delayed_durability.upper()},
                      database="master")
        # 4. initiator numbers in the message header; the queue's broker settings
        for idx, inst in enumerate(inits, start=1):
            self._install_initiator_code(inst, idx)
        self._run(target, "target", "queue_enable", self._names())
        self._install_activation(target, broker)
        # conversation priority honoured only when the permutation begins high-priority dialogs
        honor = 1 if high_priority_permille(broker.high_priority_share) else 0
        for inst in [target, *inits]:
            self._run(inst, "objects", "honor_priority",
                      {"database": inst.database, "honor": honor, "honor_kw": "ON" if honor else "OFF"})
        # 5. clocks (end-to-end latency crosses servers) and the accounting baseline
        self._measure_offsets([target, *inits])
        self._baseline = {idx: self._sent_counts(inst) for idx, inst in enumerate(inits, start=1)}
        self.label = self._make_label()

    def _measure_offsets(self, insts: list[Instance]) -> None:
        for key, inst in self._servers(insts).items():
            best = None
            for _ in range(3):
                t0 = time.time()
                now = as_datetime(self._scalar(inst, "server", "utc_now", database="master"))
                t1 = time.time()
                server_epoch = (now - EPOCH).total_seconds()
                sample = (t1 - t0, server_epoch - (t0 + t1) / 2)
                if best is None or sample[0] < best[0]:
                    best = sample
            self._offsets_s[key] = best[1]

    def create_dialogs(self, initiator: int, usable: int, every_n: int) -> int:
        inst = self._initiator(initiator)
        share = self._broker.high_priority_share if self._broker else 0.0
        begun = int(self._scalar(inst, "initiator", "call_create_dialogs",
                                 [int(usable), int(every_n), high_priority_permille(share)], purpose="admin") or 0)
        self._baseline[initiator] = self._sent_counts(inst)
        return begun

    def warm_up(self, initiator: int) -> int:
        inst = self._initiator(initiator)
        sent = int(self._scalar(inst, "initiator", "call_warm_up", purpose="admin") or 0)
        self._baseline[initiator] = self._sent_counts(inst)
        return sent

    def set_activation(self, enabled: bool) -> None:
        """ALTER QUEUE ... WITH ACTIVATION (STATUS = OFF), then wait for the running activated
        tasks to finish; or the queue's activation clause again, STATUS = ON with the
        permutation's MAX_QUEUE_READERS."""
        target, _ = self._active()
        if enabled:
            self._run(target, "target", "activation_on",
                      self._names(max_queue_readers=self._broker.max_queue_readers))
            return
        self._run(target, "target", "activation_off", self._names())

        def running() -> int:
            return int(self._scalar(target, "collectors", "activated_tasks", [self.topology.broker.queue]) or 0)

        if not wait_until(lambda: not running(), self._broker.waitfor_timeout_ms / 1000 + 30, 0.25):
            log.warning("%d activated task(s) still running on %s", running(), target.name)

    # ------------------------------------------------------------------ accounting
    def counts(self) -> Counts:
        """Each initiator's data messages, warm-up excluded: sent (its ssbench_counts), in its
        transmission queue, in the target queue, received (distinct messages of the drop table;
        tallies beyond a message's first are duplicates) and poison (in the error table, never
        in the drop table). Read upstream first, so a message moving meanwhile is counted twice
        rather than missed. The drop table is read whole only once the queues hold none of the
        test's messages (the drain's last reading); before, received is the tally. Then the gaps
        inside each dialog's received sequence are losses too (:func:`_phantoms`)."""
        target, inits = self._active()
        names = self._names()
        per = []
        for idx, inst in enumerate(inits, start=1):
            sent = max(0, self._sent_counts(inst)[0] - self._baseline.get(idx, (0, 0, 0))[0])
            xmitq = int(self._scalar(inst, "initiator", "xmitq_data", params=names) or 0)
            per.append(InitiatorCounts(initiator=idx, sent=sent, received=0, xmitq=xmitq))
        queued = self._by_initiator(target, "queued_by_initiator")
        tallied = self._by_initiator(target, "received_by_initiator")
        poison = self._by_initiator(target, "poison_by_initiator")
        whole = not (any(c.xmitq for c in per) or any(queued.values()))
        rows = {} if not whole else {
            int(r[0]): (int(r[1] or 0), int(r[2] or 0))
            for r in self._query(target, "target", "distinct_by_initiator", purpose="admin")}
        gaps = self._by_initiator(target, "gaps_by_initiator") if whole else {}
        for c in per:
            c.queued, c.poison = queued.get(c.initiator, 0), poison.get(c.initiator, 0)
            n, distinct = rows.get(c.initiator, (tallied.get(c.initiator, 0),) * 2)
            c.received, c.duplicates = distinct, n - distinct
            if whole:
                c.phantoms = _phantoms(c, gaps.get(c.initiator, 0))
        state = self._query(target, "collectors", "queue_state", [self.topology.broker.queue])
        return Counts(initiators=per, queue_disabled=bool(state) and not state[0][0])

    def sent_while_running(self) -> int:
        """:meth:`counts`' sent, WITH (NOLOCK): at READ COMMITTED the read waits on every SEND's
        open transaction."""
        _, inits = self._active()
        return sum(max(0, self._sent_counts(inst, live=True)[0] - self._baseline.get(idx, (0, 0, 0))[0])
                   for idx, inst in enumerate(inits, start=1))

    def _by_initiator(self, inst: Instance, section: str) -> dict[int, int]:
        """initiator -> count, from a target.sql section's (initiator, count, ...) rows."""
        return {int(r[0]): int(r[1] or 0) for r in self._query(inst, "target", section, params=self._names())
                if r[0] is not None}

    def disk_full(self, errors=()) -> str | None:
        """A full transaction log (9002) or filegroup (1105), named from its error's words."""
        hit = full_disk(errors)
        return None if hit is None else mssql_disk_full_line(hit)

    def queues_busy(self) -> bool:
        """The cheap partition row counts (:meth:`queue_depths`) say messages are queued."""
        return any(self.queue_depths(exact=False).values())

    def sender_spec(self, initiator: int) -> dict[str, Any]:
        inst = self._initiator(initiator)
        spec = driver.spec_for(inst, self.topology.driver, sender=True,
                               label=f"initiator {initiator} ({inst.name})")
        return {"sender": "mssql", "initiator": initiator, "connection": asdict(spec)}

    # ------------------------------------------------------------------ provision.py, check.py
    def provision(self, max_initiators: int | None = None) -> None:
        """Create everything the topology needs, idempotently (safe to run again)."""
        _provision.provision(self, max_initiators)

    def teardown(self, drop_databases: bool = False) -> list[str]:
        """Remove what provision created (all profiles) and nothing else; returns a line for
        each object left in place. See :func:`.provision.teardown`."""
        return _provision.teardown(self, drop_databases)

    def check(self, max_initiators: int | None = None) -> list[tuple[str, str, str]]:
        """Preflight: ``[(status, what, detail)]``; see :func:`.check.check`."""
        return _check.check(self, max_initiators)

    def close(self) -> None:
        """Put back the database options the permutations changed (DELAYED_DURABILITY,
        HONOR_BROKER_PRIORITY: :func:`.db_options.restore`), then close the connections. A
        failure is logged with what to do, never raised: close runs on every way out of a run."""
        changed, self._changed = list(self._changed.values()), {}
        for inst in changed:
            try:
                db_options.restore(self, inst)
            except TargetError as e:
                log.warning("%s: could not put its database options back (%s); run: ssbench mssql "
                            "teardown %s, or set them by hand", inst.where(), e,
                            self.topology.path or "TOPOLOGY.yaml")
        ServerSession.close(self)

    def smoke(self, messages: int = 10, usable: int = 2, every_n: int = 1, timeout: float = 60.0,
              profile: str | None = None) -> Counts:
        """A tiny end-to-end flow; see :func:`.check.smoke`."""
        return _check.smoke(self, messages, usable, every_n, timeout, profile)


def mssql_disk_full_line(evidence: str) -> str:
    """What is full on a SQL Server and what to do, from an error's words (9002, 1105)."""
    found = list(FULL_DISK.finditer(evidence))
    log = next((m for m in found if m.group("log")), None)
    if log:
        db = f" of database '{log.group('log_db')}'" if log.group("log_db") else ""
        return (f"the SQL Server transaction log{db} is full (error 9002): back up the log or give "
                f"it room (log_reuse_wait_desc in sys.databases says why it cannot be reused)")
    fg = next((m for m in found if m.group("filegroup")), None)
    if fg and fg.group("fg_db"):
        return (f"the '{fg.group('fg')}' filegroup of SQL Server database '{fg.group('fg_db')}' is full (error 1105): "
                "free space on its disk, grow its files or add one")
    if fg:
        return "a SQL Server filegroup is full (error 1105): free space on its disk, grow its files or add one"
    return f"the SQL Server's disk is full ({evidence}): free space on it"
