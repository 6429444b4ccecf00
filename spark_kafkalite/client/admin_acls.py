"""ACL administration for ``KafkaAdminClient`` (Java ``Admin.createAcls``, ``describeAcls``,
``deleteAcls``): CreateAcls (30), DescribeAcls (29) and DeleteAcls (31), v1-3 (Kafka 4.0's
range), each sent to the least loaded broker (or the given node) as Java's admin does. The ACL
types are :class:`~spark_kafkalite.protocol.acl.AclBinding` / ``AclBindingFilter``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.protocol.acl import AclBinding, AclBindingFilter
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import ErrorCode, error_for_code

__all__ = ["AdminAcls"]


#: ``send(builder, node_id, timeout_ms) -> response`` (``KafkaAdminClient._send_any``).
Send = Callable[[RequestBuilder, "int | None", "float | None"], Any]


def _binding(resource: Any, entry: Any) -> AclBinding:
    return AclBinding.of(
        int(resource.resource_type),
        str(resource.resource_name),
        int(resource.pattern_type),
        str(entry.principal),
        str(entry.host),
        int(entry.operation),
        int(entry.permission_type),
    )


class AdminAcls:
    """The ACL calls of the admin client.

    Args:
        send: sends a request to a node (None: the least loaded one) and returns the response,
            retrying connection errors until the timeout.
    """

    def __init__(self, send: Send) -> None:
        self._send = send

    def create_acls(self, acls: Iterable[AclBinding], timeout_ms: float | None = None) -> None:
        """Create ``acls`` (existing ones succeed unchanged).

        Raises:
            SecurityDisabledError: the broker has no authorizer.
            ClusterAuthorizationFailedError: no ALTER permission on the cluster.
            InvalidRequestError: an ACL the broker refuses (the message names it).
            KafkaTimeoutError: no answer in time.
        """
        items = list(acls)

        def build(version: int) -> Any:
            cls = request_class(ApiKey.CREATE_ACLS, version)
            creation_cls = nested(cls, "AclCreation")
            return make(cls, creations=tuple(creation_cls(**a.creation_fields()) for a in items))

        if not items:
            return
        response = self._send(RequestBuilder(ApiKey.CREATE_ACLS, build), None, timeout_ms)
        for acl, result in zip(items, response.results, strict=True):
            if result.error_code != ErrorCode.none:
                detail = f"{acl}: {result.error_message}" if result.error_message else str(acl)
                raise error_for_code(int(result.error_code), detail)

    def describe_acls(
        self, acl_filter: AclBindingFilter, node_id: int | None = None, timeout_ms: float | None = None
    ) -> list[AclBinding]:
        """The ACLs matching ``acl_filter`` (as known by ``node_id``, default the least loaded
        broker).

        Raises:
            SecurityDisabledError / ClusterAuthorizationFailedError (no DESCRIBE on the
            cluster) / InvalidRequestError / KafkaTimeoutError.
        """

        def build(version: int) -> Any:
            return make(request_class(ApiKey.DESCRIBE_ACLS, version), **acl_filter.request_fields())

        response = self._send(RequestBuilder(ApiKey.DESCRIBE_ACLS, build), node_id, timeout_ms)
        if response.error_code != ErrorCode.none:
            raise error_for_code(int(response.error_code), response.error_message or "DescribeAcls")
        return [_binding(resource, entry) for resource in response.resources for entry in resource.acls]

    def delete_acls(
        self, filters: Iterable[AclBindingFilter], timeout_ms: float | None = None
    ) -> list[AclBinding]:
        """Delete every ACL matching one of ``filters``; returns the deleted ACLs.

        Raises:
            SecurityDisabledError / ClusterAuthorizationFailedError (no ALTER on the cluster) /
            InvalidRequestError (a filter with an UNKNOWN field) / KafkaTimeoutError.
        """
        items = list(filters)

        def build(version: int) -> Any:
            cls = request_class(ApiKey.DELETE_ACLS, version)
            filter_cls = nested(cls, "DeleteAclsFilter")
            return make(cls, filters=tuple(filter_cls(**f.request_fields()) for f in items))

        if not items:
            return []
        response = self._send(RequestBuilder(ApiKey.DELETE_ACLS, build), None, timeout_ms)
        deleted: list[AclBinding] = []
        for acl_filter, result in zip(items, response.filter_results, strict=True):
            if result.error_code != ErrorCode.none:
                raise error_for_code(int(result.error_code), result.error_message or str(acl_filter))
            for match in result.matching_acls:
                if match.error_code != ErrorCode.none:
                    raise error_for_code(int(match.error_code), match.error_message or str(acl_filter))
                deleted.append(_binding(match, match))
        return deleted
