"""``meta.properties`` in every log dir and the cluster id (Kafka's ``MetaProperties`` /
``MetaPropertiesEnsemble``, written by ``kafka-storage format``; here by the first start).

Each log dir records the cluster id and the node id it belongs to (plus a directory id and
``version=1``); a broker refuses a log dir of another node or log dirs that disagree on the
cluster. A fresh multi-node cluster derives its cluster id from ``controller.quorum.voters`` so
every node agrees without a format step; a single node picks a random one.
"""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from pathlib import Path

from broker.config import KafkaConfig, parse_properties
from spark_kafkalite.atomic_file import write_atomically

__all__ = [
    "META_PROPERTIES_FILE",
    "MetaPropertiesError",
    "ensure_meta_properties",
    "new_cluster_id",
    "quorum_cluster_id",
    "quorum_password",
]

META_PROPERTIES_FILE = "meta.properties"


class MetaPropertiesError(RuntimeError):
    """The log dirs belong to another node or disagree on the cluster id."""


def new_cluster_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: base64url, 22 characters."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def quorum_cluster_id(voters: dict[int, tuple[str, int]]) -> str:
    """The cluster id of a fresh multi-node cluster: derived from ``controller.quorum.voters``
    so every node agrees without a ``kafka-storage format`` step (base64url, 22 characters)."""
    text = ",".join(f"{vid}@{host}:{port}" for vid, (host, port) in sorted(voters.items()))
    digest = uuid.uuid5(uuid.NAMESPACE_URL, "kafkalite-cluster:" + text)
    return base64.urlsafe_b64encode(digest.bytes).rstrip(b"=").decode("ascii")


def quorum_password(config: KafkaConfig, cluster_id: str) -> str:
    """``controller.quorum.password``, else a secret derived from the cluster id."""
    explicit = config["controller.quorum.password"]
    if explicit:
        return str(explicit)
    return hashlib.sha256(f"kafkalite-raft:{cluster_id}".encode()).hexdigest()


def ensure_meta_properties(log_dirs: list[Path], node_id: int, default_cluster_id: str | None = None) -> str:
    """Read (or create) ``meta.properties`` in every log dir and return the cluster id
    (``default_cluster_id`` or a random one for a new cluster).

    Raises:
        MetaPropertiesError: a dir belongs to another node id or the dirs disagree on the cluster id.
    """
    cluster_id: str | None = None
    missing: list[Path] = []
    for log_dir in log_dirs:
        log_dir.mkdir(parents=True, exist_ok=True)
        path = log_dir / META_PROPERTIES_FILE
        if not path.exists():
            missing.append(path)
            continue
        props = parse_properties(path.read_text(encoding="utf-8"), str(path))
        stored_node = props.get("node.id")
        if stored_node is not None and int(stored_node) != node_id:
            raise MetaPropertiesError(
                f"Stored node id {stored_node} in {path} doesn't match the configured node.id {node_id}"
            )
        stored_cluster = props.get("cluster.id")
        if stored_cluster:
            if cluster_id is not None and stored_cluster != cluster_id:
                raise MetaPropertiesError(
                    f"Log dirs disagree on the cluster id: {cluster_id} vs {stored_cluster} ({path})"
                )
            cluster_id = stored_cluster
    if cluster_id is None:
        cluster_id = default_cluster_id or new_cluster_id()
    for path in missing:
        text = (
            "#\n#" + time.strftime("%a %b %d %H:%M:%S %Z %Y") + "\n"
            f"cluster.id={cluster_id}\ndirectory.id={new_cluster_id()}\nnode.id={node_id}\nversion=1\n"
        )
        write_atomically(path, text)
    return cluster_id
