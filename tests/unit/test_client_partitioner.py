"""Producer partitioning: Java-compatible murmur2 and the sticky partitioner."""

from __future__ import annotations

import pytest

from spark_kafkalite.client.producer.partitioner import (
    StickyPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

# Kafka's UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java).
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), sorted(JAVA_VECTORS.items()))
def test_murmur2_matches_java_utils(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_covers_every_tail_length() -> None:
    # lengths 0..3 mod 4 all go through different tail branches; results are signed 32-bit ints
    for n in range(0, 9):
        h = murmur2(bytes(range(n)))
        assert -(2**31) <= h < 2**31
    assert murmur2(b"") == 275646681


def test_to_positive_clears_the_sign_bit_like_java() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_partition_for_key_uses_to_positive_not_abs() -> None:
    key = b"21"  # murmur2 negative: abs() would pick another partition for some counts
    assert partition_for_key(key, 7) == (-973932308 & 0x7FFFFFFF) % 7
    assert partition_for_key(key, 7) != abs(-973932308) % 7
    assert all(0 <= partition_for_key(bytes([i]), 3) < 3 for i in range(256))


def test_sticky_partitioner_sticks_until_batch_size_then_moves() -> None:
    sticky = StickyPartitioner(sticky_batch_size_bytes=100)
    first = sticky.partition("t", [0, 1, 2], 3, 40)
    assert sticky.partition("t", [0, 1, 2], 3, 40) == first
    assert sticky.partition("t", [0, 1, 2], 3, 40) == first  # 120 bytes now: next call switches
    second = sticky.partition("t", [0, 1, 2], 3, 40)
    assert second != first


def test_sticky_partitioner_avoids_partitions_without_leader() -> None:
    sticky = StickyPartitioner(sticky_batch_size_bytes=10)
    seen = {sticky.partition("t", [1], 3, 10) for _ in range(20)}
    assert seen == {1}
    # nothing available: fall back to every partition
    assert 0 <= sticky.partition("u", [], 2, 1) < 2


@pytest.mark.parametrize("sizes", [[10] * 25, [1, 50, 3, 99, 2, 2, 2, 70, 5] * 4, [500, 1, 1], [7]])
def test_sticky_partition_runs_pick_what_per_record_calls_pick(sizes: list[int]) -> None:
    import itertools
    import random

    random.seed(11)
    one_by_one = StickyPartitioner(100)
    expected = [one_by_one.partition("t", [0, 1, 2, 3], 4, s) for s in sizes]
    random.seed(11)
    runs = StickyPartitioner(100).partition_runs("t", [0, 1, 2, 3], 4, list(itertools.accumulate(sizes)))
    got: list[int] = []
    start = 0
    for end, partition in runs:
        got += [partition] * (end - start)
        start = end
    assert got == expected
