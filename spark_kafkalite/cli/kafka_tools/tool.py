"""What every Kafka-style script shares: an argparse parser that fails as Kafka's tools do
(joptsimple's message, then the usage, on stderr, exit status 1), the ``--bootstrap-server`` /
``--command-config`` options, the runner that prints a command's error with the tool's prefix
(``Error while executing topic command : ...``) and Kafka's config-list syntax
(``k1=v1,k2=[a,b]``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO

from spark_kafkalite.cli.common import CliError
from spark_kafkalite.console_errors import error_line

__all__ = [
    "ToolParser",
    "ToolSubParser",
    "UsageError",
    "add_connection",
    "run_tool",
    "parse_config_list",
    "include_list",
    "require",
    "print_table",
]


class UsageError(Exception):
    """Bad command-line input: printed with the usage on stderr, exit status 1 (Kafka's
    ``CommandLineUtils.printUsageAndExit``)."""


class ToolParser(argparse.ArgumentParser):
    """argparse shaped like Kafka's joptsimple parsers: ``--opt value`` and ``--opt=value``,
    long options only, every error a :class:`UsageError` (``foo is not a recognized option``,
    ``Missing required argument "[topic]"``)."""

    def __init__(self, prog: str, description: str) -> None:
        super().__init__(prog=prog, description=description, add_help=False)
        self.add_argument("--help", action="help", help="Print usage information.")
        self.add_argument("--version", action="version", version="spark-kafkalite", help="Display version.")

    def error(self, message: str) -> NoReturn:
        raise UsageError(_joptsimple_message(message))

    def parse_tool_args(self, argv: Sequence[str]) -> argparse.Namespace:
        args, extra = self.parse_known_args(argv)
        if extra:
            name = extra[0]
            if name.startswith("-"):
                raise UsageError(f"{name.lstrip('-')} is not a recognized option")
            raise UsageError(f"Found non-option argument '{name}'")
        return args


class ToolSubParser(argparse.ArgumentParser):
    """A sub-command's parser (``kafka-transactions.sh list``): errors as :class:`ToolParser`."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(_joptsimple_message(message))


def _joptsimple_message(message: str) -> str:
    missing = re.match(r"the following arguments are required: (.+)", message)
    if missing:
        return f'Missing required argument "[{missing.group(1).split(",")[0].strip().lstrip("-")}]"'
    needs_value = re.match(r"argument (--[\w.-]+)(?:/[^:]*)?: expected one argument", message)
    if needs_value:
        return f"Option {needs_value.group(1).lstrip('-')} requires an argument"
    bad_value = re.match(r"argument (--[\w.-]+)(?:/[^:]*)?: invalid \w+ value: (.+)", message)
    if bad_value:
        return f"Cannot parse argument {bad_value.group(2)} of option {bad_value.group(1).lstrip('-')}"
    return message


def add_connection(parser: argparse.ArgumentParser, what: str = "Admin Client") -> None:
    """``--bootstrap-server`` (REQUIRED, checked by :func:`require`) and ``--command-config``."""
    parser.add_argument(
        "--bootstrap-server", metavar="server to connect to", help="REQUIRED: The Kafka server to connect to."
    )
    parser.add_argument(
        "--command-config",
        metavar="command config property file",
        help=f"Property file containing configs to be passed to {what}.",
    )


def require(args: argparse.Namespace, *names: str) -> None:
    """Kafka's ``CommandLineUtils.checkRequiredArgs``: each option in ``names`` must be given.

    Raises:
        UsageError: ``Missing required argument "[name]"``.
    """
    for name in names:
        if getattr(args, name.replace("-", "_"), None) in (None, [], False):
            raise UsageError(f'Missing required argument "[{name}]"')


def parse_config_list(text: str) -> dict[str, str]:
    """Kafka's ``--add-config`` syntax: ``k1=v1,k2=[v1,v2],k3=v3`` (brackets group a value with
    commas, which are kept as the list separator).

    Raises:
        UsageError: an item is not ``key=value``.
    """
    out: dict[str, str] = {}
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                f'Invalid entity config: all configs to be added must be in the format "key=val": {item}'
            )
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def include_list(pattern: str) -> re.Pattern[str]:
    """Kafka's ``TopicFilter.IncludeList``: a regular expression matched against whole names,
    ``,`` meaning ``|``, surrounding quotes and spaces dropped."""
    cleaned = pattern.strip().replace(",", "|").replace(" ", "").strip("\"'")
    try:
        return re.compile(cleaned)
    except re.error as exc:
        raise UsageError(f"{pattern} is an invalid regex: {exc}") from None


def run_tool(
    parser: ToolParser,
    argv: Sequence[str] | None,
    command: Callable[[argparse.Namespace], int],
    error_prefix: str,
    error_stream: TextIO | None = None,
) -> int:
    """Parse ``argv`` and run ``command``; returns the exit status.

    A usage error prints its message and the usage on stderr (status 1); a :class:`CliError` (bad
    input found later, Kafka's IllegalArgumentException) its message on stderr (status 1); any
    other error of the command ``error_prefix`` + its message on ``error_stream`` (Kafka's tools
    differ: the topic and ACL commands print to stdout; default stderr), status 1;
    ``$KAFKALITE_DEBUG`` re-raises.
    """
    stream = error_stream or sys.stderr
    try:
        args = parser.parse_tool_args(sys.argv[1:] if argv is None else list(argv))
        return command(args)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        parser.print_help(sys.stderr)
        return 1
    except CliError as exc:  # Kafka's IllegalArgumentException: the message alone, on stderr
        print(exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - Kafka's tools print one line, not a traceback
        print(f"{error_prefix}{error_line(exc)}", file=stream)
        if os.environ.get("KAFKALITE_DEBUG"):
            raise
        return 1


def print_table(out: TextIO, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Kafka's ``ToolsUtils.prettyPrintTable``: each cell padded to its column's widest cell and
    followed by a tab."""
    cells = [list(map(str, header)), *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        out.write("".join(c.ljust(w) + "\t" for c, w in zip(row, widths, strict=True)) + "\n")
