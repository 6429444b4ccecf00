"""Every broker configuration key: Kafka name, type, default, doc and validator (Kafka's
``ServerConfigs`` and the other ``*Configs`` classes that make up ``KafkaConfig``'s
``ConfigDef``). :mod:`broker.config` parses and validates values against ``CONFIG_DEF``; the
declaration machinery is :mod:`broker.config_def`.

Keys marked "accepted for compatibility; no effect yet" let Kafka configuration files load.
"""

from __future__ import annotations

from typing import Any

from broker.config_def import (
    INT_MAX,
    LONG_MAX,
    ConfigKey,
    Validator,
    at_least,
    between,
    non_empty_list,
    one_of,
)
from spark_kafkalite.protocol.compression import (
    COMPRESSION_GZIP,
    COMPRESSION_LEVELS,
    COMPRESSION_LZ4,
    COMPRESSION_ZSTD,
)

__all__ = ["CONFIG_DEF", "NO_EFFECT_SUFFIX", "gzip_level_validator"]

CONFIG_DEF: dict[str, ConfigKey] = {}

NO_EFFECT_SUFFIX = " (accepted for compatibility; no effect yet)"
"""The end of the doc of a key the broker accepts without using it."""
_UNUSED = NO_EFFECT_SUFFIX


def _define(name: str, type_: str, default: Any, doc: str, validator: Validator | None = None) -> None:
    CONFIG_DEF[name] = ConfigKey(name, type_, default, doc, validator)


def gzip_level_validator(value: Any) -> str | None:
    """Kafka's ``CompressionType.GZIP.levelValidator`` (``compression.gzip.level``, broker and topic)."""
    low, high, default = COMPRESSION_LEVELS[COMPRESSION_GZIP]
    if value == default or low <= value <= high:
        return None
    return f"Value must be between {low} and {high} or equal to {default}"


# --- KRaft / node ---------------------------------------------------------------------------
_define("node.id", "int", -1, "The node id of this server (required, >= 0).", at_least(-1))
_define("broker.id", "int", -1, "Legacy alias of node.id; must match it when both are set.", at_least(-1))
_define(
    "process.roles",
    "list",
    ["broker", "controller"],
    "Roles of this process: broker, controller or both (combined mode).",
    one_of("broker", "controller"),
)
_define(
    "controller.quorum.voters",
    "list",
    [],
    "Static controller quorum voters id@host:port,...; the host:port of each voter is its CONTROLLER "
    "listener (the Raft port). Empty = a standalone single node (no Raft).",
)
_define("controller.quorum.bootstrap.servers", "list", [], "Controller quorum bootstrap servers" + _UNUSED)
_define(
    "controller.listener.names",
    "list",
    [],
    "Listener names of the controller (the Raft port, bound by the quorum, never served to clients); "
    "required with controller.quorum.voters.",
)
_define(
    "controller.quorum.password",
    "password",
    None,
    "Shared secret encrypting and authenticating the Raft port (pysyncobj unpickles what it receives, "
    "so never expose the port without one). Default: derived from the cluster id, which is itself "
    "derived from controller.quorum.voters, so a fresh multi-node config works out of the box but "
    "anyone who knows the voters can compute it: set your own secret for anything but a laptop.",
)
_define(
    "controller.quorum.election.timeout.ms",
    "int",
    1000,
    "Raft election timeout: a follower that hears nothing from the leader for a random time between "
    "this and 2x this starts an election.",
    at_least(100),
)
_define("controller.quorum.fetch.timeout.ms", "int", 2000, "Raft fetch timeout" + _UNUSED, at_least(0))
_define(
    "controller.quorum.request.timeout.ms",
    "int",
    2000,
    "How long a controller request (create topics, AlterPartition, heartbeat...) waits for the "
    "quorum to commit before failing with REQUEST_TIMED_OUT.",
    at_least(1),
)
_define(
    "controller.quorum.election.backoff.max.ms", "int", 1000, "Raft election backoff" + _UNUSED, at_least(0)
)
_define(
    "broker.heartbeat.interval.ms",
    "int",
    2000,
    "How often a broker heartbeats to the active controller (multi-node clusters).",
    at_least(1),
)
_define(
    "broker.session.timeout.ms",
    "int",
    9000,
    "The active controller fences a broker whose heartbeats lapse for this long and moves its "
    "leaderships away.",
    at_least(1),
)
_define("broker.rack", "string", None, "Rack of this broker, returned in Metadata responses.")
_define(
    "replica.selector.class",
    "string",
    None,
    "KIP-392: how the leader picks the replica a consumer that names its rack (client.rack) should "
    "read from; unset keeps every consumer on the leader. "
    "org.apache.kafka.common.replica.RackAwareReplicaSelector: a replica in the consumer's rack "
    "(broker.rack), the leader if it is one of them.",
    one_of("org.apache.kafka.common.replica.RackAwareReplicaSelector"),
)
_define(
    "metadata.log.dir",
    "string",
    None,
    "Directory of the metadata: the Raft journal and snapshots (<dir>/__cluster_metadata-0/) and the "
    "topic config store; default: the first of log.dirs.",
)

