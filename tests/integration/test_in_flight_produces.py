"""A connection reads on past Produce requests parked for their replicas, and still answers
every request in order (``broker.network.in_flight_produces``): a stub handler behind a real
``SocketServer`` on 127.0.0.1 records when each request starts and releases them out of order.
Counts and orders, not timings."""

from __future__ import annotations

import asyncio
import struct

import pytest

from broker.network.endpoint import Endpoint
from broker.network.in_flight_produces import MAX_IN_FLIGHT_PRODUCES
from broker.network.request_context import CloseConnection, RequestContext
from broker.network.socket_server import SocketServer

pytestmark = pytest.mark.timeout(60)

PRODUCE, METADATA = 0, 3


def _frame(api_key: int, correlation_id: int) -> bytes:
    body = struct.pack(">hhih", api_key, 3, correlation_id, 1) + b"t"
    return struct.pack(">i", len(body)) + body


class _Stub:
    """Handler: a Produce whose correlation id is in ``park`` parks (releases its slot, as the
    produce purgatory's ``on_park`` does) until ``release[id]`` is set; ``fail`` raises
    CloseConnection after the release."""

    def __init__(self, park: set[int], fail: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.park, self.fail = park, fail
        self.started: list[int] = []
        self.release: dict[int, asyncio.Event] = {}

    async def __call__(self, rctx: RequestContext, _frame: bytes | bytearray, _offset: int) -> bytes:
        cid = rctx.correlation_id
        self.started.append(cid)
        if rctx.api_key == PRODUCE and cid in self.park:
            self.release[cid] = asyncio.Event()
            rctx.release_slot()
            await self.release[cid].wait()
        if cid in self.fail:
            raise CloseConnection("failed")
        return struct.pack(">ii", 4, cid)


async def _until(predicate: object, what: str) -> None:
    for _ in range(500):
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def _serve(stub: _Stub) -> tuple[SocketServer, asyncio.StreamReader, asyncio.StreamWriter]:
    server = SocketServer([Endpoint("PLAINTEXT", "127.0.0.1", 0)], stub)
    host, port = (await server.startup())["PLAINTEXT"]
    reader, writer = await asyncio.open_connection(host, port)
    return server, reader, writer


async def _answers(reader: asyncio.StreamReader, count: int) -> list[int]:
    return [struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 10))[1] for _ in range(count)]


def test_produces_are_read_past_a_parked_one_and_answered_in_request_order() -> None:
    async def run() -> None:
        stub = _Stub(park={1, 2})
        server, reader, writer = await _serve(stub)
        writer.write(_frame(PRODUCE, 1) + _frame(PRODUCE, 2) + _frame(PRODUCE, 3))
        await _until(lambda: stub.started == [1, 2, 3], "all three produces started")
        # 3 finished at once and 2 is released before 1: nothing may overtake 1's response
        stub.release[2].set()
        await asyncio.sleep(0.1)
        assert reader.at_eof() is False and len(reader._buffer) == 0  # type: ignore[attr-defined]
        stub.release[1].set()
        assert await _answers(reader, 3) == [1, 2, 3]
        writer.close()
        await server.shutdown()

    asyncio.run(run())


def test_another_api_waits_for_the_parked_produces_before_it() -> None:
    async def run() -> None:
        stub = _Stub(park={1})
        server, reader, writer = await _serve(stub)
        writer.write(_frame(PRODUCE, 1) + _frame(METADATA, 2) + _frame(PRODUCE, 3))
        await _until(lambda: stub.started == [1], "the produce started")
        await asyncio.sleep(0.1)
        assert stub.started == [1]  # Metadata is not handled while the Produce before it waits
        stub.release[1].set()
        assert await _answers(reader, 3) == [1, 2, 3]
        assert stub.started == [1, 2, 3]
        writer.close()
        await server.shutdown()

    asyncio.run(run())


def test_at_most_max_in_flight_produces_per_connection() -> None:
    async def run() -> None:
        count = MAX_IN_FLIGHT_PRODUCES + 2
        stub = _Stub(park=set(range(count)))
        server, reader, writer = await _serve(stub)
        writer.write(b"".join(_frame(PRODUCE, n) for n in range(count)))
        await _until(lambda: len(stub.started) == MAX_IN_FLIGHT_PRODUCES, "the first ones started")
        await asyncio.sleep(0.1)
        assert stub.started == list(range(MAX_IN_FLIGHT_PRODUCES))  # the connection stopped reading
        for n in range(count):
            await _until(lambda n=n: n in stub.release, f"produce {n} started")  # type: ignore[misc]
            stub.release[n].set()
        assert await _answers(reader, count) == list(range(count))
        writer.close()
        await server.shutdown()

    asyncio.run(run())


def test_a_failed_produce_closes_the_connection_after_the_answers_before_it() -> None:
    async def run() -> None:
        stub = _Stub(park={1, 2}, fail={2})
        server, reader, writer = await _serve(stub)
        writer.write(_frame(PRODUCE, 1) + _frame(PRODUCE, 2) + _frame(PRODUCE, 3))
        await _until(lambda: stub.started == [1, 2, 3], "all three produces started")
        stub.release[2].set()
        stub.release[1].set()
        assert await _answers(reader, 1) == [1]
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed: no answer to 2 or 3
        writer.close()
        await server.shutdown()

    asyncio.run(run())
