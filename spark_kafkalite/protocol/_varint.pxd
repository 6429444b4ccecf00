# cython: language_level=3
# Zig-zag varints in C (Kafka's ByteUtils.readVarlong / writeVarlong / sizeOfVarlong) for the
# compiled record codecs (_record_decode.pyx, _record_encode.pyx, _record_rebuild.pyx), which
# cimport them: one definition, inlined where used. The pure-Python codec is
# spark_kafkalite/protocol/varint.py.

from libc.stdint cimport int64_t, uint8_t, uint64_t

# what read_varlong returns
cdef enum:
    VARINT_OK = 0
    VARINT_CUT = 1       # the data ends inside the varint
    VARINT_TOO_LONG = 2  # more than 10 bytes (a varlong), 5 (a varint)


cdef inline int _read_unsigned(const uint8_t* d, Py_ssize_t* p, Py_ssize_t limit, int max_shift,
                               uint64_t* out) noexcept nogil:
    # the base-128 groups at d[p[0]] (at most max_shift / 7 + 1 of them), not past ``limit``
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        if p[0] >= limit:
            return VARINT_CUT
        b = d[p[0]]
        p[0] += 1
        if shift < 64:
            result |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > max_shift:
            return VARINT_TOO_LONG
    out[0] = result
    return VARINT_OK


cdef inline int read_varlong(const uint8_t* d, Py_ssize_t* p, Py_ssize_t limit, int64_t* out) noexcept nogil:
    """Read the zig-zag varlong (at most 10 bytes) at d[p[0]], not past ``limit``, into out[0],
    advancing p[0] (Kafka's ``ByteUtils.readVarlong``)."""
    cdef uint64_t u
    cdef int err = _read_unsigned(d, p, limit, 63, &u)
    if not err:
        out[0] = <int64_t>(u >> 1) ^ -(<int64_t>(u & 1))
    return err


cdef inline int read_varint(const uint8_t* d, Py_ssize_t* p, Py_ssize_t limit, int64_t* out) noexcept nogil:
    """The same for a 32-bit zig-zag varint (at most 5 bytes, the bits above 32 dropped: Kafka's
    ``ByteUtils.readVarint``)."""
    cdef uint64_t u
    cdef int err = _read_unsigned(d, p, limit, 28, &u)
    if not err:
        u &= 0xFFFFFFFFU
        out[0] = <int64_t>(u >> 1) ^ -(<int64_t>(u & 1))
    return err


cdef inline int varint_size(int64_t value) noexcept nogil:
    """The bytes ``value`` takes as a zig-zag varlong."""
    cdef uint64_t v = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef int n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


cdef inline uint8_t* put_varint(uint8_t* p, int64_t value) noexcept nogil:
    """Write ``value`` as a zig-zag varlong at ``p``; returns the position after it."""
    cdef uint64_t v = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    while v > 0x7F:
        p[0] = <uint8_t>((v & 0x7F) | 0x80)
        p += 1
        v >>= 7
    p[0] = <uint8_t>v
    return p + 1
