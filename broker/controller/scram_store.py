"""Durable SCRAM credentials of a single-node broker: ``<metadata dir>/scram-credentials.json``.

A multi-node cluster keeps them as ``UserScramCredentialRecord`` s in its Raft metadata log and
snapshots (as KRaft does). A single-node broker has no metadata log, so its controller writes the
image's credentials to one JSON file (atomically, mode 0600 from creation) after every change and replays them
at startup. Only salted keys are stored (salt, StoredKey, ServerKey, iterations; base64), never a
password::

    {"version": 1, "credentials": [{"name": "alice", "mechanism": 2, "iterations": 4096,
      "salt": "...", "stored_key": "...", "server_key": "..."}]}
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from broker.json_state_file import load_versioned_json, save_versioned_json
from spark_kafkalite.protocol.scram import ScramCredential

__all__ = ["SCRAM_FILE", "load_scram_credentials", "save_scram_credentials"]

SCRAM_FILE = "scram-credentials.json"
_VERSION = 1


def load_scram_credentials(path: Path) -> dict[tuple[str, int], ScramCredential]:
    """``{(user, mechanism type): credential}`` from ``path``; empty when the file is missing.

    Raises:
        OSError: the file exists but cannot be read.
        ValueError: the file is corrupt.
    """

    def parse(payload: Any) -> dict[tuple[str, int], ScramCredential]:
        return {
            (str(e["name"]), int(e["mechanism"])): ScramCredential(
                salt=base64.b64decode(e["salt"]),
                stored_key=base64.b64decode(e["stored_key"]),
                server_key=base64.b64decode(e["server_key"]),
                iterations=int(e["iterations"]),
            )
            for e in payload["credentials"]
        }

    return load_versioned_json(path, _VERSION, "SCRAM credential", parse) or {}


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
    save_versioned_json(path, _VERSION, {"credentials": entries}, mode=0o600)
