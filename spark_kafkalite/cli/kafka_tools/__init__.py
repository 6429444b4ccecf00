"""Kafka's command-line tools as drop-in scripts over spark-kafkalite's client: the flags,
output and errors of ``kafka-topics.sh``, ``kafka-configs.sh``, ``kafka-acls.sh``,
``kafka-console-producer.sh``, ``kafka-console-consumer.sh``, ``kafka-consumer-groups.sh``,
``kafka-get-offsets.sh``, ``kafka-delete-records.sh`` and ``kafka-transactions.sh``.

Each is a console script of the package (``[project.scripts]``) and, through
:mod:`.kafka_path` (``kafkalite kafka-path``), a file in a ``bin/`` directory for tools that run
``$KAFKA_PATH/bin/kafka-topics.sh``. They use only the Kafka protocol, so they work against any
Kafka cluster. One module per tool family; :mod:`.tool` holds the parser and runner they share,
and the work itself is shared with the ``kafkalite`` commands where both do it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["TOOLS", "tool_main"]

TOOLS: dict[str, str] = {
    "kafka-topics.sh": "spark_kafkalite.cli.kafka_tools.topics:main",
    "kafka-configs.sh": "spark_kafkalite.cli.kafka_tools.configs:main",
    "kafka-acls.sh": "spark_kafkalite.cli.kafka_tools.acls:main",
    "kafka-console-producer.sh": "spark_kafkalite.cli.kafka_tools.console:producer_main",
    "kafka-console-consumer.sh": "spark_kafkalite.cli.kafka_tools.console:consumer_main",
    "kafka-consumer-groups.sh": "spark_kafkalite.cli.kafka_tools.groups:main",
    "kafka-get-offsets.sh": "spark_kafkalite.cli.kafka_tools.offsets:get_offsets_main",
    "kafka-delete-records.sh": "spark_kafkalite.cli.kafka_tools.offsets:delete_records_main",
    "kafka-transactions.sh": "spark_kafkalite.cli.kafka_tools.transactions:main",
}
"""Script name -> ``module:function`` entry point (the same table as pyproject's scripts)."""


def tool_main(name: str) -> Callable[[Sequence[str] | None], int]:
    """The entry point of the script ``name`` (``kafka-topics.sh``, ...).

    Raises:
        KeyError: not one of :data:`TOOLS`.
    """
    import importlib

    module, _, function = TOOLS[name].partition(":")
    entry: Callable[[Sequence[str] | None], int] = getattr(importlib.import_module(module), function)
    return entry
