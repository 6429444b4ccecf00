# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# cython: binding=True, embedsignature=True, embedsignature.format=python
"""Compiled rebuilding of a records section with fresh offsets and timestamp deltas: the twin of
:mod:`spark_kafkalite.protocol.record_rebuild` (the pure-Python reference; same API, bytes and
errors, one test corpus). See that module for Kafka's rule (``LogValidator
.buildRecordsAndAssignOffsets``, ``DefaultRecord.writeTo``).

Two passes over the section, in C: the first checks every record's framing and sums the size of
the rebuilt records, the second writes them into one ``bytes`` of exactly that size. Sections of
more than ``_NOGIL_BYTES`` run without the GIL (the broker rebuilds large batches on its request
workers while the event loop goes on); smaller ones keep it, since a released GIL can cost the
calling thread a whole switch interval (5 ms) to get back when another thread holds it.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcpy

from spark_kafkalite.protocol._varint cimport VARINT_CUT, VARINT_OK, put_varint, read_varint, read_varlong, varint_size

from spark_kafkalite.protocol.errors import CorruptRecordError

__all__ = ["rebuild_records", "IMPLEMENTATION"]

IMPLEMENTATION = "native"

cdef extern from "Python.h":
    int PyObject_GetBuffer(object obj, Py_buffer *view, int flags) except -1
    void PyBuffer_Release(Py_buffer *view)
    int PyBUF_SIMPLE

cdef Py_ssize_t _NOGIL_BYTES = 256 * 1024

# error codes of the nogil passes (raised as CorruptRecordError with the GIL)
cdef enum:
    OK = 0
    E_MISSING = 1     # fewer records than declared
    E_LENGTH_CUT = 2  # the data ends inside a record length
    E_VARINT = 3      # a varint too long
    E_BAD_LENGTH = 4  # a record length <= 0
    E_CUT = 5         # the data (or the record) ends inside a record
    E_NEG_FIELD = 6   # a byte field length < -1
    E_NEG_HEADERS = 7 # a negative header count
    E_SIZE = 8        # the fields end before the record's length
    E_TRAILING = 9    # bytes after the last declared record


cdef struct Scan:
    int error
    Py_ssize_t n          # the record at fault
    int64_t value         # its offending length / count
    const char* what      # the field at fault
    Py_ssize_t p          # the position reached
    int64_t first_ts
    int64_t max_ts
    Py_ssize_t out_size


cdef inline int _varlong(const uint8_t* d, Py_ssize_t* p, Py_ssize_t limit, int64_t* out) noexcept nogil:
    cdef int err = read_varlong(d, p, limit, out)
    return OK if err == VARINT_OK else E_CUT if err == VARINT_CUT else E_VARINT


cdef inline int _length(const uint8_t* d, Py_ssize_t* p, Py_ssize_t limit, int64_t* out) noexcept nogil:
    # a record length: a 32-bit zig-zag varint (at most 5 bytes, Kafka's ByteUtils.readVarint)
    cdef int err = read_varint(d, p, limit, out)
    return OK if err == VARINT_OK else E_LENGTH_CUT if err == VARINT_CUT else E_VARINT


cdef inline int _skip_field(const uint8_t* d, Py_ssize_t* p, Py_ssize_t limit, Scan* s,
                            const char* what) noexcept nogil:
    cdef int64_t n
    cdef int err = _varlong(d, p, limit, &n)
    if err:
        return err
    if n < -1:
        s.value = n
        s.what = what
        return E_NEG_FIELD
    if n > 0:
        if n > limit - p[0]:
            return E_CUT
        p[0] += <Py_ssize_t>n
    return OK


cdef int _pass(const uint8_t* d, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count, int64_t base_ts,
               int64_t max_ts, bint log_append, uint8_t* out, Scan* s) noexcept nogil:
    """One pass: check the records and sum their rebuilt size (``out`` NULL), or write them."""
    cdef Py_ssize_t p = start, n, rec_end, tail
    cdef int64_t length, ts_delta, offset_delta, headers, h, ts, delta
    cdef Py_ssize_t body
    cdef int err
    s.first_ts = -1
    s.max_ts = -1
    s.out_size = 0
    for n in range(count):
        s.n = n
        if p >= end:
            s.p = p
            return E_MISSING
        err = _length(d, &p, end, &length)
        if err:
            return err
        if length <= 0:
            s.value = length
            return E_BAD_LENGTH
        if length > end - p:
            return E_CUT
        rec_end = p + <Py_ssize_t>length
        p += 1  # attributes (unused in v2)
        err = _varlong(d, &p, rec_end, &ts_delta)
        if err:
            return err
        err = _varlong(d, &p, rec_end, &offset_delta)
        if err:
            return err
        tail = p
        err = _skip_field(d, &p, rec_end, s, "key")
        if err:
            return err
        err = _skip_field(d, &p, rec_end, s, "value")
        if err:
            return err
        err = _varlong(d, &p, rec_end, &headers)
        if err:
            return err
        if headers < 0:
            s.value = headers
            return E_NEG_HEADERS
        h = 0
        while h < headers:
            err = _skip_field(d, &p, rec_end, s, "header key")
            if err:
                return err
            err = _skip_field(d, &p, rec_end, s, "header value")
            if err:
                return err
            h += 1
        if p != rec_end:
            s.value = length
            s.p = rec_end - p
            return E_SIZE
        ts = max_ts if log_append else <int64_t>(<uint64_t>base_ts + <uint64_t>ts_delta)
        if n == 0:
            s.first_ts = ts
        if ts > s.max_ts:
            s.max_ts = ts
        delta = <int64_t>(<uint64_t>ts - <uint64_t>s.first_ts)
        body = 1 + varint_size(delta) + varint_size(n) + (rec_end - tail)
        if out == NULL:
            s.out_size += varint_size(body) + body
        else:
            out = put_varint(out, body)
            out[0] = 0
            out = put_varint(out + 1, delta)
            out = put_varint(out, n)
            memcpy(out, d + tail, rec_end - tail)
            out += rec_end - tail
    if p != end:
        s.p = end - p
        return E_TRAILING
    return OK


cdef _raise(int err, Scan* s, Py_ssize_t count):
    if err == E_MISSING:
        raise CorruptRecordError(f"record batch holds {s.n} records, its header declares {count}")
    if err == E_LENGTH_CUT:
        raise CorruptRecordError("record batch ends inside a record length")
    if err == E_VARINT:
        raise CorruptRecordError("varint too long in record")
    if err == E_BAD_LENGTH:
        raise CorruptRecordError(f"record {s.n} has invalid length {s.value}")
    if err == E_CUT:
        raise CorruptRecordError("record batch ends inside a record")
    if err == E_NEG_FIELD:
        raise CorruptRecordError(f"negative {s.what.decode()} length {s.value} in record")
    if err == E_NEG_HEADERS:
        raise CorruptRecordError(f"negative header count {s.value} in record")
    if err == E_SIZE:
        raise CorruptRecordError(f"record {s.n} has length {s.value} but its fields end {s.p} bytes earlier")
    raise CorruptRecordError(f"record batch has {s.p} trailing bytes after its {count} records")


def rebuild_records(data, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count, int64_t base_ts,
                    int64_t max_ts, bint log_append):
    """Rebuild the ``count`` records of ``data[start:end]`` as Kafka's leader writes them when it
    rebuilds a batch (record ``i``: attributes 0, offset delta ``i``, timestamp delta from the
    first record's; key, value and headers copied). Returns ``(records section, first record's
    timestamp, max timestamp)`` (ms; the max is -1 when no timestamp is above -1).

    Raises:
        CorruptRecordError: see :func:`spark_kafkalite.protocol.record_rebuild.rebuild_records`.
    """
    cdef Py_buffer view
    cdef Scan s
    cdef int err
    cdef bytes out
    cdef uint8_t* dst
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    cdef const uint8_t* d = <const uint8_t*>view.buf
    cdef bint release = end - start > _NOGIL_BYTES
    try:
        if end > view.len or start < 0 or start > end:
            raise CorruptRecordError("record batch is truncated")
        if release:
            with nogil:
                err = _pass(d, start, end, count, base_ts, max_ts, log_append, NULL, &s)
        else:
            err = _pass(d, start, end, count, base_ts, max_ts, log_append, NULL, &s)
        if err:
            _raise(err, &s, count)
        out = PyBytes_FromStringAndSize(NULL, s.out_size)
        dst = <uint8_t*>PyBytes_AS_STRING(out)
        if release:
            with nogil:
                _pass(d, start, end, count, base_ts, max_ts, log_append, dst, &s)
        else:
            _pass(d, start, end, count, base_ts, max_ts, log_append, dst, &s)
        return out, s.first_ts, s.max_ts
    finally:
        PyBuffer_Release(&view)
