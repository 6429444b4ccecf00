"""The cluster metadata image (KRaft's ``MetadataImage``), as plain immutable data.

The controller produces metadata *records* (``RegisterBrokerRecord``, ``TopicRecord``,
``PartitionRecord``, ``RemoveTopicRecord``, ``ConfigRecord``, as in KRaft's ``__cluster_metadata``
log); the broker applies them with :meth:`MetadataImage.apply`, which returns a new image and a
:class:`MetadataDelta` saying which topics appeared or disappeared and whose configs changed
(Kafka's ``BrokerMetadataPublisher`` creates / deletes logs and updates their ``LogConfig`` from
such a delta). Issue 3 replaces the
single-node controller with a Raft quorum that replicates the same records.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TypeVar

from spark_kafkalite.protocol.acl import AclBinding
from spark_kafkalite.protocol.configs import ConfigResourceType
from spark_kafkalite.protocol.scram import ScramCredential

__all__ = [
    "BrokerRegistration",
    "PartitionRegistration",
    "TopicImage",
    "MetadataImage",
    "MetadataDelta",
    "RegisterBrokerRecord",
    "TopicRecord",
    "PartitionRecord",
    "RemoveTopicRecord",
    "ConfigRecord",
    "BrokerRegistrationChangeRecord",
    "ProducerIdsRecord",
    "AccessControlEntryRecord",
    "RemoveAccessControlEntryRecord",
    "UserScramCredentialRecord",
    "RemoveUserScramCredentialRecord",
    "MetadataRecord",
    "RESOURCE_TYPE_TOPIC",
    "RESOURCE_TYPE_BROKER",
    "RESOURCE_TYPE_GROUP",
]

#: Config resource types (Kafka's ``ConfigResource.Type`` ids).
_K = TypeVar("_K")
_V = TypeVar("_V")

RESOURCE_TYPE_TOPIC = int(ConfigResourceType.TOPIC)
RESOURCE_TYPE_BROKER = int(ConfigResourceType.BROKER)
RESOURCE_TYPE_GROUP = int(ConfigResourceType.GROUP)
#: Config resource types kept in ``MetadataImage.resource_configs`` (TOPIC has its own map).
_RESOURCE_CONFIG_TYPES = frozenset({RESOURCE_TYPE_BROKER, RESOURCE_TYPE_GROUP})


# ---------------------------------------------------------------------------------------------
# records


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    """A broker and its advertised endpoints: listener name -> (host, port) (KRaft
    ``RegisterBrokerRecord``). ``epoch`` is the broker epoch (the metadata offset of the
    registration, as in KRaft); a broker registers fenced and is unfenced once caught up."""

    node_id: int
    endpoints: Mapping[str, tuple[str, int]]
    rack: str | None = None
    epoch: int = 0
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    """Fence / unfence a registered broker (KRaft ``BrokerRegistrationChangeRecord`` /
    ``FenceBrokerRecord`` / ``UnfenceBrokerRecord``); ``epoch`` must match the registration."""

    node_id: int
    epoch: int
    fenced: bool


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """A block of producer ids handed to ``broker_id`` (KRaft ``ProducerIdsRecord``):
    ids below ``next_producer_id`` are taken."""

    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """A new topic (KRaft ``TopicRecord``)."""

    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """A partition's assignment and leadership (KRaft ``PartitionRecord`` / ``PartitionChangeRecord``)."""

    topic_id: uuid.UUID
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    """Deletion of a topic and all its partitions (KRaft ``RemoveTopicRecord``)."""

    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """Set (``value`` not None) or remove (``value`` None) one config of a resource (KRaft
    ``ConfigRecord``): TOPIC (2), BROKER (4: name = a broker id, or "" for the cluster-wide
    default) and GROUP (32: name = a group id) resources."""

    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """A new ACL with its id (KRaft ``AccessControlEntryRecord``; the controller draws the id)."""

    acl_id: uuid.UUID
    acl: AclBinding


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    """Deletion of the ACL with this id (KRaft ``RemoveAccessControlEntryRecord``)."""

    acl_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism, salted (KRaft ``UserScramCredentialRecord``):
    ``mechanism`` 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512; replaces an existing one."""

    name: str
    mechanism: int
    credential: ScramCredential


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    """Deletion of a user's credential for one mechanism (KRaft ``RemoveUserScramCredentialRecord``)."""

    name: str
    mechanism: int


