"""The share-partition state of one (share group, topic partition) on its leader (KIP-932;
Kafka's ``SharePartition``): a pure state machine, no I/O.

* ``start_offset`` is the share-partition start offset (SPSO): every record below it is done
  (acknowledged or archived). ``end_offset`` is the share-partition end offset (SPEO), one past
  the last record ever acquired. Records in [SPSO, SPEO) are *in flight*, each AVAILABLE,
  ACQUIRED (by one member, until its lock deadline), ACKNOWLEDGED or ARCHIVED.
* :meth:`acquire` gives a member the AVAILABLE in-flight records and the new records past SPEO
  within the batches just read from the log, each with a lock of
  ``group.share.record.lock.duration.ms`` and its delivery count increased; at most
  ``group.share.partition.max.record.locks`` records are in flight.
* :meth:`acknowledge`: ACCEPT (1) -> ACKNOWLEDGED, RELEASE (2) -> AVAILABLE, REJECT (3) and
  GAP (0) -> ARCHIVED, RENEW (4) -> the lock restarts; only the member holding the lock may
  acknowledge (else INVALID_RECORD_STATE). A record released or whose lock expired after
  ``group.share.delivery.count.limit`` deliveries is ARCHIVED (a poison record).
* SPSO moves past the leading run of ACKNOWLEDGED / ARCHIVED records.

State is kept per in-flight offset (a dict), so a fetch costs in proportion to the records it
acquires and an acknowledgement to the records it names.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from spark_kafkalite.protocol.errors import ErrorCode

__all__ = ["RecordState", "AcknowledgeType", "InFlightRecord", "SharePartition", "AcquiredBatch"]


class RecordState(enum.IntEnum):
    """Kafka's ``RecordState`` (its ids are the ones ShareSnapshot / ShareUpdate records carry)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """ShareFetch / ShareAcknowledge ``AcknowledgeTypes`` (KIP-932, KIP-1222 adds RENEW)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(slots=True)
