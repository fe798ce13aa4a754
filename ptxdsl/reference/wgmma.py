"""A numpy model of warpgroup MMA (wgmma.mma_async): what a descriptor reads from shared memory, the register
fragments, and the arithmetic. A test oracle, and a way to see what a kernel will compute.

Shared memory is a flat uint8 image whose first byte has shared address `smem_base` (the H200 put the first
static buffer at 0x400); descriptors hold absolute addresses, and the swizzle XOR is taken on absolute
address bits 7-9 (minus the descriptor's base offset, modulo 8) into bits 4-6, as measured on the H200.

    read_operand(smem, desc, role, ...)               one K step of A (64 rows) or B (N rows) a descriptor names
    place_tile / read_tile                            a whole MatrixLayout tile, written or read through its
                                                      descriptors, K step by K step
    acc_to_matrix / matrix_to_acc                     accumulator registers (128 threads x N/2 or N/4) <-> 64 x N
    a_regs_to_matrix / matrix_to_a_regs               A registers (128 x 4 words) <-> 64 x K step
    mma_async(d, a, b, ...)                           D = scale_a*A x (scale_b*B)^T + (scale_d ? D : 0), matrices
    wgmma(smem, d_regs, a, b_desc, ...)               one mma_async on registers and descriptors

Arithmetic. Integers (s8/u8, b1) are exact: products summed in int64, then wrapped to int32, or clamped to the
int32 range with satfinite; b1 computes popc(A AND B). Floats: tf32 inputs are truncated to 19 bits (sign,
8 exponent, 10 mantissa bits; the low 13 bits of the f32 dropped), every product and the sum with D are
formed in float64 and rounded once to the accumulator type (round to nearest even). The hardware's summation
order and internal width are unspecified, so a kernel agrees with this model within the bound of any
summation of the K + 1 terms (K products and D) in the accumulator's precision:

    |hw - model| <= 2 * (K + 1) * u * (sum_k |a_k * b_k| + |d|),   u = 2^-24 (f32 accumulator), 2^-11 (f16)

(twice the classical gamma_{K+1} ~ (K + 1) u bound of recursive summation, to cover the final rounding). This
bound is the model's promise for f16, bf16 and tf32 inputs; for e4m3/e5m2 inputs the H200's internal
accumulation is narrower than f32 (widely reported, not measured here), so allow a larger tolerance there.
Data that are small integers are exact in every type, which is how the layouts were checked on the H200.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..descriptor import ATOM_WIDTH, ELEMENT_BITS, K_STEP, LAYOUT_CODE, SWIZZLE_MASK, MatrixLayout
from ..errors import LayoutError
from ..fragment import WARPGROUP, a_coord, a_values, acc_coord, acc_registers, check_n

# numpy element types of the operands (tf32 as the float32 it is stored as; b1 as 0/1 bytes)
ELEMENT_DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "tf32": np.float32,
                  "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "s8": np.int8, "u8": np.uint8,
                  "b1": np.uint8}
ACC_DTYPES = {"f32": np.float32, "f16": np.float16, "s32": np.int32}
FLOAT_INPUTS = frozenset({"bf16", "f16", "tf32", "e4m3", "e5m2"})
INT_INPUTS = frozenset({"s8", "u8"})
_SWIZZLE_OF_CODE = {code: name for name, code in LAYOUT_CODE.items()}
TF32_MASK = 0xFFFFE000
# the unit roundoff of each accumulator type, for the error bound above
UNIT_ROUNDOFF = {"f32": 2.0 ** -24, "f16": 2.0 ** -11}


def _fail(rule: str, message: str) -> LayoutError:
    return LayoutError(message, rule=f"model.{rule}")


# ------------------------------------------------------------------------------------------- descriptors

def decode_descriptor(desc: int) -> dict:
    """The fields of a 64-bit descriptor: start, lbo, sbo (bytes), base_offset, swizzle ('none'/'32B'/...)."""
    desc = int(desc)
    if not 0 <= desc < 1 << 64:
        raise _fail("descriptor", f"desc={desc:#x} breaks 'a 64-bit descriptor'")
    return {"start": (desc & 0x3FFF) << 4, "lbo": (desc >> 16 & 0x3FFF) << 4, "sbo": (desc >> 32 & 0x3FFF) << 4,
            "base_offset": desc >> 49 & 7, "swizzle": _SWIZZLE_OF_CODE[desc >> 62 & 3]}


def swizzle_address(addr, swizzle: str, base_offset: int = 0):
    """Where logical shared address `addr` (an int or an integer array) really lives: bits 4-6 XORed with the
    row bits 7-9, counted from the base offset (((addr >> 7) - base_offset) & 7), masked to the mode."""
    mask = SWIZZLE_MASK[swizzle]
    if not mask:
        return addr
    return addr ^ (((((addr >> 7) - base_offset) & 7) << 4) & mask)


def _operand_offsets(f: dict, rows: int, dtype: str, trans: bool):
    """(byte address, bit) of each element (rows x K step) of one operand before the swizzle."""
    bits = ELEMENT_BITS[dtype]
    r = np.arange(rows, dtype=np.int64)[:, None]
    k = np.arange(K_STEP[dtype], dtype=np.int64)[None, :]
    w, lbo, sbo = ATOM_WIDTH[f["swizzle"]], f["lbo"], f["sbo"]
    if not trans:
        kb = k * bits // 8
        if f["swizzle"] == "none":
            off = (kb // 16) * lbo + (r // 8) * sbo + (r % 8) * 16 + kb % 16
        else:
            off = (r // 8) * sbo + (r % 8) * w + kb
        bit = (k * bits) % 8 if bits == 1 else np.zeros_like(k)
    else:
        if dtype not in ("bf16", "f16"):
            raise _fail("trans", f"trans=1 breaks 'only bf16 and f16 operands are read transposed', dtype={dtype!r}")
        es = bits // 8
        if f["swizzle"] == "none":
            t = 16 // es
            off = (k // 8) * lbo + (r // t) * sbo + (k % 8) * 16 + (r % t) * es
        else:
            p = w // es
            off = (r // p) * lbo + (k // 8) * sbo + (k % 8) * w + (r % p) * es
        bit = np.zeros_like(k)
    addr, bit = np.broadcast_arrays(f["start"] + off, bit)
    return addr, bit


def _image(smem) -> np.ndarray:
    if isinstance(smem, np.ndarray):
        return smem.reshape(-1).view(np.uint8)
    return np.frombuffer(smem, dtype=np.uint8)


def _gather(smem: np.ndarray, phys, nbytes: int, smem_base: int) -> np.ndarray:
    idx = phys - smem_base
    if idx.size and (idx.min() < 0 or idx.max() + nbytes > smem.size):
        raise _fail("bounds", f"the operand reaches shared addresses {int(phys.min()):#x}..{int(phys.max()):#x}, "
                              f"outside the image ({smem.size} bytes from {smem_base:#x})")
    return smem[idx[..., None] + np.arange(nbytes)]


def read_operand(smem, desc, role: str = "B", *, dtype: str | None = None, rows: int | None = None,
                 trans: bool | None = None, smem_base: int = 0, address: int | None = None) -> np.ndarray:
    """The matrix one mma_async reads through descriptor `desc` from the shared-memory image `smem` (bytes or a
    uint8 array starting at address smem_base): for role 'A' the 64 x K-step A (M x K), for 'B' the N x K-step B,
    N = `rows`. `desc` is the 64-bit value (an int), or a MatrixDescriptor with `address` the shared address of
    its buffer; then dtype, rows (B) and trans default to its layout's. trans: imm-trans (MN-major; bf16/f16
    only). Elements come back as ELEMENT_DTYPES[dtype] (b1: 0/1)."""
    if role not in ("A", "B"):
        raise _fail("role", f"role={role!r} breaks 'A or B'")
    layout = getattr(desc, "layout", None)
    if layout is not None:
        if address is None:
            raise _fail("descriptor", "a MatrixDescriptor's value needs address= (its buffer's shared address)")
        desc = descriptor_value(desc, address)
        dtype = dtype or layout.dtype
        rows = rows if rows is not None else (64 if role == "A" else layout.rows)
        trans = (layout.major == "MN") if trans is None else trans
    if rows is None:
        rows = 64 if role == "A" else None
    if rows is None or isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 8 or rows % 8:
        raise _fail("shape", f"rows={rows!r} breaks 'B's N: a positive multiple of 8'")
    if dtype not in ELEMENT_BITS:
        raise _fail("dtype", f"dtype={dtype!r} breaks 'one of {', '.join(ELEMENT_BITS)}'")
    f = decode_descriptor(desc)
    addr, bit = _operand_offsets(f, int(rows), dtype, bool(trans))
    phys = swizzle_address(addr, f["swizzle"], f["base_offset"])
    bits = ELEMENT_BITS[dtype]
    raw = _gather(_image(smem), phys, max(bits // 8, 1), smem_base)
    if bits == 1:
        return ((raw[..., 0] >> bit) & 1).astype(np.uint8)
    return np.ascontiguousarray(raw).view(ELEMENT_DTYPES[dtype])[..., 0]


def _tile_offsets(layout: MatrixLayout):
    """(byte offset, bit) of every element (rows x k) of a layout before the swizzle: the layout's own formula."""
    r = np.arange(layout.rows, dtype=np.int64)[:, None]
    k = np.arange(layout.k, dtype=np.int64)[None, :]
    bits = layout.elem_bits
    if layout.major == "K":
        off = layout._offset(r, k * bits // 8)
    else:
        off = layout._offset(0, 0, r, k)
    bit = (k * bits) % 8 if bits == 1 else np.zeros_like(k)
    return np.broadcast_arrays(off, bit)


def place_tile(smem: np.ndarray, matrix, layout: MatrixLayout, address: int, smem_base: int = 0) -> np.ndarray:
    """Write `matrix` (rows x k, the layout's element type; b1 as 0/1) into the uint8 image `smem` in place, as
    the layout places it at shared address `address` (swizzled by absolute address, as TMA writes); returns
    smem. The inverse of `read_tile`."""
    smem = _image(smem)
    m = np.asarray(matrix)
    if m.shape != (layout.rows, layout.k):
        raise _fail("shape", f"matrix.shape={m.shape} breaks 'the layout's rows x k = {layout.rows} x {layout.k}'")
    off, bit = _tile_offsets(layout)
    phys = swizzle_address(address + off, layout.swizzle, layout.base_offset) - smem_base
    if phys.min() < 0 or phys.max() >= smem.size:
        raise _fail("bounds", f"the tile at {address:#x} leaves the image ({smem.size} bytes from {smem_base:#x})")
    if layout.elem_bits == 1:
        ones = (m.astype(np.uint8) & 1).astype(bool)
        np.bitwise_and.at(smem, phys[~ones], ~(np.uint8(1) << bit[~ones].astype(np.uint8)))
        np.bitwise_or.at(smem, phys[ones], np.uint8(1) << bit[ones].astype(np.uint8))
        return smem
    es = layout.elem_bits // 8
    data = np.ascontiguousarray(m.astype(ELEMENT_DTYPES[layout.dtype])).view(np.uint8).reshape(*m.shape, es)
    smem[phys[..., None] + np.arange(es)] = data
    return smem


def read_tile(smem, layout: MatrixLayout, address: int, smem_base: int = 0) -> np.ndarray:
    """The rows x k matrix of the layout's tile at shared address `address`, read K step by K step through the
    descriptors a kernel would use (layout.descriptor(address + layout.k_offset(j)))."""
    steps = [read_operand(smem, layout.descriptor(address + layout.k_offset(j)), "B", dtype=layout.dtype,
                          rows=layout.rows, trans=layout.major == "MN", smem_base=smem_base)
             for j in range(layout.k_steps)]
    return np.concatenate(steps, axis=1)


def descriptor_value(desc, address: int) -> int:
    """The value a MatrixDescriptor holds when its buffer sits at shared address `address` (offset known)."""
    if desc.offset is None:
        raise _fail("descriptor", "the descriptor was moved by a register: its value depends on that register")
    return desc.layout.descriptor(address + desc.offset)


# --------------------------------------------------------------------------------------------- fragments

def _acc_index(n: int, dtype: str):
    """(rows, cols) arrays (128 x elements) of every thread's accumulator elements."""
    count = acc_registers(n, dtype) * (2 if dtype == "f16" else 1)
    rc = np.array([[acc_coord(t, i) for i in range(count)] for t in range(WARPGROUP)], dtype=np.int64)
    return rc[..., 0], rc[..., 1]


def acc_to_matrix(regs, n: int, dtype: str = "f32") -> np.ndarray:
    """The 64 x N accumulator from per-thread registers: regs is 128 x N/2 (f32: float32, s32: int32 values)
    or 128 x N/4 uint32 words of packed f16 pairs (low half = the even element)."""
    check_n(n, dtype)
    regs = np.asarray(regs)
    if regs.shape != (WARPGROUP, acc_registers(n, dtype)):
        raise _fail("shape", f"regs.shape={regs.shape} breaks '{WARPGROUP} threads x {acc_registers(n, dtype)} "
                             f"registers'")
    vals = regs.astype(np.uint32).view(np.float16) if dtype == "f16" else regs.astype(ACC_DTYPES[dtype])
    rows, cols = _acc_index(n, dtype)
    out = np.zeros((64, n), dtype=ACC_DTYPES[dtype])
    out[rows, cols] = vals.reshape(WARPGROUP, -1)
    return out


def matrix_to_acc(d, dtype: str = "f32") -> np.ndarray:
    """Per-thread accumulator registers (see acc_to_matrix) of a 64 x N matrix."""
    d = np.asarray(d)
    n = d.shape[1] if d.ndim == 2 and d.shape[0] == 64 else -1
    check_n(n, dtype)
    rows, cols = _acc_index(n, dtype)
    vals = d.astype(ACC_DTYPES[dtype])[rows, cols]
    return np.ascontiguousarray(vals).view(np.uint32) if dtype == "f16" else vals


def _a_index(dtype: str):
    per = 4 * a_values(dtype)
    rc = np.array([[a_coord(dtype, t, i) for i in range(per)] for t in range(WARPGROUP)], dtype=np.int64)
    return rc[..., 0], rc[..., 1]


def a_regs_to_matrix(regs, dtype: str) -> np.ndarray:
    """The 64 x K-step A tile from per-thread A registers (128 x 4 uint32 words; value e of a register in bits
    e*b .. e*b + b - 1, b the element's width)."""
    regs = np.asarray(regs, dtype=np.uint32)
    if dtype not in ELEMENT_BITS or regs.shape != (WARPGROUP, 4):
        raise _fail("shape", f"regs.shape={regs.shape}, dtype={dtype!r} breaks '{WARPGROUP} x 4 words of a wgmma "
                             f"A type'")
    bits, v = ELEMENT_BITS[dtype], a_values(dtype)
    shift = (np.arange(v, dtype=np.uint32) * bits)
    fields = (regs[..., None] >> shift) & np.uint32((1 << bits) - 1 if bits < 32 else 0xFFFFFFFF)
    fields = fields.reshape(WARPGROUP, -1)
    rows, cols = _a_index(dtype)
    out = np.zeros((64, K_STEP[dtype]), dtype=np.uint32)
    out[rows, cols] = fields
    if bits == 1:
        return out.astype(np.uint8)
    return out.astype(f"<u{bits // 8}").view(ELEMENT_DTYPES[dtype])


def matrix_to_a_regs(a, dtype: str) -> np.ndarray:
    """Per-thread A registers (128 x 4 uint32 words) of a 64 x K-step tile: the inverse of a_regs_to_matrix."""
    a = np.asarray(a)
    if dtype not in ELEMENT_BITS or a.shape != (64, K_STEP[dtype]):
        raise _fail("shape", f"a.shape={a.shape} breaks 'a 64 x {K_STEP.get(dtype)} A tile of {dtype}'")
    bits, v = ELEMENT_BITS[dtype], a_values(dtype)
    if bits == 1:
        raw = a.astype(np.uint32) & 1
    else:
        raw = np.ascontiguousarray(a.astype(ELEMENT_DTYPES[dtype])).view(f"<u{bits // 8}").astype(np.uint32)
    rows, cols = _a_index(dtype)
    fields = raw[rows, cols].reshape(WARPGROUP, 4, v)
    shift = np.arange(v, dtype=np.uint32) * bits
    return np.bitwise_or.reduce(fields << shift, axis=-1).astype(np.uint32)


# ------------------------------------------------------------------------------------ ldmatrix / stmatrix

def _check_warp(addresses, regs=None):
    addresses = np.asarray(addresses, dtype=np.int64)
    if addresses.shape != (32,):
        raise _fail("shape", f"addresses.shape={addresses.shape} breaks 'one row address per lane (32)'")
    if regs is not None and np.asarray(regs).shape != (32, 4):
        raise _fail("shape", f"regs.shape={np.asarray(regs).shape} breaks '32 lanes x 4 registers'")
    return addresses


def stmatrix_x4(smem, addresses, regs, smem_base: int = 0) -> np.ndarray:
    """stmatrix.sync.aligned.m8n8.x4.b16 for one warp, in place on the uint8 image: lane 8q + i gives the address
    of row i of matrix q; lane l's register q (a uint32 word) holds that matrix's row l // 4, columns 2(l % 4)
    (low half) and 2(l % 4) + 1 (high half)."""
    smem, addresses = _image(smem), _check_warp(addresses, regs)
    regs = np.asarray(regs, dtype=np.uint32)
    for q in range(4):
        for i in range(8):
            at = int(addresses[8 * q + i]) - smem_base
            if at < 0 or at + 16 > smem.size or at % 16:
                raise _fail("bounds", f"lane {8 * q + i}'s row address {at + smem_base:#x} is outside the image or "
                                      f"not 16-byte aligned")
            words = regs[4 * i:4 * i + 4, q]
            smem[at:at + 16] = np.ascontiguousarray(words.astype("<u4")).view(np.uint8)
    return smem


def ldmatrix_x4(smem, addresses, smem_base: int = 0) -> np.ndarray:
    """ldmatrix.sync.aligned.m8n8.x4.b16 for one warp: the 32 x 4 uint32 words it loads (the inverse of
    stmatrix_x4)."""
    smem, addresses = _image(smem), _check_warp(addresses)
    out = np.zeros((32, 4), np.uint32)
    for q in range(4):
        for i in range(8):
            at = int(addresses[8 * q + i]) - smem_base
            if at < 0 or at + 16 > smem.size or at % 16:
                raise _fail("bounds", f"lane {8 * q + i}'s row address {at + smem_base:#x} is outside the image or "
                                      f"not 16-byte aligned")
            out[4 * i:4 * i + 4, q] = smem[at:at + 16].view("<u4")
    return out


def pack_pairs(regs, dtype: str = "bf16") -> np.ndarray:
    """What Accumulator.pack computes from f32 accumulator registers (128 x N/2): word j = element 2j + 1 in the
    high half, element 2j in the low half, rounded to nearest even (128 x N/4 uint32)."""
    vals = np.asarray(regs, dtype=np.float32)
    half = np.ascontiguousarray(vals.astype({"bf16": ml_dtypes.bfloat16, "f16": np.float16}[dtype]))
    bits = half.view(np.uint16).astype(np.uint32)
    return bits[:, 0::2] | bits[:, 1::2] << 16


# -------------------------------------------------------------------------------------------- arithmetic

def _as_float64(x, dtype: str) -> np.ndarray:
    x = np.asarray(x)
    if dtype == "tf32":
        bits = np.ascontiguousarray(x.astype(np.float32)).view(np.uint32) & np.uint32(TF32_MASK)
        return bits.view(np.float32).astype(np.float64)
    return x.astype(ELEMENT_DTYPES[dtype]).astype(np.float64)


def mma_async(d, a, b, *, dtype: str = "f32", atype: str = "bf16", btype: str | None = None, scale_d=1,
              scale_a: int = 1, scale_b: int = 1, satfinite: bool = False) -> np.ndarray:
    """D' = scale_a*A x (scale_b*B)^T + (scale_d ? D : 0) as numpy, matrices in and out: A is 64 x K, B is N x K
    (K-major as the instruction reads them; any whole number of K steps), D is 64 x N of the accumulator type
    (None counts as zeros). Floats round once (see the module's error bound); integers wrap, or saturate with
    satfinite; b1 is popc(A AND B)."""
    btype = btype or atype
    if dtype not in ACC_DTYPES or atype not in ELEMENT_BITS or btype not in ELEMENT_BITS:
        raise _fail("dtype", f"dtype={dtype!r}, atype={atype!r}, btype={btype!r} breaks 'wgmma types'")
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[0] != 64 or a.shape[1] != b.shape[1]:
        raise _fail("shape", f"a.shape={a.shape}, b.shape={b.shape} breaks 'A is 64 x K and B is N x K'")
    n = b.shape[0]
    if d is None:
        d = np.zeros((64, n), ACC_DTYPES[dtype])
    d = np.asarray(d)
    if d.shape != (64, n):
        raise _fail("shape", f"d.shape={d.shape} breaks 'D is 64 x N = 64 x {n}'")
    keep = bool(scale_d)
    integer = dtype == "s32"
    if integer != (atype in INT_INPUTS | {"b1"}) or integer != (btype in INT_INPUTS | {"b1"}):
        raise _fail("dtype", f"dtype={dtype!r} with atype={atype!r}, btype={btype!r} breaks 'an s32 accumulator takes "
                             f"s8/u8/b1 operands and a float one float operands'")
    if integer:
        if scale_a != 1 or scale_b != 1:
            raise _fail("scale", "imm-scale-a/b apply to float types only")
        if atype == "b1" or btype == "b1":
            acc = (a.astype(np.int64) & 1) @ (b.astype(np.int64) & 1).T       # popc(A AND B)
        else:
            acc = a.astype(np.int64) @ b.astype(np.int64).T
        total = acc + (d.astype(np.int64) if keep else 0)
        if satfinite:
            return np.clip(total, -2**31, 2**31 - 1).astype(np.int32)
        return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
    if satfinite:
        raise _fail("satfinite", "satfinite applies to integer types only")
    if scale_a not in (1, -1) or scale_b not in (1, -1):
        raise _fail("scale", f"scale_a={scale_a!r}, scale_b={scale_b!r} breaks 'imm-scale is 1 or -1'")
    fa, fb = scale_a * _as_float64(a, atype), scale_b * _as_float64(b, btype)
    total = fa @ fb.T + (d.astype(np.float64) if keep else 0.0)
    with np.errstate(over="ignore"):
        return total.astype(ACC_DTYPES[dtype])


def error_bound(a, b, d=None, *, dtype: str = "f32", atype: str = "bf16", btype: str | None = None,
                scale_d=1) -> np.ndarray:
    """The per-element bound (64 x N) on |hardware - mma_async(...)| stated in the module docstring."""
    btype = btype or atype
    k = np.asarray(a).shape[1]
    mag = np.abs(_as_float64(a, atype)) @ np.abs(_as_float64(b, btype)).T
    if d is not None and scale_d:
        mag = mag + np.abs(np.asarray(d, dtype=np.float64))
    return 2 * (k + 1) * UNIT_ROUNDOFF[dtype] * mag


def wgmma(smem, d_regs, a, b_desc: int, *, n: int, dtype: str = "f32", atype: str = "bf16",
          btype: str | None = None, trans_a: bool = False, trans_b: bool = False, scale_d=1, scale_a: int = 1,
          scale_b: int = 1, satfinite: bool = False, smem_base: int = 0) -> np.ndarray:
    """One wgmma.mma_async.m64nNk*: registers and descriptors in, registers out. `a` is a descriptor (an int: the
    SS form) or 128 x 4 A register words (RS); `d_regs` is 128 x N/2 (N/4 for f16) accumulator registers, or
    None with scale_d=0. Returns the new accumulator registers."""
    btype = btype or atype
    if isinstance(a, (int, np.integer)):
        am = read_operand(smem, int(a), "A", dtype=atype, trans=trans_a, smem_base=smem_base)
    else:
        am = a_regs_to_matrix(a, atype)
    bm = read_operand(smem, b_desc, "B", dtype=btype, rows=n, trans=trans_b, smem_base=smem_base)
    d = acc_to_matrix(d_regs, n, dtype) if d_regs is not None else None
    out = mma_async(d, am, bm, dtype=dtype, atype=atype, btype=btype, scale_d=scale_d, scale_a=scale_a,
                    scale_b=scale_b, satfinite=satfinite)
    return matrix_to_acc(out, dtype)
