"""The controller quorum: Raft (pysyncobj) replicating the cluster metadata state machine.

Every node of ``controller.quorum.voters`` runs one :class:`MetadataQuorum` (KRaft's combined
mode). The Raft log holds *commands* (:mod:`broker.controller.controller_commands`); when a
command is committed every node executes it, in log order, on its
:class:`~broker.controller.controller_commands.MetadataStateMachine`, which turns it into metadata
records deterministically and applies them. The records of each command are handed to the broker
in order (``on_records``, called on the pysyncobj thread; the broker re-posts them to its asyncio
loop with ``call_soon_threadsafe``). The Raft leader is the **active controller**.

Storage: ``<metadata dir>/__cluster_metadata-0/`` (metadata dir = ``metadata.log.dir`` or the first
log dir) holds ``raft.journal`` (pysyncobj's journal: every entry, the current term, the vote and
the commit index) and ``raft.snapshot`` (a full dump written at log compaction). A restarted node
replays them and then catches up from the leader.

Snapshots: the state is serialized as the records that rebuild the image
(:func:`~broker.controller.metadata_snapshot.image_to_records`) plus its offset; a node that loads a
snapshot (restart, or a leader sending one to a lagging follower) hands the broker the whole new
image (``on_reset``).

Security: the Raft port (the CONTROLLER listener) unpickles what it receives, so traffic is
encrypted and authenticated with ``controller.quorum.password`` (pysyncobj + ``cryptography``) and
the port is bound to the CONTROLLER listener's host only.

Raft timing (from ``controller.quorum.election.timeout.ms`` = T, default 1000): election timeout
random in [T, 2T]; the leader sends AppendEntries every T/4 (checked on the next tick, so at
most T/4 + T/5 apart: under half the election timeout); a leader that hears from no majority
for 2 x 2T steps down; connection retries every T/2 (at most 1 s). The Raft thread wakes for
each message and each proposed command, else every T/5 (at most 0.2 s) to check those
deadlines (pysyncobj's default, 0.05 s, quadruples an idle node's wake-ups). A follower writes
the journal's meta file (the commit index) only when the commit index moved, not after every
AppendEntries (pysyncobj marks it dirty on each, so an idle follower rewrote it every second). Log compaction (snapshot +
journal truncation) every 2000 entries or 3600 s (Kafka's
``metadata.log.max.snapshot.interval.ms``), so heartbeats never grow the log without bound and
an idle cluster does not re-serialize its whole image every few minutes.

Broker heartbeats are not log entries (Kafka's active controller keeps them in
``BrokerHeartbeatManager``, in memory): :meth:`MetadataQuorum.send_heartbeat` carries one over the
same authenticated Raft connections, outside the log, to every voter: the leader answers it from
its state machine and each voter notes the contact (``on_heartbeat``, pysyncobj thread), so a
newly elected leader knows when each broker was last heard; only the state changes it implies
(unfence, fence on session expiry, controlled shutdown) are proposed as commands.
"""

from __future__ import annotations

import itertools
import logging
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pysyncobj import SyncObj, SyncObjConf, SyncObjConsumer, replicated  # type: ignore[import-untyped]

from broker.controller.controller_commands import Command, MetadataStateMachine
from broker.controller.metadata_image import MetadataImage, MetadataRecord
from broker.controller.metadata_snapshot import image_to_records
from broker.controller.replication_control import ControllerSettings
from spark_kafkalite.protocol.internal_topics import CLUSTER_METADATA_TOPIC_NAME

__all__ = ["MetadataQuorum", "METADATA_DIR_NAME", "QuorumSettings"]

logger = logging.getLogger(__name__)

METADATA_DIR_NAME = f"{CLUSTER_METADATA_TOPIC_NAME}-0"
_SNAPSHOT_VERSION = 1

RecordsListener = Callable[[list[MetadataRecord]], None]
ResetListener = Callable[[MetadataImage], None]
ResultCallback = Callable[[Any, int], None]
#: ((node id, broker epoch, metadata offset), this node leads) -> the answer when it leads
#: (None otherwise); called on every voter's pysyncobj thread
HeartbeatHandler = Callable[[tuple[int, int, int], bool], Any]

_HEARTBEAT = "kafkalite_broker_heartbeat"
_HEARTBEAT_RESPONSE = "kafkalite_broker_heartbeat_response"


