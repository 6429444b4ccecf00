"""The ``kafkalite`` PySpark data source (the only package that imports pyspark).

Modules: ``source`` (the ``DataSource``), ``options`` (Spark-compatible option parsing),
``offsets`` (offset JSON), ``offset_range_calculator`` (rate limit, range splitting),
``offset_reader`` (driver-side offset resolution), ``batch_reader``, ``stream_reader``,
``stream_planning`` (pure micro-batch planning, no pyspark),
``partition_reader`` (executor fetch), ``writer`` (sink), ``arrow`` (row schema),
``group_commit`` (``commitOffsetsToGroup``), ``progress`` (lag from streaming progress).
"""
