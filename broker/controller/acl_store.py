"""Durable ACLs of a single-node broker: ``<metadata dir>/acls.json``.

A multi-node cluster keeps ACLs as ``AccessControlEntryRecord`` s in its Raft metadata log and
snapshots (as KRaft does). A single-node broker has no metadata log, so its controller writes the
image's ACLs to one JSON file (atomically: tmp file, fsync, rename) after every change and
replays them at startup::

    {"version": 1, "acls": [{"id": "<uuid>", "resource_type": 2, "resource_name": "orders",
      "pattern_type": 3, "principal": "User:alice", "host": "*", "operation": 3,
      "permission_type": 3}]}

The metadata dir is ``KafkaConfig.metadata_log_dir`` (``metadata.log.dir``, else the first of
``log.dirs``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from broker.json_state_file import load_versioned_json, save_versioned_json
from spark_kafkalite.protocol.acl import AclBinding

__all__ = ["ACLS_FILE", "load_acls", "save_acls"]

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


def load_acls(path: Path) -> dict[uuid.UUID, AclBinding]:
    """``{acl id: ACL}`` from ``path``; empty when the file is missing.

    Raises:
        OSError: the file exists but cannot be read.
        ValueError: the file is corrupt (the broker must not start with fewer ACLs than it had:
            a lost DENY would open access).
    """

    def parse(payload: Any) -> dict[uuid.UUID, AclBinding]:
        return {
            uuid.UUID(entry["id"]): AclBinding.of(*(entry[name] for name in _FIELDS))
            for entry in payload["acls"]
        }

    return load_versioned_json(path, _VERSION, "ACL", parse) or {}


def save_acls(path: Path, acls: Mapping[uuid.UUID, AclBinding]) -> None:
    """Atomically replace ``path`` with ``acls``.

    Raises:
        OSError: the file cannot be written.
    """
    entries = [
        # getattr: every AclBinding field, by name
        {"id": str(acl_id), **{name: _plain(getattr(acl, name)) for name in _FIELDS}}
        for acl_id, acl in sorted(acls.items(), key=lambda item: str(item[0]))
    ]
    save_versioned_json(path, _VERSION, {"acls": entries})


def _plain(value: object) -> object:
    return int(value) if isinstance(value, int) else value
