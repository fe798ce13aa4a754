"""The GEMM's configuration: a small frozen dataclass the kernel generator reads, its rules, and the choice of one
by shape.

A CTA computes block_m x block_n tiles of C, block_k of K per ring stage. `consumers` warpgroups split the tile's
rows (each owns block_m / consumers rows: one or more m64 accumulators of N = block_n); one more warpgroup
produces (one elected thread issues the TMA loads). With two consumers the producer gives registers back
(setmaxnreg.dec) and the consumers take them (setmaxnreg.inc): `registers` = (producer, consumer).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from ..errors import DSLError, SourceLoc

WARPGROUP = 128
SHARED_LIMIT = 227 * 1024              # the opt-in dynamic shared memory of a CTA on sm_90
REGISTER_FILE = 65536


@dataclass(frozen=True)
class GemmConfig:
    """block_m x block_n x block_k tiles; `stages` ring stages; `consumers` MMA warpgroups; `group_m` rows of
    tiles walked together (the grouped raster); `registers` (producer, consumer) per-thread counts, None for no
    reallocation; `b_major`: 'K' (B stored N x K: C = A @ B.T) or 'MN' (B stored K x N: C = A @ B)."""

    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    stages: int = 3
    consumers: int = 2
    group_m: int = 8
    registers: tuple | None = (40, 232)
    b_major: str = "K"
    epilogue_n: int = 0                 # columns of C staged in shared memory at a time (0: block_n)
    mma_depth: int = 0                  # K blocks of MMAs left in flight when a stage is released (0 or 1)

    def __post_init__(self):
        if self.epilogue_n == 0:
            object.__setattr__(self, "epilogue_n", self.block_n)
        self.validate(SourceLoc.caller(skip=2))          # past the dataclass's generated __init__

    @property
    def threads(self) -> int:
        return WARPGROUP * (1 + self.consumers)

    @property
    def rows_per_consumer(self) -> int:
        return self.block_m // self.consumers

    @property
    def m_blocks(self) -> int:
        """m64 accumulators each consumer holds."""
        return self.rows_per_consumer // 64

    @property
    def a_bytes(self) -> int:
        return self.block_m * self.block_k * 2

    @property
    def b_bytes(self) -> int:
        return self.block_n * self.block_k * 2

    @property
    def c_bytes(self) -> int:
        """The shared C staging: epilogue_n columns of the tile's rows."""
        return self.block_m * self.epilogue_n * 2

    @property
    def shared_bytes(self) -> int:
        """The dynamic shared memory: the ring's stages and the C tile of the epilogue."""
        return self.stages * (self.a_bytes + self.b_bytes) + self.c_bytes

    @property
    def name(self) -> str:
        regs = "" if self.registers is None else f"_r{self.registers[0]}_{self.registers[1]}"
        epi = ("" if self.epilogue_n == self.block_n else f"_e{self.epilogue_n}") + \
            ("" if not self.mma_depth else f"_d{self.mma_depth}")
        return (f"gemm_bf16_{self.block_m}x{self.block_n}x{self.block_k}_s{self.stages}_c{self.consumers}"
                f"_g{self.group_m}{regs}_b{self.b_major.lower()}{epi}")

    def validate(self, loc: SourceLoc | None = None) -> "GemmConfig":
        """Check the rules in a fixed order; the first broken one raises DSLError (rule gemm.*) at `loc`."""
        try:
            for check in _CHECKS:
                check(self)
        except DSLError as e:
            raise e.at(loc or SourceLoc.caller()) from None
        return self


def _broken(cfg, field: str, text: str, rule: str):
    raise DSLError(f"GemmConfig {field}={getattr(cfg, field)!r} breaks '{text}'", rule=f"gemm.{rule}")


def _check_ints(cfg):
    for f in fields(cfg):
        v = getattr(cfg, f.name)
        if f.name in ("registers", "b_major", "epilogue_n", "mma_depth"):
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            _broken(cfg, f.name, "a positive integer", "config")


