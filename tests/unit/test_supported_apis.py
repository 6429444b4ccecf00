"""The supported-API table is the one source of the versions: docs/broker.md "Supported APIs"
lists exactly its advertised ranges, ApiVersions (every version) answers exactly them, and every
API our own client speaks overlaps the broker's range."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from broker.apis.kafka_apis import KafkaApis
from broker.apis.supported_apis import SUPPORTED_APIS
from broker.network.request_context import RequestContext
from spark_kafkalite.client.requests import CLIENT_API_VERSIONS, api_versions_request
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.framing import decode_request_header, decode_response, encode_request

_DOC = Path(__file__).resolve().parents[2] / "docs" / "broker.md"
_ROW = re.compile(r"^\| (\w+) \| (\d+) \| (\d+)(?:-(\d+))? \|")


def _table() -> dict[int, tuple[int, int]]:
    return {int(s.api_key): s.advertised_range for s in SUPPORTED_APIS}


def _documented() -> dict[int, tuple[str, int, int]]:
    text = _DOC.read_text(encoding="utf-8")
    section = text[text.index("## Supported APIs") :]
    section = section[: section.index("\n## ", 1)]
    rows: dict[int, tuple[str, int, int]] = {}
    for line in section.splitlines():
        match = _ROW.match(line)
        if match:
            name, key, low, high = match.groups()
            assert int(key) not in rows, f"{name} listed twice"
            rows[int(key)] = (name, int(low), int(high if high is not None else low))
    return rows


def test_one_row_per_api_key() -> None:
    keys = [int(s.api_key) for s in SUPPORTED_APIS]
    assert len(keys) == len(set(keys))


def test_docs_list_exactly_the_table() -> None:
    documented = _documented()
    assert {key: (low, high) for key, (_, low, high) in documented.items()} == _table()
    for key, (name, _, _) in documented.items():
        # Kafka's API names (ApiKeys.name in CamelCase: DescribeUserScramCredentials)
        assert name == "".join(word.capitalize() for word in ApiKey(key).name.split("_"))


@pytest.mark.parametrize(
    "version", range(_table()[ApiKey.API_VERSIONS][0], _table()[ApiKey.API_VERSIONS][1] + 1)
)
def test_api_versions_answers_the_table(version: int) -> None:
    frame = encode_request(api_versions_request(version), 5, "unit")[4:]
    header, offset = decode_request_header(frame)
    rctx = RequestContext(header, "conn-1", "127.0.0.1", "PLAINTEXT", 0.0)
    answer = asyncio.run(KafkaApis(None)(rctx, frame, offset))  # type: ignore[arg-type]
    assert answer is not None
    correlation_id, response = decode_response(ApiKey.API_VERSIONS, version, bytes(answer)[4:])
    assert correlation_id == 5 and int(response.error_code) == 0
    advertised = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
    assert advertised == _table()


@pytest.mark.parametrize("api_key", sorted(CLIENT_API_VERSIONS))
def test_client_ranges_overlap_the_broker(api_key: int) -> None:
    client_low, client_high = CLIENT_API_VERSIONS[api_key]
    broker_low, broker_high = _table()[api_key]
    spec = next(s for s in SUPPORTED_APIS if s.api_key == api_key)
    # the negotiated version (min of the maxima) must be one the broker serves, not only advertises
    assert spec.min_version <= min(client_high, broker_high) and client_low <= broker_high
