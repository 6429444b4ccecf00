"""Kafka's record compression codecs (``CompressionType``: 1 gzip, 2 snappy, 3 lz4, 4 zstd), whole
and streaming.

``compress`` / ``decompress`` work on a whole records section (clients, the leader recompressing
a batch to its topic's ``compression.type``, the log cleaner); ``compress`` takes Kafka's
compression levels (KIP-390, :data:`COMPRESSION_LEVELS`).
``iter_decompressed`` streams a records section out in chunks of at most ``chunk_bytes`` and
stops with ``MESSAGE_TOO_LARGE`` once more than ``max_output_bytes`` come out, so a compression
bomb (a few KB that inflate to gigabytes) costs bounded memory and time. Kafka's broker streams
records out of compressed batches too (``DefaultRecordBatch.streamingIterator`` in
``LogValidator``) but has no decompressed-size limit; the limit is kafkalite's
(``kafkalite.message.max.uncompressed.bytes`` on the broker).

Wire formats: gzip (RFC 1952, Java's ``GZIPOutputStream``), snappy (raw or xerial-framed, as
the Java client writes it), lz4 (the LZ4 frame format, KIP-57), zstd (zstd frames, KIP-110).
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator

from spark_kafkalite.protocol.errors import (
    CorruptRecordError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)

__all__ = [
    "COMPRESSION_NONE",
    "COMPRESSION_GZIP",
    "COMPRESSION_SNAPPY",
    "COMPRESSION_LZ4",
    "COMPRESSION_ZSTD",
    "COMPRESSION_CODECS",
    "COMPRESSION_LEVELS",
    "compress",
    "within_default_cost",
    "decompress",
    "iter_decompressed",
]

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
COMPRESSION_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
COMPRESSION_LEVELS: dict[int, tuple[int, int, int]] = {
    COMPRESSION_GZIP: (1, 9, -1),
    COMPRESSION_LZ4: (1, 17, 9),
    COMPRESSION_ZSTD: (-131072, 22, 3),
}
"""``(min, max, default)`` level of each codec that has levels (Kafka's ``CompressionType``
``minLevel`` / ``maxLevel`` / ``defaultLevel``, KIP-390): gzip 1-9 or -1 (``Deflater
.DEFAULT_COMPRESSION``, zlib's level 6), lz4 1-17 (lz4-java's; liblz4 caps HC at 12), zstd
-131072-22 (``ZSTD_minCLevel`` .. ``ZSTD_MAX_CLEVEL``). Snappy has none."""

Buffer = bytes | bytearray | memoryview
_CHUNK_BYTES = 64 * 1024
_ZSTD_PIECE_BYTES = 256


def compress(data: bytes, compression_type: int, level: int | None = None) -> bytes:
    """Compress a records section with Kafka's codec ``compression_type`` (1-4) at ``level``
    (None: the codec's default in :data:`COMPRESSION_LEVELS`; ignored for snappy). lz4 at its
    default level 9 uses the fast compressor and any other level the high-compression one, as
    Kafka's ``Lz4BlockOutputStream`` does (liblz4's frame API takes levels 1-2 as fast too), in
    the frame layout that stream writes: 64 KB independent blocks, no checksums but the
    descriptor's (Java's ``Lz4BlockInputStream`` refuses linked blocks, which cramjam's lz4
    frames have).

    Raises:
        UnsupportedCompressionTypeError: the codec's library is not installed or the type is unknown.
    """
    if compression_type == COMPRESSION_NONE:
        return data
    if compression_type == COMPRESSION_GZIP:
        # MTIME 0, as Java's GZIPOutputStream writes; -1 is zlib's default level (6)
        return gzip.compress(data, compresslevel=-1 if level is None else level, mtime=0)
    cramjam = _cramjam()
    if compression_type == COMPRESSION_SNAPPY:
        return _snappy_xerial_compress(bytes(cramjam.snappy.compress_raw(data)))
    if compression_type == COMPRESSION_LZ4:
        return _lz4_compress(data, level)
    if compression_type == COMPRESSION_ZSTD:
        zstd_level = COMPRESSION_LEVELS[COMPRESSION_ZSTD][2] if level is None else level
        return bytes(cramjam.zstd.compress(data, level=zstd_level))
    raise UnsupportedCompressionTypeError(f"unknown compression type {compression_type}")


def within_default_cost(compression_type: int, level: int | None) -> bool:
    """True when compressing with ``compression_type`` at ``level`` costs no more per byte than
    the codec's default level: None, the default, or a faster level (gzip -1 or 1-6, lz4 9 or
    1-2, both the fast compressor, zstd up to 3). zstd 19 takes ~40 ms for 12 KB, lz4 12 ten
    times its default: callers keep such work off latency-sensitive threads."""
    if level is None or compression_type not in COMPRESSION_LEVELS:
        return True
    if compression_type == COMPRESSION_GZIP:
        return level <= 6
    if compression_type == COMPRESSION_LZ4:
        return level == COMPRESSION_LEVELS[COMPRESSION_LZ4][2] or level <= 2
    return level <= COMPRESSION_LEVELS[COMPRESSION_ZSTD][2]


def decompress(data: Buffer, compression_type: int) -> bytes:
    """Decompress a whole records section (gzip, snappy raw or xerial-framed, lz4 frame, zstd frame).

    Raises:
        UnsupportedCompressionTypeError: the codec is unknown or its library is missing.
        CorruptRecordError: the compressed data is invalid.
    """
    try:
        if compression_type == COMPRESSION_GZIP:
            return gzip.decompress(bytes(data))
        if compression_type in (COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD):
            cramjam = _cramjam()
            if compression_type == COMPRESSION_SNAPPY:
                return _snappy_decompress(cramjam, bytes(data))
            if compression_type == COMPRESSION_LZ4:
                return bytes(cramjam.lz4.decompress(bytes(data)))
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except UnsupportedCompressionTypeError:
        raise
    except Exception as exc:  # codec libraries raise their own error types
        raise CorruptRecordError(f"cannot decompress records (codec {compression_type}): {exc}") from exc
    raise UnsupportedCompressionTypeError(f"unknown compression type {compression_type}")


def iter_decompressed(
    data: Buffer, compression_type: int, max_output_bytes: int, chunk_bytes: int = _CHUNK_BYTES
) -> Iterator[bytes]:
    """Yield the decompressed records section in chunks: at most ``chunk_bytes`` each for gzip
    and lz4, at most 8 MiB for zstd, one whole block (checked against the limit before it is
    inflated) for snappy.

    Raises:
        MessageTooLargeError: more than ``max_output_bytes`` would come out (a compression bomb).
        CorruptRecordError: the compressed data is invalid or truncated.
        UnsupportedCompressionTypeError: the codec is unknown or its library is missing.
    """
    if compression_type == COMPRESSION_GZIP:
        chunks = _gzip_chunks(data, chunk_bytes)
    elif compression_type == COMPRESSION_SNAPPY:
        chunks = _snappy_chunks(data, max_output_bytes)
    elif compression_type == COMPRESSION_LZ4:
        chunks = _lz4_chunks(data, chunk_bytes)
    elif compression_type == COMPRESSION_ZSTD:
        chunks = _zstd_chunks(data)
    else:
        raise UnsupportedCompressionTypeError(f"unknown compression type {compression_type}")
    total = 0
    try:
        for chunk in chunks:
            total += len(chunk)
            if total > max_output_bytes:
                raise MessageTooLargeError(
                    f"the records of the batch decompress to more than {max_output_bytes} bytes "
                    "(kafkalite.message.max.uncompressed.bytes)"
                )
            yield chunk
    except (MessageTooLargeError, CorruptRecordError, UnsupportedCompressionTypeError):
        raise
    except Exception as exc:  # codec libraries raise their own error types
        raise CorruptRecordError(f"cannot decompress records (codec {compression_type}): {exc}") from exc


def _lz4_compress(data: bytes, level: int | None) -> bytes:
    import lz4.frame  # type: ignore[import-untyped]

    fast = level is None or level == COMPRESSION_LEVELS[COMPRESSION_LZ4][2]
    return bytes(
        lz4.frame.compress(
            data,
            compression_level=0 if fast else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    )


def _gzip_chunks(data: Buffer, chunk_bytes: int) -> Iterator[bytes]:
    pending = bytes(data)
    while pending:  # concatenated gzip members, as gzip.decompress accepts
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        chunk = inflater.decompress(pending, chunk_bytes)
        while True:
            if chunk:
                yield chunk
            if inflater.eof or not inflater.unconsumed_tail and not chunk:
                break
            chunk = inflater.decompress(inflater.unconsumed_tail, chunk_bytes)
        if not inflater.eof:
            raise CorruptRecordError("gzip records end before the end of the compressed stream")
        pending = inflater.unused_data.lstrip(b"\x00")  # trailing padding is allowed by gzip


def _lz4_chunks(data: Buffer, chunk_bytes: int) -> Iterator[bytes]:
    import lz4.frame  # type: ignore[import-untyped]

    pending = bytes(data)
    while pending:
        decompressor = lz4.frame.LZ4FrameDecompressor()
        chunk = decompressor.decompress(pending, max_length=chunk_bytes)
        while True:
            if chunk:
                yield chunk
            if decompressor.eof or decompressor.needs_input:
                break
            chunk = decompressor.decompress(b"", max_length=chunk_bytes)
        if not decompressor.eof:
            raise CorruptRecordError("lz4 records end before the end of the compressed frame")
        pending = decompressor.unused_data or b""


def _zstd_chunks(data: Buffer) -> Iterator[bytes]:
    # python-zstandard's decompressobj has no output bound, so it is fed _ZSTD_PIECE_BYTES at a
    # time: zstd expands at most 32768x (an RLE block: 4 bytes -> 128 KiB), so one call
    # yields at most _ZSTD_PIECE_BYTES * 32768 bytes (8 MiB).
    import zstandard

    raw = bytes(data)
    pos, end = 0, len(raw)
    while pos < end:  # one decompressobj per zstd frame
        inflater = zstandard.ZstdDecompressor().decompressobj(write_size=_CHUNK_BYTES)
        while not inflater.eof:
            if pos >= end:
                raise CorruptRecordError("zstd records end before the end of the compressed frame")
            piece = raw[pos : pos + _ZSTD_PIECE_BYTES]
            pos += len(piece)
            chunk = inflater.decompress(piece)
            if chunk:
                yield chunk
        pos -= len(inflater.unused_data)


def _snappy_chunks(data: Buffer, max_output_bytes: int) -> Iterator[bytes]:
    cramjam = _cramjam()
    raw = bytes(data)
    blocks: Iterator[bytes]
    if raw.startswith(_XERIAL_MAGIC):
        blocks = _xerial_blocks(raw)
    else:
        blocks = iter((raw,))
    for block in blocks:
        # The raw block starts with its uncompressed length: check it before inflating.
        if cramjam.snappy.decompress_raw_len(block) > max_output_bytes:
            raise MessageTooLargeError(
                f"a snappy block of the batch decompresses to more than {max_output_bytes} bytes "
                "(kafkalite.message.max.uncompressed.bytes)"
            )
        yield bytes(cramjam.snappy.decompress_raw(block))


def _xerial_blocks(data: bytes) -> Iterator[bytes]:
    pos = 16
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("xerial snappy block length is truncated")
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CorruptRecordError(f"xerial snappy block of {n} bytes overruns the records")
        yield data[pos : pos + n]
        pos += n


def _cramjam():  # type: ignore[no-untyped-def]
    try:
        import cramjam
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise UnsupportedCompressionTypeError(
            "snappy/lz4/zstd need the 'cramjam' package (pip install cramjam)"
        ) from exc
    return cramjam


_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _snappy_xerial_compress(raw_block: bytes) -> bytes:
    return _XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", len(raw_block)) + raw_block


def _snappy_decompress(cramjam, data: bytes) -> bytes:  # type: ignore[no-untyped-def]
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    return b"".join(bytes(cramjam.snappy.decompress_raw(block)) for block in _xerial_blocks(data))
