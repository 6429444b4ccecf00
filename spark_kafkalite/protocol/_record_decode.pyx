# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# cython: binding=True, embedsignature=True, embedsignature.format=python
"""Native record decoding for RecordBatch v2 (Kafka's ``DefaultRecord.readFrom``), the compiled twin
of :mod:`spark_kafkalite.protocol.record_decode` (the pure-Python reference; both expose the same
API and pass the same test corpus).

Only the records section is decoded here (already decompressed, CRC already checked per batch by
:func:`spark_kafkalite.protocol.record_batch.validate_batch`). Record layout: length varint,
attributes int8, timestampDelta varlong, offsetDelta varint, key (varint length, -1 = null), value
(same), headers count varint, then per header key (varint length + UTF-8) and value (varint
length, -1 = null). All varints are zig-zag encoded.

Two outputs: :func:`decode_records` returns Python lists (for ``KafkaConsumer.poll``'s
``ConsumerRecord`` objects) and :class:`ColumnBuilder` appends straight into Arrow column buffers
(validity bitmaps, int32 offsets, data) without a Python object per record.
"""

cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_Resize
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset

from spark_kafkalite.protocol._varint cimport VARINT_CUT, read_varlong

from spark_kafkalite.protocol.errors import CorruptRecordError

__all__ = ["decode_records", "ColumnBuilder", "walk_records"]

cdef extern from "Python.h":
    ctypedef struct PyObject
    int PyObject_GetBuffer(object obj, Py_buffer *view, int flags) except -1
    void PyBuffer_Release(Py_buffer *view)
    int PyBUF_SIMPLE
    Py_ssize_t PY_SSIZE_T_MAX


cdef struct Rec:
    Py_ssize_t end
    int64_t ts_delta
    int64_t off_delta
    Py_ssize_t key_pos
    Py_ssize_t key_len      # -1: null
    Py_ssize_t val_pos
    Py_ssize_t val_len      # -1: null
    int64_t hcount
    Py_ssize_t hpos


cdef inline int _varint(const uint8_t* d, Py_ssize_t* p, Py_ssize_t limit, int64_t* out) except -1:
    cdef int err = read_varlong(d, p, limit, out)
    if err == VARINT_CUT:
        raise CorruptRecordError("record batch ends inside a record")
    if err:
        raise CorruptRecordError("varint too long in record")
    return 0


cdef inline int _bytes_field(const uint8_t* d, Py_ssize_t* p, Py_ssize_t limit,
                             Py_ssize_t* pos, Py_ssize_t* length) except -1:
    cdef int64_t n
    _varint(d, p, limit, &n)
    if n < 0:
        if n != -1:
            raise CorruptRecordError(f"negative length {n} in record")
        pos[0] = p[0]
        length[0] = -1
        return 0
    if p[0] + n > limit:
        raise CorruptRecordError("record batch ends inside a record")
    pos[0] = p[0]
    length[0] = <Py_ssize_t>n
    p[0] += n
    return 0


cdef int _parse_record(const uint8_t* d, Py_ssize_t* p, Py_ssize_t limit, Rec* r,
                       int64_t base_offset) except -1:
    """Parse one record at ``p[0]`` (headers are walked for framing, not decoded)."""
    cdef int64_t length, hklen, i
    cdef Py_ssize_t hp, hl
    _varint(d, p, limit, &length)
    r.end = p[0] + length
    if p[0] >= limit:
        raise CorruptRecordError("record batch ends inside a record")
    p[0] += 1  # attributes
    _varint(d, p, limit, &r.ts_delta)
    _varint(d, p, limit, &r.off_delta)
    _bytes_field(d, p, limit, &r.key_pos, &r.key_len)
    _bytes_field(d, p, limit, &r.val_pos, &r.val_len)
    _varint(d, p, limit, &r.hcount)
    r.hpos = p[0]
    if r.hcount < 0:
        raise CorruptRecordError(f"negative header count {r.hcount} in record")
    for i in range(r.hcount):
        _varint(d, p, limit, &hklen)
        if hklen < 0 or p[0] + hklen > limit:
            raise CorruptRecordError(f"invalid header key length {hklen} in record")
        # header keys are UTF-8 strings (Kafka's RecordHeader.key())
        PyUnicode_DecodeUTF8(<const char*>d + p[0], hklen, NULL)
        p[0] += hklen
        _bytes_field(d, p, limit, &hp, &hl)
    if p[0] != r.end or p[0] > limit:
        raise CorruptRecordError(
            f"record at offset {base_offset + r.off_delta} has length {length} but "
            f"{length + p[0] - r.end} bytes were read"
        )
    return 0