# --- listeners / sockets ----------------------------------------------------------------------
_define(
    "listeners",
    "list",
    ["PLAINTEXT://:9092"],
    "Comma-separated NAME://host:port listeners; port 0 picks a free port, empty host = all interfaces.",
    non_empty_list,
)
_define(
    "advertised.listeners",
    "list",
    None,
    "Listeners advertised to clients in Metadata; defaults to listeners (port 0 = the bound port).",
)
_define(
    "listener.security.protocol.map",
    "string",
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
    "Listener name to security protocol map NAME:PROTOCOL,... (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL). "
    "Security settings of a listener take the prefix listener.name.<name lower-cased>. (SASL JAAS: "
    "listener.name.<name>.<mechanism lower-cased>.sasl.jaas.config).",
)
_define(
    "inter.broker.listener.name",
    "string",
    None,
    "Listener followers fetch from and brokers use between them; default: the first non-controller listener.",
)
_define(
    "security.inter.broker.protocol",
    "string",
    "PLAINTEXT",
    "Inter-broker security protocol.",
    one_of("PLAINTEXT"),
)
_define(
    "socket.request.max.bytes",
    "int",
    104857600,
    "Largest request accepted; bigger ones close the connection.",
    at_least(1),
)
_define("socket.send.buffer.bytes", "int", 102400, "SO_SNDBUF of sockets" + _UNUSED, at_least(-1))
_define("socket.receive.buffer.bytes", "int", 102400, "SO_RCVBUF of sockets" + _UNUSED, at_least(-1))
_define("socket.listen.backlog.size", "int", 50, "Listen backlog of the acceptor.", at_least(1))
_define("num.network.threads", "int", 3, "Network threads (one asyncio loop here)" + _UNUSED, at_least(1))
_define(
    "num.io.threads",
    "int",
    8,
    "Worker threads for the CPU-heavy part of requests (decompressing and checking produce "
    "batches too large for the event loop); requests themselves are served on one asyncio loop.",
    at_least(1),
)
_define(
    "queued.max.requests",
    "int",
    500,
    "Max requests being handled at once, broker-wide; further complete frames wait (their "
    "connections are not read). A request parked in a purgatory (long-poll fetch, acks=-1 "
    "produce) frees its slot, as delayed operations leave Kafka's request queue.",
    at_least(1),
)
_define(
    "queued.max.request.bytes",
    "long",
    -1,
    "Memory pool for request buffers (KIP-72): a frame's bytes are taken when its size is read; "
    "while the pool is exhausted connections are not read (requests wait). Non-strict as Kafka's "
    "SimpleMemoryPool: a request is granted when any memory is free. -1 = unbounded.",
    at_least(-1),
)
_define(
    "connections.max.idle.ms",
    "long",
    600000,
    "Connections with no request for this many ms are closed (-1 = never); also the longest "
    "time writing one response to a client that does not read it.",
    at_least(-1),
)
_define(
    "kafkalite.metrics.listener",
    "string",
    None,
    "kafkalite-only (Kafka exposes JMX; operators run the Prometheus JMX exporter): host:port of an "
    "HTTP listener serving /metrics in the Prometheus text format, under the names the JMX "
    "exporter's Kafka rules give Kafka's metrics (docs/monitoring.md); port 0 = a free port "
    "(written to .broker-endpoints.json as metrics). Unset: no metrics listener.",
)
_define(
    "kafkalite.socket.request.receive.timeout.ms",
    "long",
    60000,
    "kafkalite-only (Kafka has no server-side equivalent): a request frame whose first byte has "
    "arrived must be complete within this many ms (time waiting for queued.max.request.bytes "
    "memory not counted), else the connection is closed (slow-loris). -1 = no limit.",
    at_least(-1),
)
_define(
    "kafkalite.event.loop.stall.threshold.ms",
    "int",
    200,
    "kafkalite-only (Kafka's network and request threads have no single loop to stall): the "
    "broker's event loop not running callbacks for longer than this many ms is a stall, logged "
    "once per episode as a WARNING with the stack of the code holding the loop. The loop is "
    "probed every this many ms (within 50-250 ms), so a stall longer than this plus that period is "
    "always seen.",
    at_least(1),
)
_define(
    "max.connections",
    "int",
    INT_MAX,
    "Max connections broker-wide; when reached the acceptor stops accepting until one closes "
    "(with several listeners the inter-broker one is exempt and closes the least recently "
    "active connection of another listener, KIP-402).",
    at_least(0),
)
_define(
    "max.connections.per.ip",
    "int",
    INT_MAX,
    "Max connections from one address; more are accepted and closed at once. 0 only with overrides.",
    at_least(0),
)
_define(
    "max.connections.per.ip.overrides",
    "string",
    "",
    "Per-host or per-IP overrides of max.connections.per.ip, e.g. 'hostName:100,127.0.0.1:200'.",
)

