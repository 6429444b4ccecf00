"""``kafkalite acls add|list|remove`` and ``--command-config`` against an in-process broker with
the StandardAuthorizer and a SASL_PLAINTEXT (PLAIN) listener: the admin's properties file
authenticates the ACL commands, alice's file makes ``topics list`` show exactly what her
prefixed ACL grants."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_kafkalite.cli import main
from tests.integration.inprocess_broker import InProcessBroker

pytestmark = pytest.mark.timeout(60)

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret";'
)


@pytest.fixture(scope="module")
def sasl_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = InProcessBroker(
        Path(tmp_path_factory.mktemp("cli-acls")),
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        },
    )
    broker.start()
    try:
        yield f"127.0.0.1:{broker.server.bound['SASL_PLAINTEXT'][1]}"
    finally:
        broker.stop()


def _properties(path: Path, user: str) -> str:
    path.write_text(
        "# client configs, as for Kafka's --command-config\n"
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        f"sasl.username={user}\nsasl.password={user}-secret\n",
        encoding="utf-8",
    )
    return str(path)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_acls_commands_and_command_config(
    sasl_address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = [
        "--bootstrap-server",
        sasl_address,
        "--command-config",
        _properties(tmp_path / "admin.properties", "admin"),
    ]
    alice = [
        "--bootstrap-server",
        sasl_address,
        "--command-config",
        _properties(tmp_path / "alice.properties", "alice"),
    ]
    for topic in ("alice-orders", "payroll"):
        assert _run(capsys, "topics", "create", *admin, "--topic", topic)[0] == 0

    status, out, _ = _run(
        capsys,
        "acls",
        "add",
        *admin,
        "--allow-principal",
        "User:alice",
        "--operation",
        "READ",
        "--operation",
        "write",
        "--topic",
        "alice-",
        "--resource-pattern-type",
        "prefixed",
    )
    assert status == 0 and out.count("Added TOPIC:PREFIXED:alice-") == 2
    assert _run(capsys, "acls", "add", *admin, "--deny-principal", "User:alice", "--cluster")[0] == 0

    status, out, _ = _run(capsys, "acls", "list", *admin)
    assert status == 0
    assert out.splitlines() == [
        "CLUSTER:LITERAL:kafka-cluster\tprincipal=User:alice host=* operation=ALL permission=DENY",
        "TOPIC:PREFIXED:alice-\tprincipal=User:alice host=* operation=READ permission=ALLOW",
        "TOPIC:PREFIXED:alice-\tprincipal=User:alice host=* operation=WRITE permission=ALLOW",
    ]
    status, out, _ = _run(
        capsys, "acls", "list", *admin, "--topic", "alice-orders", "--resource-pattern-type", "match"
    )
    assert status == 0 and len(out.splitlines()) == 2

    # alice sees exactly her prefix; she may not list ACLs (DESCRIBE on the cluster denied)
    status, out, _ = _run(capsys, "topics", "list", *alice)
    assert status == 0 and out.split() == ["alice-orders"]
    status, _, err = _run(capsys, "acls", "list", *alice)
    assert status == 1 and "CLUSTER_AUTHORIZATION_FAILED" in err.upper()

    status, out, _ = _run(
        capsys,
        "acls",
        "remove",
        *admin,
        "--principal",
        "User:alice",
        "--topic",
        "alice-",
        "--resource-pattern-type",
        "PREFIXED",
    )
    assert status == 0 and out.count("Removed ") == 2
    status, out, _ = _run(capsys, "topics", "list", *alice)
    assert status == 0 and out.split() == []

    status, _, err = _run(
        capsys,
        "topics",
        "list",
        "--bootstrap-server",
        sasl_address,
        "--command-config",
        str(tmp_path / "missing"),
    )
    assert status == 1 and "cannot read --command-config" in err
    status, _, err = _run(capsys, "acls", "add", *admin, "--topic", "x")
    assert status == 1 and "--allow-principal or --deny-principal" in err
