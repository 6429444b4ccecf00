"""Record encoding entry point: the compiled ``_record_encode`` extension when it is built, else
its pure-Python twin ``record_encode`` (same API and bytes), through :func:`~spark_kafkalite.protocol.native.load_twin`
(``KAFKALITE_PURE_PYTHON=1`` forces the twin; a failed native import logs one warning). Client and
datasource code import the encoder from here, never from either module directly."""

from __future__ import annotations

from spark_kafkalite.protocol.native import RECORD_ENCODE, load_twin
from spark_kafkalite.protocol.record_encode import as_bytes  # pure in both: the field rule, not the codec

__all__ = [
    "MemoryRecordsBuilder",
    "RecordTooLargeError",
    "ArrowRecordColumns",
    "encode_rows",
    "murmur2",
    "key_hashes",
    "IMPLEMENTATION",
    "as_bytes",
]

_impl = load_twin(RECORD_ENCODE)

MemoryRecordsBuilder = _impl.MemoryRecordsBuilder
RecordTooLargeError = _impl.RecordTooLargeError
ArrowRecordColumns = _impl.ArrowRecordColumns
encode_rows = _impl.encode_rows
murmur2 = _impl.murmur2
key_hashes = _impl.key_hashes
IMPLEMENTATION: str = _impl.IMPLEMENTATION
