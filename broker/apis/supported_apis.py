"""The supported APIs: one literal table of (api_key, served versions, handler, error response,
hand-written codecs), Kafka's ``ApiKeys`` + ``KafkaApis.handle`` dispatch in one place.

``KafkaApis`` dispatches from it and answers ApiVersions from it, so what is advertised is what is
served; no module adds to it at import time. docs/broker.md "Supported APIs" lists the same ranges
(tests/unit/test_supported_apis.py pins both).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.apis import api_versions as api_versions_api
from broker.apis.add_offsets_to_txn import add_offsets_to_txn_error_response, handle_add_offsets_to_txn
from broker.apis.add_partitions_to_txn import (
    add_partitions_to_txn_error_response,
    handle_add_partitions_to_txn,
)
from broker.apis.alter_configs import alter_configs_error_response, handle_alter_configs
from broker.apis.consumer_group_describe import (
    consumer_group_describe_error_response,
    handle_consumer_group_describe,
)
from broker.apis.consumer_group_heartbeat import (
    consumer_group_heartbeat_error_response,
    handle_consumer_group_heartbeat,
)
from broker.apis.context import BrokerContext
from broker.apis.create_acls import create_acls_error_response, handle_create_acls
from broker.apis.create_partitions import create_partitions_error_response, handle_create_partitions
from broker.apis.create_topics import create_topics_error_response, handle_create_topics
from broker.apis.delete_acls import delete_acls_error_response, handle_delete_acls
from broker.apis.delete_groups import delete_groups_error_response, handle_delete_groups
from broker.apis.delete_records import delete_records_error_response, handle_delete_records
from broker.apis.delete_topics import delete_topics_error_response, handle_delete_topics
from broker.apis.describe_acls import describe_acls_error_response, handle_describe_acls
from broker.apis.describe_cluster import describe_cluster_error_response, handle_describe_cluster
from broker.apis.describe_configs import describe_configs_error_response, handle_describe_configs
from broker.apis.describe_groups import describe_groups_error_response, handle_describe_groups
from broker.apis.describe_log_dirs import describe_log_dirs_error_response, handle_describe_log_dirs
from broker.apis.describe_transactions import (
    describe_transactions_error_response,
    handle_describe_transactions,
)
from broker.apis.elect_leaders import elect_leaders_error_response, handle_elect_leaders
from broker.apis.end_txn import end_txn_error_response, handle_end_txn
from broker.apis.fetch import FETCH_DECODERS, fetch_error_response, handle_fetch
from broker.apis.find_coordinator import find_coordinator_error_response, handle_find_coordinator
from broker.apis.heartbeat import handle_heartbeat, heartbeat_error_response
from broker.apis.incremental_alter_configs import (
    handle_incremental_alter_configs,
    incremental_alter_configs_error_response,
)
from broker.apis.init_producer_id import handle_init_producer_id, init_producer_id_error_response
from broker.apis.join_group import handle_join_group, join_group_error_response
from broker.apis.leave_group import handle_leave_group, leave_group_error_response
from broker.apis.list_groups import handle_list_groups, list_groups_error_response
from broker.apis.list_offsets import handle_list_offsets, list_offsets_error_response
from broker.apis.list_offsets_v0 import decode_list_offsets_v0, encode_list_offsets_v0_response
from broker.apis.list_transactions import handle_list_transactions, list_transactions_error_response
from broker.apis.metadata import handle_metadata, metadata_error_response
from broker.apis.offset_commit import handle_offset_commit, offset_commit_error_response
from broker.apis.offset_delete import handle_offset_delete, offset_delete_error_response
from broker.apis.offset_fetch import handle_offset_fetch, offset_fetch_error_response
from broker.apis.offset_for_leader_epoch import (
    handle_offset_for_leader_epoch,
    offset_for_leader_epoch_error_response,
)
from broker.apis.produce import PRODUCE_DECODERS, handle_produce, produce_answered, produce_error_response
from broker.apis.sasl import (
    handle_sasl_authenticate,
    handle_sasl_handshake,
    sasl_authenticate_error_response,
    sasl_handshake_error_response,
)
from broker.apis.share_acknowledge import handle_share_acknowledge, share_acknowledge_error_response
from broker.apis.share_fetch import handle_share_fetch, share_fetch_error_response
from broker.apis.share_group_describe import handle_share_group_describe, share_group_describe_error_response
from broker.apis.share_group_heartbeat import (
    handle_share_group_heartbeat,
    share_group_heartbeat_error_response,
)
from broker.apis.sync_group import handle_sync_group, sync_group_error_response
from broker.apis.txn_offset_commit import handle_txn_offset_commit, txn_offset_commit_error_response
from broker.apis.user_scram_credentials import (
    alter_user_scram_credentials_error_response,
    describe_user_scram_credentials_error_response,
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from broker.apis.write_txn_markers import handle_write_txn_markers, write_txn_markers_error_response
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.fetch_response_encode import encode_fetch_response
from spark_kafkalite.protocol.framing import FrameChunks
from spark_kafkalite.protocol.metadata_response import encode_metadata_response
from spark_kafkalite.protocol.produce_response import encode_produce_response

if TYPE_CHECKING:
    from broker.apis.kio_types import ApiVersionsRequest, ApiVersionsResponse

__all__ = ["ApiSpec", "SUPPORTED_APIS", "Handler", "ErrorResponder"]

Handler = Callable[[BrokerContext, RequestContext, Any], Awaitable[Any]]
ErrorResponder = Callable[[Any, int, ErrorCode], Any]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One supported API.

    Attributes:
        api_key: the API.
        min_version / max_version: versions served.
        handler: ``async handler(ctx, request_context, request) -> response entity | None``.
        error_response: ``error_response(request, version, code)`` -> response entity with
            ``code`` everywhere (Kafka's ``AbstractRequest.getErrorResponse``).
        advertised_min_version: lower bound advertised in ApiVersions if below ``min_version``
            (advertised-only versions close the connection when used).
        decoders: hand-written body decoders (versions kio lacks, or hot paths): version -> fn(frame, offset).
        encoders: matching response encoders: version -> fn(response, correlation_id) -> frame.
        answered: ``answered(request)`` -> whether the client reads a response to it; a failed
            request that is not answered closes the connection (Produce acks=0, as Kafka's
            ``KafkaApis.handleProduceRequest``). None: every request is answered.
    """

    api_key: ApiKey
    min_version: int
    max_version: int
    handler: Handler
    error_response: ErrorResponder
    advertised_min_version: int | None = None
    decoders: dict[int, Callable[[bytes | bytearray, int], Any]] | None = None
    encoders: dict[int, Callable[[Any, int], bytes | FrameChunks]] | None = None
    answered: Callable[[Any], bool] | None = None

    @property
    def advertised_range(self) -> tuple[int, int]:
        low = self.min_version if self.advertised_min_version is None else self.advertised_min_version
        return low, self.max_version


