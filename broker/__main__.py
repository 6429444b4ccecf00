"""``python -m broker --config conf/broker.properties [--override key=value ...]``."""

from __future__ import annotations

import sys

# kio imports `hypothesis` (a test-only dependency) whenever it is installed, to register
# property-test strategies; that costs ~0.3 s of broker startup for nothing. The broker
# process never uses it, so make the import fail fast before kio is loaded.
if "hypothesis" not in sys.modules:
    sys.modules["hypothesis"] = None  # type: ignore[assignment]

from broker.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
