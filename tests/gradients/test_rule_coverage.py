"""Every kernel has a gradient rule (or stops the gradient), except the ops listed here with the reason:
a new op cannot land without deciding its gradient, and this list is the work left (docs/ops.md shows
the same per op)."""
from onert_py.backends.registry import CONTROLFLOW, CPU, GRAD_RULES, load_builtin_kernels

NO_RULE_YET = {
    # fused recurrent ops still without a decomposition (the unidirectional and one-step LSTM/RNN have one)
    **dict.fromkeys(["BIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_RNN", "SVDF", "GRU"],
                    "fused recurrent op"),
    # Circle's and LiteRT's less common float ops
    **dict.fromkeys(["INSTANCE_NORM", "RMS_NORM", "ROPE", "LOCAL_RESPONSE_NORMALIZATION", "CONV_3D_TRANSPOSE",
                     "DILATE", "DYNAMIC_UPDATE_SLICE", "MATRIX_DIAG", "MATRIX_SET_DIAG", "SPARSE_TO_DENSE",
                     "UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX",
                     "UNSORTED_SEGMENT_MIN", "EMBEDDING_LOOKUP_SPARSE", "REDUCE_WINDOW", "FAKE_QUANT",
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
