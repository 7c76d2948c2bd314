"""Every kernel has a gradient rule (or stops the gradient), except the ops listed here with the reason:
a new op cannot land without deciding its gradient, and this list is the work left (docs/ops.md shows
the same per op)."""
from onert_py.backends.registry import CONTROLFLOW, CPU, GRAD_RULES, load_builtin_kernels

NO_RULE_YET = {
    # fused recurrent ops still without a decomposition (the LSTM/RNN ops and SVDF have one)
    **dict.fromkeys(["GRU"], "fused recurrent op"),
    # Circle's and LiteRT's less common float ops
    **dict.fromkeys(["CONV_3D_TRANSPOSE", "DILATE", "EMBEDDING_LOOKUP_SPARSE", "REDUCE_WINDOW",
                     "STABLEHLO_GATHER", "STABLEHLO_PAD", "STABLEHLO_REDUCE_WINDOW", "STABLEHLO_SCATTER"],
                    "float op without a rule yet"),
    # complex numbers and FFTs: nothing complex is differentiated
    **dict.fromkeys(["RFFT2D", "REAL", "IMAG", "COMPLEX_ABS"], "complex values"),
    # resource variables: gradients w.r.t. variables are not supported
    **dict.fromkeys(["READ_VARIABLE", "ASSIGN_VARIABLE"], "resource variable"),
    # weights formats: the gradient of a dense or quantized weight is not taken through its encoding
    **dict.fromkeys(["DENSIFY", "BCQ_FULLY_CONNECTED", "BCQ_GATHER"], "weight encoding"),
    # the gradient ops' own gradients (second derivatives through them)
    **dict.fromkeys(["OnertPyConvInputGrad", "OnertPyConvFilterGrad", "OnertPyPool2DGrad", "OnertPyResizeGrad"],
                    "a gradient op (second order)"),
}


def test_every_kernel_decides_its_gradient():
    load_builtin_kernels()
    kernels = set(CPU.kernels) | set(CONTROLFLOW.kernels)
    undecided = sorted(n for n in kernels if n not in GRAD_RULES and n not in NO_RULE_YET)
    assert not undecided, f"ops with neither a gradient rule nor no_gradient(...): {undecided}"
    stale = sorted(n for n in NO_RULE_YET if n in GRAD_RULES or n not in kernels)
    assert not stale, f"listed as having no rule, but they have one (or no kernel): {stale}"
