"""`onert-py run`: run a model once on onert-py and summarize (or save) its outputs."""
from __future__ import annotations

import argparse
from typing import Sequence

import numpy as np

from onert_py.tools.errors import CliError
from onert_py.tools.formatting import (check_output_dir, check_output_suffix, output_aliases, save_arrays,
                                       save_output_dir, save_outputs, signature_label, summarize)
from onert_py.tools.inputs import prepare_inputs, run_inference
from onert_py.tools.options import (add_executor_options, add_input_options, add_model_options, check_distinct_files,
                                    check_writable, open_session)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a model on onert-py and summarize its outputs",
                       description="Run a model once on onert-py and print each output's shape, dtype "
                                   "and values (or min/max/mean). Inputs not given are seeded random "
                                   "values.")
    add_model_options(p, "run")
    add_executor_options(p)
    add_input_options(p, save=True)
    p.add_argument("--output", metavar="OUT.npz",
                   help="save the outputs in the format of the file's suffix: .npz (every output, keyed by "
                        "name), .npy (a model with one output) or .json ({\"outputs\": [{name, shape, dtype, "
                        "values}]}); other suffixes are refused")
    p.add_argument("--output-dir", metavar="DIR",
                   help="save one .npy per output in DIR (created if missing), named after the output "
                        "(characters other than letters, digits, '.', '_', '-' become '_'; _K added on a "
                        "clash, K the output's index)")
    p.add_argument("--raw", action="store_true",
                   help="with --output-dir: write each output's bare bytes as NAME.bin instead (little-endian, "
                        "C order, as onert_run's raw dumps; no dtype or shape stored)")
    p.set_defaults(func=run)


def print_outputs(names: Sequence[str], outputs: Sequence[np.ndarray], aliases: dict[str, int] | None = None
                  ) -> None:
    for k, (name, arr) in enumerate(zip(names, outputs)):
        dtype = "string" if arr.dtype == object else str(arr.dtype)
        label = signature_label(name, k, aliases or {})
        print(f"output {k} {name!r}{label}: shape {list(arr.shape)} dtype {dtype}  {summarize(arr)}")


def _check_args(args: argparse.Namespace) -> None:
    """Output options, before a long run rather than after it."""
    if args.raw and not args.output_dir:
        raise CliError("--raw writes into --output-dir; give --output-dir DIR")
    check_writable(args.output, "--output")
    if args.output:
        check_output_suffix(args.output)
    check_distinct_files(output=args.output, save_inputs=args.save_inputs)


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    sess = open_session(args)
    names = [i.name for i in sess.get_outputs_tensorinfo()]
    if args.output:
        check_output_suffix(args.output, len(names))   # .npy and a model with two outputs
    if args.output_dir:
        check_output_dir(args.output_dir)
    inputs = prepare_inputs(sess, args)
    if args.save_inputs:  # first: a failing run is the one worth reproducing
        save_arrays(args.save_inputs, inputs.names, inputs.arrays, prefix="input")
    outputs = run_inference(sess, inputs)
    for k in range(len(inputs.names)):
        print(inputs.line(k))
    print_outputs(names, outputs, output_aliases(sess))
    if args.save_inputs:
        print(f"saved {len(inputs.arrays)} input(s) to {args.save_inputs}")
    if args.output:
        save_outputs(args.output, names, outputs)
        print(f"saved {len(outputs)} output(s) to {args.output}")
    if args.output_dir:
        files = save_output_dir(args.output_dir, names, outputs, raw=args.raw)
        print(f"saved {len(files)} output(s) to {args.output_dir}: {', '.join(files)}")
    return 0
