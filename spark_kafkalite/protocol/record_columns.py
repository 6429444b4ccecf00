"""RecordBatch v2 -> Arrow columns without a Python object per record (issue #10 item 2).

:func:`new_builder` returns the native ``ColumnBuilder`` (or its pure-Python twin, see
:mod:`spark_kafkalite.protocol.native`); :func:`append_batch` checks one batch (CRC, per batch),
decompresses it and appends its records from a minimum offset; :func:`to_arrow_arrays` wraps the
finished buffers as Arrow arrays: ``key``/``value`` ``binary`` with validity bitmaps, ``offset``
``int64``, ``timestamp`` ``timestamp[us, UTC]`` (Kafka's ms x 1000; -1 ms stays -1000 us as in
Spark), ``timestampType`` ``int32`` (Kafka's ``TimestampType.id``), and ``headers``
``list<struct<key: string, value: binary>>``, null for a record without headers (Spark's
``KafkaRecordToRowConverter``).
"""

from __future__ import annotations

import sys
from typing import Any

import pyarrow as pa

from spark_kafkalite.protocol.native import RECORD_DECODE, load_twin
from spark_kafkalite.protocol.record_batch import (
    BatchHeader,
    Buffer,
    read_header,
    records_section,
    validate_batch,
)

__all__ = ["new_builder", "append_batch", "to_arrow_arrays", "HEADERS_ARROW_TYPE"]

HEADERS_ARROW_TYPE = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string(), True), pa.field("value", pa.binary(), True)]))
)
"""Arrow type of the ``headers`` column (``array<struct<key:string,value:binary>>``; the list item
is named ``element`` as in pyspark's ``to_arrow_schema``)."""

_TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
_decode = load_twin(RECORD_DECODE)

if sys.byteorder != "little":  # pragma: no cover - Arrow buffers are written in native order
    raise ImportError("spark_kafkalite.protocol.record_columns needs a little-endian machine")


def new_builder(include_headers: bool = False) -> Any:
    """An empty column builder (native when built)."""
    return _decode.ColumnBuilder(include_headers)


def append_batch(
    builder: Any,
    buf: Buffer,
    pos: int,
    header: BatchHeader | None = None,
    *,
    verify_crc: bool = True,
    min_offset: int = -1,
    max_records: int = 2**62,
) -> int:
    """Append the records of the batch at ``pos`` with offset ``>= min_offset`` (at most
    ``max_records``) to ``builder``; control batches append nothing. Returns the number appended.

    Raises:
        CorruptRecordError / InvalidRecordError: see ``validate_batch``; a malformed record.
        UnsupportedCompressionTypeError: the batch's codec library is missing.
    """
    if verify_crc:
        header = validate_batch(buf, pos, strict_counts=False)
    elif header is None:
        header = read_header(buf, pos)
    if header.is_control:
        return 0
    data, start, end = records_section(buf, pos, header)
    ttype = header.timestamp_type
    return int(
        builder.append(
            data,
            start,
            end,
            header.records_count,
            header.base_offset,
            header.base_timestamp,
            header.max_timestamp,
            ttype == 1,
            ttype,
            min_offset,
            max_records,
        )
    )


def _binary(parts: tuple[Any, Any, Any, int], n: int, arrow_type: pa.DataType) -> pa.Array:
    offsets, valid, data, nulls = parts
    validity = pa.py_buffer(valid) if nulls else None
    return pa.Array.from_buffers(
        arrow_type, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls
    )


def to_arrow_arrays(buffers: dict[str, Any]) -> dict[str, pa.Array]:
    """Arrow arrays (no copy) over a builder's ``finish()`` buffers: ``key``, ``value``,
    ``offset``, ``timestamp``, ``timestampType`` and, when built with headers, ``headers``."""
    n = buffers["num_rows"]
    out = {
        "key": _binary(buffers["key"], n, pa.binary()),
        "value": _binary(buffers["value"], n, pa.binary()),
        "offset": pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(buffers["offset"])]),
        "timestamp": pa.Array.from_buffers(_TIMESTAMP_TYPE, n, [None, pa.py_buffer(buffers["timestamp_us"])]),
        "timestampType": pa.Array.from_buffers(
            pa.int32(), n, [None, pa.py_buffer(buffers["timestamp_type"])]
        ),
    }
    if "headers" in buffers:
        list_off, list_valid, list_nulls, nh, hk_off, hk_data, hv_off, hv_valid, hv_data, hv_nulls = buffers[
            "headers"
        ]
        keys = _binary((hk_off, b"", hk_data, 0), nh, pa.string())
        values = _binary((hv_off, hv_valid, hv_data, hv_nulls), nh, pa.binary())
        struct_type = HEADERS_ARROW_TYPE.value_type
        structs = pa.Array.from_buffers(struct_type, nh, [None], children=[keys, values])
        out["headers"] = pa.Array.from_buffers(
            HEADERS_ARROW_TYPE,
            n,
            [pa.py_buffer(list_valid) if list_nulls else None, pa.py_buffer(list_off)],
            null_count=list_nulls,
            children=[structs],
        )
    return out
