"""NON_MAX_SUPPRESSION_V4 / V5 (soft-NMS) with LiteRT's exact selection order.

LiteRT (reference_ops::NonMaxSuppression) keeps the candidates in a std::priority_queue ordered by score
only, so among equal scores the order is whatever libstdc++'s heap algorithms produce; the queue below
replays those algorithms (push_heap / pop_heap / __adjust_heap) so ties resolve the same way. Scores and
IoUs are float32 throughout.

Outputs: V4 (selected_indices int32, num_valid int32 scalar); V5 (selected_indices, selected_scores
float32, num_valid). With a constant max_output_size the vectors have max_output_size entries (the
unused tail zeroed, i.e. always padded); otherwise they have num_valid entries.
"""
from __future__ import annotations

import math

import numpy as np

from onert_py.backends.registry import CPU, KernelContext, Run, no_gradient, shape_rule
from onert_py.backends.shape_rules import Node

_F32 = np.float32


class _StdPriorityQueue:
    """std::priority_queue<Candidate> (max-heap on .score, std::less) over a vector, as libstdc++."""

    def __init__(self) -> None:
        self.c: list = []

    def __len__(self) -> int:
        return len(self.c)

    def _sift_up(self, hole: int, top: int, value) -> None:
        c = self.c
        parent = (hole - 1) // 2
        while hole > top and c[parent][1] < value[1]:
            c[hole] = c[parent]
            hole = parent
            parent = (hole - 1) // 2
        c[hole] = value

    def push(self, value) -> None:
        self.c.append(value)
        self._sift_up(len(self.c) - 1, 0, value)

    def pop(self):
        c = self.c
        top = c[0]
        n = len(c) - 1
        if n > 0:
            value = c[n]
            c[n] = c[0]
            hole, second = 0, 0
            while second < (n - 1) // 2:
                second = 2 * (second + 1)
                if c[second][1] < c[second - 1][1]:
                    second -= 1
                c[hole] = c[second]
                hole = second
            if n % 2 == 0 and second == (n - 2) // 2:
                second = 2 * (second + 1)
                c[hole] = c[second - 1]
                hole = second - 1
            self._sift_up(hole, 0, value)
        c.pop()
        return top


def _iou(ymin, ymax, xmin, xmax, area, i: int, j: int) -> _F32:
    if area[i] <= 0 or area[j] <= 0:
        return _F32(0)
    ih = max(min(ymax[i], ymax[j]) - max(ymin[i], ymin[j]), _F32(0))
    iw = max(min(xmax[i], xmax[j]) - max(xmin[i], xmin[j]), _F32(0))
    inter = _F32(ih * iw)
    union = _F32(area[i] + area[j] - inter)
    if union == 0:
        return _F32(0)
    return _F32(inter / union)


def non_max_suppression(boxes: np.ndarray, scores: np.ndarray, max_output_size: int, iou_threshold: float,
                        score_threshold: float, soft_nms_sigma: float) -> tuple[list[int], list]:
    """Selected indices and their (possibly soft-suppressed) float32 scores."""
    b = np.asarray(boxes, dtype=np.float32)
    y1, x1, y2, x2 = (b[:, k] for k in range(4))
    ymin, ymax = np.minimum(y1, y2), np.maximum(y1, y2)
    xmin, xmax = np.minimum(x1, x2), np.maximum(x1, x2)
    area = (ymax - ymin) * (xmax - xmin)
    ymin, ymax, xmin, xmax, area = (list(a.astype(np.float32)) for a in (ymin, ymax, xmin, xmax, area))
    sc = list(np.asarray(scores, dtype=np.float32))
    iou_t, score_t, sigma = _F32(iou_threshold), _F32(score_threshold), _F32(soft_nms_sigma)

    queue = _StdPriorityQueue()
    for i, s in enumerate(sc):
        if s > score_t:
            queue.push((i, s, 0))                 # (index, score, suppress_begin_index)
    selected: list[int] = []
    selected_scores: list = []
    num_outputs = min(len(queue), max_output_size)
    scale = _F32(_F32(-0.5) / sigma) if sigma > 0 else _F32(0)
    while len(selected) < num_outputs and len(queue):
        idx, score, begin = queue.pop()
        original = score
        hard = False
        for j in range(len(selected) - 1, begin - 1, -1):
            iou = _iou(ymin, ymax, xmin, xmax, area, idx, selected[j])
            if iou >= iou_t:
                hard = True
                break
            if sigma > 0:
                score = _F32(score * _F32(math.exp(_F32(_F32(scale * iou) * iou))))
            if score <= score_t:
                break
        begin = len(selected)
        if not hard:
            if score == original:
                selected.append(idx)
                selected_scores.append(score)
            if score > score_t:
                queue.push((idx, score, begin))
    return selected, selected_scores


