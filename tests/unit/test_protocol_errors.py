"""The exception tree in spark_kafkalite.protocol.errors and the metadata-refresh rule."""

from __future__ import annotations

import pickle

from spark_kafkalite.protocol import errors
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownServerError,
    error_for_code,
    needs_metadata_refresh,
)


def test_every_kio_code_has_a_declared_class_with_kafka_retriable_flag() -> None:
    for code in ErrorCode:
        if code is ErrorCode.none:
            continue
        err = error_for_code(code, "ctx")
        assert type(err) is not KafkaError, code
        assert err.error_code == int(code)
        assert err.retriable is bool(code.retriable)
        assert getattr(errors, type(err).__name__) is type(err)  # declared at module level
        assert type(err).__name__ in errors.__all__


def test_names_follow_java_exceptions() -> None:
    assert UnknownServerError.error_code == -1
    assert KafkaStorageError.error_code == ErrorCode.kafka_storage_error
    assert str(NotLeaderOrFollowerError("p0")) == "NOT_LEADER_OR_FOLLOWER: p0"
    err = pickle.loads(pickle.dumps(KafkaStorageError("disk")))
    assert type(err) is KafkaStorageError


def test_unknown_code_gives_generic_error() -> None:
    err = error_for_code(30000)
    assert type(err) is KafkaError and err.error_code == 30000


def test_metadata_refresh_is_kafkas_invalid_metadata_family() -> None:
    for code in (
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.leader_not_available,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.kafka_storage_error,
        ErrorCode.replica_not_available,
    ):
        assert needs_metadata_refresh(code), code
    for code in (
        ErrorCode.none,
        ErrorCode.offset_out_of_range,
        ErrorCode.not_coordinator,  # the coordinator is looked up again, not the metadata
        ErrorCode.unknown_server_error,
        ErrorCode.record_list_too_large,
    ):
        assert not needs_metadata_refresh(code), code
