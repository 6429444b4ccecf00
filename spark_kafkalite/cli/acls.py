"""``kafkalite acls add|list|remove``, shaped like Kafka's ``kafka-acls.sh``.

Resource options (one per command): ``--topic T``, ``--group G``, ``--cluster``,
``--transactional-id ID``, with ``--resource-pattern-type`` LITERAL (default) or PREFIXED (for
``list`` / ``remove`` also ANY or MATCH). ``add`` takes ``--allow-principal`` /
``--deny-principal`` (``User:alice``, repeatable), ``--operation`` (READ, WRITE, ALL, ...;
repeatable, default ALL) and ``--allow-host`` / ``--deny-host`` (default ``*``); ``list`` and
``remove`` take the same options as filters (``--principal`` too) and, without them, match
everything of the resource. Needs a broker with ``authorizer.class.name`` set (else
SECURITY_DISABLED) and ALTER (add, remove) or DESCRIBE (list) on the cluster.

    kafkalite acls add --bootstrap-server H:P --allow-principal User:alice --operation READ \\
        --topic orders- --resource-pattern-type PREFIXED
    kafkalite acls list --bootstrap-server H:P [--topic orders]
    kafkalite acls remove --bootstrap-server H:P --principal User:alice --topic orders-
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from spark_kafkalite.cli.common import CliError, add_bootstrap, client_config
from spark_kafkalite.protocol.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["add_acls_parser", "cmd_acls", "bindings_to_add", "filters_of"]

_OPERATIONS = [op.name for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]


def add_acls_parser(commands: Any) -> None:
    """Add the ``acls`` command to the ``kafkalite`` subparsers ``commands``."""
    acls = commands.add_parser("acls", help="add, list or remove ACLs")
    actions = acls.add_subparsers(dest="acls_command", metavar="ACTION", required=True)
    for name, help_text in (("add", "create ACLs"), ("list", "list ACLs"), ("remove", "delete ACLs")):
        action = actions.add_parser(name, help=help_text)
        add_bootstrap(action)
        resource = action.add_mutually_exclusive_group()
        resource.add_argument("--topic")
        resource.add_argument("--group")
        resource.add_argument("--transactional-id")
        resource.add_argument("--cluster", action="store_true", help=f"the cluster resource ({CLUSTER_NAME})")
        patterns = ["LITERAL", "PREFIXED"] if name == "add" else ["LITERAL", "PREFIXED", "ANY", "MATCH"]
        action.add_argument(
            "--resource-pattern-type",
            type=str.upper,
            choices=patterns,
            default="LITERAL" if name == "add" else None,
            help="default LITERAL" + ("" if name == "add" else " with a resource, else ANY"),
        )
        action.add_argument("--allow-principal", action="append", metavar="PRINCIPAL", default=[])
        action.add_argument("--deny-principal", action="append", metavar="PRINCIPAL", default=[])
        action.add_argument("--allow-host", action="append", metavar="HOST", default=[])
        action.add_argument("--deny-host", action="append", metavar="HOST", default=[])
        action.add_argument("--operation", action="append", type=str.upper, choices=_OPERATIONS, default=[])
        if name != "add":
            action.add_argument("--principal", help="only ACLs of this principal")


def _resource(args: argparse.Namespace) -> tuple[ResourceType, str | None]:
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.transactional_id is not None:
        return ResourceType.TRANSACTIONAL_ID, args.transactional_id
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    return ResourceType.ANY, None


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    """The ACLs ``acls add`` creates: every (principal, host, operation) combination, ALLOW for
    ``--allow-principal`` (hosts ``--allow-host``) and DENY for ``--deny-principal``.

    Raises:
        CliError: no resource or no principal.
    """
    resource_type, name = _resource(args)
    if name is None:
        raise CliError("acls add needs a resource: --topic, --group, --transactional-id or --cluster")
    if not args.allow_principal and not args.deny_principal:
        raise CliError("acls add needs --allow-principal or --deny-principal")
    operations = [AclOperation[op] for op in args.operation] or [AclOperation.ALL]
    pattern = PatternType[args.resource_pattern_type]
    out: list[AclBinding] = []
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host or ["*"]),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host or ["*"]),
    ):
        for principal, host, op in itertools.product(principals, hosts, operations):
            out.append(AclBinding(resource_type, name, pattern, principal, host, op, permission))
    return out


def filters_of(args: argparse.Namespace) -> list[AclBindingFilter]:
    """The filters of ``acls list`` / ``acls remove`` (one per principal/host/operation given;
    fields not given match everything)."""
    resource_type, name = _resource(args)
    default_pattern = "LITERAL" if name is not None else "ANY"
    pattern = PatternType[args.resource_pattern_type or default_pattern]
    principals: list[tuple[str | None, AclPermissionType]] = [
        (p, AclPermissionType.ALLOW) for p in args.allow_principal
    ] + [(p, AclPermissionType.DENY) for p in args.deny_principal]
    if not principals:
        principals = [(args.principal, AclPermissionType.ANY)]
    hosts: list[str | None] = [*args.allow_host, *args.deny_host] or [None]
    operations = [AclOperation[op] for op in args.operation] or [AclOperation.ANY]
    return [
        AclBindingFilter(resource_type, name, pattern, principal, host, op, permission)
        for (principal, permission), host, op in itertools.product(principals, hosts, operations)
    ]


def _line(acl: AclBinding) -> str:
    return (
        f"{acl.resource_type.name}:{acl.pattern_type.name}:{acl.resource_name}\t"
        f"principal={acl.principal} host={acl.host} operation={acl.operation.name} "
        f"permission={acl.permission_type.name}"
    )


def cmd_acls(args: argparse.Namespace) -> int:
    """Run ``kafkalite acls ACTION``; returns the exit status."""
    from spark_kafkalite.client import KafkaAdminClient

    with KafkaAdminClient(client_config(args, "kafkalite-cli")) as admin:
        if args.acls_command == "add":
            bindings = bindings_to_add(args)
            admin.create_acls(bindings)
            for acl in bindings:
                print(f"Added {_line(acl)}")
        elif args.acls_command == "list":
            found: dict[AclBinding, None] = {}
            for acl_filter in filters_of(args):
                found.update(dict.fromkeys(admin.describe_acls(acl_filter)))
            for acl in sorted(found, key=_line):
                print(_line(acl))
        else:
            for acl in admin.delete_acls(filters_of(args)):
                print(f"Removed {_line(acl)}")
    return 0
