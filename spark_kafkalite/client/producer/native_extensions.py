"""The producer's compiled modules and their pure-Python twins (``KafkaProducer.send``'s path and
its batch state), each loaded with :func:`~spark_kafkalite.protocol.native.load_twin`; setup.py
builds the ``.pyx`` of each."""

from __future__ import annotations

from spark_kafkalite.protocol.native import Twin

__all__ = ["BATCH_STATE", "SEND_PATH", "TWINS"]

SEND_PATH = Twin("spark_kafkalite.client.producer._send_path", "spark_kafkalite.client.producer.send_path")
"""``SendPath`` (``KafkaProducer.send``); used by :mod:`~spark_kafkalite.client.producer.kafka_producer`."""
BATCH_STATE = Twin(
    "spark_kafkalite.client.producer._batch_state", "spark_kafkalite.client.producer.batch_state"
)
"""The C-member base classes of the accumulator, its batches and their record futures."""

TWINS: tuple[Twin, ...] = (SEND_PATH, BATCH_STATE)
"""The producer's twins."""
