"""Consumer-group administration for ``KafkaAdminClient`` (Java ``Admin.listConsumerGroups``,
``describeConsumerGroups``, ``listConsumerGroupOffsets``, ``alterConsumerGroupOffsets``,
``deleteConsumerGroups``), plus a lag helper like ``kafka-consumer-groups.sh --describe``.

ListGroups goes to every broker (each lists the groups it coordinates); the other calls go to
the group's coordinator (FindCoordinator first; COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS and connection errors are retried with a fresh lookup until the
timeout). Member assignments are decoded from Java ``ConsumerProtocol`` bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from spark_kafkalite.client.admin_views import GroupDescriptions, GroupLag, group_description_html
from spark_kafkalite.client.consumer.abstract_coordinator import AbstractCoordinator, coordinator_node_id
from spark_kafkalite.client.consumer.group_requests import (
    OffsetAndMetadata,
    consumer_group_describe_request,
    delete_groups_request,
    describe_groups_request,
    list_groups_request,
    offset_commit_request,
    offset_fetch_request,
    parse_offset_commit_response,
    parse_offset_fetch_response,
)
from spark_kafkalite.client.errors import COORDINATOR_RETRY_ERRORS
from spark_kafkalite.client.network_client import now_ms
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
)
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
    error_for_code,
)

if TYPE_CHECKING:
    from spark_kafkalite.client.metadata import Cluster
    from spark_kafkalite.client.network_client import NetworkClient
    from spark_kafkalite.client.types import OffsetAndTimestamp

__all__ = [
    "AdminGroups",
    "ConsumerGroupListing",
    "ConsumerGroupDescription",
    "MemberDescription",
    "PartitionLag",
]

log = logging.getLogger(__name__)


class ConsumerGroupListing(NamedTuple):
    """One group of ``list_consumer_groups``; ``state`` is None from brokers without
    ListGroups v4 (e.g. ``"Stable"``, ``"Empty"``, ``"PreparingRebalance"``)."""

    group_id: str
    is_simple_consumer_group: bool
    state: str | None
    protocol_type: str


class MemberDescription(NamedTuple):
    """A member of a described group; ``assignment`` decoded from the consumer protocol."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: frozenset[TopicPartition]
    #: KIP-848 consumer groups only (Java ``MemberDescription.memberEpoch`` / ``targetAssignment``)
    member_epoch: int | None = None
    target_assignment: frozenset[TopicPartition] | None = None


class ConsumerGroupDescription(NamedTuple):
    """``describe_consumer_groups`` result (Java ``ConsumerGroupDescription``).
    ``partition_assignor`` is the selected protocol (e.g. ``"range"``), ``state`` Kafka's
    group state (``Stable``, ``Empty``, ``Dead`` for an unknown group, ...), ``coordinator``
    ``(broker id, host, port)``."""

    group_id: str
    is_simple_consumer_group: bool
    members: list[MemberDescription]
    partition_assignor: str
    state: str
    coordinator: tuple[int, str, int]
    #: ``classic`` or ``consumer`` (KIP-848; Java ``ConsumerGroupDescription.type``, ``GroupType``)
    type: str = "classic"
    #: KIP-848 consumer groups only (Java ``groupEpoch`` / ``targetAssignmentEpoch``)
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None

    def _repr_html_(self) -> str:
        """Jupyter's view: the group and its members as tables (``admin_views``)."""
        return group_description_html(self)


class PartitionLag(NamedTuple):
    """Committed offset vs log end offset (high watermark) of one partition; ``committed`` is
    None when the group committed nothing there, then ``lag`` is None too."""

    committed: int | None
    log_end_offset: int
    lag: int | None


