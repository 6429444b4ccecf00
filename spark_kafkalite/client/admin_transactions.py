"""The transactions part of ``KafkaAdminClient`` (Java ``Admin.describeTransactions`` /
``listTransactions``, KIP-664): DescribeTransactions to each transactional id's coordinator
(found with FindCoordinator key type 1) and ListTransactions to every broker, merged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from spark_kafkalite.client.errors import COORDINATOR_RETRY_ERRORS
from spark_kafkalite.client.network_client import now_ms
from spark_kafkalite.client.producer.txn_requests import find_coordinator_request
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    KafkaError,
    KafkaTimeoutError,
    error_for_code,
)
from spark_kafkalite.protocol.internal_topics import CoordinatorType

if TYPE_CHECKING:
    from spark_kafkalite.client.metadata import Cluster
    from spark_kafkalite.client.network_client import NetworkClient

__all__ = ["AdminTransactions", "TransactionDescription", "TransactionListing"]


class TransactionDescription(NamedTuple):
    """Java ``TransactionDescription``: the coordinator's view of one transactional id. ``state``
    is the coordinator's state name (Empty, Ongoing, PrepareCommit, PrepareAbort,
    CompleteCommit, CompleteAbort, Dead, PrepareEpochFence); ``transaction_start_time_ms`` is
    None when no transaction is open; ``topic_partitions`` sorted."""

    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None
    topic_partitions: tuple[TopicPartition, ...]


class TransactionListing(NamedTuple):
    """Java ``TransactionListing``: one transactional id known to a coordinator, plus the id of
    the broker that listed it (Java's ``ListTransactionsResult.allByBrokerId`` key)."""

    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


def describe_transactions_request(transactional_ids: Iterable[str]) -> RequestBuilder:
    ids = tuple(transactional_ids)

    def build(version: int) -> Any:
        return make(request_class(ApiKey.DESCRIBE_TRANSACTIONS, version), transactional_ids=ids)

    return RequestBuilder(ApiKey.DESCRIBE_TRANSACTIONS, build)


def list_transactions_request(
    state_filters: Iterable[str],
    producer_id_filters: Iterable[int],
    duration_filter_ms: int,
    transactional_id_pattern: str | None = None,
) -> RequestBuilder:
    """ListTransactions; ``duration_filter_ms`` >= 0 (only transactions open at least that long)
    needs v1 (KIP-994), a ``transactional_id_pattern`` (an RE2 regular expression the whole id
    must match) v2 (KIP-1152)."""
    states = tuple(state_filters)
    pids = tuple(int(p) for p in producer_id_filters)

    def build(version: int) -> Any:
        return make(
            request_class(ApiKey.LIST_TRANSACTIONS, version),
            state_filters=states,
            producer_id_filters=pids,
            duration_filter=duration_filter_ms,
            transactional_id_pattern=transactional_id_pattern,
        )

    if transactional_id_pattern is not None:
        min_version: int | None = 2
    else:
        min_version = 1 if duration_filter_ms >= 0 else None
    return RequestBuilder(ApiKey.LIST_TRANSACTIONS, build, min_version=min_version)


class AdminTransactions:
    """See module docstring; a component of ``KafkaAdminClient`` sharing its network client.

    Args:
        client: the admin client's network client.
        default_timeout_ms: ``default.api.timeout.ms``; retry_backoff_ms: ``retry.backoff.ms``.
        ensure_open: raises when the admin client is closed.
        describe: ``(topics, timeout_ms) -> Cluster``: one MetadataRequest.
    """

    def __init__(
        self,
        client: NetworkClient,
        default_timeout_ms: float,
        retry_backoff_ms: float,
        ensure_open: Callable[[], None],
        describe: Callable[[list[str] | None, float | None], Cluster],
    ) -> None:
        self._client = client
        self._default_timeout_ms = default_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._ensure_open = ensure_open
        self._describe = describe

    def _send(self, broker_id: int, builder: RequestBuilder, deadline: float) -> Any:
        return self._client.send_and_wait_until(broker_id, builder, deadline, self._retry_backoff_ms)

    def _find_coordinator(self, transactional_id: str, deadline: float) -> int:
        while True:
            cluster = self._describe([], max(1.0, deadline - now_ms()))
            node = self._client.least_loaded_node()
            if node is None:
                node = min(cluster.nodes)
            response = self._send(
                node, find_coordinator_request(transactional_id, CoordinatorType.TRANSACTION), deadline
            )
            code = int(response.error_code)
            if code == ErrorCode.none:
                broker_id = int(response.node_id)
                if broker_id not in cluster.nodes:
                    self._client.add_node(broker_id, str(response.host), int(response.port))
                return broker_id
            error = error_for_code(code, f"transactional id {transactional_id!r}")
            if not error.retriable and code not in COORDINATOR_RETRY_ERRORS:
                raise error
            if now_ms() >= deadline:
                raise KafkaTimeoutError(
                    f"cannot find the coordinator of transactional id {transactional_id!r}: {error}"
                )
            self._client.poll(self._retry_backoff_ms)

    def describe_transactions(
        self, transactional_ids: Iterable[str], timeout_ms: float | None = None
    ) -> dict[str, TransactionDescription]:
        """State, producer id/epoch, timeout, start time and partitions of each transactional id,
        from its coordinator (DescribeTransactions v0).

        Raises:
            TransactionalIdNotFoundError: an id the coordinator does not know (or Dead).
            TransactionalIdAuthorizationFailedError / KafkaError: another error of an id.
            KafkaTimeoutError: no answer within ``timeout_ms`` (default ``default.api.timeout.ms``).
        """
        self._ensure_open()
        deadline = now_ms() + (self._default_timeout_ms if timeout_ms is None else float(timeout_ms))
        out: dict[str, TransactionDescription] = {}
        for transactional_id in dict.fromkeys(transactional_ids):
            while True:
                coordinator = self._find_coordinator(transactional_id, deadline)
                response = self._send(
                    coordinator, describe_transactions_request([transactional_id]), deadline
                )
                state = next(
                    (s for s in response.transaction_states if str(s.transactional_id) == transactional_id),
                    None,
                )
                if state is None:
                    raise KafkaError(f"DescribeTransactions: no answer for {transactional_id!r}")
                code = int(state.error_code)
                if code in COORDINATOR_RETRY_ERRORS and now_ms() < deadline:
                    self._client.poll(self._retry_backoff_ms)
                    continue
                if code != ErrorCode.none:
                    raise error_for_code(code, f"transactional id {transactional_id!r}")
                start_ms = int(state.transaction_start_time_ms)
                out[transactional_id] = TransactionDescription(
                    transactional_id,
                    coordinator,
                    str(state.transaction_state),
                    int(state.producer_id),
                    int(state.producer_epoch),
                    int(state.transaction_timeout_ms),
                    start_ms if start_ms >= 0 else None,
                    tuple(
                        sorted(
                            TopicPartition(str(t.topic), int(p)) for t in state.topics for p in t.partitions
                        )
                    ),
                )
                break
        return out

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_filter_ms: int = -1,
        timeout_ms: float | None = None,
        transactional_id_pattern: str | None = None,
    ) -> list[TransactionListing]:
        """Every transactional id known to any broker's coordinator (ListTransactions to each
        broker), optionally only those in ``states`` / of ``producer_ids`` / open at least
        ``duration_filter_ms`` / whose whole id the RE2 regular expression
        ``transactional_id_pattern`` matches (KIP-1152); sorted by id.

        Raises:
            KafkaTimeoutError: a broker did not answer in time. UnsupportedVersionError: a filter
            the broker's ListTransactions versions lack. InvalidRegularExpressionError (a
            KafkaError): the brokers refused the pattern. KafkaError: a broker's other error.
        """
        self._ensure_open()
        deadline = now_ms() + (self._default_timeout_ms if timeout_ms is None else float(timeout_ms))
        cluster = self._describe([], timeout_ms)
        states, producer_ids = list(states), list(producer_ids)
        found: dict[str, TransactionListing] = {}
        for broker_id in sorted(cluster.nodes):
            builder = list_transactions_request(
                states, producer_ids, duration_filter_ms, transactional_id_pattern
            )
            response = self._send(broker_id, builder, deadline)
            code = int(response.error_code)
            if code in (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available):
                continue  # no transaction state loaded on that broker (yet): nothing to list
            if code != ErrorCode.none:
                pattern = (
                    ""
                    if transactional_id_pattern is None
                    else f" (transactional id pattern {transactional_id_pattern!r})"
                )
                raise error_for_code(code, f"ListTransactions on broker {broker_id}{pattern}")
            for t in response.transaction_states:
                found[str(t.transactional_id)] = TransactionListing(
                    str(t.transactional_id), int(t.producer_id), str(t.transaction_state), broker_id
                )
        return [found[k] for k in sorted(found)]
