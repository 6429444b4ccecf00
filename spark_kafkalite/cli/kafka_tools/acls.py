"""``kafka-acls.sh``: Kafka's ``AclCommand`` (``--add``, ``--remove``, ``--list``) over our admin
client; the bindings come from :func:`spark_kafkalite.cli.acls.bindings_to_add` and
:func:`~spark_kafkalite.cli.acls.filters_of`, shared with ``kafkalite acls``.

    kafka-acls.sh --bootstrap-server H:P --add --allow-principal User:alice \\
        --operation Read --operation Describe --topic orders [--resource-pattern-type prefixed]
    kafka-acls.sh --bootstrap-server H:P --add --deny-principal 'User:*' --operation All \\
        --deny-host '*' --topic secret
    kafka-acls.sh --bootstrap-server H:P --list [--topic orders] [--principal User:alice]
    kafka-acls.sh --bootstrap-server H:P --remove --force --allow-principal User:alice \\
        --operation Read --topic orders

Operations are read as Kafka's ``SecurityUtils.operation`` does (any case, ``DescribeConfigs``
or ``DESCRIBE_CONFIGS``). Output: ``Adding ACLs for resource `ResourcePattern(resourceType=TOPIC,
name=orders, patternType=LITERAL)`:`` then one ``<TAB>(principal=User:alice, host=*,
operation=READ, permissionType=ALLOW)`` line per ACL; ``--list`` prints ``Current ACLs for
resource `...`:``. Without ``--force``, ``--remove`` asks on stdin first. ``--producer`` and
``--consumer`` add the ACLs a producer (WRITE, DESCRIBE, CREATE on topics; WRITE, DESCRIBE on
transactional ids; IDEMPOTENT_WRITE on the cluster with ``--idempotent``) or a consumer (READ,
DESCRIBE on topics, READ on groups) needs. Errors print ``Error while executing ACL command:``
on stdout, exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence

from spark_kafkalite.cli.acls import bindings_to_add, filters_of
from spark_kafkalite.cli.common import client_config
from spark_kafkalite.cli.kafka_tools.tool import ToolParser, UsageError, add_connection, run_tool
from spark_kafkalite.protocol.acl import AclBinding, AclBindingFilter, AclOperation, PatternType

__all__ = ["main", "build_parser", "operation"]


def operation(name: str) -> str:
    """Kafka's ``SecurityUtils.operation``: ``Read``, ``READ``, ``DescribeConfigs`` or
    ``describe_configs`` -> the :class:`AclOperation` name.

    Raises:
        UsageError: not an operation.
    """
    wanted = name.replace("_", "").replace("-", "").upper()
    for op in AclOperation:
        if op not in (AclOperation.UNKNOWN, AclOperation.ANY) and op.name.replace("_", "") == wanted:
            return op.name
    raise UsageError(f"Unknown operation name: {name}")


def build_parser() -> ToolParser:
    """The options of Kafka's ``AclCommandOptions`` this tool supports."""
    parser = ToolParser("kafka-acls.sh", "This tool helps to manage acls on kafka.")
    add_connection(parser)
    parser.add_argument("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    parser.add_argument("--remove", action="store_true", help="Indicates you are trying to remove ACLs.")
    parser.add_argument("--list", action="store_true", help="List ACLs for the specified resource.")
    parser.add_argument(
        "--topic", action="append", default=[], help="topic to which ACLs should be added or removed."
    )
    parser.add_argument(
        "--group",
        action="append",
        default=[],
        help="Consumer Group to which the ACLs should be added or removed.",
    )
    parser.add_argument(
        "--transactional-id",
        action="append",
        default=[],
        help="The transactionalId to which ACLs should be added or removed.",
    )
    parser.add_argument("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    parser.add_argument(
        "--resource-pattern-type",
        type=str.upper,
        choices=[p.name for p in PatternType if p != PatternType.UNKNOWN],
        help="The type of the resource pattern or pattern filter (default literal; --list/--remove: any without a resource).",
    )
    parser.add_argument(
        "--allow-principal", action="append", default=[], help="principal is in principalType:name format."
    )
    parser.add_argument(
        "--deny-principal", action="append", default=[], help="principal is in principalType:name format."
    )
    parser.add_argument(
        "--principal", action="append", default=[], help="List ACLs for the specified principal."
    )
    parser.add_argument(
        "--allow-host", action="append", default=[], help="Host from which principals will have access."
    )
    parser.add_argument(
        "--deny-host", action="append", default=[], help="Host from which principals will be denied access."
    )
    parser.add_argument(
        "--operation",
        action="append",
        default=[],
        type=operation,
        help="Operation that is being allowed or denied (default All).",
    )
    parser.add_argument(
        "--producer", action="store_true", help="Convenience option to add/remove ACLs for producer role."
    )
    parser.add_argument(
        "--consumer", action="store_true", help="Convenience option to add/remove ACLs for consumer role."
    )
    parser.add_argument(
        "--idempotent", action="store_true", help="Enable idempotence for the producer (with --producer)."
    )
    parser.add_argument("--force", action="store_true", help="Assume Yes to all queries and do not prompt.")
    return parser


def _resources(args: argparse.Namespace) -> list[dict[str, object]]:
    """One dict of ``spark_kafkalite.cli.acls`` resource options per resource given."""
    out: list[dict[str, object]] = [{"topic": t} for t in args.topic]
    out += [{"group": g} for g in args.group]
    out += [{"transactional_id": t} for t in args.transactional_id]
    if args.cluster:
        out.append({"cluster": True})
    return out


def _namespace(
    args: argparse.Namespace, resource: dict[str, object], operations: Iterable[str]
) -> argparse.Namespace:
    fields = {
        "topic": None,
        "group": None,
        "transactional_id": None,
        "cluster": False,
        "resource_pattern_type": args.resource_pattern_type or ("LITERAL" if args.add else None),
        "allow_principal": args.allow_principal,
        "deny_principal": args.deny_principal,
        "allow_host": args.allow_host,
        "deny_host": args.deny_host,
        "operation": list(operations),
        "principal": None,
    }
    fields.update(resource)
    return argparse.Namespace(**fields)


def _requests(args: argparse.Namespace) -> list[argparse.Namespace]:
    """Kafka's ``getResourceFilterToAcls``: one request per (resource, operations)."""
    resources = _resources(args)
    if not args.producer and not args.consumer:
        return [_namespace(args, r, args.operation) for r in resources]
    out = []
    for r in resources:
        if args.producer and "topic" in r:
            out.append(_namespace(args, r, ["WRITE", "DESCRIBE", "CREATE"]))
        if args.producer and "transactional_id" in r:
            out.append(_namespace(args, r, ["WRITE", "DESCRIBE"]))
        if args.consumer and "topic" in r:
            out.append(_namespace(args, r, ["READ", "DESCRIBE"]))
        if args.consumer and "group" in r:
            out.append(_namespace(args, r, ["READ"]))
    if args.producer and args.idempotent:
        out.append(_namespace(args, {"cluster": True}, ["IDEMPOTENT_WRITE"]))
    return out


def _pattern(resource_type: str, name: str | None, pattern: str) -> str:
    return f"ResourcePattern(resourceType={resource_type}, name={'<any>' if name is None else name}, patternType={pattern})"


def _entry(principal: str | None, host: str | None, op: str, permission: str) -> str:
    return (
        f"(principal={'<any>' if principal is None else principal}, host={'<any>' if host is None else host}, "
        f"operation={op}, permissionType={permission})"
    )


def _binding_entry(acl: AclBinding) -> str:
    return _entry(acl.principal, acl.host, acl.operation.name, acl.permission_type.name)


def _filter_entry(f: AclBindingFilter) -> str:
    return _entry(f.principal, f.host, f.operation.name, f.permission_type.name)


def _print_acls(bindings: Iterable[AclBinding], title: str) -> None:
    by_resource: dict[str, list[str]] = {}
    for acl in bindings:
        key = _pattern(acl.resource_type.name, acl.resource_name, acl.pattern_type.name)
        by_resource.setdefault(key, []).append(_binding_entry(acl))
    for resource, entries in sorted(by_resource.items()):
        print(f"{title} `{resource}`:\n" + "\n".join(f"\t{e}" for e in sorted(set(entries))) + "\n")


def _confirm(args: argparse.Namespace, message: str) -> bool:
    if args.force:
        return True
    print(message)
    return sys.stdin.readline().strip().lower() == "y"


def _run(args: argparse.Namespace) -> int:
    from spark_kafkalite.client import KafkaAdminClient

    actions = [a for a in ("add", "remove", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove. ")
    if not args.bootstrap_server:
        raise UsageError("One of --bootstrap-server or --bootstrap-controller must be specified")
    if (args.producer or args.consumer) and actions[0] == "list":
        raise UsageError('Option "[list]" can\'t be used with option "[producer]" or "[consumer]"')
    if args.producer and not (args.topic or args.transactional_id):
        raise UsageError("With --producer you must specify a --topic")
    if args.consumer and not (args.topic and args.group):
        raise UsageError("With --consumer you must specify a --topic and a --group")
    if args.add and args.resource_pattern_type in ("ANY", "MATCH"):
        raise UsageError(
            f"A '--resource-pattern-type' value of '{args.resource_pattern_type}' is not valid when adding acls."
        )
    requests = _requests(args)
    with KafkaAdminClient(client_config(args, "kafka-acls")) as admin:
        if args.add:
            if not requests:
                raise UsageError(
                    "You must specify one of: --topic, --cluster, --group, --transactional-id when trying to add ACLs."
                )
            if not args.allow_principal and not args.deny_principal:
                raise UsageError(
                    "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
                )
            for request in requests:
                bindings = list(dict.fromkeys(bindings_to_add(request)))
                first = bindings[0]
                existing = set(
                    admin.describe_acls(
                        AclBindingFilter(first.resource_type, first.resource_name, first.pattern_type)
                    )
                )
                new = [b for b in bindings if b not in existing]
                for b in bindings:
                    if b in existing:
                        print(
                            f"Acl (pattern={_pattern(b.resource_type.name, b.resource_name, b.pattern_type.name)}, "
                            f"entry={_binding_entry(b)}) already exists."
                        )
                if new:
                    resource = _pattern(
                        first.resource_type.name, first.resource_name, first.pattern_type.name
                    )
                    print(
                        f"Adding ACLs for resource `{resource}`: \n "
                        + "\n".join(f"\t{_binding_entry(b)}" for b in new)
                        + "\n"
                    )
                    admin.create_acls(new)
        elif args.remove:
            if not requests:
                raise UsageError(
                    "You must specify one of: --topic, --cluster, --group, --transactional-id when trying to remove ACLs."
                )
            for request in requests:
                filters = filters_of(request)
                head = filters[0]
                resource = _pattern(head.resource_type.name, head.resource_name, head.pattern_type.name)
                given = args.allow_principal or args.deny_principal or args.operation
                message = (
                    "Are you sure you want to remove ACLs: \n "
                    + "\n".join(f"\t{_filter_entry(f)}" for f in filters)
                    + f"\n from resource filter `{resource}`? (y/n)"
                    if given
                    else f"Are you sure you want to delete all ACLs for resource filter `{resource}`? (y/n)"
                )
                if _confirm(args, message):
                    admin.delete_acls(filters)
        else:
            principals = args.principal or [None]
            found: dict[AclBinding, None] = {}
            for request in requests or [_namespace(args, {}, [])]:
                for acl_filter in filters_of(request):
                    found.update(dict.fromkeys(admin.describe_acls(acl_filter)))
            for principal in principals:
                if principal is not None:
                    print(f"ACLs for principal `{principal}`")
                _print_acls(
                    (a for a in found if principal is None or a.principal == principal),
                    "Current ACLs for resource",
                )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``kafka-acls.sh``; returns the exit status."""
    return run_tool(build_parser(), argv, _run, "Error while executing ACL command: ", sys.stdout)
