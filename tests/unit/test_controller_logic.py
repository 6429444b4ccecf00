"""Pure controller logic: replica placement, leader election (PartitionChangeBuilder rules),
broker fencing / unfencing, AlterPartition compare-and-set, producer id blocks, snapshots."""

from __future__ import annotations

import pickle
import uuid

import pytest

from broker.controller.controller import CreatableTopicSpec
from broker.controller.controller_commands import (
    AllocateProducerIdsCmd,
    AlterPartitionCmd,
    CreateTopicsCmd,
    ElectLeadersCmd,
    FenceBrokerCmd,
    HeartbeatCmd,
    MetadataStateMachine,
    RegisterBrokerCmd,
)
from broker.controller.election import Election, change_partition, remove_from_isr
from broker.controller.metadata_image import MetadataImage, PartitionRegistration
from broker.controller.metadata_snapshot import diff_images, image_to_records
from broker.controller.placement import assign_replicas
from broker.controller.replication_control import (
    ControllerSettings,
)
from spark_kafkalite.protocol.errors import ErrorCode

SETTINGS = ControllerSettings(default_num_partitions=1, default_replication_factor=3)


# ------------------------------------------------------------------------------------ placement
def test_placement_spreads_leaders_and_followers_evenly() -> None:
    for seed in range(20):
        assignments = assign_replicas([3, 1, 2], 6, 3, seed=seed)
        assert all(sorted(a) == [1, 2, 3] for a in assignments)
        leaders = [a[0] for a in assignments]
        assert sorted(leaders.count(b) for b in (1, 2, 3)) == [2, 2, 2]


def test_placement_is_deterministic_per_seed_and_shifts_followers() -> None:
    assert assign_replicas([1, 2, 3, 4], 8, 2, seed=7) == assign_replicas([4, 3, 2, 1], 8, 2, seed=7)
    pairs = {a for a in assign_replicas([1, 2, 3, 4], 8, 2, seed=7)}
    assert len(pairs) > 4  # the follower shift changes after every round of brokers
    with pytest.raises(ValueError):
        assign_replicas([1, 2], 1, 3, seed=1)
    with pytest.raises(ValueError):
        assign_replicas([], 1, 1, seed=1)


def test_placement_of_added_partitions_continues_the_rotation() -> None:
    first = assign_replicas([1, 2, 3], 3, 1, seed=5)
    more = assign_replicas([1, 2, 3], 3, 1, seed=5, start_partition=3)
    assert sorted(r[0] for r in first) == sorted(r[0] for r in more) == [1, 2, 3]


# ------------------------------------------------------------------------------------- election
def reg(
    replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, le: int = 5, pe: int = 9
) -> PartitionRegistration:
    return PartitionRegistration(0, replicas, isr, leader, le, pe)


def test_online_election_keeps_a_valid_leader() -> None:
    assert change_partition(reg((1, 2, 3), (1, 2, 3), 2), lambda b: True) is None


def test_online_election_picks_first_live_isr_replica_in_assignment_order() -> None:
    new = change_partition(reg((1, 2, 3), (3, 2), 1), lambda b: b != 1)
    assert new is not None and new.leader == 2 and new.leader_epoch == 6 and new.partition_epoch == 10


def test_no_live_isr_member_means_no_leader_unless_unclean() -> None:
    alive = {3}.__contains__
    clean = change_partition(reg((1, 2, 3), (1, 2), 1), alive)
    assert clean is not None and clean.leader == -1 and clean.isr == (1, 2)
    unclean = change_partition(reg((1, 2, 3), (1, 2), 1), alive, unclean_enabled=True)
    assert unclean is not None and unclean.leader == 3 and unclean.isr == (3,) and unclean.leader_epoch == 6


def test_preferred_election() -> None:
    new = change_partition(reg((1, 2, 3), (1, 2, 3), 2), lambda b: True, election=Election.PREFERRED)
    assert new is not None and new.leader == 1
    # preferred replica not in the ISR: the current leader stays
    assert change_partition(reg((1, 2, 3), (2, 3), 2), lambda b: True, election=Election.PREFERRED) is None


