"""Register fragments of warpgroup MMA: which (row, column) each thread's registers hold, and the values that
carry that knowledge in a kernel (`Accumulator`, `AFragment`).

The layouts (PTX ISA "Register Fragments"; every formula ran on the H200, docs/tensor-cores.md). In the
128-thread warpgroup, thread `tid` is warp w = (tid % 128) // 32, lane l = tid % 32, g = l // 4, t = l % 4:

- accumulator D (64 x N): register i (.f32/.s32; element i of a packed .f16 accumulator, register i // 2, low
  half for even i) holds row 16w + g + 8 * ((i >> 1) & 1), column 8 * (i >> 2) + 2t + (i & 1): each warp owns
  16 rows, as N/8 blocks of the 16x8 `mma.m16n8` C fragment;
- A from registers (64 x K step, 4 .b32 registers): element e of register j is row 16w + g + 8 * (j & 1) and
  K index t * V + e + (K step / 2) * (j >> 1), V = values per register (2 for 16-bit, 1 tf32, 4 8-bit, 32 b1).

These functions are the one source of the layouts: the CPU model (ptxdsl.reference.wgmma) and the values
below use them. An epilogue written with `Accumulator` never spells them: `elements`, `load_columns`,
`load_rows`, `map`, `pack` and `store` do the index arithmetic.
"""
from __future__ import annotations

from .errors import LayoutError, SourceLoc
from .types import b32, f32, s32

