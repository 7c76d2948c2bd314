"""`onert-py ops`: the op support table, straight from the kernel registries."""
from __future__ import annotations

import argparse
import sys

from onert_py.backends.registry import CONTROLFLOW, CPU, CUSTOM, load_builtin_kernels
from onert_py.tools.custom_ops import load_custom_ops
from onert_py.tools.formatting import format_table
from onert_py.tools.options import add_custom_ops_option


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ops", help="list supported ops with their backend and dtypes",
                       description="List every op with a kernel, its backend and the dtypes it takes. "
                                   "With NAME, only ops whose name contains NAME (case-insensitive); "
                                   "exit code 1 when none does.")
    p.add_argument("name", nargs="?", metavar="NAME", help="show only ops whose name contains this (e.g. conv)")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table (for docs/ops.md)")
    add_custom_ops_option(p)
    p.set_defaults(func=ops_cmd)


def support_rows() -> list[tuple[str, str, str]]:
    """(op, backend, dtypes) for every registered kernel, sorted by op then backend."""
    load_builtin_kernels()
    rows = []
    for backend in (CPU, CONTROLFLOW, CUSTOM):
        for name in backend.kernels:
            dtypes = backend.dtypes.get(name) or ()
            rows.append((name, backend.name, ", ".join(dtypes) if dtypes else "any"))
    return sorted(rows)


def ops_cmd(args: argparse.Namespace) -> int:
    load_custom_ops(args.custom_ops)
    rows = support_rows()
    if args.name:
        rows = [r for r in rows if args.name.lower() in r[0].lower()]
        if not rows:  # like grep: not an error, but scripts can test for it
            print(f"no op with a kernel matches {args.name!r}", file=sys.stderr)
            return 1
    header = ("op", "backend", "dtypes")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|")
        for r in rows:
            print("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    else:
        print(format_table(header, rows))
        print(f"\n{len(rows)} kernel(s)")
    return 0
