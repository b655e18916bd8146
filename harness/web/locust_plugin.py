"""The Locust half of ``ssbench web``: a second locustfile loaded next to
:mod:`harness.load.locustfile` (``locust -f harness/load/locustfile.py,harness/web/locust_plugin.py``)
by the web UI's master and workers only; headless runs never load it.

``ssbench web`` (:mod:`harness.web.launcher`) owns the target, the collectors and the results;
it starts a Locust master with ``SSBENCH_WEB_CONTROL`` set (a private loopback URL of its
control API, :mod:`harness.web.control`) and one worker per initiator. In that master this
module:

* adds ssbench's own parameters to the start form (custom arguments with
  ``include_in_web_ui=True``): initiators in use, payload bytes, dialog strategy; the user
  count is the total number of client threads;
* on every swarm start (``test_start``, before any spawn message goes out) asks ``ssbench web``
  to start a session: prepare the target, begin the dialogs of the chosen strategy, warm up,
  start the collectors and write the swarm spec; the spec is then pushed to the workers inline
  in the spawn message's options (so workers on other hosts need no shared file system);
* restricts the users to the workers of the initiators in use (a users dispatcher that only
  sees those workers);
* receives each worker's exact SEND recording at the end of the swarm (a Locust message, so it
  works across hosts) and writes it into the session's directory, then asks ``ssbench web`` to
  save the session as a run (same layout as ``ssbench run``);
* guards the master/worker channel (:mod:`harness.load.auth`: only workers that prove the
  run's token ``SSBENCH_WORKER_TOKEN`` get users; refusals are reported to ``ssbench web``)
  and, with ``--web-login``, the web UI (:mod:`harness.web.auth`);
* adds a "Broker metrics" tab (Locust's extended tabs: the table rows ride on the
  ``/stats/requests`` poll the UI makes every 2 s), a ``/ssbench/metrics`` JSON endpoint and a
  standalone page at ``/ssbench/``.

In a worker it proves the run's token to the master (and takes no spawn message from a master
that cannot prove it), and otherwise only acts when the master pushed an ssbench web spec.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from locust import events

from harness.results.store import write_atomic

log = logging.getLogger("ssbench.web")

CONTROL_ENV = "SSBENCH_WEB_CONTROL"
WEB_SPEC_OPTION = "ssbench_web_spec"      # inline spec pushed by the master to its workers
WORKER_DATA_MSG = "ssbench_worker_data"
DIALOG_CHOICES = ["per_thread", "trick150", "shared"]
TAB_KEY = "ssbench-broker"

_worker: dict = {}


def _on_parser(parser, **_kw) -> None:
    add_arguments(parser)


def _on_init(environment, **_kw) -> None:
    install(environment)


events.init_command_line_parser.add_listener(_on_parser)
events.init.add_listener(_on_init)


def add_arguments(parser) -> None:
    """Custom arguments shown in the web UI's start form (none outside ``ssbench web``)."""
    if not os.environ.get(CONTROL_ENV):
        return
    existing = {s for a in parser._actions for s in a.option_strings}
    if "--ssbench-initiators" in existing:  # idempotent (the parser is rebuilt by the web UI)
        return
    parser.add_argument("--ssbench-initiators", type=int, default=1, env_var="SSBENCH_WEB_INITIATORS",
                        help="initiators in use, one Locust worker each; the users (client threads, in total) are spread evenly over them",
                        include_in_web_ui=True)
    parser.add_argument("--ssbench-payload-bytes", type=int, default=100, env_var="SSBENCH_WEB_PAYLOAD_BYTES",
                        help="message body size in bytes", include_in_web_ui=True)
    parser.add_argument("--ssbench-dialogs", type=str, default="per_thread", choices=DIALOG_CHOICES,
                        env_var="SSBENCH_WEB_DIALOGS",
                        help="dialog strategy; a change re-provisions the dialogs at start",
                        include_in_web_ui=True)


def install(environment) -> None:
    """Extra web UI pages (only when a web UI runs)."""
    from locust.runners import MasterRunner, WorkerRunner

    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        _install_worker(environment)
    elif isinstance(runner, MasterRunner) and os.environ.get(CONTROL_ENV):
        _install_master(environment)


# --------------------------------------------------------------------------- worker side

