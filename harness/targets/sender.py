"""The SEND path: a :class:`Sender` per client connection, and the send paths it declares.

A target hands out a JSON-able spec (never a password); :func:`open_sender` connects it in any
process. A sender declares its paths (:class:`SendPaths`) and the load layer never probes:
blocking :meth:`Sender.send` on an OS thread of its own, and, for a ``pump`` sender,
non-blocking steps for gevent's hub (:class:`SendPump`) when SENDs repeat one dialog and payload.
"""

from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from ..errors import TargetError, UserError
from . import registry


@dataclass(frozen=True)
class SendPaths:
    """The SEND paths a sender class implements, beyond the blocking :meth:`Sender.send`."""

    pump: bool = False


class Sender(abc.ABC):
    """One client connection to one initiator: what one Locust user (client thread) holds.

    Implementations may block (database drivers do); a Sender must be usable from a thread
    other than the one that opened it (one call at a time)."""

    #: the SEND paths this class implements (checked when the class is defined)
    paths: ClassVar[SendPaths] = SendPaths()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        for path, method in (("pump", "pump"),):
            if getattr(cls.paths, path) and getattr(cls, method) is getattr(Sender, method):
                raise TypeError(f"{cls.__name__} declares the {path} SEND path but does not implement {method}()")

    @classmethod
    @abc.abstractmethod
    def from_spec(cls, spec: dict[str, Any]) -> "Sender":
        """Connect from a sender spec (:meth:`harness.targets.base.Target.sender_spec`)."""

    @classmethod
    def preload(cls) -> None:
        """Import now what :meth:`from_spec` needs (a driver module): called in the Locust
        worker's main greenlet, so connections can then be opened on pool threads, where
        concurrent imports under gevent's patched locks can deadlock."""

    @abc.abstractmethod
    def dialog(self, slot: int) -> str:
        """Handle of usable dialog ``slot`` (1-based; the paper's ``dbo.dialogs`` row k)."""

    @abc.abstractmethod
    def send(self, dialog: str, payload: bytes) -> None:
        """SEND ON CONVERSATION ``dialog`` one message carrying ``payload``, in its own
        transaction. The target stamps the send time into the message body."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connection (callers make sure no call is in flight)."""

    def set_dialog_lifetime(self, messages_per_dialog: int | None, fire_and_forget: bool = False) -> None:
        """Retire each dialog after ``messages_per_dialog`` messages and begin a new one (None:
        reuse for ever); ``fire_and_forget``: END it right after its last SEND (docs/matrices.md).
        The senders of targets that declare the ``dialog_lifetime`` capability implement it."""
        if messages_per_dialog:
            raise TargetError(f"{type(self).__name__} does not support messages_per_dialog")

    def pump(self, dialog: str, payload: bytes) -> "SendPump | None":
        """SENDs of ``payload`` on ``dialog`` as non-blocking steps for an event loop
        (``paths.pump``), or None when this connection cannot pump now (it was lost: a
        blocking SEND reconnects first)."""
        raise NotImplementedError(f"{type(self).__name__} declares no SEND pump")


class SendPump(abc.ABC):
    """One connection's SEND as non-blocking steps, driven by an event loop that watches
    :attr:`fileno`. The loop owns the connection while it drives it: nothing else uses it.

    ``begin()`` queues one SEND; ``flush()`` writes what is left when the socket is writable;
    ``read()``, when it is readable, takes what arrived: ``(False, None)`` the SEND is not
    complete yet, ``(True, None)`` it committed, ``(True, exc)`` it failed with ``exc`` (a lost
    connection included: the sender's blocking ``send`` reconnects afterwards)."""

    fileno: int

    @abc.abstractmethod
    def begin(self) -> bool:
        """Queue one SEND; True when output is still to be flushed (wait until writable)."""

    @abc.abstractmethod
    def flush(self) -> bool:
        """Write queued output; True when some is still left."""

    @abc.abstractmethod
    def read(self) -> tuple[bool, BaseException | None]:
        """Consume input: (complete, error)."""


def sender_class(spec: dict[str, Any]) -> type[Sender]:
    """The sender class ``spec["sender"]`` names: a name registered in ``ssbench.senders``, or
    an import path ``module:Class`` for a sender outside any distribution (a benchmark's, its
    module on the process's ``sys.path``). ValueError for a spec without one."""
    name = spec.get("sender") if isinstance(spec, dict) else None
    if not isinstance(name, str) or not name:
        raise ValueError(f"a sender spec names its sender (\"sender\": a name registered in "
                         f"{registry.SENDERS!r} or module:Class), got keys "
                         f"{sorted(spec) if isinstance(spec, dict) else spec!r}")
    cls = _import_path(name) if ":" in name else registry.load(registry.SENDERS, name)
    if not (isinstance(cls, type) and issubclass(cls, Sender)):
        raise TypeError(f"the sender registered as {name!r} is not a Sender subclass: {cls!r}")
    return cls


def _import_path(path: str) -> Any:
    """The object ``module:attribute`` names, imported now."""
    module, _, attr = path.partition(":")
    try:
        obj = importlib.import_module(module)
    except ImportError as e:
        raise UserError(f"sender {path!r}: module {module!r} cannot be imported ({e}); put its directory "
                        "on PYTHONPATH", field="sender") from None
    for part in attr.split("."):
        obj = getattr(obj, part, None)
    if obj is None:
        raise UserError(f"sender {path!r}: module {module!r} has no {attr!r}", field="sender")
    return obj


def sender_factory(spec: dict[str, Any]) -> Callable[[dict[str, Any]], Sender]:
    """The function that opens ``spec``'s sender, with every import done up front (so it can
    run on pool threads: :meth:`Sender.preload`)."""
    cls = sender_class(spec)
    cls.preload()
    return cls.from_spec


def open_sender(spec: dict[str, Any]) -> Sender:
    """Turn a sender spec into a connected :class:`Sender` (any process)."""
    return sender_factory(spec)(spec)
