"""What was built: every compiled module of the package (the protocol's record paths and the
producer's send path) beside its pure-Python twin (:data:`TWINS`, the registry every twin is
listed in; ``tests/unit/test_twin_api.py`` fails for a ``.pyx`` missing from it).

``python -m spark_kafkalite.native`` prints, per compiled module, ``native`` or why it does not
import, and which path is in use; ``--require`` exits non-zero when any was not built (``.ci/run``
and the README's install check use it). The loader itself is
:func:`spark_kafkalite.protocol.native.load_twin`.
"""

from __future__ import annotations

import sys

from spark_kafkalite.client.producer import native_extensions as _client
from spark_kafkalite.protocol import native as _protocol

__all__ = ["TWINS", "main", "native_status"]

TWINS: tuple[_protocol.Twin, ...] = _protocol.TWINS + _client.TWINS
"""Every compiled module and its pure-Python twin."""


def native_status() -> dict[str, str]:
    """Per compiled module of :data:`TWINS`: ``"native"`` when it imports, else the import failure."""
    return _protocol.native_status(TWINS)


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
