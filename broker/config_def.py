"""How a configuration key is declared, parsed and validated (Kafka's ``ConfigDef``): its
:class:`ConfigKey` (name, type, typed default, doc, validator), the parsers of the types, the
validators (``ConfigDef.Range`` / ``ValidString``) and :class:`ConfigError`. The broker's keys are
declared in :mod:`broker.server_configs`, the topic-level keys in
:mod:`broker.controller.topic_configs`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ConfigError",
    "ConfigKey",
    "Validator",
    "LONG_MAX",
    "INT_MAX",
    "at_least",
    "between",
    "one_of",
    "non_empty_list",
    "parse_list",
]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A configuration key is unknown or its value is invalid; ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"{key}: {message}")


# ---------------------------------------------------------------------------------------------
# types and validators

Parser = Callable[[str], Any]
Validator = Callable[[Any], str | None]  # returns an error message or None


def _parse_int(text: str) -> int:
    value = int(text.strip(), 10)
    if not -(2**31) <= value <= INT_MAX:
        raise ValueError(f"{value} does not fit a 32-bit int")
    return value


def _parse_long(text: str) -> int:
    value = int(text.strip(), 10)
    if not -(2**63) <= value <= LONG_MAX:
        raise ValueError(f"{value} does not fit a 64-bit long")
    return value


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _parse_double(text: str) -> float:
    return float(text.strip())


def _parse_string(text: str) -> str:
    return text.strip()


def parse_list(text: str) -> list[str]:
    """A comma-separated list (Kafka's ``ConfigDef.Type.LIST``): items stripped, "" is []."""
    stripped = text.strip()
    if not stripped:
        return []
    return [item.strip() for item in stripped.split(",")]


_PARSERS: dict[str, Parser] = {
    "int": _parse_int,
    "long": _parse_long,
    "short": _parse_int,
    "boolean": _parse_bool,
    "double": _parse_double,
    "string": _parse_string,
    "list": parse_list,
    "password": _parse_string,
}


def at_least(minimum: int | float) -> Validator:
    """Kafka's ``ConfigDef.Range.atLeast``."""

    def check(value: Any) -> str | None:
        if value is not None and value < minimum:
            return f"value must be at least {minimum}"
        return None

    return check


def between(low: int, high: int) -> Validator:
    """Kafka's ``ConfigDef.Range.between`` (inclusive)."""

    def check(value: Any) -> str | None:
        if value is not None and not low <= value <= high:
            return f"value must be between {low} and {high}"
        return None

    return check


def one_of(*choices: str, case_sensitive: bool = True) -> Validator:
    """Kafka's ``ConfigDef.ValidString.in`` / ``CaseInsensitiveValidString``."""

    def check(value: Any) -> str | None:
        if value is None:
            return None
        items = value if isinstance(value, list) else [value]
        for item in items:
            probe = item if case_sensitive else item.lower()
            allowed = choices if case_sensitive else tuple(c.lower() for c in choices)
            if probe not in allowed:
                return f"{item!r} is not one of {', '.join(choices)}"
        return None

    return check


def non_empty_list(value: Any) -> str | None:
    """A list with at least one non-empty item (Kafka's ``ConfigDef.NonEmptyList``-like check)."""
    if value is not None and not [v for v in value if v]:
        return "list must not be empty"
    return None


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One configuration key: its Kafka name, type (int, long, short, boolean, double, string,
    list, password), default (already typed; None = no value), doc, and validator."""

    name: str
    type: str
    default: Any
    doc: str
    validator: Validator | None = None

    def parse(self, raw: str) -> Any:
        """Parse and validate ``raw``; raises :class:`ConfigError` naming the key."""
        try:
            value = _PARSERS[self.type](raw)
        except ValueError as exc:
            raise ConfigError(self.name, f"invalid {self.type} value {raw!r} ({exc})") from None
        self.check(value)
        return value

    def check(self, value: Any) -> None:
        if self.validator is not None:
            problem = self.validator(value)
            if problem:
                raise ConfigError(self.name, f"invalid value {value!r}: {problem}")
