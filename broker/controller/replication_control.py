"""Topic, partition and config changes as pure functions of a metadata image (Kafka's
``ReplicationControlManager`` + ``ConfigurationControlManager``), shared by the single-node
controller and the Raft :class:`~broker.controller.quorum_controller.QuorumController`.

Every method takes the current :class:`MetadataImage` and returns ``(records, results)``; nothing
here reads a clock or draws random numbers: topic ids and the placement seed are chosen by the
caller (the proposer) and passed in, so that every Raft node applying the same command computes
the same records.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker.controller.configuration_control import config_records, incremental_overrides, legacy_overrides
from broker.controller.controller import CreatableTopicSpec, CreatePartitionsSpec, CreateTopicOutcome
from broker.controller.metadata_image import (
    MetadataImage,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from broker.controller.placement import assign_replicas
from broker.controller.topic_configs import validate_topic_overrides
from spark_kafkalite.protocol.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    error_for_code,
)

__all__ = [
    "ControllerSettings",
    "ReplicationControl",
    "validate_topic_name",
]

logger = logging.getLogger(__name__)

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")
_TOPIC_DELETION_DISABLED = 73
_INVALID_REPLICA_ASSIGNMENT = 39
_UNKNOWN_TOPIC_ID = 100
MAX_PARTITIONS_PER_BATCH = 10_000
"""Kafka's ``ReplicationControlManager.MAX_PARTITIONS_PER_BATCH``: more partitions in one
CreateTopics request (or, here, one CreatePartitions increase) is a POLICY_VIOLATION; without
it a request for 2**31-1 partitions stalls the broker building partition records."""
_EXCESSIVE_PARTITIONS = "Excessively large number of partitions per request."


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


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """Broker keys the controller applies: ``num.partitions``, ``default.replication.factor``,
    ``delete.topic.enable``, ``unclean.leader.election.enable``."""

    default_num_partitions: int = 1
    default_replication_factor: int = 1
    delete_topic_enable: bool = True
    unclean_leader_election_enable: bool = False


def _partition_records(
    image: MetadataImage, topic_id: uuid.UUID, first: int, assignments: Sequence[Sequence[int]]
) -> list[MetadataRecord]:
    """New partitions: ISR = the live replicas, leader = the first live replica, epochs 0
    (KRaft's ``ReplicationControlManager.buildPartitionRegistration``)."""
    records: list[MetadataRecord] = []
    for i, replicas in enumerate(assignments):
        replicas = tuple(replicas)
        isr = tuple(b for b in replicas if image.is_alive(b))
        if not isr:
            raise error_for_code(
                _INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the partition assignment for partition {first + i} are fenced "
                "or not registered.",
            )
        records.append(PartitionRecord(topic_id, first + i, replicas, isr, isr[0], 0, 0))
    return records


class ReplicationControl:
    """Pure controller logic over a metadata image (see the module docstring)."""

    def __init__(self, settings: ControllerSettings) -> None:
        self.settings = settings

    # -- CreateTopics --------------------------------------------------------------------------
    def create_topics(
        self,
        image: MetadataImage,
        specs: Sequence[CreatableTopicSpec],
        validate_only: bool,
        topic_ids: Sequence[uuid.UUID],
        seed: int,
    ) -> tuple[list[MetadataRecord], list[CreateTopicOutcome]]:
        """Create topics (``ReplicationControlManager.createTopics``); ``topic_ids`` has one id per
        spec; replicas are placed on the live brokers with :func:`assign_replicas` (``seed``).

        Errors per topic: INVALID_TOPIC_EXCEPTION (bad or colliding name), TOPIC_ALREADY_EXISTS,
        INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR (RF above the live broker count or < 1),
        INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_REQUEST (a name repeated in one request).
        """
        counts: dict[str, int] = {}
        for spec in specs:
            counts[spec.name] = counts.get(spec.name, 0) + 1
        total = sum(
            len(s.assignments)
            if s.assignments
            else max(s.num_partitions, 0)
            if s.num_partitions != -1
            else self.settings.default_num_partitions
            for s in specs
        )
        if (
            total > MAX_PARTITIONS_PER_BATCH
        ):  # Kafka's validateTotalNumberOfPartitions: the whole request fails
            return [], [
                CreateTopicOutcome(s.name, PolicyViolationError(_EXCESSIVE_PARTITIONS)) for s in specs
            ]
        outcomes: list[CreateTopicOutcome] = []
        records: list[MetadataRecord] = []
        pending: set[str] = set()
        for index, spec in enumerate(specs):
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
            topic_id = topic_ids[index]
            try:
                assignments = self._validate_new_topic(image, spec, pending, seed + index)
                configs = validate_topic_overrides(spec.configs)
                topic_records: list[MetadataRecord] = [TopicRecord(spec.name, topic_id)]
                topic_records.extend(_partition_records(image, topic_id, 0, assignments))
                topic_records.extend(config_records(spec.name, {}, configs))
            except KafkaError as exc:
                outcomes.append(CreateTopicOutcome(spec.name, exc))
                continue
            if not validate_only:
                records.extend(topic_records)
                pending.add(spec.name)
            outcomes.append(
                CreateTopicOutcome(
                    spec.name,
                    None,
                    None if validate_only else topic_id,
                    len(assignments),
                    len(assignments[0]),
                    configs,
                )
            )
        return records, outcomes

    def _validate_new_topic(
        self, image: MetadataImage, spec: CreatableTopicSpec, pending: set[str], seed: int
    ) -> list[tuple[int, ...]]:
        problem = validate_topic_name(spec.name)
        if problem:
            raise InvalidTopicError(problem)
        if spec.name in image.topics or spec.name in pending:
            raise TopicAlreadyExistsError(f"Topic '{spec.name}' already exists.")
        key = _collision_key(spec.name)
        for existing in list(image.topics) + list(pending):
            if _collision_key(existing) == key:
                raise InvalidTopicError(f"Topic '{spec.name}' collides with existing topic: {existing}")
        live = image.live_brokers()
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
                    raise error_for_code(
                        _INVALID_REPLICA_ASSIGNMENT,
                        f"Invalid replica assignment for partition {p}: {brokers}",
                    )
                unknown = [b for b in brokers if b not in image.brokers]
                if unknown:
                    raise error_for_code(
                        _INVALID_REPLICA_ASSIGNMENT,
                        f"Replica assignment of partition {p} names unknown brokers {unknown}",
                    )
            if len(sizes) != 1:
                raise error_for_code(
                    _INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas"
                )
            return [tuple(spec.assignments[p]) for p in partitions]
        num_partitions = spec.num_partitions
        if num_partitions == -1:
            num_partitions = self.settings.default_num_partitions
        if num_partitions <= 0:
            raise InvalidPartitionsError("Number of partitions was set to an invalid non-positive value.")
        replication_factor = spec.replication_factor
        if replication_factor == -1:
            replication_factor = self.settings.default_replication_factor
        if replication_factor <= 0:
            raise InvalidReplicationFactorError(
                "Replication factor must be larger than 0, or -1 to use the default value."
            )
        if replication_factor > len(live):
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {replication_factor} time(s): "
                f"The target replication factor of {replication_factor} cannot be reached "
                f"because only {len(live)} broker(s) are registered."
            )
        return assign_replicas(live, num_partitions, replication_factor, seed=seed)

    # -- DeleteTopics --------------------------------------------------------------------------
    def delete_topics(
        self, image: MetadataImage, names: Sequence[str | None], topic_ids: Sequence[uuid.UUID | None] | None
    ) -> tuple[list[MetadataRecord], list[tuple[str | None, uuid.UUID | None, KafkaError | None]]]:
        """Delete topics by name (or id when the name is None): one (name, id, error) per entry.

        Errors: UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID, TOPIC_DELETION_DISABLED,
        INVALID_REQUEST for a topic named twice.
        """
        ids = list(topic_ids) if topic_ids is not None else [None] * len(names)
        results: list[tuple[str | None, uuid.UUID | None, KafkaError | None]] = []
        records: list[MetadataRecord] = []
        seen: set[str] = set()
        for name, topic_id in zip(names, ids, strict=True):
            if not self.settings.delete_topic_enable:
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
                    results.append(
                        (None, topic_id, error_for_code(_UNKNOWN_TOPIC_ID, f"Topic id {topic_id} not found"))
                    )
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
        return records, results

    # -- CreatePartitions ----------------------------------------------------------------------
    def create_partitions(
        self, image: MetadataImage, specs: Sequence[CreatePartitionsSpec], validate_only: bool, seed: int
    ) -> tuple[list[MetadataRecord], list[tuple[str, KafkaError | None]]]:
        """Grow topics to ``spec.count`` partitions (``ReplicationControlManager.createPartitions``);
        one (name, error) per spec, in order.

        Errors: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (count not above the current
        one), INVALID_REPLICA_ASSIGNMENT (wrong number of assignments, replication factor
        mismatch, unknown or repeated brokers), INVALID_REQUEST (a topic named twice).
        New partitions get the topic's replication factor, replicas placed over the live
        brokers, leader = first live replica, ISR = live replicas, leader epoch 0.
        """
        counts: dict[str, int] = {}
        for spec in specs:
            counts[spec.name] = counts.get(spec.name, 0) + 1
        results: list[tuple[str, KafkaError | None]] = []
        records: list[MetadataRecord] = []
        for index, spec in enumerate(specs):
            if counts[spec.name] > 1:
                results.append(
                    (spec.name, InvalidRequestError(f"Duplicate topic name {spec.name} in the request"))
                )
                continue
            try:
                new_records = self._new_partition_records(image, spec, seed + index)
            except KafkaError as exc:
                results.append((spec.name, exc))
                continue
            if not validate_only:
                records.extend(new_records)
            results.append((spec.name, None))
        return records, results

    def _new_partition_records(
        self, image: MetadataImage, spec: CreatePartitionsSpec, seed: int
    ) -> list[MetadataRecord]:
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
        if added > MAX_PARTITIONS_PER_BATCH:
            raise PolicyViolationError(_EXCESSIVE_PARTITIONS)
        rf = topic.replication_factor or 1
        if spec.assignments is not None:
            if len(spec.assignments) != added:
                raise error_for_code(
                    _INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {added} additional partition(s), but only {len(spec.assignments)} assignment(s) were specified.",
                )
            assignments = [tuple(a) for a in spec.assignments]
            for replicas in assignments:
                if len(replicas) != rf:
                    raise error_for_code(
                        _INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).",
                    )
                if len(set(replicas)) != len(replicas):
                    raise error_for_code(
                        _INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment includes duplicate replicas {list(replicas)}.",
                    )
                unknown = [b for b in replicas if b not in image.brokers]
                if unknown:
                    raise error_for_code(
                        _INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment includes broker(s) {unknown} that are not registered.",
                    )
        else:
            live = image.live_brokers()
            if rf > len(live):
                raise InvalidReplicationFactorError(
                    f"Unable to replicate the partition {rf} time(s): only {len(live)} broker(s) are registered."
                )
            assignments = assign_replicas(live, added, rf, seed=seed, start_partition=current)
        return _partition_records(image, topic.topic_id, current, assignments)

    # -- topic configs (IncrementalAlterConfigs / AlterConfigs) -------------------------------
    def alter_topic_configs(
        self,
        image: MetadataImage,
        incremental: bool,
        resources: Sequence[tuple[str, Sequence[tuple[Any, ...]]]],
        broker_values: Mapping[str, Any],
        validate_only: bool,
    ) -> tuple[list[MetadataRecord], list[KafkaError | None]]:
        """IncrementalAlterConfigs (``incremental``: entries ``(key, op, value)``, KIP-339 ops) or
        legacy AlterConfigs (entries ``(key, value)`` replacing the whole override set); one error
        (or None) per resource. ``broker_values`` give the starting value of APPEND/SUBTRACT.

        Errors: UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG naming the key, INVALID_REQUEST
        (unknown op, duplicate key, empty topic name).
        """
        results: list[KafkaError | None] = []
        records: list[MetadataRecord] = []
        for topic, entries in resources:
            try:
                if not topic:
                    raise InvalidRequestError("Default topic resources are not allowed.")
                if image.topic(topic) is None:
                    raise UnknownTopicOrPartitionError(f"The topic '{topic}' does not exist.")
                current = image.topic_config(topic)
                if incremental:
                    new = incremental_overrides(current, entries, broker_values)  # type: ignore[arg-type]
                else:
                    new = legacy_overrides(entries)  # type: ignore[arg-type]
            except KafkaError as exc:
                results.append(exc)
                continue
            if not validate_only:
                records.extend(config_records(topic, current, new))
            results.append(None)
        return records, results
