"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), v0 (KIP-554;
``KafkaApis`` / ``ControllerApis``): Describe needs DESCRIBE on the cluster, Alter needs ALTER
on the cluster (else CLUSTER_AUTHORIZATION_FAILED for the request / every user). Describe reads
the broker's metadata image; Alter goes through the controller (the quorum in a cluster), which
stores salt, StoredKey and ServerKey derived from the client's salted password
(:mod:`broker.controller.scram_control` has the per-user rules)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis.auth_helper import authorize_cluster
from broker.apis.context import BrokerContext
from broker.controller.scram_control import ScramDeletion, ScramUpsertion, describe_user_scram_credentials
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
    )

__all__ = [
    "handle_describe_user_scram_credentials",
    "describe_user_scram_credentials_error_response",
    "handle_alter_user_scram_credentials",
    "alter_user_scram_credentials_error_response",
]


async def handle_describe_user_scram_credentials(
    ctx: BrokerContext, rctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    """Per requested user (every user with a credential when ``users`` is null or empty) its
    mechanisms and iterations, or RESOURCE_NOT_FOUND / DUPLICATE_RESOURCE."""
    if not authorize_cluster(ctx, rctx, AclOperation.DESCRIBE):
        return describe_user_scram_credentials_error_response(
            request, rctx.api_version, ErrorCode.cluster_authorization_failed
        )
    users = None if request.users is None else [u.name for u in request.users]
    cls = response_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, rctx.api_version)
    result_cls, info_cls = nested(cls, "DescribeUserScramCredentialsResult"), nested(cls, "CredentialInfo")
    results = tuple(
        result_cls(
            user=user,
            error_code=code,
            error_message=message,
            credential_infos=tuple(info_cls(mechanism=m, iterations=i) for m, i in infos),
        )
        for user, code, message, infos in describe_user_scram_credentials(ctx.image, users)
    )
    return build(
        cls, throttle_time=ZERO_DURATION, error_code=ErrorCode.none, error_message=None, results=results
    )


def describe_user_scram_credentials_error_response(
    request: DescribeUserScramCredentialsRequest, version: int, code: ErrorCode
) -> DescribeUserScramCredentialsResponse:
    cls = response_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, version)
    return build(cls, throttle_time=ZERO_DURATION, error_code=code, error_message=None, results=())


async def handle_alter_user_scram_credentials(
    ctx: BrokerContext, rctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    """Apply deletions and upsertions through the controller; one result per user."""
    if not authorize_cluster(ctx, rctx, AclOperation.ALTER):
        return alter_user_scram_credentials_error_response(
            request, rctx.api_version, ErrorCode.cluster_authorization_failed
        )
    deletions = [ScramDeletion(d.name, int(d.mechanism)) for d in request.deletions]
    upsertions = [
        ScramUpsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
        for u in request.upsertions
    ]
    results = await ctx.controller.alter_user_scram_credentials(deletions, upsertions)
    return _alter_response(rctx.api_version, results)


def _alter_response(
    version: int, results: list[tuple[str, ErrorCode, str | None]]
) -> AlterUserScramCredentialsResponse:
    cls = response_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, version)
    result_cls = nested(cls, "AlterUserScramCredentialsResult")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        results=tuple(result_cls(user=u, error_code=c, error_message=m) for u, c, m in results),
    )


def alter_user_scram_credentials_error_response(
    request: AlterUserScramCredentialsRequest, version: int, code: ErrorCode
) -> AlterUserScramCredentialsResponse:
    """``code`` for every user of the request."""
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return _alter_response(version, [(user, code, None) for user in users])
