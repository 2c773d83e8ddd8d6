"""The op-table parts of ``_core.pyi``, generated from the engine's op tables.

Every row of the unary, binary and comparison tables (``crates/ferrograd/src/ops/unary.rs``,
``binary.rs``) gives a ``Tensor`` method and a module function; their stub lines and the
module's ``__all__`` are generated here, between marker comments, so they never drift from
the bindings::

    python -m ferrograd._stubs --write   # rewrite the generated blocks of _core.pyi
    python -m ferrograd._stubs --check   # exit 1 if they are out of date (the test suite does)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from . import _core

STUB = Path(__file__).with_name("_core.pyi")

BLOCKS = ("exports", "methods", "functions")


def _marker(block: str, end: bool) -> str:
    if end:
        return f"# --- end of generated {block} ---"
    return f"# --- generated {block}: `python -m ferrograd._stubs --write`; do not edit ---"


def _lines(block: str) -> list[str]:
    table = _core._OP_TABLE
    if block == "exports":
        # digits compare as numbers (log2 before log10), as ruff's sort of __all__ does
        names = sorted(
            _core.__all__,
            key=lambda n: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", n)],
        )
        return ["__all__ = ["] + [f'    "{n}",' for n in names] + ["]"]
    out = []
    for family, name, method in table:
        if block == "methods":
            if family == "unary":
                out.append(f"    def {method}(self) -> Tensor: ...")
            else:
                out.append(f"    def {method}(self, other: TensorLike) -> Tensor: ...")
        elif family == "unary":
            out.append(f"def {name}(x: TensorLike) -> Tensor: ...")
        else:
            out.append(f"def {name}(a: TensorLike, b: TensorLike) -> Tensor: ...")
    return out


def render(text: str) -> str:
    """``text`` (the stub) with every generated block replaced by its current lines."""
    for block in BLOCKS:
        start, end = _marker(block, False), _marker(block, True)
        lines = text.split("\n")
        try:
            i = next(k for k, line in enumerate(lines) if line.strip() == start)
            j = next(k for k, line in enumerate(lines) if line.strip() == end)
        except StopIteration:
            raise ValueError(
                f"_core.pyi: the markers of the generated {block} are missing"
            ) from None
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        # (as `ruff format` lays it out: a blank line between module-level defs and a comment)
        gap = [""] if block == "functions" else []
        body = [indent + start, *_lines(block), *gap, indent + end]
        lines[i : j + 1] = body
        text = "\n".join(lines)
    return text


def main(argv: list[str]) -> int:
    text = STUB.read_text()
    want = render(text)
    if "--write" in argv:
        if want != text:
            STUB.write_text(want)
        return 0
    if want != text:
        print(
            "python/ferrograd/_core.pyi is out of date with the op tables; "
            "run `python -m ferrograd._stubs --write`",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
