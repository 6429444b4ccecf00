"""``FetchBuffer``: the completed fetches waiting to be handed out (Java ``FetchBuffer``).

The ``Fetcher`` adds one ``CompletedFetch`` per partition of each fetch response; the
``FetchCollector`` takes them in arrival order, keeping the one being handed out as
``next_in_line`` until it is consumed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from spark_kafkalite.client.consumer.completed_fetch import CompletedFetch
from spark_kafkalite.client.types import TopicPartition

__all__ = ["FetchBuffer"]


class FetchBuffer:
    """Completed fetches in arrival order plus the one being handed out (Java ``FetchBuffer``).
    Not thread-safe: used on the consumer's thread only."""

    __slots__ = ("_completed", "next_in_line")

    def __init__(self) -> None:
        self._completed: deque[CompletedFetch] = deque()
        self.next_in_line: CompletedFetch | None = None

    def add(self, completed_fetch: CompletedFetch) -> None:
        """Queue ``completed_fetch`` behind those already buffered (Java ``FetchBuffer.add``)."""
        self._completed.append(completed_fetch)

    def peek(self) -> CompletedFetch | None:
        """The oldest queued fetch (not ``next_in_line``), or None when none is queued."""
        return self._completed[0] if self._completed else None

    def poll(self) -> CompletedFetch | None:
        """Remove and return the oldest queued fetch, or None when none is queued."""
        return self._completed.popleft() if self._completed else None

    def has_buffered_records(self) -> bool:
        """True while a queued fetch or an unconsumed ``next_in_line`` remains."""
        return bool(self._completed) or (self.next_in_line is not None and not self.next_in_line.consumed)

    def by_partition(self) -> dict[TopicPartition, list[CompletedFetch]]:
        """The unconsumed fetches per partition, ``next_in_line`` first, then in arrival order
        (Java ``FetchBuffer.bufferedPartitions``, with the fetches themselves)."""
        buffered: dict[TopicPartition, list[CompletedFetch]] = {}
        if self.next_in_line is not None and not self.next_in_line.consumed:
            buffered[self.next_in_line.tp] = [self.next_in_line]
        for cf in self._completed:
            buffered.setdefault(cf.tp, []).append(cf)
        return buffered

    def clear(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """Drop everything buffered, or only what belongs to ``tps`` (Java ``FetchBuffer.retainAll``
        with the complement)."""
        if tps is None:
            self._completed.clear()
            self.next_in_line = None
            return
        drop = set(tps)
        self._completed = deque(cf for cf in self._completed if cf.tp not in drop)
        if self.next_in_line is not None and self.next_in_line.tp in drop:
            self.next_in_line = None