MetadataRecord = (
    RegisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | RemoveTopicRecord
    | ConfigRecord
    | BrokerRegistrationChangeRecord
    | ProducerIdsRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
)


# ---------------------------------------------------------------------------------------------
# image


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A registered broker; ``endpoints`` maps listener name -> (host, port). ``epoch`` is its
    broker epoch; a ``fenced`` broker is not alive: it leads nothing, is in no new ISR and is not
    listed in Metadata responses."""

    node_id: int
    endpoints: Mapping[str, tuple[str, int]]
    rack: str | None = None
    epoch: int = 0
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """Leader, replicas and ISR of one partition; ``leader`` is -1 when there is none."""

    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class TopicImage:
    """A topic: its name, id and partitions (index -> registration)."""

    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration]

    @property
    def num_partitions(self) -> int:
        """How many partitions the topic has."""
        return len(self.partitions)

    @property
    def replication_factor(self) -> int:
        """Replicas of partition 0 (0 when it has none)."""
        first = self.partitions.get(0)
        return len(first.replicas) if first is not None else 0


@dataclass(frozen=True, slots=True)
class MetadataDelta:
    """What an :meth:`MetadataImage.apply` changed: created / deleted topics, partitions whose
    registration changed (including new ones), and surviving topics whose config overrides
    changed (``changed_topic_configs``, names)."""

    created_topics: tuple[TopicImage, ...] = ()
    deleted_topics: tuple[TopicImage, ...] = ()
    changed_partitions: tuple[tuple[str, PartitionRegistration], ...] = ()
    changed_topic_configs: tuple[str, ...] = ()
    changed_brokers: tuple[int, ...] = ()
    #: (resource type, name) of BROKER / GROUP resources whose configs changed
    changed_resource_configs: tuple[tuple[int, str], ...] = ()


_EMPTY: Mapping = MappingProxyType({})


def _mutable(mapping: Mapping[_K, _V]) -> dict[_K, _V]:
    """A dict copy of ``mapping`` (``MappingProxyType.copy`` copies the dict behind it at C
    speed; ``dict(proxy)`` would go through the mapping protocol item by item)."""
    if isinstance(mapping, (dict, MappingProxyType)):
        return mapping.copy()  # type: ignore[return-value]
    return dict(mapping)


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """An immutable snapshot of cluster metadata.

    Attributes:
        cluster_id: the cluster id (base64url UUID, as in ``meta.properties``).
        controller_id: node id of the active controller.
        brokers: node id -> registration.
        topics: topic name -> :class:`TopicImage`.
        offset: number of records applied so far (the metadata "offset").
        topic_configs: topic name -> its config overrides (key -> canonical string value);
            topics without overrides are absent (KRaft's ``ConfigurationsImage``).
        resource_configs: (resource type, name) -> configs of BROKER resources (dynamic broker
            configs: name = a broker id, or "" for the cluster-wide default) and GROUP resources
            (KIP-848 group configs); resources without configs are absent.
        acls: ACL id -> ACL (KRaft's ``AclsImage``); the mapping object is replaced only when
            an ACL record is applied, so the authorizer can cache an index per mapping.
        scram_credentials: (user, mechanism type id) -> salted SCRAM credential (KRaft's
            ``ScramImage``); the SCRAM SASL servers read it.
        topic_ids: topic id -> name, kept by :meth:`apply` (derived from ``topics`` when an
            image is built directly).
    """

    cluster_id: str
    controller_id: int
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: _EMPTY)
    topics: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY)
    offset: int = 0
    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    next_producer_id: int = 0
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=lambda: _EMPTY)
    scram_credentials: Mapping[tuple[str, int], ScramCredential] = field(default_factory=lambda: _EMPTY)
    resource_configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    #: topic id -> name (derived from ``topics`` when not given)
    topic_ids: Mapping[uuid.UUID, str] = field(default=None, compare=False, repr=False)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        if self.topic_ids is None:
            index = MappingProxyType({t.topic_id: name for name, t in self.topics.items()})
            object.__setattr__(self, "topic_ids", index)

    # -- queries ---------------------------------------------------------------------------
    def is_alive(self, node_id: int) -> bool:
        """Registered and not fenced."""
        broker = self.brokers.get(node_id)
        return broker is not None and not broker.fenced

    def live_brokers(self) -> list[int]:
        """Ids of the registered, unfenced brokers, sorted."""
        return sorted(b for b, reg in self.brokers.items() if not reg.fenced)

    def offline_replicas(self, partition: PartitionRegistration) -> tuple[int, ...]:
        """Replicas of ``partition`` on brokers that are fenced or not registered."""
        return tuple(r for r in partition.replicas if not self.is_alive(r))

    def topic(self, name: str) -> TopicImage | None:
        """The topic named ``name``, or None."""
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        """The topic with id ``topic_id``, or None."""
        name = self.topic_ids.get(topic_id)
        return None if name is None else self.topics.get(name)

    def topic_config(self, name: str) -> Mapping[str, str]:
        """Config overrides of topic ``name`` (empty when none or unknown)."""
        return self.topic_configs.get(name, _EMPTY)

    def resource_config(self, resource_type: int, name: str) -> Mapping[str, str]:
        """The configs of a BROKER or GROUP resource (empty when it has none)."""
        return self.resource_configs.get((resource_type, name), _EMPTY)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        """The registration of ``topic``-``partition``, or None (unknown topic or partition)."""
        image = self.topics.get(topic)
        if image is None:
            return None
        return image.partitions.get(partition)

    # -- updates ---------------------------------------------------------------------------
    def apply(self, records: Iterable[MetadataRecord]) -> tuple[MetadataImage, MetadataDelta]:
        """Apply ``records`` in order; returns the new image and the delta.

        Copy on write, as KRaft's ``MetadataDelta`` builds only the changed parts of the next
        image: the new image shares every unchanged :class:`TopicImage`, broker map, config map
        and ACL map with this one (same objects), so the cost follows the records applied, not
        the size of the image -- one ``PartitionRecord`` copies the partition map of its own
        topic only, and a reader may cache what it derives from a ``TopicImage`` by identity.

        Raises:
            ValueError: a record refers to an unknown topic id or reuses a topic name, or a
                ConfigRecord names an unknown topic.
        """
        brokers: dict[int, BrokerRegistration] | None = None
        topics: dict[str, TopicImage] | None = None  # copied on the first topic change
        names_by_id: dict[uuid.UUID, str] | None = None
        partitions: dict[str, dict[int, PartitionRegistration]] = {}  # topics whose partitions changed
        reordered: set[str] = set()  # topics that got a partition index below their highest one
        created: dict[str, None] = {}
        deleted: list[TopicImage] = []
        changed: list[tuple[str, PartitionRegistration]] = []
        configs: dict[str, Mapping[str, str]] | None = None
        config_copies: dict[str, dict[str, str]] = {}  # topics whose overrides changed here
        changed_configs: dict[str, None] = {}
        changed_brokers: dict[int, None] = {}
        resource_copies: dict[tuple[int, str], dict[str, str]] = {}  # BROKER / GROUP resources changed here
        next_producer_id = self.next_producer_id
        acls: dict[uuid.UUID, AclBinding] | None = None  # copied on the first ACL record
        scram: dict[tuple[str, int], ScramCredential] | None = None  # copied on the first SCRAM record
        count = 0
        for record in records:
            count += 1
            if isinstance(record, PartitionRecord):
                name = (self.topic_ids if names_by_id is None else names_by_id).get(record.topic_id)
                if name is None:
                    raise ValueError(f"partition record for unknown topic id {record.topic_id}")
                parts = partitions.get(name)
                if parts is None:
                    current = self.topics.get(name) if topics is None else topics.get(name)
                    parts = partitions[name] = _mutable(current.partitions) if current is not None else {}
                registration = PartitionRegistration(
                    record.partition,
                    tuple(record.replicas),
                    tuple(record.isr),
                    record.leader,
                    record.leader_epoch,
                    record.partition_epoch,
                )
                if record.partition not in parts and parts and next(reversed(parts)) > record.partition:
                    reordered.add(name)
                parts[record.partition] = registration
                changed.append((name, registration))
            elif isinstance(record, RegisterBrokerRecord):
                brokers = _mutable(self.brokers) if brokers is None else brokers
                brokers[record.node_id] = BrokerRegistration(
                    record.node_id,
                    MappingProxyType(dict(record.endpoints)),
                    record.rack,
                    record.epoch,
                    record.fenced,
                )
                changed_brokers[record.node_id] = None
            elif isinstance(record, BrokerRegistrationChangeRecord):
                current_broker = (self.brokers if brokers is None else brokers).get(record.node_id)
                if current_broker is None or current_broker.epoch != record.epoch:
                    raise ValueError(
                        f"registration change for unknown broker {record.node_id}/{record.epoch}"
                    )
                brokers = _mutable(self.brokers) if brokers is None else brokers
                brokers[record.node_id] = replace(current_broker, fenced=record.fenced)
                changed_brokers[record.node_id] = None
            elif isinstance(record, ProducerIdsRecord):
                if record.next_producer_id <= next_producer_id:
                    raise ValueError(f"producer id block {record} does not advance {next_producer_id}")
                next_producer_id = record.next_producer_id
            elif isinstance(record, TopicRecord):
                topics = _mutable(self.topics) if topics is None else topics
                names_by_id = _mutable(self.topic_ids) if names_by_id is None else names_by_id
                if record.name in topics:
                    raise ValueError(f"topic {record.name!r} already exists")
                topics[record.name] = TopicImage(record.name, record.topic_id, _EMPTY)
                partitions[record.name] = {}
                names_by_id[record.topic_id] = record.name
                created[record.name] = None
            elif isinstance(record, RemoveTopicRecord):
                topics = _mutable(self.topics) if topics is None else topics
                names_by_id = _mutable(self.topic_ids) if names_by_id is None else names_by_id
                removed_name = names_by_id.pop(record.topic_id, None)
                if removed_name is None:
                    raise ValueError(f"remove record for unknown topic id {record.topic_id}")
                removed = topics.pop(removed_name)
                removed_parts = partitions.pop(removed_name, None)
                reordered.discard(removed_name)
                if removed_name in created:
                    del created[removed_name]
                else:
                    deleted.append(
                        removed
                        if removed_parts is None
                        else TopicImage(removed_name, removed.topic_id, MappingProxyType(removed_parts))
                    )
                changed = [(n, p) for n, p in changed if n != removed_name]
                if removed_name in (self.topic_configs if configs is None else configs):
                    configs = _mutable(self.topic_configs) if configs is None else configs
                    del configs[removed_name]
                config_copies.pop(removed_name, None)
                changed_configs.pop(removed_name, None)
            elif isinstance(record, ConfigRecord) and record.resource_type in _RESOURCE_CONFIG_TYPES:
                key = (record.resource_type, record.resource_name)
                entries = resource_copies.get(key)
                if entries is None:
                    entries = resource_copies[key] = dict(self.resource_configs.get(key, _EMPTY))
                if record.value is None:
                    entries.pop(record.name, None)
                else:
                    entries[record.name] = record.value
            elif isinstance(record, ConfigRecord):
                if record.resource_type != RESOURCE_TYPE_TOPIC:
                    raise ValueError(f"config record for unsupported resource type {record.resource_type}")
                if record.resource_name not in (self.topics if topics is None else topics):
                    raise ValueError(f"config record for unknown topic {record.resource_name!r}")
                configs = _mutable(self.topic_configs) if configs is None else configs
                overrides = config_copies.get(record.resource_name)
                if overrides is None:
                    overrides = config_copies[record.resource_name] = dict(
                        configs.get(record.resource_name, _EMPTY)
                    )
                if record.value is None:
                    overrides.pop(record.name, None)
                else:
                    overrides[record.name] = record.value
                changed_configs[record.resource_name] = None
            elif isinstance(record, AccessControlEntryRecord):
                acls = _mutable(self.acls) if acls is None else acls
                if record.acl_id in acls:
                    raise ValueError(f"ACL id {record.acl_id} already exists")
                acls[record.acl_id] = record.acl
            elif isinstance(record, RemoveAccessControlEntryRecord):
                acls = _mutable(self.acls) if acls is None else acls
                if acls.pop(record.acl_id, None) is None:
                    raise ValueError(f"remove record for unknown ACL id {record.acl_id}")
            elif isinstance(record, UserScramCredentialRecord):
                scram = _mutable(self.scram_credentials) if scram is None else scram
                scram[(record.name, record.mechanism)] = record.credential
            elif isinstance(record, RemoveUserScramCredentialRecord):
                scram = _mutable(self.scram_credentials) if scram is None else scram
                if scram.pop((record.name, record.mechanism), None) is None:
                    raise ValueError(f"remove record for unknown SCRAM credential of {record.name!r}")
            else:  # pragma: no cover - type checkers catch this
                raise TypeError(f"unknown metadata record {record!r}")
        if partitions:
            topics = _mutable(self.topics) if topics is None else topics
            for name, parts in partitions.items():
                topic = topics[name]
                ordered = dict(sorted(parts.items())) if name in reordered else parts
                topics[name] = TopicImage(name, topic.topic_id, MappingProxyType(ordered))
        if config_copies:
            if configs is None:  # copied whenever a config changes
                raise RuntimeError("config changes without a copy of the configs")
            for name, overrides in config_copies.items():
                if overrides:
                    configs[name] = MappingProxyType(dict(sorted(overrides.items())))
                else:
                    configs.pop(name, None)
            configs = dict(sorted(configs.items()))
        resource_configs = self.resource_configs
        if resource_copies:
            merged = _mutable(resource_configs)
            for key, entries in resource_copies.items():
                if entries:
                    merged[key] = MappingProxyType(dict(sorted(entries.items())))
                else:
                    merged.pop(key, None)
            resource_configs = MappingProxyType(merged)
        image = replace(
            self,
            brokers=self.brokers if brokers is None else MappingProxyType(brokers),
            topics=self.topics if topics is None else MappingProxyType(topics),
            topic_ids=self.topic_ids if names_by_id is None else MappingProxyType(names_by_id),
            offset=self.offset + count,
            next_producer_id=next_producer_id,
            topic_configs=self.topic_configs if configs is None else MappingProxyType(configs),
            acls=self.acls if acls is None else MappingProxyType(acls),
            scram_credentials=self.scram_credentials if scram is None else MappingProxyType(scram),
            resource_configs=resource_configs,
        )
        new_topics = image.topics
        delta = MetadataDelta(
            created_topics=tuple(new_topics[name] for name in created),
            deleted_topics=tuple(deleted),
            changed_partitions=tuple(changed),
            changed_topic_configs=tuple(t for t in changed_configs if t not in created),
            changed_brokers=tuple(changed_brokers),
            changed_resource_configs=tuple(resource_copies),
        )
        return image, delta
