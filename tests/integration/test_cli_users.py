"""``kafkalite users add|list|remove`` against a SASL_SSL LocalCluster (SCRAM-SHA-512 admin):
a user added with the CLI (password on stdin) logs in with confluent-kafka (librdkafka) over
SCRAM-SHA-512 and produces, ``list`` shows the user's mechanisms and iterations, ``remove``
deletes the credential and librdkafka's next login fails. Errors are one line with status 1 and
the password appears in no output."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from spark_kafkalite.cli import main
from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(120)

PASSWORD = "Cli-user-pw-" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(security="SASL_SSL") as secured:
        yield secured


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    assert PASSWORD not in out + err
    return status, out, err


def _produce(cluster: LocalCluster, user: str, password: str) -> tuple[bool, str]:
    """librdkafka produces one record as ``user``: (delivered, first error)."""
    errors: list[str] = []
    config: dict[str, Any] = {
        **cluster.client_config(),
        "sasl.username": user,
        "sasl.password": password,
        "message.timeout.ms": 8000,
        "error_cb": lambda err: errors.append(f"{err.name()}: {err.str()}"),
    }
    delivered: list[bool] = []
    producer = confluent_kafka.Producer(config)
    producer.produce("cli-users", b"hello", on_delivery=lambda err, _msg: delivered.append(err is None))
    for _ in range(100):
        producer.poll(0.1)
        if delivered or errors:
            break
    producer.purge()
    producer.flush(1)
    return delivered == [True], errors[0] if errors else ""


def test_users_add_list_remove(
    cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    properties = tmp_path / "admin.properties"
    properties.write_text("".join(f"{k}={v}\n" for k, v in cluster.client_config().items()), encoding="utf-8")
    admin = ["--command-config", str(properties)]
    assert _run(capsys, "topics", "create", *admin, "--topic", "cli-users")[0] == 0

    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))  # not a tty: first line of stdin
    status, out, _ = _run(capsys, "users", "add", *admin, "--user", "carol")
    assert status == 0
    assert out == "Added SCRAM-SHA-512 credential (8192 iterations) for user 'carol'\n"
    password_file = tmp_path / "pw"
    password_file.write_text(PASSWORD + "\n", encoding="utf-8")
    status, out, _ = _run(
        capsys, "users", "add", *admin, "--user", "carol", "--mechanism", "scram-sha-256",
        "--iterations", "4096", "--password-file", str(password_file),
    )  # fmt: skip
    assert status == 0 and "SCRAM-SHA-256" in out

    assert _produce(cluster, "carol", PASSWORD) == (True, "")

    status, out, _ = _run(capsys, "users", "list", *admin, "--user", "carol")
    assert status == 0
    assert out == (
        "SCRAM credential configs for user-principal 'carol' are "
        "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192\n"
    )
    status, out, _ = _run(capsys, "users", "list", *admin)
    assert status == 0 and [line.split("'")[1] for line in out.splitlines()] == ["admin", "carol"]

    status, out, _ = _run(
        capsys, "users", "remove", *admin, "--user", "carol", "--mechanism", "SCRAM-SHA-512"
    )
    assert status == 0 and out == "Removed SCRAM-SHA-512 credential of user 'carol'\n"
    delivered, error = _produce(cluster, "carol", PASSWORD)
    assert not delivered and "Authentication failed" in error and PASSWORD not in error
    status, out, _ = _run(capsys, "users", "list", *admin, "--user", "carol")
    assert status == 0 and "SCRAM-SHA-512" not in out

    # one-line errors, status 1: unknown user, bad mechanism and iterations, a refused login
    for argv, expected in (
        (["users", "list", *admin, "--user", "nobody"], "nobody"),
        (["users", "remove", *admin, "--user", "nobody", "--mechanism", "SCRAM-SHA-512"], "nobody"),
        (["users", "remove", *admin, "--user", "carol", "--mechanism", "SCRAM-SHA-1"], "SCRAM-SHA-1"),
        (["users", "add", *admin, "--user", "dave", "--iterations", "1000", "--password-file", str(password_file)],
         "--iterations 1000"),
    ):  # fmt: skip
        status, out, err = _run(capsys, *argv)
        assert (status, out) == (1, "") and len(err.splitlines()) == 1 and expected in err, err
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(properties.read_text(encoding="utf-8") + "sasl.password=Wrong-pw-1\n", encoding="utf-8")
    status, _, err = _run(capsys, "users", "list", "--command-config", str(wrong))
    assert status == 1 and "SASL_AUTHENTICATION_FAILED" in err.upper() and "Wrong-pw-1" not in err