WARPGROUP = 128
ACC_DTYPES = ("f32", "f16", "s32")
# Legal N of wgmma: every multiple of 8 up to 256 (float types); integer and b1 (s32 accumulators): 8, 16, 24, 32,
# then multiples of 16 from 48.
N_FLOAT = tuple(range(8, 257, 8))
N_INTEGER = (8, 16, 24, 32) + tuple(range(48, 257, 16))
A_BITS = {"bf16": 16, "f16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "b1": 1}
PACKS = ("bf16", "f16", "e4m3", "e5m2")          # what an f32 accumulator packs into (pairs)
A_K = {"bf16": 16, "f16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32, "b1": 256}


def _thread(tid: int) -> tuple[int, int, int]:
    """(w, g, t) of a thread."""
    lane = tid % 32
    return (tid % WARPGROUP) // 32, lane // 4, lane % 4


def acc_coord(tid: int, i: int) -> tuple[int, int]:
    """(row, column) of the 64 x N accumulator that register i (element i of a packed .f16 one) of thread
    `tid` holds."""
    w, g, t = _thread(tid)
    return 16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * t + (i & 1)


def acc_offset(i: int) -> tuple[int, int]:
    """(row, column) of accumulator element i relative to the thread's own (16w + g, 2t)."""
    return 8 * ((i >> 1) & 1), 8 * (i >> 2) + (i & 1)


def a_values(dtype: str) -> int:
    """A elements per .b32 register: 2 (16-bit), 1 (tf32), 4 (8-bit) or 32 (b1)."""
    return 32 // A_BITS[dtype]


def a_coord(dtype: str, tid: int, i: int) -> tuple[int, int]:
    """(row, K index) of the 64 x K-step A tile that element i of thread `tid`'s A registers holds: register
    i // a_values(dtype), value i % a_values(dtype) (the low half / byte / bit first)."""
    v = a_values(dtype)
    j, e = divmod(i, v)
    w, g, t = _thread(tid)
    return 16 * w + g + 8 * (j & 1), t * v + e + A_K[dtype] // 2 * (j >> 1)


def acc_registers(n: int, dtype: str = "f32") -> int:
    """Accumulator registers per thread: N/2 (.f32/.s32) or N/4 (.f16, two per register)."""
    return n // 4 if dtype == "f16" else n // 2


def check_n(n, dtype: str = "f32", loc=None) -> int:
    """`n` as a legal N for an accumulator of `dtype` (LayoutError otherwise)."""
    if dtype not in ACC_DTYPES:
        raise LayoutError(f"dtype={dtype!r} breaks 'an accumulator is one of {', '.join(ACC_DTYPES)}'", loc=loc,
                          rule="fragment.dtype")
    legal = N_INTEGER if dtype == "s32" else N_FLOAT
    if isinstance(n, bool) or not isinstance(n, int) or n not in legal:
        kind = "8, 16, 24, 32, then multiples of 16 up to 256" if dtype == "s32" else "a multiple of 8 up to 256"
        raise LayoutError(f"n={n!r} breaks 'a {dtype} accumulator's N is {kind}'", loc=loc, rule="fragment.n")
    return n


class Index:
    """A row or column index in a kernel: a u32 register holding this thread's base plus a constant."""

    def __init__(self, base, offset: int):
        self.base, self.offset = base, offset

    def value(self, k):
        """The index in a register (one add when the offset is not 0)."""
        return k.add(self.base, self.offset) if self.offset else self.base

    def __repr__(self) -> str:
        return f"Index({self.base} + {self.offset})"


class HostLane:
    """The builder calls the row addressing makes, evaluated on integers for one thread: what the emitted code
    computes in thread `tid` with the buffer at shared address `base` (tests and docs run the same code)."""

    def __init__(self, tid: int, base: int = 0):
        self.tid, self.base = tid, base

    def tid_x(self):
        return self.tid

    def mov(self, buf, *_):
        return self.base

    def and_(self, a, b):
        return a & b

    def xor(self, a, b):
        return a ^ b

    def shr(self, a, b):
        return a >> b

    def shl(self, a, b):
        return (a << b) & 0xFFFFFFFF

    def add(self, a, b):
        return (a + b) & 0xFFFFFFFF

    def mul(self, a, b):
        return (a * b) & 0xFFFFFFFF

    def mad(self, a, b, c, **_):
        return (a * b + c) & 0xFFFFFFFF

    @staticmethod
    def at(base, offset: int):
        return base + offset


def _at(ops, base, offset: int):
    """base + offset as an address operand: [reg+imm] in a kernel, the sum on the host."""
    if isinstance(ops, HostLane):
        return base + offset
    from .ir import Addr

    return Addr(base, offset) if offset else base


def row_addresses(ops, buf, blocks, *, row_pitch: int | None = None, layout=None, offset=0, row: int = 0) -> list:
    """The address each lane gives ldmatrix/stmatrix .x4 for 16-column blocks `blocks` (32 bytes of 16-bit values
    each) of a warpgroup's 64 rows starting at tile row `row`: lane l of warp w addresses row 16w + (l & 15),
    columns 16b + 8 * ((l >> 4) & 1), so matrices 0-3 are (rows 0-7, 8-15) x (columns 0-7, 8-15) of the block.
    The tile is row-major with rows `row_pitch` bytes apart, or placed as `layout` says (a K-major MatrixLayout
    whose K is the columns: the placement a TMA store of that swizzle reads), swizzle XOR included. `ops` is the
    kernel builder, or a HostLane to compute the same on the host."""
    tid = ops.tid_x()
    lane, warp = ops.and_(tid, 31), ops.and_(ops.shr(tid, 5), 3)
    r = ops.add(ops.and_(lane, 15), ops.shl(warp, 4))
    if row:
        r = ops.add(r, row)
    half = ops.and_(ops.shr(lane, 4), 1)
    base = ops.mov(buf)
    if offset is not None and not (isinstance(offset, int) and offset == 0):
        base = ops.add(base, offset)
    if layout is None:
        lanebase = ops.mad(r, row_pitch, ops.mad(half, 16, base))
        return [_at(ops, lanebase, 32 * b) for b in blocks]
    w = layout.width
    rowpart = ops.mad(ops.shr(r, 3), layout.sbo, ops.shl(ops.and_(r, 7), w.bit_length() - 1))
    if layout.swizzle == "none":                   # core matrices: 16-byte column chunks LBO apart
        lanebase = ops.mad(half, layout.lbo, ops.add(base, rowpart))
        return [_at(ops, lanebase, 2 * b * layout.lbo) for b in blocks]
    mask = {32: 0x10, 64: 0x30, 128: 0x70}[w]
    y = ops.xor(ops.shl(half, 4), ops.and_(ops.shr(rowpart, 3), mask))      # the 16-byte half, swizzled
    lanebase = ops.add(base, rowpart)
    out = []
    for b in blocks:
        cb = 32 * b
        z = ops.xor(y, cb % w) if cb % w else y
        out.append(_at(ops, ops.add(lanebase, z), cb // w * layout.column_bytes))
    return out


def _check_buffer(buf, row_pitch, loc) -> None:
    from .ir import SharedAlloc

    if not isinstance(buf, SharedAlloc) or buf.role != "buffer":
        raise LayoutError(f"buf={buf!r} breaks 'a shared buffer (k.shared)'", loc=loc, rule="fragment.buffer")
    if isinstance(row_pitch, bool) or not isinstance(row_pitch, int) or row_pitch % 16 or row_pitch <= 0:
        raise LayoutError(f"row_pitch={row_pitch!r} breaks 'a positive multiple of 16 bytes (ldmatrix/stmatrix rows "
                          f"are 16-byte aligned)'", loc=loc, rule="fragment.pitch")


def _check_static_offset(buf, offset, nbytes_needed: int, loc) -> None:
    if isinstance(offset, bool) or not isinstance(offset, int):
        return                                            # a register: checked where it is computed
    if offset % 16 or offset < 0:
        raise LayoutError(f"offset={offset!r} breaks 'a non-negative multiple of 16 bytes'", loc=loc,
                          rule="fragment.offset")
    if buf.align < 16:
        raise LayoutError(f"{buf.name}.align={buf.align} breaks 'ldmatrix/stmatrix rows are 16-byte aligned'",
                          loc=loc, rule="fragment.offset")
    if offset + nbytes_needed > buf.nbytes:
        raise LayoutError(f"offset={offset} breaks 'the tile ({nbytes_needed} bytes from offset) lies inside "
                          f"{buf.name} ({buf.nbytes} bytes)'", loc=loc, rule="fragment.fits")


class Accumulator:
    """The 64 x N accumulator of one warpgroup's wgmma: `regs`, N/2 registers (.f32 / .s32) or N/4 (.f16, two
    halves each), in the fragment layout (`acc_coord`). Pass it as the d operand of `k.wgmma_mma_async`."""

    def __init__(self, k, n: int, dtype: str = "f32"):
        loc = SourceLoc.caller()
        self.n, self.dtype = check_n(n, dtype, loc), dtype
        t = {"f32": f32, "s32": s32, "f16": b32}[dtype]
        self.regs = tuple(k.reg(t) for _ in range(acc_registers(n, dtype)))

    def __len__(self) -> int:
        return len(self.regs)

    def __iter__(self):
        return iter(self.regs)

    def __repr__(self) -> str:
        return f"Accumulator(n={self.n}, dtype={self.dtype!r}, {len(self.regs)} registers)"

    @property
    def elements_per_register(self) -> int:
        return 2 if self.dtype == "f16" else 1

    # ------------------------------------------------------------------------------ where things are

    def coords(self, i: int, tid: int | None = None) -> tuple[int, int]:
        """(row, column) of register i's element (the low half's for .f16): in the tile when `tid` (a thread of
        the warpgroup) is given, else relative to the thread's own (16w + g, 2t)."""
        e = i * self.elements_per_register
        if not 0 <= i < len(self.regs):
            raise LayoutError(f"i={i!r} breaks 'a register of the accumulator: 0..{len(self.regs) - 1}'",
                              loc=SourceLoc.caller(), rule="fragment.register")
        return acc_coord(tid, e) if tid is not None else acc_offset(e)

    def layout(self, tid: int) -> list[tuple[int, int]]:
        """(row, column) of every element thread `tid` holds, in register order (two per .f16 register)."""
        return [acc_coord(tid, e) for e in range(len(self.regs) * self.elements_per_register)]

    def base(self, k) -> tuple:
        """This thread's (row, column) base: u32 registers 16w + g and 2t."""
        tid = k.tid_x()
        lane, warp = k.and_(tid, 31), k.and_(k.shr(tid, 5), 3)
        return k.add(k.shr(lane, 2), k.shl(warp, 4)), k.shl(k.and_(lane, 3), 1)

    def elements(self, k) -> list[tuple]:
        """(register, row, column) for every register, rows and columns as `Index` values (the thread's base
        register plus the register's constant offset)."""
        row, col = self.base(k)
        return [(r, Index(row, dr), Index(col, dc)) for r, (dr, dc) in
                zip(self.regs, (self.coords(i) for i in range(len(self.regs))))]

    # ---------------------------------------------------------------------------------- epilogue

    def zero(self, k) -> None:
        """Set every register to 0 (before the first mma_async, or use scale_d=0 there instead)."""
        zero = 0.0 if self.dtype == "f32" else 0
        t = {"f32": f32, "s32": s32, "f16": b32}[self.dtype]
        for r in self.regs:
            k.mov(zero, t, out=r)

    def map(self, k, fn) -> None:
        """regs[i] = fn(regs[i], i) for every register; fn builds instructions (write them with out=reg to spare
        a mov). Pair it with `load_columns` / `load_rows`: `acc.map(k, lambda d, i: k.fma(d, s, bias[i], out=d))`."""
        for i, r in enumerate(self.regs):
            new = fn(r, i)
            if new is not None and new is not r:
                k.mov(new, out=r)

    def load_columns(self, k, ptr, dtype=f32) -> tuple:
        """Per-column values for this thread's registers: v[i] = ptr[column of register i] (a global vector of
        N elements of `dtype`, e.g. a bias), loaded once per distinct column (ld.global.v2 per 8-column block).
        For an .f16 accumulator v[i] is the pair (low half's column, high half's)."""
        from .types import scalar_type

        t = scalar_type(dtype)
        _, col = self.base(k)
        start = k.add(ptr, k.mul(col, t.nbytes, mode="wide"))
        from .ir import Addr

        loaded = {b: k.ld(t, Addr(start, 8 * b * t.nbytes) if b else start, vec=2) for b in range(self.n // 8)}
        if self.dtype == "f16":                      # a register holds two columns: the pair of values
            return tuple(loaded[i >> 1] for i in range(len(self.regs)))
        return tuple(loaded[i >> 2][i & 1] for i in range(len(self.regs)))

    def load_rows(self, k, ptr, dtype=f32) -> tuple:
        """Per-row values for this thread's registers: v[i] = ptr[row of register i] (a global vector of 64
        elements of `dtype`, e.g. a row scale); two loads (rows 16w + g and 16w + g + 8)."""
        from .types import scalar_type

        t = scalar_type(dtype)
        row, _ = self.base(k)
        start = k.add(ptr, k.mul(row, t.nbytes, mode="wide"))
        from .ir import Addr

        lo, hi = k.ld(t, start), k.ld(t, Addr(start, 8 * t.nbytes))
        e = self.elements_per_register
        return tuple(hi if (i * e >> 1) & 1 else lo for i in range(len(self.regs)))

    def pack(self, k, dtype: str = "bf16") -> tuple:
        """The accumulator as pairs of narrower floats, in the order ldmatrix/stmatrix use: pair j = (element 2j + 1
        high, element 2j low), so pair j holds columns c and c + 1 of one row. bf16/f16: one .b32 register per
        pair (cvt.rn.{bf16x2,f16x2}.f32; a .f16 accumulator already is that, for 'f16'); e4m3/e5m2: one .b16
        register per pair (cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32: out-of-range values clamp to the largest
        finite)."""
        loc = SourceLoc.caller()
        if dtype not in PACKS:
            raise LayoutError(f"dtype={dtype!r} breaks 'pack converts to one of {', '.join(PACKS)}'", loc=loc,
                              rule="fragment.pack")
        if self.dtype == "f16":
            if dtype != "f16":
                raise LayoutError(f"dtype={dtype!r} breaks 'an f16 accumulator packs as f16 (it holds f16 pairs)'",
                                  loc=loc, rule="fragment.pack")
            return self.regs
        if self.dtype != "f32":
            raise LayoutError(f"dtype={self.dtype!r} accumulator breaks 'pack converts an f32 accumulator'",
                              loc=loc, rule="fragment.pack")
        r = self.regs
        fp8 = {"satfinite": True} if dtype in ("e4m3", "e5m2") else {}
        return tuple(k.cvt(f"{dtype}x2", r[2 * j + 1], r[2 * j], **fp8) for j in range(len(r) // 2))

    def store(self, k, buf, row_pitch: int | None = None, offset=0, *, dtype: str = "bf16", layout=None,
              row: int = 0) -> None:
        """Store the accumulator as 16-bit `dtype` into the shared buffer `buf`: pack, then one stmatrix.x4 per 16
        columns. The tile is row-major, rows `row_pitch` bytes apart from `offset` bytes into `buf`; or, with
        `layout=` (a K-major MatrixLayout of 64 or more rows whose K is the N columns), placed and swizzled as a
        TMA store of that swizzle reads it (`MatrixLayout.for_tensormap` of the store's map). `row`: the tile
        row where this warpgroup's 64 rows start (a multiple of 8). All 128 threads of the warpgroup call it."""
        loc = SourceLoc.caller()
        if dtype not in ("bf16", "f16"):
            raise LayoutError(f"dtype={dtype!r} breaks 'stmatrix stores 16-bit values: bf16 or f16'", loc=loc,
                              rule="fragment.pack")
        if self.n % 16:
            raise LayoutError(f"n={self.n} breaks 'stmatrix.x4 stores 16 columns at a time: N is a multiple of 16'",
                              loc=loc, rule="fragment.n")
        _check_target(buf, row_pitch, layout, offset, row, 64, 2 * self.n, dtype, loc)
        q = self.pack(k, dtype)
        for b, addr in enumerate(row_addresses(k, buf, range(self.n // 16), row_pitch=row_pitch, layout=layout,
                                               offset=offset, row=row)):
            k.stmatrix(addr, q[4 * b:4 * b + 4])


def _check_target(buf, row_pitch, layout, offset, row, rows: int, row_bytes: int, dtype: str, loc) -> None:
    """The checks of a 64-row tile of `row_bytes` bytes per row at `offset`/`row` in `buf`, row-major with
    `row_pitch` or placed by `layout`."""
    from .descriptor import MatrixLayout, _check_placement

    if isinstance(row, bool) or not isinstance(row, int) or row < 0 or row % 8:
        raise LayoutError(f"row={row!r} breaks 'a non-negative multiple of 8'", loc=loc, rule="fragment.row")
    if (row_pitch is None) == (layout is None):
        raise LayoutError(f"row_pitch={row_pitch!r}, layout={layout!r} breaks 'exactly one of row_pitch= (a "
                          f"row-major tile) and layout= (a MatrixLayout)'", loc=loc, rule="fragment.pitch")
    if layout is None:
        if isinstance(row_pitch, int) and not isinstance(row_pitch, bool) and 0 < row_pitch < row_bytes:
            raise LayoutError(f"row_pitch={row_pitch!r} breaks 'a row holds {row_bytes // 2} 16-bit values "
                              f"({row_bytes} bytes)'", loc=loc, rule="fragment.pitch")
        _check_buffer(buf, row_pitch, loc)
        _check_static_offset(buf, offset, (row + rows - 1) * row_pitch + row_bytes, loc)
        return
    _check_buffer(buf, 16, loc)
    if not isinstance(layout, MatrixLayout) or layout.major != "K" or layout.dtype != dtype:
        raise LayoutError(f"layout={layout!r} breaks 'a K-major MatrixLayout of {dtype} (its K is the tile's "
                          f"columns)'", loc=loc, rule="fragment.layout")
    if layout.k * 2 != row_bytes or row + rows > layout.rows:
        raise LayoutError(f"layout={layout!r} breaks 'k = {row_bytes // 2} columns and rows >= row + {rows} = "
                          f"{row + rows}'", loc=loc, rule="fragment.layout")
    if isinstance(offset, int) and not isinstance(offset, bool):
        _check_placement(buf, layout, offset, loc)


class AFragment:
    """The A operand of a register-sourced wgmma (one K step): 4 .b32 registers in the A fragment layout
    (`a_coord`). `load` fills them from a row-major shared tile with ldmatrix.x4 (16-bit types)."""

    def __init__(self, k, dtype: str = "bf16"):
        if dtype not in A_BITS:
            raise LayoutError(f"dtype={dtype!r} breaks 'an A fragment is one of {', '.join(A_BITS)}'",
                              loc=SourceLoc.caller(), rule="fragment.dtype")
        self.dtype = dtype
        self.regs = tuple(k.reg(b32) for _ in range(4))

    def __repr__(self) -> str:
        return f"AFragment({self.dtype!r}, {', '.join(map(str, self.regs))})"

    def coords(self, i: int, tid: int) -> tuple[int, int]:
        """(row, K index) that element i (register i // values, low part first) of thread `tid` holds."""
        return a_coord(self.dtype, tid, i)

    def load(self, k, buf, row_pitch: int | None = None, offset=0, *, k_step: int = 0, layout=None,
             row: int = 0) -> "AFragment":
        """ldmatrix.x4 K step `k_step` of a 64 x K tile of 16-bit elements in the shared buffer `buf`: row-major
        with rows `row_pitch` bytes apart from `offset`, or placed as the K-major `layout` says (a tile written by
        TMA, swizzle included); `row`: where this warpgroup's 64 rows start. Issue wgmma.fence after it, before
        the mma_async that reads it."""
        loc = SourceLoc.caller()
        if A_BITS[self.dtype] != 16:
            raise LayoutError(f"dtype={self.dtype!r} breaks 'ldmatrix loads 16-bit A fragments (bf16, f16)'",
                              loc=loc, rule="fragment.ldmatrix")
        if isinstance(k_step, bool) or not isinstance(k_step, int) or k_step < 0:
            raise LayoutError(f"k_step={k_step!r} breaks 'a non-negative integer'", loc=loc, rule="fragment.k-step")
        width = layout.k * 2 if layout is not None and hasattr(layout, "k") else row_pitch
        if isinstance(width, int) and width < 32 * (k_step + 1):
            raise LayoutError(f"k_step={k_step} breaks 'the step's 32 bytes lie inside a {width}-byte row'",
                              loc=loc, rule="fragment.k-step")
        row_bytes = 32 * (k_step + 1) if layout is None else width
        _check_target(buf, row_pitch, layout, offset, row, 64, row_bytes, self.dtype, loc)
        (addr,) = row_addresses(k, buf, [k_step], row_pitch=row_pitch, layout=layout, offset=offset, row=row)
        k.ldmatrix(addr, out=self.regs)
        return self
