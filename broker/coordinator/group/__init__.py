"""Kafka's classic-protocol group coordinator (``GroupCoordinator`` / ``GroupMetadataManager``):
membership (JoinGroup / SyncGroup / Heartbeat / LeaveGroup), committed offsets, and their
persistence in the internal ``__consumer_offsets`` topic."""
