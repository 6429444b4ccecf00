"""``AppendOrder``: tickets taken in arrival order append in that order per partition, whatever
order their workers finish in, and a ticket given up early never lets a later one overtake."""

from __future__ import annotations

import asyncio

from broker.replication.append_order import AppendOrder, AppendTicket

P0 = ("t", 0)
P1 = ("t", 1)


async def _append(
    order: AppendOrder, ticket: AppendTicket, name: str, delay_s: float, log: list[str]
) -> None:
    await asyncio.sleep(delay_s)  # the worker thread's check
    await ticket.turn()
    log.append(name)
    ticket.release()


def test_tickets_append_in_arrival_order_per_partition() -> None:
    async def main() -> list[str]:
        order = AppendOrder()
        log: list[str] = []
        slow = order.reserve([P0])
        other = order.reserve([P1])  # another partition: not held back by `slow`
        fast = order.reserve([P0, P1])
        assert order.must_wait([P0]) and order.must_wait([P1]) and not order.must_wait([("t", 2)])
        await asyncio.gather(
            _append(order, slow, "slow", 0.05, log),
            _append(order, other, "other", 0.0, log),
            _append(order, fast, "fast", 0.0, log),
        )
        assert order.pending_partitions() == 0 and not order.must_wait([P0, P1])
        return log

    assert asyncio.run(main()) == ["other", "slow", "fast"]


def test_a_ticket_released_early_waits_for_the_ones_before_it() -> None:
    async def main() -> list[str]:
        order = AppendOrder()
        log: list[str] = []
        first = order.reserve([P0])
        gave_up = order.reserve([P0])
        last = order.reserve([P0])
        gave_up.release()  # its request failed validation: it never appends
        gave_up.release()  # idempotent
        await asyncio.gather(
            _append(order, last, "last", 0.0, log), _append(order, first, "first", 0.05, log)
        )
        return log

    assert asyncio.run(main()) == ["first", "last"]


def test_cancelling_a_wait_leaves_the_earlier_ticket_alone() -> None:
    async def main() -> list[str]:
        order = AppendOrder()
        log: list[str] = []
        first = order.reserve([P0])
        second = order.reserve([P0])
        waiting = asyncio.create_task(second.turn())
        await asyncio.sleep(0)
        waiting.cancel()
        second.release()
        third = order.reserve([P0])
        await asyncio.gather(
            _append(order, third, "third", 0.0, log), _append(order, first, "first", 0.02, log)
        )
        return log

    assert asyncio.run(main()) == ["first", "third"]
