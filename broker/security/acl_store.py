"""Durable ACLs of a single-node broker: ``<metadata dir>/acls.json``.

A multi-node cluster keeps ACLs as ``AccessControlEntryRecord`` s in its Raft metadata log and
snapshots (as KRaft does). A single-node broker has no metadata log, so its controller writes the
image's ACLs to one JSON file (atomically: tmp file, fsync, rename) after every change and
replays them at startup::

    {"version": 1, "acls": [{"id": "<uuid>", "resource_type": 2, "resource_name": "orders",
      "pattern_type": 3, "principal": "User:alice", "host": "*", "operation": 3,
      "permission_type": 3}]}

The metadata dir is ``metadata.log.dir`` when set, else the first of ``log.dirs``.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping
from pathlib import Path

from broker.atomic_file import write_atomically
from spark_kafkalite.protocol.acl import AclBinding

__all__ = ["ACLS_FILE", "acls_path", "load_acls", "save_acls"]

logger = logging.getLogger(__name__)

ACLS_FILE = "acls.json"
_VERSION = 1
_FIELDS = (
    "resource_type",
    "resource_name",
    "pattern_type",
    "principal",
    "host",
    "operation",
    "permission_type",
)


def acls_path(metadata_log_dir: str | os.PathLike[str] | None, log_dirs: list[Path]) -> Path:
    """Where the ACLs live: ``metadata.log.dir`` if set, else the first log dir."""
    base = Path(metadata_log_dir) if metadata_log_dir else Path(log_dirs[0])
    return base / ACLS_FILE


def load_acls(path: Path) -> dict[uuid.UUID, AclBinding]:
    """``{acl id: ACL}`` from ``path``; empty when the file is missing.

    Raises:
        OSError: the file exists but cannot be read.
        ValueError: the file is corrupt (the broker must not start with fewer ACLs than it had:
            a lost DENY would open access).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        payload = json.loads(text)
        if payload.get("version") != _VERSION:
            raise ValueError(f"unknown version {payload.get('version')!r}")
        return {
            uuid.UUID(entry["id"]): AclBinding.of(*(entry[name] for name in _FIELDS))
            for entry in payload["acls"]
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"corrupt ACL file {path}: {exc}") from None


def save_acls(path: Path, acls: Mapping[uuid.UUID, AclBinding]) -> None:
    """Atomically replace ``path`` with ``acls``.

    Raises:
        OSError: the file cannot be written.
    """
    entries = [
        {"id": str(acl_id), **{name: _plain(getattr(acl, name)) for name in _FIELDS}}
        for acl_id, acl in sorted(acls.items(), key=lambda item: str(item[0]))
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps({"version": _VERSION, "acls": entries}, indent=1))


def _plain(value: object) -> object:
    return int(value) if isinstance(value, int) else value
