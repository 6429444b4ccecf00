"""BROKER and GROUP config changes as the controller computes them (Kafka's
``ConfigurationControlManager`` with ``ControllerConfigurationValidator``), pure functions like
:mod:`broker.controller.configuration_control` is for topics.

A resource's entries give its new complete config set (legacy AlterConfigs: the entries replace
it; IncrementalAlterConfigs: SET / DELETE / APPEND / SUBTRACT on the current set), which is
validated as a whole (BROKER: :func:`~broker.controller.broker_configs.validate_dynamic_broker_configs`;
GROUP: :func:`~broker.controller.group_configs.validate_group_configs`) and turned into
``ConfigRecord`` s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from broker.config_def import parse_list
from broker.controller.broker_configs import validate_dynamic_broker_configs
from broker.controller.configuration_control import check_duplicate_keys
from broker.controller.group_configs import GROUP_CONFIG_DEF, validate_group_configs
from broker.controller.metadata_image import (
    RESOURCE_TYPE_BROKER,
    RESOURCE_TYPE_GROUP,
    ConfigRecord,
    MetadataImage,
    MetadataRecord,
)
from broker.server_configs import CONFIG_DEF
from spark_kafkalite.protocol.configs import AlterConfigOp
from spark_kafkalite.protocol.errors import InvalidConfigError, InvalidRequestError, KafkaError

__all__ = ["alter_resource_configs", "ResourceConfigChange"]

#: (resource type, resource name, entries): entries are (key, op, value) when incremental,
#: (key, value) otherwise
ResourceConfigChange = tuple[int, str, Sequence[tuple[Any, ...]]]


def _key_type(resource_type: int, name: str) -> str | None:
    if resource_type == RESOURCE_TYPE_GROUP:
        spec = GROUP_CONFIG_DEF.get(name)
        return None if spec is None else spec[0].type
    broker_key = CONFIG_DEF.get(name)
    return None if broker_key is None else broker_key.type


def _incremental(
    resource_type: int,
    current: Mapping[str, str],
    ops: Sequence[tuple[str, int, str | None]],
    broker_values: Mapping[str, Any],
) -> dict[str, str]:
    new = dict(current)
    for name, op_id, value in ops:
        try:
            op = AlterConfigOp(op_id)
        except ValueError:
            raise InvalidRequestError(f"Unknown operation type {op_id} for config {name}") from None
        if op is AlterConfigOp.DELETE:
            new.pop(name, None)
            continue
        if value is None:
            raise InvalidRequestError(f"Null value not supported for : {name}")
        if op is AlterConfigOp.SET:
            new[name] = value
            continue
        if _key_type(resource_type, name) != "list":
            verb = "append" if op is AlterConfigOp.APPEND else "subtract"
            raise InvalidConfigError(f"Config value {verb} is not allowed for config key: {name}")
        if name in new:
            items = parse_list(new[name])
        else:
            items = [str(v) for v in broker_values.get(name) or ()]
        parts = parse_list(value)
        if op is AlterConfigOp.APPEND:
            items.extend(p for p in parts if p not in items)
        else:
            items = [p for p in items if p not in parts]
        new[name] = ",".join(items)
    return new


def _new_configs(
    image: MetadataImage, incremental: bool, change: ResourceConfigChange, broker_values: Mapping[str, Any]
) -> dict[str, str]:
    resource_type, resource_name, entries = change
    if resource_type == RESOURCE_TYPE_BROKER:
        if resource_name and not resource_name.isdigit():
            raise InvalidRequestError(f"Invalid broker name {resource_name}")
    elif not resource_name:
        raise InvalidRequestError("Group name must not be empty")
    check_duplicate_keys([e[0] for e in entries])
    current = image.resource_config(resource_type, resource_name)
    if incremental:
        new = _incremental(resource_type, current, entries, broker_values)
    else:
        new = {}
        for name, value in entries:
            if value is None:
                raise InvalidRequestError(f"Null value not supported for : {name}")
            new[name] = value
    if resource_type == RESOURCE_TYPE_BROKER:
        validate_dynamic_broker_configs(new)
    else:
        validate_group_configs(new, broker_values)
    return new


def alter_resource_configs(
    image: MetadataImage,
    incremental: bool,
    changes: Sequence[ResourceConfigChange],
    broker_values: Mapping[str, Any],
    validate_only: bool,
) -> tuple[list[MetadataRecord], list[KafkaError | None]]:
    """Records and one error (or None) per BROKER / GROUP resource of an AlterConfigs
    (``incremental`` False) or IncrementalAlterConfigs request; no records when
    ``validate_only``. ``broker_values`` (``KafkaConfig.values``) bound the group configs and
    give the starting value of APPEND / SUBTRACT on a broker key without a dynamic value.

    Errors per resource: INVALID_REQUEST (a broker name that is not an id, an empty group name,
    a key named twice, an unknown operation, a null value, a broker key that cannot change
    dynamically, a bad broker value), INVALID_CONFIG (APPEND / SUBTRACT on a non-list key, an
    unknown or invalid group config).
    """
    records: list[MetadataRecord] = []
    results: list[KafkaError | None] = []
    for change in changes:
        resource_type, resource_name, _ = change
        try:
            new = _new_configs(image, incremental, change, broker_values)
        except KafkaError as exc:
            results.append(exc)
            continue
        results.append(None)
        if validate_only:
            continue
        old = image.resource_config(resource_type, resource_name)
        records.extend(
            ConfigRecord(resource_type, resource_name, k, v)
            for k, v in sorted(new.items())
            if old.get(k) != v
        )
        records.extend(
            ConfigRecord(resource_type, resource_name, k, None) for k in sorted(old) if k not in new
        )
    return records, results