class AdminGroups:
    """The consumer-group part of ``KafkaAdminClient`` (see module docstring), a component the
    admin client owns and delegates its group methods to (as Kafka's ``KafkaAdminClient`` hands
    group calls to its ``*Handler`` objects). It shares the admin client's ``NetworkClient`` and
    reaches the rest of the admin client only through the three callables it is given.

    Args:
        client: the admin client's network client.
        default_timeout_ms: ``default.api.timeout.ms``; retry_backoff_ms: ``retry.backoff.ms``.
        ensure_open: raises when the admin client is closed.
        describe: ``(topics, timeout_ms) -> Cluster``: one MetadataRequest.
        list_offsets: ``({tp: timestamp}, timeout_ms) -> {tp: OffsetAndTimestamp}`` (ListOffsets).
    """

    def __init__(
        self,
        client: NetworkClient,
        default_timeout_ms: float,
        retry_backoff_ms: float,
        ensure_open: Callable[[], None],
        describe: Callable[[list[str] | None, float | None], Cluster],
        list_offsets: Callable[
            [Mapping[TopicPartition, int], float | None], dict[TopicPartition, OffsetAndTimestamp]
        ],
    ) -> None:
        self._client = client
        self._default_timeout_ms = default_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._ensure_open = ensure_open
        self._describe = describe
        self._list_offsets = list_offsets

    # ------------------------------------------------------------------ plumbing
    def _deadline(self, timeout_ms: float | None) -> float:
        return now_ms() + (self._default_timeout_ms if timeout_ms is None else float(timeout_ms))

    def _find_group_coordinator(self, group_id: str, deadline: float) -> tuple[int, str, int]:
        last: BaseException | None = None
        while True:
            self._describe([], max(1.0, deadline - now_ms()))  # make sure brokers are known
            future = AbstractCoordinator.send_find_coordinator(self._client, group_id)
            try:
                found: tuple[int, str, int] = self._client.wait_for(future, max(1.0, deadline - now_ms()))
                return found
            except KafkaError as exc:
                if not (
                    exc.retriable
                    or isinstance(exc, (KafkaConnectionError, KafkaTimeoutError))
                    or exc.error_code in COORDINATOR_RETRY_ERRORS
                ):
                    raise
                last = exc
            if now_ms() >= deadline:
                raise KafkaTimeoutError(
                    f"cannot find the coordinator of group {group_id} (last error: {last})"
                )
            self._client.poll(min(self._retry_backoff_ms, max(0.0, deadline - now_ms())))

    def _call_coordinator(
        self, group_id: str, builder: RequestBuilder, error_of: Any, timeout_ms: float | None
    ) -> tuple[Any, tuple[int, str, int]]:
        """Send to the group's coordinator until ``error_of(response)`` is not a coordinator
        error; returns ``(response, coordinator)``."""
        self._ensure_open()
        deadline = self._deadline(timeout_ms)
        last: BaseException | None = None
        while True:
            coordinator = self._find_group_coordinator(group_id, deadline)
            node = coordinator_node_id(coordinator[0])
            self._client.add_node(node, coordinator[1], coordinator[2])
            try:
                response = self._client.send_and_wait(node, builder, max(1.0, deadline - now_ms()))
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last = exc
            else:
                code = int(error_of(response))
                if code not in COORDINATOR_RETRY_ERRORS:
                    return response, coordinator
                last = error_for_code(code, f"group {group_id}")
            if now_ms() >= deadline:
                raise KafkaTimeoutError(f"group {group_id}: request did not complete (last error: {last})")
            self._client.poll(min(self._retry_backoff_ms, max(0.0, deadline - now_ms())))

    # ------------------------------------------------------------------ list / describe
    def list_consumer_groups(self, timeout_ms: float | None = None) -> list[ConsumerGroupListing]:
        """Every consumer group (protocol type ``consumer``) and simple group (type ``""``:
        offsets committed without membership) known to any broker, sorted by group id.

        Raises:
            KafkaTimeoutError: a broker did not answer in time. KafkaError: a broker's error.
        """
        self._ensure_open()
        deadline = self._deadline(timeout_ms)
        cluster = self._describe([], timeout_ms)
        found: dict[str, ConsumerGroupListing] = {}
        for broker_id in sorted(cluster.nodes):
            response = self._send_to_broker(broker_id, list_groups_request(), deadline)
            code = int(response.error_code)
            if code != ErrorCode.none:
                raise error_for_code(code, f"ListGroups on broker {broker_id}")
            for g in response.groups:
                protocol_type = str(g.protocol_type or "")
                if protocol_type not in (CONSUMER_PROTOCOL_TYPE, ""):
                    continue
                state = getattr(g, "group_state", None)
                found[str(g.group_id)] = ConsumerGroupListing(
                    str(g.group_id), protocol_type == "", state, protocol_type
                )
        return [found[k] for k in sorted(found)]

    def _send_to_broker(self, broker_id: int, builder: RequestBuilder, deadline: float) -> Any:
        return self._client.send_and_wait_until(broker_id, builder, deadline, self._retry_backoff_ms)

    def describe_consumer_groups(
        self, group_ids: Iterable[str], timeout_ms: float | None = None
    ) -> GroupDescriptions:
        """Members (ids, client ids, hosts, decoded assignments), assignor and state of each
        group (a ``dict``: group id -> ``ConsumerGroupDescription``, shown as tables in a
        notebook). An unknown group is described with state ``Dead`` and no members (as Kafka).

        Raises:
            KafkaError: a group's error (e.g. GROUP_AUTHORIZATION_FAILED). KafkaTimeoutError.
        """
        out = GroupDescriptions()
        for group_id in dict.fromkeys(group_ids):
            consumer_group = self._describe_consumer_group(group_id, timeout_ms)
            if consumer_group is not None:
                out[group_id] = consumer_group
                continue
            response, coordinator = self._call_coordinator(
                group_id,
                describe_groups_request([group_id]),
                lambda r, g=group_id: next((d.error_code for d in r.groups if d.group_id == g), 0),
                timeout_ms,
            )
            for d in response.groups:
                if str(d.group_id) != group_id:
                    continue
                code = int(d.error_code)
                if code == ErrorCode.group_id_not_found:
                    out[group_id] = ConsumerGroupDescription(group_id, True, [], "", "Dead", coordinator)
                    continue
                if code != ErrorCode.none:
                    raise error_for_code(code, f"DescribeGroups of {group_id}")
                protocol_type = str(d.protocol_type or "")
                members = []
                for m in d.members:
                    assignment: frozenset[TopicPartition] = frozenset()
                    if protocol_type == CONSUMER_PROTOCOL_TYPE and m.member_assignment:
                        try:
                            assignment = frozenset(decode_assignment(bytes(m.member_assignment)).partitions)
                        except ConsumerProtocolError as exc:
                            log.warning(
                                "group %s member %s: undecodable assignment: %s", group_id, m.member_id, exc
                            )
                    members.append(
                        MemberDescription(
                            str(m.member_id),
                            getattr(m, "group_instance_id", None),
                            str(m.client_id),
                            str(m.client_host),
                            assignment,
                        )
                    )
                out[group_id] = ConsumerGroupDescription(
                    group_id,
                    protocol_type == "",
                    members,
                    str(d.protocol_data or ""),
                    str(d.group_state),
                    coordinator,
                )
        return out

    def _describe_consumer_group(
        self, group_id: str, timeout_ms: float | None
    ) -> ConsumerGroupDescription | None:
        """A KIP-848 consumer group described with ConsumerGroupDescribe; None when the group is
        not one (GROUP_ID_NOT_FOUND: classic or unknown) or the coordinator lacks the API, so the
        caller uses DescribeGroups (Kafka's ``DescribeConsumerGroupsHandler`` fallback).

        Raises:
            KafkaError: the group's other errors (e.g. GROUP_AUTHORIZATION_FAILED).
        """
        try:
            response, coordinator = self._call_coordinator(
                group_id,
                consumer_group_describe_request([group_id]),
                lambda r: next((d.error_code for d in r.groups if d.group_id == group_id), 0),
                timeout_ms,
            )
        except UnsupportedVersionError:
            return None
        for d in response.groups:
            if str(d.group_id) != group_id:
                continue
            code = int(d.error_code)
            if code == ErrorCode.group_id_not_found:
                return None
            if code != ErrorCode.none:
                raise error_for_code(code, f"ConsumerGroupDescribe of {group_id}")
            members = [
                MemberDescription(
                    str(m.member_id),
                    m.instance_id,
                    str(m.client_id),
                    str(m.client_host),
                    frozenset(
                        TopicPartition(str(tp.topic_name), int(p))
                        for tp in m.assignment.topic_partitions
                        for p in tp.partitions
                    ),
                    int(m.member_epoch),
                    frozenset(
                        TopicPartition(str(tp.topic_name), int(p))
                        for tp in m.target_assignment.topic_partitions
                        for p in tp.partitions
                    ),
                )
                for m in d.members
            ]
            return ConsumerGroupDescription(
                group_id,
                False,
                members,
                str(d.assignor_name),
                str(d.group_state),
                coordinator,
                "consumer",
                int(d.group_epoch),
                int(d.assignment_epoch),
            )
        return None

    # ------------------------------------------------------------------ offsets
    def list_consumer_group_offsets(
        self, group_id: str, timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """Committed offsets of every partition the group committed (OffsetFetch, all topics).

        Raises:
            KafkaError: e.g. GROUP_AUTHORIZATION_FAILED. KafkaTimeoutError.
        """
        return {
            tp: om.offset
            for tp, om in self.list_consumer_group_offsets_and_metadata(group_id, timeout_ms).items()
        }

    def list_consumer_group_offsets_and_metadata(
        self, group_id: str, timeout_ms: float | None = None, *, require_stable: bool = False
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Like ``list_consumer_group_offsets`` with the metadata string and leader epoch.

        ``require_stable`` (Java ``ListConsumerGroupOffsetsOptions.requireStable``, KIP-447): the
        coordinator answers UNSTABLE_OFFSET_COMMIT for a partition with a pending transactional
        commit instead of its last committed offset; the fetch is then retried after
        ``retry.backoff.ms`` until the transaction ends or the timeout passes.

        Raises:
            KafkaError: e.g. GROUP_AUTHORIZATION_FAILED. KafkaTimeoutError.
        """

        def error_of(response: Any) -> int:
            top = int(getattr(response, "error_code", 0) or 0)
            if top:
                return top
            unstable = any(
                p.error_code == ErrorCode.unstable_offset_commit
                for t in response.topics or ()
                for p in t.partitions
            )
            return int(ErrorCode.unstable_offset_commit) if unstable else 0

        deadline = self._deadline(timeout_ms)
        while True:
            response, _ = self._call_coordinator(
                group_id,
                offset_fetch_request(group_id, None, require_stable=require_stable),
                error_of,
                max(1.0, deadline - now_ms()),
            )
            if error_of(response) != ErrorCode.unstable_offset_commit:
                break
            if now_ms() >= deadline:
                raise KafkaTimeoutError(
                    f"OffsetFetch of group {group_id}: offsets still unstable (a transaction is pending)"
                )
            self._client.poll(min(self._retry_backoff_ms, max(0.0, deadline - now_ms())))
        top, found = parse_offset_fetch_response(response)
        if top != ErrorCode.none:
            raise error_for_code(top, f"OffsetFetch of group {group_id}")
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, (om, code) in sorted(found.items()):
            if code != ErrorCode.none:
                raise error_for_code(code, f"OffsetFetch of {tp.topic}-{tp.partition} for group {group_id}")
            if om is not None:
                out[tp] = om
        return out

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: dict[TopicPartition, int], timeout_ms: float | None = None
    ) -> None:
        """Commit ``offsets`` (``{tp: next offset to consume}``) for the group without being a
        member: OffsetCommit with generation -1 and an empty member id, as Kafka's admin does.
        Kafka accepts this only while the group has no active members.

        Raises:
            UnknownMemberIdError: the group has active members. ValueError: a negative offset.
            KafkaError: other per-partition errors (the first one). KafkaTimeoutError.
        """
        resolved: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, offset in offsets.items():
            key = TopicPartition(str(tp[0]), int(tp[1]))
            if int(offset) < 0:
                raise ValueError(f"invalid negative offset {offset} for {key.topic}-{key.partition}")
            resolved[key] = OffsetAndMetadata(int(offset))
        if not resolved:
            return
        builder = offset_commit_request(group_id, -1, "", None, resolved)

        def error_of(response: Any) -> int:
            codes = parse_offset_commit_response(response).values()
            return next((c for c in codes if c in COORDINATOR_RETRY_ERRORS), 0)

        response, _ = self._call_coordinator(group_id, builder, error_of, timeout_ms)
        for tp, code in sorted(parse_offset_commit_response(response).items()):
            if code != ErrorCode.none:
                raise error_for_code(code, f"OffsetCommit of {tp.topic}-{tp.partition} for group {group_id}")

    def delete_consumer_groups(self, group_ids: Iterable[str], timeout_ms: float | None = None) -> None:
        """Delete groups and their committed offsets (DeleteGroups to each coordinator).

        Raises:
            GroupNotEmptyError: the group has members. GroupIdNotFoundError: no such group.
            KafkaError, KafkaTimeoutError. The first error is raised after trying every group.
        """
        first: KafkaError | None = None
        for group_id in dict.fromkeys(group_ids):
            response, _ = self._call_coordinator(
                group_id,
                delete_groups_request([group_id]),
                lambda r, g=group_id: next((x.error_code for x in r.results if x.group_id == g), 0),
                timeout_ms,
            )
            for result in response.results:
                code = int(result.error_code)
                if str(result.group_id) == group_id and code != ErrorCode.none and first is None:
                    first = error_for_code(code, f"DeleteGroups of {group_id}")
        if first is not None:
            raise first

    def consumer_group_lag(
        self, group_id: str, timeout_ms: float | None = None, include_assigned: bool = True
    ) -> GroupLag:
        """Per partition: committed offset, log end offset (high watermark) and lag
        (``log_end_offset - committed``, at least 0), a ``dict`` (TopicPartition ->
        ``PartitionLag``) shown as a table in a notebook. Covers the committed partitions plus,
        with ``include_assigned``, partitions assigned to current members.

        Raises:
            KafkaError, KafkaTimeoutError.
        """
        committed = self.list_consumer_group_offsets(group_id, timeout_ms)
        tps = set(committed)
        if include_assigned:
            description = self.describe_consumer_groups([group_id], timeout_ms).get(group_id)
            if description is not None:
                for member in description.members:
                    tps |= member.assignment
        if not tps:
            return GroupLag(group_id, {})
        existing = self._describe(sorted({tp.topic for tp in tps}), timeout_ms).partitions
        live = {tp for tp in tps if tp.partition in existing.get(tp.topic, {})}
        ends = self._list_offsets({tp: -1 for tp in live}, timeout_ms) if live else {}
        out: dict[TopicPartition, PartitionLag] = {}
        for tp in sorted(tps):
            end = ends[tp].offset if tp in ends else -1
            c = committed.get(tp)
            lag = None if c is None or end < 0 else max(0, end - c)
            out[tp] = PartitionLag(c, end, lag)
        return GroupLag(group_id, out)
