"""TxnOffsetCommit (key 28), v0-4, sent by a transactional producer to the *group* coordinator
(Kafka's ``KafkaApis.handleTxnOffsetCommitRequest`` + the group coordinator's transactional
commit). The offsets are written to ``__consumer_offsets`` as a transactional batch of the
producer and stay pending (invisible to OffsetFetch, UNSTABLE_OFFSET_COMMIT with
``require_stable``) until the transaction's COMMIT marker; an ABORT drops them.

Authorization (``KafkaApis``): WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED everywhere), READ on the group (else
GROUP_AUTHORIZATION_FAILED everywhere), READ per topic (TOPIC_AUTHORIZATION_FAILED for its
partitions). Partitions unknown to the metadata get UNKNOWN_TOPIC_OR_PARTITION; metadata longer than
``offset.metadata.max.bytes`` OFFSET_METADATA_TOO_LARGE; v3+ member / generation are validated
as for OffsetCommit (an unknown group with generation >= 0: ILLEGAL_GENERATION).
COORDINATOR_LOAD_IN_PROGRESS is COORDINATOR_NOT_AVAILABLE below v2 (``KafkaApis``). v4 only adds
TRANSACTION_ABORTABLE (never sent here); v5 (transaction.version 2) is not served.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.txn_offset_commit.v2.request import TxnOffsetCommitRequestPartition as PartitionV2
from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequest as TxnOffsetCommitRequestV3
from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequestPartition as PartitionV3
from kio.schema.txn_offset_commit.v4.request import TxnOffsetCommitRequest as TxnOffsetCommitRequestV4
from kio.schema.txn_offset_commit.v4.request import TxnOffsetCommitRequestPartition as PartitionV4

from broker.apis.auth_helper import authorize, authorized_names
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import coordinator_of
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.group_records import OffsetAndMetadata

if TYPE_CHECKING:
    from broker.apis.kio_types import TxnOffsetCommitRequest, TxnOffsetCommitResponse

#: v2+ partitions carry the committed leader epoch (KIP-320)
_LEADER_EPOCH_PARTITIONS = (PartitionV2, PartitionV3, PartitionV4)

__all__ = ["handle_txn_offset_commit", "txn_offset_commit_error_response"]


def _response(
    version: int, request: TxnOffsetCommitRequest, errors: dict[tuple[str, int], int] | None, code: ErrorCode
) -> TxnOffsetCommitResponse:
    cls = response_class(ApiKey.TXN_OFFSET_COMMIT, version)
    topic_cls = nested(cls, "TxnOffsetCommitResponseTopic")
    partition_cls = nested(cls, "TxnOffsetCommitResponsePartition")

    def error_of(topic: str, partition: int) -> ErrorCode:
        value = code if errors is None else ErrorCode(errors.get((topic, partition), 0))
        if value == ErrorCode.coordinator_load_in_progress and version < 2:
            return ErrorCode.coordinator_not_available
        return value

    return build(
        cls,
        throttle_time=ZERO_DURATION,
        topics=tuple(
            topic_cls(
                name=t.name,
                partitions=tuple(
                    partition_cls(
                        partition_index=p.partition_index, error_code=error_of(t.name, p.partition_index)
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )


def _member(request: TxnOffsetCommitRequest) -> tuple[str, str | None, int]:
    """(member id, group instance id, generation id): v3+ names the group member so the
    coordinator can fence zombies (KIP-447); before, ("", None, -1)."""
    if isinstance(request, TxnOffsetCommitRequestV3 | TxnOffsetCommitRequestV4):
        return request.member_id, request.group_instance_id, int(request.generation_id)
    return "", None, -1


async def handle_txn_offset_commit(
    ctx: BrokerContext, rctx: RequestContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    """Handle a TxnOffsetCommitRequest."""
    version = rctx.api_version
    if not authorize(ctx, rctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _response(version, request, None, ErrorCode.transactional_id_authorization_failed)
    if not authorize(ctx, rctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(version, request, None, ErrorCode.group_authorization_failed)
    coordinator = coordinator_of(ctx)
    now_ms = coordinator.scheduler.now_ms()
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for topic in request.topics:
        for p in topic.partitions:
            offsets[(str(topic.name), int(p.partition_index))] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if isinstance(p, _LEADER_EPOCH_PARTITIONS) else -1,
                metadata=p.committed_metadata or "",
                commit_timestamp_ms=now_ms,
            )
    readable = authorized_names(ctx, rctx, AclOperation.READ, ResourceType.TOPIC, {t for t, _ in offsets})
    errors = {tp: int(ErrorCode.topic_authorization_failed) for tp in offsets if tp[0] not in readable}
    errors.update(
        (tp, int(ErrorCode.unknown_topic_or_partition))
        for tp in offsets
        if tp not in errors and ctx.image.partition(tp[0], tp[1]) is None
    )
    known = {tp: value for tp, value in offsets.items() if tp not in errors}
    if known:
        errors.update(
            await coordinator.offsets.handle_txn_commit_offsets(
                request.group_id,
                int(request.producer_id),
                int(request.producer_epoch),
                *_member(request),
                known,
            )
        )
    return _response(version, request, errors, ErrorCode.none)


def txn_offset_commit_error_response(
    request: TxnOffsetCommitRequest, version: int, code: ErrorCode
) -> TxnOffsetCommitResponse:
    return _response(version, request, None, code)