cdef list _header_list(const uint8_t* d, const Rec* r):
    cdef list out = []
    cdef Py_ssize_t p = r.hpos
    cdef Py_ssize_t limit = r.end
    cdef int64_t i, klen
    cdef Py_ssize_t vpos, vlen
    for i in range(r.hcount):
        _varint(d, &p, limit, &klen)
        key = PyUnicode_DecodeUTF8(<const char*>d + p, klen, NULL)
        p += klen
        _bytes_field(d, &p, limit, &vpos, &vlen)
        if vlen < 0:
            out.append((key, None))
        else:
            out.append((key, PyBytes_FromStringAndSize(<const char*>d + vpos, vlen)))
    return out


def decode_records(data, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
                   int64_t base_ts, int64_t max_ts, bint log_append):
    """Decode ``count`` records of ``data[start:end]`` into five lists: offsets, timestamps (ms;
    ``max_ts`` for every record of a LogAppendTime batch), keys, values and headers (a list of
    ``(str, bytes | None)`` per record).

    Raises:
        CorruptRecordError: truncated or malformed record, trailing bytes, or a header key that is
            not UTF-8.
    """
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    cdef const uint8_t* d = <const uint8_t*>view.buf
    cdef Py_ssize_t p = start, n
    cdef Rec r
    cdef list offsets = [], timestamps = [], keys = [], values = [], headers = []
    try:
        if end > view.len:
            raise CorruptRecordError("record batch is truncated")
        for n in range(count):
            _parse_record(d, &p, end, &r, base_offset)
            offsets.append(base_offset + r.off_delta)
            timestamps.append(max_ts if log_append else base_ts + r.ts_delta)
            keys.append(None if r.key_len < 0 else PyBytes_FromStringAndSize(<const char*>d + r.key_pos, r.key_len))
            values.append(None if r.val_len < 0 else PyBytes_FromStringAndSize(<const char*>d + r.val_pos, r.val_len))
            headers.append(_header_list(d, &r) if r.hcount else [])
        if p != end:
            raise CorruptRecordError(f"record batch has {end - p} trailing bytes after its records")
    except UnicodeDecodeError as exc:
        raise CorruptRecordError("record header key is not valid UTF-8") from exc
    finally:
        PyBuffer_Release(&view)
    return offsets, timestamps, keys, values, headers


def walk_records(data, Py_ssize_t p, Py_ssize_t limit, Py_ssize_t count, Py_ssize_t n=0):
    """Skip over records by their length varints from ``p`` to ``limit`` (the broker's framing
    check of a produced batch, Kafka's ``LogValidator`` record iteration): returns (records seen,
    position after the last one), stopping after ``count`` records.

    Raises:
        IndexError: a length varint runs past the end of ``data`` (a chunk boundary for the
            streaming walker).
        CorruptRecordError: a record length <= 0 or a length varint longer than 5 bytes.
    """
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    cdef const uint8_t* d = <const uint8_t*>view.buf
    cdef Py_ssize_t size = view.len
    cdef uint64_t result
    cdef int shift
    cdef uint8_t b
    cdef int64_t length
    try:
        while p < limit and n < count:
            result = 0
            shift = 0
            while True:
                if p >= size or p < 0:
                    raise IndexError("record length varint runs past the end of the data")
                b = d[p]
                p += 1
                result |= (<uint64_t>(b & 0x7F)) << shift
                if b < 0x80:
                    break
                shift += 7
                if shift > 28:  # a varint (Kafka's ByteUtils.readVarint): at most 5 bytes
                    raise CorruptRecordError("varint too long in record")
            result &= 0xFFFFFFFF  # 32 bits, as Java's int
            length = <int64_t>(result >> 1) ^ -(<int64_t>(result & 1))
            if length <= 0:
                raise CorruptRecordError(f"record {n} has invalid length {length}")
            if length > <int64_t>(PY_SSIZE_T_MAX - p):
                p = PY_SSIZE_T_MAX  # saturate: the caller sees the record run past its limit
            else:
                p += <Py_ssize_t>length
            n += 1
    finally:
        PyBuffer_Release(&view)
    return n, p


