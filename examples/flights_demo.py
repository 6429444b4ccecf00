"""NYC flights 2013 through kafkalite and Spark Structured Streaming (see spark_kafkalite.demo).

Run: ``python examples/flights_demo.py [--data-dir DIR] [--bootstrap-server HOST:PORT]``
(same as ``kafkalite demo``).
"""

from __future__ import annotations

import sys

from spark_kafkalite.demo import main

if __name__ == "__main__":
    sys.exit(main())
