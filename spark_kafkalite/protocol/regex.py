"""Regular expressions in Kafka requests: the RE2 dialect.

Kafka evaluates the patterns clients send on the wire (ListTransactions v2's
``TransactionalIdPattern``, KIP-1152; KIP-848's ``SubscribedTopicRegex``) with RE2/J, not
``java.util.regex``: linear-time matching, no backreferences or lookaround. We use Google's RE2
(the ``google-re2`` package) for the same dialect and the same guarantee, so a hostile pattern
cannot make the broker's event loop backtrack for minutes as Python's ``re`` could
(``(a+)+$`` against ``aaaa...b``). Matching follows ``Matcher.matches()``: the whole string.
"""

from __future__ import annotations

from typing import Protocol

import re2

from spark_kafkalite.protocol.errors import InvalidRegularExpressionError

__all__ = ["CompiledPattern", "compile_re2"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every refused pattern on stderr; the caller reports it


class CompiledPattern(Protocol):
    """What ``compile_re2`` returns: ``fullmatch(text)`` is a match object or None."""

    def fullmatch(self, text: str) -> object | None: ...


def compile_re2(pattern: str) -> CompiledPattern:
    """Compile ``pattern`` in the RE2 dialect.

    Raises:
        InvalidRegularExpressionError: RE2 refuses the pattern (Kafka's INVALID_REGULAR_EXPRESSION,
            128); the message names the pattern and why.
    """
    try:
        compiled: CompiledPattern = re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = (
            exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        )
        raise InvalidRegularExpressionError(f"invalid regular expression {pattern!r}: {reason}") from None
    return compiled
