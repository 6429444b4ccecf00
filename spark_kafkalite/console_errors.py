"""How the console entry points (``kafkalite`` and ``python -m spark_kafkalite.demo``) report
errors: one line on stderr instead of a traceback, with the exit status of a Unix tool."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable

__all__ = ["error_line", "run_reporting_errors"]

_ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$")


def error_line(exc: BaseException) -> str:
    """One informative line for ``exc``.

    Spark wraps Python data source errors (a Python traceback inside a JVM exception); the most
    useful line is then the last ``SomeError: message`` line of the embedded traceback.
    """
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    matches = [m for m in map(_ERROR_LINE.match, lines) if m]
    if matches and (java is not None or len(lines) > 1):
        python_errors = [m for m in matches if not m.group(1).startswith(("Py4J", "Python"))]
        best = (python_errors or matches)[-1]
        return f"{best.group(1)}: {best.group(2)}"
    return lines[0]


def run_reporting_errors(command: Callable[[], int], prog: str = "kafkalite") -> int:
    """Run ``command`` and return its exit status; an exception prints ``<prog>: error: <line>``
    to stderr and gives 1 (re-raised when ``$KAFKALITE_DEBUG`` is set), Ctrl-C gives 130 and a
    closed stdout pipe 0."""
    try:
        return command()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - one clear line instead of a traceback
        print(f"{prog}: error: {error_line(exc)}", file=sys.stderr)
        if os.environ.get("KAFKALITE_DEBUG"):
            raise
        return 1