# ---------------------------------------------------------------------------------------------
# Arrow column buffers


@cython.final
cdef class _Buf:
    """A growable byte buffer backed by a bytearray (handed to Arrow without a copy). Final, so
    that its per-record methods are direct (inlined) calls, not virtual ones."""
    cdef bytearray data
    cdef Py_ssize_t length
    cdef Py_ssize_t capacity

    def __cinit__(self):
        self.data = bytearray(64)
        self.length = 0
        self.capacity = 64

    cdef inline char* reserve(self, Py_ssize_t extra) except NULL:
        cdef Py_ssize_t need = self.length + extra
        cdef Py_ssize_t cap = self.capacity
        if need > cap:
            while cap < need:
                cap *= 2
            PyByteArray_Resize(self.data, cap)
            self.capacity = cap
        return PyByteArray_AS_STRING(self.data) + self.length

    cdef inline int append(self, const void* src, Py_ssize_t n) except -1:
        cdef char* dst = self.reserve(n)
        memcpy(dst, src, n)
        self.length += n
        return 0

    cdef inline int append_i64(self, int64_t v) except -1:
        return self.append(&v, 8)

    cdef inline int append_i32(self, int32_t v) except -1:
        return self.append(&v, 4)

    cdef inline int set_bit(self, Py_ssize_t i, bint valid) except -1:
        cdef Py_ssize_t byte = i >> 3
        cdef char* base
        if byte >= self.length:
            base = self.reserve(byte + 1 - self.length)
            while self.length <= byte:
                PyByteArray_AS_STRING(self.data)[self.length] = 0
                self.length += 1
        base = PyByteArray_AS_STRING(self.data)
        if valid:
            base[byte] = base[byte] | (1 << (i & 7))
        else:
            base[byte] = base[byte] & ~(1 << (i & 7))
        return 0

    cdef int fill_valid(self, Py_ssize_t n) except -1:
        """Make this bitmap hold ``n`` valid bits (bits from ``n`` on are set as rows come)."""
        cdef Py_ssize_t nbytes = (n + 7) >> 3
        self.length = 0
        memset(self.reserve(nbytes), 0xFF, nbytes)
        self.length = nbytes
        return 0

    cdef bytearray finish(self):
        PyByteArray_Resize(self.data, self.length)
        self.capacity = self.length
        return self.data


