"""``KafkaAdminClient``: topic management and cluster inspection (a small Java ``Admin``).

CreateTopics / DeleteTopics / CreatePartitions go to the controller named in the metadata
(retrying on NOT_CONTROLLER; ``admin_topics.AdminTopics``); list/describe use MetadataRequests;
``list_offsets`` uses ListOffsets grouped by leader; DescribeLogDirs goes to every broker;
DescribeConfigs goes to the least loaded broker (to the broker itself for BROKER resources),
(Incremental)AlterConfigs to the least loaded broker (Kafka's brokers forward them to the
controller). Groups, ACLs, SCRAM credentials and transactions are delegated to the ``admin_*``
components. Blocking calls on the caller's thread; not thread-safe.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, overload

from spark_kafkalite.client.admin_acls import AdminAcls
from spark_kafkalite.client.admin_configs import (
    RESOURCE_BROKER,
    ConfigEntry,
    ConfigResource,
    alter_configs_builder,
    as_resource,
    describe_configs_builder,
    incremental_alter_configs_builder,
    parse_alter_configs,
    parse_describe_configs,
)
from spark_kafkalite.client.admin_groups import (
    AdminGroups,
    ConsumerGroupListing,
)
from spark_kafkalite.client.admin_log_dirs import describe_log_dirs_builder, parse_describe_log_dirs
from spark_kafkalite.client.admin_records import delete_records
from spark_kafkalite.client.admin_scram import (
    AdminScram,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from spark_kafkalite.client.admin_topics import AdminTopics
from spark_kafkalite.client.admin_transactions import (
    AdminTransactions,
    TransactionDescription,
    TransactionListing,
)
from spark_kafkalite.client.admin_views import GroupDescriptions, GroupLag, TopicDescriptions
from spark_kafkalite.client.config import parse_config
from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata
from spark_kafkalite.client.consumer.offset_fetcher import OffsetFetcher
from spark_kafkalite.client.errors import IllegalStateError
from spark_kafkalite.client.metadata import (
    Cluster,
    Metadata,
    fetch_cluster,
)
from spark_kafkalite.client.network_client import NetworkClient, now_ms
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import NewTopic, OffsetAndTimestamp, PartitionInfo, TopicPartition
from spark_kafkalite.protocol.acl import AclBinding, AclBindingFilter
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for_code,
)

__all__ = ["KafkaAdminClient", "ConfigResource", "ConfigEntry"]

log = logging.getLogger(__name__)

ADMIN_DEFAULTS: dict[str, Any] = {"exclude.internal.topics": True}


class KafkaAdminClient:
    """Administer topics and consumer groups and inspect the cluster (group methods delegate to
    an ``admin_groups.AdminGroups`` component).

    Config: ``bootstrap.servers`` (required), ``request.timeout.ms`` (30000),
    ``default.api.timeout.ms`` (60000), ``retry.backoff.ms`` (100), ``client.id``.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        merged = dict(config or {})
        merged.update({k.replace("_", "."): v for k, v in kwargs.items()})
        self.config = parse_config(merged, ADMIN_DEFAULTS, "admin")
        self._default_timeout_ms = float(self.config["default.api.timeout.ms"])
        self._retry_backoff_ms = float(self.config["retry.backoff.ms"])
        self._metadata = Metadata(self.config, allow_auto_topic_creation=False)
        self._client = NetworkClient(self.config, self._metadata)
        self._offsets = OffsetFetcher(self._client, self._metadata, None, self.config)
        self._closed = False
        self._groups = AdminGroups(
            self._client,
            self._default_timeout_ms,
            self._retry_backoff_ms,
            ensure_open=self._ensure_open,
            describe=self._describe,
            list_offsets=self.list_offsets,
        )
        self._topics = AdminTopics(
            self._client,
            self._retry_backoff_ms,
            ensure_open=self._ensure_open,
            describe=self._describe,
        )
        self._acls = AdminAcls(self._send_any)
        self._scram = AdminScram(self._send_any)
        self._transactions = AdminTransactions(
            self._client,
            self._default_timeout_ms,
            self._retry_backoff_ms,
            ensure_open=self._ensure_open,
            describe=self._describe,
        )

    # -------------------------------------------------------------- plumbing

    def _ensure_open(self) -> None:
        if self._closed:
            raise IllegalStateError("this admin client has already been closed")

    def _describe(self, topics: list[str] | None, timeout_ms: float | None = None) -> Cluster:
        """One MetadataRequest to the least loaded node (retrying connection errors)."""
        self._ensure_open()
        return fetch_cluster(
            self._client,
            topics,
            self._default_timeout_ms if timeout_ms is None else timeout_ms,
            self._retry_backoff_ms,
        )

    # -------------------------------------------------------------- topics

    def create_topics(
        self, new_topics: Iterable[NewTopic], timeout_ms: int = 30000, validate_only: bool = False
    ) -> None:
        """Create topics and wait for their leaders (``AdminTopics.create_topics``, CreateTopics)."""
        self._topics.create_topics(new_topics, timeout_ms, validate_only)

    def delete_topics(self, topics: Iterable[str], timeout_ms: int = 30000) -> None:
        """Delete topics and wait until the metadata drops them (``AdminTopics.delete_topics``)."""
        self._topics.delete_topics(topics, timeout_ms)

    def list_topics(self, timeout_ms: float | None = None) -> list[str]:
        """Names of all topics (internal ones excluded), sorted."""
        cluster = self._describe(None, timeout_ms)
        exclude = bool(self.config["exclude.internal.topics"])
        return sorted(t for t in cluster.partitions if not (exclude and t in cluster.internal_topics))

    def describe_topics(self, topics: Iterable[str], timeout_ms: float | None = None) -> TopicDescriptions:
        """Partitions of each topic, sorted by partition id (a ``dict``: topic ->
        ``[PartitionInfo]``, shown as a table in a notebook).

        Raises:
            UnknownTopicOrPartitionError: a topic does not exist (the first error is raised).
        """
        names = list(topics)
        cluster = self._describe(names, timeout_ms)
        out = TopicDescriptions()
        for name in names:
            code = cluster.topic_errors.get(name)
            if code is not None and code != ErrorCode.leader_not_available:
                raise error_for_code(code, f"topic {name}")
            parts = cluster.partitions.get(name, {})
            out[name] = [
                PartitionInfo(pm.partition, pm.leader, list(pm.replicas), list(pm.isr), pm.leader_epoch)
                for pm in sorted(parts.values(), key=lambda pm: pm.partition)
            ]
        return out

    def topic_ids(self, topics: Iterable[str], timeout_ms: float | None = None) -> dict[str, uuid.UUID]:
        """The topic id (KIP-516) of each named topic that has one (Metadata v10+ brokers)."""
        names = list(topics)
        found = self._describe(names, timeout_ms).topic_ids
        return {name: found[name] for name in names if name in found}

    def describe_cluster(self, timeout_ms: float | None = None) -> dict[str, Any]:
        """``{"cluster_id": str | None, "controller_id": int, "brokers": [(node_id, host, port)]}``."""
        cluster = self._describe([], timeout_ms)
        return {
            "cluster_id": cluster.cluster_id,
            "controller_id": cluster.controller_id,
            "brokers": sorted((node_id, host, port) for node_id, (host, port) in cluster.nodes.items()),
        }

    # -------------------------------------------------------------- configs and partitions

    def _send_any(self, builder: RequestBuilder, node_id: int | None, timeout_ms: float | None) -> Any:
        """Send to ``node_id`` (or the least loaded node), retrying connection errors and
        timeouts until ``timeout_ms`` (default ``default.api.timeout.ms``) runs out."""
        self._ensure_open()
        deadline = now_ms() + (self._default_timeout_ms if timeout_ms is None else timeout_ms)
        last_error: BaseException | None = None
        while True:
            if node_id is not None:
                self._describe([], max(1.0, deadline - now_ms()))  # learn the node's address
            node = node_id if node_id is not None else self._client.least_loaded_node()
            if node is not None:
                future = self._client.send(node, builder)
                try:
                    return self._client.wait_for(future, max(1.0, deadline - now_ms()))
                except (KafkaConnectionError, KafkaTimeoutError) as exc:
                    last_error = exc
            if now_ms() >= deadline:
                raise KafkaTimeoutError(f"{ApiKey(builder.api_key).name} did not complete: {last_error}")
            self._client.poll(min(self._retry_backoff_ms, max(0.0, deadline - now_ms())))

    @overload
    def describe_configs(  # type: ignore[overload-overlap]  # a str is one topic, not an iterable
        self,
        resources: str | ConfigResource,
        keys: Iterable[str] | None = None,
        include_synonyms: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[str, ConfigEntry]: ...

    @overload
    def describe_configs(
        self,
        resources: Iterable[str | ConfigResource],
        keys: Iterable[str] | None = None,
        include_synonyms: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]: ...

    def describe_configs(
        self,
        resources: str | ConfigResource | Iterable[str | ConfigResource],
        keys: Iterable[str] | None = None,
        include_synonyms: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[str, ConfigEntry] | dict[ConfigResource, dict[str, ConfigEntry]]:
        """Configs with their values and sources (DescribeConfigs, Java ``Admin.describeConfigs``).

        ``resources``: a topic name or one :class:`ConfigResource` -> ``{name: ConfigEntry}``;
        an iterable of them -> ``{ConfigResource: {name: ConfigEntry}}``. ``keys`` limits the
        configs returned (unknown ones are skipped); ``include_synonyms`` fills
        ``ConfigEntry.synonyms`` (e.g. ``retention.ms`` <- ``log.retention.hours``).

        Example: ``admin.describe_configs("orders")["retention.ms"].value`` -> ``"604800000"``.

        Raises:
            UnknownTopicOrPartitionError: a topic does not exist (the first error is raised).
            InvalidRequestError: an unsupported resource. KafkaTimeoutError: no answer in time.
        """
        single = isinstance(resources, (str, ConfigResource))
        items = [as_resource(resources)] if single else [as_resource(r) for r in resources]  # type: ignore[arg-type]
        key_list = None if keys is None else list(keys)
        groups: dict[int | None, list[ConfigResource]] = {}
        for r in items:
            node = int(r.name) if r.resource_type == RESOURCE_BROKER and r.name.isdigit() else None
            groups.setdefault(node, []).append(r)
        found: dict[ConfigResource, tuple[int, str | None, dict[str, ConfigEntry]]] = {}
        for node, group in groups.items():
            response = self._send_any(
                describe_configs_builder(group, key_list, include_synonyms), node, timeout_ms
            )
            found.update(parse_describe_configs(response))
        out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        for r in items:
            code, message, entries = found.get(r, (int(ErrorCode.unknown_server_error), "no result", {}))
            if code != ErrorCode.none:
                raise error_for_code(code, f"{r.name}: {message}" if message else r.name)
            out[r] = entries
        return out[items[0]] if single else out

    def incremental_alter_configs(
        self,
        changes: Mapping[str | ConfigResource, Mapping[str, Any]],
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> None:
        """Change some configs, keeping the others (IncrementalAlterConfigs, KIP-339).

        ``changes``: ``{topic or ConfigResource: {key: change}}`` where a change is a value
        (SET), None (DELETE: back to the default), or ``(op, value)`` with op ``"SET"``,
        ``"DELETE"``, ``"APPEND"`` or ``"SUBTRACT"`` (APPEND / SUBTRACT for list configs such as
        ``cleanup.policy``). Example: ``{"orders": {"retention.ms": "60000", "segment.ms": None}}``.

        Raises:
            InvalidConfigError: an unknown key or a bad value (message names the key).
            UnknownTopicOrPartitionError, InvalidRequestError (e.g. BROKER resources, which are
            read-only here), KafkaTimeoutError. The first error is raised; resources are
            applied independently.
        """
        resolved = {as_resource(r): dict(entries) for r, entries in changes.items()}
        if not resolved:
            return
        response = self._send_any(
            incremental_alter_configs_builder(resolved, validate_only), None, timeout_ms
        )
        self._raise_first_resource(parse_alter_configs(response), list(resolved))

    def alter_configs(
        self,
        configs: Mapping[str | ConfigResource, Mapping[str, str]],
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> None:
        """Replace each resource's whole override set (legacy AlterConfigs): keys left out
        return to their defaults. Prefer :meth:`incremental_alter_configs`.

        Raises:
            Same as :meth:`incremental_alter_configs`.
        """
        resolved = {as_resource(r): dict(entries) for r, entries in configs.items()}
        if not resolved:
            return
        response = self._send_any(alter_configs_builder(resolved, validate_only), None, timeout_ms)
        self._raise_first_resource(parse_alter_configs(response), list(resolved))

    @staticmethod
    def _raise_first_resource(
        results: Mapping[ConfigResource, tuple[int, str | None]], resources: list[ConfigResource]
    ) -> None:
        for r in resources:
            code, message = results.get(r, (int(ErrorCode.unknown_server_error), "no result for resource"))
            if code != ErrorCode.none:
                raise error_for_code(code, f"{r.name}: {message}" if message else r.name)

    def create_partitions(
        self, new_totals: Mapping[str, int], timeout_ms: int = 30000, validate_only: bool = False
    ) -> None:
        """Grow topics to new partition totals (``AdminTopics.create_partitions``, CreatePartitions)."""
        self._topics.create_partitions(new_totals, timeout_ms, validate_only)

    def describe_log_dirs(
        self, topics: list[str] | None = None, timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """Bytes on disk per partition (DescribeLogDirs, Java ``Admin.describeLogDirs``):
        ``{TopicPartition: size_bytes}`` summed over every log dir of every broker (so each
        replica counts). ``topics`` None means every partition. Offline log dirs
        (KAFKA_STORAGE_ERROR) are skipped with a warning.

        Raises:
            UnknownTopicOrPartitionError: a named topic does not exist.
            KafkaTimeoutError: no answer in time. KafkaError: a top-level error (v3+).
        """
        wanted = None
        if topics is not None:
            described = self.describe_topics(topics, timeout_ms)
            wanted = {t: [p.partition for p in parts] for t, parts in described.items()}
        sizes: dict[TopicPartition, int] = {}
        for node_id, _, _ in self.describe_cluster(timeout_ms)["brokers"]:
            code, dirs = parse_describe_log_dirs(
                self._send_any(describe_log_dirs_builder(wanted), node_id, timeout_ms)
            )
            if code != ErrorCode.none:
                raise error_for_code(code, f"DescribeLogDirs on broker {node_id}")
            for d in dirs:
                if d.error_code != ErrorCode.none:
                    log.warning(
                        "log dir %s of broker %d: %s", d.log_dir, node_id, error_for_code(d.error_code)
                    )
                for tp, size in d.replica_sizes_bytes.items():
                    sizes[tp] = sizes.get(tp, 0) + size
        return sizes

    # -------------------------------------------------------------- offsets

    def list_offsets(
        self, specs: Mapping[TopicPartition, int], timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Offsets per partition for ``spec`` -2 (earliest), -1 (latest = high watermark) or a
        timestamp in ms (first offset with a timestamp >= it; ``OffsetAndTimestamp(-1, -1)``
        when there is none).

        Raises:
            UnknownTopicOrPartitionError, KafkaTimeoutError, KafkaError.
        """
        self._ensure_open()
        query = {TopicPartition(str(tp[0]), int(tp[1])): int(spec) for tp, spec in specs.items()}
        found = self._offsets.list_offsets(
            query, self._default_timeout_ms if timeout_ms is None else timeout_ms
        )
        return {
            tp: OffsetAndTimestamp(-1, -1) if value is None else OffsetAndTimestamp(value[0], value[1])
            for tp, value in found.items()
        }

    def delete_records(
        self, before: Mapping[TopicPartition, int], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int | KafkaError]:
        """Delete the records below ``before[tp]`` (-1: below the high watermark) in each
        partition: one DeleteRecords request per leader (Java ``Admin.deleteRecords``).
        Returns the new log start offset (low watermark) per partition, or its error
        (e.g. OffsetOutOfRangeError for an offset above the high watermark).

        Raises:
            UnknownTopicOrPartitionError: a topic does not exist. KafkaTimeoutError.
        """
        return delete_records(
            self._send_any, self.describe_topics, before, int(self.config["request.timeout.ms"]), timeout_ms
        )

    # -------------------------------------------------------------- lifecycle

    # -------------------------------------------------------------- consumer groups
    def list_consumer_groups(self, timeout_ms: float | None = None) -> list[ConsumerGroupListing]:
        """Every consumer and simple group, sorted by id (``AdminGroups.list_consumer_groups``)."""
        return self._groups.list_consumer_groups(timeout_ms)

    def describe_consumer_groups(
        self, group_ids: Iterable[str], timeout_ms: float | None = None
    ) -> GroupDescriptions:
        """Members, assignor and state of each group (``AdminGroups.describe_consumer_groups``)."""
        return self._groups.describe_consumer_groups(group_ids, timeout_ms)

    def list_consumer_group_offsets(
        self, group_id: str, timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """Committed offsets of the group (``AdminGroups.list_consumer_group_offsets``)."""
        return self._groups.list_consumer_group_offsets(group_id, timeout_ms)

    def list_consumer_group_offsets_and_metadata(
        self, group_id: str, timeout_ms: float | None = None, *, require_stable: bool = False
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets with metadata and leader epoch; ``require_stable`` waits out pending
        transactional commits (``AdminGroups.list_consumer_group_offsets_and_metadata``)."""
        return self._groups.list_consumer_group_offsets_and_metadata(
            group_id, timeout_ms, require_stable=require_stable
        )

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: dict[TopicPartition, int], timeout_ms: float | None = None
    ) -> None:
        """Commit offsets for a group without members (``AdminGroups.alter_consumer_group_offsets``)."""
        self._groups.alter_consumer_group_offsets(group_id, offsets, timeout_ms)

    def delete_consumer_groups(self, group_ids: Iterable[str], timeout_ms: float | None = None) -> None:
        """Delete empty groups (``AdminGroups.delete_consumer_groups``)."""
        self._groups.delete_consumer_groups(group_ids, timeout_ms)

    def consumer_group_lag(
        self, group_id: str, timeout_ms: float | None = None, include_assigned: bool = True
    ) -> GroupLag:
        """Committed offset, log end offset and lag per partition (``AdminGroups.consumer_group_lag``)."""
        return self._groups.consumer_group_lag(group_id, timeout_ms, include_assigned)

    # -------------------------------------------------------------- ACLs
    def create_acls(self, acls: Iterable[AclBinding], timeout_ms: float | None = None) -> None:
        """Create ACLs (``AdminAcls.create_acls``)."""
        self._acls.create_acls(acls, timeout_ms)

    def describe_acls(
        self, acl_filter: AclBindingFilter, node_id: int | None = None, timeout_ms: float | None = None
    ) -> list[AclBinding]:
        """The ACLs matching a filter (``AdminAcls.describe_acls``)."""
        return self._acls.describe_acls(acl_filter, node_id, timeout_ms)

    def delete_acls(
        self, filters: Iterable[AclBindingFilter], timeout_ms: float | None = None
    ) -> list[AclBinding]:
        """Delete the ACLs matching the filters; returns them (``AdminAcls.delete_acls``)."""
        return self._acls.delete_acls(filters, timeout_ms)

    # -------------------------------------------------------------- SCRAM credentials (KIP-554)
    def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        timeout_ms: float | None = None,
    ) -> None:
        """Create, replace or delete users' SCRAM credentials (``AdminScram.alter_user_scram_credentials``)."""
        self._scram.alter_user_scram_credentials(alterations, timeout_ms)

    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, timeout_ms: float | None = None
    ) -> dict[str, list[ScramCredentialInfo]]:
        """Mechanisms and iterations per user (``AdminScram.describe_user_scram_credentials``)."""
        return self._scram.describe_user_scram_credentials(users, timeout_ms)

    def describe_transactions(
        self, transactional_ids: Iterable[str], timeout_ms: float | None = None
    ) -> dict[str, TransactionDescription]:
        """Each transactional id's state at its coordinator
        (``AdminTransactions.describe_transactions``)."""
        return self._transactions.describe_transactions(transactional_ids, timeout_ms)

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_filter_ms: int = -1,
        timeout_ms: float | None = None,
        transactional_id_pattern: str | None = None,
    ) -> list[TransactionListing]:
        """Transactional ids known to the cluster (``AdminTransactions.list_transactions``)."""
        return self._transactions.list_transactions(
            states, producer_ids, duration_filter_ms, timeout_ms, transactional_id_pattern
        )

    def close(self) -> None:
        """Close the connections (idempotent); later calls raise ``IllegalStateError``."""
        if self._closed:
            return
        self._closed = True
        self._client.close()
        self._metadata.close()

    def __enter__(self) -> KafkaAdminClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
