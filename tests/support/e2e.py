"""Cluster options for end-to-end tests: heartbeats and reconnects fast enough that a lost host
is noticed in seconds, not the minutes real deployments allow."""

from heet_tui.cluster import ClusterOptions

FAST = ClusterOptions(heartbeat_s=0.5, heartbeat_timeout_s=4.0, backoff_initial_s=0.2, backoff_max_s=1.0,
                      connect_timeout_s=10.0, keepalive_s=1.0, probes=())
