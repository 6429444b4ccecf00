"""Run by test_spark_connect.py in a subprocess (a Spark Connect session cannot share the
process with the classic test session): batch write + read and a streaming query through
``SparkSession.builder.remote("local[2]")``. Prints ``CONNECT-OK <details>`` on success.

    python tests/spark/connect_session_check.py BOOTSTRAP TOPIC SINK_TOPIC CHECKPOINT_DIR
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    bootstrap, topic, sink, checkpoint = sys.argv[1:5]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from spark_kafkalite.demo.session import expose_auto_registration_module

    expose_auto_registration_module()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    try:
        assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
        rows = spark.range(12).select(
            F.col("id").cast("string").alias("key"),
            F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
        )
        rows.write.format("kafkalite").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", topic
        ).mode("append").save()
        df = (
            spark.read.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .load()
        )
        values = sorted(r.value.decode() for r in df.select("value").collect())
        assert values == sorted(f"v{i}" for i in range(12)), values

        query = (
            spark.readStream.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "5")
            .load()
            .select("key", "value")
            .writeStream.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        batches = [p for p in query.recentProgress if p.numInputRows]
        copied = (
            spark.read.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", sink)
            .load()
        ).count()
        assert copied == 12, copied
        print(f"CONNECT-OK batches={len(batches)} copied={copied}", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