class InFlightRecord:
    """One in-flight offset: its state, delivery count, lock holder and lock deadline (ms)."""

    state: RecordState
    delivery_count: int = 0
    member_id: str = ""
    deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class AcquiredBatch:
    """ShareFetch ``AcquiredRecords``: [first_offset, last_offset] with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


class SharePartition:
    """See the module docstring.

    Args:
        start_offset: the initial SPSO (from ``share.auto.offset.reset`` or the persisted state).
        lock_duration_ms: acquisition lock of each delivery.
        delivery_count_limit: deliveries after which a released / expired record is archived.
        max_in_flight: the most records in flight (``group.share.partition.max.record.locks``).
    """

    def __init__(
        self,
        start_offset: int,
        *,
        lock_duration_ms: int = 30_000,
        delivery_count_limit: int = 5,
        max_in_flight: int = 2000,
    ) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.lock_duration_ms = lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight = max_in_flight
        self.in_flight: dict[int, InFlightRecord] = {}
        #: bumped on every change (the persister writes a state epoch per change)
        self.state_epoch = 0
        #: AVAILABLE records in flight, and a lower bound of the ACQUIRED records' lock deadlines:
        #: a fetch with nothing to redeliver and no lock due scans no in-flight record
        self._available = 0
        self._next_deadline_ms = _NO_DEADLINE

    # -- reads ----------------------------------------------------------------------------------
    def next_fetch_offset(self, now_ms: int) -> int:
        """Where the next log read should start: the first AVAILABLE in-flight offset, else SPEO."""
        self.expire_locks(now_ms)
        if self._available:
            return min(o for o, r in self.in_flight.items() if r.state == RecordState.AVAILABLE)
        return self.end_offset

    def can_acquire(self) -> bool:
        """False when the in-flight limit is reached and nothing is AVAILABLE to redeliver."""
        return len(self.in_flight) < self.max_in_flight or self._available > 0

    def acquire(
        self, member_id: str, first_offset: int, last_offset: int, max_records: int, now_ms: int
    ) -> list[AcquiredBatch]:
        """Acquire for ``member_id`` the records of [first_offset, last_offset] (the span of the
        batches just read) that are AVAILABLE in flight or new past SPEO, at most
        ``max_records``. Returns the acquired ranges (consecutive offsets of one delivery count)."""
        self.expire_locks(now_ms)
        acquired: list[AcquiredBatch] = []
        deadline = now_ms + self.lock_duration_ms
        count = 0
        offset = max(first_offset, self.start_offset)
        while offset <= last_offset and count < max_records:
            record = self.in_flight.get(offset)
            if record is None:
                if offset < self.end_offset:  # done (or never a record: a gap in the log)
                    offset += 1
                    continue
                if len(self.in_flight) >= self.max_in_flight:
                    break  # new records wait until SPSO moves
                record = InFlightRecord(RecordState.AVAILABLE)
                self.in_flight[offset] = record
                self.end_offset = offset + 1
            elif record.state != RecordState.AVAILABLE:
                offset += 1
                continue
            else:
                self._available -= 1
            record.state = RecordState.ACQUIRED
            record.delivery_count += 1
            record.member_id = member_id
            record.deadline_ms = deadline
            last = acquired[-1] if acquired else None
            if (
                last is not None
                and last.last_offset == offset - 1
                and last.delivery_count == record.delivery_count
            ):
                acquired[-1] = AcquiredBatch(last.first_offset, offset, last.delivery_count)
            else:
                acquired.append(AcquiredBatch(offset, offset, record.delivery_count))
            count += 1
            offset += 1
        if acquired:
            self.state_epoch += 1
            self._next_deadline_ms = min(self._next_deadline_ms, deadline)
        return acquired

    # -- acknowledgements -----------------------------------------------------------------------
    def acknowledge(
        self, member_id: str, first_offset: int, last_offset: int, types: Sequence[int], now_ms: int
    ) -> ErrorCode:
        """Apply one ``AcknowledgementBatch``: ``types`` has one type for the whole range or one
        per offset. Nothing changes unless every offset is ACQUIRED by ``member_id`` (GAP offsets
        excepted) -> INVALID_RECORD_STATE; a malformed batch -> INVALID_REQUEST."""
        span = last_offset - first_offset + 1
        if span <= 0 or len(types) not in (1, span) or any(t not in _ACK_TYPES for t in types):
            return ErrorCode.invalid_request
        self.expire_locks(now_ms)
        per_offset = [types[0]] * span if len(types) == 1 else list(types)
        for i, ack in enumerate(per_offset):
            if ack == AcknowledgeType.GAP:
                continue
            record = self.in_flight.get(first_offset + i)
            if record is None or record.state != RecordState.ACQUIRED or record.member_id != member_id:
                return ErrorCode.invalid_record_state
        for i, ack in enumerate(per_offset):
            offset = first_offset + i
            record = self.in_flight.get(offset)
            if record is None:
                continue  # a gap below SPSO or never fetched
            if ack == AcknowledgeType.RENEW:
                record.deadline_ms = now_ms + self.lock_duration_ms
            elif ack == AcknowledgeType.ACCEPT:
                self._finish(record, RecordState.ACKNOWLEDGED)
            elif ack == AcknowledgeType.RELEASE:
                self._release(record)
            else:  # REJECT, GAP
                self._finish(record, RecordState.ARCHIVED)
        self.state_epoch += 1
        self._advance_start()
        return ErrorCode.none

    def release_member(self, member_id: str) -> int:
        """Release every record ``member_id`` holds (its share session closed or it left the
        group, ``SharePartition.releaseAcquiredRecords``). Returns how many were released."""
        released = 0
        for record in self.in_flight.values():
            if record.state == RecordState.ACQUIRED and record.member_id == member_id:
                self._release(record)
                released += 1
        if released:
            self.state_epoch += 1
            self._advance_start()
        return released

    def expire_locks(self, now_ms: int) -> int:
        """Release the records whose acquisition lock expired (Kafka's ``AcquisitionLockTimerTask``,
        done lazily before each read or acknowledgement). Returns how many expired."""
        if now_ms < self._next_deadline_ms:
            return 0
        expired = 0
        next_deadline = _NO_DEADLINE
        for record in self.in_flight.values():
            if record.state != RecordState.ACQUIRED:
                continue
            if record.deadline_ms <= now_ms:
                self._release(record)
                expired += 1
            else:
                next_deadline = min(next_deadline, record.deadline_ms)
        self._next_deadline_ms = next_deadline
        if expired:
            self.state_epoch += 1
            self._advance_start()
        return expired

    def move_start(self, log_start_offset: int) -> None:
        """Records below the log start offset are gone (retention, DeleteRecords): SPSO follows."""
        if log_start_offset <= self.start_offset:
            return
        for offset in [o for o in self.in_flight if o < log_start_offset]:
            if self.in_flight.pop(offset).state == RecordState.AVAILABLE:
                self._available -= 1
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self.state_epoch += 1

    # -- state ----------------------------------------------------------------------------------
    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """The in-flight records as (first_offset, last_offset, delivery_count, state) runs, the
        ``StateBatches`` of a ShareSnapshot record (ACQUIRED is written as AVAILABLE: locks do
        not survive a failover, Kafka's ``SharePartition`` does the same)."""
        runs: list[tuple[int, int, int, int]] = []
        for offset in sorted(self.in_flight):
            record = self.in_flight[offset]
            state = RecordState.AVAILABLE if record.state == RecordState.ACQUIRED else record.state
            if runs and runs[-1][1] == offset - 1 and runs[-1][2:] == (record.delivery_count, int(state)):
                runs[-1] = (runs[-1][0], offset, record.delivery_count, int(state))
            else:
                runs.append((offset, offset, record.delivery_count, int(state)))
        return runs

    def load(self, start_offset: int, batches: Iterable[tuple[int, int, int, int]]) -> None:
        """Restore from persisted state: SPSO and the in-flight runs of :meth:`state_batches`."""
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.in_flight.clear()
        self._available = 0
        for first, last, delivery_count, state in batches:
            for offset in range(max(first, start_offset), last + 1):
                self.in_flight[offset] = InFlightRecord(RecordState(state), delivery_count)
                self._available += state == RecordState.AVAILABLE
            self.end_offset = max(self.end_offset, last + 1)
        self._advance_start()

    def _release(self, record: InFlightRecord) -> None:
        if record.delivery_count >= self.delivery_count_limit:
            self._finish(record, RecordState.ARCHIVED)
        else:
            record.state = RecordState.AVAILABLE
            record.member_id = ""
            record.deadline_ms = 0
            self._available += 1

    def _finish(self, record: InFlightRecord, state: RecordState) -> None:
        if record.state == RecordState.AVAILABLE:  # a GAP acknowledgement of a record not held
            self._available -= 1
        record.state = state
        record.member_id = ""
        record.deadline_ms = 0

    def _advance_start(self) -> None:
        in_flight = self.in_flight
        start = self.start_offset
        while start < self.end_offset:
            record = in_flight.get(start)
            if record is not None and record.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            in_flight.pop(start, None)
            start += 1
        self.start_offset = start


_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)
_NO_DEADLINE = 2**63