def _nms(ctx: KernelContext, soft: bool) -> Run:
    ctx.expect_inputs(6 if soft else 5)
    n_out = 3 if soft else 2
    if len(ctx.outputs) != n_out:
        raise ctx.fail(f"expects {n_out} outputs, has {len(ctx.outputs)}")
    bt, st = ctx.input_tensor(0), ctx.input_tensor(1)
    if bt.dtype != np.float32 or st.dtype != np.float32:
        raise ctx.fail("boxes and scores must be float32")
    if len(bt.shape) != 2 or bt.shape[1] != 4 or len(st.shape) != 1:
        raise ctx.fail(f"boxes must be [num_boxes, 4] and scores [num_boxes], got {list(bt.shape)} / "
                       f"{list(st.shape)}")
    if ctx.input_tensor(2).dtype != np.int32:
        raise ctx.fail("max_output_size must be int32")
    mos_const = ctx.const(2)
    if mos_const is not None and int(np.ravel(mos_const)[0]) < 0:
        raise ctx.fail("max_output_size must be >= 0")
    padded = mos_const is not None
    ins, outs = ctx.inputs, ctx.outputs
    v = ctx.values

    def run() -> None:
        boxes, scores = np.asarray(v[ins[0]]), np.asarray(v[ins[1]])
        if boxes.ndim != 2 or boxes.shape[1] != 4 or scores.shape != (boxes.shape[0],):
            raise ValueError(f"boxes {list(boxes.shape)} / scores {list(scores.shape)} do not match")
        mos = int(np.ravel(v[ins[2]])[0])
        if mos < 0:
            raise ValueError(f"max_output_size {mos} < 0")
        sigma = float(np.ravel(v[ins[5]])[0]) if soft else 0.0
        if sigma < 0:
            raise ValueError(f"invalid soft-NMS sigma {sigma}")
        sel, sel_scores = non_max_suppression(boxes, scores, mos, float(np.ravel(v[ins[3]])[0]),
                                              float(np.ravel(v[ins[4]])[0]), sigma)
        size = mos if padded else len(sel)
        idx = np.zeros(size, np.int32)
        idx[:len(sel)] = sel
        v[outs[0]] = idx
        if soft:
            sc = np.zeros(size, np.float32)
            sc[:len(sel)] = sel_scores
            v[outs[1]] = sc
        v[outs[-1]] = np.int32(len(sel))
    return run


@CPU.register("NON_MAX_SUPPRESSION_V4", dtypes=("float32",))
def non_max_suppression_v4(ctx: KernelContext) -> Run:
    """inputs (boxes [N, 4] as [y1, x1, y2, x2], scores [N], max_output_size, iou_threshold,
    score_threshold); hard NMS."""
    return _nms(ctx, soft=False)


@shape_rule("NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5")
def nms_shape(n: Node):
    mos = n.scalar(2)
    sel = (mos,) if mos is not None and mos >= 0 else (-1,)
    return [sel] * (n.n_out - 1) + [()]


@CPU.register("NON_MAX_SUPPRESSION_V5", dtypes=("float32",))
def non_max_suppression_v5(ctx: KernelContext) -> Run:
    """V4's inputs plus soft_nms_sigma: Gaussian score decay exp(-0.5 * iou^2 / sigma) (Bodla et al.)."""
    return _nms(ctx, soft=True)


# the selection is discrete (TensorFlow registers no gradient for non-max suppression)
no_gradient("NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5")
