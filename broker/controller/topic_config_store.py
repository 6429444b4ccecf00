"""Durable per-topic config overrides: ``<metadata dir>/topic-configs.json``.

KRaft keeps topic configs as ``ConfigRecord`` s in the ``__cluster_metadata`` log. Until the
Raft quorum (issue 3) provides that log, the broker snapshots the overrides of its metadata image
into one JSON file, written atomically (tmp file, fsync, rename, fsync of the directory) whenever
they change::

    {"version": 1,
     "topics": {"orders": {"topic_id": "<Kafka Uuid>", "configs": {"retention.ms": "60000"}}}}

The metadata dir is ``KafkaConfig.metadata_log_dir`` (``metadata.log.dir``, else the first of
``log.dirs``: Kafka's rule).
The file name never looks like a ``<topic>-<partition>`` directory. At startup, entries are used
only for topics found on disk with the same topic id (a topic deleted and re-created while the
file was stale keeps no foreign overrides).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from pathlib import Path

from broker.json_state_file import save_versioned_json
from broker.log.partition_metadata import format_topic_id, parse_topic_id

__all__ = ["TOPIC_CONFIGS_FILE", "load_topic_configs", "save_topic_configs"]

logger = logging.getLogger(__name__)

TOPIC_CONFIGS_FILE = "topic-configs.json"
_VERSION = 1

StoredTopicConfigs = dict[str, tuple[uuid.UUID, dict[str, str]]]


def load_topic_configs(path: Path) -> StoredTopicConfigs:
    """``{topic: (topic_id, {key: value})}`` from ``path``; empty when the file is missing.
    An unreadable or corrupt file is logged and treated as empty (the broker still starts, with
    broker defaults for every topic)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        logger.error("cannot read topic configs %s: %s", path, exc)
        return {}
    try:
        payload = json.loads(text)
        topics = payload["topics"]
        result: StoredTopicConfigs = {}
        for name, entry in topics.items():
            configs = {str(k): str(v) for k, v in entry["configs"].items()}
            result[str(name)] = (parse_topic_id(entry["topic_id"]), configs)
        return result
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        logger.error("ignoring corrupt topic configs file %s: %s", path, exc)
        return {}


def save_topic_configs(path: Path, configs: Mapping[str, tuple[uuid.UUID, Mapping[str, str]]]) -> None:
    """Atomically replace ``path`` with ``configs`` (``{topic: (topic_id, overrides)}``).

    Raises:
        OSError: the file cannot be written.
    """
    topics = {
        name: {"topic_id": format_topic_id(topic_id), "configs": dict(sorted(overrides.items()))}
        for name, (topic_id, overrides) in sorted(configs.items())
    }
    save_versioned_json(path, _VERSION, {"topics": topics})
