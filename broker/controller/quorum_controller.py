"""``QuorumController``: the controller API of a broker in a multi-node cluster (KRaft's
``QuorumController`` + the broker's ``BrokerLifecycleManager``), on top of
:class:`~broker.controller.quorum.MetadataQuorum`.

How requests reach the active controller: every change is a command proposed to the local Raft
node; pysyncobj forwards commands proposed on a follower to the Raft leader (the active
controller), which appends them to the log. Once committed, *every* node executes the command on
its own copy of the state machine (deterministically), so the proposer gets its result locally,
after the resulting metadata records have been posted to its broker (``_commit``) -- a result is
never seen before the metadata it describes. No Kafka-protocol controller channel is needed.

The :class:`~broker.controller.controller.Controller` protocol, as
:class:`~broker.controller.single_node_controller.SingleNodeController` (create/delete topics,
create partitions, alter configs, ``alter_partition``, ``allocate_producer_ids``,
``elect_preferred_leaders``); the broker lifecycle is a
:class:`~broker.controller.broker_lifecycle_manager.BrokerLifecycleManager` it owns
(``lifecycle``), whose commands go through this Raft node:

* :meth:`startup` starts the Raft node, registers the broker (retries until a quorum answers),
  then heartbeats until the controller unfences it (it is caught up with the metadata log);
* a heartbeat task every ``broker.heartbeat.interval.ms`` (a STALE_BROKER_EPOCH answer makes the
  broker register again);
* :meth:`controlled_shutdown` on SIGTERM: a heartbeat with ``want_shutdown`` moves this broker's
  leaderships away before it exits (bounded wait when the quorum is gone).

On the active controller only (the Raft leader): broker sessions are tracked in memory, as in
Kafka's ``BrokerHeartbeatManager``
(:class:`~broker.controller.broker_heartbeat_manager.BrokerHeartbeatManager`, ``heartbeats``): heartbeats reach it outside the log
(:meth:`~broker.controller.quorum.MetadataQuorum.send_heartbeat`) and are answered from its state
machine. They also reach the other voters, which note each broker's last contact, so a new
active controller keeps those clocks (a broker that died with the previous controller is fenced
one ``broker.session.timeout.ms`` after its last heartbeat; every broker gets at least half a
session after the election). An expired broker is fenced (``FenceBrokerCmd``, a log entry: its
leaderships move, it leaves the ISRs). With ``auto.leader.rebalance.enable`` it periodically runs
preferred-leader election for brokers leading less than
``(100 - leader.imbalance.per.broker.percentage)`` % of their preferred partitions.

Only state changes go through the Raft log (registration, unfencing, fencing, controlled
shutdown), so an idle cluster appends nothing; pysyncobj's log compaction (snapshots) keeps the
journal bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from broker.controller.acl_control import AclDeleteResult
from broker.controller.alter_partition_manager import AlterPartitionManager
from broker.controller.broker_heartbeat_manager import BrokerHeartbeatManager
from broker.controller.broker_lifecycle_manager import BrokerLifecycleManager, ControllerUnavailable
from broker.controller.controller import CreatableTopicSpec, CreatePartitionsSpec, CreateTopicOutcome
from broker.controller.controller_commands import (
    AllocateProducerIdsCmd,
    AlterConfigsCmd,
    AlterPartitionCmd,
    AlterResourceConfigsCmd,
    AlterUserScramCredentialsCmd,
    Command,
    CreateAclsCmd,
    CreatePartitionsCmd,
    CreateTopicsCmd,
    DeleteAclsCmd,
    DeleteTopicsCmd,
    ElectLeadersCmd,
    HeartbeatResult,
)
from broker.controller.election import Election
from broker.controller.metadata_image import MetadataImage, MetadataRecord, PartitionRegistration
from broker.controller.placement import random_placement_seed
from broker.controller.quorum import MetadataQuorum, QuorumSettings
from broker.controller.replication_control import (
    ControllerSettings,
    ReplicationControl,
)
from broker.controller.resource_configs import alter_resource_configs
from broker.controller.scram_control import AlterResult, ScramDeletion, ScramUpsertion
from broker.tasks import await_cancelled
from spark_kafkalite.protocol.acl import AclBinding, AclBindingFilter
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError, error_for_code

__all__ = ["QuorumController", "ControllerUnavailable"]

logger = logging.getLogger(__name__)

_FAIL_REASONS = {
    1: "queue full",
    2: "no Raft leader",
    3: "discarded by a new leader",
    4: "leader changed",
    5: "leader changed",
    6: "denied",
    7: "unknown outcome",
}


class QuorumController:
    """Controller API backed by the Raft quorum (see the module docstring).

    Args:
        node_id: this broker / controller node.
        voters: ``controller.quorum.voters`` (node id -> CONTROLLER host, port).
        metadata_dir: where the Raft journal and snapshots live.
        cluster_id: cluster id (the same on every node).
        settings: topic defaults and unclean election (``ControllerSettings``).
        broker_image: returns the broker's applied image (its metadata offset is reported in
            heartbeats; validate-only requests run against it).
        commit: applies committed records on the event loop (``BrokerMetadataPublisher.commit``).
        reset: replaces the whole image on the event loop after a snapshot load.
        election_timeout_ms, password: Raft settings (see :mod:`broker.controller.quorum`).
        heartbeat_interval_ms, session_timeout_ms: ``broker.heartbeat.interval.ms`` /
            ``broker.session.timeout.ms``.
        request_timeout_ms: how long a proposal waits for its commit.
        bind_address: host:port of the CONTROLLER listener when it differs from this node's voter
            entry (see :class:`~broker.controller.quorum.MetadataQuorum`).
        auto_rebalance: ``auto.leader.rebalance.enable``; ``rebalance_interval_s`` /
            ``imbalance_percentage``: ``leader.imbalance.check.interval.seconds`` /
            ``leader.imbalance.per.broker.percentage``.
    """

    def __init__(
        self,
        node_id: int,
        voters: Mapping[int, tuple[str, int]],
        metadata_dir: Path,
        cluster_id: str,
        settings: ControllerSettings,
        broker_image: Callable[[], MetadataImage],
        commit: Callable[[list[MetadataRecord]], None],
        reset: Callable[[MetadataImage], None],
        *,
        election_timeout_ms: int = 1000,
        password: str,
        heartbeat_interval_ms: int = 2000,
        session_timeout_ms: int = 9000,
        request_timeout_ms: int = 2000,
        auto_rebalance: bool = True,
        rebalance_interval_s: float = 300.0,
        imbalance_percentage: int = 10,
        bind_address: tuple[str, int] | None = None,
    ) -> None:
        self.node_id = node_id
        self.settings = settings
        self._broker_image = broker_image
        self._commit = commit
        self._reset = reset
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.session_timeout_s = session_timeout_ms / 1000
        self.request_timeout_s = max(request_timeout_ms / 1000, 0.1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.lifecycle = BrokerLifecycleManager(
            node_id,
            self._submit,
            self._send_heartbeat,
            broker_image,
            request_timeout_s=self.request_timeout_s,
            heartbeat_interval_s=self.heartbeat_interval_s,
        )
        self.alter_partition_manager = AlterPartitionManager(self._submit)
        self.quorum = MetadataQuorum(
            node_id,
            dict(voters),
            metadata_dir,
            cluster_id,
            QuorumSettings(election_timeout_ms, password),
            self._on_records,
            self._on_reset,
            lambda command: self.heartbeats.on_executed(command),
            lambda leader: self.heartbeats.on_state_change(leader),
            bind_address,
            on_heartbeat=lambda request, active: self.heartbeats.answer_heartbeat(request, active),
        )
        self.heartbeats = BrokerHeartbeatManager(
            node_id,
            self.quorum,
            self._submit,
            session_timeout_s=self.session_timeout_s,
            auto_rebalance=auto_rebalance,
            rebalance_interval_s=rebalance_interval_s,
            imbalance_percentage=imbalance_percentage,
        )

    # -- pysyncobj thread -> event loop ---------------------------------------------------------
    def _post(self, callback: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed: the broker is gone, nothing to apply to
            logger.debug("metadata dropped: the event loop is closed")

    def _on_records(self, records: list[MetadataRecord]) -> None:
        self._post(self._commit, records)

    def _on_reset(self, image: MetadataImage) -> None:
        self._post(self._reset, image)

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def replays_metadata_log(self) -> bool:
        """Metadata comes from the Raft log (journal replay, then the leader)."""
        return True

    def start(self) -> None:
        """Start the Raft node (must run on the broker's event loop)."""
        self._loop = asyncio.get_running_loop()
        self.quorum.start()

    async def startup(self, endpoints: Mapping[str, tuple[str, int]], rack: str | None) -> None:
        """Start the Raft node, register this broker and wait until the controller unfences
        it (caught up with the metadata log), as Kafka's broker does before serving."""
        self.start()
        await self.lifecycle.register_broker(endpoints, rack)
        await self.lifecycle.wait_unfenced()

    def start_background(self) -> None:
        """Start the heartbeat task and the active-controller duties (after registration)."""
        self.lifecycle.start_heartbeats()
        self._tasks.append(asyncio.create_task(self.heartbeats.run(), name="controller-duties"))

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Kafka's controlled shutdown (when this broker registered): its leaderships move away
        while it still serves fetches."""
        if self.lifecycle.broker_epoch < 0:
            return True
        return await self.lifecycle.controlled_shutdown(timeout_s=timeout_s)

    async def stop(self) -> None:
        """Stop the background tasks and leave the quorum."""
        await self.lifecycle.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            await await_cancelled(task, f"controller task {task.get_name()}")
        self._tasks.clear()
        await asyncio.get_running_loop().run_in_executor(None, self.quorum.stop)

    @property
    def controller_id(self) -> int:
        """The active controller's node id (the Raft leader), -1 while there is none."""
        return self.quorum.leader_id

    # -- proposals ------------------------------------------------------------------------------
    async def _submit(self, command: Command, timeout_s: float | None = None) -> Any:
        """Propose ``command`` and wait for its result.

        Raises:
            ControllerUnavailable: not committed within the timeout or rejected by Raft.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def done(result: Any, fail_reason: int) -> None:
            def resolve() -> None:
                if future.done():
                    return
                if fail_reason == 0:
                    future.set_result(result)
                else:
                    future.set_exception(
                        ControllerUnavailable(
                            f"controller quorum: {_FAIL_REASONS.get(fail_reason, fail_reason)}"
                        )
                    )

            with contextlib.suppress(RuntimeError):  # loop closed: nobody waits any more
                loop.call_soon_threadsafe(resolve)

        self.quorum.propose(self.settings, command, done)
        try:
            return await asyncio.wait_for(future, timeout_s or self.request_timeout_s)
        except TimeoutError:
            raise ControllerUnavailable(
                f"the controller quorum did not commit {type(command).__name__} in time (no active controller?)"
            ) from None

    async def _send_heartbeat(self, node_id: int, epoch: int, metadata_offset: int) -> HeartbeatResult:
        """A heartbeat answered by the active controller from memory (no log entry).

        Raises:
            ControllerUnavailable: no active controller answered within the request timeout.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def done(answer: Any) -> None:
            def resolve() -> None:
                if not future.done():
                    future.set_result(answer)

            with contextlib.suppress(RuntimeError):  # loop closed: nobody waits any more
                loop.call_soon_threadsafe(resolve)

        request_id = self.quorum.send_heartbeat((node_id, epoch, metadata_offset), done)
        try:
            answer = await asyncio.wait_for(future, self.request_timeout_s)
        except TimeoutError:
            self.quorum.forget_heartbeat(request_id)
            raise ControllerUnavailable("no active controller answered the heartbeat in time") from None
        if answer is None:
            raise ControllerUnavailable("no active controller to answer the heartbeat")
        error, caught_up, fenced, shutdown = answer
        return HeartbeatResult(ErrorCode(error), caught_up, fenced, shutdown)

    # -- topics ---------------------------------------------------------------------------------
    def _control(self) -> ReplicationControl:
        return ReplicationControl(self.settings)

    async def create_topics(
        self, specs: Sequence[CreatableTopicSpec], validate_only: bool = False
    ) -> list[CreateTopicOutcome]:
        """CreateTopics; errors as :meth:`ReplicationControl.create_topics`, or NOT_CONTROLLER for
        every topic when the quorum does not answer."""
        topic_ids = tuple(uuid.uuid4() for _ in specs)
        seed = random_placement_seed()
        if validate_only:
            return self._control().create_topics(self._broker_image(), specs, True, topic_ids, seed)[1]
        try:
            result = await self._submit(CreateTopicsCmd(tuple(specs), topic_ids, seed))
        except ControllerUnavailable as exc:
            return [CreateTopicOutcome(s.name, exc) for s in specs]
        return self._or_error(result, lambda err: [CreateTopicOutcome(s.name, err) for s in specs])

    async def delete_topics(
        self, names: Sequence[str | None], topic_ids: Sequence[uuid.UUID | None] | None = None
    ) -> list[tuple[str | None, uuid.UUID | None, KafkaError | None]]:
        """DeleteTopics; one (name, id, error) per entry."""
        ids = list(topic_ids) if topic_ids is not None else [None] * len(names)
        try:
            result = await self._submit(DeleteTopicsCmd(tuple(names), tuple(ids)))
        except ControllerUnavailable as exc:
            return [(n, i, exc) for n, i in zip(names, ids, strict=True)]
        return self._or_error(result, lambda err: [(n, i, err) for n, i in zip(names, ids, strict=True)])

    async def create_partitions(
        self, specs: Sequence[CreatePartitionsSpec], validate_only: bool = False
    ) -> list[tuple[str, KafkaError | None]]:
        """CreatePartitions; one (name, error) per spec."""
        seed = random_placement_seed()
        if validate_only:
            return self._control().create_partitions(self._broker_image(), specs, True, seed)[1]
        try:
            result = await self._submit(CreatePartitionsCmd(tuple(specs), seed))
        except ControllerUnavailable as exc:
            return [(s.name, exc) for s in specs]
        return self._or_error(result, lambda err: [(s.name, err) for s in specs])

    async def incremental_alter_topic_configs(
        self,
        resources: Sequence[tuple[str, Sequence[tuple[str, int, str | None]]]],
        broker_values: Mapping[str, Any],
        validate_only: bool = False,
    ) -> list[KafkaError | None]:
        """IncrementalAlterConfigs for TOPIC resources; one error (or None) per resource."""
        return await self._alter(True, resources, broker_values, validate_only)

    async def alter_topic_configs(
        self, resources: Sequence[tuple[str, Sequence[tuple[str, str | None]]]], validate_only: bool = False
    ) -> list[KafkaError | None]:
        """Legacy AlterConfigs for TOPIC resources; one error (or None) per resource."""
        return await self._alter(False, resources, {}, validate_only)

    async def _alter(
        self,
        incremental: bool,
        resources: Sequence[tuple[str, Sequence[tuple[Any, ...]]]],
        broker_values: Mapping[str, Any],
        validate_only: bool,
    ) -> list[KafkaError | None]:
        frozen = tuple((topic, tuple(tuple(e) for e in entries)) for topic, entries in resources)
        if validate_only:
            return self._control().alter_topic_configs(
                self._broker_image(), incremental, frozen, broker_values, True
            )[1]
        values = {
            k: v for k, v in broker_values.items() if isinstance(v, (str, int, float, bool, list, type(None)))
        }
        try:
            result = await self._submit(AlterConfigsCmd(incremental, frozen, values))
        except ControllerUnavailable as exc:
            return [exc for _ in resources]
        return self._or_error(result, lambda err: [err for _ in resources])

    async def alter_resource_configs(
        self,
        changes: Sequence[tuple[int, str, Sequence[tuple[Any, ...]]]],
        incremental: bool,
        broker_values: Mapping[str, Any],
        validate_only: bool = False,
    ) -> list[KafkaError | None]:
        """AlterConfigs / IncrementalAlterConfigs of BROKER and GROUP resources, committed
        through the quorum as ``ConfigRecord`` s; one error (or None) per resource."""
        frozen = tuple((t, n, tuple(tuple(e) for e in entries)) for t, n, entries in changes)
        if validate_only:
            return alter_resource_configs(self._broker_image(), incremental, frozen, broker_values, True)[1]
        values = {
            k: v for k, v in broker_values.items() if isinstance(v, (str, int, float, bool, list, type(None)))
        }
        try:
            result = await self._submit(AlterResourceConfigsCmd(incremental, frozen, values))
        except ControllerUnavailable as exc:
            return [exc for _ in changes]
        return self._or_error(result, lambda err: [err for _ in changes])

    @staticmethod
    def _or_error(result: Any, on_error: Callable[[KafkaError], Any]) -> Any:
        if isinstance(result, ErrorCode):  # the state machine failed internally
            return on_error(error_for_code(int(result), "controller error"))
        return result

    # -- replication ----------------------------------------------------------------------------
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
        """AlterPartition (KIP-497): compare-and-set of the ISR on ``partition_epoch``.

        Changes made while an earlier batch is in flight go to the controller together, in one
        Raft entry (:class:`~broker.controller.alter_partition_manager.AlterPartitionManager`).

        Errors: STALE_BROKER_EPOCH, UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION,
        NOT_LEADER_OR_FOLLOWER (``broker_id`` is not the leader), FENCED_LEADER_EPOCH (other
        leader epoch), INVALID_UPDATE_VERSION (other partition epoch), INVALID_REQUEST (ISR
        not a subset of the replicas or without the leader), INELIGIBLE_REPLICA (adds a fenced
        or unregistered broker), NOT_CONTROLLER (quorum unavailable). On success the new
        registration (partition epoch + 1) has been applied to this broker's image.
        """
        command = AlterPartitionCmd(
            broker_id, broker_epoch, topic_id, partition, leader_epoch, tuple(new_isr), partition_epoch
        )
        return await self.alter_partition_manager.submit(command)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """A block of ``PRODUCER_ID_BLOCK_SIZE`` producer ids unique in the cluster (KIP-730).

        Raises:
            KafkaError: STALE_BROKER_EPOCH, or NOT_CONTROLLER when the quorum does not answer.
        """
        result = await self._submit(AllocateProducerIdsCmd(broker_id, broker_epoch))
        if isinstance(result, ErrorCode):
            raise error_for_code(int(result), "producer id allocation failed")
        code, first, count = result
        if code != ErrorCode.none:
            raise error_for_code(int(code), f"producer id allocation for broker {broker_id} failed")
        return first, count

    async def elect_preferred_leaders(
        self, partitions: Sequence[tuple[str, int]] | None = None, unclean: bool = False
    ) -> dict[tuple[str, int], ErrorCode]:
        """ElectLeaders (API 43): preferred (default) or unclean election for ``partitions``
        (None = all). Per partition: NONE, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
        ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER."""
        election = Election.UNCLEAN if unclean else Election.PREFERRED
        wanted = tuple(partitions) if partitions is not None else None
        try:
            result = await self._submit(ElectLeadersCmd(election, wanted))
        except ControllerUnavailable:
            return {p: ErrorCode.not_controller for p in (wanted or ())}
        if isinstance(result, ErrorCode):
            return {p: result for p in (wanted or ())}
        return dict(result)

    # -- ACLs -----------------------------------------------------------------------------------
    async def create_acls(self, acls: Sequence[AclBinding]) -> list[KafkaError | None]:
        """CreateAcls through the quorum; one error (or None) per ACL, NOT_CONTROLLER (as a
        ``ControllerUnavailable``) for each when the quorum does not answer."""
        command = CreateAclsCmd(tuple(acls), tuple(uuid.uuid4() for _ in acls))
        try:
            result = await self._submit(command)
        except ControllerUnavailable as exc:
            return [exc for _ in acls]
        return self._or_error(result, lambda err: [err for _ in acls])

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        """DeleteAcls through the quorum; per filter its error and the ACLs it deleted."""
        try:
            result = await self._submit(DeleteAclsCmd(tuple(filters)))
        except ControllerUnavailable as exc:
            return [(exc, []) for _ in filters]
        return self._or_error(result, lambda err: [(err, []) for _ in filters])

    # -- SCRAM credentials ----------------------------------------------------------------------
    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[AlterResult]:
        """AlterUserScramCredentials through the quorum; per user its error. When the quorum
        does not answer, every user gets that error."""
        users = list(dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions]))
        try:
            result = await self._submit(AlterUserScramCredentialsCmd(tuple(deletions), tuple(upsertions)))
        except ControllerUnavailable as exc:
            return [(user, ErrorCode(exc.error_code), str(exc)) for user in users]
        return self._or_error(
            result, lambda err: [(user, ErrorCode(err.error_code), str(err)) for user in users]
        )
