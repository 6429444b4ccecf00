"""The ``kafkalite`` console tool (topics / produce / consume) against the session broker, run
in-process through ``spark_kafkalite.cli.main``."""

from __future__ import annotations

import io
import sys
import uuid
from pathlib import Path

import pytest

from spark_kafkalite.cli import error_line, main

pytestmark = pytest.mark.timeout(60)


def run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str, stdin: str = ""
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_topics_produce_consume_round_trip(bootstrap_servers: str, capsys, monkeypatch) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    bs = ["--bootstrap-server", bootstrap_servers]
    assert run(capsys, monkeypatch, "topics", "create", *bs, "--topic", topic, "--partitions", "3")[:2] == (
        0,
        f"Created topic {topic}.\n",
    )
    code, _, err = run(capsys, monkeypatch, "topics", "create", *bs, "--topic", topic, "--partitions", "3")
    assert code == 1 and err.startswith("kafkalite: error: TOPIC_ALREADY_EXISTS") and err.count("\n") == 1
    code, out, _ = run(capsys, monkeypatch, "topics", "list", *bs)
    assert code == 0 and topic in out.split()

    lines = "a:1\nb:2\nc:3\na:4\n"
    code, _, err = run(
        capsys,
        monkeypatch,
        "produce",
        *bs,
        "--topic",
        topic,
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        stdin=lines,
    )
    assert code == 0 and "Produced 4 records" in err

    code, out, _ = run(capsys, monkeypatch, "topics", "describe", *bs, "--topic", topic)
    assert code == 0 and topic in out

    code, out, err = run(
        capsys,
        monkeypatch,
        "consume",
        *bs,
        "--topic",
        topic,
        "--from-beginning",
        "--timeout-ms",
        "1500",
        "--property",
        "print.key=true",
        "--property",
        "key.separator=:",
    )
    assert code == 0 and "Processed a total of 4 messages" in err
    assert sorted(out.splitlines()) == ["a:1", "a:4", "b:2", "c:3"]
    by_key = [line for line in out.splitlines() if line.startswith("a:")]
    assert by_key == ["a:1", "a:4"]  # same key, same partition, in order

    code, out, err = run(
        capsys, monkeypatch, "consume", *bs, "--topic", topic, "--from-beginning", "--max-messages", "2"
    )
    assert code == 0 and len(out.splitlines()) == 2 and "Processed a total of 2 messages" in err

    assert run(capsys, monkeypatch, "topics", "delete", *bs, "--topic", topic)[0] == 0
    code, _, err = run(capsys, monkeypatch, "topics", "delete", *bs, "--topic", topic)
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err


def test_consume_partition_and_offset(bootstrap_servers: str, capsys, monkeypatch) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    bs = ["--bootstrap-server", bootstrap_servers]
    assert run(capsys, monkeypatch, "topics", "create", *bs, "--topic", topic, "--partitions", "2")[0] == 0
    stdin = "".join(f"v{i}\n" for i in range(5))
    assert run(capsys, monkeypatch, "produce", *bs, "--topic", topic, "--partition", "1", stdin=stdin)[0] == 0
    code, out, _ = run(
        capsys,
        monkeypatch,
        "consume",
        *bs,
        "--topic",
        topic,
        "--partition",
        "1",
        "--offset",
        "3",
        "--timeout-ms",
        "1000",
        "--property",
        "print.offset=true",
    )
    assert code == 0 and out.splitlines() == ["Offset:3\tv3", "Offset:4\tv4"]


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["produce", "--topic", "t", "--property", "parse.key=true"], "no-separator\n", "No key separator"),
        (
            ["consume", "--topic", "missing-cli-topic", "--timeout-ms", "100"],
            "",
            "topic 'missing-cli-topic' does not exist",
        ),
        (["consume", "--topic", "missing", "--offset", "5"], "", None),
        (["topics", "create", "--topic", "bad", "--config", "novalue"], "", "is not key=value"),
    ],
)
def test_errors_are_one_line_and_exit_1(bootstrap_servers, capsys, monkeypatch, args, stdin, message) -> None:
    code, _, err = run(
        capsys,
        monkeypatch,
        *args[:1],
        *(args[1:2] if args[0] == "topics" else []),
        "--bootstrap-server",
        bootstrap_servers,
        *(args[2:] if args[0] == "topics" else args[1:]),
        stdin=stdin,
    )
    assert code == 1
    assert err.startswith("kafkalite: error: ") and err.endswith("\n")
    if message:
        assert message in err


def test_missing_bootstrap_server(capsys, monkeypatch) -> None:
    monkeypatch.delenv("KAFKALITE_BOOTSTRAP_SERVERS", raising=False)
    code, _, err = run(capsys, monkeypatch, "topics", "list")
    assert code == 1 and "--bootstrap-server is required" in err


def test_error_line_picks_the_python_error_inside_a_spark_error() -> None:
    wrapped = RuntimeError(
        "An exception was thrown from the Python worker.\nTraceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "spark_kafkalite.datasource.errors.TopicNotFoundError: Topic 'x' does not exist\n"
    )
    assert error_line(wrapped) == "TopicNotFoundError: Topic 'x' does not exist"
    assert error_line(ValueError("plain message")) == "plain message"


def test_demo_refuses_existing_topics_on_external_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_kafkalite.client import KafkaAdminClient, NewTopic
    from spark_kafkalite.local_cluster import LocalCluster

    with LocalCluster(data_dir=tmp_path / "c") as cluster:
        bs = cluster.bootstrap_servers
        with KafkaAdminClient({"bootstrap.servers": bs}) as admin:
            admin.create_topics([NewTopic("flights", 1, 1)])
            code, out, err = run(capsys, monkeypatch, "demo", "--bootstrap-server", bs, "--quiet")
            assert code == 1 and out == ""
            assert err.startswith("kafkalite: error: ") and err.count("\n") == 1
            assert "flights" in err and "--force" in err
            assert "flights" in admin.list_topics()  # untouched