# --- topics / log ----------------------------------------------------------------------------
_define("log.dirs", "list", None, "Directories of the log data; overrides log.dir.")
_define("log.dir", "string", "/tmp/kafka-logs", "Log directory used when log.dirs is not set.")
_define("num.partitions", "int", 1, "Default number of partitions of new topics.", at_least(1))
_define("default.replication.factor", "int", 1, "Default replication factor of new topics.", at_least(1))
_define(
    "auto.create.topics.enable", "boolean", True, "Create topics on Metadata requests for unknown topics."
)
_define(
    "delete.topic.enable",
    "boolean",
    True,
    "Allow DeleteTopics; when false it fails with TOPIC_DELETION_DISABLED.",
)
# --- authorization (ACLs, broker/security/authorizer.py) ------------------------------------
_define(
    "authorizer.class.name",
    "string",
    "",
    "Authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs) or empty (none: "
    "every request is allowed).",
    one_of(
        "",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafka.security.authorizer.AclAuthorizer",
    ),
)
_define(
    "super.users", "string", "", "Principals allowed everything, separated by ';' (User:admin;User:broker)."
)
_define(
    "allow.everyone.if.no.acl.found",
    "boolean",
    False,
    "With an authorizer: allow a request on a resource no ACL covers.",
)
_define("min.insync.replicas", "int", 1, "Minimum ISR size for acks=all writes.", at_least(1))
_define(
    "unclean.leader.election.enable",
    "boolean",
    False,
    "Elect a replica outside the ISR when no ISR member is alive (may lose acknowledged records).",
)
_define("log.segment.bytes", "int", 1073741824, "Maximum size of a log segment file.", at_least(14))
_define(
    "log.roll.ms", "long", None, "Roll a segment after this many ms (overrides log.roll.hours).", at_least(1)
)
_define("log.roll.hours", "int", 168, "Roll a segment after this many hours.", at_least(1))
_define("log.roll.jitter.ms", "long", None, "Segment roll jitter" + _UNUSED, at_least(0))
_define("log.roll.jitter.hours", "int", 0, "Segment roll jitter hours" + _UNUSED, at_least(0))
_define(
    "log.retention.ms",
    "long",
    None,
    "Retention time in ms (-1 = forever); overrides minutes/hours.",
    at_least(-1),
)
_define("log.retention.minutes", "int", None, "Retention time in minutes.", at_least(-1))
_define("log.retention.hours", "int", 168, "Retention time in hours.", at_least(-1))
_define("log.retention.bytes", "long", -1, "Retention size per partition (-1 = unlimited).", at_least(-1))
_define("log.retention.check.interval.ms", "long", 300000, "Retention check interval.", at_least(1))
_define("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries.", at_least(0))
_define("log.index.size.max.bytes", "int", 10485760, "Maximum offset index size.", at_least(4))
_define("log.flush.interval.messages", "long", LONG_MAX, "fsync after this many messages.", at_least(1))
_define("log.flush.interval.ms", "long", None, "fsync after this many ms.", at_least(0))
_define(
    "log.flush.scheduler.interval.ms",
    "long",
    LONG_MAX,
    "How often logs are checked for a time-based flush (flush.ms).",
    at_least(0),
)
_define(
    "log.flush.offset.checkpoint.interval.ms",
    "int",
    60000,
    "Recovery point checkpoint interval.",
    at_least(0),
)
_define(
    "log.flush.start.offset.checkpoint.interval.ms",
    "int",
    60000,
    "Log start offset checkpoint interval.",
    at_least(0),
)
_define(
    "log.cleanup.policy",
    "list",
    ["delete"],
    "Default cleanup policy: delete (retention), compact (keep the latest record per key), or both.",
    one_of("delete", "compact"),
)
_define(
    "log.cleaner.enable",
    "boolean",
    True,
    "Run the log cleaner (compaction of cleanup.policy=compact topics).",
)
_define(
    "log.cleaner.backoff.ms",
    "long",
    15000,
    "Sleep between log cleaner runs when there is nothing to clean.",
    at_least(0),
)
_define("log.cleaner.threads", "int", 1, "Log cleaner threads" + _UNUSED, at_least(0))
_define(
    "log.message.timestamp.type",
    "string",
    "CreateTime",
    "Timestamp type of appended messages: CreateTime (the producer's) or LogAppendTime (the leader "
    "stamps each batch with its clock on append).",
    one_of("CreateTime", "LogAppendTime"),
)
_define(
    "log.message.timestamp.before.max.ms", "long", LONG_MAX, "Max age of a produced timestamp.", at_least(0)
)
_define(
    "log.message.timestamp.after.max.ms",
    "long",
    3600000,
    "Max future skew of a produced timestamp.",
    at_least(0),
)
_define(
    "log.message.timestamp.difference.max.ms",
    "long",
    LONG_MAX,
    "Deprecated timestamp difference" + _UNUSED,
    at_least(0),
)
_define("log.preallocate", "boolean", False, "Preallocate segment files" + _UNUSED)
_define("log.segment.delete.delay.ms", "long", 60000, "Delay before deleting a file.", at_least(0))
_define("log.initial.task.delay.ms", "long", 30000, "Delay of the first log background task.", at_least(0))
_define("num.recovery.threads.per.data.dir", "int", 2, "Recovery threads" + _UNUSED, at_least(1))
_define("message.max.bytes", "int", 1048588, "Largest record batch accepted by Produce.", at_least(0))
_define(
    "kafkalite.message.max.uncompressed.bytes",
    "int",
    67108864,
    "kafkalite-only (Kafka has no equivalent): largest decompressed records section of a "
    "compressed produce batch; the broker streams through it with bounded memory and answers "
    "MESSAGE_TOO_LARGE beyond it (a compression bomb).",
    at_least(1),
)
_define(
    "compression.type",
    "string",
    "producer",
    "The final compression of topics without their own compression.type: uncompressed, zstd, lz4, "
    "snappy, gzip, or producer (keep the codec the producer sent). A produced batch in another codec "
    "is rebuilt with this one on append.",
    one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
)
_define(
    "compression.gzip.level",
    "int",
    COMPRESSION_LEVELS[COMPRESSION_GZIP][2],
    "The compression level to use if compression.type is set to gzip: 1-9, or -1 (zlib's default, 6).",
    gzip_level_validator,
)
_define(
    "compression.lz4.level",
    "int",
    COMPRESSION_LEVELS[COMPRESSION_LZ4][2],
    "The compression level to use if compression.type is set to lz4 (9: the fast compressor).",
    between(*COMPRESSION_LEVELS[COMPRESSION_LZ4][:2]),
)
_define(
    "compression.zstd.level",
    "int",
    COMPRESSION_LEVELS[COMPRESSION_ZSTD][2],
    "The compression level to use if compression.type is set to zstd.",
    between(*COMPRESSION_LEVELS[COMPRESSION_ZSTD][:2]),
)
_define("fetch.max.bytes", "int", 57671680, "Largest Fetch response the broker builds.", at_least(1024))
_define(
    "max.incremental.fetch.session.cache.slots",
    "int",
    1000,
    "Maximum number of incremental fetch sessions (KIP-227) the broker keeps; 0 disables sessions.",
    at_least(0),
)
_define("fetch.purgatory.purge.interval.requests", "int", 1000, "Fetch purgatory purge interval" + _UNUSED)
_define(
    "producer.purgatory.purge.interval.requests", "int", 1000, "Produce purgatory purge interval" + _UNUSED
)

