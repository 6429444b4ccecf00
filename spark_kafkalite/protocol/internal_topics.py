"""The internal topics and the coordinator key types, named once for the broker, the client and
the datasource.

Kafka's ``org.apache.kafka.common.internals.Topic`` (``GROUP_METADATA_TOPIC_NAME``,
``TRANSACTION_STATE_TOPIC_NAME``, ``CLUSTER_METADATA_TOPIC_NAME``) and
``FindCoordinatorRequest.CoordinatorType`` (KIP-98 added TRANSACTION, KIP-932 SHARE).
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "CLUSTER_METADATA_TOPIC_NAME",
    "GROUP_METADATA_TOPIC_NAME",
    "INTERNAL_TOPICS",
    "TRANSACTION_STATE_TOPIC_NAME",
    "CoordinatorType",
]

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
"""The group coordinator's committed offsets and group metadata."""

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
"""The transaction coordinator's state of every transactional id."""

CLUSTER_METADATA_TOPIC_NAME = "__cluster_metadata"
"""The controller quorum's Raft journal (KIP-500); never a topic of the metadata image."""

INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME})
"""The topics clients may not produce to and a pattern subscription leaves out
(``Topic.isInternal``)."""


class CoordinatorType(IntEnum):
    """FindCoordinator's ``key_type``: whose coordinator the key names."""

    GROUP = 0
    TRANSACTION = 1
    SHARE = 2