def test_remove_from_isr_keeps_the_last_member() -> None:
    new = remove_from_isr(reg((1, 2, 3), (1, 2), 1), 1, lambda b: b != 1)
    assert new is not None and new.leader == 2 and new.isr == (2,)
    last = remove_from_isr(reg((1, 2, 3), (1,), 1), 1, lambda b: b != 1)
    assert last is not None and last.leader == -1 and last.isr == (1,) and last.leader_epoch == 6
    assert remove_from_isr(reg((1, 2, 3), (2, 3), 2), 1, lambda b: True) is None


# ------------------------------------------------------------------------------ state machine
def machine_with_brokers(n: int = 3) -> MetadataStateMachine:
    machine = MetadataStateMachine(MetadataImage("cid", -1))
    for b in range(1, n + 1):
        _, (code, epoch) = machine.execute(
            SETTINGS, RegisterBrokerCmd(b, {"PLAINTEXT": ("h", 9000 + b)}, None, uuid.uuid4())
        )
        assert code == ErrorCode.none
        assert machine.image.brokers[b].fenced
        _, result = machine.execute(SETTINGS, HeartbeatCmd(b, epoch, machine.image.offset))
        assert result.error == ErrorCode.none and not result.is_fenced
    return machine


def create(machine: MetadataStateMachine, name: str, partitions: int = 3, rf: int = 3) -> uuid.UUID:
    tid = uuid.uuid4()
    _, outcomes = machine.execute(
        SETTINGS, CreateTopicsCmd((CreatableTopicSpec(name, partitions, rf),), (tid,), 1)
    )
    assert outcomes[0].error is None
    return tid


def test_heartbeat_before_catching_up_keeps_the_broker_fenced() -> None:
    machine = MetadataStateMachine(MetadataImage("cid", -1))
    _, (_, epoch) = machine.execute(SETTINGS, RegisterBrokerCmd(1, {}, None, uuid.uuid4()))
    _, result = machine.execute(SETTINGS, HeartbeatCmd(1, epoch, epoch - 1))
    assert result.is_fenced and not result.is_caught_up
    _, stale = machine.execute(SETTINGS, HeartbeatCmd(1, epoch + 7, epoch))
    assert stale.error == ErrorCode.stale_broker_epoch


def test_fencing_moves_leadership_and_unfencing_restores_leaderless_partitions() -> None:
    machine = machine_with_brokers()
    create(machine, "t", partitions=1, rf=3)
    before = machine.image.partition("t", 0)
    assert before is not None and before.leader == before.replicas[0]
    victim = before.leader
    epoch = machine.image.brokers[victim].epoch
    records, code = machine.execute(SETTINGS, FenceBrokerCmd(victim, epoch))
    assert code == ErrorCode.none and records
    after = machine.image.partition("t", 0)
    assert after is not None and after.leader == before.replicas[1] and victim not in after.isr
    assert (
        after.leader_epoch == before.leader_epoch + 1 and after.partition_epoch == before.partition_epoch + 1
    )
    assert machine.image.offline_replicas(after) == (victim,)
    # a stale fence (old epoch) does nothing
    assert machine.execute(SETTINGS, FenceBrokerCmd(victim, epoch + 100))[1] == ErrorCode.stale_broker_epoch
    # re-registration + heartbeat unfences, but the ISR is the leader's business (AlterPartition)
    _, (_, new_epoch) = machine.execute(SETTINGS, RegisterBrokerCmd(victim, {}, None, uuid.uuid4()))
    _, hb = machine.execute(SETTINGS, HeartbeatCmd(victim, new_epoch, machine.image.offset))
    assert not hb.is_fenced and machine.image.offline_replicas(machine.image.partition("t", 0)) == ()


