"""The Spark driver process of :mod:`fault.eos_sink_kill`: a streaming query that copies topic
``--src`` to topic ``--out`` through the ``kafkalite`` sink (``--mode exactly-once`` or
``at-least-once``), checkpointed in ``--checkpoint``. Prints ``RUNNING`` once the query started,
``BATCH <id> <rows>`` for each micro-batch that read rows, and ``DONE`` when a ``--drain`` run
(``Trigger.AvailableNow``) finished. Without ``--drain`` it runs until it is killed.

    python tests/fault/eos_sink_driver.py --bootstrap H:P --src in --out out --checkpoint DIR
        [--mode exactly-once] [--prefix eos-kill] [--drain]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any


def _report_batches(query: Any) -> None:
    seen: set[int] = set()
    while query.isActive:
        for progress in query.recentProgress:
            data = json.loads(progress.json)
            if data["numInputRows"] and data["batchId"] not in seen:
                seen.add(data["batchId"])
                print(f"BATCH {data['batchId']} {data['numInputRows']}", flush=True)
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--src", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--mode", default="exactly-once", choices=["exactly-once", "at-least-once"])
    parser.add_argument("--prefix", default="eos-kill")
    parser.add_argument("--max-offsets", type=int, default=100, help="maxOffsetsPerTrigger")
    parser.add_argument("--drain", action="store_true", help="Trigger.AvailableNow, then exit")
    args = parser.parse_args(argv)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from spark_kafkalite.demo.session import expose_auto_registration_module

    expose_auto_registration_module()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kafkalite-eos-kill")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    writer = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets))
        .load()
        .selectExpr("key", "value")
        .writeStream.format("kafkalite")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.out)
        .option("checkpointLocation", args.checkpoint)
        .option("deliveryGuarantee", args.mode)
    )
    if args.mode == "exactly-once":
        writer = writer.option("transactionalIdPrefix", args.prefix)
    writer = (
        writer.trigger(availableNow=True) if args.drain else writer.trigger(processingTime="300 milliseconds")
    )
    query = writer.start()
    print("RUNNING", flush=True)
    threading.Thread(target=_report_batches, args=(query,), daemon=True).start()
    query.awaitTermination()
    failure = query.exception()
    if failure is not None:
        print(f"FAILED {failure}", flush=True)
        return 1
    time.sleep(0.5)  # the reporter prints the last batch
    print("DONE", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
