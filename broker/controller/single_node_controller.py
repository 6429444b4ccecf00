"""A single-node controller: validates topic changes and emits metadata records.

It plays the part of KRaft's ``QuorumController`` / ``ReplicationControlManager`` for a cluster of
one broker: every partition is led by this node with leader epoch 0 and ISR = replicas = [node].
Records are handed to a ``commit`` callback that applies them to the broker's metadata image
(synchronously; issue 3 replaces this with a Raft quorum committing the same records).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from broker.controller.metadata_image import (
    MetadataImage,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from spark_kafkalite.protocol.errors import (
    InvalidConfigError,
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
    "SingleNodeController",
    "validate_topic_name",
    "TOPIC_CONFIG_NAMES",
]

logger = logging.getLogger(__name__)

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")
_TOPIC_DELETION_DISABLED = 73

# Topic-level configs Kafka knows (TopicConfig.java); values are accepted but not applied yet.
TOPIC_CONFIG_NAMES = frozenset(
    {
        "cleanup.policy",
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "index.interval.bytes",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "preallocate",
        "remote.storage.enable",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.index.bytes",
        "segment.jitter.ms",
        "segment.ms",
        "unclean.leader.election.enable",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
    }
)


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
    """Result for one topic: ``error`` is None on success (or when validate_only passed)."""

    name: str
    error: KafkaError | None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


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
    ) -> list[MetadataRecord]:
        """Records that rebuild the image at startup: this broker's registration and one topic
        per ``topics_on_disk`` entry (name -> (topic id, partition count)); a topic without a
        stored id gets a fresh one."""
        records: list[MetadataRecord] = [RegisterBrokerRecord(self.node_id, dict(endpoints), rack)]
        for name in sorted(topics_on_disk):
            topic_id, num_partitions = topics_on_disk[name]
            records.extend(self._topic_records(name, topic_id or uuid.uuid4(), num_partitions))
        return records

    def _topic_records(self, name: str, topic_id: uuid.UUID, num_partitions: int) -> list[MetadataRecord]:
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        for partition in range(num_partitions):
            records.append(
                PartitionRecord(topic_id, partition, (self.node_id,), (self.node_id,), self.node_id, 0, 0)
            )
        return records

    # -- CreateTopics --------------------------------------------------------------------------
    def create_topics(
        self, specs: Sequence[CreatableTopicSpec], validate_only: bool = False
    ) -> list[CreateTopicOutcome]:
        """Create topics (``ControllerApis.createTopics`` / ``ReplicationControlManager``).

        Errors per topic: INVALID_TOPIC_EXCEPTION (bad or colliding name), TOPIC_ALREADY_EXISTS,
        INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR (RF above the broker count or < 1),
        INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG (unknown topic config), INVALID_REQUEST (a
        name repeated in one request).
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
            except KafkaError as exc:
                outcomes.append(CreateTopicOutcome(spec.name, exc))
                continue
            topic_id = uuid.uuid4()
            if not validate_only:
                records.extend(self._topic_records(spec.name, topic_id, num_partitions))
                pending.add(spec.name)
            outcomes.append(
                CreateTopicOutcome(
                    spec.name, None, None if validate_only else topic_id, num_partitions, replication_factor
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
        for name, value in spec.configs.items():
            if name not in TOPIC_CONFIG_NAMES:
                raise InvalidConfigError(f"Unknown topic config name: {name}")
            if name == "cleanup.policy" and value and "compact" in value:
                raise InvalidConfigError("cleanup.policy=compact is not supported yet")
            if name == "message.timestamp.type" and value == "LogAppendTime":
                raise InvalidConfigError("message.timestamp.type=LogAppendTime is not supported yet")
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
