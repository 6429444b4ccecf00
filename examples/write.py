"""Write: a DataFrame to a Kafka topic with ``df.write.format("kafkalite")``.

Writes rows with keys, string values, headers and an explicit partition for some rows, then
checks them with a plain Kafka consumer.

    python examples/write.py [--bootstrap-server HOST:PORT]
"""

from __future__ import annotations

from _example_env import broker, create_topic, parse_args, spark_session

TOPIC = "example-write"


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    with broker(args.bootstrap_server) as bootstrap_servers:
        create_topic(bootstrap_servers, TOPIC, partitions=2)
        spark = spark_session("kafkalite-write")
        try:
            from pyspark.sql import functions as F

            df = spark.range(20).select(
                F.concat(F.lit("sensor-"), (F.col("id") % 3).cast("string")).alias("key"),
                F.to_json(F.struct(F.col("id"), (F.col("id") * 1.5).alias("reading"))).alias("value"),
                F.when(F.col("id") < 5, F.lit(0)).cast("int").alias("partition"),  # null: partition by key
                F.array(F.struct(F.lit("source").alias("key"), F.lit(b"example").alias("value"))).alias(
                    "headers"
                ),
            )
            (
                df.write.format("kafkalite")
                .option("kafka.bootstrap.servers", bootstrap_servers)
                .option("topic", TOPIC)
                .mode("append")  # the only save mode a Kafka sink supports
                .save()
            )
        finally:
            spark.stop()

        from spark_kafkalite.client import KafkaConsumer, TopicPartition

        with KafkaConsumer({"bootstrap.servers": bootstrap_servers}) as consumer:
            tps = [TopicPartition(TOPIC, p) for p in (0, 1)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            records = []
            while len(records) < 20:
                for batch in consumer.poll(timeout_ms=2000).values():
                    records.extend(batch)
        print("records written:", len(records))
        first = min(records, key=lambda r: (r.partition, r.offset))
        print("first record:", first.partition, first.offset, first.key, first.value, first.headers)


if __name__ == "__main__":
    main()
