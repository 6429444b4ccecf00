"""DescribeLogDirs (key 35), v1-v4 (Kafka 4.0's range, v0 removed by KIP-896;
``KafkaApis.handleDescribeLogDirsRequest`` + ``ReplicaManager.describeLogDirs``).

One result per configured log dir, named by its absolute path. An online dir lists the
requested partitions it holds (``topics`` null = every partition of this broker) with
``partition_size`` = the bytes of all its segments (``UnifiedLog.size_bytes``), ``offset_lag``
= max(high watermark - log end offset, 0) (0 for a leader) and ``is_future_key`` false (no
AlterReplicaLogDirs here); topics with no listed partition are left out. v4 (KIP-827) adds the
volume's ``total_bytes`` / ``usable_bytes`` (``shutil.disk_usage``; -1 where not known). An
offline dir (``LogManager.offline_log_dirs``, or a failing ``disk_usage``) gives
KAFKA_STORAGE_ERROR and no topics. The top-level ``error_code`` (v3+) is NONE.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.apis.auth_helper import authorize_cluster
from broker.apis.context import BrokerContext
from broker.errors import error_code_for
from broker.log.unified_log import UnifiedLog
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import DescribeLogDirsRequest, DescribeLogDirsResponse

__all__ = ["handle_describe_log_dirs", "describe_log_dirs_error_response"]

logger = logging.getLogger(__name__)

_MAX_I64 = (1 << 63) - 1  # Kafka's adjustForLargeFileSystems caps overflowing sizes here


def _requested(request: DescribeLogDirsRequest) -> set[tuple[str, int]] | None:
    """The (topic, partition) pairs asked for, or None for all."""
    if request.topics is None:
        return None
    return {(t.topic, int(p)) for t in request.topics for p in t.partitions}


def _describe_dir(
    cls: type[Any], log_dir: Path, logs: list[UnifiedLog], wanted: set[tuple[str, int]] | None
) -> Any:
    """The ``DescribeLogDirsResult`` of one log dir (raises OSError when its volume fails)."""
    result_cls = nested(cls, "DescribeLogDirsResult")
    topic_cls = nested(cls, "DescribeLogDirsTopic")
    partition_cls = nested(cls, "DescribeLogDirsPartition")
    usage = shutil.disk_usage(log_dir)
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for log in sorted(logs, key=lambda lg: (lg.topic, lg.partition)):
        if wanted is not None and (log.topic, log.partition) not in wanted:
            continue
        by_topic[log.topic].append(
            build(
                partition_cls,
                partition_index=log.partition,
                partition_size=log.size_bytes,
                offset_lag=max(log.high_watermark - log.log_end_offset, 0),
                is_future_key=False,
            )
        )
    return build(
        result_cls,
        error_code=ErrorCode.none,
        log_dir=os.path.abspath(log_dir),
        topics=tuple(build(topic_cls, name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        total_bytes=min(usage.total, _MAX_I64),
        usable_bytes=min(usage.free, _MAX_I64),
    )


async def handle_describe_log_dirs(
    ctx: BrokerContext, rctx: RequestContext, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    """Handle a DescribeLogDirsRequest (v1-v4); needs DESCRIBE on the cluster (else no results
    and CLUSTER_AUTHORIZATION_FAILED)."""
    if not authorize_cluster(ctx, rctx, AclOperation.DESCRIBE):
        return describe_log_dirs_error_response(
            request, rctx.api_version, ErrorCode.cluster_authorization_failed
        )
    cls = response_class(ApiKey.DESCRIBE_LOG_DIRS, rctx.api_version)
    result_cls = nested(cls, "DescribeLogDirsResult")
    wanted = _requested(request)
    manager = ctx.log_manager
    logs_by_dir: dict[Path, list[UnifiedLog]] = defaultdict(list)
    for log in manager.all_logs().values():
        logs_by_dir[log.dir.parent].append(log)
    results = []
    for log_dir in manager.log_dirs:
        try:
            if log_dir in manager.offline_log_dirs:
                code = ErrorCode.kafka_storage_error
            else:
                results.append(_describe_dir(cls, log_dir, logs_by_dir.get(log_dir, []), wanted))
                continue
        except Exception as exc:  # noqa: BLE001 - one dir's error (OSError -> KAFKA_STORAGE_ERROR)
            code = error_code_for(exc, f"DescribeLogDirs of {log_dir}")
        logger.warning("DescribeLogDirs: log dir %s is offline or failing (%s)", log_dir, code.name)
        results.append(build(result_cls, error_code=code, log_dir=os.path.abspath(log_dir), topics=()))
    return build(cls, throttle_time=ZERO_DURATION, error_code=ErrorCode.none, results=tuple(results))


def describe_log_dirs_error_response(
    request: DescribeLogDirsRequest, version: int, code: ErrorCode
) -> DescribeLogDirsResponse:
    """``code`` at the top level (v3+) and no results (Kafka's
    ``DescribeLogDirsRequest.getErrorResponse``)."""
    cls = response_class(ApiKey.DESCRIBE_LOG_DIRS, version)
    return build(cls, throttle_time=ZERO_DURATION, error_code=code, results=())
