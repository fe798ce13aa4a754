"""The pictures of docs/tensor-cores.md, drawn from the code they describe (ptxdsl.descriptor, ptxdsl.fragment,
ptxdsl.reference.wgmma), so that the page cannot drift from it.

    python -m ptxdsl.layoutdoc            rewrite docs/tensor-cores.md's pictures in place
    python -m ptxdsl.layoutdoc --check    exit 1 when a picture is stale (tests/test_layout_pictures.py does this)

In the page, a picture is a fenced text block between `<!-- picture: NAME -->` and `<!-- end picture -->`;
PICTURES maps each NAME to the function that draws it.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from .descriptor import MatrixLayout
from .fragment import a_coord, acc_coord

_BLOCK = re.compile(r"(<!-- picture: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end picture -->)", re.S)


def _grid(rows, cols, cell, row_label=lambda r: f"{r:>3}", col_label=lambda c: f"{c}", width=None) -> str:
    """A text grid: one line per row, cells right-aligned to a common width."""
    cells = [[cell(r, c) for c in cols] for r in rows]
    width = width or max(len(x) for line in cells for x in line + [col_label(c) for c in cols])
    lead = " " * len(row_label(rows[0]))
    out = [lead + " |" + "".join(f" {col_label(c):>{width}}" for c in cols)]
    out.append("-" * len(out[0]))
    for r, line in zip(rows, cells):
        out.append(row_label(r) + " |" + "".join(f" {x:>{width}}" for x in line))
    return "\n".join(out)


def accumulator() -> str:
    """Who holds D[row][col] (rows 0-15, columns 0-15: warp 0's first two 16x8 blocks): lane:register."""
    owner = {acc_coord(t, i): f"{t % 32}:{i}" for t in range(32) for i in range(8)}
    return ("row\\col  (lane:register of warp 0; warp w holds rows 16w..16w+15 the same way;\n"
            "          columns 8b..8b+7 are registers 4b..4b+3)\n"
            + _grid(range(16), range(16), lambda r, c: owner[(r, c)]))


def a_bf16() -> str:
    """Who holds A[row][k] of a bf16/f16 K step from registers (rows 0-15): lane:element (register = element // 2,
    the even element in the low half)."""
    owner = {a_coord("bf16", t, i): f"{t % 32}:{i}" for t in range(32) for i in range(8)}
    return ("row\\k    (lane:element of warp 0; register = element // 2, even elements in the low half)\n"
            + _grid(range(16), range(16), lambda r, c: owner[(r, c)]))


def a_tf32() -> str:
    owner = {a_coord("tf32", t, j): f"{t % 32}:{j}" for t in range(32) for j in range(4)}
    return ("row\\k    (lane:register of warp 0; one tf32 per register)\n"
            + _grid(range(16), range(8), lambda r, c: owner[(r, c)]))


def _chunk_map(swizzle: str) -> str:
    """For rows 0-7 of a K-major bf16 tile: the logical 16-byte chunk (K 8c..8c+7) found at each physical chunk
    of the row's span, read back from the bytes place_tile writes."""
    import numpy as np

    from .reference import wgmma as W

    lay = MatrixLayout("bf16", 8, {"128B": 64, "64B": 32, "32B": 16}[swizzle], swizzle)
    m = (np.arange(lay.k)[None, :] // 8).repeat(8, axis=0).astype(np.float32)
    smem = np.zeros(lay.nbytes, np.uint8)
    W.place_tile(smem, m, lay, 0)
    elems = smem.view(np.uint16).reshape(8, -1)[:, ::8]          # the first element of each 16-byte chunk
    import ml_dtypes

    chunks = elems.view(ml_dtypes.bfloat16).astype(int)
    return _grid(range(8), range(chunks.shape[1]), lambda r, c: str(chunks[r, c]),
                 col_label=lambda c: f"@{c}")


def swizzles() -> str:
    """The three swizzle modes on rows 0-7: physical chunk @p of row r holds logical chunk p ^ (r & mask)."""
    return "\n\n".join(f"{s} (row\\physical chunk: which logical chunk of K it holds)\n" + _chunk_map(s)
                       for s in ("128B", "64B", "32B"))


def atoms() -> str:
    """Where each 8-row x 128-byte atom of a 128-row x 128-K bf16 128B tile starts (before the swizzle)."""
    lay = MatrixLayout("bf16", 128, 128, "128B")
    return ("rows\\K    (start of each 1024-byte atom, bytes from the tile start: atoms go down the rows first,\n"
            "           then the next 64 K, exactly where a second TMA box of 64 K lands)\n"
            + _grid(range(0, 128, 8), range(0, 128, 64), lambda r, c: str(lay.byte_offset(r, c)),
                    row_label=lambda r: f"{r:>3}-{r + 7:<3}", col_label=lambda c: f"K {c}-{c + 63}"))


def templates() -> str:
    """LBO, SBO and the template of the verified layouts, and the K-step starts of each."""
    rows = [MatrixLayout("bf16", 64, 64, "128B"), MatrixLayout("bf16", 64, 64, "64B"),
            MatrixLayout("bf16", 64, 64, "32B"), MatrixLayout("bf16", 64, 64, "none"),
            MatrixLayout("bf16", 128, 64, "128B", "MN"), MatrixLayout("bf16", 64, 64, "64B", "MN"),
            MatrixLayout("bf16", 64, 64, "32B", "MN"), MatrixLayout("bf16", 64, 64, "none", "MN")]
    out = [f"{'MatrixLayout(...)':<40} {'LBO':>5} {'SBO':>5}  {'template':<18}  K-step starts (bytes)"]
    for lay in rows:
        args = f'"bf16", {lay.rows}, {lay.k}, "{lay.swizzle}"' + (', "MN"' if lay.major == "MN" else "")
        starts = ", ".join(str(lay.k_offset(j)) for j in range(lay.k_steps))
        out.append(f"{args:<40} {lay.lbo:>5} {lay.sbo:>5}  {lay.template:#018x}  {starts}")
    return "\n".join(out)


def worked_example() -> str:
    """The descriptors of the worked example: A (64x64) at 0x400, B (256x64) at 0x2400, K steps 0-3."""
    a, b = MatrixLayout("bf16", 64, 64), MatrixLayout("bf16", 256, 64)
    lines = ["K step   A at 0x400            B at 0x2400"]
    for j in range(a.k_steps):
        da, db = a.descriptor(0x400 + a.k_offset(j)), b.descriptor(0x2400 + b.k_offset(j))
        lines.append(f"{j:>6}   {da:#018x}    {db:#018x}")
    return "\n".join(lines)


def stmatrix_lanes() -> str:
    """The row each lane addresses for ldmatrix/stmatrix .x4 (warp 0, block 0 of a row-major tile)."""
    from .fragment import HostLane, row_addresses

    pitch = 256
    at = [row_addresses(HostLane(l), None, [0], row_pitch=pitch)[0] for l in range(32)]
    return ("lane -> (row, column) of the 16x16 block it gives the address of (row-major, 16 columns a block):\n"
            + _grid(range(4), range(8), lambda q, i: f"({at[8 * q + i] // pitch},{at[8 * q + i] % pitch // 2})",
                    row_label=lambda q: f"lanes {8 * q:>2}-{8 * q + 7:<2} matrix {q}", col_label=lambda i: f"+{i}"))


PICTURES = {"accumulator": accumulator, "a-bf16": a_bf16, "a-tf32": a_tf32, "swizzles": swizzles, "atoms": atoms,
            "templates": templates, "worked-example": worked_example, "stmatrix-lanes": stmatrix_lanes}


def page_path() -> Path:
    return Path(__file__).resolve().parent.parent / "docs" / "tensor-cores.md"


def render(text: str) -> str:
    """The page with every picture block redrawn."""
    def redraw(m):
        name = m["name"]
        if name not in PICTURES:
            raise KeyError(f"<!-- picture: {name} --> names no picture; the pictures are {', '.join(PICTURES)}")
        return f"{m.group(1)}```text\n{PICTURES[name]()}\n```\n{m.group(4)}"
    return _BLOCK.sub(redraw, text)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = page_path()
    text = path.read_text(encoding="utf-8")
    new = render(text)
    if "--check" in argv:
        if new != text:
            print(f"{path} is stale: run python -m ptxdsl.layoutdoc", file=sys.stderr)
            return 1
        return 0
    path.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
