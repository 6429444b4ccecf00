"""``python -m spark_kafkalite.cli.kafka_tools kafka-topics.sh ARGS...``: run one of the tools
(what the ``bin/`` wrappers of ``kafkalite kafka-path`` call)."""

from __future__ import annotations

import sys

from spark_kafkalite.cli.kafka_tools import TOOLS, tool_main

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in TOOLS:
        print(
            f"usage: python -m spark_kafkalite.cli.kafka_tools {{{','.join(TOOLS)}}} ARGS...", file=sys.stderr
        )
        sys.exit(2)
    sys.exit(tool_main(sys.argv[1])(sys.argv[2:]))
