"""Topic config changes as the controller computes them (Kafka's ``ConfigurationControlManager``).

Pure functions: from a topic's current overrides and a request, compute the new complete
override set, validate it (:func:`~broker.controller.topic_configs.validate_topic_overrides`),
and turn the difference into ``ConfigRecord`` s.

- IncrementalAlterConfigs (KIP-339): per key SET / DELETE / APPEND / SUBTRACT; APPEND and
  SUBTRACT work on LIST configs only and start from the current value (override, else the broker
  or topic default).
- AlterConfigs (legacy): the request's entries *replace* the whole override set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from broker.controller.metadata_image import RESOURCE_TYPE_TOPIC, ConfigRecord
from broker.controller.topic_configs import (
    TOPIC_CONFIG_DEF,
    broker_default,
    config_value_to_string,
    validate_topic_overrides,
)
from spark_kafkalite.protocol.configs import AlterConfigOp
from spark_kafkalite.protocol.errors import InvalidConfigError, InvalidRequestError

__all__ = [
    "AlterConfigOp",
    "incremental_overrides",
    "legacy_overrides",
    "config_records",
    "check_duplicate_keys",
]


def check_duplicate_keys(names: Sequence[str]) -> None:
    seen: set[str] = set()
    duplicates: set[str] = set()
    for name in names:
        (duplicates if name in seen else seen).add(name)
    if duplicates:
        raise InvalidRequestError(f"Error due to duplicate config keys: {', '.join(sorted(duplicates))}")


def _current_list(name: str, overrides: Mapping[str, str], broker_values: Mapping[str, Any]) -> list[str]:
    raw = overrides.get(name)
    if raw is not None:
        return [p.strip() for p in raw.split(",") if p.strip()]
    value, _ = broker_default(name, broker_values)
    text = config_value_to_string(value, "list") or ""
    return [p for p in text.split(",") if p]


def incremental_overrides(
    current: Mapping[str, str],
    ops: Sequence[tuple[str, int, str | None]],
    broker_values: Mapping[str, Any],
) -> dict[str, str]:
    """Apply ``(name, op, value)`` operations to ``current``; returns the validated new
    override set.

    Raises:
        InvalidRequestError: an unknown operation or a key named twice.
        InvalidConfigError: an unknown key, APPEND/SUBTRACT on a non-list key, a null value for
            SET/APPEND/SUBTRACT, or an invalid resulting value (the message names the key).
    """
    check_duplicate_keys([name for name, _, _ in ops])
    new = dict(current)
    for name, op_id, value in ops:
        try:
            op = AlterConfigOp(op_id)
        except ValueError:
            raise InvalidRequestError(f"Unknown operation type {op_id} for config {name}") from None
        spec = TOPIC_CONFIG_DEF.get(name)
        if spec is None:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        if op is AlterConfigOp.DELETE:
            new.pop(name, None)
            continue
        if value is None:
            raise InvalidConfigError(f"Null value not supported for topic configs: {name}")
        if op is AlterConfigOp.SET:
            new[name] = value
            continue
        if spec.type != "list":
            verb = "APPEND to" if op is AlterConfigOp.APPEND else "SUBTRACT from"
            raise InvalidConfigError(f"Can't {verb} key {name} because its type is not LIST.")
        items = _current_list(name, new, broker_values)
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if op is AlterConfigOp.APPEND:
            items.extend(p for p in parts if p not in items)
        else:
            items = [p for p in items if p not in parts]
        new[name] = ",".join(items)
    return validate_topic_overrides(new)


def legacy_overrides(entries: Sequence[tuple[str, str | None]]) -> dict[str, str]:
    """The new override set of a legacy AlterConfigs resource (its entries, nothing else).

    Raises:
        InvalidRequestError: a key named twice.
        InvalidConfigError: an unknown key, a null value or an invalid value.
    """
    check_duplicate_keys([name for name, _ in entries])
    return validate_topic_overrides(dict(entries))


def config_records(topic: str, old: Mapping[str, str], new: Mapping[str, str]) -> list[ConfigRecord]:
    """``ConfigRecord`` s turning ``old`` into ``new`` (removals carry value None)."""
    records = [
        ConfigRecord(RESOURCE_TYPE_TOPIC, topic, name, value)
        for name, value in sorted(new.items())
        if old.get(name) != value
    ]
    records.extend(
        ConfigRecord(RESOURCE_TYPE_TOPIC, topic, name, None) for name in sorted(old) if name not in new
    )
    return records
