"""Durable BROKER and GROUP resource configs of a single-node broker:
``<metadata dir>/resource-configs.json``.

A multi-node cluster keeps them as ``ConfigRecord`` s in its Raft metadata log and snapshots (as
KRaft does). A single-node broker has no metadata log, so its controller writes the image's
resource configs to one JSON file (atomically) after every change and replays them at startup::

    {"version": 1, "resources": [{"type": 4, "name": "", "configs": {"log.retention.ms": "60000"}}]}
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from broker.json_state_file import load_versioned_json, save_versioned_json

__all__ = ["RESOURCE_CONFIGS_FILE", "load_resource_configs", "save_resource_configs"]

RESOURCE_CONFIGS_FILE = "resource-configs.json"
_VERSION = 1


def load_resource_configs(path: Path) -> dict[tuple[int, str], dict[str, str]]:
    """``{(resource type, name): configs}`` from ``path``; empty when the file is missing.

    Raises:
        OSError: the file exists but cannot be read.
        ValueError: the file is corrupt.
    """

    def parse(payload: Any) -> dict[tuple[int, str], dict[str, str]]:
        return {
            (int(e["type"]), str(e["name"])): {str(k): str(v) for k, v in e["configs"].items()}
            for e in payload["resources"]
        }

    return load_versioned_json(path, _VERSION, "resource config", parse) or {}


def save_resource_configs(path: Path, configs: Mapping[tuple[int, str], Mapping[str, str]]) -> None:
    """Atomically replace ``path`` with ``configs``.

    Raises:
        OSError: the file cannot be written.
    """
    entries = [
        {"type": resource_type, "name": name, "configs": dict(entries)}
        for (resource_type, name), entries in sorted(configs.items())
    ]
    save_versioned_json(path, _VERSION, {"resources": entries})
