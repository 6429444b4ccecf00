"""Config vocabulary of the DescribeConfigs / AlterConfigs / IncrementalAlterConfigs APIs, shared
by the broker's handlers and controller and the client's admin.

The ids are Kafka's wire values: ``ConfigResource.Type``, ``DescribeConfigsResponse.ConfigSource``,
``DescribeConfigsResponse.ConfigType`` (DescribeConfigs v3+, KIP-569) and
``AlterConfigOp.OpType`` (IncrementalAlterConfigs, KIP-339).
"""

from __future__ import annotations

import enum

__all__ = ["ConfigResourceType", "ConfigSource", "ConfigType", "AlterConfigOp"]


class ConfigResourceType(enum.IntEnum):
    """Kafka's ``ConfigResource.Type`` ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(enum.IntEnum):
    """Where a config value comes from (``DescribeConfigsResponse.ConfigSource``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(enum.IntEnum):
    """The type of a config value (``DescribeConfigsResponse.ConfigType``, DescribeConfigs v3+,
    KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterConfigOp(enum.IntEnum):
    """IncrementalAlterConfigs operations (Java ``AlterConfigOp.OpType``, KIP-339)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3
