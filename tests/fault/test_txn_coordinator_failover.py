"""The transaction coordinator on a 3-node cluster (issue #12), real broker processes: a
confluent-kafka transactional producer commits and aborts, then its coordinator (the leader of
the id's ``__transaction_state`` partition) is SIGKILLed mid-transaction; the new leader loads
the partition, the producer's commit goes through it, and a read_committed consumer sees
exactly the committed records."""

from __future__ import annotations

import uuid
from pathlib import Path

import confluent_kafka
import pytest
from fault.replication_helpers import create_topic, start_cluster
from interop.txn_peers import describe, read_committed

pytestmark = pytest.mark.timeout(120)


def test_commit_survives_coordinator_failover(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path)
    try:
        topic = create_topic(cluster, partitions=2)
        bootstrap = cluster.bootstrap_servers
        tid = f"failover-{uuid.uuid4().hex[:8]}"
        p = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5}
        )
        p.init_transactions(60)
        p.begin_transaction()
        p.produce(topic, b"c1", partition=0)
        p.produce(topic, b"c2", partition=1)
        p.commit_transaction(60)
        p.begin_transaction()
        p.produce(topic, b"a1", partition=0)
        p.flush(30)
        p.abort_transaction(60)
        p.begin_transaction()
        p.produce(topic, b"c3", partition=0)
        p.produce(topic, b"c4", partition=1)
        p.flush(30)  # Ongoing, its records replicated (acks=all)
        coordinator = describe(bootstrap, tid).coordinator_id
        cluster.kill(coordinator)
        bootstrap = ",".join(cluster.broker_address(n) for n in cluster.running_node_ids())
        p.commit_transaction(60)  # EndTxn re-looked-up at the new coordinator
        d = describe(bootstrap, tid)
        assert d.coordinator_id != coordinator and d.state in ("PrepareCommit", "CompleteCommit")
        assert sorted(read_committed(bootstrap, topic, 2, timeout_s=30)) == [b"c1", b"c2", b"c3", b"c4"]
        assert describe(bootstrap, tid).state == "CompleteCommit"
    finally:
        cluster.stop()
