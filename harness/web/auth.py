"""Who may use the web UI (and, off loopback, the metrics endpoint): Locust's ``--web-login``
page, checked here with flask-login.

``ssbench web`` reads the credentials on its own host from :data:`USER_ENV` and
:data:`PASSWORD_ENV`, or the file :data:`FILE_ENV` names (one line ``USER:PASSWORD``, owner
only), never from the command line, and hands the Locust master only the user name and a
salted scrypt hash (:func:`Credentials.encoded`, in :data:`MASTER_ENV`). In the master,
:func:`install_login` checks the login form's password in constant time and logs the user in
for ``session_minutes``; logs a failed login with the user and the client address, never the
password, and answers it after a second; and guards every route, Locust's and ssbench's,
except the login page and its assets (``ssbench web``'s own loopback requests carry the private
token in :data:`INTERNAL_HEADER`). A loopback-only UI needs no login unless
``--require-login`` (docs/web.md, "Exposing ssbench safely").
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

log = logging.getLogger("ssbench.web.auth")

USER_ENV = "SSBENCH_WEB_USER"
PASSWORD_ENV = "SSBENCH_WEB_PASSWORD"
FILE_ENV = "SSBENCH_WEB_CREDENTIALS_FILE"
MASTER_ENV = "SSBENCH_WEB_LOGIN"          # to the Locust master: user and password hash only
INTERNAL_HEADER = "X-Ssbench-Internal"
LOGIN_PATH = "/ssbench/login"
LOGOUT_PATH = "/ssbench/logout"
DEFAULT_SESSION_MINUTES = 480
MIN_PASSWORD_CHARS = 8

HOW_TO_SET = (f"set {USER_ENV} and {PASSWORD_ENV} in the environment, or {FILE_ENV}=PATH naming a "
              f"file of mode 0600 that holds one line USER:PASSWORD (never on the command line)")


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and ``localhost``; anything else (0.0.0.0, ::, a name) is not."""
    h = (host or "").strip().strip("[]")
    if h.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Credentials:
    user: str
    password_hash: str

    @classmethod
    def from_password(cls, user: str, password: str) -> "Credentials":
        from werkzeug.security import generate_password_hash

        return cls(user, generate_password_hash(password))

    def check(self, user: str, password: str) -> bool:
        import hmac

        from werkzeug.security import check_password_hash

        ok_pw = check_password_hash(self.password_hash, password or "")   # always run: same time for any user
        return hmac.compare_digest((user or "").encode(), self.user.encode()) and ok_pw

    def encoded(self) -> str:
        return json.dumps({"user": self.user, "hash": self.password_hash})

    @classmethod
    def decode(cls, text: str) -> "Credentials":
        d = json.loads(text)
        return cls(str(d["user"]), str(d["hash"]))


def _check(user: str, password: str, **where) -> None:
    if not user or any(c in user for c in ":\r\n\t") or len(user) > 64:
        raise UserError("the user name must be 1..64 characters, without ':', tabs or line breaks", **where)
    if len(password) < MIN_PASSWORD_CHARS:
        raise UserError(f"the password must be at least {MIN_PASSWORD_CHARS} characters", **where)


def read_credentials_file(path: str | os.PathLike) -> tuple[str, str]:
    """``USER:PASSWORD`` from the first non-blank, non-# line of a file only its owner can read."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise UserError(f"cannot read the credentials file ({e.strerror})", file=str(p)) from None
    if not stat.S_ISREG(st.st_mode):
        raise UserError("the credentials file is not a regular file", file=str(p))
    if st.st_mode & 0o077:
        raise UserError(f"the credentials file is accessible to group or others (mode "
                        f"{stat.S_IMODE(st.st_mode):04o}); chmod 600 it", file=str(p))
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise UserError(f"the credentials file belongs to another user (uid {st.st_uid})", file=str(p))
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, password = line.partition(":")
        if not sep:
            raise UserError("expected USER:PASSWORD", file=str(p), line=n)   # the line is not echoed
        _check(user.strip(), password, file=str(p), line=n)
        return user.strip(), password
    raise UserError("no USER:PASSWORD line in the credentials file", file=str(p))


def load_credentials(env=None) -> Credentials | None:
    """The web UI's credentials from the environment (or the file it names); None if none set."""
    env = os.environ if env is None else env
    if env.get(FILE_ENV):
        user, password = read_credentials_file(env[FILE_ENV])
        return Credentials.from_password(user, password)
    password = env.get(PASSWORD_ENV)
    user = env.get(USER_ENV)
    if password is None and user is None:
        return None
    if not password or not user:
        raise UserError(f"{USER_ENV} and {PASSWORD_ENV} must both be set", field=PASSWORD_ENV if user else USER_ENV)
    _check(user, password, field=f"{USER_ENV}/{PASSWORD_ENV}")
    return Credentials.from_password(user, password)