def test_last_isr_member_returns_as_leader() -> None:
    machine = machine_with_brokers(1)
    create(machine, "solo", partitions=1, rf=1)
    machine.execute(SETTINGS, FenceBrokerCmd(1, machine.image.brokers[1].epoch))
    leaderless = machine.image.partition("solo", 0)
    assert leaderless is not None and leaderless.leader == -1 and leaderless.isr == (1,)
    _, (_, epoch) = machine.execute(SETTINGS, RegisterBrokerCmd(1, {}, None, uuid.uuid4()))
    machine.execute(SETTINGS, HeartbeatCmd(1, epoch, machine.image.offset))
    back = machine.image.partition("solo", 0)
    assert back is not None and back.leader == 1 and back.leader_epoch == leaderless.leader_epoch + 1


def test_controlled_shutdown_moves_leaders_at_once() -> None:
    machine = machine_with_brokers()
    create(machine, "cs", partitions=6, rf=3)
    b = 2
    _, result = machine.execute(
        SETTINGS, HeartbeatCmd(b, machine.image.brokers[b].epoch, machine.image.offset, want_shutdown=True)
    )
    assert result.should_shutdown and result.is_fenced
    for p in machine.image.topics["cs"].partitions.values():
        assert p.leader != b and b not in p.isr


def alter(
    machine: MetadataStateMachine, tid: uuid.UUID, **changes: object
) -> tuple[ErrorCode, PartitionRegistration | None]:
    current = machine.image.topic_by_id(tid).partitions[0]  # type: ignore[union-attr]
    fields = dict(
        broker_id=current.leader,
        broker_epoch=machine.image.brokers[current.leader].epoch,
        topic_id=tid,
        partition=0,
        leader_epoch=current.leader_epoch,
        new_isr=(current.leader,),
        partition_epoch=current.partition_epoch,
    )
    fields.update(changes)
    _, result = machine.execute(SETTINGS, AlterPartitionCmd(**fields))  # type: ignore[arg-type]
    return result


def test_alter_partition_compare_and_set() -> None:
    machine = machine_with_brokers()
    tid = create(machine, "isr", partitions=1, rf=3)
    current = machine.image.partition("isr", 0)
    assert current is not None
    leader = current.leader
    follower = [b for b in current.replicas if b != leader][0]
    code, new = alter(machine, tid, new_isr=(leader, follower))
    assert code == ErrorCode.none and new is not None
    assert new.isr == (leader, follower) and new.partition_epoch == current.partition_epoch + 1
    assert new.leader_epoch == current.leader_epoch and machine.image.partition("isr", 0) == new
    # the same request again: its partition epoch is stale now
    assert (
        alter(machine, tid, new_isr=(leader,), partition_epoch=current.partition_epoch)[0]
        == ErrorCode.invalid_update_version
    )
    assert alter(machine, tid, leader_epoch=current.leader_epoch - 1)[0] == ErrorCode.fenced_leader_epoch
    assert (
        alter(machine, tid, broker_id=follower, broker_epoch=machine.image.brokers[follower].epoch)[0]
        == ErrorCode.not_leader_or_follower
    )
    assert alter(machine, tid, broker_epoch=12345)[0] == ErrorCode.stale_broker_epoch
    assert alter(machine, tid, new_isr=(leader, 99))[0] == ErrorCode.invalid_request
    assert alter(machine, tid, topic_id=uuid.uuid4())[0] == ErrorCode.unknown_topic_id
    # adding a fenced broker back is INELIGIBLE_REPLICA
    third = [b for b in current.replicas if b not in (leader, follower)][0]
    machine.execute(SETTINGS, FenceBrokerCmd(third, machine.image.brokers[third].epoch))
    assert alter(machine, tid, new_isr=(leader, follower, third))[0] == ErrorCode.ineligible_replica
    # no change: no new partition epoch
    same = machine.image.partition("isr", 0)
    assert same is not None
    assert alter(machine, tid, new_isr=same.isr) == (ErrorCode.none, same)


