"""DescribeAcls (key 29), v1-3 (``AclApis.handleDescribeAcls``): needs DESCRIBE on the cluster
(else CLUSTER_AUTHORIZATION_FAILED); no authorizer configured -> SECURITY_DISABLED; a filter
with an UNKNOWN field -> INVALID_REQUEST. The ACLs matching the filter come from the broker's
metadata image, grouped by resource pattern."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis.auth_helper import acl_api_error
from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclBinding, AclBindingFilter, AclOperation
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import DescribeAclsRequest, DescribeAclsResponse

__all__ = ["handle_describe_acls", "describe_acls_error_response"]


def _response(
    version: int, code: ErrorCode, message: str | None, acls: list[AclBinding]
) -> DescribeAclsResponse:
    cls = response_class(ApiKey.DESCRIBE_ACLS, version)
    resource_cls = nested(cls, "DescribeAclsResource")
    description_cls = nested(cls, "AclDescription")
    by_pattern: dict[tuple[int, str, int], list[AclBinding]] = {}
    for acl in acls:
        by_pattern.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
    resources = tuple(
        build(
            resource_cls,
            resource_type=resource_type,
            resource_name=name,
            pattern_type=pattern_type,
            acls=tuple(
                description_cls(
                    principal=a.principal,
                    host=a.host,
                    operation=a.operation,
                    permission_type=a.permission_type,
                )
                for a in entries
            ),
        )
        for (resource_type, name, pattern_type), entries in sorted(by_pattern.items())
    )
    return build(
        cls, throttle_time=ZERO_DURATION, error_code=code, error_message=message, resources=resources
    )


async def handle_describe_acls(
    ctx: BrokerContext, rctx: RequestContext, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    """Handle a DescribeAclsRequest."""
    version = rctx.api_version
    refused = acl_api_error(ctx, rctx, AclOperation.DESCRIBE)
    if refused is not None:
        return _response(version, ErrorCode(refused.error_code), refused.message, [])
    acl_filter = AclBindingFilter.from_request(request)
    unknown = acl_filter.unknown_field()
    if unknown is not None:
        return _response(version, ErrorCode.invalid_request, f"The filter has an UNKNOWN {unknown}", [])
    return _response(
        version, ErrorCode.none, None, [a for a in ctx.image.acls.values() if acl_filter.matches(a)]
    )


def describe_acls_error_response(
    request: DescribeAclsRequest, version: int, code: ErrorCode
) -> DescribeAclsResponse:
    return _response(version, code, None, [])