def _store_commit_index_on_change(journal: Any) -> None:
    """Make ``journal.setRaftCommitIndex`` a no-op when the index is unchanged (a follower calls
    it on every AppendEntries, and each call schedules a rewrite of the journal's meta file)."""
    store = journal.setRaftCommitIndex

    def set_commit_index(index: int) -> None:
        if index != journal.getRaftCommitIndex():
            store(index)

    journal.setRaftCommitIndex = set_commit_index


class _RaftNode(SyncObj):  # type: ignore[misc]
    """pysyncobj's node plus one request/response pair outside the log: a broker heartbeat sent
    to the Raft leader and answered there from memory (``handler``), and sent to the other
    voters without an answer (each keeps the broker's session clock, so a new leader knows when
    every broker last reached the quorum). Requests leave from the pysyncobj thread (its
    transport is not thread-safe): :meth:`send_heartbeat` queues them and wakes that thread;
    ``callback`` gets the answer, or None when no leader answered."""

    def __init__(
        self,
        self_address: str,
        partners: list[str],
        conf: SyncObjConf,
        consumers: list[Any],
        handler: HeartbeatHandler,
    ) -> None:
        self._handler = handler
        self._outbox: deque[tuple[int, tuple[int, int, int]]] = deque()
        self._waiters: dict[int, Callable[[Any], None]] = {}
        self._request_ids = itertools.count(1)
        super().__init__(self_address, partners, conf=conf, consumers=consumers)
        self.addOnTickCallback(self._send_queued)
        _store_commit_index_on_change(self._SyncObj__raftLog)

    def send_heartbeat(self, request: tuple[int, int, int], callback: Callable[[Any], None]) -> int:
        """Queue ``request`` for the leader; returns its id (for :meth:`forget`)."""
        request_id = next(self._request_ids)
        self._waiters[request_id] = callback
        self._outbox.append((request_id, request))
        self._SyncObj__pipeNotifier.notify()
        return request_id

    def forget(self, request_id: int) -> None:
        """Drop the callback of a request nobody waits for any more."""
        self._waiters.pop(request_id, None)

    def _answer(self, request: tuple[int, int, int]) -> Any:
        return self._handler(request, bool(self._isLeader()))

    def _deliver(self, request_id: int, answer: Any) -> None:
        callback = self._waiters.pop(request_id, None)
        if callback is not None:
            callback(answer)

    def _send_queued(self) -> None:
        transport = self._SyncObj__transport
        while self._outbox:
            request_id, request = self._outbox.popleft()
            answer = self._answer(request)  # this voter's own clock, and the answer if it leads
            leader = None if self._isLeader() else self._getLeader()
            for node in self._SyncObj__otherNodes:  # the other voters keep the clock too
                if node != leader:
                    transport.send(node, {"type": _HEARTBEAT, "request": request})
            if self._isLeader():
                self._deliver(request_id, answer)
                continue
            message = {"type": _HEARTBEAT, "request_id": request_id, "request": request}
            if leader is None or not transport.send(leader, message):
                self._deliver(request_id, None)

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == _HEARTBEAT:
            answer = self._answer(message["request"])
            if "request_id" in message:
                response = {
                    "type": _HEARTBEAT_RESPONSE,
                    "request_id": message["request_id"],
                    "answer": answer,
                }
                self._SyncObj__transport.send(node, response)
        elif kind == _HEARTBEAT_RESPONSE:
            self._deliver(message["request_id"], message["answer"])
        else:
            SyncObj._SyncObj__onMessageReceived(self, node, message)


