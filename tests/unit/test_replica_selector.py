"""KIP-392's replica choice (``broker/replication/replica_selector.py``): Kafka's
``RackAwareReplicaSelector`` rules and ``findPreferredReadReplica``'s candidate filter, on plain
values; and the consumer's preferred-replica state (``SubscriptionState``)."""

from __future__ import annotations

from types import SimpleNamespace

from broker.cluster.replica import Replica
from broker.replication.replica_selector import ReplicaView, preferred_read_replica, rack_aware_select
from spark_kafkalite.client.consumer.subscription_state import OffsetResetStrategy, SubscriptionState
from spark_kafkalite.client.types import TopicPartition

LEADER = ReplicaView(1, "a", 100, 0)


def test_no_client_rack_or_no_replica_in_it_keeps_the_leader() -> None:
    b = ReplicaView(2, "b", 100, 0)
    assert rack_aware_select("", LEADER, [LEADER, b]) is LEADER
    assert rack_aware_select("z", LEADER, [LEADER, b]) is LEADER


def test_the_leader_in_the_client_rack_wins_over_a_follower_there() -> None:
    a2 = ReplicaView(2, "a", 100, 0)
    assert rack_aware_select("a", LEADER, [LEADER, a2]) is LEADER


def test_most_caught_up_replica_of_the_rack_then_most_recently_caught_up() -> None:
    behind = ReplicaView(2, "b", 90, 0)
    ahead_stale = ReplicaView(3, "b", 100, 500)
    ahead_fresh = ReplicaView(4, "b", 100, 20)
    chosen = rack_aware_select("b", LEADER, [LEADER, behind, ahead_stale, ahead_fresh])
    assert chosen is ahead_fresh


def _partition(isr: tuple[int, ...], followers: dict[int, tuple[int, int]]) -> SimpleNamespace:
    remote = {}
    for broker_id, (log_start, log_end) in followers.items():
        replica = Replica(broker_id)
        replica.log_start_offset, replica.log_end_offset, replica.last_caught_up_time_ms = (
            log_start,
            log_end,
            1000,
        )
        remote[broker_id] = replica
    return SimpleNamespace(
        local_broker_id=1, isr=isr, remote_replicas=remote, log=SimpleNamespace(log_end_offset=100)
    )


def test_candidates_are_in_sync_registered_and_hold_the_fetch_offset() -> None:
    racks = {1: (True, "a"), 2: (True, "b"), 3: (True, "b"), 4: (False, "b")}
    rack_of = racks.__getitem__
    # 2 holds offsets [0, 100]: preferred for a consumer in rack b
    p = _partition((1, 2, 3), {2: (0, 100), 3: (0, 100)})
    assert preferred_read_replica(p, "b", 50, rack_of, 2000) in (2, 3)
    # out of the ISR, below its log start, past its log end, or unregistered: the leader
    assert preferred_read_replica(_partition((1,), {2: (0, 100)}), "b", 50, rack_of, 2000) is None
    assert preferred_read_replica(_partition((1, 2), {2: (60, 100)}), "b", 50, rack_of, 2000) is None
    assert preferred_read_replica(_partition((1, 2), {2: (0, 40)}), "b", 50, rack_of, 2000) is None
    assert preferred_read_replica(_partition((1, 4), {4: (0, 100)}), "b", 50, rack_of, 2000) is None
    # a consumer in the leader's rack stays on the leader
    assert preferred_read_replica(p, "a", 50, rack_of, 2000) is None


def test_consumer_preferred_replica_expires_and_clears() -> None:
    subs = SubscriptionState(OffsetResetStrategy.EARLIEST)
    tp = TopicPartition("t", 0)
    subs.assign([tp])
    assert subs.preferred_read_replica(tp, 0) is None
    subs.update_preferred_read_replica(tp, 3, expire_ms=1000)
    assert subs.preferred_read_replica(tp, 999) == 3
    assert subs.preferred_read_replica(tp, 1001) is None  # expired: back to the leader
    subs.update_preferred_read_replica(tp, 2, expire_ms=5000)
    assert subs.clear_preferred_read_replica(tp) == 2
    assert subs.clear_preferred_read_replica(tp) is None
