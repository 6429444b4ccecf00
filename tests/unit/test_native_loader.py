"""protocol/native.py: KAFKALITE_PURE_PYTHON forces the pure-Python twin; a native module that
cannot be imported falls back with ONE warning naming the cause, or raises when
KAFKALITE_REQUIRE_NATIVE is set."""

from __future__ import annotations

import logging

import pytest

from spark_kafkalite.protocol import native, record_decode


@pytest.fixture(autouse=True)
def fresh_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "_failures", {})


def test_pure_python_env_forces_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1")
    assert native.pure_python_forced()
    assert native.load_twin(native.RECORD_DECODE) is record_decode
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "0")
    assert not native.pure_python_forced()


def test_failed_native_import_warns_once_naming_the_cause(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(native.PURE_PYTHON_ENV, raising=False)
    monkeypatch.delenv(native.REQUIRE_NATIVE_ENV, raising=False)
    caplog.set_level(logging.DEBUG, logger=native.__name__)
    for missing in (
        "spark_kafkalite.protocol._missing_a",
        "spark_kafkalite.protocol._missing_a",
        "spark_kafkalite.protocol._missing_b",
    ):
        assert (
            native.load_twin(native.Twin(missing, "spark_kafkalite.protocol.record_decode")) is record_decode
        )
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "ModuleNotFoundError" in warnings[0].getMessage()
    assert "_missing_a" in warnings[0].getMessage()


def test_require_native_env_makes_a_failed_native_import_an_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(native.PURE_PYTHON_ENV, raising=False)
    monkeypatch.setenv(native.REQUIRE_NATIVE_ENV, "1")
    assert native.native_required()
    missing = native.Twin("spark_kafkalite.protocol._missing_c", "spark_kafkalite.protocol.record_decode")
    with pytest.raises(ImportError, match="_missing_c is not available.*KAFKALITE_REQUIRE_NATIVE is set"):
        native.load_twin(missing)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    # forcing the twin is a choice, not a failure
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1")
    assert native.load_twin(missing) is record_decode
    monkeypatch.setenv(native.REQUIRE_NATIVE_ENV, "0")
    assert not native.native_required()


def test_native_status_names_each_extension() -> None:
    status = native.native_status()
    assert set(status) == {twin.compiled for twin in native.TWINS}
    assert all(v == "native" or v.startswith("NOT BUILT") for v in status.values())


def test_package_status_names_the_protocol_and_client_extensions() -> None:
    from spark_kafkalite import native as package_native
    from spark_kafkalite.client.producer import native_extensions

    status = package_native.native_status()
    assert set(status) == {twin.compiled for twin in native.TWINS + native_extensions.TWINS}
    assert not any(twin.compiled.startswith("spark_kafkalite.client") for twin in native.TWINS)
