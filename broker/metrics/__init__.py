"""Meters the broker's components update as they work (plain counters, no I/O); the Prometheus
endpoint (``broker.prometheus``) reads them at scrape time."""
