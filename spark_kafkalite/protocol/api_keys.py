"""Kafka API keys (``ApiKeys.java``) and kio entity lookup by (api_key, version)."""

from __future__ import annotations

import enum
from functools import cache
from typing import Any, Literal

from kio.index import KioIndexError, load_payload_module
from kio.static.constants import EntityType

from spark_kafkalite.protocol.errors import UnsupportedVersionError

__all__ = ["ApiKey", "request_class", "response_class"]


class ApiKey(enum.IntEnum):
    """Kafka request API keys (the subset kio and this project know by name)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    ALTER_PARTITION = 56
    DESCRIBE_CLUSTER = 60
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79


@cache
def _entity_class(
    api_key: int, version: int, entity_type: Literal[EntityType.request, EntityType.response]
) -> type[Any]:
    try:
        module = load_payload_module(api_key, version, entity_type)
    except (KioIndexError, ImportError) as exc:
        raise UnsupportedVersionError(
            f"no schema for api_key={api_key} version={version} ({entity_type.name})"
        ) from exc
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and getattr(value, "__type__", None) is entity_type
            and getattr(value, "__api_key__", None) == api_key
        ):
            return value
    raise UnsupportedVersionError(f"no {entity_type.name} entity for api_key={api_key} v{version}")


def request_class(api_key: int, version: int) -> type[Any]:
    """The kio request entity class for ``(api_key, version)``.

    Raises:
        UnsupportedVersionError: kio has no schema for that key and version.
    """
    return _entity_class(int(api_key), int(version), EntityType.request)


def response_class(api_key: int, version: int) -> type[Any]:
    """The kio response entity class for ``(api_key, version)``.

    Raises:
        UnsupportedVersionError: kio has no schema for that key and version.
    """
    return _entity_class(int(api_key), int(version), EntityType.response)
