"""``kafkalite topics create --config / describe / alter`` against the session broker, run
in-process through ``spark_kafkalite.cli.main``; configs are cross-checked with our admin client."""

from __future__ import annotations

import io
import sys
import uuid

import pytest

from spark_kafkalite.cli import main
from spark_kafkalite.client import KafkaAdminClient, KafkaProducer, TopicPartition
from spark_kafkalite.client.admin_configs import ConfigSource

pytestmark = pytest.mark.timeout(60)


def run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _cells(line: str) -> list[str]:
    """The non-empty cells of one rich table line (box characters as separators)."""
    return [c.strip() for c in line.replace("│", "|").replace("┃", "|").split("|") if c.strip()]


def row(out: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is ``first``."""
    for line in out.splitlines():
        cells = _cells(line)
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no row starting with {first!r} in:\n{out}")


def test_create_with_config_describe_and_alter(bootstrap_servers: str, capsys, monkeypatch) -> None:
    topic = f"cli-cfg-{uuid.uuid4().hex[:8]}"
    bs = ["--bootstrap-server", bootstrap_servers]
    code, out, err = run(
        capsys,
        monkeypatch,
        "topics",
        "create",
        *bs,
        "--topic",
        topic,
        "--partitions",
        "2",
        "--config",
        "retention.ms=60000",
        "--config",
        "cleanup.policy=compact,delete",
    )
    assert (code, out, err) == (0, f"Created topic {topic}.\n", "")
    with KafkaProducer({"bootstrap.servers": bootstrap_servers}) as producer:
        for i in range(3):
            producer.send(topic, value=b"v%d" % i, key=b"k", partition=1)
        producer.flush(10)

    code, out, _ = run(capsys, monkeypatch, "topics", "describe", *bs, "--topic", topic)
    assert code == 0
    assert row(out, "retention.ms") == ["retention.ms", "60000", "DYNAMIC_TOPIC_CONFIG"]
    assert row(out, "cleanup.policy") == ["cleanup.policy", "compact,delete", "DYNAMIC_TOPIC_CONFIG"]
    assert "segment.ms" not in out  # defaults are not listed
    # Topic, Partition, Leader, Replicas, Isr, LogStartOffset, LogEndOffset, Records, Size
    assert "LogStartOffset" in out and "LogEndOffset" in out and "Size" in out
    rows = sorted(
        (
            cells
            for cells in (_cells(line) for line in out.splitlines())
            if len(cells) == 9 and cells[0] == topic
        ),
        key=lambda cells: cells[1],
    )
    assert [(c[1], c[5], c[6], c[7]) for c in rows] == [("0", "0", "0", "0"), ("1", "0", "3", "3")], out
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        size_bytes = admin.describe_log_dirs([topic])[TopicPartition(topic, 1)]
    assert size_bytes > 0 and [c[8] for c in rows] == ["0 B", f"{size_bytes} B"], out

    code, out, err = run(
        capsys,
        monkeypatch,
        "topics",
        "alter",
        *bs,
        "--topic",
        topic,
        "--config",
        "retention.ms=120000",
        "--config",
        "segment.ms=3600000",
        "--delete-config",
        "cleanup.policy",
    )
    assert code == 0 and err == "" and f"Altered configs of topic {topic}" in out
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        entries = admin.describe_configs(topic)
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "120000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
    )
    assert (entries["segment.ms"].value, entries["segment.ms"].source) == (
        "3600000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
    )
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].is_default) == ("delete", True)

    code, out, _ = run(capsys, monkeypatch, "topics", "describe", *bs, "--topic", topic)
    assert code == 0
    assert row(out, "segment.ms") == ["segment.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"]
    assert "cleanup.policy" not in out


def test_alter_errors_are_one_line(bootstrap_servers: str, capsys, monkeypatch) -> None:
    topic = f"cli-cfg-{uuid.uuid4().hex[:8]}"
    bs = ["--bootstrap-server", bootstrap_servers]
    assert run(capsys, monkeypatch, "topics", "create", *bs, "--topic", topic)[0] == 0
    code, _, err = run(
        capsys, monkeypatch, "topics", "alter", *bs, "--topic", topic, "--config", "retention.ms=abc"
    )
    assert code == 1 and err.startswith("kafkalite: error: INVALID_CONFIG") and "retention.ms" in err, err
    assert err.count("\n") == 1
    code, _, err = run(capsys, monkeypatch, "topics", "alter", *bs, "--topic", topic)
    assert code == 1 and "--config" in err
    code, _, err = run(
        capsys,
        monkeypatch,
        "topics",
        "alter",
        *bs,
        "--topic",
        topic + "-missing",
        "--config",
        "retention.ms=1",
    )
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err, err
