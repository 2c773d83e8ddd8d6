"""The installed package needs nothing beyond numpy at run time."""

import subprocess
import sys


def test_every_module_imports_without_optional_packages():
    # typing_extensions, torch, jax, hypothesis, pytest: none may be needed to import and use
    # the package (annotation-only imports must stay behind TYPE_CHECKING)
    code = """
import sys
for name in ("typing_extensions", "torch", "jax", "hypothesis", "pytest"):
    sys.modules[name] = None  # makes `import name` fail
import numpy as np
import ferrograd as fg
import ferrograd.nn, ferrograd.optim, ferrograd.autodiff, ferrograd.cuda
x = fg.tensor(np.ones(3, "f4"))
with fg.GradManager() as gm:
    gm.attach([x])
    y = (x * x).sum()
    gm.backward(y)
assert x.grad.numpy().tolist() == [2.0, 2.0, 2.0]
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_optional_extras_are_not_imported_with_the_package(tmp_path):
    # tqdm and matplotlib (the examples' extras) are imported on first use only: stand-in
    # modules on the path show whether `import ferrograd` touches them
    for name in ("tqdm", "matplotlib"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("def tqdm(it=None, *a, **k):\n    return it\n")
    code = """
import sys
import ferrograd, ferrograd.hub, ferrograd.utils.data, ferrograd.nn
print(sorted(m for m in sys.modules if m.split(".")[0] in ("tqdm", "matplotlib")))
from ferrograd.hub import tqdm
print(tqdm.__module__)
"""
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[]", "tqdm"]
