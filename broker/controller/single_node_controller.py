"""A single-node controller: validates topic changes and emits metadata records.

It plays the part of KRaft's ``QuorumController`` for a standalone broker (no
``controller.quorum.voters``): the logic lives in
:class:`~broker.controller.replication_control.ReplicationControl` (shared with the Raft
:class:`~broker.controller.quorum_controller.QuorumController`); records are handed to a ``commit``
callback that applies them to the broker's metadata image at once. Every partition is led by this
node with leader epoch 0 and ISR = replicas = [node].

Both implement :class:`~broker.controller.controller.Controller` (async, so request handlers
``await`` either).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from broker.controller import acl_control
from broker.controller.acl_store import load_acls, save_acls
from broker.controller.configuration_control import config_records
from broker.controller.controller import CreatableTopicSpec, CreatePartitionsSpec, CreateTopicOutcome
from broker.controller.metadata_image import (
    AccessControlEntryRecord,
    ConfigRecord,
    MetadataImage,
    MetadataRecord,
    PartitionRecord,
    PartitionRegistration,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
)
from broker.controller.placement import random_placement_seed
from broker.controller.producer_id_block import allocate_block_in_file
from broker.controller.replication_control import (
    ControllerSettings,
    ReplicationControl,
)
from broker.controller.resource_config_store import load_resource_configs, save_resource_configs
from broker.controller.resource_configs import alter_resource_configs
from broker.controller.scram_control import (
    AlterResult,
    ScramDeletion,
    ScramUpsertion,
    alter_user_scram_credentials,
)
from broker.controller.scram_store import load_scram_credentials, save_scram_credentials
from broker.controller.topic_configs import TOPIC_CONFIG_NAMES, validate_topic_overrides
from spark_kafkalite.protocol.acl import AclBinding, AclBindingFilter
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "SingleNodeController",
    "TOPIC_CONFIG_NAMES",
]

logger = logging.getLogger(__name__)


class SingleNodeController:
    """Validates topic / config changes and commits records through ``commit``.

    Args:
        node_id: this node (the only broker and the active controller).
        image: returns the current metadata image.
        commit: applies a list of records (raises on failure).
        default_num_partitions: ``num.partitions``.
        default_replication_factor: ``default.replication.factor``.
        delete_topic_enable: ``delete.topic.enable``.
        topics_on_disk: returns the topics whose logs are on disk (name -> (topic id, partition
            count)) for :meth:`startup`.
        stored_topic_configs: returns the durable topic config overrides (name -> (topic id,
            overrides)) for :meth:`startup`.
        producer_id_block_file: where the next producer-id block start is persisted
            (``<first log dir>/producer-id-block``; None: in memory only).
        acls_file: where the ACLs are persisted (:mod:`broker.controller.acl_store`; None: in
            memory only).
        scram_file: where the SCRAM credentials are persisted
            (:mod:`broker.controller.scram_store`; None: in memory only).
        resource_configs_file: where the BROKER and GROUP resource configs are persisted
            (:mod:`broker.controller.resource_config_store`; None: in memory only).
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
        topics_on_disk: Callable[[], Mapping[str, tuple[uuid.UUID | None, int]]] = dict,
        stored_topic_configs: Callable[[], Mapping[str, tuple[uuid.UUID, Mapping[str, str]]]] = dict,
        producer_id_block_file: Path | None = None,
        acls_file: Path | None = None,
        scram_file: Path | None = None,
        resource_configs_file: Path | None = None,
    ) -> None:
        self.node_id = node_id
        self._image = image
        self._commit = commit
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self.delete_topic_enable = delete_topic_enable
        self._topics_on_disk = topics_on_disk
        self._stored_topic_configs = stored_topic_configs
        self.producer_id_block_file = producer_id_block_file
        self.acls_file = acls_file
        self.scram_file = scram_file
        self.resource_configs_file = resource_configs_file

    @property
    def controller_id(self) -> int:
        """The active controller: this node."""
        return self.node_id

    # -- lifecycle (Controller protocol) ---------------------------------------------------------
    @property
    def replays_metadata_log(self) -> bool:
        """The image is rebuilt from bootstrap records, applied as they are committed."""
        return False

    async def startup(self, endpoints: Mapping[str, tuple[str, int]], rack: str | None) -> None:
        """Commit the :meth:`bootstrap_records` of this broker and the topics on disk, then the
        stored ACLs, SCRAM credentials and BROKER / GROUP resource configs.

        Raises:
            OSError: the ACL or SCRAM file cannot be read or is corrupt.
        """
        self._commit(
            self.bootstrap_records(
                endpoints, rack, self._topics_on_disk(), topic_configs=self._stored_topic_configs()
            )
        )
        if self.acls_file is not None:
            try:
                stored = load_acls(self.acls_file)
            except ValueError as exc:
                raise OSError(str(exc)) from None
            if stored:
                self._commit([AccessControlEntryRecord(acl_id, acl) for acl_id, acl in stored.items()])
                logger.info("loaded %d ACL(s) from %s", len(stored), self.acls_file)
        if self.scram_file is not None:
            try:
                credentials = load_scram_credentials(self.scram_file)
            except ValueError as exc:
                raise OSError(str(exc)) from None
            if credentials:
                self._commit([UserScramCredentialRecord(n, m, c) for (n, m), c in credentials.items()])
                logger.info("loaded %d SCRAM credential(s) from %s", len(credentials), self.scram_file)

        if self.resource_configs_file is not None:
            try:
                configs = load_resource_configs(self.resource_configs_file)
            except ValueError as exc:
                raise OSError(str(exc)) from None
            if configs:
                self._commit(
                    [
                        ConfigRecord(resource_type, name, key, value)
                        for (resource_type, name), entries in sorted(configs.items())
                        for key, value in entries.items()
                    ]
                )
                logger.info(
                    "loaded the configs of %d resource(s) from %s", len(configs), self.resource_configs_file
                )

    def start_background(self) -> None:
        """Nothing runs in the background on one node."""

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Nothing to move: this node leads every partition."""
        return True

    async def stop(self) -> None:
        """Nothing to stop."""

    def _control(self) -> ReplicationControl:
        return ReplicationControl(
            ControllerSettings(
                self.default_num_partitions, self.default_replication_factor, self.delete_topic_enable
            )
        )

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

    # -- CreateTopics / DeleteTopics / CreatePartitions ----------------------------------------
    async def create_topics(
        self, specs: Sequence[CreatableTopicSpec], validate_only: bool = False
    ) -> list[CreateTopicOutcome]:
        """Create topics; see :meth:`ReplicationControl.create_topics` for the errors."""
        records, outcomes = self._control().create_topics(
            self._image(), specs, validate_only, [uuid.uuid4() for _ in specs], random_placement_seed()
        )
        if records:
            self._commit(records)
            logger.info("created topics %s", sorted(o.name for o in outcomes if o.error is None))
        return outcomes

    async def delete_topics(
        self, names: Sequence[str | None], topic_ids: Sequence[uuid.UUID | None] | None = None
    ) -> list[tuple[str | None, uuid.UUID | None, KafkaError | None]]:
        """Delete topics by name (or id when the name is None): one (name, id, error) per entry;
        see :meth:`ReplicationControl.delete_topics`."""
        records, results = self._control().delete_topics(self._image(), names, topic_ids)
        if records:
            self._commit(records)
            logger.info("deleted topics %s", sorted(n for n, _, e in results if e is None and n))
        return results

    async def create_partitions(
        self, specs: Sequence[CreatePartitionsSpec], validate_only: bool = False
    ) -> list[tuple[str, KafkaError | None]]:
        """Grow topics to ``spec.count`` partitions; one (name, error) per spec
        (:meth:`ReplicationControl.create_partitions`)."""
        records, results = self._control().create_partitions(
            self._image(), specs, validate_only, random_placement_seed()
        )
        if records:
            self._commit(records)
            logger.info(
                "added partitions: %s",
                {s.name: s.count for s, (_, e) in zip(specs, results, strict=True) if e is None},
            )
        return results

    # -- topic configs (IncrementalAlterConfigs / AlterConfigs) -------------------------------
    async def incremental_alter_topic_configs(
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
        return self._alter(True, resources, broker_values, validate_only)

    async def alter_topic_configs(
        self, resources: Sequence[tuple[str, Sequence[tuple[str, str | None]]]], validate_only: bool = False
    ) -> list[KafkaError | None]:
        """Legacy AlterConfigs: each ``(topic, [(key, value)])`` *replaces* the topic's whole
        override set; one error (or None) per resource (same errors as the incremental form)."""
        return self._alter(False, resources, {}, validate_only)

    def _alter(
        self,
        incremental: bool,
        resources: Sequence[tuple[str, Sequence[tuple[Any, ...]]]],
        broker_values: Mapping[str, Any],
        validate_only: bool,
    ) -> list[KafkaError | None]:
        records, results = self._control().alter_topic_configs(
            self._image(), incremental, resources, broker_values, validate_only
        )
        if records:
            self._commit(records)
            logger.info(
                "altered topic configs: %s",
                sorted({r.resource_name for r in records if isinstance(r, ConfigRecord)}),
            )
        return results

    async def alter_resource_configs(
        self,
        changes: Sequence[tuple[int, str, Sequence[tuple[Any, ...]]]],
        incremental: bool,
        broker_values: Mapping[str, Any],
        validate_only: bool = False,
    ) -> list[KafkaError | None]:
        """AlterConfigs / IncrementalAlterConfigs of BROKER and GROUP resources; one error (or
        None) per resource. The new config set is written to ``resource_configs_file`` before it
        takes effect."""
        records, results = alter_resource_configs(
            self._image(), incremental, changes, broker_values, validate_only
        )
        if records:
            if self.resource_configs_file is not None:
                save_resource_configs(
                    self.resource_configs_file, self._image().apply(records)[0].resource_configs
                )
            self._commit(records)
            logger.info("altered the configs of %d resource(s)", sum(r is None for r in results))
        return results

    # -- replication (one node: nothing to elect) ----------------------------------------------
    async def alter_partition(
        self,
        broker_id: int,
        broker_epoch: int,
        topic_id: uuid.UUID,
        partition: int,
        leader_epoch: int,
        new_isr: tuple[int, ...],
        partition_epoch: int,
    ) -> tuple[ErrorCode, PartitionRegistration | None]:
        """AlterPartition on one node: the only valid ISR is [this node], which it always is."""
        topic = self._image().topic_by_id(topic_id)
        registration = topic.partitions.get(partition) if topic is not None else None
        if registration is None:
            return ErrorCode.unknown_topic_or_partition, None
        if tuple(new_isr) != registration.isr:
            return ErrorCode.ineligible_replica, None
        return ErrorCode.none, registration

    async def elect_preferred_leaders(
        self, partitions: Sequence[tuple[str, int]] | None = None, unclean: bool = False
    ) -> dict[tuple[str, int], ErrorCode]:
        """ElectLeaders on one node: every partition is already led by its only replica
        (ELECTION_NOT_NEEDED), unknown ones get UNKNOWN_TOPIC_OR_PARTITION."""
        image = self._image()
        if partitions is None:
            return {}
        return {
            (t, p): ErrorCode.election_not_needed
            if image.partition(t, p) is not None
            else ErrorCode.unknown_topic_or_partition
            for t, p in partitions
        }

    # -- producer ids (KIP-730 AllocateProducerIds; idem helper) -----------------------------
    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """``(first_producer_id, count)``: a block of producer ids never handed out before, also
        across restarts (the next block start is fsynced to ``producer_id_block_file`` first)."""
        return allocate_block_in_file(self.producer_id_block_file)

    # -- ACLs (CreateAcls / DeleteAcls) --------------------------------------------------------
    async def create_acls(self, acls: Sequence[AclBinding]) -> list[KafkaError | None]:
        """Create ACLs; one error (or None) per ACL (:func:`acl_control.create_acls`). The
        new ACL set is written to ``acls_file`` before it takes effect."""
        records, results = acl_control.create_acls(self._image(), acls, [uuid.uuid4() for _ in acls])
        self._commit_acls(records)
        return results

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[acl_control.AclDeleteResult]:
        """Delete the ACLs matching each filter (:func:`acl_control.delete_acls`)."""
        records, results = acl_control.delete_acls(self._image(), filters)
        self._commit_acls(records)
        return results

    def _commit_acls(self, records: list[MetadataRecord]) -> None:
        if not records:
            return
        if self.acls_file is not None:
            save_acls(self.acls_file, self._image().apply(records)[0].acls)
        self._commit(records)
        logger.info("ACLs changed: %d record(s)", len(records))

    # -- SCRAM credentials (AlterUserScramCredentials) ------------------------------------------
    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[AlterResult]:
        """Apply the valid changes; one (user, error, message) per user. The new credential set
        is written to ``scram_file`` before it takes effect."""
        records, results = alter_user_scram_credentials(self._image(), deletions, upsertions)
        if records:
            if self.scram_file is not None:
                save_scram_credentials(self.scram_file, self._image().apply(records)[0].scram_credentials)
            self._commit(records)
            logger.info("SCRAM credentials changed: %d record(s)", len(records))
        return results
