"""Where ``kafkalite users add`` reads the password: ``--password-file``, a twice-typed
``getpass`` prompt on a terminal, else the first line of stdin; empty or mismatched passwords are
refused without showing them."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from spark_kafkalite.cli.common import CliError
from spark_kafkalite.cli.users import mechanism_of, read_password


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _args(password_file: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(user="carol", password_file=password_file)


def test_password_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "pw"
    path.write_text("from-file\nignored\n", encoding="utf-8")
    assert read_password(_args(str(path)), io.StringIO("from-stdin\n")) == "from-file"
    assert read_password(_args(), io.StringIO("from-stdin\r\nsecond\n")) == "from-stdin"
    typed = iter(["typed", "typed", "one", "other"])
    monkeypatch.setattr("getpass.getpass", lambda prompt: next(typed))
    assert read_password(_args(), _Tty()) == "typed"
    with pytest.raises(CliError, match="differ") as info:
        read_password(_args(), _Tty())
    assert "one" not in str(info.value) and "other" not in str(info.value)
    with pytest.raises(CliError, match="empty password"):
        read_password(_args(), io.StringIO(""))
    with pytest.raises(CliError, match="cannot read --password-file"):
        read_password(_args(str(tmp_path / "missing")), io.StringIO())


def test_mechanism_names() -> None:
    assert mechanism_of("scram-sha-256").mechanism_name == "SCRAM-SHA-256"
    with pytest.raises(CliError, match="use SCRAM-SHA-256 or SCRAM-SHA-512"):
        mechanism_of("PLAIN")
