"""``python -m broker --config conf/broker.properties [--override key=value ...]``."""

from __future__ import annotations

import sys

from broker.cli import main

if __name__ == "__main__":
    sys.exit(main())
