"""DescribeCluster (key 60), v0-v1 (KIP-700; ``KafkaApis.handleDescribeCluster``): the live
brokers (registered, unfenced) with their endpoints on the listener the request came in on, the
cluster id and the active controller. v1 ``endpoint_type`` 1 = brokers; 2 (controllers) is
UNSUPPORTED_ENDPOINT_TYPE (our controllers speak Raft, not the Kafka protocol).
``include_cluster_authorized_operations`` (KIP-430) fills ``cluster_authorized_operations`` with
the bitfield of the operations the principal may perform on the cluster (0 without DESCRIBE on
it); otherwise it is INT32_MIN."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.describe_cluster.v1.request import DescribeClusterRequest as DescribeClusterRequestV1

from broker.apis.auth_helper import cluster_authorized_operations
from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import DescribeClusterRequest, DescribeClusterResponse

__all__ = ["handle_describe_cluster", "describe_cluster_error_response"]

_NO_AUTHORIZED_OPERATIONS = -2147483648


def _endpoint_type(request: DescribeClusterRequest) -> int:
    """The endpoint type asked for: v1+ names it (KIP-919), v0 means brokers (1)."""
    return int(request.endpoint_type) if isinstance(request, DescribeClusterRequestV1) else 1


async def handle_describe_cluster(
    ctx: BrokerContext, rctx: RequestContext, request: DescribeClusterRequest
) -> DescribeClusterResponse:
    """Handle a DescribeClusterRequest (v0-v1)."""
    cls = response_class(ApiKey.DESCRIBE_CLUSTER, rctx.api_version)
    endpoint_type = _endpoint_type(request)
    if endpoint_type != 1:
        return describe_cluster_error_response(request, rctx.api_version, ErrorCode.unsupported_endpoint_type)
    broker_cls = nested(cls, "DescribeClusterBroker")
    image = ctx.image
    brokers = []
    for node_id in image.live_brokers():
        endpoint = image.brokers[node_id].endpoints.get(rctx.listener_name)
        if endpoint is not None:
            brokers.append(
                broker_cls(
                    broker_id=node_id, host=endpoint[0], port=endpoint[1], rack=image.brokers[node_id].rack
                )
            )
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id=image.cluster_id,
        controller_id=ctx.controller.controller_id,
        brokers=tuple(brokers),
        cluster_authorized_operations=(
            cluster_authorized_operations(ctx, rctx)
            if request.include_cluster_authorized_operations
            else _NO_AUTHORIZED_OPERATIONS
        ),
    )


def describe_cluster_error_response(
    request: DescribeClusterRequest, version: int, code: ErrorCode
) -> DescribeClusterResponse:
    """An empty response carrying ``code``."""
    cls = response_class(ApiKey.DESCRIBE_CLUSTER, version)
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        error_code=code,
        error_message=None,
        endpoint_type=_endpoint_type(request),
        cluster_id="",
        controller_id=-1,
        brokers=(),
        cluster_authorized_operations=_NO_AUTHORIZED_OPERATIONS,
    )
