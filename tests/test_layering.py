"""The layering of docs/architecture.md, checked on the installed package's sources: lower layers never
name an op (what they need is a kernel attribute), and imports go one way."""
import ast
from pathlib import Path

import pytest

import onert_py
from onert_py.backends.registry import CONTROLFLOW, CPU, load_builtin_kernels

PACKAGE = Path(onert_py.__file__).resolve().parent


def _sources(sub: str) -> list[Path]:
    return sorted((PACKAGE / sub).rglob("*.py"))


def _op_names() -> set[str]:
    load_builtin_kernels()
    return set(CPU.kernels) | set(CONTROLFLOW.kernels) | {"CUSTOM"}


@pytest.mark.parametrize("sub", ["exec", "compiler"])
def test_lower_layers_name_no_op(sub):
    names = _op_names()
    found = []
    for path in _sources(sub):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
    assert not found, f"op names in onert_py/{sub} (declare a kernel attribute instead): {found}"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


# What each layer must not import (data flows bytes -> schema/loader -> ir -> compiler -> exec -> kernels).
FORBIDDEN = {
    "ir": ("onert_py.loader", "onert_py.compiler", "onert_py.exec", "onert_py.backends", "onert_py.schema"),
    "exec": ("onert_py.compiler", "onert_py.backends", "onert_py.loader", "onert_py.infer",
             "onert_py.interpreter"),
    "backends": ("onert_py.compiler", "onert_py.loader", "onert_py.infer", "onert_py.interpreter",
                 "onert_py.tools"),
    "compiler": ("onert_py.loader", "onert_py.infer", "onert_py.interpreter", "onert_py.tools"),
}


@pytest.mark.parametrize("sub", sorted(FORBIDDEN))
def test_imports_go_one_way(sub):
    bad = [f"{path.relative_to(PACKAGE)} imports {m}" for path in _sources(sub) for m in _imports(path)
           if m.startswith(FORBIDDEN[sub])]
    assert not bad, bad


def test_compute_kernels_never_call_executors():
    """Only the controlflow backend reaches other subgraphs' executors (ctx.executors)."""
    bad = [str(path.relative_to(PACKAGE)) for path in _sources("backends/cpu")
           if "executors" in {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)}]
    assert not bad, bad
