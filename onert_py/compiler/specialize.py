"""Compiling a model with dynamic shapes for the input shapes it is run with.

Converters mark the batch dimension dynamic (`from_keras_model` writes shape_signature [-1, H, W, C]
and -1 down the graph), and `resize_tensor_input` makes every activation's declared shape stale.
Kernels that need static shapes (the jit backend's: packed panels, unrolled taps, planned slots) would
then turn such ops down. onert and LiteRT prepare every op again for the shapes an input was resized
to; we compile again: `specialize` gives the model with each shape that shape inference resolves for
one set of input shapes made static, and `Specializations` keeps the executors compiled per set.

Only what inference proves is made static: a tensor whose shape depends on input values stays
dynamic, and so does every tensor of a subgraph inferred with more than one set of shapes (called
from two sites, or a WHILE body whose loop values change shape), whose result is only its last call's.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Hashable, Iterable

import numpy as np

from onert_py.compiler.shape_inference import ShapeCache, ShapeResult, infer_shapes
from onert_py.errors import OnertPyError, PrepareError
from onert_py.ir import Model

__all__ = ["has_dynamic_shapes", "declared_input_shapes", "specialize", "specialize_declared", "specialized_for",
           "relaxed_model", "Specializations"]


def has_dynamic_shapes(model: Model) -> bool:
    """Whether some computed tensor's shape is dynamic (-1 in its signature, or no rank)."""
    return any(t.data is None and (t.is_dynamic or not t.has_rank)
               for sg in model.subgraphs for t in sg.tensors)


def declared_input_shapes(model: Model, k: int = 0) -> tuple:
    """Subgraph k's input shapes as declared (a converter writes 1 for an unknown batch; None for an
    input of unknown rank): what a session compiles for when it is created."""
    sg = model.subgraphs[k]
    return tuple(tuple(sg.tensors[i].shape) if sg.tensors[i].has_rank else None for i in sg.inputs)


def specialize_declared(model: Model) -> tuple[Model, tuple | None]:
    """(the model as a session first compiles it, the input shapes it was specialized for): with
    dynamic shapes, specialized for subgraph 0's declared input shapes; (model, None) when it has none,
    or they cannot be inferred."""
    shapes = declared_input_shapes(model) if model.subgraphs and has_dynamic_shapes(model) else None
    if shapes is None or any(s is None for s in shapes):
        return model, None
    try:
        return specialize(model, [infer_shapes(model, 0, shapes)]), shapes
    except OnertPyError:
        return model, None


def relaxed_model(model: Model) -> Model:
    """The model with every computed tensor marked dynamic, for inputs resized beyond their shape
    signature: kernels then size their outputs at run time instead of trusting declared shapes."""
    subgraphs = []
    for sg in model.subgraphs:
        tensors = [t if t.data is not None else
                   dataclasses.replace(t, shape_signature=tuple(-1 for _ in t.shape)) for t in sg.tensors]
        subgraphs.append(dataclasses.replace(sg, tensors=tensors))
    return dataclasses.replace(model, subgraphs=subgraphs)


def specialize(model: Model, results: Iterable[ShapeResult]) -> Model:
    """`model` with the static shapes of `results` (one per entry subgraph run, from the FULL policy:
    the shapes the kernels will meet) as declared static shapes. A subgraph that two results infer
    differently, or that one result inferred for several input shapes, is left as it is."""
    resolved: dict[int, dict | None] = {}
    values: dict[int, dict] = {}
    for result in results:
        for k, sub in result.subgraphs.items():
            shapes = None if k in result.varied else sub.resolved
            resolved[k] = shapes if resolved.get(k, shapes) == shapes else None
            found = _computed_values(model.subgraphs[k], sub.values)
            values[k] = found if k not in values else {t: v for t, v in values[k].items()
                                                       if t in found and np.array_equal(found[t], v)}
    subgraphs = list(model.subgraphs)
    for k, shapes in resolved.items():
        if not shapes:
            continue
        sg = subgraphs[k]
        tensors = list(sg.tensors)
        for i, shape in shapes.items():
            t = tensors[i]
            if t.data is None and not t.is_variable and (t.is_dynamic or not t.has_rank or t.shape != shape):
                tensors[i] = dataclasses.replace(t, shape=tuple(shape), shape_signature=None, has_rank=True)
        subgraphs[k] = dataclasses.replace(sg, tensors=tensors, shape_values=values[k])
    return dataclasses.replace(model, subgraphs=subgraphs)


def _computed_values(sg, known: dict) -> dict:
    """The values inference found for tensors ops compute (not constants, inputs or variables): shape
    arithmetic, a function of the input shapes the inference was made for."""
    produced = {o for op in sg.operations for o in op.outputs}
    return {t: v for t, v in known.items() if t in produced and t not in sg.inputs
            and sg.tensors[t].data is None and not sg.tensors[t].is_variable}


def specialized_for(model: Model, shapes: ShapeCache, entries: Iterable[tuple[int, tuple]],
                    relax: bool = False) -> Model | None:
    """`model` specialized for the input shapes of each (entry subgraph, input shapes) in `entries`,
    inferred through `shapes` (a FULL-policy cache: the shapes the kernels will meet), from the relaxed
    model when inputs were resized past their signatures; None when some input shape is not known.
    Shape inference's errors (PrepareError, ResourceError) reach the caller."""
    entries = list(entries)
    if any(s is None or any(d < 0 for d in s) for _, input_shapes in entries for s in input_shapes):
        return None
    results = [shapes.infer(k, input_shapes) for k, input_shapes in entries]
    return specialize(relaxed_model(model) if relax else model, results)


class Specializations:
    """Executors compiled per key (a set of input shapes), at most `limit` of them; past that, every
    new key shares one `fallback` compile (shapes left dynamic), so a caller feeding ever new shapes
    pays one compile more, not one per shape, and holds at most limit + 1 compiled copies."""

    def __init__(self, compile_model: Callable[..., object], limit: int = 4):
        self._compile = compile_model
        self.limit = limit
        self._compiled: dict[Hashable, tuple[object, Model]] = {}
        self._fallback: tuple[object, Model] | None = None

    def get(self, key: Hashable, specialized: Callable[[], Model | None],
            fallback: Callable[[], Model]) -> tuple[object, Model]:
        """(executors, the model they were compiled from) for `key`. `specialized()` gives the model
        to compile for it (None when its shapes cannot be inferred: the fallback then serves it)."""
        entry = self._compiled.get(key)
        if entry is not None:
            return entry
        model = specialized() if len(self._compiled) < self.limit else None
        if model is not None:
            try:
                # the first set only compiles segments (compile_model's `segments`): they compile for
                # its shapes, seconds per model, which every new shape would pay again
                first = not self._compiled and self._fallback is None
                entry = self._compiled[key] = (self._compile(model, segments=first), model)
                return entry
            except PrepareError:   # a kernel refused these shapes: the fallback's meets them when it runs
                pass
        if self._fallback is None:
            model = fallback()
            self._fallback = (self._compile(model, segments=False), model)
        return self._fallback

    @property
    def fallback_model(self) -> Model | None:
        return self._fallback[1] if self._fallback else None

    def all_executors(self) -> list:
        """Every compiled set of executors (for resetting their state)."""
        entries = list(self._compiled.values()) + ([self._fallback] if self._fallback else [])
        return [executors for executors, _ in entries]
