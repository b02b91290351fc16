"""Compression of a v2 batch's records, framed as Kafka's clients frame it.

Compression framing, as Kafka's clients write it:

    codec  id  frame
    -----  --  ------------------------------------------------------------------------------
    gzip    1  one gzip member (RFC 1952); any number of members is read
    snappy  2  xerial blocks: 16-byte header (0x82 "SNAPPY" 0x00, int32 version 1, int32
               compat 1) then [int32 length, raw snappy block of <= 32 KiB input]...;
               raw (unframed) snappy is also read
    lz4     3  LZ4 frame (lz4.frame), 64 KiB independent blocks, no checksums (KafkaLZ4Block-
               OutputStream's defaults)
    zstd    4  one zstd frame; frames without a content size are read too
"""
from __future__ import annotations

import gzip
import struct
import zlib

from riverbed import errors
from riverbed.records.header import Compression

__all__ = ["compress", "decompress"]

_INT32 = struct.Struct(">i")

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024
_GZIP_LEVEL = 6   # java.util.zip.Deflater.DEFAULT_COMPRESSION, what Kafka's GZIPOutputStream uses


def compress(codec: int, data) -> bytes:
    """Compress the record bytes of a batch the way Kafka frames `codec`."""
    if codec == Compression.GZIP:
        return gzip.compress(data, compresslevel=_GZIP_LEVEL, mtime=0)
    if codec == Compression.SNAPPY:
        import snappy
        view = memoryview(data)
        parts = [_XERIAL_HEADER]
        for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
            block = snappy.compress(bytes(view[start:start + _XERIAL_BLOCK_SIZE]))
            parts.append(_INT32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == Compression.LZ4:
        import lz4.frame
        return lz4.frame.compress(bytes(data), block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                  block_linked=False, content_checksum=False, store_size=False)
    if codec == Compression.ZSTD:
        import zstandard
        return zstandard.ZstdCompressor().compress(bytes(data))
    if codec == Compression.NONE:
        return bytes(data)
    raise errors.UnsupportedVersionError(f"unknown compression codec {codec}")


def decompress(codec: int, data) -> bytes:
    """Inverse of `compress`; any malformed input raises CorruptMessageError."""
    try:
        if codec == Compression.GZIP:
            return gzip.decompress(data)
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data)
        if codec == Compression.LZ4:
            import lz4.frame
            return lz4.frame.decompress(data)
        if codec == Compression.ZSTD:
            import zstandard
            dctx = zstandard.ZstdDecompressor().decompressobj()
            out = dctx.decompress(data)
            if not dctx.eof:
                raise errors.CorruptMessageError("truncated zstd frame")
            return out
        if codec == Compression.NONE:
            return bytes(data)
    except errors.CorruptMessageError:
        raise
    except ImportError:
        raise
    except (Exception, zlib.error) as exc:   # each library has its own error types
        raise errors.CorruptMessageError(
            f"cannot decompress {Compression(codec).name} records: {exc!r}") from None
    raise errors.CorruptMessageError(f"unknown compression codec {codec}")


def _snappy_decompress(data) -> bytes:
    import snappy
    data = bytes(data)
    if not data.startswith(_XERIAL_MAGIC):
        return snappy.decompress(data)
    # Version and compat are ignored, as the Java reader does (some writers get them wrong).
    pos = len(_XERIAL_HEADER)
    parts = []
    while pos < len(data):
        if pos + 4 > len(data):
            raise errors.CorruptMessageError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise errors.CorruptMessageError(f"bad xerial snappy block length {length}")
        parts.append(snappy.decompress(data[pos:pos + length]))
        pos += length
    return b"".join(parts)
