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
from .types import b32, f32, s32, u32

WARPGROUP = 128
ACC_DTYPES = ("f32", "f16", "s32")
# Legal N of wgmma: every multiple of 8 up to 256 (float types); integer and b1 (s32 accumulators): 8, 16, 24, 32,
# then multiples of 16 from 48.
N_FLOAT = tuple(range(8, 257, 8))
N_INTEGER = (8, 16, 24, 32) + tuple(range(48, 257, 16))
A_BITS = {"bf16": 16, "f16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "b1": 1}
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


class _Lane:
    """The thread's lane and warp in its warpgroup (computed where it is used: a register made inside one
    branch is not defined in another)."""

    def __init__(self, k):
        tid = k.tid_x()
        self.lane = k.and_(tid, 31)
        self.warp = k.and_(k.shr(tid, 5), 3)                    # warp within the warpgroup


def _lane(k) -> _Lane:
    return _Lane(k)


def _check_buffer(buf, row_pitch, loc) -> None:
    from .ir import SharedAlloc

    if not isinstance(buf, SharedAlloc) or buf.role != "buffer":
        raise LayoutError(f"buf={buf!r} breaks 'a shared buffer (k.shared)'", loc=loc, rule="fragment.buffer")
    if isinstance(row_pitch, bool) or not isinstance(row_pitch, int) or row_pitch % 16 or row_pitch <= 0:
        raise LayoutError(f"row_pitch={row_pitch!r} breaks 'a positive multiple of 16 bytes (ldmatrix/stmatrix rows "
                          f"are 16-byte aligned)'", loc=loc, rule="fragment.pitch")


def _tile_row_address(k, buf, row_pitch: int, offset):
    """The shared address of this lane's row for ldmatrix/stmatrix .x4 over a warpgroup's 64-row tile: row
    16w + (l & 15), 16-byte half (l >> 4) & 1 (lanes 0-7 rows 0-7, 8-15 rows 8-15 of the first 8 columns,
    16-31 the same rows' next 8 columns)."""
    ln = _lane(k)
    row = k.add(k.and_(ln.lane, 15), k.shl(ln.warp, 4))
    half = k.and_(k.shr(ln.lane, 4), 1)
    addr = k.mad(row, row_pitch, k.mad(half, 16, k.mov(buf)))
    if isinstance(offset, int) and not isinstance(offset, bool):
        return k.add(addr, offset) if offset else addr
    return k.add(addr, offset)


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
        ln = _lane(k)
        return k.add(k.shr(ln.lane, 2), k.shl(ln.warp, 4)), k.shl(k.and_(ln.lane, 3), 1)

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
        N elements of `dtype`, e.g. a bias), loaded once per distinct column (ld.global.v2 per 8-column block)."""
        from .types import scalar_type

        t = scalar_type(dtype)
        _, col = self.base(k)
        start = k.add(ptr, k.mul(col, t.nbytes, mode="wide"))
        from .ir import Addr

        loaded = {b: k.ld(t, Addr(start, 8 * b * t.nbytes) if b else start, vec=2) for b in range(self.n // 8)}
        if self.dtype == "f16":
            return tuple(loaded[i >> 1][0] for i in range(len(self.regs)))        # low half's column
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
        """The accumulator as 16-bit pairs, one .b32 register per two columns, in the order ldmatrix/stmatrix
        use: register j = (element 2j + 1 high, element 2j low), cvt.rn.{bf16x2,f16x2}.f32 (a .f16 accumulator
        already is that, for dtype 'f16')."""
        loc = SourceLoc.caller()
        if dtype not in ("bf16", "f16"):
            raise LayoutError(f"dtype={dtype!r} breaks 'pack converts to bf16 or f16 pairs'", loc=loc,
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
        return tuple(k.cvt(f"{dtype}x2", r[2 * j + 1], r[2 * j]) for j in range(len(r) // 2))

    def store(self, k, buf, row_pitch: int, offset=0, *, dtype: str = "bf16") -> None:
        """Store the accumulator as a row-major 64 x N tile of 16-bit `dtype` at `offset` bytes into the shared
        buffer `buf`, rows `row_pitch` bytes apart: pack, then stmatrix.x4 per 16 columns (lane l addresses row
        16w + (l & 15), columns 16b + 8 * ((l >> 4) & 1)). All 128 threads of the warpgroup call it."""
        loc = SourceLoc.caller()
        if isinstance(row_pitch, int) and not isinstance(row_pitch, bool) and row_pitch < 2 * self.n:
            raise LayoutError(f"row_pitch={row_pitch!r} breaks 'a row holds N = {self.n} 16-bit values "
                              f"({2 * self.n} bytes)'", loc=loc, rule="fragment.pitch")
        if self.n % 16:
            raise LayoutError(f"n={self.n} breaks 'stmatrix.x4 stores 16 columns at a time: N is a multiple of 16'",
                              loc=loc, rule="fragment.n")
        _check_buffer(buf, row_pitch, loc)
        _check_static_offset(buf, offset, 63 * row_pitch + 2 * self.n, loc)
        q = self.pack(k, dtype)
        addr = _tile_row_address(k, buf, row_pitch, offset)
        from .ir import Addr

        for b in range(self.n // 16):
            k.stmatrix(Addr(addr, 32 * b) if b else addr, q[4 * b:4 * b + 4])


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

    def load(self, k, buf, row_pitch: int, offset=0, *, k_step: int = 0) -> "AFragment":
        """ldmatrix.x4 K step `k_step` of a row-major 64 x K tile of 16-bit elements at `offset` bytes into `buf`
        (rows `row_pitch` bytes apart). Issue wgmma.fence after it, before the mma_async that reads it."""
        loc = SourceLoc.caller()
        if A_BITS[self.dtype] != 16:
            raise LayoutError(f"dtype={self.dtype!r} breaks 'ldmatrix loads 16-bit A fragments (bf16, f16)'",
                              loc=loc, rule="fragment.ldmatrix")
        if isinstance(k_step, bool) or not isinstance(k_step, int) or k_step < 0:
            raise LayoutError(f"k_step={k_step!r} breaks 'a non-negative integer'", loc=loc, rule="fragment.k-step")
        if isinstance(row_pitch, int) and row_pitch < 32 * (k_step + 1):
            raise LayoutError(f"k_step={k_step} breaks 'the step's 32 bytes lie inside a {row_pitch}-byte row'",
                              loc=loc, rule="fragment.k-step")
        _check_buffer(buf, row_pitch, loc)
        _check_static_offset(buf, offset, 63 * row_pitch + 32 * (k_step + 1), loc)
        addr = _tile_row_address(k, buf, row_pitch, offset)
        from .ir import Addr

        k.ldmatrix(Addr(addr, 32 * k_step) if k_step else addr, out=self.regs)
        return self
