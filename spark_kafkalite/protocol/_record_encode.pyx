# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# cython: binding=True, embedsignature=True, embedsignature.format=python
"""Compiled record encoding: the hot-path twin of ``record_encode.py`` (same API and bytes; see
that module for the semantics). Records are varint-encoded straight into a growable C buffer;
Arrow columns are read through their buffers (validity bitmap, int32 offsets, data) without a
Python object per row. The row loops keep the GIL: one builder's worth of rows (``batch.size``)
takes tens of microseconds, and releasing the GIL for that lets the producer's Sender thread take
it for a whole switch interval (5 ms) before this thread gets it back. Kafka layout: KIP-98 RecordBatch v2
(``DefaultRecordBatch`` / ``DefaultRecord``); hash: Kafka ``Utils.murmur2``."""

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE

from spark_kafkalite.protocol._varint cimport put_varint, varint_size

from crc32c import crc32c as _crc32c

from spark_kafkalite.protocol import record_layout as _layout
from spark_kafkalite.protocol.record_layout import batch_attributes as _batch_attributes
from spark_kafkalite.protocol.record_batch import compress
from spark_kafkalite.protocol.record_encode import RecordTooLargeError

__all__ = [
    "MemoryRecordsBuilder",
    "RecordTooLargeError",
    "ArrowRecordColumns",
    "encode_rows",
    "murmur2",
    "key_hashes",
    "IMPLEMENTATION",
]

IMPLEMENTATION = "native"

# the batch layout (record_layout, the one definition) as C variables
cdef Py_ssize_t RECORD_BATCH_OVERHEAD = _layout.RECORD_BATCH_OVERHEAD
cdef Py_ssize_t LOG_OVERHEAD = _layout.LOG_OVERHEAD
cdef Py_ssize_t MAX_RECORD_OVERHEAD = _layout.MAX_RECORD_OVERHEAD
cdef Py_ssize_t LENGTH_OFFSET = _layout.LENGTH_OFFSET
cdef Py_ssize_t PARTITION_LEADER_EPOCH_OFFSET = _layout.PARTITION_LEADER_EPOCH_OFFSET
cdef Py_ssize_t MAGIC_OFFSET = _layout.MAGIC_OFFSET
cdef Py_ssize_t CRC_OFFSET = _layout.CRC_OFFSET
cdef Py_ssize_t ATTRIBUTES_OFFSET = _layout.ATTRIBUTES_OFFSET
cdef Py_ssize_t LAST_OFFSET_DELTA_OFFSET = _layout.LAST_OFFSET_DELTA_OFFSET
cdef Py_ssize_t BASE_TIMESTAMP_OFFSET = _layout.BASE_TIMESTAMP_OFFSET
cdef Py_ssize_t MAX_TIMESTAMP_OFFSET = _layout.MAX_TIMESTAMP_OFFSET
cdef Py_ssize_t PRODUCER_ID_OFFSET = _layout.PRODUCER_ID_OFFSET
cdef Py_ssize_t PRODUCER_EPOCH_OFFSET = _layout.PRODUCER_EPOCH_OFFSET
cdef Py_ssize_t BASE_SEQUENCE_OFFSET = _layout.BASE_SEQUENCE_OFFSET
cdef Py_ssize_t RECORDS_COUNT_OFFSET = _layout.RECORDS_COUNT_OFFSET
cdef uint8_t MAGIC_V2 = _layout.MAGIC_V2


cdef inline uint8_t* put_bytes(uint8_t* p, const uint8_t* src, Py_ssize_t n) noexcept nogil:
    # a null field is length -1 (zig-zag 1); ``src`` NULL with n < 0 means null
    if n < 0:
        p[0] = 1
        return p + 1
    p = put_varint(p, n)
    if n:
        memcpy(p, src, n)
    return p + n


cdef inline Py_ssize_t field_size(Py_ssize_t n) noexcept nogil:
    return 1 if n < 0 else varint_size(n) + n


# ---------------------------------------------------------------------------------------------
# the builder


