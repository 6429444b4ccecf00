"""Batch read: a Kafka topic as a DataFrame with ``spark.read.format("kafkalite")``.

Produces 30 records to a 3-partition topic (10 per partition), then reads them back with Spark, decodes the value,
and reads one offset range with ``startingOffsets`` / ``endingOffsets`` JSON.

    python examples/batch_read.py [--bootstrap-server HOST:PORT]
"""

from __future__ import annotations

from _example_env import broker, create_topic, parse_args, spark_session

TOPIC = "example-batch-read"


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    with broker(args.bootstrap_server) as bootstrap_servers:
        create_topic(bootstrap_servers, TOPIC, partitions=3)
        from spark_kafkalite.client import KafkaProducer

        with KafkaProducer({"bootstrap.servers": bootstrap_servers}) as producer:
            for i in range(30):
                producer.send(
                    TOPIC, key=f"user-{i % 4}".encode(), value=f"click {i}".encode(), partition=i % 3
                )
            producer.flush()

        spark = spark_session("kafkalite-batch-read")
        try:
            df = (
                spark.read.format("kafkalite")
                .option("kafka.bootstrap.servers", bootstrap_servers)
                .option("subscribe", TOPIC)  # startingOffsets=earliest, endingOffsets=latest
                .load()
            )
            df.printSchema()
            decoded = df.selectExpr(
                "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset"
            )
            decoded.orderBy("partition", "offset").show(5, truncate=False)
            print("rows:", df.count())
            print(
                "rows per key:", sorted((r.key, r["count"]) for r in decoded.groupBy("key").count().collect())
            )

            first_two = (
                spark.read.format("kafkalite")
                .option("kafka.bootstrap.servers", bootstrap_servers)
                .option("subscribe", TOPIC)
                .option("startingOffsets", f'{{"{TOPIC}":{{"0":0,"1":0,"2":0}}}}')
                .option("endingOffsets", f'{{"{TOPIC}":{{"0":2,"1":2,"2":2}}}}')
                .load()
            )
            print("first two offsets of each partition:", first_two.count())
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
