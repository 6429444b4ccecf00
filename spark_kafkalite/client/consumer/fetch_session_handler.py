"""``FetchSessionHandler``: what a FetchRequest to one node carries (Java ``FetchSessionHandler``).

This version is sessionless: every request is a full fetch with ``session_id = 0`` and
``session_epoch = -1`` (KIP-227's FINAL_EPOCH: "no session"), listing every partition. Incremental
fetch sessions slot in here later: ``build`` would send only changed partitions plus
``forgotten`` ones and ``handle_response`` would track the broker's session id and epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spark_kafkalite.client.types import TopicPartition

__all__ = ["FetchSessionHandler", "FetchRequestData", "PartitionFetchData"]

INVALID_SESSION_ID = 0
FINAL_EPOCH = -1


@dataclass(frozen=True, slots=True)
class PartitionFetchData:
    """One partition of a fetch: where to read and how much."""

    fetch_offset: int
    current_leader_epoch: int
    max_bytes: int


@dataclass(slots=True)
class FetchRequestData:
    """The partitions to put in the request, the ones to forget, and the session fields."""

    to_send: dict[TopicPartition, PartitionFetchData]
    forgotten: list[TopicPartition] = field(default_factory=list)
    session_id: int = INVALID_SESSION_ID
    session_epoch: int = FINAL_EPOCH


class FetchSessionHandler:
    """Builds fetch request data for one node (sessionless for now; see module docstring)."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id

    def build(self, partitions: dict[TopicPartition, PartitionFetchData]) -> FetchRequestData:
        return FetchRequestData(to_send=dict(partitions))

    def handle_response(self, response: Any) -> bool:
        """Accept a response; False means the session broke and the next fetch must be full."""
        return int(getattr(response, "error_code", 0)) == 0

    def handle_error(self, exc: BaseException) -> None:
        """A request failed (disconnect/timeout): the next fetch is full."""
