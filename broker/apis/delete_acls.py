"""DeleteAcls (key 31), v1-3 (``AclApis.handleDeleteAcls``): needs ALTER on the cluster (else
CLUSTER_AUTHORIZATION_FAILED for every filter); no authorizer configured -> SECURITY_DISABLED;
per filter INVALID_REQUEST for an UNKNOWN field, else the ACLs it deleted (through the
controller)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis.auth_helper import acl_api_error
from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclBinding, AclBindingFilter, AclOperation
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.apis.kio_types import DeleteAclsRequest, DeleteAclsResponse

__all__ = ["handle_delete_acls", "delete_acls_error_response"]


def _response(
    version: int, results: list[tuple[KafkaError | ErrorCode | None, list[AclBinding]]]
) -> DeleteAclsResponse:
    cls = response_class(ApiKey.DELETE_ACLS, version)
    result_cls = nested(cls, "DeleteAclsFilterResult")
    matching_cls = nested(cls, "DeleteAclsMatchingAcl")
    out = []
    for error, acls in results:
        if isinstance(error, KafkaError):
            code, message = ErrorCode(error.error_code), str(error)
        else:
            code, message = (error or ErrorCode.none), None
        matching = tuple(
            build(
                matching_cls,
                error_code=ErrorCode.none,
                error_message=None,
                resource_type=a.resource_type,
                resource_name=a.resource_name,
                pattern_type=a.pattern_type,
                principal=a.principal,
                host=a.host,
                operation=a.operation,
                permission_type=a.permission_type,
            )
            for a in acls
        )
        out.append(result_cls(error_code=code, error_message=message, matching_acls=matching))
    return build(cls, throttle_time=ZERO_DURATION, filter_results=tuple(out))


async def handle_delete_acls(
    ctx: BrokerContext, rctx: RequestContext, request: DeleteAclsRequest
) -> DeleteAclsResponse:
    """Handle a DeleteAclsRequest."""
    refused = acl_api_error(ctx, rctx, AclOperation.ALTER)
    if refused is not None:
        return delete_acls_error_response(request, rctx.api_version, ErrorCode(refused.error_code))
    results = await ctx.controller.delete_acls([AclBindingFilter.from_request(f) for f in request.filters])
    return _response(rctx.api_version, list(results))


def delete_acls_error_response(
    request: DeleteAclsRequest, version: int, code: ErrorCode
) -> DeleteAclsResponse:
    return _response(version, [(code, []) for _ in request.filters])
