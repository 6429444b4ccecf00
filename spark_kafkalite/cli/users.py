"""``kafkalite users add|list|remove``: SCRAM users (KIP-554), as Kafka's
``kafka-configs.sh --alter|--describe --entity-type users`` manage them.

    kafkalite users add    --bootstrap-server H:P --user NAME [--mechanism SCRAM-SHA-512]
                           [--iterations 8192] [--password-file FILE]
    kafkalite users list   --bootstrap-server H:P [--user NAME ...]
    kafkalite users remove --bootstrap-server H:P --user NAME --mechanism SCRAM-SHA-256|SCRAM-SHA-512

``add`` creates or replaces the user's credential for one mechanism (AlterUserScramCredentials:
the client sends a random salt and the salted password, never the password). The password is
never a command-line argument (it would show in ``ps``) and never printed: it is the first line
of ``--password-file``, else prompted twice on a terminal (``getpass``), else the first line of
stdin. Iterations are 4096..16384 (Kafka's ``ScramMechanism``). ``list`` prints one line per
user as ``kafka-configs.sh --describe --entity-type users`` does::

    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192

Needs ALTER (add, remove) or DESCRIBE (list) on the cluster when the brokers authorize.
Unknown users (RESOURCE_NOT_FOUND), a bad mechanism or iteration count and a refused login are
one-line errors with exit status 1.
"""

from __future__ import annotations

import argparse
import getpass
from pathlib import Path
from typing import Any, TextIO

from spark_kafkalite.cli.common import CliError, add_bootstrap, client_config
from spark_kafkalite.protocol.scram import ScramMechanism, scram_mechanism

__all__ = ["add_users_parser", "cmd_users", "read_password", "mechanism_of"]

_MECHANISMS = "SCRAM-SHA-256|SCRAM-SHA-512"
DEFAULT_MECHANISM = "SCRAM-SHA-512"
DEFAULT_ITERATIONS = 8192


def add_users_parser(commands: Any) -> None:
    """Add the ``users`` command to the ``kafkalite`` subparsers ``commands``."""
    users = commands.add_parser("users", help="add, list or remove SCRAM users")
    actions = users.add_subparsers(dest="users_command", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="create or replace a user's SCRAM credential")
    add_bootstrap(add)
    add.add_argument("--user", required=True, metavar="NAME")
    add.add_argument(
        "--mechanism", default=DEFAULT_MECHANISM, metavar=_MECHANISMS, help="default %(default)s"
    )
    add.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        metavar="N",
        help="4096..16384, default %(default)s",
    )
    add.add_argument(
        "--password-file",
        metavar="FILE",
        help="file whose first line is the password (default: prompt, or stdin when not a terminal)",
    )
    listing = actions.add_parser("list", help="users with their SCRAM mechanisms and iterations")
    add_bootstrap(listing)
    listing.add_argument("--user", action="append", metavar="NAME", help="only this user (repeatable)")
    remove = actions.add_parser("remove", help="delete a user's SCRAM credential for a mechanism")
    add_bootstrap(remove)
    remove.add_argument("--user", required=True, metavar="NAME")
    remove.add_argument("--mechanism", required=True, metavar=_MECHANISMS)


def mechanism_of(name: str) -> ScramMechanism:
    """The SCRAM mechanism named ``name`` (any case).

    Raises:
        CliError: not SCRAM-SHA-256 or SCRAM-SHA-512.
    """
    scram = scram_mechanism(name.upper())
    if scram is None:
        raise CliError(f"--mechanism {name!r}: use SCRAM-SHA-256 or SCRAM-SHA-512")
    return scram


def read_password(args: argparse.Namespace, stdin: TextIO) -> str:
    """The password of ``users add``: first line of ``--password-file``, else ``getpass`` twice
    on a terminal, else the first line of ``stdin`` (line ending removed).

    Raises:
        CliError: an unreadable file, an empty password or prompts that differ (the password is
            never in the message).
    """
    if args.password_file:
        try:
            text = Path(args.password_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(
                f"cannot read --password-file {args.password_file}: {exc.strerror or exc}"
            ) from None
        password = text.splitlines()[0] if text else ""
    elif stdin.isatty():
        password = getpass.getpass(f"Password for user {args.user}: ")
        if getpass.getpass("Again: ") != password:
            raise CliError("the passwords differ")
    else:
        password = stdin.readline().rstrip("\r\n")
    if not password:
        raise CliError(f"empty password for user {args.user}")
    return password


def cmd_users(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    """Run ``kafkalite users ACTION``; returns the exit status.

    Raises:
        CliError: a bad mechanism, iteration count or password input (checked before connecting).
        KafkaError: e.g. RESOURCE_NOT_FOUND for an unknown user, SASL_AUTHENTICATION_FAILED or
            CLUSTER_AUTHORIZATION_FAILED (printed as one line).
    """
    from spark_kafkalite.client import (
        KafkaAdminClient,
        ScramCredentialInfo,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    alteration: UserScramCredentialUpsertion | UserScramCredentialDeletion | None = None
    if args.users_command == "add":
        scram = mechanism_of(args.mechanism)
        if not scram.min_iterations <= args.iterations <= scram.max_iterations:
            raise CliError(
                f"--iterations {args.iterations}: must be {scram.min_iterations}..{scram.max_iterations}"
            )
        info = ScramCredentialInfo(scram.mechanism_name, args.iterations)
        alteration = UserScramCredentialUpsertion(args.user, info, read_password(args, stdin))
        done = (
            f"Added {scram.mechanism_name} credential ({args.iterations} iterations) for user '{args.user}'"
        )
    elif args.users_command == "remove":
        scram = mechanism_of(args.mechanism)
        alteration = UserScramCredentialDeletion(args.user, scram.mechanism_name)
        done = f"Removed {scram.mechanism_name} credential of user '{args.user}'"

    with KafkaAdminClient(client_config(args, "kafkalite-cli")) as admin:
        if alteration is not None:
            admin.alter_user_scram_credentials([alteration])
            out.write(done + "\n")
            return 0
        described = admin.describe_user_scram_credentials(args.user)
    for user in sorted(described):
        credentials = ", ".join(f"{c.mechanism}=iterations={c.iterations}" for c in described[user])
        out.write(f"SCRAM credential configs for user-principal '{user}' are {credentials}\n")
    return 0
