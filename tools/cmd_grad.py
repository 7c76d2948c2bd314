"""`onert-py grad`: write a model's gradient model (forward outputs, then gradients) as .circle/.tflite."""
from __future__ import annotations

import argparse
from pathlib import Path

from onert_py.compiler.gradients import gradient_model
from onert_py.ir import Signature
from onert_py.loader import load_model
from onert_py.schema.writer import serialize
from onert_py.tools.cmd_convert import _write_atomically
from onert_py.tools.errors import CliError
from onert_py.tools.options import read_model


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("grad", help="write the model that computes a model's gradients",
                       description="Build the backward pass of a model as a model of its own and write it: "
                                   "its inputs are the model's inputs then one cotangent per float output, "
                                   "its outputs the model's outputs then one gradient per --wrt tensor "
                                   "(IF/WHILE included; onert-py's own ops, e.g. the loop accumulators, are "
                                   "custom ops named OnertPy*). The file is reloaded before it is kept.")
    p.add_argument("input", help="model to differentiate (.tflite / .circle file or nnpackage directory)")
    p.add_argument("-o", "--output", required=True, help="file to write (.circle or .tflite)")
    p.add_argument("--wrt", action="append", metavar="NAME",
                   help="a tensor to differentiate with respect to (repeatable): a name as `inspect` prints "
                        "it, SUBGRAPH:NAME for another subgraph's, or 'weights' (default: the float inputs)")
    p.add_argument("--subgraph", type=int, default=0, help="the subgraph to differentiate (default 0)")
    p.set_defaults(func=grad_cmd)


def grad_cmd(args: argparse.Namespace) -> int:
    model = read_model(args.input)
    if not 0 <= args.subgraph < len(model.subgraphs):
        raise CliError(f"--subgraph {args.subgraph}: the model has {len(model.subgraphs)} subgraphs")
    gm = gradient_model(model, args.wrt, args.subgraph)
    main = gm.model.subgraphs[gm.subgraph_index]
    # a signature naming every input and output: cotangent/<output>, gradient/<wrt name>
    outputs = {main.tensors[t].name: t for t in main.outputs[:gm.n_outputs]}
    outputs.update({f"gradient/{name}": t for name, t in zip(gm.wrt, main.outputs[gm.n_outputs:])})
    gm.model.signatures = [Signature("gradients", gm.subgraph_index,
                                     {main.tensors[t].name: t for t in main.inputs}, outputs)]
    out = Path(args.output)
    fmt = "tflite" if out.suffix == ".tflite" else "circle"
    data = serialize(gm.model, fmt)
    load_model(data)    # a file that does not load back is not written
    _write_atomically(out, data)
    print(f"wrote {out}: {len(main.inputs)} inputs ({len(gm.cotangent_of)} cotangents), {len(main.outputs)} "
          f"outputs ({len(gm.wrt)} gradients: {', '.join(gm.wrt)})")
    return 0