class _MetadataLog(SyncObjConsumer):  # type: ignore[misc]
    """The replicated part: one ``execute`` command type; state = the metadata image."""

    def __init__(
        self,
        cluster_id: str,
        on_records: RecordsListener,
        on_reset: ResetListener,
        on_executed: Callable[[Any], None],
    ) -> None:
        self._cluster_id = cluster_id
        self._on_records = on_records
        self._on_reset = on_reset
        self._on_executed = on_executed
        self.machine = MetadataStateMachine(MetadataImage(cluster_id=cluster_id, controller_id=-1))
        super().__init__()

    @replicated
    def execute(self, settings: ControllerSettings, command: Command) -> Any:
        records, result = self.machine.execute(settings, command)
        try:  # a listener failure must not wedge the Raft apply loop (it would retry forever)
            if records:
                self._on_records(records)
            self._on_executed(command)
        except Exception:  # noqa: BLE001
            logger.exception("metadata listener failed")
        return result

    def _serialize(self) -> dict[str, Any]:
        image = self.machine.image
        return {
            "version": _SNAPSHOT_VERSION,
            "cluster_id": image.cluster_id,
            "offset": image.offset,
            "records": image_to_records(image),
            "shutdown_epochs": dict(self.machine.shutdown_epochs),
            "incarnations": dict(self.machine.incarnations),
        }

    def _deserialize(self, data: dict[str, Any]) -> None:
        if not isinstance(data, dict) or data.get("version") != _SNAPSHOT_VERSION:
            logger.error("ignoring metadata snapshot of unknown format")
            return
        image = MetadataImage(cluster_id=data["cluster_id"], controller_id=-1).apply(data["records"])[0]
        image = replace(image, offset=int(data["offset"]))
        self.machine = MetadataStateMachine(
            image, dict(data.get("shutdown_epochs", {})), dict(data.get("incarnations", {}))
        )
        logger.info("loaded metadata snapshot at offset %d", image.offset)
        self._on_reset(image)


