"""Running from the repository root: the source folder onert_py/ there shadows the installed package
(the current directory comes first on sys.path for `python -c`, `python -m pytest` and scripts run from
there), so schema/, backends/ and tools/, which pyproject's package-dir maps into the package at install
time, must be reachable from it too (the symlinks onert_py/schema, onert_py/backends, onert_py/tools)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The README's Python API example, with real inputs: x float32 [4], n int32 scalar. The loop doubles x
# while i < 3 and adds 1 after, so n = 5 gives i = 5 and y = 8 * x + 2.
SCRIPT = """
import numpy as np
import onert_py, onert_py.backends.cpu, onert_py.tools.cli, onert_py.schema.writer
print(onert_py.__file__)
sess = onert_py.infer.session("examples/while_if.circle")
print([(t.name, t.dtype, t.dims) for t in sess.get_inputs_tensorinfo()])
i, y = sess.infer([np.array([1, -2, 0.5, 3], np.float32), np.array(5, np.int32)])
print(int(i), y.tolist())
"""


@pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(),
                    reason=f"{ROOT} is not the repository root (no pyproject.toml): the tests were copied elsewhere")
def test_package_imports_and_runs_the_example_from_the_repository_root():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}  # keep the current directory on sys.path
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # The source folder is the one imported: the case the layout has to handle.
    assert Path(lines[0]).resolve() == ROOT / "onert_py" / "__init__.py", lines[0]
    assert lines[1] == "[('x', 'float32', [4]), ('n', 'int32', [])]"
    assert lines[2] == "5 [10.0, -14.0, 6.0, 26.0]"