def _install_worker(environment) -> None:
    """Prove the run token; pick up the spec pushed inline by an ``ssbench web`` master; send
    the recording back."""
    from harness.load.auth import WorkerAuth, token_from_env

    _worker["auth"] = WorkerAuth(environment.runner, token_from_env()).install()
    events = environment.events
    _worker["initial_spec"] = os.environ.get("SSBENCH_SPEC", "")

    @events.test_start.add_listener
    def _start(environment, **_kw):
        inline = getattr(environment.parsed_options, WEB_SPEC_OPTION, "") if environment.parsed_options else ""
        _worker["active"] = bool(inline)
        if not inline:
            return
        spec = json.loads(inline)
        scratch = _worker.get("scratch")
        if scratch is None:  # next to the placeholder spec of ssbench web's state directory
            base = Path(_worker["initial_spec"]).parent if _worker.get("initial_spec") else None
            scratch = _worker["scratch"] = Path(tempfile.mkdtemp(
                prefix=f"ssbench-worker-{os.getpid()}-", dir=base if base and base.is_dir() else None))
        spec["out_dir"] = str(scratch)   # the session directory lives on the master's host
        path = write_atomic(scratch / "swarm.json", json.dumps(spec))
        # the locustfile reads --ssbench-spec (empty: the master sends none) or SSBENCH_SPEC
        os.environ["SSBENCH_SPEC"] = str(path)
        for f in scratch.glob("worker-i*.json"):
            f.unlink(missing_ok=True)

    @events.test_stop.add_listener
    def _stop(environment, **_kw):
        # runs after the locustfile's own test_stop listener wrote worker-i<N>-<pid>.json
        if not _worker.pop("active", False):
            return
        scratch = _worker.get("scratch")
        files = sorted(scratch.glob("worker-i*.json")) if scratch else []
        for f in files:
            try:
                environment.runner.send_message(WORKER_DATA_MSG, {"name": f.name, "data": f.read_text()})
            except Exception:  # pragma: no cover - the master is gone
                log.exception("sending %s to the master", f.name)
            f.unlink(missing_ok=True)

    @events.report_to_master.add_listener
    def _report(client_id, data, **_kw):
        data["ssbench_initiator"] = int(os.environ.get("SSBENCH_INITIATOR", "1"))

    @events.quitting.add_listener
    def _quit(**_kw):
        import shutil

        scratch = _worker.pop("scratch", None)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


# --------------------------------------------------------------------------- master side

