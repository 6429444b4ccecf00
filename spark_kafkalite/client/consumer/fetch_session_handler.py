"""The consumer's ``FetchSessionHandler`` (Java ``org.apache.kafka.clients.FetchSessionHandler``).

The logic is pure and shared with the broker's replica fetcher, so it lives in
:mod:`spark_kafkalite.protocol.fetch_session`; this module re-exports it for the client package.
The ``Fetcher`` keeps one handler per node: full, then incremental fetches (KIP-227), forgotten
partitions, and a full fetch again after a session error or a disconnect.
"""

from __future__ import annotations

from spark_kafkalite.protocol.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchMetadata,
    FetchRequestData,
    FetchSessionBuilder,
    FetchSessionHandler,
    PartitionFetchData,
)

__all__ = [
    "FetchSessionHandler",
    "FetchSessionBuilder",
    "FetchRequestData",
    "FetchMetadata",
    "PartitionFetchData",
    "INVALID_SESSION_ID",
    "INITIAL_EPOCH",
    "FINAL_EPOCH",
]
