"""Offset maps and their JSON forms, as Spark's Kafka source writes them.

Two JSON shapes come from Spark's ``JsonUtils``:

- partition offsets ``{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}`` (``startingOffsets``,
  ``endingOffsets``, and every streaming offset); ``-2`` means earliest, ``-1`` latest;
- partition lists ``{"topicA":[0,1],"topicB":[2,4]}`` (the ``assign`` option).

Streaming offsets are compared *as JSON strings* by Spark's Python data source runner, so every
offset dict this package hands to Spark is canonical: topics sorted, partitions sorted
numerically, partition keys as strings (:func:`to_offset_dict`). An offset is the next offset to
read (exclusive end of the previous batch), like ``KafkaConsumer.position``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from spark_kafkalite.client.types import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "PartitionOffsetMap",
    "OffsetJsonError",
    "to_offset_dict",
    "from_offset_dict",
    "offset_json",
    "parse_partition_offsets",
    "parse_offsets_with_topic_defaults",
    "parse_partitions",
    "format_partitions",
]

EARLIEST = -2
"""Kafka's ``ListOffsets`` earliest timestamp; in offset JSON: start from the log start offset."""
LATEST = -1
"""Kafka's ``ListOffsets`` latest timestamp; in offset JSON: the high watermark."""

PartitionOffsetMap = dict[TopicPartition, int]

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_PARTITIONS_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'


class OffsetJsonError(ValueError):
    """Malformed offset or partition JSON (Spark: ``IllegalArgumentException`` from JsonUtils)."""


def _sorted_items(offsets: Mapping[TopicPartition, int]) -> list[tuple[TopicPartition, int]]:
    return sorted(offsets.items(), key=lambda item: (item[0][0], item[0][1]))


def to_offset_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Canonical JSON-ready dict: sorted topics, numerically sorted string partition keys.

    ``{TopicPartition("t", 10): 5, TopicPartition("t", 2): 7}`` -> ``{"t": {"2": 7, "10": 5}}``.
    """
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in _sorted_items(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_offset_dict(data: Mapping[str, Any] | None) -> PartitionOffsetMap:
    """Inverse of :func:`to_offset_dict`; accepts int or str partition keys (Spark hands offsets
    back through ``json.loads``, which turns int keys into strings).

    Raises:
        OffsetJsonError: the structure is not ``{topic: {partition: offset}}``.
    """
    result: PartitionOffsetMap = {}
    if data is None:
        return result
    if not isinstance(data, Mapping):
        raise OffsetJsonError(f"Expected e.g. {_OFFSETS_EXAMPLE}, got {data!r}")
    for topic, per_partition in data.items():
        if not isinstance(topic, str) or not isinstance(per_partition, Mapping):
            raise OffsetJsonError(f"Expected e.g. {_OFFSETS_EXAMPLE}, got {dict(data)!r}")
        for partition, offset in per_partition.items():
            try:
                part = int(partition)
            except (TypeError, ValueError) as exc:
                raise OffsetJsonError(f"Expected e.g. {_OFFSETS_EXAMPLE}, got {dict(data)!r}") from exc
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise OffsetJsonError(f"Expected e.g. {_OFFSETS_EXAMPLE}, got {dict(data)!r}")
            result[TopicPartition(topic, part)] = offset
    return result


def offset_json(offsets: Mapping[TopicPartition, int]) -> str:
    """Compact canonical JSON text, e.g. ``{"t":{"0":12,"1":7}}`` (Spark's Jackson form)."""
    return json.dumps(to_offset_dict(offsets), separators=(",", ":"))


def parse_partition_offsets(text: str) -> PartitionOffsetMap:
    """Parse Spark's partition-offsets JSON (``startingOffsets`` / ``endingOffsets``).

    Raises:
        OffsetJsonError: ``Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got <text>``
            when the text is not valid JSON of that shape.
    """
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or not data:
            raise ValueError("not an object")
        result = from_offset_dict(data)
        if any(not per_partition for per_partition in data.values()):
            raise ValueError("empty partition map")
    except (ValueError, TypeError) as exc:
        raise OffsetJsonError(f"Expected e.g. {_OFFSETS_EXAMPLE}, got {text}") from exc
    return result


def parse_offsets_with_topic_defaults(text: str) -> tuple[PartitionOffsetMap, dict[str, int]]:
    """Parse ``startingOffsets`` / ``endingOffsets`` JSON that may give a whole topic
    ``"earliest"`` or ``"latest"`` (SPARK-58774), e.g.
    ``{"topicA":"latest","topicB":{"0":5,"1":-2}}`` -> ``({topicB-0: 5, topicB-1: -2},
    {"topicA": -1})``.

    Raises:
        OffsetJsonError: as :func:`parse_partition_offsets`.
    """
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or not data:
            raise ValueError("not an object")
        topic_defaults: dict[str, int] = {}
        per_partition: dict[str, Any] = {}
        for topic, value in data.items():
            if isinstance(value, str):
                lowered = value.strip().lower()
                if lowered not in ("earliest", "latest"):
                    raise ValueError(f"bad topic-level offset {value!r}")
                topic_defaults[topic] = EARLIEST if lowered == "earliest" else LATEST
            elif isinstance(value, Mapping) and value:
                per_partition[topic] = value
            else:
                raise ValueError("empty partition map")
        return from_offset_dict(per_partition), topic_defaults
    except (ValueError, TypeError) as exc:
        raise OffsetJsonError(
            f'Expected e.g. {_OFFSETS_EXAMPLE} or {{"topicA":"latest","topicB":{{"0":5}}}}, got {text}'
        ) from exc


def parse_partitions(text: str) -> list[TopicPartition]:
    """Parse Spark's partition-list JSON (the ``assign`` option), keeping the given order.

    Raises:
        OffsetJsonError: ``Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got <text>``.
    """
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or not data:
            raise ValueError("not an object")
        result: list[TopicPartition] = []
        for topic, partitions in data.items():
            if not isinstance(partitions, list) or not partitions:
                raise ValueError("not a list")
            for partition in partitions:
                if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
                    raise ValueError("bad partition")
                result.append(TopicPartition(topic, partition))
    except (ValueError, TypeError) as exc:
        raise OffsetJsonError(f"Expected e.g. {_PARTITIONS_EXAMPLE}, got {text}") from exc
    return result


def format_partitions(partitions: Iterable[TopicPartition]) -> str:
    """Sorted, Java-like rendering for messages: ``[t-0, t-1, u-0]``."""
    ordered = sorted(partitions, key=lambda tp: (tp[0], tp[1]))
    return "[" + ", ".join(f"{topic}-{partition}" for topic, partition in ordered) + "]"
