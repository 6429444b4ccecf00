"""Fuzz the broker and our client over the Kafka wire (issue #14 item 5).

Long runs, one command each (use one core: prefix with ``taskset -c 1``)::

    python -m bench.fuzz broker --frames 1000000 --seed 1     # vs a real `python -m broker`
    python -m bench.fuzz client --responses 100000 --seed 1   # our client vs a fuzzing fake broker

Both print a JSON summary (frames or responses, rate, deaths, hangs, peak RSS, ...) and exit
non-zero if anything died or hung. Short runs of the same code are in tests/fault/test_fuzz.py.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="target", required=True)
    b = sub.add_parser("broker", help="fuzz a real broker process with request frames")
    b.add_argument("--frames", type=int, default=100_000)
    b.add_argument("--duration-s", type=float, default=None)
    b.add_argument("--connections", type=int, default=4)
    b.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("client", help="fuzz our client (producer, consumer, admin) with responses")
    c.add_argument("--responses", type=int, default=10_000)
    c.add_argument("--duration-s", type=float, default=None)
    c.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.target == "broker":
        from bench.fuzz.broker_fuzz import fuzz_broker

        report = fuzz_broker(
            args.frames, seed=args.seed, duration_s=args.duration_s, connections=args.connections
        )
    else:
        from bench.fuzz.client_fuzz import fuzz_client

        report = fuzz_client(args.responses, seed=args.seed, duration_s=args.duration_s)
    print(json.dumps(report.as_dict(), indent=2))
    return 1 if report.deaths or report.hangs else 0


if __name__ == "__main__":
    sys.exit(main())
