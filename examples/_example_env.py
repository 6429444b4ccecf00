"""Shared set-up of the example scripts: a broker and a local SparkSession.

- :func:`broker`: the ``--bootstrap-server`` given on the command line, or a one-broker
  ``LocalCluster`` in a temporary directory (stopped on exit).
- :func:`spark_session`: a quiet ``local[2]`` session whose Python workers run this
  interpreter. ``format("kafkalite")`` needs no registration: Spark registers the
  ``pyspark_kafkalite`` module's ``DefaultSource`` itself.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--bootstrap-server", default=None, help="a running broker; default: start a LocalCluster"
    )
    return parser.parse_args()


@contextlib.contextmanager
def broker(bootstrap_server: str | None) -> Iterator[str]:
    """Yield ``host:port`` of a broker: the given one, or a temporary LocalCluster."""
    if bootstrap_server:
        yield bootstrap_server
        return
    from spark_kafkalite.local_cluster import LocalCluster

    with tempfile.TemporaryDirectory(prefix="kafkalite-example-") as data_dir:
        with LocalCluster(data_dir=data_dir) as cluster:
            yield cluster.bootstrap_servers


def spark_session(app_name: str) -> Any:
    """A quiet local[2] SparkSession (UI off, UTC)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Only needed for an editable (development) install: a regular `pip install` puts
    # pyspark_kafkalite.py where Spark's auto-registration finds it.
    from spark_kafkalite.demo.session import expose_auto_registration_module

    expose_auto_registration_module()
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def create_topic(bootstrap_servers: str, name: str, partitions: int) -> None:
    """Create ``name`` unless it exists."""
    from spark_kafkalite.client import KafkaAdminClient, NewTopic

    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        if name not in admin.list_topics():
            admin.create_topics([NewTopic(name, partitions, 1)])
