"""Version-independent request builders: every version in the client's range builds, encodes
and decodes back (via the shared framing), and ApiVersions negotiation rules (KIP-511)."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.api_versions.v0 import response as av0
from kio.schema.api_versions.v3 import response as av3
from kio.schema.errors import ErrorCode

from spark_kafkalite.client.consumer.fetch_session_handler import FetchRequestData, PartitionFetchData
from spark_kafkalite.client.consumer.fetcher import Fetcher
from spark_kafkalite.client.consumer.offset_fetcher import list_offsets_request
from spark_kafkalite.client.metadata import metadata_request
from spark_kafkalite.client.requests import (
    CLIENT_API_VERSIONS,
    RequestBuilder,
    api_versions_request,
    choose_version,
    parse_api_versions_response,
)
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.errors import UnsupportedVersionError
from spark_kafkalite.protocol.framing import (
    decode_request_body,
    decode_request_header,
    encode_request,
    encode_response,
)


def roundtrip(entity: object) -> object:
    frame = encode_request(entity, 7, "client-x")
    header, offset = decode_request_header(frame[4:])
    assert header.correlation_id == 7 and header.client_id == "client-x"
    return decode_request_body(header.api_key, header.api_version, frame[4:], offset)


def versions(api_key: int) -> range:
    lo, hi = CLIENT_API_VERSIONS[api_key]
    return range(lo, hi + 1)


@pytest.mark.parametrize("version", versions(ApiKey.METADATA))
def test_metadata_request_every_version(version: int) -> None:
    some = roundtrip(metadata_request(["a", "b"], True).build(version))
    assert [t.name for t in some.topics] == ["a", "b"]
    everything = roundtrip(metadata_request(None).build(version))
    assert everything.topics is None


@pytest.mark.parametrize("version", versions(ApiKey.LIST_OFFSETS))
def test_list_offsets_request_every_version(version: int) -> None:
    tp = TopicPartition("t", 3)
    decoded = roundtrip(list_offsets_request({tp: -2}, 0, {tp: 4}).build(version))
    assert decoded.replica_id == -1
    (topic,) = decoded.topics
    (part,) = topic.partitions
    assert (topic.name, part.partition_index, part.timestamp) == ("t", 3, -2)


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
def test_fetch_request_every_version(version: int) -> None:
    from spark_kafkalite.client.config import parse_config
    from spark_kafkalite.client.consumer.kafka_consumer import CONSUMER_DEFAULTS
    from spark_kafkalite.client.consumer.subscription_state import SubscriptionState
    from spark_kafkalite.client.metadata import Metadata

    cfg = parse_config({"bootstrap.servers": "h:1", "fetch.max.wait.ms": 250}, CONSUMER_DEFAULTS, "test")
    fetcher = Fetcher(None, Metadata(cfg), SubscriptionState(), cfg)  # type: ignore[arg-type]
    data = FetchRequestData(
        session_id=0,
        epoch=-1,
        to_send={
            TopicPartition("t", 1): PartitionFetchData(
                fetch_offset=42, max_bytes=1024, current_leader_epoch=0
            )
        },
    )
    decoded = roundtrip(fetcher._fetch_request(data).build(version))
    assert decoded.max_wait == datetime.timedelta(milliseconds=250)
    assert decoded.max_bytes == 52428800
    (topic,) = decoded.topics
    (part,) = topic.partitions
    assert (topic.topic, part.partition, part.fetch_offset, part.partition_max_bytes) == ("t", 1, 42, 1024)
    if version >= 7:
        assert (decoded.session_id, decoded.session_epoch) == (0, -1)  # sessionless full fetch


def test_make_drops_fields_the_version_lacks_and_converts_ms() -> None:
    from spark_kafkalite.protocol.api_keys import request_class

    v0 = make(request_class(ApiKey.API_VERSIONS, 0), client_software_name="x")
    assert roundtrip(v0) == v0
    delete = make(request_class(ApiKey.DELETE_TOPICS, 5), topic_names=("a",), timeout=1500)
    assert delete.timeout == datetime.timedelta(milliseconds=1500)


def test_api_versions_request_names_the_client() -> None:
    request = roundtrip(api_versions_request(3))
    assert request.client_software_name == "spark-kafkalite"


def test_choose_version_picks_min_of_maxima() -> None:
    builder = RequestBuilder(ApiKey.FETCH, lambda v: None)
    assert choose_version(1, {int(ApiKey.FETCH): (0, 17)}, builder) == 12
    assert choose_version(1, {int(ApiKey.FETCH): (4, 8)}, builder) == 8
    with pytest.raises(UnsupportedVersionError):
        choose_version(1, {int(ApiKey.FETCH): (0, 3)}, builder)
    with pytest.raises(UnsupportedVersionError):
        choose_version(1, {}, builder)
    narrowed = RequestBuilder(ApiKey.FETCH, lambda v: None, max_version=5)
    assert choose_version(1, {int(ApiKey.FETCH): (0, 17)}, narrowed) == 5


def test_api_versions_unsupported_version_answer_is_parsed_as_v0() -> None:
    # KIP-511: a broker that does not know v3 answers in v0 with UNSUPPORTED_VERSION
    answer = av0.ApiVersionsResponse(
        error_code=ErrorCode.unsupported_version,
        api_keys=(av0.ApiVersion(api_key=18, min_version=0, max_version=2),),
    )
    frame = encode_response(answer, 1)[4:]
    code, ranges = parse_api_versions_response(memoryview(frame), 3)
    assert code == ErrorCode.unsupported_version
    assert ranges == {18: (0, 2)}


def test_api_versions_v3_answer() -> None:
    answer = av3.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=(
            av3.ApiVersion(api_key=0, min_version=0, max_version=11),
            av3.ApiVersion(api_key=1, min_version=4, max_version=12),
        ),
        throttle_time=datetime.timedelta(0),
    )
    frame = encode_response(answer, 1)[4:]
    assert parse_api_versions_response(memoryview(frame), 3) == (0, {0: (0, 11), 1: (4, 12)})
