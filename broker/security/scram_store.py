"""Durable SCRAM credentials of a single-node broker: ``<metadata dir>/scram-credentials.json``.

A multi-node cluster keeps them as ``UserScramCredentialRecord`` s in its Raft metadata log and
snapshots (as KRaft does). A single-node broker has no metadata log, so its controller writes the
image's credentials to one JSON file (atomically, mode 0600) after every change and replays them
at startup. Only salted keys are stored (salt, StoredKey, ServerKey, iterations; base64), never a
password::

    {"version": 1, "credentials": [{"name": "alice", "mechanism": 2, "iterations": 4096,
      "salt": "...", "stored_key": "...", "server_key": "..."}]}
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from pathlib import Path

from broker.atomic_file import write_atomically
from spark_kafkalite.protocol.scram import ScramCredential

__all__ = ["SCRAM_FILE", "scram_path", "load_scram_credentials", "save_scram_credentials"]

SCRAM_FILE = "scram-credentials.json"
_VERSION = 1


def scram_path(metadata_log_dir: str | os.PathLike[str] | None, log_dirs: list[Path]) -> Path:
    """Where the credentials live: ``metadata.log.dir`` if set, else the first log dir."""
    base = Path(metadata_log_dir) if metadata_log_dir else Path(log_dirs[0])
    return base / SCRAM_FILE


def load_scram_credentials(path: Path) -> dict[tuple[str, int], ScramCredential]:
    """``{(user, mechanism type): credential}`` from ``path``; empty when the file is missing.

    Raises:
        OSError: the file exists but cannot be read.
        ValueError: the file is corrupt.
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
            (str(e["name"]), int(e["mechanism"])): ScramCredential(
                salt=base64.b64decode(e["salt"]),
                stored_key=base64.b64decode(e["stored_key"]),
                server_key=base64.b64decode(e["server_key"]),
                iterations=int(e["iterations"]),
            )
            for e in payload["credentials"]
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"corrupt SCRAM credential file {path}: {exc}") from None


def save_scram_credentials(path: Path, credentials: Mapping[tuple[str, int], ScramCredential]) -> None:
    """Atomically replace ``path`` with ``credentials`` (mode 0600).

    Raises:
        OSError: the file cannot be written.
    """
    entries = [
        {
            "name": name,
            "mechanism": mechanism,
            "iterations": c.iterations,
            "salt": base64.b64encode(c.salt).decode(),
            "stored_key": base64.b64encode(c.stored_key).decode(),
            "server_key": base64.b64encode(c.server_key).decode(),
        }
        for (name, mechanism), c in sorted(credentials.items())
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps({"version": _VERSION, "credentials": entries}, indent=1))
    path.chmod(0o600)
