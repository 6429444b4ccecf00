"""``python -m spark_kafkalite.demo`` (same flags as ``kafkalite demo``)."""

from __future__ import annotations

import sys

from spark_kafkalite.demo.runner import main

sys.exit(main())