cdef class MemoryRecordsBuilder:
    """An open RecordBatch v2 (Java ``MemoryRecordsBuilder``); see ``record_encode``."""

    cdef uint8_t* buf
    cdef Py_ssize_t size
    cdef Py_ssize_t cap
    cdef Py_ssize_t count
    cdef int64_t base_ts
    cdef int64_t max_ts

    def __cinit__(self):
        self.buf = NULL
        self.size = 0
        self.cap = 0
        self.count = 0
        self.base_ts = -1
        self.max_ts = -1

    def __dealloc__(self):
        if self.buf != NULL:
            free(self.buf)

    cdef int reserve(self, Py_ssize_t extra) except -1 nogil:
        cdef Py_ssize_t need = self.size + extra
        cdef Py_ssize_t cap
        cdef uint8_t* grown
        if need <= self.cap:
            return 0
        cap = self.cap * 2 if self.cap else 4096
        while cap < need:
            cap *= 2
        grown = <uint8_t*>realloc(self.buf, cap)
        if grown == NULL:
            with gil:
                raise MemoryError()
        self.buf = grown
        self.cap = cap
        return 0

    @property
    def record_count(self):
        return self.count

    @property
    def size_bytes(self):
        return self.size

    @property
    def base_timestamp(self):
        return self.base_ts

    @property
    def max_timestamp(self):
        return self.max_ts

    def append(self, key, value, int64_t timestamp_ms, headers=None):
        """Encode one record at the end of the batch; returns its encoded size in bytes."""
        return self._append(key, value, timestamp_ms, headers)

    def append_now(self, key, value, headers=None):
        """Encode one record stamped with the current wall-clock time (Java's
        ``System.currentTimeMillis()`` CreateTime, read here from ``CLOCK_REALTIME`` instead of a
        Python ``time.time()`` call per record); returns that timestamp in ms."""
        cdef timespec now
        clock_gettime(CLOCK_REALTIME, &now)
        cdef int64_t timestamp_ms = <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000
        self._append(key, value, timestamp_ms, headers)
        return timestamp_ms

    cdef Py_ssize_t _append(self, key, value, int64_t timestamp_ms, headers) except -1:
        cdef const uint8_t* kp = NULL
        cdef const uint8_t* vp = NULL
        cdef Py_ssize_t kn = -1, vn = -1, body, total, i, hcount = 0
        cdef uint8_t* p
        cdef list hitems = None
        cdef object hk, hv
        if key is not None:
            if type(key) is not bytes:
                key = bytes(key)
            kp = <const uint8_t*>PyBytes_AS_STRING(key)
            kn = PyBytes_GET_SIZE(key)
        if value is not None:
            if type(value) is not bytes:
                value = bytes(value)
            vp = <const uint8_t*>PyBytes_AS_STRING(value)
            vn = PyBytes_GET_SIZE(value)
        if self.count == 0:
            self.base_ts = timestamp_ms
            self.max_ts = timestamp_ms
        body = 1 + varint_size(timestamp_ms - self.base_ts) + varint_size(self.count) + field_size(kn) + field_size(vn)
        if headers:
            hitems = []
            for hk, hv in headers:
                if not isinstance(hk, str):
                    raise TypeError(f"header keys must be str, not {type(hk).__name__}")
                hk = (<str>hk).encode("utf-8")
                if hv is not None and type(hv) is not bytes:
                    if isinstance(hv, str):
                        hv = (<str>hv).encode("utf-8")
                    elif isinstance(hv, (bytearray, memoryview)):
                        hv = bytes(hv)
                    else:
                        raise TypeError(f"header value must be bytes, str or None, not {type(hv).__name__}")
                hitems.append(hk)
                hitems.append(hv)
                body += field_size(PyBytes_GET_SIZE(hk)) + (1 if hv is None else field_size(PyBytes_GET_SIZE(hv)))
            hcount = len(hitems) // 2
        body += varint_size(hcount)
        total = varint_size(body) + body
        self.reserve(total)
        if timestamp_ms > self.max_ts:
            self.max_ts = timestamp_ms
        p = self.buf + self.size
        p = put_varint(p, body)
        p[0] = 0  # attributes
        p = put_varint(p + 1, timestamp_ms - self.base_ts)
        p = put_varint(p, self.count)
        p = put_bytes(p, kp, kn)
        p = put_bytes(p, vp, vn)
        p = put_varint(p, hcount)
        for i in range(hcount):
            hk = hitems[2 * i]
            hv = hitems[2 * i + 1]
            p = put_bytes(p, <const uint8_t*>PyBytes_AS_STRING(hk), PyBytes_GET_SIZE(hk))
            if hv is None:
                p = put_bytes(p, NULL, -1)
            else:
                p = put_bytes(p, <const uint8_t*>PyBytes_AS_STRING(hv), PyBytes_GET_SIZE(hv))
        self.size += total
        self.count += 1
        return total

    cdef bytes _records_bytes(self):
        # the records section encoded so far (uncompressed)
        return PyBytes_FromStringAndSize(<char*>self.buf, self.size) if self.size else b""

    def build(
        self,
        *,
        int64_t producer_id=-1,
        int producer_epoch=-1,
        int base_sequence=-1,
        int compression_type=0,
        int timestamp_type=0,
        bint is_transactional=False,
        int partition_leader_epoch=-1,
    ):
        """The RecordBatch v2 bytes (baseOffset 0) of the records appended so far, written in one
        allocation: header, records (compressed by ``record_batch.compress`` when a codec is
        given) and the CRC-32C over attributes..end (Kafka ``DefaultRecordBatch``; ``record_layout``)."""
        cdef object payload
        cdef const uint8_t* src
        cdef Py_ssize_t n, total
        cdef uint8_t* out
        cdef int16_t attributes
        if self.count == 0:
            raise ValueError("a record batch needs at least one record")
        if compression_type:
            payload = compress(self._records_bytes(), compression_type)
            src = <const uint8_t*>PyBytes_AS_STRING(payload)
            n = PyBytes_GET_SIZE(payload)
        else:
            src = self.buf
            n = self.size
        total = RECORD_BATCH_OVERHEAD + n
        result = PyBytes_FromStringAndSize(NULL, total)
        out = <uint8_t*>PyBytes_AS_STRING(result)
        attributes = _batch_attributes(compression_type, timestamp_type, is_transactional)
        put_be64(out, 0)  # baseOffset
        put_be32(out + LENGTH_OFFSET, <uint32_t>(total - LOG_OVERHEAD))
        put_be32(out + PARTITION_LEADER_EPOCH_OFFSET, <uint32_t>partition_leader_epoch)
        out[MAGIC_OFFSET] = MAGIC_V2
        put_be16(out + ATTRIBUTES_OFFSET, <uint16_t>attributes)
        put_be32(out + LAST_OFFSET_DELTA_OFFSET, <uint32_t>(self.count - 1))
        put_be64(out + BASE_TIMESTAMP_OFFSET, <uint64_t>self.base_ts)
        put_be64(out + MAX_TIMESTAMP_OFFSET, <uint64_t>self.max_ts)
        put_be64(out + PRODUCER_ID_OFFSET, <uint64_t>producer_id)
        put_be16(out + PRODUCER_EPOCH_OFFSET, <uint16_t>producer_epoch)
        put_be32(out + BASE_SEQUENCE_OFFSET, <uint32_t>base_sequence)
        put_be32(out + RECORDS_COUNT_OFFSET, <uint32_t>self.count)
        if n:
            memcpy(out + RECORD_BATCH_OVERHEAD, src, n)
        put_be32(out + CRC_OFFSET, <uint32_t>_crc32c(memoryview(result)[ATTRIBUTES_OFFSET:]))
        return result


