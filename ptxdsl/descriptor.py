"""Shared-memory matrix descriptors for wgmma: the host-side layout (`MatrixLayout`) and the device value
(`MatrixDescriptor`).

A wgmma operand in shared memory is named by a 64-bit descriptor (PTX ISA "Matrix Descriptor"):

    bits  0-13  start address   (addr & 0x3FFFF) >> 4     the tile's shared-window byte address
    bits 16-29  LBO             (lbo & 0x3FFFF) >> 4      leading-dimension byte offset
    bits 32-45  SBO             (sbo & 0x3FFFF) >> 4      stride-dimension byte offset
    bits 49-51  base offset                               0 when the swizzle pattern follows absolute addresses
    bits 62-63  layout          0 none, 1 128B, 2 64B, 3 32B   (not CUtensorMapSwizzle's numbering)

`MatrixLayout` describes one operand tile (element type, rows = the M or N extent, K extent, swizzle,
major-ness) and computes what a kernel would otherwise spell as magic numbers: LBO and SBO for the canonical
packed placement, the 64-bit template (every field but the start address), the byte offset of an element
before the swizzle, and the start-address advance of each K step (one `mma_async` consumes 32 bytes of K per
row). It validates with rule ids, as `TensorMapSpec` does. `MatrixLayout.for_tensormap` builds the layout a
tensor map's boxes land in, and `tensormap_mismatches` lists how a layout and a map disagree.

`MatrixDescriptor` is the device value `k.matrix_descriptor(buf, layout)` returns: a .u64 register holding
the descriptor, with the shared buffer, layout and byte offset it describes, so that the verifier can check
it and `advance_k(j)` can step it along K with one 64-bit add.

Measured on the H200 (docs/tensor-cores.md): the hardware applies the swizzle XOR to absolute shared
addresses (bits 7-9 into bits 4-6), so a tile written by TMA needs base offset 0; the first static shared
buffer sits at 0x400, so the start address comes from the buffer's symbol, never an assumed 0.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from numbers import Integral

from .errors import LayoutError, SourceLoc
from .tensormap import SWIZZLE_SPAN, TensorMapSpec

# Element types a wgmma operand can have: bits per element.
ELEMENT_BITS: dict[str, int] = {"bf16": 16, "f16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "b1": 1}
# One mma_async consumes 32 bytes of K per row: K elements per step.
K_STEP_BYTES = 32
K_STEP: dict[str, int] = {name: K_STEP_BYTES * 8 // bits for name, bits in ELEMENT_BITS.items()}
# Only 16-bit operands can be read transposed (imm-trans 1, MN-major).
TRANSPOSABLE = frozenset({"bf16", "f16"})
SWIZZLES = ("none", "32B", "64B", "128B")
MAJORS = ("K", "MN")
# Descriptor bits 62-63 (Hopper numbering).
LAYOUT_CODE: dict[str, int] = {"none": 0, "128B": 1, "64B": 2, "32B": 3}
# Bytes per row of a swizzle atom (8 rows); "none" has 16-byte core-matrix rows.
ATOM_WIDTH: dict[str, int] = {"none": 16, "32B": 32, "64B": 64, "128B": 128}
# Address bits 4-6 XORed with bits 7-9 (as the TMA swizzle does).
SWIZZLE_MASK: dict[str, int] = {"none": 0, "32B": 0x10, "64B": 0x30, "128B": 0x70}
FIELD_MAX = 0x3FFF << 4             # LBO/SBO: 14-bit fields of 16-byte units
ADDRESS_BITS = 18                   # the start field encodes address bits 4..17
SHARED_BYTES = 228 * 1024           # the largest shared window (sm_90)
CORE_ROW = 16                       # a core-matrix row: 16 bytes

# Tensor-map element types that deliver a wgmma element type's bytes unchanged (fp8 and b1 move as u8).
TMAP_DTYPES: dict[str, frozenset] = {
    "bf16": frozenset({"bf16", "u16"}), "f16": frozenset({"f16", "u16"}),
    "tf32": frozenset({"tf32", "tf32_ftz", "f32", "f32_ftz", "u32"}),
    "e4m3": frozenset({"u8"}), "e5m2": frozenset({"u8"}), "s8": frozenset({"u8"}), "u8": frozenset({"u8"}),
    "b1": frozenset({"u8"}),
}


def encode(x: int) -> int:
    """A byte address or offset as a 14-bit descriptor field: (x & 0x3FFFF) >> 4."""
    return (x & 0x3FFFF) >> 4


def _is_int(v) -> bool:
    return isinstance(v, Integral) and not isinstance(v, bool)


def _broken(layout, what: str, shown: str, rule: str, text: str) -> LayoutError:
    return LayoutError(f"{what}={shown} breaks '{text}'", loc=layout.loc, rule=f"layout.{rule}")


# ------------------------------------------------------------------------------------------------ checks

def _check_enums(lay) -> None:
    for name, allowed in (("dtype", ELEMENT_BITS), ("swizzle", SWIZZLES), ("major", MAJORS)):
        v = getattr(lay, name)
        if not isinstance(v, str) or v not in allowed:
            raise _broken(lay, name, repr(v), name, f"{name} is one of {', '.join(allowed)}")


def _check_major(lay) -> None:
    if lay.major == "MN" and lay.dtype not in TRANSPOSABLE:
        raise _broken(lay, "major", "'MN'", "mn-major-type",
                      f"only {' and '.join(sorted(TRANSPOSABLE))} operands can be MN-major (imm-trans); "
                      f"a {lay.dtype} operand is K-major")


def _check_extents(lay) -> None:
    for name in ("rows", "k"):
        v = getattr(lay, name)
        if not _is_int(v) or v < 1:
            raise _broken(lay, name, repr(v), "extent", f"{name} is a positive integer")
    if lay.rows % 8:
        raise _broken(lay, "rows", repr(lay.rows), "rows", "rows (the M or N extent) is a multiple of 8")
    step = K_STEP[lay.dtype]
    if lay.k % step:
        raise _broken(lay, "k", repr(lay.k), "k-steps",
                      f"k is a whole number of K steps ({step} {lay.dtype} elements = {K_STEP_BYTES} bytes each)")


def _check_span(lay) -> None:
    if lay.swizzle == "none":
        return
    w = ATOM_WIDTH[lay.swizzle]
    run = lay.run_bytes
    name, what = ("k", "K") if lay.major == "K" else ("rows", "M/N")
    if run > w and run % w or run % CORE_ROW:
        raise _broken(lay, name, f"{getattr(lay, name)} ({run} bytes)", "swizzle-span",
                      f"a {lay.major}-major row ({what}, contiguous) of a {lay.swizzle} tile is a multiple of 16 "
                      f"bytes, at most {w} bytes or a whole number of {w}-byte spans")


def _check_fields(lay) -> None:
    for name in ("lbo", "sbo"):
        v = getattr(lay, name)
        if not _is_int(v):
            raise _broken(lay, name, repr(v), "field-type", f"{name} is an integer number of bytes")
        if v % 16:
            raise _broken(lay, name, repr(v), "field-align", f"{name} is a multiple of 16 bytes (the field holds "
                          f"{name} >> 4)")
        if not 0 <= v <= FIELD_MAX:
            raise _broken(lay, name, repr(v), "field-range", f"{name} fits the 14-bit field: 0..{FIELD_MAX} bytes")
    if not _is_int(lay.base_offset) or not 0 <= lay.base_offset <= 7:
        raise _broken(lay, "base_offset", repr(lay.base_offset), "base-offset", "base_offset is 0..7 (3 bits)")


def _check_overlap(lay) -> None:
    given = [(n, getattr(lay, n)) for n in ("lbo", "sbo") if getattr(lay, n + "_given") is not None]
    if not given:
        return                                    # the canonical placement is dense
    chunks = lay.chunk_offsets()
    if len(set(chunks)) != len(chunks):
        what = ", ".join(n for n, _ in given)
        shown = ", ".join(str(v) for _, v in given)
        raise _broken(lay, what if len(given) == 1 else f"({what})", shown if len(given) == 1 else f"({shown})",
                      "overlap", "the tile's 16-byte core-matrix rows do not overlap")


def _check_size(lay) -> None:
    if lay.nbytes > SHARED_BYTES:
        raise _broken(lay, "nbytes", str(lay.nbytes), "size", f"a tile fits the {SHARED_BYTES}-byte shared window")


# The order in which validate() checks; the first broken rule is the one reported.
_CHECKS = (_check_enums, _check_major, _check_extents, _check_span, _check_fields, _check_overlap, _check_size)


# ------------------------------------------------------------------------------------------------ layout

@dataclass(frozen=True)
class MatrixLayout:
    """One wgmma operand tile in shared memory, as a descriptor describes it.

    dtype: 'bf16', 'f16', 'tf32', 'e4m3', 'e5m2', 's8', 'u8' or 'b1'. rows: the tile's M (A) or N (B) extent.
    k: its K extent in elements. swizzle: 'none', '32B', '64B' or '128B' (TensorMapSpec's spelling; None is
    'none'). major: 'K' (K contiguous: imm-trans 0) or 'MN' (M/N contiguous: imm-trans 1, 16-bit types only).
    lbo, sbo: byte offsets other than the canonical packed placement's (rows padded apart, say); base_offset:
    the descriptor's 3-bit field, for data whose swizzle pattern does not start on a repeat boundary.

    The canonical placement (what TMA writes: one box row per swizzle-span row, boxes one after another):
    K-major, swizzle W: row r, K byte kb at (kb // W) * (rows // 8) * SBO + (r // 8) * SBO + (r % 8) * W + kb % W
    with SBO = 8 * W (LBO is ignored by the hardware; the field holds 16). K-major, none: core matrices
    (8 rows x 16 bytes) rows-fastest, SBO = 128, LBO = rows * 16. MN-major, swizzle W: P = W / element bytes
    M/N elements per span row, (mn // P) * LBO + (k // 8) * SBO + (k % 8) * W + (mn % P) * es with LBO = k * W,
    SBO = 8 * W. MN-major, none: SBO = 128 (next 8 M/N), LBO = rows * 16 (next 8 K).
    """

    dtype: str
    rows: int
    k: int
    swizzle: str = "128B"
    major: str = "K"
    lbo_given: int | None = field(default=None, repr=False)
    sbo_given: int | None = field(default=None, repr=False)
    base_offset: int = 0
    loc: SourceLoc | None = field(default=None, compare=False, repr=False)

    def __init__(self, dtype: str, rows: int, k: int, swizzle: str | None = "128B", major: str = "K", *,
                 lbo: int | None = None, sbo: int | None = None, base_offset: int = 0, loc: SourceLoc | None = None):
        put = lambda name, v: object.__setattr__(self, name, v)          # noqa: E731 (frozen dataclass)
        put("loc", loc or SourceLoc.caller())
        put("dtype", dtype)
        put("rows", operator.index(rows) if _is_int(rows) else rows)
        put("k", operator.index(k) if _is_int(k) else k)
        put("swizzle", "none" if swizzle is None else swizzle)
        put("major", major)
        put("lbo_given", operator.index(lbo) if _is_int(lbo) else lbo)
        put("sbo_given", operator.index(sbo) if _is_int(sbo) else sbo)
        put("base_offset", operator.index(base_offset) if _is_int(base_offset) else base_offset)
        self.validate()

    def __repr__(self) -> str:
        extra = "".join(f", {n}={v!r}" for n, v in (("lbo", self.lbo_given), ("sbo", self.sbo_given),
                                                    ("base_offset", self.base_offset)) if v)
        return f"MatrixLayout({self.dtype!r}, {self.rows!r}, {self.k!r}, {self.swizzle!r}, {self.major!r}{extra})"

    def validate(self) -> "MatrixLayout":
        """Check the descriptor rules in a fixed order; the first broken one raises LayoutError."""
        for check in _CHECKS:
            check(self)
        return self

    # -------------------------------------------------------------------------------- geometry

    @property
    def elem_bits(self) -> int:
        return ELEMENT_BITS[self.dtype]

    @property
    def k_step(self) -> int:
        """K elements one mma_async consumes (32 bytes): 16 for bf16/f16, 8 tf32, 32 8-bit types, 256 b1."""
        return K_STEP[self.dtype]

    @property
    def k_steps(self) -> int:
        """How many mma_async steps cover the tile's K extent."""
        return self.k // self.k_step

    @property
    def width(self) -> int:
        """Bytes per row of a swizzle atom: 32/64/128, or 16 (a core-matrix row) without a swizzle."""
        return ATOM_WIDTH[self.swizzle]

    @property
    def repeat(self) -> int:
        """Bytes after which the swizzle pattern repeats (256/512/1024; 16 without a swizzle): a swizzled tile
        starts on such a boundary unless its base offset says otherwise."""
        return 8 * self.width if self.swizzle != "none" else CORE_ROW

    @property
    def run_bytes(self) -> int:
        """Bytes of one contiguous row: K bytes (K-major) or M/N bytes (MN-major)."""
        return (self.k if self.major == "K" else self.rows) * self.elem_bits // 8

    @property
    def _per_chunk(self) -> int:
        """Elements in 16 bytes (MN-major, none)."""
        return CORE_ROW * 8 // self.elem_bits

    @property
    def lbo(self) -> int:
        """The leading-dimension byte offset the descriptor holds."""
        if self.lbo_given is not None:
            return self.lbo_given
        if self.major == "K":
            return CORE_ROW if self.swizzle != "none" else self.rows * CORE_ROW
        if self.swizzle != "none":
            return self.k * self.width                  # next span column of M/N elements
        return (self.rows // self._per_chunk) * 8 * CORE_ROW      # next 8 K rows

    @property
    def sbo(self) -> int:
        """The stride-dimension byte offset the descriptor holds."""
        if self.sbo_given is not None:
            return self.sbo_given
        return 8 * self.width if self.swizzle != "none" else 8 * CORE_ROW

    @property
    def column_bytes(self) -> int:
        """K-major swizzled: bytes of one column of atoms (rows // 8 atoms), where K byte W starts."""
        return self.rows // 8 * self.sbo

    @property
    def template(self) -> int:
        """The 64-bit descriptor with a start address of 0: OR in (addr & 0x3FFFF) >> 4."""
        return (encode(self.lbo) << 16 | encode(self.sbo) << 32 | self.base_offset << 49
                | LAYOUT_CODE[self.swizzle] << 62)

    def descriptor(self, address: int) -> int:
        """The descriptor of this tile at shared byte address `address` (16-byte aligned)."""
        if not _is_int(address) or address % 16 or not 0 <= address < 1 << ADDRESS_BITS:
            raise LayoutError(f"address={address!r} breaks 'a 16-byte aligned shared address below 2^18'",
                              loc=SourceLoc.caller(), rule="descriptor.align")
        return self.template | encode(address)

    def _offset(self, r: int, kb: int, mn: int = 0, k: int = 0) -> int:
        w = self.width
        if self.major == "K":
            if self.swizzle == "none":
                return (kb // 16) * self.lbo + (r // 8) * self.sbo + (r % 8) * 16 + kb % 16
            return (kb // w) * self.column_bytes + (r // 8) * self.sbo + (r % 8) * w + kb % w
        es = self.elem_bits // 8
        if self.swizzle == "none":
            t = self._per_chunk
            return (k // 8) * self.lbo + (mn // t) * self.sbo + (k % 8) * 16 + (mn % t) * es
        p = w // es
        return (mn // p) * self.lbo + (k // 8) * self.sbo + (k % 8) * w + (mn % p) * es

    def byte_offset(self, row: int, k: int) -> int:
        """Byte offset from the tile's start of element (row, k) before the swizzle (row: the M/N index); a b1
        element is bit k % 8 of that byte. The swizzled address is swizzle(tile start + this), the XOR taken on
        absolute address bits."""
        if not (_is_int(row) and _is_int(k) and 0 <= row < self.rows and 0 <= k < self.k):
            raise LayoutError(f"(row, k)=({row!r}, {k!r}) breaks 'an element of the {self.rows}x{self.k} tile'",
                              loc=SourceLoc.caller(), rule="layout.element")
        if self.major == "K":
            return self._offset(row, k * self.elem_bits // 8)
        return self._offset(0, 0, row, k)

    def k_offset(self, j: int) -> int:
        """Bytes from the tile's start to where K step j begins: the descriptor's start advance."""
        if not _is_int(j) or not 0 <= j < self.k_steps:
            raise LayoutError(f"j={j!r} breaks 'a K step of the tile: 0..{self.k_steps - 1}'",
                              loc=SourceLoc.caller(), rule="descriptor.k-step")
        if self.major == "MN":
            return j * 2 * (self.sbo if self.swizzle != "none" else self.lbo)
        if self.swizzle == "none":
            return j * 2 * self.lbo
        kb = K_STEP_BYTES * j
        return (kb // self.width) * self.column_bytes + kb % self.width

    @property
    def k_linear(self) -> bool:
        """Whether step j starts at j * k_offset(1) (so a register j can advance the descriptor)."""
        return self.k_steps < 2 or all(self.k_offset(j) == j * self.k_offset(1) for j in range(self.k_steps))

    def chunk_offsets(self) -> list[int]:
        """Offsets (before the swizzle) of every 16-byte row of the tile's core matrices."""
        if self.major == "K":
            return [self._offset(r, c * 16) for r in range(self.rows) for c in range(max(self.run_bytes // 16, 1))]
        t = self._per_chunk
        return [self._offset(0, 0, c * t, k) for k in range(self.k) for c in range(self.rows // t)]

    @property
    def nbytes(self) -> int:
        """Shared bytes the tile spans from its start (swizzle rows padded to the span, as TMA fills them)."""
        w = self.width
        if self.major == "K":
            if self.swizzle == "none":
                return (self.run_bytes // 16 - 1) * self.lbo + (self.rows // 8 - 1) * self.sbo + 8 * 16
            cols = -(-self.run_bytes // w)
            return (cols - 1) * self.column_bytes + (self.rows // 8 - 1) * self.sbo + 8 * w
        if self.swizzle == "none":
            return (self.k // 8 - 1) * self.lbo + (self.rows // self._per_chunk - 1) * self.sbo + 8 * 16
        cols = -(-self.run_bytes // w)
        return (cols - 1) * self.lbo + (self.k // 8 - 1) * self.sbo + 8 * w

    # ------------------------------------------------------------------------------- tensor maps

    @classmethod
    def for_tensormap(cls, spec: TensorMapSpec, dtype: str | None = None, *, major: str = "K",
                      boxes: int = 1) -> "MatrixLayout":
        """The layout `boxes` consecutive loads of `spec`'s box write, stepping along the contiguous dimension
        (K for a K-major tile, M/N for an MN-major one): box[0] is that dimension, box[1] the other. `dtype`
        names the wgmma element type where the map moves bytes (fp8, s8, b1 maps are u8); by default it is the
        map's own. A K tile wider than one swizzle span takes several boxes (128 bf16 of K under 128B: 2)."""
        loc = SourceLoc.caller()
        spec.validate()
        if dtype is None:
            dtype = {"bf16": "bf16", "f16": "f16", "tf32": "tf32", "u8": "u8"}.get(spec.dtype)
            if dtype is None:
                raise LayoutError(f"spec.dtype={spec.dtype!r} breaks 'a map of bf16, f16, tf32 or u8 elements, "
                                  f"or dtype= naming the wgmma element type'", loc=loc, rule="layout.dtype")
        if spec.kind != "tiled" or spec.rank < 2 or any(b != 1 for b in spec.box[2:]):
            raise LayoutError(f"spec.box={spec.box!r} breaks 'a tiled map whose box is 2-D (box[2:] all 1)'",
                              loc=loc, rule="layout.tensormap")
        if dtype not in ELEMENT_BITS:
            raise LayoutError(f"dtype={dtype!r} breaks 'dtype is one of {', '.join(ELEMENT_BITS)}'", loc=loc,
                              rule="layout.dtype")
        if not _is_int(boxes) or boxes < 1:
            raise LayoutError(f"boxes={boxes!r} breaks 'a positive number of boxes'", loc=loc, rule="layout.extent")
        run = spec.box[0] * spec.elem_bytes * 8 // ELEMENT_BITS[dtype]
        span = SWIZZLE_SPAN.get(spec.swizzle, 0)
        if boxes > 1 and span and spec.box[0] * spec.elem_bytes != span:
            raise LayoutError(f"boxes={boxes} breaks 'boxes > 1 need box[0] to fill the {span}-byte swizzle span "
                              f"(box[0] = {spec.box[0]} elements is {spec.box[0] * spec.elem_bytes} bytes)'",
                              loc=loc, rule="layout.tensormap")
        if major == "K":
            return cls(dtype, spec.box[1], run * boxes, spec.swizzle, "K", loc=loc)
        return cls(dtype, run * boxes, spec.box[1], spec.swizzle, major, loc=loc)


def tensormap_mismatches(layout: MatrixLayout, spec: TensorMapSpec, boxes: int = 1) -> list[str]:
    """How `layout` and the tile `boxes` loads of `spec` write disagree (empty: they agree): the swizzle, the
    element type, the box's contiguous width and its rows. One sentence per disagreement."""
    out = []
    if spec.swizzle != layout.swizzle:
        out.append(f"swizzle: the layout says {layout.swizzle!r}, the tensor map writes {spec.swizzle!r}")
    if spec.dtype not in TMAP_DTYPES[layout.dtype]:
        out.append(f"element type: the layout holds {layout.dtype}, the tensor map moves {spec.dtype} "
                   f"(expected one of {', '.join(sorted(TMAP_DTYPES[layout.dtype]))})")
    if spec.kind != "tiled" or spec.rank < 2 or any(b != 1 for b in spec.box[2:]):
        out.append(f"box: {spec.box} is not a 2-D tiled box")
        return out
    if spec.interleave != "none":
        out.append(f"interleave: the tensor map interleaves ({spec.interleave}); a descriptor tile is not")
    run_bytes = spec.box[0] * spec.elem_bytes * boxes
    if run_bytes != layout.run_bytes:
        what = "K" if layout.major == "K" else "M/N"
        out.append(f"box width: {boxes} box(es) of box[0] = {spec.box[0]} elements are {run_bytes} bytes of {what}; "
                   f"the layout's {layout.major}-major rows are {layout.run_bytes} bytes")
    rows, name = (layout.rows, "rows") if layout.major == "K" else (layout.k, "k")
    if spec.box[1] != rows:
        out.append(f"box rows: box[1] = {spec.box[1]}, the layout's {name} = {rows}")
    return out


# ------------------------------------------------------------------------------------------------ device

class MatrixDescriptor:
    """A descriptor in a .u64 register (`reg`) for the tile of `layout` at `offset` bytes into the shared
    `buffer` (offset None: a register moved it, see `advance`). Made by `k.matrix_descriptor`; pass it as a
    wgmma operand (its `.reg` is what is emitted)."""

    def __init__(self, k, reg, buffer, layout: MatrixLayout, offset):
        self._k, self.reg, self.buffer, self.layout, self.offset = k, reg, buffer, layout, offset

    def __repr__(self) -> str:
        return (f"MatrixDescriptor({self.reg}, {getattr(self.buffer, 'name', self.buffer)}+{self.offset}, "
                f"{self.layout})")

    def advance(self, nbytes, *, stride: int | None = None) -> "MatrixDescriptor":
        """The descriptor `nbytes` further into the buffer (a multiple of 16: one add.u64 of nbytes >> 4). With
        `stride=`, `nbytes` is a u32 register i and the step is i * stride bytes (one mad.wide.u32): a ring's
        stage, say."""
        k, loc = self._k, SourceLoc.caller()
        if stride is not None:
            if not _is_int(stride) or stride % 16 or stride < 0:
                raise LayoutError(f"stride={stride!r} breaks 'a non-negative multiple of 16 bytes'", loc=loc,
                                  rule="descriptor.advance")
            return MatrixDescriptor(k, k.mad(nbytes, stride >> 4, self.reg, mode="wide"), self.buffer, self.layout,
                                    None)
        if not _is_int(nbytes) or nbytes % 16:
            raise LayoutError(f"nbytes={nbytes!r} breaks 'a multiple of 16 bytes (the start field counts 16-byte "
                              f"units); a register step takes stride='", loc=loc, rule="descriptor.advance")
        offset = None if self.offset is None else self.offset + nbytes
        if offset is not None:
            _check_placement(self.buffer, self.layout, offset, loc, moved=True)
        reg = k.add(self.reg, nbytes >> 4) if nbytes else self.reg
        return MatrixDescriptor(k, reg, self.buffer, self.layout, offset)

    def at_row(self, row: int) -> "MatrixDescriptor":
        """The descriptor of the tile's rows from `row` on (a multiple of 8; of the atom column's width for a
        swizzled MN-major tile): the A of a second consumer warpgroup (row 64), or a slice of B's N. Its layout
        stays the whole tile's, so `advance_k` steps as the tile's K steps lie."""
        lay, loc = self.layout, SourceLoc.caller()
        unit = 8 if lay.major == "K" or lay.swizzle == "none" else lay.width * 8 // lay.elem_bits
        if not _is_int(row) or row % unit or not 0 <= row < lay.rows:
            raise LayoutError(f"row={row!r} breaks 'a row of the {lay.rows}-row tile that starts a group of {unit} "
                              f"(rows 0..{lay.rows - 1})'", loc=loc, rule="descriptor.row")
        step = lay.byte_offset(row, 0) if row else 0
        return self.advance(step) if step else self

    def advance_k(self, j) -> "MatrixDescriptor":
        """The descriptor of K step j of the tile (j: 0 .. layout.k_steps - 1, an integer: one add; or a u32
        register where the steps are evenly spaced: one mad.wide)."""
        lay = self.layout
        if _is_int(j):
            step = lay.k_offset(j)
            return self.advance(step) if step else self
        if not lay.k_linear:
            raise LayoutError(f"j={j!r} breaks 'a register K step needs evenly spaced steps; this {lay.swizzle} "
                              f"tile's K is several atom columns: unroll the K loop (an integer j)'",
                              loc=SourceLoc.caller(), rule="descriptor.k-step")
        return self.advance(j, stride=lay.k_offset(1) if lay.k_steps > 1 else 0)


def _check_placement(buf, layout: MatrixLayout, offset: int, loc, moved: bool = False) -> None:
    """The tile of `layout` at `offset` bytes into `buf` fits it and keeps the alignment its descriptor needs."""
    align = getattr(buf, "align", 16)
    name = getattr(buf, "name", "buffer")
    if align < 16 or offset % 16:
        what = f"{name}.align" if align < 16 else "offset"
        raise LayoutError(f"{what}={align if align < 16 else offset} breaks 'a descriptor's tile starts 16-byte "
                          f"aligned'", loc=loc, rule="descriptor.align")
    if not moved and layout.swizzle != "none" and layout.base_offset == 0 and (align < layout.repeat
                                                                               or offset % layout.repeat):
        what, shown = ("offset", offset) if align >= layout.repeat else (f"{name}.align", align)
        raise LayoutError(f"{what}={shown} breaks 'a {layout.swizzle}-swizzled tile starts on a {layout.repeat}-byte "
                          f"boundary (its pattern repeat), unless base_offset= says where its pattern starts'",
                          loc=loc, rule="descriptor.swizzle-align")
    nbytes = getattr(buf, "nbytes", None)
    end = offset + (layout.nbytes if not moved else 16)
    if offset < 0 or nbytes is not None and end > nbytes:
        raise LayoutError(f"offset={offset} breaks 'the tile ({layout.nbytes} bytes from its start) lies inside "
                          f"{name} ({nbytes} bytes)'", loc=loc, rule="descriptor.fits")


def matrix_descriptor(k, buf, layout: MatrixLayout, offset=0) -> MatrixDescriptor:
    """Emit the descriptor of `layout`'s tile at `offset` bytes into the shared buffer `buf`: mov.u64 of the
    buffer's address (never assumed 0), shr.u64 by 4, add.u64 of the template (with offset >> 4 folded in: the
    start field never carries, the window being under 2^18 bytes). `offset` may be a u32 register (bytes, a
    multiple of 16): then one more mad.wide adds it."""
    from .ir import SharedAlloc
    from .types import u64

    loc = SourceLoc.caller()
    if not isinstance(layout, MatrixLayout):
        raise LayoutError(f"layout={layout!r} breaks 'a MatrixLayout'", loc=loc, rule="descriptor.layout")
    if not isinstance(buf, SharedAlloc) or buf.role != "buffer":
        raise LayoutError(f"buf={buf!r} breaks 'a shared buffer (k.shared)'", loc=loc, rule="descriptor.buffer")
    static = _is_int(offset)
    _check_placement(buf, layout, offset if static else 0, loc)
    addr = k.shr(k.mov(buf, u64), 4)
    desc = k.add(addr, layout.template + (offset >> 4 if static else 0))
    d = MatrixDescriptor(k, desc, buf, layout, offset if static else 0)
    return d if static else d.advance(k.shr(offset, 4), stride=16)