def _check_consumers(cfg):
    if cfg.consumers not in (1, 2, 3):
        _broken(cfg, "consumers", "1, 2 or 3 MMA warpgroups", "config")
    if cfg.block_m % (64 * cfg.consumers):
        _broken(cfg, "block_m", f"each of the {cfg.consumers} consumer(s) owns a whole number of 64-row wgmma tiles "
                f"(block_m a multiple of {64 * cfg.consumers})", "tile")


def _check_tile(cfg):
    if not 16 <= cfg.block_n <= 256 or cfg.block_n % 64:
        _broken(cfg, "block_n", "64, 128, 192 or 256 (wgmma's N up to 256; the epilogue stores 64-column boxes)",
                "tile")
    if cfg.block_k != 64:
        _broken(cfg, "block_k", "64 (one 128-byte swizzle row of bf16 per stage)", "tile")
    if cfg.epilogue_n % 64 or cfg.block_n % cfg.epilogue_n:
        _broken(cfg, "epilogue_n", f"a multiple of 64 that divides block_n={cfg.block_n}", "tile")
    if cfg.mma_depth not in (0, 1):
        _broken(cfg, "mma_depth", "0 (wait for a stage's MMAs before releasing it) or 1 (release it once the next "
                "stage's are issued)", "config")
    if cfg.b_major not in ("K", "MN"):
        _broken(cfg, "b_major", "'K' (B is N x K) or 'MN' (B is K x N)", "config")
    if cfg.m_blocks * cfg.block_n // 2 > 128:
        _broken(cfg, "block_m", f"a consumer holds at most 128 f32 accumulator registers a thread (here "
                f"{cfg.m_blocks} x {cfg.block_n // 2})", "registers")


def _check_shared(cfg):
    if cfg.shared_bytes > SHARED_LIMIT:
        _broken(cfg, "stages", f"the ring and the C tile fit the {SHARED_LIMIT} bytes of shared memory a CTA may "
                f"have (here {cfg.shared_bytes})", "shared")


def _check_registers(cfg):
    r = cfg.registers
    if r is None:
        return
    if not (isinstance(r, tuple) and len(r) == 2 and all(isinstance(x, int) and 24 <= x <= 256 and x % 8 == 0
                                                         for x in r)):
        _broken(cfg, "registers", "(producer, consumer): setmaxnreg counts, 24 to 256, multiples of 8", "registers")
    entry = min(255, REGISTER_FILE // cfg.threads // 8 * 8)
    if WARPGROUP * (r[0] + cfg.consumers * r[1]) > entry * cfg.threads:
        _broken(cfg, "registers", f"{r[0]} + {cfg.consumers} x {r[1]} registers (x 128 threads) fit the CTA's pool "
                f"of {entry * cfg.threads}", "registers")


_CHECKS = (_check_ints, _check_consumers, _check_tile, _check_shared, _check_registers)

# Configurations by shape: (name, config). `choose` picks by the number of output tiles against the SMs.
FAST = GemmConfig(stages=4, epilogue_n=128)                            # 128x256, two consumers, 4 stages
SMALL = GemmConfig(block_m=128, block_n=128, stages=4, consumers=2, registers=(40, 232))
SIMPLE = GemmConfig(block_m=128, block_n=128, stages=4, consumers=1, registers=None)
TABLE = (("128x256", FAST), ("128x128", SMALL))


def tiles(m: int, n: int, cfg: GemmConfig) -> int:
    return -(-m // cfg.block_m) * -(-n // cfg.block_n)


def choose(m: int, n: int, k: int, sms: int = 132, b_major: str = "K") -> GemmConfig:
    """The configuration for an m x n x k problem: 128x256 tiles when they give every SM at least one tile, else
    128x128 (more, smaller tiles for a skinny problem)."""
    from dataclasses import replace

    cfg = FAST if tiles(m, n, FAST) >= sms else SMALL
    return cfg if cfg.b_major == b_major else replace(cfg, b_major=b_major)
