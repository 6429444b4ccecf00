"""format("kafkalite") against a SASL_SSL (SCRAM-SHA-512) LocalCluster: the batch sink and
source, and a streaming query (AvailableNow) from one topic into another, all with the security
settings as ``kafka.*`` options (Spark's ``kafka`` format convention). The password appears in no
plan (``explain``), no streaming progress, no record of our Python loggers on the driver, and not
in the error a wrong password gives."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_kafkalite.client import KafkaAdminClient, NewTopic
from spark_kafkalite.local_cluster import ClusterSecurity, LocalCluster

pytestmark = pytest.mark.timeout(240)

PASSWORD = "Spark-Scram-pw-" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def secure_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(
        security=ClusterSecurity("SASL_SSL", "SCRAM-SHA-512", "sparkuser", PASSWORD)
    ) as cluster:
        yield cluster


def _topics(cluster: LocalCluster, *names: str) -> None:
    with KafkaAdminClient(cluster.client_config()) as admin:
        admin.create_topics([NewTopic(name, 2, 1) for name in names])


def _options(cluster: LocalCluster, jaas: bool) -> dict[str, str]:
    """``kafka.*`` options; ``jaas`` gives the credentials Java's way (``kafka.sasl.jaas.config``)."""
    options = {k: str(v) for k, v in cluster.client_config("kafka.").items()}
    if jaas:
        user, password = options.pop("kafka.sasl.username"), options.pop("kafka.sasl.password")
        options["kafka.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";'
        )
    return options


def test_batch_and_streaming_over_sasl_ssl_keep_the_password_secret(
    spark: Any, secure_cluster: LocalCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source, target = f"sec-in-{uuid.uuid4().hex[:8]}", f"sec-out-{uuid.uuid4().hex[:8]}"
    _topics(secure_cluster, source, target)
    caplog.set_level(logging.DEBUG, logger="spark_kafkalite")
    seen: list[str] = []

    rows = [(f"k{i}", f"v{i}") for i in range(40)]
    (
        spark.createDataFrame(rows, "key string, value string")
        .write.format("kafkalite")
        .options(**_options(secure_cluster, jaas=False))
        .option("topic", source)
        .mode("append")
        .save()
    )

    batch = (
        spark.read.format("kafkalite")
        .options(**_options(secure_cluster, jaas=True))
        .option("subscribe", source)
        .load()
    )
    seen.append(batch._jdf.queryExecution().toString())  # what explain(True) prints
    read = batch.selectExpr("cast(key as string) k", "cast(value as string) v").collect()
    assert sorted((r.k, r.v) for r in read) == sorted(rows)

    stream = (
        spark.readStream.format("kafkalite")
        .options(**_options(secure_cluster, jaas=True))
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(cast(value as string)) as value")
    )
    query = (
        stream.writeStream.format("kafkalite")
        .options(**_options(secure_cluster, jaas=False))
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None
    seen.append(query._jsq.explainInternal(True))
    seen.extend(json.dumps(json.loads(p.json)) for p in query.recentProgress)

    copied = (
        spark.read.format("kafkalite")
        .options(**_options(secure_cluster, jaas=False))
        .option("subscribe", target)
        .load()
        .selectExpr("cast(value as string) v")
        .collect()
    )
    assert sorted(r.v for r in copied) == sorted(v.upper() for _, v in rows)

    seen.extend(record.getMessage() for record in caplog.records)
    assert any("kafkalite" in text or "RelationV2" in text for text in seen)
    for text in seen:
        assert PASSWORD not in text


def test_wrong_password_fails_the_job_without_showing_it(spark: Any, secure_cluster: LocalCluster) -> None:
    wrong = "Wrong-pw-" + uuid.uuid4().hex[:8]
    options = {**_options(secure_cluster, jaas=False), "kafka.sasl.password": wrong}
    with pytest.raises(Exception) as info:
        spark.read.format("kafkalite").options(**options).option("subscribe", "anything").load().collect()
    message = str(info.value)
    assert "SASL_AUTHENTICATION_FAILED" in message and "User:sparkuser" in message
    assert wrong not in message and PASSWORD not in message
