"""The Kafka listener's frame reader (services/gateway/kafka/frames.py), fed as asyncio's
transport feeds a BufferedProtocol: through get_buffer / buffer_updated, in chunks of any size."""
import asyncio
import struct

import pytest

from services.gateway.kafka.frames import MAX_QUEUED_BYTES, SCRATCH_BYTES, FrameProtocol, FrameTooLarge


class Transport:
    def __init__(self):
        self.paused = False
        self.pauses = 0

    def pause_reading(self):
        self.paused = True
        self.pauses += 1

    def resume_reading(self):
        self.paused = False


def proto(max_bytes=1 << 30):
    p = FrameProtocol(max_bytes, lambda _p: None)
    p.connection_made(Transport())
    return p


def feed(p, data: bytes, chunk: int) -> None:
    i = 0
    while i < len(data):
        buf = p.get_buffer(-1)
        n = min(len(buf), chunk, len(data) - i)
        assert n > 0
        buf[:n] = data[i:i + n]
        p.buffer_updated(n)
        i += n


def frames_of(*bodies: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


def drain(p) -> list[bytes]:
    out = []
    while p._frames:
        out.append(bytes(asyncio.run(p.read_frame())))
    return out


@pytest.mark.parametrize("chunk", [1, 3, 7, 4096, 65536, 1 << 20])
def test_small_and_large_frames_come_out_whole_in_order(chunk):
    bodies = [b"", b"a", b"x" * 100, bytes(range(256)) * 1000, b"tail" * 3,
              b"y" * (SCRATCH_BYTES - 4), b"z" * (SCRATCH_BYTES + 1)]
    p = proto()
    data = frames_of(*bodies)
    got = []
    i = 0
    while i < len(data):      # a reader taking frames as they come, so reading never pauses
        j = min(len(data), i + 200_000)
        feed(p, data[i:j], chunk)
        got += drain(p)
        i = j
    assert got == bodies


def test_a_large_frame_gets_a_buffer_of_its_own_read_into_directly():
    p = proto()
    body = bytes(range(256)) * 2000
    feed(p, frames_of(body)[:1000], 1000)          # the prefix and a first piece
    assert p._frame is not None and len(p._frame) == len(body)
    buf = p.get_buffer(-1)
    assert buf.obj is p._frame                     # the kernel reads into the frame itself
    feed(p, frames_of(body)[1000:], 1 << 20)
    (frame,) = drain(p)
    assert frame == body


def test_a_frame_over_the_limit_ends_reading_after_the_frames_before_it():
    p = proto(max_bytes=100)
    feed(p, frames_of(b"ok") + struct.pack(">i", 101) + b"\0" * 50, 4096)
    assert p.transport.paused
    assert asyncio.run(p.read_frame()) == b"ok"
    with pytest.raises(FrameTooLarge) as e:
        asyncio.run(p.read_frame())
    assert e.value.size == 101
    p2 = proto()
    feed(p2, struct.pack(">i", -1), 4)
    with pytest.raises(FrameTooLarge):
        asyncio.run(p2.read_frame())


def test_reading_pauses_while_too_much_waits_and_resumes_when_taken():
    p = proto()
    body = b"q" * (1 << 20)
    feed(p, frames_of(*[body] * 5), 1 << 20)
    assert p.transport.paused and p._queued > MAX_QUEUED_BYTES
    drain(p)
    assert not p.transport.paused


def test_end_of_stream_after_the_frames():
    p = proto()
    feed(p, frames_of(b"last"), 2)
    p.eof_received()
    assert asyncio.run(p.read_frame()) == b"last"
    assert asyncio.run(p.read_frame()) is None
