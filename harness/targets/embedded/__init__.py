"""The embedded target: Service Broker emulated on a private PostgreSQL server."""
