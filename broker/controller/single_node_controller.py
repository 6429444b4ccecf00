"""A single-node controller: validates topic changes and emits metadata records.

It plays the part of KRaft's ``QuorumController`` / ``ReplicationControlManager`` /
``ConfigurationControlManager`` for a cluster of one broker: every partition is led by this node
with leader epoch 0 and ISR = replicas = [node]. Records are handed to a ``commit`` callback that applies them to the broker's metadata image
(synchronously; issue 3 replaces this with a Raft quorum committing the same records).
"""

from __future__ import annotations

import functools
import logging
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.controller.configuration_control import config_records, incremental_overrides, legacy_overrides
from broker.controller.metadata_image import (
    MetadataImage,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from broker.controller.topic_configs import TOPIC_CONFIG_NAMES, validate_topic_overrides
from spark_kafkalite.protocol.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    error_for_code,
)

__all__ = [
    "CreatableTopicSpec",
    "CreateTopicOutcome",
    "CreatePartitionsSpec",
    "SingleNodeController",
    "validate_topic_name",
    "TOPIC_CONFIG_NAMES",
]

logger = logging.getLogger(__name__)

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")
_TOPIC_DELETION_DISABLED = 73

def validate_topic_name(name: str | None) -> str | None:
    """Kafka's ``Topic.validate``: returns an error message, or None when ``name`` is legal
    (1-249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``)."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC_CHARS.match(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )
    return None


def _incremental(
    current: Mapping[str, str], *, ops: Sequence[tuple[str, int, str | None]], broker_values: Mapping[str, Any]
) -> dict[str, str]:
    return incremental_overrides(current, ops, broker_values)


def _legacy(current: Mapping[str, str], *, entries: Sequence[tuple[str, str | None]]) -> dict[str, str]:
    return legacy_overrides(entries)


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True, slots=True)
class CreatableTopicSpec:
    """One topic of a CreateTopics request. -1 = broker default for partitions and RF;
    ``assignments`` maps partition -> broker ids (then both counts must be -1)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreateTopicOutcome:
    """Result for one topic: ``error`` is None on success (or when validate_only passed);
    ``configs`` are its validated overrides (canonical strings)."""

    name: str
    error: KafkaError | None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreatePartitionsSpec:
    """One topic of a CreatePartitions request: the new total ``count`` and, optionally, the
    replicas of each new partition (``count`` - current entries)."""

    name: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None


