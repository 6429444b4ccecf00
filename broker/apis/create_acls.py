"""CreateAcls (key 30), v1-3 (Kafka 4.0's range; ``AclApis.handleCreateAcls``): needs ALTER on
the cluster (else CLUSTER_AUTHORIZATION_FAILED for every creation); no authorizer configured ->
SECURITY_DISABLED; per creation INVALID_REQUEST for an ACL Kafka refuses
(:func:`~broker.controller.acl_control.validate_new_acl`). ACLs go through the controller."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis.auth_helper import acl_api_error
from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclBinding, AclOperation
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.apis.kio_types import CreateAclsRequest, CreateAclsResponse

__all__ = ["handle_create_acls", "create_acls_error_response"]


def _response(version: int, results: list[tuple[int, str | None]]) -> CreateAclsResponse:
    cls = response_class(ApiKey.CREATE_ACLS, version)
    result_cls = nested(cls, "AclCreationResult")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        results=tuple(result_cls(error_code=ErrorCode(c), error_message=m) for c, m in results),
    )


async def handle_create_acls(
    ctx: BrokerContext, rctx: RequestContext, request: CreateAclsRequest
) -> CreateAclsResponse:
    """Handle a CreateAclsRequest."""
    refused = acl_api_error(ctx, rctx, AclOperation.ALTER)
    if refused is not None:
        return create_acls_error_response(request, rctx.api_version, ErrorCode(refused.error_code))
    errors = await ctx.controller.create_acls([AclBinding.from_creation(c) for c in request.creations])
    return _response(rctx.api_version, [_error(e) for e in errors])


def _error(error: KafkaError | None) -> tuple[int, str | None]:
    if error is None:
        return int(ErrorCode.none), None
    return error.error_code, str(error)


def create_acls_error_response(
    request: CreateAclsRequest, version: int, code: ErrorCode
) -> CreateAclsResponse:
    return _response(version, [(int(code), None) for _ in request.creations])
