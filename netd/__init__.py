"""netd: per-host RoCE congestion-control and network telemetry daemon."""

__version__ = "0.1.0"