cdef inline void put_be16(uint8_t* p, uint16_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v


cdef inline void put_be32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v


cdef inline void put_be64(uint8_t* p, uint64_t v) noexcept nogil:
    put_be32(p, <uint32_t>(v >> 32))
    put_be32(p + 4, <uint32_t>v)


# ---------------------------------------------------------------------------------------------
# murmur2


cdef inline int32_t murmur2_c(const uint8_t* data, Py_ssize_t length) noexcept nogil:
    # Kafka's multiplier and seed as C literals: read from record_encode into C variables they cost
    # 5 % of key_hashes; both twins answer Kafka's murmur2 test vectors (test_record_encode)
    cdef uint32_t m = 0x5BD1E995U
    cdef uint32_t h = 0x9747B28CU ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t i, n4 = length // 4, base
    for i in range(n4):
        base = i * 4
        k = (<uint32_t>data[base]) | (<uint32_t>data[base + 1] << 8) | (<uint32_t>data[base + 2] << 16) | (
            <uint32_t>data[base + 3] << 24
        )
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
    base = n4 * 4
    cdef Py_ssize_t tail = length & 3
    if tail == 3:
        h ^= (<uint32_t>data[base + 2]) << 16
    if tail >= 2:
        h ^= (<uint32_t>data[base + 1]) << 8
    if tail >= 1:
        h ^= data[base]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return <int32_t>h


def murmur2(data):
    """Kafka's ``Utils.murmur2``: the 32-bit MurmurHash2 of ``data`` as a signed Java int."""
    if type(data) is not bytes:
        data = bytes(data)
    return murmur2_c(<const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


# ---------------------------------------------------------------------------------------------
# Arrow columns


cdef struct BinCol:
    const uint8_t* valid  # NULL: no nulls
    const int32_t* offsets
    const uint8_t* data
    Py_ssize_t base  # the array's offset
    bint present


cdef inline bint bit_set(const uint8_t* bitmap, Py_ssize_t i) noexcept nogil:
    return (bitmap[i >> 3] >> (i & 7)) & 1


cdef inline Py_ssize_t bin_get(BinCol* col, Py_ssize_t row, const uint8_t** out) noexcept nogil:
    """Length of ``row`` (-1 = null) and its bytes in ``out``."""
    cdef Py_ssize_t j
    if not col.present:
        out[0] = NULL
        return -1
    j = col.base + row
    if col.valid != NULL and not bit_set(col.valid, j):
        out[0] = NULL
        return -1
    out[0] = col.data + col.offsets[j]
    return col.offsets[j + 1] - col.offsets[j]


cdef const uint8_t* buffer_ptr(object buf, list keep):
    cdef const uint8_t[:] view
    if buf is None or buf.size == 0:
        return NULL
    view = memoryview(buf).cast("B")
    keep.append(buf)
    return &view[0]


cdef object as_binary(object arr):
    import pyarrow as pa

    t = arr.type
    if pa.types.is_string(t):
        return arr.view(pa.binary())
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return arr.cast(pa.binary())
    if pa.types.is_binary(t):
        return arr
    raise TypeError(f"expected a binary or string column, got {t}")


cdef int bin_init(BinCol* col, object arr, list keep) except -1:
    if arr is None:
        col.present = False
        return 0
    arr = as_binary(arr)
    bufs = arr.buffers()
    col.present = True
    col.base = arr.offset
    col.valid = buffer_ptr(bufs[0], keep) if arr.null_count else NULL
    col.offsets = <const int32_t*>buffer_ptr(bufs[1], keep)
    col.data = buffer_ptr(bufs[2], keep)
    if col.offsets == NULL:  # an empty array
        col.present = len(arr) > 0
    keep.append(arr)
    return 0


cdef class ArrowRecordColumns:
    """The sink columns of one Arrow batch (see ``record_encode.ArrowRecordColumns``)."""

    cdef BinCol values
    cdef BinCol keys
    cdef BinCol hkeys
    cdef BinCol hvalues
    cdef const int64_t* ts
    cdef const uint8_t* ts_valid
    cdef Py_ssize_t ts_base
    cdef const int32_t* h_offsets  # list offsets (absolute into the flattened struct), or NULL
    cdef const uint8_t* h_valid
    cdef Py_ssize_t h_base
    cdef readonly Py_ssize_t num_rows
    cdef readonly int64_t default_timestamp_ms
    cdef list keep

    def __init__(self, values, keys=None, timestamps_us=None, headers=None, int64_t default_timestamp_ms=0):
        """Reads the columns' buffers (kept alive by the instance); see ``record_encode``."""
        import pyarrow as pa

        self.keep = []
        self.num_rows = len(values)
        self.default_timestamp_ms = default_timestamp_ms
        bin_init(&self.values, values, self.keep)
        bin_init(&self.keys, keys, self.keep)
        self.ts = NULL
        self.ts_valid = NULL
        if timestamps_us is not None and len(timestamps_us):
            ints = timestamps_us.cast(pa.int64())
            bufs = ints.buffers()
            self.ts_base = ints.offset
            self.ts = <const int64_t*>buffer_ptr(bufs[1], self.keep)
            self.ts_valid = buffer_ptr(bufs[0], self.keep) if ints.null_count else NULL
            self.keep.append(ints)
        self.h_offsets = NULL
        self.h_valid = NULL
        self.hkeys.present = False
        self.hvalues.present = False
        if headers is not None and len(headers):
            bufs = headers.buffers()
            self.h_base = headers.offset
            self.h_valid = buffer_ptr(bufs[0], self.keep) if headers.null_count else NULL
            self.h_offsets = <const int32_t*>buffer_ptr(bufs[1], self.keep)
            self.keep.append(headers)
            hkeys, hvalues = headers.values.flatten()
            if hkeys.null_count:
                raise ValueError("header key is null in the headers column")
            bin_init(&self.hkeys, hkeys, self.keep)
            bin_init(&self.hvalues, hvalues, self.keep)

    cdef inline int64_t timestamp_of(self, Py_ssize_t row) noexcept nogil:
        cdef Py_ssize_t j
        cdef int64_t us
        if self.ts == NULL:
            return self.default_timestamp_ms
        j = self.ts_base + row
        if self.ts_valid != NULL and not bit_set(self.ts_valid, j):
            return self.default_timestamp_ms
        us = self.ts[j]
        return us // 1000 if us >= 0 or us % 1000 == 0 else us // 1000 - 1  # floor

    cdef inline void header_range(self, Py_ssize_t row, Py_ssize_t* start, Py_ssize_t* end) noexcept nogil:
        cdef Py_ssize_t j
        if self.h_offsets == NULL:
            start[0] = 0
            end[0] = 0
            return
        j = self.h_base + row
        if self.h_valid != NULL and not bit_set(self.h_valid, j):
            start[0] = 0
            end[0] = 0
            return
        start[0] = self.h_offsets[j]
        end[0] = self.h_offsets[j + 1]

    cdef inline Py_ssize_t headers_size(self, Py_ssize_t row) noexcept nogil:
        cdef Py_ssize_t s, e, h, size, n
        cdef const uint8_t* p
        self.header_range(row, &s, &e)
        size = varint_size(e - s)
        for h in range(s, e):
            size += field_size(bin_get(&self.hkeys, h, &p))
            size += field_size(bin_get(&self.hvalues, h, &p))
        return size

    cdef inline uint8_t* put_headers(self, uint8_t* out, Py_ssize_t row) noexcept nogil:
        cdef Py_ssize_t s, e, h, n
        cdef const uint8_t* p
        self.header_range(row, &s, &e)
        out = put_varint(out, e - s)
        for h in range(s, e):
            n = bin_get(&self.hkeys, h, &p)
            out = put_bytes(out, p, n)
            n = bin_get(&self.hvalues, h, &p)
            out = put_bytes(out, p, n)
        return out

    def record_size(self, Py_ssize_t row):
        """Upper bound of the bytes that ``row`` adds to a batch (its payload plus framing)."""
        cdef const uint8_t* p
        cdef Py_ssize_t kn = bin_get(&self.keys, row, &p)
        cdef Py_ssize_t vn = bin_get(&self.values, row, &p)
        return MAX_RECORD_OVERHEAD + (kn if kn > 0 else 0) + (vn if vn > 0 else 0) + (self.headers_size(row) - 1)


cdef Py_ssize_t fill(
    MemoryRecordsBuilder b,
    ArrowRecordColumns cols,
    const int64_t* rows,
    Py_ssize_t start,
    Py_ssize_t n,
    Py_ssize_t limit,
    Py_ssize_t max_record,
    Py_ssize_t* too_large,
) except? -2 nogil:
    """Append rows[start:n] to ``b`` while the records section stays within ``limit`` (the first
    record always goes in). Returns the index of the first row not appended; sets ``too_large``
    to the row's encoded size and returns -1 - index when a record exceeds ``max_record``."""
    cdef Py_ssize_t i, row, kn, vn, body, total
    cdef const uint8_t* kp
    cdef const uint8_t* vp
    cdef int64_t ts
    cdef uint8_t* p
    for i in range(start, n):
        row = rows[i]
        kn = bin_get(&cols.keys, row, &kp)
        vn = bin_get(&cols.values, row, &vp)
        ts = cols.timestamp_of(row)
        if b.count == 0:
            b.base_ts = ts
            b.max_ts = ts
        body = 1 + varint_size(ts - b.base_ts) + varint_size(b.count) + field_size(kn) + field_size(vn)
        body += cols.headers_size(row)
        total = varint_size(body) + body
        if total + RECORD_BATCH_OVERHEAD > max_record:
            too_large[0] = total + RECORD_BATCH_OVERHEAD
            return -1 - i
        if b.count and b.size + total > limit:
            return i
        b.reserve(total)
        if ts > b.max_ts:
            b.max_ts = ts
        p = b.buf + b.size
        p = put_varint(p, body)
        p[0] = 0
        p = put_varint(p + 1, ts - b.base_ts)
        p = put_varint(p, b.count)
        p = put_bytes(p, kp, kn)
        p = put_bytes(p, vp, vn)
        cols.put_headers(p, row)
        b.size += total
        b.count += 1
    return n


def encode_rows(
    ArrowRecordColumns columns,
    rows,
    Py_ssize_t max_batch_bytes,
    Py_ssize_t max_record_bytes,
    MemoryRecordsBuilder builder=None,
):
    """Encode ``rows`` (int64 indices into ``columns``, in order) into builders whose records
    section stays within ``max_batch_bytes`` - 61, continuing ``builder`` when given (see
    ``record_encode.encode_rows``).

    Raises:
        RecordTooLargeError: a record is larger than ``max_record_bytes``.
    """
    import numpy as np

    cdef const int64_t[:] idx = np.ascontiguousarray(rows, dtype=np.int64)
    cdef Py_ssize_t n = idx.shape[0], pos = 0, nxt, too_large = 0
    cdef Py_ssize_t limit = max_batch_bytes - RECORD_BATCH_OVERHEAD
    cdef list out = []
    cdef MemoryRecordsBuilder b = builder
    cdef Py_ssize_t i
    if n == 0:
        if b is not None and b.count:
            out.append(b)
        return out
    for i in range(n):
        if idx[i] < 0 or idx[i] >= columns.num_rows:
            raise IndexError(f"row {idx[i]} is outside the batch of {columns.num_rows} rows")
    while pos < n:
        if b is None:
            b = MemoryRecordsBuilder()
        nxt = fill(b, columns, &idx[0], pos, n, limit, max_record_bytes, &too_large)
        if nxt < 0:
            raise RecordTooLargeError(int(idx[-1 - nxt]), too_large, max_record_bytes)
        if b.count:
            out.append(b)
        b = None
        pos = nxt
    return out


def key_hashes(keys):
    """``toPositive(murmur2(key))`` for every key of an Arrow binary/string array (-1 = null),
    as a numpy int32 array."""
    import numpy as np

    cdef list keep = []
    cdef BinCol col
    bin_init(&col, keys, keep)
    cdef Py_ssize_t n = len(keys), i, kn
    out = np.empty(n, dtype=np.int32)
    cdef int32_t[:] o = out
    cdef const uint8_t* kp
    for i in range(n):
        kn = bin_get(&col, i, &kp)
        o[i] = -1 if kn < 0 else (murmur2_c(kp, kn) & 0x7FFFFFFF)
    return out