def _install_master(environment) -> None:
    import gevent
    from flask import Response, jsonify, request
    from locust.dispatch import UsersDispatcher

    from harness.web.control import ControlClient

    from harness.load.auth import MasterGuard, new_token, token_from_env

    control = ControlClient(os.environ[CONTROL_ENV])
    state: dict = {"workers": {}, "session": None, "metrics": None, "spawned": None,
                   "stopping": None, "dispatched": {}}
    environment.ssbench_web = state  # for tests and debugging

    def notice(text: str) -> None:
        """A line for ssbench web's terminal (refused workers, failed logins)."""
        try:
            control.post("/notice", {"text": text}, timeout=5)
        except Exception as e:  # pragma: no cover - ssbench web is gone
            log.warning("ssbench: reporting %r: %s", text, e)

    # ------------------------------------------------------------ who may connect
    token = token_from_env()
    if token is None:
        log.error("ssbench: $SSBENCH_WORKER_TOKEN is not set in the master: every worker will be refused")
        token = new_token()
    guard = MasterGuard(environment.runner, token,
                        on_refused=lambda worker, reason: notice(f"refused worker {worker}: {reason}")).install()
    state["refused"] = guard.refused
    if environment.web_ui is not None and getattr(environment.parsed_options, "web_login", False):
        from harness.web.auth import MASTER_ENV, Credentials, install_login

        if not os.environ.get(MASTER_ENV):
            raise RuntimeError(f"--web-login without ${MASTER_ENV}: start the web UI with ssbench web")
        install_login(environment, Credentials.decode(os.environ[MASTER_ENV]),
                      float(os.environ.get("SSBENCH_WEB_SESSION_MINUTES") or 480),
                      internal_token=control.url.rsplit("/", 1)[-1],
                      tls=bool(getattr(environment.parsed_options, "tls_cert", None)), on_notice=notice)

    # ------------------------------------------------------------ which worker is which initiator
    @environment.events.worker_report.add_listener
    def _worker_report(client_id, data, **_kw):
        if "ssbench_initiator" in data:
            state["workers"][client_id] = int(data["ssbench_initiator"])

    def clamp_initiators(n: int) -> int:
        known = sorted(set(state["workers"].values()))
        return max(1, min(int(n), max(known) if known else 1))

    def initiators_in_use() -> int:
        return clamp_initiators(int(getattr(environment.parsed_options, "ssbench_initiators", 1) or 1))

    def allowed(worker_node) -> bool:
        ini = state["workers"].get(worker_node.id)
        return ini is not None and ini <= initiators_in_use()

    class InitiatorDispatcher(UsersDispatcher):
        """Locust's dispatcher over the workers of the initiators in use only."""

        def __init__(self, worker_nodes, user_classes):
            mine = [w for w in worker_nodes if allowed(w)]
            if not mine:  # no report from a worker yet: better than refusing to run
                log.warning("no worker has reported its initiator yet; using every worker")
                mine = list(worker_nodes)
            super().__init__(worker_nodes=mine, user_classes=user_classes)

        def add_worker(self, worker_node):
            if allowed(worker_node):
                super().add_worker(worker_node)

        def __next__(self):
            d = super().__next__()
            state["dispatched"] = {state["workers"].get(w, 0): sum(c.values()) for w, c in d.items()}
            return d

    environment.dispatcher_class = InitiatorDispatcher

    # ------------------------------------------------------------ session start / stop
    def open_session(params: dict) -> str | None:
        """Ask ssbench web to prepare the target and start a session; None or an error."""
        opts = environment.parsed_options
        state.update(spawned=None, stopping=None, dispatched={}, started=time.time(), session=None)
        setattr(opts, WEB_SPEC_OPTION, "")
        log.info("ssbench: preparing the target for %s", params)
        try:
            resp = control.post("/session/start", params, timeout=3600)
        except Exception as e:
            resp = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        if not resp.get("ok"):
            log.error("ssbench: could not start the session: %s", resp.get("error"))
            return str(resp.get("error") or "unknown error")
        state["session"] = resp
        os.environ["SSBENCH_SPEC"] = resp["spec_path"]   # this master's own view (master.json)
        _reload_specs()
        setattr(opts, WEB_SPEC_OPTION, json.dumps(resp["spec"]))
        log.info("ssbench: session %s: %s", resp["run_id"], resp.get("description", ""))
        return None

    @environment.events.test_start.add_listener
    def _test_start(environment, **_kw):
        if state.pop("opened_by_ui", False) and state.get("session"):
            return  # prepared by the /swarm request itself (below)
        opts = environment.parsed_options
        runner = environment.runner
        params = {"initiators": initiators_in_use(),
                  "users": int(getattr(runner, "target_user_count", 0) or getattr(opts, "num_users", 1) or 1),
                  "spawn_rate": float(getattr(runner, "spawn_rate", 0) or getattr(opts, "spawn_rate", 1) or 1),
                  "payload_bytes": int(getattr(opts, "ssbench_payload_bytes", 100)),
                  "dialogs": str(getattr(opts, "ssbench_dialogs", "per_thread"))}
        if open_session(params) is not None:
            gevent.spawn_later(0.1, runner.stop)

    @environment.events.spawning_complete.add_listener
    def _spawned(user_count, **_kw):
        if state.get("spawned") is None:
            state["spawned"] = time.time()

    @environment.events.test_stopping.add_listener
    def _stopping(**_kw):
        if state.get("stopping") is None:
            state["stopping"] = time.time()

    @environment.events.test_stop.add_listener
    def _test_stop(environment, **_kw):
        session = state.get("session")
        if not session:
            return
        state["session"] = None
        out_dir = Path(session["out_dir"])
        try:
            _write_stats_csv(environment, out_dir / "locust_stats.csv")
        except Exception:  # pragma: no cover
            log.exception("writing locust_stats.csv")
        payload = {"run_id": session["run_id"], "spawn_complete": state.get("spawned"),
                   "stop_requested": state.get("stopping") or time.time(),
                   "started": state.get("started"),
                   "initiators_with_users": sorted(i for i, n in state.get("dispatched", {}).items() if n > 0)}
        try:
            resp = control.post("/session/stop", payload, timeout=600)
        except Exception as e:
            resp = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        if resp.get("ok"):
            log.info("ssbench: session saved as run %s", resp.get("run_dir"))
        else:
            log.error("ssbench: saving the session failed: %s", resp.get("error"))
        setattr(environment.parsed_options, WEB_SPEC_OPTION, "")

    def _worker_data(environment, msg, **_kw):
        session = state.get("session")
        if not session:
            log.warning("ssbench: worker data outside a session, dropped (%s)", msg.data.get("name"))
            return
        name = Path(str(msg.data.get("name", ""))).name
        if not name.startswith("worker-i") or not name.endswith(".json"):
            return
        write_atomic(Path(session["out_dir"]) / name, msg.data["data"])

    environment.runner.register_message(WORKER_DATA_MSG, _worker_data)

    # ------------------------------------------------------------ the web UI
    web_ui = environment.web_ui
    if web_ui is None:
        return
    from harness.web.page import PAGE

    def metrics() -> dict:
        try:
            m = control.get("/metrics", timeout=1.5)
            state["metrics"] = m
        except Exception as e:
            m = dict(state.get("metrics") or {}, error=f"{type(e).__name__}: {e}")
        return m

    web_ui.template_args["extended_tabs"] = [{"title": "Broker metrics", "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [
        {"key": TAB_KEY, "structure": [{"key": "metric", "title": "Broker metric"},
                                       {"key": "value", "title": "Value"}]}]
    web_ui.template_args["extended_csv_files"] = [
        {"href": "./ssbench/", "title": "Broker metrics page (live)"},
        {"href": "./ssbench/metrics", "title": "Broker metrics (JSON)"}]

    app = web_ui.app

    @app.before_request
    def _prepare_before_swarm():
        """Prepare the target inside the UI's start request, before Locust starts the swarm:
        the UI then sees the swarm spawning as soon as its request returns (preparing can take
        seconds; a swarm still "ready" at the UI's first poll would send it back to the form),
        and a failure is shown to the user as the start request's error message."""
        from locust.runners import STATE_CLEANUP, STATE_RUNNING, STATE_SPAWNING, STATE_STOPPING

        if request.method != "POST" or not request.path.rstrip("/").endswith("/swarm"):
            return None
        if environment.runner.state in (STATE_SPAWNING, STATE_RUNNING, STATE_CLEANUP, STATE_STOPPING):
            return None  # a change of user count while running: no new session
        f, opts = request.form, environment.parsed_options

        def val(key, default):
            camel = key.split("_")[0] + "".join(w.title() for w in key.split("_")[1:])
            for k in (key, camel):
                if f.get(k, "") != "":
                    return f[k]
            return default

        try:
            params = {"initiators": clamp_initiators(int(val("ssbench_initiators", opts.ssbench_initiators))),
                      "users": int(val("user_count", opts.num_users or 1)),
                      "spawn_rate": float(val("spawn_rate", opts.spawn_rate or 1)),
                      "payload_bytes": int(val("ssbench_payload_bytes", opts.ssbench_payload_bytes)),
                      "dialogs": str(val("ssbench_dialogs", opts.ssbench_dialogs))}
        except (TypeError, ValueError):
            return None  # Locust's own route reports the bad value
        if params["users"] < 1 or params["spawn_rate"] <= 0:
            return None
        asked = val("ssbench_initiators", opts.ssbench_initiators)
        if str(asked) != str(params["initiators"]):
            log.warning("ssbench: %s initiator(s) asked, workers connected for %s: using %s",
                        asked, sorted(set(state["workers"].values())), params["initiators"])
        err = open_session(params)
        if err is not None:
            return jsonify({"success": False, "host": environment.host,
                            "message": f"ssbench could not prepare the target: {err}"})
        state["opened_by_ui"] = True
        return None

    @app.after_request
    def _extend_stats(response):
        if request.path.rstrip("/").endswith("/stats/requests") and response.is_json and response.status_code == 200:
            from harness.web.metrics import table_rows

            data = response.get_json()
            data["extended_stats"] = [{"key": TAB_KEY, "data": table_rows(metrics())}]
            response.set_data(json.dumps(data))
        return response

    @app.route("/ssbench/metrics")
    def _metrics_json():
        return jsonify(metrics())

    @app.route("/ssbench/status")
    def _status():
        return jsonify({"workers": state["workers"], "initiators_in_use": initiators_in_use(),
                        "refused": [{"worker": r["worker"], "reason": r["reason"]} for r in guard.refused],
                        "session": (state.get("session") or {}).get("run_id"),
                        "state": environment.runner.state})

    @app.route("/ssbench/")
    def _page():
        return Response(PAGE, mimetype="text/html")


def _write_stats_csv(environment, path: Path) -> None:
    import csv
    import io

    from locust import stats

    buf = io.StringIO()
    stats.StatsCSV(environment, stats.PERCENTILES_TO_REPORT).requests_csv(csv.writer(buf))
    write_atomic(path, buf.getvalue())


def _locustfile_modules():
    for name in ("locustfile", "harness.load.locustfile"):
        m = sys.modules.get(name)
        if m is not None and hasattr(m, "_reload_spec"):
            yield m


def _reload_specs() -> None:
    for m in _locustfile_modules():
        m._reload_spec()
