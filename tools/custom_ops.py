"""Custom-op kernels for the `onert-py` subcommands: loading --custom-ops modules (and the 'mediapipe'
alias), and the hint to use them when a model's missing kernels are mediapipe's custom ops."""
from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Sequence

from onert_py.ir import Model
from onert_py.tools.errors import CliError


_CUSTOM_OP_ALIASES = {"mediapipe": "onert_py.contrib.mediapipe_ops"}


def load_custom_ops(specs: Sequence[str]) -> None:
    """Import each module (name or .py path) and call its register()."""
    for spec in specs:
        name = _CUSTOM_OP_ALIASES.get(spec, spec)
        try:
            if name.endswith(".py"):
                if not Path(name).is_file():
                    raise CliError(f"--custom-ops {spec}: file not found")
                mod_spec = importlib.util.spec_from_file_location(Path(name).stem, name)
                module = importlib.util.module_from_spec(mod_spec)
                mod_spec.loader.exec_module(module)
            else:
                module = importlib.import_module(name)
        except CliError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure of user code is the user's to fix
            raise CliError(f"--custom-ops {spec}: cannot import it ({type(e).__name__}: {e})") from None
        register = getattr(module, "register", None)
        if not callable(register):
            raise CliError(f"--custom-ops {spec}: module {name} has no register() function")
        try:
            register()
        except Exception as e:  # noqa: BLE001
            raise CliError(f"--custom-ops {spec}: register() failed ({type(e).__name__}: {e})") from None


def custom_ops_hint(model: Model) -> str:
    """A hint when a model's missing kernels are mediapipe's custom ops, which onert-py ships."""
    from onert_py.compiler.compile import unsupported_ops
    try:
        from onert_py.contrib import mediapipe_ops
    except ImportError:
        return ""
    ours = sorted({name for _, _, name in unsupported_ops(model)} & set(mediapipe_ops.OPS))
    return f"; {', '.join(ours)}: mediapipe custom op(s), add --custom-ops mediapipe" if ours else ""
