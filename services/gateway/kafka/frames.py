"""Kafka's size-prefixed frames off a TCP connection with one copy: an asyncio
BufferedProtocol the kernel reads into directly (part of the listener's shell).

asyncio's StreamReader copied every byte twice more than the kernel does (into its bytearray,
then out of it for readexactly) and paused and resumed the transport for every frame larger than
its limit; for a 350 KB Produce request that cost several times more than routing it. Here:

- between frames, the kernel reads into a 64 KiB scratch buffer; the frames complete in it are
  copied out (small requests: many per read) and handed over;
- a frame larger than what the scratch holds gets a bytearray of its own, sized from its prefix:
  what arrived already is copied in once, the rest is read into it by the kernel directly. The
  frame handed over is that bytearray (its record batches go on as memoryviews of it);
- a size above `max_bytes` (socket.request.max.bytes) or negative ends reading: the
  connection learns it as FrameTooLarge before anything of that frame is kept;
- frames waiting to be taken are bounded (MAX_QUEUED_BYTES): past it the transport pauses
  reading until they are taken (the listener takes them as `queued.max.requests` allows).

Writing: `write()` on the transport, `drain()` waits while asyncio's write buffer is above its
high-water mark (pause_writing / resume_writing).

TLS: a protocol made with `read=False` reads nothing once connected (the client's first bytes
are its TLS ClientHello, not a frame) until `start_tls()` has run the handshake on the
connection (loop.start_tls) and switched this protocol to the TLS transport.
"""
from __future__ import annotations

import asyncio
import collections
from typing import Any

SCRATCH_BYTES = 64 * 1024
MAX_QUEUED_BYTES = 4 << 20        # read ahead of the listener at most this much, then pause


class FrameTooLarge(Exception):
    def __init__(self, size: int):
        super().__init__(f"a frame of {size} bytes")
        self.size = size


class FrameProtocol(asyncio.BufferedProtocol):
    def __init__(self, max_bytes: int, on_connected, read: bool = True):
        self.max_bytes = max_bytes
        self._on_connected = on_connected          # called with this protocol once connected
        self._read_at_connect = read                # False: nothing until start_tls()
        self.transport: asyncio.Transport | None = None
        self._scratch = bytearray(SCRATCH_BYTES)
        self._have = 0                  # bytes of the scratch holding unparsed data
        self._frame: bytearray | None = None    # a large frame being read into directly
        self._filled = 0
        self._frames: collections.deque = collections.deque()
        self._queued = 0
        self._error: BaseException | None = None
        self._eof = False
        self._waiter: asyncio.Future | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._drain_waiters: list[asyncio.Future] = []

    # -- asyncio callbacks ------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        if not self._read_at_connect:
            transport.pause_reading()
        self._on_connected(self)

    def connection_lost(self, exc) -> None:
        self._eof = True
        if exc is not None and self._error is None:
            self._error = exc
        self._wake()
        for w in self._drain_waiters:
            if not w.done():
                w.set_exception(ConnectionResetError("connection lost"))
        self._drain_waiters.clear()

    def eof_received(self):
        self._eof = True
        self._wake()
        return False                     # close the transport

    def get_buffer(self, sizehint: int):
        if self._frame is not None:
            return memoryview(self._frame)[self._filled:]
        return memoryview(self._scratch)[self._have:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._filled += nbytes
            if self._filled == len(self._frame):
                frame, self._frame = self._frame, None
                self._push(frame)
            return
        self._have += nbytes
        self._parse_scratch()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        for w in self._drain_waiters:
            if not w.done():
                w.set_result(None)
        self._drain_waiters.clear()

    # -- parsing ------------------------------------------------------------------------------
    def _parse_scratch(self) -> None:
        buf, pos, have = self._scratch, 0, self._have
        while have - pos >= 4 and self._error is None:
            size = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            if size < 0 or size > self.max_bytes:
                self._fail(FrameTooLarge(size))
                return
            start = pos + 4
            if have - start >= size:
                with memoryview(buf) as view:            # one copy, out of the scratch
                    self._push(bytes(view[start:start + size]))
                pos = start + size
                continue
            if 4 + size > len(buf):
                # a large frame: a buffer of its own, the kernel fills the rest directly
                frame = bytearray(size)
                got = have - start
                frame[:got] = buf[start:have]
                self._frame, self._filled = frame, got
                self._have = 0
                return
            break
        if pos:
            rest = have - pos
            buf[:rest] = buf[pos:have]
            self._have = rest
        else:
            self._have = have

    def _push(self, frame) -> None:
        self._frames.append(frame)
        self._queued += len(frame)
        if self._queued > MAX_QUEUED_BYTES and not self._reading_paused and self.transport:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def _fail(self, err: BaseException) -> None:
        self._error = err
        if self.transport is not None and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    # -- the connection's side ----------------------------------------------------------------
    async def read_frame(self) -> Any:
        """The next frame (bytes or bytearray), None at end of stream; FrameTooLarge for a
        size over max_bytes (the frames before it are returned first)."""
        while not self._frames:
            if self._error is not None:
                err = self._error
                if isinstance(err, FrameTooLarge):
                    raise err
                raise ConnectionResetError(str(err))
            if self._eof:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        frame = self._frames.popleft()
        self._queued -= len(frame)
        if self._reading_paused and self._queued <= MAX_QUEUED_BYTES // 2 \
                and self._error is None and self.transport is not None:
            self._reading_paused = False
            self.transport.resume_reading()
        return frame

    def write(self, data) -> None:
        self.transport.write(data)

    def write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size()

    async def drain(self) -> None:
        if self.transport.is_closing():
            await asyncio.sleep(0)       # let connection_lost run
            if self._eof and self._error is not None:
                raise ConnectionResetError("connection lost")
        if self._writing_paused:
            w = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(w)
            await w

    async def start_tls(self, context, handshake_timeout_s: float = 60.0) -> None:
        """The TLS handshake as the server (ssl.SSLError, OSError or TimeoutError when it
        fails); from then on this protocol reads and writes through the TLS transport."""
        loop = asyncio.get_running_loop()
        self.transport = await loop.start_tls(self.transport, self, context, server_side=True,
                                              ssl_handshake_timeout=handshake_timeout_s)

    def get_extra_info(self, name: str, default=None):
        return self.transport.get_extra_info(name, default) if self.transport else default

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
