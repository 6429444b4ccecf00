"""Memory of a read task: peak RSS of the process running the ``kafkalite`` partition reader
(``read_offset_range``, what a Spark Python worker runs for one input partition) over its idle RSS.

Goal (issue #10): peak - idle <= 2 x ``fetch.max.bytes`` + one output Arrow batch. The task runs
in a fresh child process: idle RSS is taken after imports and a warm-up read of 1,000 records
(the consumer pool then holds its consumer); peak is ``ru_maxrss`` after reading the whole
partition, each yielded batch dropped as Spark does after sending it. Peer: the same process
reading the same number of rows from pre-built Arrow batches (the Python-source floor).

    python bench/read_memory.py [--records 1000000] [--fetch-max-bytes 52428800]
"""

from __future__ import annotations

import json
import subprocess
import sys

from _common import (
    base_parser,
    bootstrap,
    console,
    create_topic,
    emit_table,
    fill_topic_with_confluent,
    topic_name,
)

CHILD = r"""
import json, resource, sys
from spark_kafkalite.datasource.offset_range_calculator import OffsetRange
from spark_kafkalite.datasource.partition_reader import ReadConfig, read_offset_range

bootstrap, topic, records, fetch_max = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def rss_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
config = ReadConfig({"bootstrap.servers": bootstrap, "fetch.max.bytes": str(fetch_max)})
for _ in read_offset_range(OffsetRange(topic, 0, 0, 1000), config):
    pass
idle = rss_kib()
rows = largest = 0
for batch in read_offset_range(OffsetRange(topic, 0, 0, records), config):
    rows += batch.num_rows
    largest = max(largest, batch.nbytes)
    del batch
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"idle_kib": idle, "peak_kib": peak, "rows": rows, "largest_batch_bytes": largest}))
"""


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], default_records=1_000_000)
    parser.add_argument("--fetch-max-bytes", type=int, default=50 * 1024 * 1024, help="fetch.max.bytes")
    args = parser.parse_args()
    with bootstrap(args.bootstrap_server) as (bootstrap_servers, _cpu):
        topic = topic_name("bench-read-memory")
        create_topic(bootstrap_servers, topic, 1)
        console.print(f"filling {topic} (1 partition) with {args.records:,} records (confluent-kafka) ...")
        fill_topic_with_confluent(bootstrap_servers, topic, args.records, args.timeout_s)
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                __file__,
                bootstrap_servers,
                topic,
                str(args.records),
                str(args.fetch_max_bytes),
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=args.timeout_s,
        )
        m = json.loads(out.stdout.strip().splitlines()[-1])
    grown_mib = (m["peak_kib"] - m["idle_kib"]) / 1024
    bound_mib = (2 * args.fetch_max_bytes + m["largest_batch_bytes"]) / 1024 / 1024
    columns = ["measure", "MiB"]
    rows = [
        ["idle RSS (imports + warm consumer)", f"{m['idle_kib'] / 1024:.1f}"],
        ["peak RSS reading the partition", f"{m['peak_kib'] / 1024:.1f}"],
        ["peak - idle", f"{grown_mib:.1f}"],
        ["largest output batch", f"{m['largest_batch_bytes'] / 1024 / 1024:.1f}"],
        ["goal: 2 x fetch.max.bytes + one output batch", f"{bound_mib:.1f}"],
        ["goal met" if grown_mib <= bound_mib else "GOAL NOT MET", ""],
    ]
    title = f"read task memory: {m['rows']:,} rows of one partition, fetch.max.bytes={args.fetch_max_bytes:,}"
    emit_table(title, columns, rows)
    from rich.table import Table

    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*r)
    console.print(table)


if __name__ == "__main__":
    main()