class SingleNodeController:
    """Validates CreateTopics / DeleteTopics and commits records through ``commit``.

    Args:
        node_id: this node (the only broker and the active controller).
        image: returns the current metadata image.
        commit: applies a list of records (raises on failure).
        default_num_partitions: ``num.partitions``.
        default_replication_factor: ``default.replication.factor``.
        delete_topic_enable: ``delete.topic.enable``.
    """

    def __init__(
        self,
        node_id: int,
        image: Callable[[], MetadataImage],
        commit: Callable[[list[MetadataRecord]], None],
        *,
        default_num_partitions: int = 1,
        default_replication_factor: int = 1,
        delete_topic_enable: bool = True,
    ) -> None:
        self.node_id = node_id
        self._image = image
        self._commit = commit
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self.delete_topic_enable = delete_topic_enable

    # -- startup ---------------------------------------------------------------------------
    def bootstrap_records(
        self,
        endpoints: Mapping[str, tuple[str, int]],
        rack: str | None,
        topics_on_disk: Mapping[str, tuple[uuid.UUID | None, int]],
        topic_configs: Mapping[str, tuple[uuid.UUID, Mapping[str, str]]] | None = None,
    ) -> list[MetadataRecord]:
        """Records that rebuild the image at startup: this broker's registration and one topic
        per ``topics_on_disk`` entry (name -> (topic id, partition count)); a topic without a
        stored id gets a fresh one. ``topic_configs`` (name -> (topic id, overrides), from the
        durable store) adds the overrides of topics whose id matches; invalid stored values are
        dropped with a warning."""
        records: list[MetadataRecord] = [RegisterBrokerRecord(self.node_id, dict(endpoints), rack)]
        stored = topic_configs or {}
        for name in sorted(topics_on_disk):
            topic_id, num_partitions = topics_on_disk[name]
            overrides: Mapping[str, str] = {}
            if name in stored and topic_id is not None and stored[name][0] == topic_id:
                overrides = self._loadable_overrides(name, stored[name][1])
            records.extend(self._topic_records(name, topic_id or uuid.uuid4(), num_partitions, overrides))
        return records

    @staticmethod
    def _loadable_overrides(name: str, overrides: Mapping[str, str]) -> dict[str, str]:
        good: dict[str, str] = {}
        for key, value in overrides.items():
            try:
                good.update(validate_topic_overrides({key: value}))
            except KafkaError as exc:
                logger.warning("dropping stored config of topic %s: %s", name, exc)
        return good

    def _topic_records(
        self, name: str, topic_id: uuid.UUID, num_partitions: int, configs: Mapping[str, str] | None = None
    ) -> list[MetadataRecord]:
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        for partition in range(num_partitions):
            records.append(
                PartitionRecord(topic_id, partition, (self.node_id,), (self.node_id,), self.node_id, 0, 0)
            )
        records.extend(config_records(name, {}, configs or {}))
        return records

    # -- CreateTopics --------------------------------------------------------------------------
    def create_topics(
        self, specs: Sequence[CreatableTopicSpec], validate_only: bool = False
    ) -> list[CreateTopicOutcome]:
        """Create topics (``ControllerApis.createTopics`` / ``ReplicationControlManager``).

        Errors per topic: INVALID_TOPIC_EXCEPTION (bad or colliding name), TOPIC_ALREADY_EXISTS,
        INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR (RF above the broker count or < 1),
        INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG (unknown topic config or bad value, see
        :mod:`broker.controller.topic_configs`), INVALID_REQUEST (a name repeated in one request).
        """
        counts: dict[str, int] = {}
        for spec in specs:
            counts[spec.name] = counts.get(spec.name, 0) + 1
        outcomes: list[CreateTopicOutcome] = []
        records: list[MetadataRecord] = []
        pending: set[str] = set()
        for spec in specs:
            if counts[spec.name] > 1:
                outcomes.append(
                    CreateTopicOutcome(
                        spec.name,
                        InvalidRequestError(
                            f"Create topics request from client contains a duplicate topic {spec.name}"
                        ),
                    )
                )
                continue
            try:
                num_partitions, replication_factor = self._validate_new_topic(spec, pending)
                configs = validate_topic_overrides(spec.configs)
            except KafkaError as exc:
                outcomes.append(CreateTopicOutcome(spec.name, exc))
                continue
            topic_id = uuid.uuid4()
            if not validate_only:
                records.extend(self._topic_records(spec.name, topic_id, num_partitions, configs))
                pending.add(spec.name)
            outcomes.append(
                CreateTopicOutcome(
                    spec.name,
                    None,
                    None if validate_only else topic_id,
                    num_partitions,
                    replication_factor,
                    configs,
                )
            )
        if records:
            self._commit(records)
            logger.info("created topics %s", sorted(pending))
        return outcomes

    def _validate_new_topic(self, spec: CreatableTopicSpec, pending: set[str]) -> tuple[int, int]:
        problem = validate_topic_name(spec.name)
        if problem:
            raise InvalidTopicError(problem)
        image = self._image()
        if spec.name in image.topics or spec.name in pending:
            raise TopicAlreadyExistsError(f"Topic '{spec.name}' already exists.")
        key = _collision_key(spec.name)
        for existing in list(image.topics) + list(pending):
            if _collision_key(existing) == key:
                raise InvalidTopicError(f"Topic '{spec.name}' collides with existing topic: {existing}")
        live_brokers = max(1, len(image.brokers))
        if spec.assignments:
            if spec.num_partitions != -1 or spec.replication_factor != -1:
                raise InvalidRequestError(
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time."
                )
            partitions = sorted(spec.assignments)
            if partitions != list(range(len(partitions))):
                raise InvalidPartitionsError("Partitions should be numbered consecutively from 0")
            sizes = {len(spec.assignments[p]) for p in partitions}
            for p in partitions:
                brokers = list(spec.assignments[p])
                if not brokers or len(set(brokers)) != len(brokers):
                    raise error_for_code(39, f"Invalid replica assignment for partition {p}: {brokers}")
                unknown = [b for b in brokers if b not in image.brokers]
                if unknown:
                    raise error_for_code(
                        39, f"Replica assignment of partition {p} names unknown brokers {unknown}"
                    )
            if len(sizes) != 1:
                raise error_for_code(39, "All partitions should have the same number of replicas")
            num_partitions, replication_factor = len(partitions), sizes.pop()
        else:
            num_partitions = spec.num_partitions
            if num_partitions == -1:
                num_partitions = self.default_num_partitions
            if num_partitions <= 0:
                raise InvalidPartitionsError("Number of partitions was set to an invalid non-positive value.")
            replication_factor = spec.replication_factor
            if replication_factor == -1:
                replication_factor = self.default_replication_factor
            if replication_factor <= 0:
                raise InvalidReplicationFactorError(
                    "Replication factor must be larger than 0, or -1 to use the default value."
                )
            if replication_factor > live_brokers:
                raise InvalidReplicationFactorError(
                    f"Unable to replicate the partition {replication_factor} time(s): "
                    f"The target replication factor of {replication_factor} cannot be reached "
                    f"because only {live_brokers} broker(s) are registered."
                )
        return num_partitions, replication_factor

    # -- DeleteTopics --------------------------------------------------------------------------
    def delete_topics(
        self, names: Sequence[str | None], topic_ids: Sequence[uuid.UUID | None] | None = None
    ) -> list[tuple[str | None, uuid.UUID | None, KafkaError | None]]:
        """Delete topics by name (or id when the name is None): one (name, id, error) per entry.

        Errors: UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID, TOPIC_DELETION_DISABLED,
        INVALID_REQUEST for a topic named twice.
        """
        ids = list(topic_ids) if topic_ids is not None else [None] * len(names)
        image = self._image()
        results: list[tuple[str | None, uuid.UUID | None, KafkaError | None]] = []
        records: list[MetadataRecord] = []
        seen: set[str] = set()
        for name, topic_id in zip(names, ids, strict=True):
            if not self.delete_topic_enable:
                results.append(
                    (name, topic_id, error_for_code(_TOPIC_DELETION_DISABLED, "Topic deletion is disabled."))
                )
                continue
            topic = (
                image.topic(name)
                if name is not None
                else (image.topic_by_id(topic_id) if topic_id is not None else None)
            )
            if topic is None:
                if name is None and topic_id is not None:
                    results.append((None, topic_id, error_for_code(100, f"Topic id {topic_id} not found")))
                else:
                    results.append((name, topic_id, UnknownTopicOrPartitionError(f"Topic {name} not found")))
                continue
            if topic.name in seen:
                results.append(
                    (topic.name, topic.topic_id, InvalidRequestError("Duplicate topic in request"))
                )
                continue
            seen.add(topic.name)
            records.append(RemoveTopicRecord(topic.topic_id))
            results.append((topic.name, topic.topic_id, None))
        if records:
            self._commit(records)
            logger.info("deleted topics %s", sorted(seen))
        return results

    # -- CreatePartitions ----------------------------------------------------------------------
    def create_partitions(
        self, specs: Sequence[CreatePartitionsSpec], validate_only: bool = False
    ) -> list[tuple[str, KafkaError | None]]:
        """Grow topics to ``spec.count`` partitions (``ReplicationControlManager.createPartitions``);
        one (name, error) per spec, in order.

        Errors: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (count not above the current
        one), INVALID_REPLICA_ASSIGNMENT (wrong number of assignments, replication factor
        mismatch, unknown or repeated brokers), INVALID_REQUEST (a topic named twice).
        New partitions get the topic's replication factor, replicas round-robin over the
        registered brokers, leader = first replica, ISR = replicas, leader epoch 0.
        """
        image = self._image()
        counts: dict[str, int] = {}
        for spec in specs:
            counts[spec.name] = counts.get(spec.name, 0) + 1
        results: list[tuple[str, KafkaError | None]] = []
        records: list[MetadataRecord] = []
        for spec in specs:
            if counts[spec.name] > 1:
                results.append((spec.name, InvalidRequestError(f"Duplicate topic name {spec.name} in the request")))
                continue
            try:
                new_records = self._new_partition_records(image, spec)
            except KafkaError as exc:
                results.append((spec.name, exc))
                continue
            if not validate_only:
                records.extend(new_records)
            results.append((spec.name, None))
        if records:
            self._commit(records)
            logger.info("added partitions: %s", {s.name: s.count for s, (_, e) in zip(specs, results, strict=True) if e is None})
        return results

    def _new_partition_records(self, image: MetadataImage, spec: CreatePartitionsSpec) -> list[MetadataRecord]:
        topic = image.topic(spec.name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"The topic '{spec.name}' does not exist.")
        current = topic.num_partitions
        if spec.count < current:
            raise InvalidPartitionsError(
                f"The topic {spec.name} currently has {current} partition(s); {spec.count} would not be an increase."
            )
        if spec.count == current:
            raise InvalidPartitionsError(f"Topic already has {current} partition(s).")
        added = spec.count - current
        rf = topic.replication_factor or 1
        brokers = sorted(image.brokers) or [self.node_id]
        if spec.assignments is not None:
            if len(spec.assignments) != added:
                raise error_for_code(
                    39, f"Attempted to add {added} additional partition(s), but only {len(spec.assignments)} assignment(s) were specified."
                )
            assignments = [tuple(a) for a in spec.assignments]
            for replicas in assignments:
                if len(replicas) != rf:
                    raise error_for_code(
                        39, f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s)."
                    )
                if len(set(replicas)) != len(replicas):
                    raise error_for_code(39, f"The manual partition assignment includes duplicate replicas {list(replicas)}.")
                unknown = [b for b in replicas if b not in image.brokers]
                if unknown:
                    raise error_for_code(39, f"The manual partition assignment includes broker(s) {unknown} that are not registered.")
        else:
            if rf > len(brokers):
                raise InvalidReplicationFactorError(
                    f"Unable to replicate the partition {rf} time(s): only {len(brokers)} broker(s) are registered."
                )
            assignments = [
                tuple(brokers[(p + i) % len(brokers)] for i in range(rf)) for p in range(current, spec.count)
            ]
        return [
            PartitionRecord(topic.topic_id, current + i, replicas, replicas, replicas[0], 0, 0)
            for i, replicas in enumerate(assignments)
        ]

    # -- topic configs (IncrementalAlterConfigs / AlterConfigs) -------------------------------
    def incremental_alter_topic_configs(
        self,
        resources: Sequence[tuple[str, Sequence[tuple[str, int, str | None]]]],
        broker_values: Mapping[str, Any],
        validate_only: bool = False,
    ) -> list[KafkaError | None]:
        """Apply ``(topic, [(key, op, value)])`` changes (KIP-339 ops SET/DELETE/APPEND/SUBTRACT);
        one error (or None) per resource. ``broker_values`` (``KafkaConfig.values``) give the
        starting value of APPEND/SUBTRACT on keys without an override.

        Errors: UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG naming the key, INVALID_REQUEST
        (unknown op, duplicate key, empty topic name).
        """
        changes: list[tuple[str, Callable[[Mapping[str, str]], dict[str, str]]]] = [
            (topic, functools.partial(_incremental, ops=ops, broker_values=broker_values))
            for topic, ops in resources
        ]
        return self._alter_topic_configs(changes, validate_only)

    def alter_topic_configs(
        self, resources: Sequence[tuple[str, Sequence[tuple[str, str | None]]]], validate_only: bool = False
    ) -> list[KafkaError | None]:
        """Legacy AlterConfigs: each ``(topic, [(key, value)])`` *replaces* the topic's whole
        override set; one error (or None) per resource (same errors as the incremental form)."""
        changes: list[tuple[str, Callable[[Mapping[str, str]], dict[str, str]]]] = [
            (topic, functools.partial(_legacy, entries=entries)) for topic, entries in resources
        ]
        return self._alter_topic_configs(changes, validate_only)

    def _alter_topic_configs(
        self,
        changes: Sequence[tuple[str, Callable[[Mapping[str, str]], dict[str, str]]]],
        validate_only: bool,
    ) -> list[KafkaError | None]:
        image = self._image()
        results: list[KafkaError | None] = []
        records: list[MetadataRecord] = []
        for topic, compute in changes:
            try:
                if not topic:
                    raise InvalidRequestError("Default topic resources are not allowed.")
                if image.topic(topic) is None:
                    raise UnknownTopicOrPartitionError(f"The topic '{topic}' does not exist.")
                current = image.topic_config(topic)
                new = compute(current)
            except KafkaError as exc:
                results.append(exc)
                continue
            if not validate_only:
                records.extend(config_records(topic, current, new))
            results.append(None)
        if records:
            self._commit(records)
            logger.info("altered topic configs: %s", sorted({getattr(r, "resource_name", "") for r in records}))
        return results