# --------------------------------------------------------------------------- in the Locust master

def install_login(environment, creds: Credentials, session_minutes: float, internal_token: str | None,
                  tls: bool = False, on_notice=None) -> None:
    """Make Locust's ``--web-login`` real: call before any other ``before_request`` hook of the
    web UI (the guard must run first: an unauthenticated ``POST /swarm`` must prepare nothing)."""
    import hmac
    from datetime import timedelta

    import gevent
    from flask import jsonify, redirect, request, session, url_for
    from flask_login import UserMixin, current_user, login_user, logout_user

    web_ui = environment.web_ui
    app = web_ui.app
    lifetime = float(session_minutes) * 60.0
    app.config.update(SECRET_KEY=secrets.token_bytes(32), SESSION_COOKIE_HTTPONLY=True,
                      SESSION_COOKIE_SAMESITE="Lax", SESSION_COOKIE_SECURE=bool(tls),
                      PERMANENT_SESSION_LIFETIME=timedelta(seconds=lifetime))
    base = (getattr(environment.parsed_options, "web_base_path", "") or "").rstrip("/")

    class _User(UserMixin):
        def __init__(self, name: str):
            self.id = name

    @web_ui.login_manager.user_loader
    def _load(user_id):
        return _User(user_id) if hmac.compare_digest(str(user_id).encode(), creds.user.encode()) else None

    own_address = str(getattr(environment.parsed_options, "web_host", "") or "").strip("[]")
    web_ui.auth_args = {"username_password_callback": base + LOGIN_PATH}
    open_paths = {base + "/login", base + LOGIN_PATH}

    def _notice(text: str) -> None:
        if on_notice is not None:
            gevent.spawn(on_notice, text)

    @app.before_request
    def _guard():
        path = request.path
        if path in open_paths or path.startswith(base + "/assets/"):
            return None
        given = request.headers.get(INTERNAL_HEADER)
        peer = request.remote_addr or ""
        # from this host only: loopback, or the UI's own address (ssbench web reaches it there)
        if given and internal_token and (is_loopback(peer) or peer == own_address) and \
                hmac.compare_digest(given.encode(), internal_token.encode()):
            return None
        if current_user.is_authenticated:
            if time.time() - float(session.get("ssbench_login_at", 0)) <= lifetime:
                return None
            log.info("the session of user %r expired", current_user.id)
            logout_user()
            session["auth_info"] = "Your session expired: log in again."
        if request.method == "GET" and "text/html" in request.headers.get("Accept", ""):   # a page, not a poll
            return redirect(url_for("locust.login"))
        return jsonify({"success": False, "message": "login required"}), 401

    @app.route(base + LOGIN_PATH, methods=["POST"])
    def _login():
        user = request.form.get("username", "")
        if creds.check(user, request.form.get("password", "")):
            session.clear()
            login_user(_User(creds.user))
            session.permanent = True
            session["ssbench_login_at"] = time.time()
            log.info("user %r logged in from %s", creds.user, request.remote_addr)
            return redirect(url_for("locust.index"))
        shown = user[:64]
        log.warning("failed login for user %r from %s", shown, request.remote_addr)
        _notice(f"failed web UI login for user {shown!r} from {request.remote_addr}")
        gevent.sleep(1.0)
        session["auth_error"] = "Invalid username or password"
        return redirect(url_for("locust.login"))

    @app.route(base + LOGOUT_PATH)
    def _logout():
        logout_user()
        session.clear()
        return redirect(url_for("locust.login"))
