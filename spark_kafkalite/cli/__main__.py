"""``python -m spark_kafkalite.cli`` (the ``kafkalite`` console script)."""

from __future__ import annotations

import sys

from spark_kafkalite.cli import main

sys.exit(main())
