"""Java ``.properties`` files (``java.util.Properties.load``): the broker's config files and the
client config files of ``kafkalite --command-config`` (Kafka tools' convention)."""

from __future__ import annotations

import re

__all__ = ["parse_properties"]


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parse Java ``.properties`` text: ``key=value``, ``key: value`` or ``key value`` lines,
    ``#``/``!`` comments, backslash line continuations and ``\\t \\n \\uXXXX`` escapes.

    Raises:
        ValueError: ``"<source>:<line>: cannot parse line ..."`` for a line with an empty key.
    """
    result: dict[str, str] = {}
    logical: list[tuple[int, str]] = []
    pending = ""
    pending_line = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if not pending:
            pending_line = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append((pending_line, pending + line))
        pending = ""
    if pending:
        logical.append((pending_line, pending))
    for number, line in logical:
        match = re.match(r"((?:\\.|[^=:\s\\])+)\s*[=:\s]?\s*(.*)$", line, re.DOTALL)
        if match is None:
            raise ValueError(f"{source}:{number}: cannot parse line {line!r}")
        key = _unescape(match.group(1))
        result[key] = _unescape(match.group(2))
    return result


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and i + 6 <= len(text):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        i += 2
    return "".join(out)
