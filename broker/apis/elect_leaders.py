"""ElectLeaders (key 43), v0-v2 (KIP-460; ``ControllerApis.handleElectLeaders`` +
``ReplicationControlManager.electLeaders``).

``election_type`` 0 = PREFERRED (v0 is always preferred): make ``replicas[0]`` the leader when it
is alive and in the ISR; 1 = UNCLEAN: give a leaderless partition the first live replica even
outside the ISR (acknowledged records may be lost). ``topic_partitions`` null = every partition
(then partitions needing no election are left out of the response, as in Kafka).

Per partition: NONE (elected), ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER (quorum unavailable);
an unknown ``election_type`` is INVALID_REQUEST for the whole request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.elect_leaders.v1.request import ElectLeadersRequest as ElectLeadersRequestV1
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest as ElectLeadersRequestV2

from broker.apis.auth_helper import authorize_cluster
from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import ElectLeadersRequest, ElectLeadersResponse

_TYPED_VERSIONS = (ElectLeadersRequestV1, ElectLeadersRequestV2)

__all__ = ["handle_elect_leaders", "elect_leaders_error_response"]

_MESSAGES = {
    ErrorCode.election_not_needed: "Leader election not needed for topic partition.",
    ErrorCode.preferred_leader_not_available: "Failed to elect leader: the preferred replica is not alive or not in the ISR.",
    ErrorCode.eligible_leaders_not_available: "No live replica can be elected leader.",
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.not_controller: "The controller quorum is not available.",
}


def _response(
    cls: type[Any], top: ErrorCode, results: dict[tuple[str, int], ErrorCode]
) -> ElectLeadersResponse:
    topic_cls = nested(cls, "ReplicaElectionResult")
    part_cls = nested(cls, "PartitionResult")
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in sorted(results.items()):
        by_topic.setdefault(topic, []).append(
            part_cls(partition_id=partition, error_code=code, error_message=_MESSAGES.get(code))
        )
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        error_code=top,
        replica_election_results=tuple(
            topic_cls(topic=topic, partition_result=tuple(parts)) for topic, parts in by_topic.items()
        ),
    )


async def handle_elect_leaders(
    ctx: BrokerContext, rctx: RequestContext, request: ElectLeadersRequest
) -> ElectLeadersResponse:
    """Handle an ElectLeadersRequest (v0-v2); needs ALTER on the cluster (else
    CLUSTER_AUTHORIZATION_FAILED everywhere)."""
    if not authorize_cluster(ctx, rctx, AclOperation.ALTER):
        return elect_leaders_error_response(request, rctx.api_version, ErrorCode.cluster_authorization_failed)
    cls = response_class(ApiKey.ELECT_LEADERS, rctx.api_version)
    # v0 elects the preferred leader only; v1+ names the election type (KIP-460)
    election_type = int(request.election_type) if isinstance(request, _TYPED_VERSIONS) else 0
    if election_type not in (0, 1):
        return _response(cls, ErrorCode.invalid_request, {})
    wanted: list[tuple[str, int]] | None = None
    if request.topic_partitions is not None:
        wanted = [(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
    results = await ctx.controller.elect_preferred_leaders(wanted, unclean=election_type == 1)
    if wanted is None:
        results = {k: v for k, v in results.items() if v != ErrorCode.election_not_needed}
    return _response(cls, ErrorCode.none, results)


def elect_leaders_error_response(
    request: ElectLeadersRequest, version: int, code: ErrorCode
) -> ElectLeadersResponse:
    """``code`` for every requested partition (and at the top level, v1+)."""
    cls = response_class(ApiKey.ELECT_LEADERS, version)
    results = {(str(t.topic), int(p)): code for t in (request.topic_partitions or ()) for p in t.partitions}
    return _response(cls, code, results)
