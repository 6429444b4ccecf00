"""The broker reads requests and responses through their typed (kio) classes, so mypy checks every
field a handler reads against every version it serves: no ``getattr(request, "field", default)``,
no ``Any``-typed request, and a version-dependent field is read after an ``isinstance`` on the
versions that carry it (mypy narrows the union), never under a ``# type: ignore[union-attr]``.

Checked on the source with ``ast``: every ``getattr`` / ``hasattr`` in ``broker/`` must be on the
allowlist below, with the reason it is not a read of a request / response entity.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BROKER = ROOT / "broker"

#: (path under the repository, enclosing function, first argument) -> why a getattr is right there.
ALLOWED_GETATTR: dict[tuple[str, str, str], str] = {
    ("broker/cli.py", "run", "signal"): "SIGXFSZ exists on POSIX only",
    ("broker/prometheus/broker_collector.py", "<module>", "os"): "os.sysconf exists on POSIX only",
    ("broker/cli.py", "main", "logging"): "the --log-level choice names a logging level constant",
    ("broker/controller/acl_store.py", "save_acls", "acl"): "every field of an AclBinding, by name",
    ("broker/controller/quorum.py", "leader_id", "leader"): "pysyncobj's leader node (untyped library)",
    ("broker/coordinator/group/group_metadata_manager.py", "store_txn_offsets", "self.appender"): (
        "capability check: an offsets appender that cannot append transactional batches"
    ),
    (
        "broker/coordinator/group/rebalance.py",
        "cancel_timer",
        "group",
    ): "one of the group's timer slots, by name",
    ("broker/coordinator/transaction/service.py", "_periodic", "job"): "a job's name for a log line",
    ("broker/coordinator/transaction/transaction_marker_channel_manager.py", "close", "self.sender"): (
        "a MarkerSender may hold connections to close (the protocol has no close)"
    ),
    (
        "broker/metrics/meters.py",
        "_child_fields",
        "cls",
    ): "the field names of any entity class (NamedTuple or dataclass)",
    ("broker/metrics/meters.py", "error_counts", "entry"): (
        "Kafka's AbstractResponse.errorCounts written once for every API: a walk over any response's fields"
    ),
    ("broker/log/log_cleaner.py", "_swap", "total"): "sums every field of a stats dataclass",
    ("broker/log/log_cleaner.py", "_swap", "group.stats"): "sums every field of a stats dataclass",
    ("broker/log/producer_state_hooks.py", "new_producer_state", "log"): "a log view may have no LogConfig",
    (
        "broker/log/producer_state_hooks.py",
        "new_producer_state",
        "config",
    ): "a log view may have no LogConfig",
    ("broker/replication/isr_change_manager.py", "alter_isr", "self._controller()"): (
        "a replica manager without a controller that alters partitions changes no ISR"
    ),
}

_REQUEST_NAMES = {"request", "req"}


def _sources() -> Iterator[Path]:
    yield from sorted(BROKER.rglob("*.py"))


def _functions(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node


class _GetattrCalls(ast.NodeVisitor):
    """(innermost enclosing function, first argument's source, line) of each getattr / hasattr."""

    def __init__(self) -> None:
        self.stack: list[str] = ["<module>"]
        self.calls: list[tuple[str, str, int]] = []

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") and node.args:
            self.calls.append((self.stack[-1], ast.unparse(node.args[0]), node.lineno))
        self.generic_visit(node)


def _getattr_calls(path: Path) -> list[tuple[str, str, int]]:
    visitor = _GetattrCalls()
    visitor.visit(ast.parse(path.read_text(), str(path)))
    return visitor.calls


def test_no_getattr_on_request_or_response_entities() -> None:
    found: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for function, target, line in _getattr_calls(path):
            key = (rel, function, target)
            seen.add(key)
            if key not in ALLOWED_GETATTR:
                found.append(f"{rel}:{line} in {function}(): getattr/hasattr on {target}")
    assert not found, (
        "read the field through the request's kio class (isinstance on the versions that carry "
        "it when it is version-dependent), or allowlist a getattr that is not on an entity:\n"
        + "\n".join(found)
    )
    assert set(ALLOWED_GETATTR) <= seen, f"stale allowlist entries: {set(ALLOWED_GETATTR) - seen}"


def _is_any(annotation: ast.expr | None) -> bool:
    return annotation is not None and ast.unparse(annotation) in ("Any", "typing.Any")


def test_no_any_typed_request_in_broker() -> None:
    found: list[str] = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(), str(path))
        for name, fn in _functions(tree):
            args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
            for arg in args:
                if arg.arg in _REQUEST_NAMES and _is_any(arg.annotation):
                    found.append(f"{rel}:{fn.lineno} {name}({arg.arg}: Any)")
            if rel.startswith("broker/apis/") and (
                name.startswith("handle_") or name.endswith("_error_response")
            ):
                if _is_any(fn.returns):
                    found.append(f"{rel}:{fn.lineno} {name}() -> Any")
    assert not found, "type requests and responses with broker.apis.kio_types:\n" + "\n".join(found)


def test_no_unchecked_version_branch_in_handlers() -> None:
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{number}"
        for path in sorted((BROKER / "apis").glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "type: ignore[union-attr]" in line
    ]
    assert not found, (
        "narrow the request with isinstance on the versions that carry the field:\n" + "\n".join(found)
    )
