"""The web UI's start form: its ssbench fields and their defaults, and the UI's port, declared
once (the form, the sessions, the launcher and ``ssbench web``'s flags read them here).
Imported by the Locust master, so it imports nothing heavy."""

DEFAULT_PAYLOAD_BYTES = 100
DEFAULT_DIALOGS = "per_thread"
#: offered SENDs per second per initiator; 0 is the closed loop (each user SENDs as fast as it can)
DEFAULT_RATE = 0.0
DIALOG_CHOICES = ("per_thread", "trick150", "shared")
DEFAULT_USERS = 8
DEFAULT_SPAWN_RATE = 8.0
DEFAULT_WEB_PORT = 8089   # the web UI's (another free one when busy)
