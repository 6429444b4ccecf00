"""``compile_re2``: Kafka's wire patterns (KIP-1152) in the RE2 dialect, matched whole, with
Kafka's INVALID_REGULAR_EXPRESSION for a pattern RE2 refuses."""

from __future__ import annotations

import pytest

from spark_kafkalite.protocol.errors import ErrorCode, InvalidRegularExpressionError
from spark_kafkalite.protocol.regex import compile_re2


def test_matches_the_whole_id_like_matcher_matches() -> None:
    pattern = compile_re2("txn-[0-9]+")
    assert pattern.fullmatch("txn-42") is not None
    assert pattern.fullmatch("my-txn-42") is None and pattern.fullmatch("txn-42-b") is None


@pytest.mark.parametrize(
    "bad", ["(ab(cd", "a**", r"(a)\1", "(?<=a)b"]
)  # unbalanced, repeat, backref, lookbehind
def test_refused_patterns_raise_kafkas_error_naming_the_pattern(bad: str) -> None:
    with pytest.raises(InvalidRegularExpressionError) as refused:
        compile_re2(bad)
    assert refused.value.error_code == ErrorCode.invalid_regular_expression
    assert repr(bad) in str(refused.value)


@pytest.mark.timeout(20)
def test_a_catastrophic_pattern_for_backtracking_matches_in_linear_time() -> None:
    # Python's re needs ~2**n steps for this; RE2 is linear, so a hostile ListTransactions
    # pattern cannot stall the broker's event loop
    assert compile_re2("(a+)+$").fullmatch("a" * 100_000 + "!") is None