async def _not_dispatched(
    ctx: BrokerContext, rctx: RequestContext, request: ApiVersionsRequest
) -> ApiVersionsResponse:  # pragma: no cover
    raise AssertionError("ApiVersions is handled by KafkaApis itself")


def _api_versions_error(request: ApiVersionsRequest, version: int, code: ErrorCode) -> ApiVersionsResponse:
    return api_versions_api.api_versions_response(version, code, [])


SUPPORTED_APIS: tuple[ApiSpec, ...] = (
    ApiSpec(
        ApiKey.PRODUCE,
        3,
        9,
        handle_produce,
        produce_error_response,
        advertised_min_version=0,
        # on every acknowledged batch's critical path: ~5 us instead of kio's ~35 us
        encoders=dict.fromkeys(range(3, 10), encode_produce_response),
        # records as views into the frame (no copy of the batch before the log write)
        decoders=PRODUCE_DECODERS,
        answered=produce_answered,
    ),
    ApiSpec(
        ApiKey.FETCH,
        4,
        12,
        handle_fetch,
        fetch_error_response,
        encoders=dict.fromkeys(range(4, 13), encode_fetch_response),
        decoders=FETCH_DECODERS,
    ),
    ApiSpec(
        ApiKey.LIST_OFFSETS,
        0,
        7,
        handle_list_offsets,
        list_offsets_error_response,
        decoders={0: decode_list_offsets_v0},
        encoders={0: encode_list_offsets_v0_response},
    ),
    ApiSpec(
        ApiKey.METADATA,
        0,
        12,
        handle_metadata,
        metadata_error_response,
        # topic entries come pre-encoded from the broker's MetadataResponseCache
        encoders=dict.fromkeys(range(13), encode_metadata_response),
    ),
    ApiSpec(ApiKey.ELECT_LEADERS, 0, 2, handle_elect_leaders, elect_leaders_error_response),
    ApiSpec(ApiKey.DESCRIBE_CLUSTER, 0, 1, handle_describe_cluster, describe_cluster_error_response),
    ApiSpec(ApiKey.INIT_PRODUCER_ID, 0, 5, handle_init_producer_id, init_producer_id_error_response),
    # transaction coordinator (KIP-98): the client forms; no transaction.version 2 (EndTxn v5,
    # TxnOffsetCommit v5) and no broker-side AddPartitionsToTxn v4+ (KIP-890 verification)
    ApiSpec(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        0,
        3,
        handle_add_partitions_to_txn,
        add_partitions_to_txn_error_response,
    ),
    ApiSpec(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, handle_add_offsets_to_txn, add_offsets_to_txn_error_response),
    ApiSpec(ApiKey.END_TXN, 0, 4, handle_end_txn, end_txn_error_response),
    ApiSpec(ApiKey.TXN_OFFSET_COMMIT, 0, 4, handle_txn_offset_commit, txn_offset_commit_error_response),
    ApiSpec(
        ApiKey.DESCRIBE_TRANSACTIONS,
        0,
        0,
        handle_describe_transactions,
        describe_transactions_error_response,
    ),
    ApiSpec(ApiKey.LIST_TRANSACTIONS, 0, 2, handle_list_transactions, list_transactions_error_response),
    # transaction coordinator -> partition leaders (KIP-98; v2 is KIP-1228, TV2 only)
    ApiSpec(ApiKey.WRITE_TXN_MARKERS, 1, 1, handle_write_txn_markers, write_txn_markers_error_response),
    ApiSpec(ApiKey.API_VERSIONS, 0, 3, _not_dispatched, _api_versions_error),
    # served before authentication by broker.security.sasl_server_authenticator
    ApiSpec(ApiKey.SASL_HANDSHAKE, 0, 1, handle_sasl_handshake, sasl_handshake_error_response),
    ApiSpec(ApiKey.SASL_AUTHENTICATE, 0, 2, handle_sasl_authenticate, sasl_authenticate_error_response),
    # SCRAM credentials (KIP-554)
    ApiSpec(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        0,
        0,
        handle_describe_user_scram_credentials,
        describe_user_scram_credentials_error_response,
    ),
    ApiSpec(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        0,
        handle_alter_user_scram_credentials,
        alter_user_scram_credentials_error_response,
    ),
    # group coordinator (classic protocol): OffsetCommit v0-1 / OffsetFetch v0 advertised only
    ApiSpec(
        ApiKey.OFFSET_COMMIT,
        2,
        9,
        handle_offset_commit,
        offset_commit_error_response,
        advertised_min_version=0,
    ),
    ApiSpec(
        ApiKey.OFFSET_FETCH, 1, 9, handle_offset_fetch, offset_fetch_error_response, advertised_min_version=0
    ),
    ApiSpec(ApiKey.FIND_COORDINATOR, 0, 6, handle_find_coordinator, find_coordinator_error_response),
    ApiSpec(ApiKey.JOIN_GROUP, 0, 9, handle_join_group, join_group_error_response),
    ApiSpec(ApiKey.HEARTBEAT, 0, 4, handle_heartbeat, heartbeat_error_response),
    ApiSpec(ApiKey.LEAVE_GROUP, 0, 5, handle_leave_group, leave_group_error_response),
    ApiSpec(ApiKey.SYNC_GROUP, 0, 5, handle_sync_group, sync_group_error_response),
    ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 5, handle_describe_groups, describe_groups_error_response),
    ApiSpec(ApiKey.LIST_GROUPS, 0, 5, handle_list_groups, list_groups_error_response),
    ApiSpec(ApiKey.DELETE_GROUPS, 0, 2, handle_delete_groups, delete_groups_error_response),
    # KIP-848 consumer groups (Kafka 4.x serves v0-1 of both)
    ApiSpec(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        0,
        1,
        handle_consumer_group_heartbeat,
        consumer_group_heartbeat_error_response,
    ),
    ApiSpec(
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        0,
        1,
        handle_consumer_group_describe,
        consumer_group_describe_error_response,
    ),
    # KIP-932 share groups (Kafka 4.2 serves ShareGroupHeartbeat / ShareGroupDescribe v1,
    # ShareFetch / ShareAcknowledge v1-2)
    ApiSpec(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        1,
        handle_share_group_heartbeat,
        share_group_heartbeat_error_response,
    ),
    ApiSpec(
        ApiKey.SHARE_GROUP_DESCRIBE,
        1,
        1,
        handle_share_group_describe,
        share_group_describe_error_response,
    ),
    ApiSpec(ApiKey.SHARE_FETCH, 1, 2, handle_share_fetch, share_fetch_error_response),
    ApiSpec(ApiKey.SHARE_ACKNOWLEDGE, 1, 2, handle_share_acknowledge, share_acknowledge_error_response),
    ApiSpec(ApiKey.OFFSET_DELETE, 0, 0, handle_offset_delete, offset_delete_error_response),
    ApiSpec(ApiKey.CREATE_TOPICS, 2, 7, handle_create_topics, create_topics_error_response),
    ApiSpec(ApiKey.DELETE_TOPICS, 1, 6, handle_delete_topics, delete_topics_error_response),
    ApiSpec(ApiKey.DELETE_RECORDS, 0, 2, handle_delete_records, delete_records_error_response),
    ApiSpec(ApiKey.DESCRIBE_CONFIGS, 1, 4, handle_describe_configs, describe_configs_error_response),
    ApiSpec(ApiKey.ALTER_CONFIGS, 0, 2, handle_alter_configs, alter_configs_error_response),
    ApiSpec(ApiKey.DESCRIBE_LOG_DIRS, 1, 4, handle_describe_log_dirs, describe_log_dirs_error_response),
    ApiSpec(ApiKey.CREATE_PARTITIONS, 0, 3, handle_create_partitions, create_partitions_error_response),
    ApiSpec(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        0,
        1,
        handle_incremental_alter_configs,
        incremental_alter_configs_error_response,
    ),
    # ACLs: Kafka 4.0 serves v1-3 (KIP-896)
    ApiSpec(ApiKey.DESCRIBE_ACLS, 1, 3, handle_describe_acls, describe_acls_error_response),
    ApiSpec(ApiKey.CREATE_ACLS, 1, 3, handle_create_acls, create_acls_error_response),
    ApiSpec(ApiKey.DELETE_ACLS, 1, 3, handle_delete_acls, delete_acls_error_response),
    ApiSpec(
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        2,
        4,
        handle_offset_for_leader_epoch,
        offset_for_leader_epoch_error_response,
    ),
)
