"""Offset JSON canonicalisation and parsing (pure logic)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_kafkalite.client.types import TopicPartition as TP
from spark_kafkalite.datasource.offsets import (
    OffsetJsonError,
    format_partitions,
    from_offset_dict,
    offset_json,
    parse_partition_offsets,
    parse_partitions,
    to_offset_dict,
)


def test_canonical_order_and_string_keys() -> None:
    offsets = {TP("b", 0): 1, TP("a", 10): 5, TP("a", 2): 7, TP("a", 1): 0}
    canonical = to_offset_dict(offsets)
    assert list(canonical) == ["a", "b"]
    assert list(canonical["a"]) == ["1", "2", "10"]
    # Spark compares offsets as json.dumps strings: same map, same text, whatever the insertion order
    shuffled = dict(reversed(list(offsets.items())))
    assert json.dumps(to_offset_dict(shuffled)) == json.dumps(canonical)
    assert offset_json(offsets) == '{"a":{"1":0,"2":7,"10":5},"b":{"0":1}}'


def test_round_trip_through_json_loads() -> None:
    offsets = {TP("t", 0): 12, TP("t", 1): 7}
    back = from_offset_dict(json.loads(json.dumps(to_offset_dict(offsets))))
    assert back == offsets
    assert from_offset_dict({"t": {0: 3}}) == {TP("t", 0): 3}  # int keys (before Spark's JSON trip)
    assert from_offset_dict(None) == {}


@given(
    st.dictionaries(
        st.tuples(st.sampled_from(["a", "b", "c.d"]), st.integers(0, 1000)), st.integers(-2, 2**62)
    )
)
def test_round_trip_property(raw: dict[tuple[str, int], int]) -> None:
    offsets = {TP(t, p): o for (t, p), o in raw.items()}
    text = json.dumps(to_offset_dict(offsets))
    assert from_offset_dict(json.loads(text)) == offsets
    assert json.dumps(to_offset_dict(from_offset_dict(json.loads(text)))) == text


@pytest.mark.parametrize(
    "text", ["", "[]", "{}", '{"t":5}', '{"t":{"x":1}}', '{"t":{"0":"1"}}', '{"t":{}}', "nope"]
)
def test_bad_partition_offsets(text: str) -> None:
    with pytest.raises(OffsetJsonError, match=r"Expected e\.g\. \{\"topicA\""):
        parse_partition_offsets(text)


def test_parse_partition_offsets() -> None:
    assert parse_partition_offsets('{"t":{"0":23,"1":-1},"u":{"0":-2}}') == {
        TP("t", 0): 23,
        TP("t", 1): -1,
        TP("u", 0): -2,
    }


def test_parse_partitions() -> None:
    assert parse_partitions('{"t":[0,2],"u":[1]}') == [TP("t", 0), TP("t", 2), TP("u", 1)]
    for bad in ('{"t":[]}', '{"t":["0"]}', '{"t":[-1]}', "[1]", '{"t":1}'):
        with pytest.raises(OffsetJsonError, match=r"Expected e\.g\. \{\"topicA\":\[0,1\]"):
            parse_partitions(bad)


def test_format_partitions() -> None:
    assert format_partitions({TP("b", 0), TP("a", 10), TP("a", 2)}) == "[a-2, a-10, b-0]"