@cython.final
cdef class ColumnBuilder:
    """Accumulates decoded records of one topic-partition as Arrow column buffers.

    ``finish()`` returns a dict of buffers (see :func:`spark_kafkalite.protocol.record_columns.
    to_arrow`): little-endian int64 ``offset``, int64 ``timestamp_us``, int32 ``timestamp_type``,
    ``key``/``value`` as (int32 offsets, validity bitmap - meaningful only when the null count is
    not 0, it is built from the first null on -, data, null count), and with
    ``include_headers`` the list/struct buffers of ``array<struct<key:string,value:binary>>``.
    """
    cdef readonly bint include_headers
    cdef readonly Py_ssize_t num_rows
    cdef readonly int64_t last_offset
    cdef _Buf offsets, ts_us, ttype
    cdef _Buf key_off, key_valid, key_data, val_off, val_valid, val_data
    cdef _Buf hl_off, hl_valid, hk_off, hk_data, hv_off, hv_valid, hv_data
    cdef Py_ssize_t key_nulls, val_nulls, hl_nulls, hv_nulls, n_headers

    def __cinit__(self, bint include_headers=False):
        self.include_headers = include_headers
        self.num_rows = 0
        self.last_offset = -1
        self.offsets, self.ts_us, self.ttype = _Buf(), _Buf(), _Buf()
        self.key_off, self.key_valid, self.key_data = _Buf(), _Buf(), _Buf()
        self.val_off, self.val_valid, self.val_data = _Buf(), _Buf(), _Buf()
        self.hl_off, self.hl_valid, self.hk_off, self.hk_data = _Buf(), _Buf(), _Buf(), _Buf()
        self.hv_off, self.hv_valid, self.hv_data = _Buf(), _Buf(), _Buf()
        self.key_nulls = self.val_nulls = self.hl_nulls = self.hv_nulls = self.n_headers = 0
        self.key_off.append_i32(0)
        self.val_off.append_i32(0)
        self.hl_off.append_i32(0)
        self.hk_off.append_i32(0)
        self.hv_off.append_i32(0)

    def __init__(self, bint include_headers=False):
        """An empty builder; ``include_headers`` adds the headers column (set up by ``__cinit__``)."""

    def __len__(self):
        return self.num_rows

    cdef inline int _check_i32(self, _Buf data) except -1:
        if data.length > 0x7FFFFFFF:
            raise OverflowError("more than 2 GiB of record bytes in one Arrow batch")
        return 0

    cdef int _append_headers(self, const uint8_t* d, const Rec* r) except -1:
        cdef Py_ssize_t p = r.hpos
        cdef int64_t i, klen
        cdef Py_ssize_t vpos, vlen
        for i in range(r.hcount):
            _varint(d, &p, r.end, &klen)
            self.hk_data.append(d + p, klen)
            self._check_i32(self.hk_data)
            self.hk_off.append_i32(<int32_t>self.hk_data.length)
            p += klen
            _bytes_field(d, &p, r.end, &vpos, &vlen)
            if vlen < 0:
                self.hv_valid.set_bit(self.n_headers, False)
                self.hv_nulls += 1
            else:
                self.hv_data.append(d + vpos, vlen)
                self._check_i32(self.hv_data)
                self.hv_valid.set_bit(self.n_headers, True)
            self.hv_off.append_i32(<int32_t>self.hv_data.length)
            self.n_headers += 1
        return 0

    def append(self, data, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
               int64_t base_ts, int64_t max_ts, bint log_append, int32_t timestamp_type,
               int64_t min_offset, Py_ssize_t max_records):
        """Append the records of one batch's records section ``data[start:end]`` whose offset is
        ``>= min_offset``, at most ``max_records`` of them. The whole section is still parsed
        (framing checked) and on any error nothing of this batch stays appended.

        Returns the number of records appended (``last_offset`` is the offset of the last one).

        Raises:
            CorruptRecordError: as :func:`decode_records`.
        """
        cdef Py_buffer view
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        cdef const uint8_t* d = <const uint8_t*>view.buf
        cdef Py_ssize_t p = start, n, i, appended = 0
        cdef int64_t offset
        cdef Rec r
        # rollback point
        cdef Py_ssize_t s_rows = self.num_rows, s_kd = self.key_data.length, s_vd = self.val_data.length
        cdef Py_ssize_t s_kn = self.key_nulls, s_vn = self.val_nulls, s_hln = self.hl_nulls
        cdef Py_ssize_t s_hvn = self.hv_nulls, s_nh = self.n_headers
        cdef Py_ssize_t s_hkd = self.hk_data.length, s_hvd = self.hv_data.length
        cdef int64_t s_last = self.last_offset
        try:
            if end > view.len:
                raise CorruptRecordError("record batch is truncated")
            for n in range(count):
                _parse_record(d, &p, end, &r, base_offset)
                offset = base_offset + r.off_delta
                if offset < min_offset or appended >= max_records:
                    continue
                i = self.num_rows
                self.offsets.append_i64(offset)
                self.ts_us.append_i64((max_ts if log_append else base_ts + r.ts_delta) * 1000)
                self.ttype.append_i32(timestamp_type)
                # validity bitmaps are kept only once a null was seen (to_arrow_arrays passes
                # none while the null count is 0): rows before the first null are all valid
                if r.key_len < 0:
                    if self.key_nulls == 0:
                        self.key_valid.fill_valid(i)
                    self.key_valid.set_bit(i, False)
                    self.key_nulls += 1
                else:
                    self.key_data.append(d + r.key_pos, r.key_len)
                    self._check_i32(self.key_data)
                    if self.key_nulls:
                        self.key_valid.set_bit(i, True)
                self.key_off.append_i32(<int32_t>self.key_data.length)
                if r.val_len < 0:
                    if self.val_nulls == 0:
                        self.val_valid.fill_valid(i)
                    self.val_valid.set_bit(i, False)
                    self.val_nulls += 1
                else:
                    self.val_data.append(d + r.val_pos, r.val_len)
                    self._check_i32(self.val_data)
                    if self.val_nulls:
                        self.val_valid.set_bit(i, True)
                self.val_off.append_i32(<int32_t>self.val_data.length)
                if self.include_headers:
                    # a record without headers has a null ``headers`` (Spark's KafkaRecordToRowConverter)
                    if r.hcount:
                        self._append_headers(d, &r)
                        self.hl_valid.set_bit(i, True)
                    else:
                        self.hl_valid.set_bit(i, False)
                        self.hl_nulls += 1
                    self.hl_off.append_i32(<int32_t>self.n_headers)
                self.num_rows += 1
                self.last_offset = offset
                appended += 1
            if p != end:
                raise CorruptRecordError(f"record batch has {end - p} trailing bytes after its records")
        except BaseException as exc:
            self.num_rows, self.last_offset = s_rows, s_last
            self.key_nulls, self.val_nulls, self.hl_nulls, self.hv_nulls = s_kn, s_vn, s_hln, s_hvn
            self.n_headers = s_nh
            self.offsets.length, self.ts_us.length = s_rows * 8, s_rows * 8
            self.ttype.length = s_rows * 4
            self.key_off.length = self.val_off.length = self.hl_off.length = (s_rows + 1) * 4
            self.key_data.length, self.val_data.length = s_kd, s_vd
            self.hk_off.length = self.hv_off.length = (s_nh + 1) * 4
            self.hk_data.length, self.hv_data.length = s_hkd, s_hvd
            if isinstance(exc, UnicodeDecodeError):
                raise CorruptRecordError("record header key is not valid UTF-8") from exc
            raise
        finally:
            PyBuffer_Release(&view)
        return appended

    def finish(self):
        """The column buffers (see the class docstring); the builder must not be used afterwards."""
        n = self.num_rows
        out = {
            "num_rows": n,
            "offset": self.offsets.finish(),
            "timestamp_us": self.ts_us.finish(),
            "timestamp_type": self.ttype.finish(),
            "key": (self.key_off.finish(), self.key_valid.finish(), self.key_data.finish(), self.key_nulls),
            "value": (self.val_off.finish(), self.val_valid.finish(), self.val_data.finish(), self.val_nulls),
        }
        if self.include_headers:
            out["headers"] = (
                self.hl_off.finish(), self.hl_valid.finish(), self.hl_nulls, self.n_headers,
                self.hk_off.finish(), self.hk_data.finish(),
                self.hv_off.finish(), self.hv_valid.finish(), self.hv_data.finish(), self.hv_nulls,
            )
        return out
