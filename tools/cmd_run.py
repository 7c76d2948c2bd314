"""`onert-py run`: run a model once on onert-py and summarize (or save) its outputs."""
from __future__ import annotations

import argparse
from typing import Sequence

import numpy as np

from onert_py.tools.formatting import output_aliases, save_arrays, signature_label, summarize
from onert_py.tools.inputs import prepare_inputs, run_inference
from onert_py.tools.options import (add_input_options, add_model_options, check_distinct_files, check_writable,
                                    open_session)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a model on onert-py and summarize its outputs",
                       description="Run a model once on onert-py and print each output's shape, dtype "
                                   "and values (or min/max/mean). Inputs not given are seeded random "
                                   "values.")
    add_model_options(p, "run")
    add_input_options(p, save=True)
    p.add_argument("--output", metavar="OUT.npz", help="save the outputs, keyed by output name")
    p.set_defaults(func=run)


def save_outputs(path: str, names: Sequence[str], outputs: Sequence[np.ndarray]) -> None:
    save_arrays(path, names, outputs)


def print_outputs(names: Sequence[str], outputs: Sequence[np.ndarray], aliases: dict[str, int] | None = None
                  ) -> None:
    for k, (name, arr) in enumerate(zip(names, outputs)):
        dtype = "string" if arr.dtype == object else str(arr.dtype)
        label = signature_label(name, k, aliases or {})
        print(f"output {k} {name!r}{label}: shape {list(arr.shape)} dtype {dtype}  {summarize(arr)}")


def run(args: argparse.Namespace) -> int:
    check_writable(args.output, "--output")  # before a long run, not after
    check_distinct_files(output=args.output, save_inputs=args.save_inputs)
    sess = open_session(args)
    inputs = prepare_inputs(sess, args)
    if args.save_inputs:  # first: a failing run is the one worth reproducing
        save_arrays(args.save_inputs, inputs.names, inputs.arrays, prefix="input")
    outputs = run_inference(sess, inputs)
    for k in range(len(inputs.names)):
        print(inputs.line(k))
    names = [i.name for i in sess.get_outputs_tensorinfo()]
    print_outputs(names, outputs, output_aliases(sess))
    if args.save_inputs:
        print(f"saved {len(inputs.arrays)} input(s) to {args.save_inputs}")
    if args.output:
        save_outputs(args.output, names, outputs)
        print(f"saved {len(outputs)} output(s) to {args.output}")
    return 0
