"""``kafkalite kafka-path``: a directory laid out like a Kafka install for tools that run
``$KAFKA_PATH/bin/kafka-topics.sh`` (librdkafka's test harness, ops scripts): its ``bin/`` holds
one small ``sh`` wrapper per script of :data:`~spark_kafkalite.cli.kafka_tools.TOOLS`, each
running this Python (``sys.executable``) on the tool.

    export KAFKA_PATH=$(kafkalite kafka-path)
    $KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server localhost:9092 --list

The default directory is ``$XDG_CACHE_HOME/spark-kafkalite/kafka`` (``~/.cache/...``); the
wrappers are rewritten on every call, so they follow the Python environment that made them.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from spark_kafkalite.cli.kafka_tools import TOOLS

__all__ = ["add_kafka_path_parser", "cmd_kafka_path", "write_kafka_path", "default_kafka_path"]


def default_kafka_path() -> Path:
    """``$XDG_CACHE_HOME/spark-kafkalite/kafka`` (``~/.cache`` without ``XDG_CACHE_HOME``)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "spark-kafkalite" / "kafka"


def write_kafka_path(directory: Path) -> Path:
    """Write ``directory/bin/<script>`` for every tool (mode 0755); returns ``directory``.

    Raises:
        OSError: the directory cannot be written.
    """
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    python = shlex.quote(sys.executable)
    for name in TOOLS:
        script = bin_dir / name
        text = f'#!/bin/sh\nexec {python} -m spark_kafkalite.cli.kafka_tools {name} "$@"\n'
        if not script.exists() or script.read_text(encoding="utf-8") != text:
            tmp = script.with_suffix(".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.chmod(0o755)
            tmp.replace(script)
    return directory


def add_kafka_path_parser(commands: Any) -> None:
    """Add the ``kafka-path`` command to the ``kafkalite`` subparsers ``commands``."""
    parser = commands.add_parser(
        "kafka-path", help="print a directory whose bin/ holds Kafka's tools (kafka-topics.sh, ...)"
    )
    parser.add_argument("--dir", type=Path, help=f"where to write it (default {default_kafka_path()})")


def cmd_kafka_path(args: argparse.Namespace) -> int:
    """Write the directory and print its path."""
    print(write_kafka_path((args.dir or default_kafka_path()).absolute()))
    return 0
