"""Spark test setup: one shared SparkSession (pytest-spark's ``spark_session``, configured in
pyproject.toml: local[2], in-memory catalog, UTC) and the session broker (``cluster`` /
``bootstrap_servers`` from tests/conftest.py).

Before the session starts: Python workers must run this interpreter (``PYSPARK_PYTHON``), and the
directory holding ``pyspark_kafkalite.py`` must be on the workers' ``PYTHONPATH``: Spark finds
``pyspark_*`` modules with ``pkgutil.iter_modules()``, which does not see modules served by an
editable install's import hook (a regular ``pip install`` puts the module in site-packages).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spark_kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer, NewTopic, TopicPartition
from spark_kafkalite.demo.session import expose_auto_registration_module

os.environ["PYSPARK_PYTHON"] = sys.executable
# A regular install (what `.ci/run` does) is discovered by Spark itself; only an editable install
# needs the module's directory on the workers' PYTHONPATH.
expose_auto_registration_module()
warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")


def pytest_configure(config: pytest.Config) -> None:
    # pyspark 4.3 warns that pandas >= 3 is not fully supported; the data source does not use pandas
    config.addinivalue_line(
        "filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning"
    )


@pytest.fixture(scope="session")
def spark(spark_session: Any) -> Any:
    """The shared SparkSession, quiet."""
    spark_session.sparkContext.setLogLevel("ERROR")
    return spark_session


@pytest.fixture
def make_topic(bootstrap_servers: str) -> Iterator[Callable[..., str]]:
    """``make_topic(partitions=1) -> name``: creates a uniquely named topic on the session broker."""
    admin = KafkaAdminClient({"bootstrap.servers": bootstrap_servers})

    def create(partitions: int = 1, prefix: str = "spark") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        admin.create_topics([NewTopic(name, partitions, 1)])
        return name

    try:
        yield create
    finally:
        admin.close()


@pytest.fixture
def produce(bootstrap_servers: str) -> Iterator[Callable[..., list[Any]]]:
    """``produce(topic, records)``: send ``(partition, key, value)`` tuples (or dicts of
    ``send`` arguments) and return their ``RecordMetadata`` in order."""
    producer = KafkaProducer({"bootstrap.servers": bootstrap_servers, "linger.ms": 0})

    def send(topic: str, records: list[Any]) -> list[Any]:
        futures = []
        for record in records:
            if isinstance(record, dict):
                futures.append(producer.send(topic, **record))
            else:
                partition, key, value = record
                futures.append(producer.send(topic, value=value, key=key, partition=partition))
        producer.flush()
        return [f.result(timeout=30) for f in futures]

    try:
        yield send
    finally:
        producer.close()


@pytest.fixture
def consume_all(bootstrap_servers: str) -> Callable[[str], list[Any]]:
    """``consume_all(topic) -> [ConsumerRecord]`` of every partition, from the log start to the
    high watermark, ordered by (partition, offset)."""

    def read(topic: str) -> list[Any]:
        consumer = KafkaConsumer({"bootstrap.servers": bootstrap_servers, "max.poll.records": 10_000})
        try:
            tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
            ends = consumer.end_offsets(tps)
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            records: list[Any] = []
            remaining = sum(ends.values()) - sum(consumer.beginning_offsets(tps).values())
            deadline = time.monotonic() + 30
            while remaining > 0 and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=1000).values():
                    records.extend(batch)
                    remaining -= len(batch)
            return sorted(records, key=lambda r: (r.partition, r.offset))
        finally:
            consumer.close()

    return read


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_SCRIPTS = ("batch_read.py", "write.py", "streaming_etl.py")
# the documentation's examples (~2-3 min on a quiet 2-core machine) and then the scripts (~1 min):
# generous bounds, so that a loaded machine reports slow examples instead of a timeout
EXAMPLES_RUN_TIMEOUT_S = 1500 + 780


@dataclass(frozen=True)
class ExamplesRun:
    """What one docs_examples_runner.py subprocess did: ``blocks``, the result of each README/docs
    example it reached by id (``{"status": 0, "output": ..}``); ``scripts``, the examples/
    scripts it was asked to run; its ``stdout`` (the scripts' output between marker lines) and
    ``stderr``; ``tail``, its exit status (or timeout) and the end of its output."""

    blocks: dict[str, dict[str, Any]]
    scripts: tuple[str, ...]
    stdout: str
    stderr: str
    tail: str


@pytest.fixture(scope="session")
def examples_run(
    request: pytest.FixtureRequest, bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory
) -> ExamplesRun:
    """The README/docs examples (when test_docs_examples.py is selected), then the examples/
    scripts against the session broker (when test_examples.py is), in one subprocess: one Spark
    JVM start and warm-up for both (docs_examples_runner.py)."""
    selected = {item.path.name for item in request.session.items}
    out = tmp_path_factory.mktemp("examples") / "results.jsonl"
    command = [sys.executable, str(Path(__file__).with_name("docs_examples_runner.py")), str(out)]
    command += ["--docs"] if "test_docs_examples.py" in selected else []
    scripts = EXAMPLE_SCRIPTS if "test_examples.py" in selected else ()
    command += ["--scripts", str(EXAMPLES), bootstrap_servers, *scripts] if scripts else []
    stdout = stderr = ""
    try:
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=EXAMPLES_RUN_TIMEOUT_S,
            cwd=EXAMPLES.parent,  # Spark's Python workers import the checkout, as the tests do
            env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
        )
        stdout, stderr = proc.stdout, proc.stderr
        tail = f"runner exit {proc.returncode}\n{stdout[-2000:]}\n{stderr[-4000:]}"
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else str(exc.stderr)
        tail = f"runner timed out after {EXAMPLES_RUN_TIMEOUT_S} s\n{stderr[-4000:]}"
    lines = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return ExamplesRun({line["id"]: line for line in lines}, scripts, stdout, stderr, tail)
