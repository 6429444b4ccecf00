"""Streaming ETL: topic to topic with ``readStream`` / ``writeStream`` ``.format("kafkalite")``.

Orders (JSON values) flow from ``example-orders`` to ``example-big-orders``: parse, keep orders
above 100, re-key by country, write as JSON. The query runs with ``Trigger.AvailableNow`` and
``maxOffsetsPerTrigger`` (several micro-batches, then stop), so running it again after producing
more orders continues from its checkpoint.

    python examples/streaming_etl.py [--bootstrap-server HOST:PORT] [--checkpoint DIR]
"""

from __future__ import annotations

import json
import tempfile

from _example_env import broker, create_topic, parse_args, spark_session

SOURCE, SINK = "example-orders", "example-big-orders"


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    with broker(args.bootstrap_server) as bootstrap_servers, tempfile.TemporaryDirectory() as work:
        create_topic(bootstrap_servers, SOURCE, partitions=2)
        create_topic(bootstrap_servers, SINK, partitions=2)
        from spark_kafkalite.client import KafkaProducer

        countries = ["FR", "DE", "JP", "BR"]
        with KafkaProducer({"bootstrap.servers": bootstrap_servers}) as producer:
            for i in range(40):
                order = {"order_id": i, "country": countries[i % 4], "amount": (i * 37) % 250}
                producer.send(SOURCE, value=json.dumps(order).encode())
            producer.flush()

        spark = spark_session("kafkalite-streaming-etl")
        try:
            from pyspark.sql import functions as F

            orders = (
                spark.readStream.format("kafkalite")
                .option("kafka.bootstrap.servers", bootstrap_servers)
                .option("subscribe", SOURCE)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", "15")
                .load()
            )
            schema = "order_id long, country string, amount long"
            big = (
                orders.select(F.from_json(F.col("value").cast("string"), schema).alias("o"))
                .where("o.amount > 100")
                .select(F.col("o.country").alias("key"), F.to_json(F.col("o")).alias("value"))
            )
            query = (
                big.writeStream.format("kafkalite")
                .option("kafka.bootstrap.servers", bootstrap_servers)
                .option("topic", SINK)
                .option("checkpointLocation", f"{work}/checkpoint")
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            batches = [p for p in query.recentProgress if p.numInputRows > 0]
            print("micro-batches:", len(batches), "input rows:", sum(p.numInputRows for p in batches))

            out = (
                spark.read.format("kafkalite")
                .option("kafka.bootstrap.servers", bootstrap_servers)
                .option("subscribe", SINK)
                .load()
                .selectExpr("CAST(key AS STRING) AS country", "CAST(value AS STRING) AS order")
            )
            print("big orders:", out.count())
            out.orderBy("order").show(5, truncate=False)
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
