"""The web UI's pages on the Locust master of ``ssbench web``: a second locustfile loaded next to
:mod:`harness.load.locustfile` by that master only.

The swarm is the swarm protocol's (:class:`harness.load.master.MasterSide`), as a headless
run's. This module adds what a browser sees: ssbench's fields in the start form (initiators,
payload bytes, dialog strategy, offered rate; the user count is the total of client threads, spread evenly);
the swarm opened inside the start request (a failure to prepare the target is that request's
error); the login of :mod:`harness.web.auth`; a "Broker metrics" tab riding on the UI's
``/stats/requests`` poll, ``/ssbench/metrics``, ``/ssbench/status`` and a page at
``/ssbench/``; and a ``/stats/requests`` asked while the master stops answered once it has
stopped (:mod:`harness.web.polls`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os

from locust import events
from locust.runners import STATE_STOPPING

from harness.web.form import DEFAULT_DIALOGS, DEFAULT_PAYLOAD_BYTES, DEFAULT_RATE, DIALOG_CHOICES
from harness.web.metrics import table_rows
from harness.web.polls import until_stopped
from harness import environment as envvars

log = logging.getLogger("ssbench.web")

TAB_KEY = "ssbench-broker"


@events.init_command_line_parser.add_listener
def add_arguments(parser, **_kw) -> None:
    """The start form's ssbench fields."""
    try:
        parser.add_argument("--ssbench-initiators", type=int, default=1, include_in_web_ui=True,
                            help="initiators in use, one Locust worker each; the users (client threads, in total) "
                                 "are spread evenly over them")
        parser.add_argument("--ssbench-payload-bytes", type=int, default=DEFAULT_PAYLOAD_BYTES,
                            include_in_web_ui=True, help="message body size in bytes")
        parser.add_argument("--ssbench-dialogs", type=str, default=DEFAULT_DIALOGS, choices=list(DIALOG_CHOICES),
                            include_in_web_ui=True, help="dialog strategy; a change re-provisions the dialogs at start")
        parser.add_argument("--ssbench-rate", type=float, default=DEFAULT_RATE, include_in_web_ui=True,
                            help="offered SENDs per second per initiator, an open loop on a fixed schedule "
                                 "(0: a closed loop, each user SENDs as fast as it can)")
    except argparse.ArgumentError:   # the same parser again: the fields are there
        pass


@events.init.add_listener
def _on_init(environment, **_kw) -> None:
    side = getattr(environment, "ssbench", None)
    if side is None or environment.web_ui is None:
        return
    _install_login(environment, side)
    _install_pages(environment, side)


def _install_login(environment, side) -> None:
    if not getattr(environment.parsed_options, "web_login", False):
        return
    from harness.web.auth import MASTER_ENV, Credentials, install_login

    if not os.environ.get(MASTER_ENV):
        raise RuntimeError(f"--web-login without ${MASTER_ENV}: start the web UI with ssbench web")
    from harness.load.protocol import Notice

    install_login(environment, Credentials.decode(os.environ[MASTER_ENV]),
                  float(envvars.get("SSBENCH_WEB_SESSION_MINUTES")),
                  internal_token=side.control.url.rsplit("/", 1)[-1],
                  tls=bool(getattr(environment.parsed_options, "tls_cert", None)),
                  on_notice=lambda text: side._post("/notice", Notice(text=text)))


def _initiators_connected(side) -> list[int]:
    return sorted({c.initiator for cid, c in side.claims.items() if c.initiator and cid in side.runner.clients})


def _install_pages(environment, side) -> None:
    from flask import Response, jsonify, request

    from harness.web.page import PAGE

    web_ui, app = environment.web_ui, environment.web_ui.app
    state = {"metrics": None}

    def metrics() -> dict:
        try:
            state["metrics"] = m = side.control.get("/metrics", timeout=1.5)
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

    @app.before_request
    def _open_swarm_in_the_start_request():
        return _open_from_form(environment, side)

    @app.before_request
    def _hold_stats_while_stopping():
        if request.path.rstrip("/").endswith("/stats/requests"):
            until_stopped(environment.runner, STATE_STOPPING)

    @app.after_request
    def _extend_stats(response):
        if request.path.rstrip("/").endswith("/stats/requests") and response.is_json and response.status_code == 200:
            data = response.get_json()
            data["extended_stats"] = [{"key": TAB_KEY, "data": table_rows(metrics())}]
            response.set_data(json.dumps(data))
        return response

    @app.route("/ssbench/metrics")
    def _metrics_json():
        m = metrics()
        return jsonify(dict(m, rows=table_rows(m)))   # the page shows the tab's rows

    @app.route("/ssbench/status")
    def _status():
        return jsonify({"workers": {cid: c.initiator for cid, c in side.claims.items() if cid in side.runner.clients},
                        "initiators_connected": _initiators_connected(side),
                        "refused": [{"worker": r["worker"], "reason": r["reason"]} for r in side.guard.refused],
                        "swarm": side.plan.swarm_id if side.plan else None, "phase": side.phase,
                        "state": environment.runner.state})

    @app.route("/ssbench/")
    def _page():
        return Response(PAGE, mimetype="text/html")


def _open_from_form(environment, side):
    """Open the swarm inside the UI's start request, before Locust starts spawning (see the
    module doc); a change of user count while running opens nothing. A Flask response with the
    error when the target could not be prepared, else None (Locust's own route goes on)."""
    from flask import jsonify, request
    from locust.runners import STATE_CLEANUP, STATE_RUNNING, STATE_SPAWNING, STATE_STOPPING

    if request.method != "POST" or not request.path.rstrip("/").endswith("/swarm"):
        return None
    if environment.runner.state in (STATE_SPAWNING, STATE_RUNNING, STATE_CLEANUP, STATE_STOPPING):
        return None
    form, opts = request.form, environment.parsed_options

    def val(key, default):
        camel = key.split("_")[0] + "".join(w.title() for w in key.split("_")[1:])
        return next((form[k] for k in (key, camel) if form.get(k, "") != ""), default)

    try:
        users = int(val("user_count", opts.num_users or 1))
        rate = float(val("spawn_rate", opts.spawn_rate or 1))
        asked = int(val("ssbench_initiators", opts.ssbench_initiators))
        fields = {"payload_bytes": int(val("ssbench_payload_bytes", opts.ssbench_payload_bytes)),
                  "dialogs": str(val("ssbench_dialogs", opts.ssbench_dialogs)),
                  "rate": float(val("ssbench_rate", opts.ssbench_rate))}
    except (TypeError, ValueError):
        return None  # Locust's own route reports the bad value
    if users < 1 or rate <= 0:
        return None
    known = _initiators_connected(side)
    use = max(1, min(asked, max(known) if known else 1))
    if use != asked:
        log.warning("ssbench: %s initiator(s) asked, workers connected for %s: using %s", asked, known, use)
    why = side.open_swarm(users, rate, dict(fields, initiators=use))
    if why is not None:
        return jsonify({"success": False, "host": environment.host,
                        "message": f"ssbench could not prepare the target: {why}"})
    side.opened = True
    return None