def _check_bindable(host: str, port: int) -> None:
    """pysyncobj retries a failed bind forever in the background; fail fast instead.

    Raises:
        OSError: the CONTROLLER listener's host:port cannot be bound (in use, bad address).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise OSError(
                exc.errno, f"cannot bind the CONTROLLER (Raft) listener {host}:{port}: {exc.strerror}"
            ) from None


class QuorumSettings:
    """Raft settings derived from broker keys (see the module docstring)."""

    def __init__(self, election_timeout_ms: int, password: str) -> None:
        t = max(election_timeout_ms, 100) / 1000
        self.conf_kwargs = dict(
            password=password,
            raftMinTimeout=t,
            raftMaxTimeout=2 * t,
            appendEntriesPeriod=t / 4,
            autoTickPeriod=min(t / 5, 0.2),
            connectionTimeout=max(3 * t, 1.0),
            connectionRetryTime=min(t / 2, 1.0),
            leaderFallbackTimeout=4 * t,
            appendEntriesUseBatch=False,
            commandsWaitLeader=True,
            logCompactionMinEntries=2000,
            logCompactionMinTime=3600,
            useFork=False,
            dynamicMembershipChange=False,
            tcp_keepalive=(16, 3, 5),
        )


class MetadataQuorum:
    """One Raft node of the controller quorum.

    Args:
        node_id: this node's id (a key of ``voters``).
        voters: node id -> (host, port) of every voter's CONTROLLER listener.
        metadata_dir: directory of the journal and snapshot (created).
        cluster_id: the cluster id (same on every node).
        settings: Raft timing and password.
        on_records: called (pysyncobj thread) with the records of each committed command, in order.
        on_reset: called (pysyncobj thread) with a whole new image after a snapshot was loaded.
        on_executed: called (pysyncobj thread) with every committed command (liveness tracking).
        on_state_change: called (pysyncobj thread) with True when this node becomes the leader,
            False when it stops being the leader.
        on_heartbeat: ``on_heartbeat((node id, broker epoch, metadata offset), leads)`` for every
            broker heartbeat this voter receives (pysyncobj thread); returns the answer when
            ``leads``, else None.
        bind_address: (host, port) the Raft port binds (the CONTROLLER listener) when it is not
            this node's voter entry (the address the other voters dial, e.g. a proxy in front).
    """

    def __init__(
        self,
        node_id: int,
        voters: dict[int, tuple[str, int]],
        metadata_dir: Path,
        cluster_id: str,
        settings: QuorumSettings,
        on_records: RecordsListener,
        on_reset: ResetListener,
        on_executed: Callable[[Any], None],
        on_state_change: Callable[[bool], None],
        bind_address: tuple[str, int] | None = None,
        on_heartbeat: HeartbeatHandler | None = None,
    ) -> None:
        self.node_id = node_id
        self._on_heartbeat: HeartbeatHandler = on_heartbeat or (lambda request, leads: None)
        self.voters = dict(voters)
        self.bind_address = bind_address or self.voters[node_id]
        self.metadata_dir = metadata_dir
        self._addresses = {f"{host}:{port}": vid for vid, (host, port) in voters.items()}
        self._log = _MetadataLog(cluster_id, on_records, on_reset, on_executed)
        self._settings = settings
        self._on_state_change = on_state_change
        self._sync: _RaftNode | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Bind the Raft port, load the journal/snapshot and join the quorum (returns at once;
        committed entries from the journal are replayed on the pysyncobj thread)."""
        self.metadata_dir.mkdir(parents=True, exist_ok=True)
        host, port = self.voters[self.node_id]
        bind_host, bind_port = self.bind_address
        _check_bindable(bind_host, bind_port)
        self_address = f"{host}:{port}"
        partners = [f"{h}:{p}" for vid, (h, p) in sorted(self.voters.items()) if vid != self.node_id]

        def state_changed(old: int, new: int) -> None:
            if new == 2 or old == 2:  # pysyncobj _RAFT_STATE.LEADER
                self._on_state_change(new == 2)

        conf = SyncObjConf(
            journalFile=str(self.metadata_dir / "raft.journal"),
            fullDumpFile=str(self.metadata_dir / "raft.snapshot"),
            onStateChanged=state_changed,
            bindAddress=f"{bind_host}:{bind_port}",
            maxBindRetries=0,
            bindRetryTime=0.5,
            **self._settings.conf_kwargs,
        )
        self._sync = _RaftNode(self_address, partners, conf, [self._log], self._on_heartbeat)
        logger.info(
            "controller quorum node %d at %s, voters %s, journal in %s",
            self.node_id,
            self_address,
            {vid: f"{h}:{p}" for vid, (h, p) in sorted(self.voters.items())},
            self.metadata_dir,
        )

    def stop(self) -> None:
        """Leave the quorum and close the Raft port (waits for the pysyncobj thread)."""
        sync, self._sync = self._sync, None
        if sync is not None:
            try:
                sync.destroy_synchronous()
            except Exception:  # noqa: BLE001 - best effort at shutdown
                logger.exception("stopping the controller quorum failed")

    # -- state -------------------------------------------------------------------------------
    @property
    def machine(self) -> MetadataStateMachine:
        """The state machine (read it on the pysyncobj thread, e.g. in ``on_heartbeat``)."""
        return self._log.machine

    @property
    def image(self) -> MetadataImage:
        """The state machine's image (read-only view; updated on the pysyncobj thread)."""
        return self._log.machine.image

    @property
    def is_leader(self) -> bool:
        sync = self._sync
        return sync is not None and bool(sync._isLeader())

    @property
    def leader_id(self) -> int:
        """Node id of the Raft leader (the active controller), -1 when unknown."""
        sync = self._sync
        if sync is None:
            return -1
        if sync._isLeader():
            return self.node_id
        leader = sync._getLeader()
        if leader is None:
            return -1
        # getattr: pysyncobj's node object (an untyped library's), or its address string
        return self._addresses.get(getattr(leader, "id", str(leader)), -1)

    @property
    def term(self) -> int:
        sync = self._sync
        return int(sync._getTerm()) if sync is not None else -1

    def status(self) -> dict[str, Any]:
        """pysyncobj's status dict (leader, term, commit index, log size, partner links)."""
        sync = self._sync
        return dict(sync.getStatus()) if sync is not None else {}

    # -- commands ------------------------------------------------------------------------------
    def propose(self, settings: ControllerSettings, command: Command, callback: ResultCallback) -> None:
        """Append ``command`` (forwarded to the leader when this node is a follower); ``callback``
        gets ``(result, fail_reason)`` on the pysyncobj thread once it is committed and executed
        here (fail_reason 0), or a pysyncobj ``FAIL_REASON`` when it was not committed."""
        sync = self._sync
        if sync is None:
            callback(None, 2)  # MISSING_LEADER
            return
        self._log.execute(settings, command, callback=callback)

    def send_heartbeat(self, request: tuple[int, int, int], callback: Callable[[Any], None]) -> int:
        """Send a broker heartbeat ``(node id, broker epoch, metadata offset)`` to every voter,
        outside the log; ``callback`` gets (pysyncobj thread) the leader's ``on_heartbeat`` answer,
        or None when there is no leader or it could not be reached. Returns a request id for
        :meth:`forget_heartbeat`."""
        sync = self._sync
        if sync is None:
            callback(None)
            return 0
        return int(sync.send_heartbeat(request, callback))

    def forget_heartbeat(self, request_id: int) -> None:
        """Drop the callback of a heartbeat whose caller stopped waiting."""
        sync = self._sync
        if sync is not None:
            sync.forget(request_id)
