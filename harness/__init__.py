"""ssbench: load-testing and benchmarking harness for SQL Server Service Broker."""

__version__ = "0.1.0"
