"""Run by test_local_cluster_master.py in a subprocess: master ``local-cluster[2,1,1024]`` (two
executor JVMs with their own Python workers, separate from the driver). Writes, reads (split
with minPartitions) and streams topic to topic; prints ``LOCAL-CLUSTER-OK <details>``.

    python tests/spark/local_cluster_check.py BOOTSTRAP TOPIC SINK_TOPIC CHECKPOINT_DIR
"""

from __future__ import annotations

import os
import sys
import time


def main() -> None:
    bootstrap, topic, sink, checkpoint = sys.argv[1:5]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import pyspark

    # executors are launched with $SPARK_HOME/bin/spark-class: the pip package ships it
    os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))
    from spark_kafkalite.demo.session import expose_auto_registration_module

    expose_auto_registration_module()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        .getOrCreate()
    )
    try:
        sc = spark.sparkContext
        deadline = time.monotonic() + 120
        while sc._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:
            time.sleep(0.5)  # executors register asynchronously
        executors = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
        driver_pid = os.getpid()

        def where(_: object) -> object:
            import os as _os

            yield _os.getpid(), _os.getppid()

        placements = sc.parallelize(range(8), 8).mapPartitions(where).collect()
        task_pids = {pid for pid, _ in placements}
        assert driver_pid not in task_pids

        rows = spark.range(40).select(
            (F.col("id") % 5).cast("string").alias("key"), F.col("id").cast("string").alias("value")
        )
        rows.write.format("kafkalite").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", topic
        ).mode("append").save()
        df = (
            spark.read.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("minPartitions", "6")
            .load()
        )
        partitions = df.rdd.getNumPartitions()
        values = sorted(
            int(r.value) for r in df.select(F.col("value").cast("string").alias("value")).collect()
        )
        assert values == list(range(40)), values

        query = (
            spark.readStream.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "15")
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
        copied = (
            spark.read.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", sink)
            .load()
        ).count()
        assert copied == 40, copied
        print(
            f"LOCAL-CLUSTER-OK executors={executors} task_pids={len(task_pids)} "
            f"python_daemons={len({ppid for _, ppid in placements})} read_partitions={partitions} "
            f"copied={copied}",
            flush=True,
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
