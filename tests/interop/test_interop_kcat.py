"""kcat (librdkafka's command-line client, from Debian's ``kcat`` package) as an independent
peer: produce keyed messages with headers through kcat, read them back through kcat, and list
metadata. ``.ci/run`` installs kcat when apt is available; without it the test is skipped."""

from __future__ import annotations

import shutil
import subprocess

import pytest

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")


def _kcat(*args: str, stdin: str | None = None, timeout_s: float = 30.0) -> str:
    assert KCAT is not None
    proc = subprocess.run(
        [KCAT, *args], input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    assert proc.returncode == 0, f"kcat {' '.join(args)} failed: {proc.stderr}"
    return proc.stdout


def test_kcat_produce_consume_round_trip(bootstrap_servers: str, unique_topic: str) -> None:
    lines = [f"key{i % 3}:value-{i}" for i in range(200)]
    _kcat(
        "-b",
        bootstrap_servers,
        "-t",
        unique_topic,
        "-P",
        "-K",
        ":",
        "-p",
        "0",
        "-H",
        "origin=kcat",
        stdin="\n".join(lines) + "\n",
    )
    out = _kcat(
        "-b",
        bootstrap_servers,
        "-t",
        unique_topic,
        "-C",
        "-p",
        "0",
        "-o",
        "beginning",
        "-e",
        "-f",
        "%k|%s|%o|%h\n",
    )
    rows = [line.split("|") for line in out.splitlines() if line]
    assert [(k, v) for k, v, _o, _h in rows] == [tuple(line.split(":", 1)) for line in lines]
    assert [int(o) for _k, _v, o, _h in rows] == list(range(200))
    assert all(h == "origin=kcat" for *_rest, h in rows)


def test_kcat_metadata_lists_broker_and_topic(bootstrap_servers: str, unique_topic: str) -> None:
    _kcat("-b", bootstrap_servers, "-t", unique_topic, "-P", stdin="x\n")
    out = _kcat("-b", bootstrap_servers, "-L", "-t", unique_topic)
    assert "1 brokers:" in out
    assert f'topic "{unique_topic}" with 1 partitions' in out
    assert "leader 1" in out


def test_kcat_offset_query_by_end(bootstrap_servers: str, unique_topic: str) -> None:
    _kcat("-b", bootstrap_servers, "-t", unique_topic, "-P", "-p", "0", stdin="a\nb\nc\n")
    out = _kcat("-b", bootstrap_servers, "-Q", "-t", f"{unique_topic}:0:-1")
    assert f"{unique_topic} [0] offset 3" in out
