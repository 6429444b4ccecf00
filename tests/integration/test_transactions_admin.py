"""Admin ``describe_transactions`` / ``list_transactions`` (DescribeTransactions,
ListTransactions to the transaction coordinator) and ``kafkalite transactions list|describe``,
against a transaction of our producer while it is open and after its commit."""

from __future__ import annotations

import contextlib
import io

import pytest

from spark_kafkalite.cli import main as cli_main
from spark_kafkalite.client import KafkaAdminClient, KafkaProducer, NewTopic, TopicPartition
from spark_kafkalite.protocol.errors import InvalidRegularExpressionError, TransactionalIdNotFoundError

pytestmark = pytest.mark.timeout(90)

PARTITIONS = 2


def test_admin_and_cli_describe_and_list_transactions(bootstrap_servers: str, unique_topic: str) -> None:
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(unique_topic, PARTITIONS, 1)])
    tid = f"admin-{unique_topic}"
    producer = KafkaProducer(
        {"bootstrap.servers": bootstrap_servers, "transactional.id": tid, "transaction.timeout.ms": 45000}
    )
    try:
        producer.init_transactions(20)
        with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
            # Kafka answers start time -1 for an id with no open transaction (kio cannot read it)
            empty = admin.describe_transactions([tid])[tid]
            assert empty.state == "Empty" and empty.transaction_start_time_ms is None
            with pytest.raises(TransactionalIdNotFoundError):
                admin.describe_transactions([f"{tid}-unknown"])
        producer.begin_transaction()
        producer.send(unique_topic, b"x", partition=1).result(10)
        with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
            d = admin.describe_transactions([tid])[tid]
            assert d.state == "Ongoing"
            assert d.topic_partitions == (TopicPartition(unique_topic, 1),)
            assert d.transaction_timeout_ms == 45000 and d.transaction_start_time_ms is not None
            listed = {t.transactional_id: t for t in admin.list_transactions(states=["Ongoing"])}
            assert listed[tid].producer_id == d.producer_id
            out = io.StringIO()
            _run_cli(
                [
                    "transactions",
                    "describe",
                    "--bootstrap-server",
                    bootstrap_servers,
                    "--transactional-id",
                    tid,
                ],
                out,
            )
            assert "Ongoing" in out.getvalue() and f"{unique_topic}-1" in out.getvalue()
            producer.commit_transaction(20)
            d = admin.describe_transactions([tid])[tid]
            assert d.state in ("PrepareCommit", "CompleteCommit")
            out = io.StringIO()
            _run_cli(["transactions", "list", "--bootstrap-server", bootstrap_servers], out)
            lines = [line.split() for line in out.getvalue().splitlines()]
            assert lines[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
            assert [tid, str(d.coordinator_id), str(d.producer_id)] in [row[:3] for row in lines]
            # ListTransactions v2 (KIP-1152): an RE2 pattern the whole id must match
            assert [
                t.transactional_id
                for t in admin.list_transactions(transactional_id_pattern=tid[:-4] + ".{4}")
            ] == [tid]
            assert admin.list_transactions(transactional_id_pattern=tid[:-1]) == []  # not a prefix match
            with pytest.raises(
                InvalidRegularExpressionError, match=r"INVALID_REGULAR_EXPRESSION.*'\(ab\(cd'"
            ):
                admin.list_transactions(transactional_id_pattern="(ab(cd")
            out = io.StringIO()
            _run_cli(
                [
                    "transactions",
                    "list",
                    "--bootstrap-server",
                    bootstrap_servers,
                    "--transactional-id-pattern",
                    "admin-.*",
                ],
                out,
            )
            listed_ids = [line.split()[0] for line in out.getvalue().splitlines()[1:]]
            assert tid in listed_ids and all(t.startswith("admin-") for t in listed_ids)
    finally:
        producer.close(5)


def _run_cli(argv: list[str], out: io.StringIO) -> None:
    with contextlib.redirect_stdout(out):
        assert cli_main(argv) == 0