def test_elect_leaders_preferred_and_unclean() -> None:
    machine = machine_with_brokers()
    create(machine, "pref", partitions=1, rf=3)
    p = machine.image.partition("pref", 0)
    assert p is not None
    preferred = p.replicas[0]
    machine.execute(SETTINGS, FenceBrokerCmd(preferred, machine.image.brokers[preferred].epoch))
    _, results = machine.execute(SETTINGS, ElectLeadersCmd(Election.PREFERRED, (("pref", 0), ("nope", 0))))
    assert results == {
        ("pref", 0): ErrorCode.preferred_leader_not_available,
        ("nope", 0): ErrorCode.unknown_topic_or_partition,
    }
    _, results = machine.execute(SETTINGS, ElectLeadersCmd(Election.UNCLEAN, (("pref", 0),)))
    assert results == {("pref", 0): ErrorCode.election_not_needed}


def test_producer_id_blocks_are_unique() -> None:
    machine = machine_with_brokers(2)
    _, a = machine.execute(SETTINGS, AllocateProducerIdsCmd(1, machine.image.brokers[1].epoch))
    _, b = machine.execute(SETTINGS, AllocateProducerIdsCmd(2, machine.image.brokers[2].epoch))
    assert a == (ErrorCode.none, 0, 1000) and b == (ErrorCode.none, 1000, 1000)
    assert machine.execute(SETTINGS, AllocateProducerIdsCmd(2, -5))[1][0] == ErrorCode.stale_broker_epoch


def test_snapshot_round_trip_rebuilds_the_same_image() -> None:
    machine = machine_with_brokers()
    create(machine, "snap", partitions=4, rf=2)
    machine.execute(SETTINGS, AllocateProducerIdsCmd(1, machine.image.brokers[1].epoch))
    records = pickle.loads(pickle.dumps(image_to_records(machine.image)))
    rebuilt = MetadataImage("cid", -1).apply(records)[0]
    assert rebuilt.topics == machine.image.topics and rebuilt.brokers == machine.image.brokers
    assert rebuilt.next_producer_id == machine.image.next_producer_id
    delta = diff_images(MetadataImage("cid", -1), rebuilt)
    assert [t.name for t in delta.created_topics] == ["snap"] and len(delta.changed_partitions) == 4


def test_bad_command_never_raises() -> None:
    machine = machine_with_brokers(1)
    records, result = machine.execute(SETTINGS, object())  # type: ignore[arg-type]
    assert records == [] and result == ErrorCode.unknown_server_error


def test_heartbeats_after_controlled_shutdown_do_not_unfence() -> None:
    machine = machine_with_brokers()
    epoch = machine.image.brokers[1].epoch
    machine.execute(SETTINGS, HeartbeatCmd(1, epoch, machine.image.offset, want_shutdown=True))
    _, late = machine.execute(SETTINGS, HeartbeatCmd(1, epoch, machine.image.offset))
    assert late.is_fenced and late.should_shutdown and machine.image.brokers[1].fenced
    _, (_, new_epoch) = machine.execute(SETTINGS, RegisterBrokerCmd(1, {}, None, uuid.uuid4()))
    _, back = machine.execute(SETTINGS, HeartbeatCmd(1, new_epoch, machine.image.offset))
    assert not back.is_fenced


def test_retried_registration_of_one_process_start_is_idempotent() -> None:
    machine = machine_with_brokers(1)
    incarnation = uuid.uuid4()
    records, (_, epoch) = machine.execute(SETTINGS, RegisterBrokerCmd(2, {}, None, incarnation))
    assert records
    again, (_, same) = machine.execute(SETTINGS, RegisterBrokerCmd(2, {}, None, incarnation))
    assert again == [] and same == epoch
    _, (_, newer) = machine.execute(SETTINGS, RegisterBrokerCmd(2, {}, None, uuid.uuid4()))
    assert newer > epoch
