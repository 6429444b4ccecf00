"""The ``kafkalite`` PySpark data source: Spark's ``kafka`` format, in Python, over our client.

Registered automatically through the top-level ``pyspark_kafkalite`` module (Spark imports every
``pyspark_*`` module and registers its ``DefaultSource``), so after ``pip install`` this works with
no ``spark.dataSource.register`` call::

    df = (spark.read.format("kafkalite")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())

Capabilities: batch read (:mod:`.batch_reader`), micro-batch read with admission control
(``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``/``maxTriggerDelay``, ``maxBytesPerTrigger``),
``Trigger.AvailableNow`` and ``commitOffsetsToGroup`` (:mod:`.stream_reader`), batch and streaming write
(:mod:`.writer`). Options and the row schema are those of Spark's ``kafka`` format
(:mod:`.options`, :mod:`.arrow`). Requires pyspark >= 4.2.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from spark_kafkalite.datasource.arrow import kafka_schema
from spark_kafkalite.datasource.options import (
    KafkaLiteOptionError,
    parse_sink_options,
    parse_source_options,
)
from spark_kafkalite.datasource.worker_heap import freeze_imported_heap

__all__ = ["KafkaLiteDataSource", "FORMAT_NAME"]

FORMAT_NAME = "kafkalite"


def _include_headers(options: dict[str, str] | object) -> bool:
    raw = getattr(options, "get", lambda _k, _d=None: None)("includeheaders", None)
    return str(raw).strip().lower() == "true" if raw is not None else False


class KafkaLiteDataSource(DataSource):
    """``format("kafkalite")``. Construction and :meth:`schema` do no I/O and no validation
    beyond ``includeHeaders``; each reader / writer validates the options it needs.

    Raises (from the factory methods):
        KafkaLiteOptionError: invalid options, a user-specified read schema, or ``mode("overwrite")``.
    """

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        """Spark's Kafka schema, with ``headers`` when ``includeHeaders=true``."""
        return kafka_schema(_include_headers(self.options))

    def _check_read_schema(self, schema: StructType) -> None:
        expected = kafka_schema(_include_headers(self.options))
        if schema is not None and schema.simpleString() != expected.simpleString():
            raise KafkaLiteOptionError(
                "Kafka source has a fixed schema and cannot be set with a custom one "
                f"(expected {expected.simpleString()}, got {schema.simpleString()})"
            )

    def reader(self, schema: StructType) -> DataSourceReader:
        from spark_kafkalite.datasource.batch_reader import KafkaLiteBatchReader

        self._check_read_schema(schema)
        reader = KafkaLiteBatchReader(parse_source_options(self.options, streaming=False))
        freeze_imported_heap()
        return reader

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        try:
            from spark_kafkalite.datasource.stream_reader import KafkaLiteStreamReader
        except ImportError as exc:  # pyspark 4.0/4.1: no pyspark.sql.streaming.datasource
            import pyspark

            raise KafkaLiteOptionError(
                f"kafkalite streaming reads need pyspark >= 4.2 (admission control for Python data "
                f"sources, SPARK-55304); this is pyspark {pyspark.__version__}: {exc}"
            ) from exc

        self._check_read_schema(schema)
        reader = KafkaLiteStreamReader(parse_source_options(self.options, streaming=True))
        freeze_imported_heap()
        return reader

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from spark_kafkalite.datasource.writer import KafkaLiteBatchWriter, plan_write

        if overwrite:
            raise KafkaLiteOptionError(
                "kafkalite cannot overwrite a topic (save mode 'overwrite'); use .mode(\"append\")"
            )
        sink = parse_sink_options(self.options)
        writer = KafkaLiteBatchWriter(sink, plan_write(schema, sink))
        freeze_imported_heap()
        return writer

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from spark_kafkalite.datasource.writer import KafkaLiteStreamWriter, plan_write

        # ``overwrite`` is true in complete output mode: every micro-batch appends the whole result,
        # as Spark's Kafka sink does.
        sink = parse_sink_options(self.options, streaming=True)
        writer = KafkaLiteStreamWriter(sink, plan_write(schema, sink))
        freeze_imported_heap()  # write planning runs in a pyspark.daemon worker every micro-batch
        return writer
