"""A zero PAD folded into the float DEPTHWISE_CONV_2D that reads it (compiler.fold_prologues, the jit
depthwise kernel's `prologue`): the converter's ZeroPadding2D + VALID depthwise of the BlazeFace-style
models. What folds, what does not, and that the folded kernel gives LiteRT's numbers and the unfolded
run's bits (fuse_ops=False: PAD on cpu, then the jit kernel on the padded tensor)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

import onert_py  # noqa: E402
from helpers import assert_close, rng, run_litert  # noqa: E402
from onert_py.schema.writer import ModelBuilder  # noqa: E402

NONE, RELU6 = 0, 3
SAME, VALID = 0, 1


def _pad_then_depthwise(x_shape=(1, 9, 11, 8), pads=((1, 1), (1, 1)), *, opcode: str = "PAD",
                        value: float | None = None, channel_pad: int = 0, stride: int = 1, dil: int = 1,
                        mult: int = 1, padding: int = VALID, act: int = NONE, second_reader: bool = False,
                        filter_fill: float | None = None) -> ModelBuilder:
    """x -> PAD(V2) -> DEPTHWISE_CONV_2D 3x3 -> y (and the padded tensor again, when second_reader)."""
    g = rng(5)
    n, h, w, c = x_shape
    hp, wp, cp = h + sum(pads[0]), w + sum(pads[1]), c + channel_pad
    k = 3
    eff = (k - 1) * dil + 1
    if padding == VALID:
        oh, ow = (hp - eff) // stride + 1, (wp - eff) // stride + 1
    else:
        oh, ow = -(-hp // stride), -(-wp // stride)
    cout = cp * mult
    mb = ModelBuilder()
    sg = mb.subgraph("main")
    x = sg.tensor("x", list(x_shape), np.float32)
    amounts = sg.const("paddings", np.array([[0, 0], list(pads[0]), list(pads[1]), [0, channel_pad]], np.int32))
    padded = sg.tensor("padded", [n, hp, wp, cp], np.float32)
    filt = g.normal(size=(1, k, k, cout)).astype(np.float32)
    if filter_fill is not None:
        filt[0, 0, 0, 0] = filter_fill
    wt = sg.const("w", filt)
    b = sg.const("b", g.normal(size=cout).astype(np.float32))
    y = sg.tensor("y", [n, oh, ow, cout], np.float32)
    sg.inputs = [x]
    pad_inputs = [x, amounts]
    if value is not None:
        pad_inputs.append(sg.const("value", np.array(value, np.float32)))
    sg.op(opcode, pad_inputs, [padded])
    sg.op("DEPTHWISE_CONV_2D", [padded, wt, b], [y], padding=padding, stride_h=stride, stride_w=stride,
          dilation_h_factor=dil, dilation_w_factor=dil, depth_multiplier=mult, fused_activation_function=act)
    sg.outputs = [y]
    if second_reader:
        z = sg.tensor("z", [n, hp, wp, cp], np.float32)
        sg.op("RELU", [padded], [z])
        sg.outputs.append(z)
    return mb


def _run(mb: ModelBuilder, **options) -> tuple[list[np.ndarray], object, list[np.ndarray]]:
    data = mb.to_bytes("tflite")
    sess = onert_py.infer.session(data, "jit;cpu", **options)
    shape = [i.dims for i in sess.get_inputs_tensorinfo()][0]
    x = [(rng(7).normal(size=shape) * 2).astype(np.float32)]
    return sess.infer(x), sess, x


def _folded(sess) -> list[tuple[str, tuple[int, ...]]]:
    return [(op.kernel_name, op.prologue) for ex in sess.executors for op in ex.operations if op.prologue]


@pytest.mark.parametrize("case", [
    dict(),
    dict(pads=((0, 2), (2, 1)), stride=2),                           # asymmetric, strided
    dict(pads=((2, 2), (2, 2)), dil=2),
    dict(padding=SAME, pads=((1, 0), (0, 1))),                      # the conv's own padding on top
    dict(mult=2, act=RELU6),
    dict(x_shape=(2, 20, 24, 16), pads=((1, 1), (1, 1))),           # wide enough for the lane loops
    dict(x_shape=(1, 6, 7, 16), pads=((4, 1), (1, 5)), stride=2),   # rows and columns of padding only
    dict(x_shape=(1, 5, 12, 8), pads=((3, 3), (0, 3)), mult=2, dil=2),   # 16 channels once expanded
    dict(opcode="PADV2", value=0.0),
    dict(opcode="PADV2", value=-0.0),                               # LiteRT pads +0.0 for it too
])
def test_zero_padding_folds_into_the_depthwise_kernel(case):
    mb = _pad_then_depthwise(**case)
    got, sess, x = _run(mb)
    assert _folded(sess) == [("DEPTHWISE_CONV_2D", (0,))]
    assert [op.kernel_name for ex in sess.executors for op in ex.operations] == ["DEPTHWISE_CONV_2D"]
    unfolded, plain, _ = _run(mb, fuse_ops=False)
    assert not _folded(plain)
    np.testing.assert_array_equal(got[0], unfolded[0])    # the same in-bounds taps, in the same order
    assert_close(got, run_litert(mb, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", [
    dict(channel_pad=8),                                  # pads channels: not a spatial padding
    dict(second_reader=True),                             # the padded tensor is read again
    dict(opcode="PADV2", value=1.0),
])
def test_what_does_not_fold_runs_as_before(case):
    mb = _pad_then_depthwise(**case)
    got, sess, x = _run(mb)
    assert not _folded(sess)
    assert "PAD" in "".join(op.kernel_name for ex in sess.executors for op in ex.operations)
    assert_close(got, run_litert(mb, x), rtol=1e-5, atol=1e-5)


def test_a_filter_with_inf_runs_the_padding_on_its_own():
    """0 * inf is NaN: with a non-finite filter the padded zeros matter, so the kernel pads first (as
    LiteRT does), though the compiler folded the PAD."""
    mb = _pad_then_depthwise(filter_fill=np.inf)
    got, sess, x = _run(mb)
    assert _folded(sess) == [("DEPTHWISE_CONV_2D", (0,))]
    want = run_litert(mb, x)
    assert np.isnan(want[0]).any()
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))
    assert_close([np.nan_to_num(got[0])], [np.nan_to_num(want[0])], rtol=1e-5, atol=1e-5)


def test_bench_profile_counts_the_folded_padding_with_its_reader(tmp_path, capsys):
    from helpers import cli
    path = tmp_path / "m.tflite"
    path.write_bytes(_pad_then_depthwise().to_bytes("tflite"))
    rc, out, _ = cli(capsys, "bench", path, "--backends", "jit;cpu", "--num-runs", "2", "--profile")
    assert rc == 0
    assert "1 op fused into the kernels of the ops beside them (timed with them): PAD×1" in out
