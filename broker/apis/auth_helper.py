"""Authorization checks of the request handlers (Kafka's ``AuthHelper`` in ``KafkaApis``).

Every handler asks :func:`authorize` (one resource) or :func:`authorized_names` (a batch) with
the operation Kafka's ``KafkaApis`` checks for its API; with no authorizer configured
(``authorizer.class.name`` empty) everything is allowed.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType

__all__ = ["authorize", "authorize_cluster", "authorized_names", "authorize_any"]


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
