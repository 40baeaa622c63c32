"""Prometheus metrics (multiprocess files, scrape-time collectors, the job listener), OpenTelemetry
traces and the log format of every process."""
