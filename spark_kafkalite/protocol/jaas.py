"""JAAS configuration text, as Kafka's ``sasl.jaas.config`` carries it (client and broker).

Grammar (Kafka's ``org.apache.kafka.common.security.JaasConfig``, a ``java.io.StreamTokenizer``
with ``//`` and ``/* */`` comments and ``-``, ``_``, ``$`` as word characters)::

    entry   := <LoginModuleClass> <ControlFlag> ( <name> = <value> )* ;
    config  := entry+

``ControlFlag`` is ``required``, ``requisite``, ``sufficient`` or ``optional`` (any case). Values
are words (letters, digits, ``. - _ $``) or quoted with ``"`` or ``'``; quoted values take
StreamTokenizer's backslash escapes (``\\"``, ``\\\\``, ``\\n``, ``\\t``, ``\\r``). A client's
``sasl.jaas.config`` must hold exactly one entry (``JaasContext.loadClientContext``).

Examples (``docs/security.html``)::

    org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";
    org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";

Errors (:class:`JaasConfigError`, a ``ValueError``) name the problem and option names, never
option values: a value may be a password.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "PLAIN_LOGIN_MODULE",
    "SCRAM_LOGIN_MODULE",
    "AppConfigurationEntry",
    "JaasConfigError",
    "parse_jaas_config",
    "single_login_module",
]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_WORD_PUNCT = frozenset(".-_$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` text that does not parse (Kafka raises ``IllegalArgumentException``)."""


@dataclass(frozen=True)
class AppConfigurationEntry:
    """One login module entry (``javax.security.auth.login.AppConfigurationEntry``).

    Attributes:
        login_module: the class name, e.g. :data:`SCRAM_LOGIN_MODULE`.
        control_flag: lower-case flag, e.g. ``"required"``.
        options: option name -> value (``username``, ``password``, ``user_<name>``, ...).
    """

    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # option values may be passwords: names only
        return (
            f"AppConfigurationEntry({self.login_module} {self.control_flag} options={sorted(self.options)})"
        )


# Tokens: ("word", text), ("quoted", text), or ("char", c) for '=' ';' and anything else.
_Token = tuple[str, str]


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c in _WORD_PUNCT or ord(c) >= 128


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JaasConfigError("unterminated /* comment in JAAS config")
            i = end + 2
        elif c in "\"'":
            value, i = _quoted(text, i)
            out.append(("quoted", value))
        elif _is_word_char(c):
            start = i
            while i < n and _is_word_char(text[i]):
                i += 1
            out.append(("word", text[start:i]))
        else:
            out.append(("char", c))
            i += 1
    return out


def _quoted(text: str, start: int) -> tuple[str, int]:
    """The quoted string starting at ``text[start]`` and the index after its closing quote."""
    quote = text[start]
    chars: list[str] = []
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == quote:
            return "".join(chars), i + 1
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            chars.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        if c == "\n":
            break
        chars.append(c)
        i += 1
    raise JaasConfigError("unterminated quoted value in JAAS config")


def parse_jaas_config(text: str) -> list[AppConfigurationEntry]:
    """Parse JAAS configuration text into its entries, in order.

    Raises:
        JaasConfigError: no entry, a missing or unknown control flag, an option without
            ``=value``, or an entry not terminated by ``;`` (Kafka's messages).
    """
    tokens = _tokens(str(text))
    entries: list[AppConfigurationEntry] = []
    i = 0
    while i < len(tokens):
        kind, module = tokens[i]
        if kind != "word":
            raise JaasConfigError("JAAS config entry must start with a login module class name")
        i += 1
        if i >= len(tokens):
            raise JaasConfigError(f"Login module control flag not specified in JAAS config for {module}")
        kind, flag = tokens[i]
        if kind != "word" or flag.lower() not in _CONTROL_FLAGS:
            raise JaasConfigError(
                f"Invalid login module control flag in JAAS config for {module}: "
                f"use one of {', '.join(_CONTROL_FLAGS)}"
            )
        i += 1
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ("char", ";"):
            kind, key = tokens[i]
            if kind != "word":
                raise JaasConfigError(f"Invalid option name in JAAS config for {module}")
            if i + 2 >= len(tokens) or tokens[i + 1] != ("char", "=") or tokens[i + 2][0] == "char":
                raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasConfigError("JAAS config entry not terminated by semi-colon")
        i += 1  # the ';'
        entries.append(AppConfigurationEntry(module, flag.lower(), options))
    if not entries:
        raise JaasConfigError("Login module not specified in JAAS config")
    return entries


def single_login_module(text: str) -> AppConfigurationEntry:
    """The one entry of a client's ``sasl.jaas.config`` (``JaasContext.loadClientContext``).

    Raises:
        JaasConfigError: the text does not parse or holds more than one entry.
    """
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasConfigError(
            f"JAAS config property contains {len(entries)} login modules, should be 1 module"
        )
    return entries[0]
