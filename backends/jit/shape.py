"""jit expressions of the shape family (cpu/shape.py): RESHAPE, SQUEEZE and EXPAND_DIMS keep the
elements in order, so inside a compiled loop they are a flat copy (the converters' RESHAPE of a loop
bound to a scalar, of a [1] value to [1, 1])."""
from __future__ import annotations

from onert_py.backends.jit.codegen import Expr
from onert_py.backends.jit.elementwise import expression


@expression("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def _flat_copy(op, sg) -> Expr | None:
    if not op.inputs or op.inputs[0] < 0 or len(op.outputs) != 1:
        return None
    x, y = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
    if x.dtype != y.dtype or x.type_name == "STRING":
        return None
    return Expr("{0}", (0,), flat=True)
