"""Authorization checks of the request handlers (Kafka's ``AuthHelper`` in ``KafkaApis``).

Every handler asks :func:`authorize` (one resource) or :func:`authorized_names` (a batch) with
the operation Kafka's ``KafkaApis`` checks for its API; with no authorizer configured
(``authorizer.class.name`` empty) everything is allowed.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    operations_bitfield,
)
from spark_kafkalite.protocol.configs import ConfigResourceType
from spark_kafkalite.protocol.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
)

__all__ = [
    "authorize",
    "authorize_cluster",
    "authorized_names",
    "authorize_any",
    "config_resource_error",
    "acl_api_error",
    "authorized_operations",
    "cluster_authorized_operations",
]


def authorize(
    ctx: BrokerContext, rctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str
) -> bool:
    """Whether the request's principal (from its client host) may ``operation`` on the resource."""
    authorizer = ctx.authorizer
    return authorizer is None or authorizer.authorize(
        rctx.principal, rctx.client_host, operation, resource_type, name
    )


def authorize_cluster(ctx: BrokerContext, rctx: RequestContext, operation: AclOperation) -> bool:
    """:func:`authorize` on the cluster resource (``kafka-cluster``)."""
    return authorize(ctx, rctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def authorized_operations(
    ctx: BrokerContext, rctx: RequestContext, resource_type: ResourceType, name: str
) -> int:
    """KIP-430 bitfield of the operations the principal may perform on one resource
    (``AuthHelper.authorizedOperations``): every operation the resource type supports
    (:data:`~spark_kafkalite.protocol.acl.SUPPORTED_OPERATIONS`) without an authorizer, else
    those the authorizer allows (with its implications: READ allows DESCRIBE, and so on)."""
    supported = SUPPORTED_OPERATIONS[resource_type]
    authorizer = ctx.authorizer
    if authorizer is None:
        return operations_bitfield(supported)
    principal, host = rctx.principal, rctx.client_host
    return operations_bitfield(
        op for op in supported if authorizer.authorize(principal, host, op, resource_type, name)
    )


def cluster_authorized_operations(ctx: BrokerContext, rctx: RequestContext) -> int:
    """KIP-430 ``cluster_authorized_operations`` of Metadata and DescribeCluster when the
    request asks for it (``KafkaApis``): 0 without DESCRIBE on the cluster, else
    :func:`authorized_operations` of the cluster."""
    if not authorize_cluster(ctx, rctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(ctx, rctx, ResourceType.CLUSTER, CLUSTER_NAME)


def acl_api_error(ctx: BrokerContext, rctx: RequestContext, operation: AclOperation) -> KafkaError | None:
    """Why an ACL API (DescribeAcls, CreateAcls, DeleteAcls) is refused, if it is (Kafka's
    ``AclApis``): SECURITY_DISABLED ("No Authorizer is configured.") without an authorizer,
    CLUSTER_AUTHORIZATION_FAILED without ``operation`` on the cluster (DESCRIBE to read ACLs,
    ALTER to change them); None when allowed."""
    if ctx.authorizer is None:
        return SecurityDisabledError("No Authorizer is configured.")
    if not authorize_cluster(ctx, rctx, operation):
        return ClusterAuthorizationFailedError()
    return None


def authorized_names(
    ctx: BrokerContext,
    rctx: RequestContext,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
) -> set[str]:
    """The subset of ``names`` the principal may ``operation`` on (``AuthHelper.filterByAuthorized``)."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return set(names)
    return {
        n
        for n in set(names)
        if authorizer.authorize(rctx.principal, rctx.client_host, operation, resource_type, n)
    }


def authorize_any(
    ctx: BrokerContext, rctx: RequestContext, operation: AclOperation, resource_type: ResourceType
) -> bool:
    """Whether the principal may ``operation`` on some resource of ``resource_type``
    (``Authorizer.authorizeByResourceType``)."""
    authorizer = ctx.authorizer
    return authorizer is None or authorizer.authorize_any(
        rctx.principal, rctx.client_host, operation, resource_type
    )


def config_resource_error(
    ctx: BrokerContext, rctx: RequestContext, operation: AclOperation, resource_type: int, name: str
) -> KafkaError | None:
    """DescribeConfigs / AlterConfigs / IncrementalAlterConfigs authorization of one config
    resource (``AuthHelper`` / ``ConfigHelper``): a topic needs ``operation`` on the topic
    (TOPIC_AUTHORIZATION_FAILED), a broker, broker logger or client-metrics resource on the
    cluster (CLUSTER_AUTHORIZATION_FAILED), a group on the group (GROUP_AUTHORIZATION_FAILED).
    None when allowed (or the type is unknown: refused later as unsupported)."""
    if ctx.authorizer is None:
        return None
    kind = int(resource_type)
    if kind == ConfigResourceType.TOPIC:
        if not authorize(ctx, rctx, operation, ResourceType.TOPIC, name):
            return TopicAuthorizationFailedError(f"Not authorized to access the configs of topic {name}")
    elif kind in (
        ConfigResourceType.BROKER,
        ConfigResourceType.BROKER_LOGGER,
        ConfigResourceType.CLIENT_METRICS,
    ):
        if not authorize_cluster(ctx, rctx, operation):
            return ClusterAuthorizationFailedError("Cluster authorization failed.")
    elif kind == ConfigResourceType.GROUP and not authorize(ctx, rctx, operation, ResourceType.GROUP, name):
        return GroupAuthorizationFailedError(f"Not authorized to access the configs of group {name}")
    return None
