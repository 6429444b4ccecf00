"""KRaft configuration keys: controller.quorum.voters, controller.listener.names, the CONTROLLER
listener, inter.broker.listener.name; errors name the key; the shipped 3-node configs load."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import ConfigError, KafkaConfig
from broker.meta_properties import quorum_cluster_id

ROOT = Path(__file__).resolve().parents[2]

BASE = {
    "node.id": "2",
    "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19093",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.voters": "1@127.0.0.1:19092,2@127.0.0.1:19093,3@127.0.0.1:19094",
    "log.dirs": "/tmp/x",
}


def config(**changes: str | None) -> KafkaConfig:
    props = dict(BASE)
    for key, value in changes.items():
        key = key.replace("_", ".")
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value
    return KafkaConfig(props)


def test_quorum_config_parses() -> None:
    c = config()
    assert c.quorum_enabled and c.quorum_voters == {
        1: ("127.0.0.1", 19092),
        2: ("127.0.0.1", 19093),
        3: ("127.0.0.1", 19094),
    }
    assert [e.listener_name for e in c.broker_listeners] == ["PLAINTEXT"]
    assert [e.listener_name for e in c.advertised_listeners] == ["PLAINTEXT"]
    assert c.controller_endpoint is not None and c.controller_endpoint.port == 19093
    assert c.inter_broker_listener_name == "PLAINTEXT"
    assert c["broker.heartbeat.interval.ms"] == 2000 and c["broker.session.timeout.ms"] == 9000


def test_controller_listener_may_differ_from_the_voter_entry() -> None:
    """The voter entry is the address the other voters dial (a proxy or NAT may sit in front, as
    Kafka allows); the node binds its CONTROLLER listener (the chaos soak's link proxies)."""
    c = config(listeners="PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:29093")
    assert c.quorum_voters[2] == ("127.0.0.1", 19093)
    assert c.controller_endpoint is not None and c.controller_endpoint.port == 29093


def test_standalone_without_voters() -> None:
    c = KafkaConfig({"node.id": "1", "listeners": "PLAINTEXT://:0", "log.dirs": "/tmp/x"})
    assert not c.quorum_enabled and c.controller_endpoint is None
    assert [e.listener_name for e in c.broker_listeners] == ["PLAINTEXT"]


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"controller.quorum.voters": "1@127.0.0.1"}, "controller.quorum.voters"),
        ({"controller.quorum.voters": "x@127.0.0.1:1"}, "controller.quorum.voters"),
        ({"controller.quorum.voters": "1@h:1,1@h:2"}, "controller.quorum.voters"),
        (
            {"controller.quorum.voters": "1@127.0.0.1:19092,2@127.0.0.1:19093,3@127.0.0.1:19093"},
            "controller.quorum.voters",
        ),  # two voters on one address
        ({"controller.quorum.voters": "1@127.0.0.1:19092,3@127.0.0.1:19094"}, "controller.quorum.voters"),
        ({"controller.listener.names": None}, "controller.listener.names"),
        ({"controller.listener.names": "RAFT"}, "controller.listener.names"),
        ({"listeners": "CONTROLLER://127.0.0.1:19093"}, "listeners"),
        ({"inter.broker.listener.name": "SSL_ONE"}, "inter.broker.listener.name"),
        ({"process.roles": "broker"}, "process.roles"),
        ({"broker.session.timeout.ms": "0"}, "broker.session.timeout.ms"),
        ({"controller.quorum.election.timeout.ms": "5"}, "controller.quorum.election.timeout.ms"),
    ],
)
def test_bad_quorum_configs_name_the_key(changes: dict[str, str | None], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        config(**{k.replace(".", "_"): v for k, v in changes.items()})
    assert info.value.key == key


def test_shipped_three_node_configs_load() -> None:
    voters = set()
    for node in (1, 2, 3):
        c = KafkaConfig.from_file(ROOT / "conf" / f"broker-{node}.properties")
        assert c.node_id == node and c.quorum_enabled and len(c.quorum_voters) == 3
        assert c["default.replication.factor"] == 3 and c["min.insync.replicas"] == 2
        assert c["offsets.topic.replication.factor"] == 3
        voters.add(tuple(sorted(c.quorum_voters.items())))
    assert len(voters) == 1  # every node lists the same quorum
    assert quorum_cluster_id(dict(next(iter(voters)))) == quorum_cluster_id(dict(next(iter(voters))))


def test_quorum_password_is_not_logged() -> None:
    c = config(controller_quorum_password="s3cret")
    assert c["controller.quorum.password"] == "s3cret"
    assert "s3cret" not in c.describe() and "controller.quorum.password = [hidden]" in c.describe()
