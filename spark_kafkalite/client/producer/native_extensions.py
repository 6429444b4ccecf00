"""The producer's compiled modules and their pure-Python twins (``KafkaProducer.send``'s path and
its batch state), each loaded by its own module with
:func:`~spark_kafkalite.protocol.native.load_extension`; setup.py builds the ``.pyx`` of each."""

from __future__ import annotations

__all__ = ["EXTENSIONS"]

EXTENSIONS: dict[str, str] = {
    "spark_kafkalite.client.producer._send_path": "spark_kafkalite.client.producer.send_path",
    "spark_kafkalite.client.producer._batch_state": "spark_kafkalite.client.producer.batch_state",
}
"""Native module name -> pure-Python twin."""
