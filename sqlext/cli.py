"""The `sqlext` command line (grows with the SQL front end)."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sqlext", description="Hudi tables on Spark")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="create a table, write, upsert, delete and query it")
    demo.add_argument("--path")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from sqlext.demo import main as demo_main

        return demo_main(["--path", args.path] if args.path else [])
    return 2


if __name__ == "__main__":
    sys.exit(main())
