"""``commitOffsetsToGroup=true``: the processed offsets of a streaming query, committed to the
consumer group ``kafka.group.id`` so that Kafka lag tools (``kafkalite groups describe``,
``kafka-consumer-groups.sh``, any Kafka admin client, Burrow...) see the query's lag.

Spark's Kafka source never commits offsets (SPARK-27549 was never merged); Flink's source commits
on checkpoint completion, for monitoring only. kafkalite does the same: the checkpoint stays the
source of truth (a restart resumes from it, never from the group), and the group's offsets are a
copy of it, written with an admin OffsetCommit (generation -1, empty member id, as Kafka's
``Admin.alterConsumerGroupOffsets``) so the group needs no members.

When offsets are committed (driver, streaming source runner):

- ``latestOffset(start)``: ``start`` is the end of the last micro-batch, which Spark has
  processed and recorded in its commit log before it plans the next one;
- ``commit(end)``: Spark's own signal that the batch ending at ``end`` is done (called when the
  *next* batch is planned, so it lags one batch behind the first point).

A commit waits at most ``commit_timeout_ms`` (10 s); a failed commit is logged and retried at
a later trigger, after a back-off that doubles from 5 s to 60 s so that an unavailable group
coordinator cannot slow the query down. It never fails the query. Offsets
that are ``-1``/``-2`` markers (a ``latest``/``earliest`` start not yet resolved) are skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.datasource.offsets import PartitionOffsetMap, to_offset_dict

__all__ = ["GroupOffsetCommitter"]

log = logging.getLogger(__name__)


class GroupOffsetCommitter:
    """Commits offset maps to one consumer group, skipping repeats of the last committed map.

    Args:
        group_id: the ``kafka.group.id`` option.
        client_config: ``kafka.*`` options without the prefix.
        admin_factory: ``config -> admin client`` (tests may pass a fake; default
            :class:`~spark_kafkalite.client.KafkaAdminClient`).
        commit_timeout_ms: the longest one commit may take.
        backoff_s: first pause after a failure (doubles up to ``max_backoff_s``).
    """

    def __init__(
        self,
        group_id: str,
        client_config: Mapping[str, str],
        admin_factory: Any = None,
        *,
        commit_timeout_ms: int = 10_000,
        backoff_s: float = 5.0,
        max_backoff_s: float = 60.0,
    ) -> None:
        self.group_id = group_id
        self.client_config = dict(client_config)
        self._admin_factory = admin_factory
        self._admin: Any = None
        self._last_committed: PartitionOffsetMap = {}
        self.commit_timeout_ms = commit_timeout_ms
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._next_backoff_s = backoff_s
        self._retry_at = float("-inf")
        self.commits = 0
        self.failures = 0

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_admin"] = None
        return state

    def _get_admin(self) -> Any:
        if self._admin is None:
            factory = self._admin_factory
            if factory is None:
                from spark_kafkalite.client import KafkaAdminClient as factory
            config = dict(self.client_config)
            config.pop("group.id", None)
            config.setdefault("client.id", "kafkalite-spark-group-committer")
            self._admin = factory(config)
        return self._admin

    def commit(self, offsets: Mapping[TopicPartition, int]) -> bool:
        """Commit the concrete (>= 0) offsets of ``offsets``; returns True when something was
        committed, False when there was nothing new or the commit failed (logged)."""
        concrete = {TopicPartition(tp[0], tp[1]): off for tp, off in offsets.items() if off >= 0}
        changed = {tp: off for tp, off in concrete.items() if self._last_committed.get(tp) != off}
        if not changed or time.monotonic() < self._retry_at:
            return False
        try:
            admin = self._get_admin()
            alter = getattr(admin, "alter_consumer_group_offsets", None)
            if alter is None:
                raise NotImplementedError("this client has no KafkaAdminClient.alter_consumer_group_offsets")
            alter(self.group_id, concrete, timeout_ms=self.commit_timeout_ms)
        except Exception as exc:  # noqa: BLE001 - monitoring must never fail the query
            self.failures += 1
            log.warning(
                "commitOffsetsToGroup: committing %s to group '%s' failed (retrying in %.0f s): %s",
                to_offset_dict(concrete),
                self.group_id,
                self._next_backoff_s,
                exc,
            )
            self._retry_at = time.monotonic() + self._next_backoff_s
            self._next_backoff_s = min(self._next_backoff_s * 2, self.max_backoff_s)
            self.close()
            return False
        self._next_backoff_s = self.backoff_s
        self._last_committed.update(concrete)
        self.commits += 1
        log.info("committed offsets %s to consumer group '%s'", to_offset_dict(concrete), self.group_id)
        return True

    def close(self) -> None:
        """Close the admin client (safe to call twice)."""
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:  # noqa: BLE001
                log.debug("error closing admin client", exc_info=True)
