"""ApiVersions (key 18): the supported (api_key, min, max) table, and KIP-511 fallbacks.

* The response always uses response header v0 (framing handles that).
* An unsupported ApiVersions version is answered as **v0** with ``UNSUPPORTED_VERSION`` and our
  ApiVersions range, without parsing the body (``ApiVersionsRequest.getErrorResponse``); clients
  retry with a version in that range.
* v3+ validates ClientSoftwareName/Version (``INVALID_REQUEST`` when illegal).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3

from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import ApiVersionsRequest, ApiVersionsResponse

__all__ = ["api_versions_response", "unsupported_version_response", "valid_client_software"]

_SOFTWARE_RE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def valid_client_software(request: ApiVersionsRequest) -> bool:
    """KIP-511: ClientSoftwareName and ClientSoftwareVersion must match
    ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?`` (v3+ only; older versions have neither)."""
    if not isinstance(request, ApiVersionsRequestV3):
        return True
    name, version = request.client_software_name, request.client_software_version
    return bool(name and version and _SOFTWARE_RE.match(name) and _SOFTWARE_RE.match(version))


#: Features (KIP-584) this broker supports and has finalized, name -> (min, max, finalized level):
#: ``group.version`` 1 is KIP-848's consumer group protocol (Kafka's ``GroupVersion.GV_1``),
#: which clients check before sending ConsumerGroupHeartbeat; ``share.version`` 1 is KIP-932's
#: share groups (Kafka's ``ShareVersion.SV_1``). The levels are fixed (no UpdateFeatures is
#: served), so the finalized epoch stays 0.
FEATURES: dict[str, tuple[int, int, int]] = {"group.version": (0, 1, 1), "share.version": (0, 1, 1)}
FINALIZED_FEATURES_EPOCH = 0


def api_versions_response(
    version: int, error_code: ErrorCode, ranges: Sequence[tuple[int, int, int]]
) -> ApiVersionsResponse:
    """An ApiVersionsResponse of ``version`` listing ``ranges`` = [(api_key, min, max)] and,
    from v3 on a success, the supported and finalized :data:`FEATURES` (tagged fields)."""
    cls = response_class(ApiKey.API_VERSIONS, version)
    api_version_cls = nested(cls, "ApiVersion")
    keys = tuple(api_version_cls(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in sorted(ranges))
    if version < 3 or error_code != ErrorCode.none:
        return build(cls, error_code=error_code, api_keys=keys, throttle_time=ZERO_DURATION)
    supported_cls = nested(cls, "SupportedFeatureKey")
    finalized_cls = nested(cls, "FinalizedFeatureKey")
    return build(
        cls,
        error_code=error_code,
        api_keys=keys,
        throttle_time=ZERO_DURATION,
        supported_features=tuple(
            supported_cls(name=name, min_version=lo, max_version=hi) for name, (lo, hi, _) in FEATURES.items()
        ),
        finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
        finalized_features=tuple(
            finalized_cls(name=name, min_version_level=level, max_version_level=level)
            for name, (_, _, level) in FEATURES.items()
        ),
    )


def unsupported_version_response(api_versions_range: tuple[int, int]) -> ApiVersionsResponse:
    """The v0 answer to an ApiVersions request of an unsupported version: UNSUPPORTED_VERSION
    plus our own ApiVersions range."""
    lo, hi = api_versions_range
    return api_versions_response(0, ErrorCode.unsupported_version, [(ApiKey.API_VERSIONS, lo, hi)])
