"""Replication: replica manager, replica fetchers, fetch sessions (Kafka's kafka.server replication classes)."""