# --- replication (read by ReplicaManager and its ReplicaFetcherManager) -------------------------
_define(
    "replica.lag.time.max.ms",
    "long",
    30000,
    "A follower not caught up to the leader's log end for this long leaves the ISR.",
    at_least(0),
)
_define("replica.fetch.max.bytes", "int", 1048576, "Bytes a follower fetch asks per partition.", at_least(0))
_define(
    "replica.fetch.min.bytes", "int", 1, "Bytes a follower fetch waits for before the answer.", at_least(0)
)
_define("replica.fetch.wait.max.ms", "int", 500, "Longest a follower fetch waits at the leader.", at_least(0))
_define(
    "replica.fetch.response.max.bytes",
    "int",
    10485760,
    "Bytes a follower fetch asks for in total.",
    at_least(0),
)
_define("replica.fetch.backoff.ms", "int", 1000, "Pause of a fetcher after a failed fetch.", at_least(0))
_define("replica.socket.timeout.ms", "int", 30000, "Timeout of a follower fetch request.")
_define("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "HW checkpoint interval.", at_least(1))
_define("num.replica.fetchers", "int", 1, "Fetchers (one connection each) per source broker.", at_least(1))
_define(
    "auto.leader.rebalance.enable",
    "boolean",
    True,
    "The active controller periodically moves leadership back to the preferred (first) replica.",
)
_define(
    "leader.imbalance.check.interval.seconds",
    "long",
    300,
    "How often the active controller checks for partitions not led by their preferred replica.",
    at_least(1),
)
_define(
    "leader.imbalance.per.broker.percentage",
    "int",
    10,
    "Preferred-leader election runs when a broker leads fewer than this share of its preferred partitions.",
    between(0, 100),
)

# --- groups (classic group coordinator) / transactions (transaction coordinator) -----------------
_define(
    "offsets.topic.replication.factor",
    "short",
    3,
    "Replication factor of __consumer_offsets, created on the first FindCoordinator; until that many "
    "brokers are alive, FindCoordinator answers COORDINATOR_NOT_AVAILABLE (set 1 on a single node).",
    at_least(1),
)
_define(
    "offsets.topic.num.partitions",
    "int",
    50,
    "Partitions of __consumer_offsets (a group lives in abs(groupId.hashCode) % this); do not change "
    "once the topic exists.",
    at_least(1),
)
_define("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets.", at_least(1))
_define(
    "offsets.retention.minutes",
    "int",
    10080,
    "Committed offsets of an Empty group are deleted this long after it became empty (or after the "
    "commit, for groups that only store offsets).",
    at_least(1),
)
_define(
    "offsets.retention.check.interval.ms", "long", 600000, "How often stale offsets are expired.", at_least(1)
)
_define(
    "offsets.commit.timeout.ms",
    "int",
    5000,
    "An offset commit / group metadata write waits this long for acks=all of __consumer_offsets.",
    at_least(1),
)
_define(
    "offset.metadata.max.bytes", "int", 4096, "Largest metadata string of a committed offset.", at_least(0)
)
_define("offsets.load.buffer.size", "int", 5242880, "Read size when loading __consumer_offsets.", at_least(1))
_define(
    "transaction.state.log.replication.factor",
    "short",
    3,
    "Replication factor of __transaction_state, created on the first FindCoordinator for a "
    "transactional id; until that many brokers are alive the answer is COORDINATOR_NOT_AVAILABLE "
    "(set 1 on a single node).",
    at_least(1),
)
_define(
    "transaction.state.log.min.isr",
    "int",
    2,
    "min.insync.replicas of __transaction_state (every transaction state change is written with acks=all).",
    at_least(1),
)
_define(
    "transaction.state.log.num.partitions",
    "int",
    50,
    "Partitions of __transaction_state (a transactional id lives in abs(id.hashCode) % this); do not "
    "change once the topic exists.",
    at_least(1),
)
_define(
    "transaction.state.log.segment.bytes",
    "int",
    104857600,
    "Segment size of __transaction_state.",
    at_least(1),
)
_define(
    "transaction.state.log.load.buffer.size",
    "int",
    5242880,
    "Read size when loading __transaction_state.",
    at_least(1),
)
_define(
    "transaction.max.timeout.ms",
    "int",
    900000,
    "Largest transaction.timeout.ms a producer may use (else INVALID_TRANSACTION_TIMEOUT).",
    at_least(1),
)
_define(
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "int",
    10000,
    "How often transactions open longer than their timeout are fenced and aborted.",
    at_least(1),
)
_define(
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "int",
    3600000,
    "How often transactional ids idle longer than transactional.id.expiration.ms are removed.",
    at_least(1),
)
_define(
    "request.timeout.ms",
    "int",
    30000,
    "Timeout of the broker's own requests to other brokers (transaction markers).",
    at_least(1),
)
_define(
    "group.initial.rebalance.delay.ms",
    "int",
    3000,
    "The first rebalance of an empty group waits this long for more members (extended while new "
    "members keep joining, up to the rebalance timeout).",
    at_least(0),
)
_define(
    "group.min.session.timeout.ms",
    "int",
    6000,
    "Smallest session.timeout.ms a member may use (else INVALID_SESSION_TIMEOUT).",
    at_least(0),
)
_define(
    "group.max.session.timeout.ms",
    "int",
    1800000,
    "Largest session.timeout.ms a member may use (else INVALID_SESSION_TIMEOUT).",
    at_least(0),
)
_define(
    "group.max.size",
    "int",
    2147483647,
    "Maximum members of a classic group (GROUP_MAX_SIZE_REACHED beyond).",
    at_least(1),
)
# KIP-848 / KIP-932 group coordinator bounds and defaults of the GROUP config resources
# (Kafka's GroupCoordinatorConfig / ShareGroupConfig); broker.controller.group_configs applies them.
for _kind in ("consumer", "share"):
    _define(
        f"group.{_kind}.session.timeout.ms",
        "int",
        45000,
        f"Default {_kind}.session.timeout.ms of {_kind} groups (a group config overrides it).",
        at_least(1),
    )
    _define(
        f"group.{_kind}.min.session.timeout.ms",
        "int",
        45000,
        f"Smallest {_kind}.session.timeout.ms a group config may set.",
        at_least(1),
    )
    _define(
        f"group.{_kind}.max.session.timeout.ms",
        "int",
        60000,
        f"Largest {_kind}.session.timeout.ms a group config may set.",
        at_least(1),
    )
    _define(
        f"group.{_kind}.heartbeat.interval.ms",
        "int",
        5000,
        f"Default {_kind}.heartbeat.interval.ms of {_kind} groups (a group config overrides it).",
        at_least(1),
    )
    _define(
        f"group.{_kind}.min.heartbeat.interval.ms",
        "int",
        5000,
        f"Smallest {_kind}.heartbeat.interval.ms a group config may set.",
        at_least(1),
    )
    _define(
        f"group.{_kind}.max.heartbeat.interval.ms",
        "int",
        15000,
        f"Largest {_kind}.heartbeat.interval.ms a group config may set.",
        at_least(1),
    )
_define(
    "group.consumer.assignors",
    "list",
    ["uniform", "range"],
    "Server-side assignors of consumer groups (KIP-848), by name: uniform, range; the first is the "
    "default, a member picks another with group.remote.assignor.",
    one_of("uniform", "range"),
)
_define(
    "group.consumer.max.size",
    "int",
    2147483647,
    "Maximum members of a consumer group (GROUP_MAX_SIZE_REACHED beyond).",
    at_least(1),
)
_define(
    "group.share.record.lock.duration.ms",
    "int",
    30000,
    "Default share.record.lock.duration.ms of share groups (a group config overrides it).",
    at_least(1000),
)
_define(
    "group.share.min.record.lock.duration.ms",
    "int",
    15000,
    "Smallest share.record.lock.duration.ms a group config may set.",
    at_least(1000),
)
_define(
    "group.share.max.record.lock.duration.ms",
    "int",
    60000,
    "Largest share.record.lock.duration.ms a group config may set.",
    at_least(1000),
)
_define(
    "group.share.delivery.count.limit",
    "int",
    5,
    "Deliveries of a share-group record after which a released or expired record is archived (KIP-932).",
    between(2, 10),
)
_define(
    "group.share.partition.max.record.locks",
    "int",
    2000,
    "Most in-flight records of one share partition (KIP-932).",
    between(100, 10000),
)
_define("group.share.max.size", "int", 200, "Maximum members of a share group (KIP-932).", between(1, 1000))
_define("producer.id.expiration.ms", "int", 86400000, "Producer id expiration" + _UNUSED, at_least(1))
_define(
    "transactional.id.expiration.ms",
    "int",
    604800000,
    "A transactional id without a transaction for this long is forgotten (a tombstone in __transaction_state).",
    at_least(1),
)


# --- security: TLS and SASL (per listener with the prefix listener.name.<listener>.) ------------
# Kafka's SslConfigs / BrokerSecurityConfigs. Only PEM key and trust stores (KIP-651) are loaded.
_define(
    "ssl.keystore.type",
    "string",
    "JKS",
    "Key store format; only PEM is supported (Kafka's default JKS needs a JVM).",
    one_of("JKS", "PKCS12", "PEM", case_sensitive=False),
)
_define(
    "ssl.keystore.location",
    "string",
    None,
    "PEM file holding the private key (PKCS#8, one PRIVATE KEY entry) and the certificate chain, leaf first.",
)
_define("ssl.keystore.password", "password", None, "Key store password (not used with PEM: must be unset).")
_define(
    "ssl.keystore.key",
    "password",
    None,
    "Inline PEM private key (PKCS#8), with ssl.keystore.certificate.chain.",
)
_define(
    "ssl.keystore.certificate.chain",
    "password",
    None,
    "Inline PEM certificate chain, leaf first, with ssl.keystore.key.",
)
_define(
    "ssl.key.password", "password", None, "Password of an encrypted PEM private key (ENCRYPTED PRIVATE KEY)."
)
_define(
    "ssl.truststore.type",
    "string",
    "JKS",
    "Trust store format; only PEM is supported.",
    one_of("JKS", "PKCS12", "PEM", case_sensitive=False),
)
_define(
    "ssl.truststore.location",
    "string",
    None,
    "PEM file of the CA certificates trusted for client certificates.",
)
_define(
    "ssl.truststore.password", "password", None, "Trust store password (not used with PEM: must be unset)."
)
_define(
    "ssl.truststore.certificates", "password", None, "Inline PEM CA certificates (instead of a location)."
)
_define(
    "ssl.client.auth",
    "string",
    "none",
    "Client certificates: none, requested (verified when sent) or required (mutual TLS). Needs a trust store.",
    one_of("none", "requested", "required", case_sensitive=False),
)
_define(
    "ssl.enabled.protocols",
    "list",
    ["TLSv1.2", "TLSv1.3"],
    "TLS versions accepted.",
    one_of("TLSv1.2", "TLSv1.3"),
)
_define(
    "ssl.endpoint.identification.algorithm",
    "string",
    "https",
    "Host name check of the other broker's certificate on inter-broker TLS connections: https (the "
    "certificate must name the advertised host) or empty (no check).",
    one_of("https", ""),
)
_define(
    "sasl.mechanism.inter.broker.protocol",
    "string",
    "GSSAPI",
    "SASL mechanism of inter-broker connections (replica fetchers, transaction markers) when the "
    "inter-broker listener uses SASL; its credentials are the username/password options of "
    "listener.name.<inter-broker listener>.<mechanism>.sasl.jaas.config.",
)
_define(
    "sasl.enabled.mechanisms",
    "list",
    ["GSSAPI"],
    "SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default GSSAPI is not "
    "supported, so SASL listeners must set this).",
)
_define(
    "sasl.server.max.receive.size",
    "int",
    524288,
    "Largest frame accepted before authentication completes; a bigger one closes the connection.",
    at_least(1),
)
_define(
    "connection.failed.authentication.delay.ms",
    "int",
    100,
    "After a failed authentication the error response and the close are delayed this long.",
    at_least(0),
)
