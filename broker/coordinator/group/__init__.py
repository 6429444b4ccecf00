"""Kafka's classic-protocol group coordinator (``GroupCoordinator`` / ``GroupMetadataManager``):
membership (JoinGroup / SyncGroup / Heartbeat / LeaveGroup), committed offsets, and their
persistence in the internal ``__consumer_offsets`` topic."""

from __future__ import annotations

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"

__all__ = ["GROUP_METADATA_TOPIC_NAME"]
