"""What was built: every compiled module of the package (the protocol's record paths and the
producer's send path) beside its pure-Python twin.

``python -m spark_kafkalite.native`` prints, per compiled module, ``native`` or why it does not
import, and which path is in use; ``--require`` exits non-zero when any was not built (``.ci/run``
and the README's install check use it). The loader itself is
:func:`spark_kafkalite.protocol.native.load_extension`.
"""

from __future__ import annotations

import sys

from spark_kafkalite.client.producer import native_extensions as _client
from spark_kafkalite.protocol import native as _protocol

__all__ = ["EXTENSIONS", "main", "native_status"]

EXTENSIONS: dict[str, str] = {**_protocol.EXTENSIONS, **_client.EXTENSIONS}
"""Every compiled module and its pure-Python twin."""


def native_status() -> dict[str, str]:
    """Per module of :data:`EXTENSIONS`: ``"native"`` when it imports, else the import failure."""
    return _protocol.native_status(EXTENSIONS)


def main(argv: list[str]) -> int:
    """Print the status of every compiled module; with ``--require``, 1 when any is not built."""
    status = native_status()
    for name, state in status.items():
        print(f"{name}: {state}")
    forced = _protocol.pure_python_forced()
    print(f"in use: {'pure-python (forced by ' + _protocol.PURE_PYTHON_ENV + ')' if forced else 'native'}")
    if "--require" in argv and any(state != "native" for state in status.values()):
        print(
            "native extensions were not built (see above): install a C compiler and Cython, then reinstall",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":  # python -m spark_kafkalite.native [--require]
    sys.exit(main(sys.argv[1:]))
