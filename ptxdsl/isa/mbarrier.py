"""mbarrier.*: init, inval, arrive / arrive_drop (+expect_tx, noComplete), expect_tx, complete_tx,
test_wait / try_wait (+parity), pending_count. Floors from shared/reference/ptx-tma-isa.md section 2."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import DSLError
from ..ir import Imm, Reg
from ..target import Req
from ..types import b32, b64, pred
from .base import Op, choice, dest, join, memory, ops, value

ARRIVE_SEM = frozenset({None, "release", "relaxed"})
WAIT_SEM = frozenset({None, "acquire", "relaxed"})
SCOPE = frozenset({None, "cta", "cluster"})
LOCAL_SPACES = frozenset({"shared::cta", "shared", ""})           # "" = generic address
ANY_SPACE = LOCAL_SPACES | {"shared::cluster"}
MAX_COUNT = (1 << 20) - 1


def _count(what, v):
    v = value(what, v, b32)
    if isinstance(v, Imm) and not 1 <= v.value <= MAX_COUNT:
        raise DSLError(f"{what}={v.value} is out of range; an mbarrier count is 1..{MAX_COUNT}")
    return v


def _tx(what, v):
    v = value(what, v, b32)
    if isinstance(v, Imm) and not -MAX_COUNT <= v.value <= MAX_COUNT:
        raise DSLError(f"{what}={v.value} is out of range; a transaction count is -{MAX_COUNT}..{MAX_COUNT}")
    return v


def _sem_req(sem, base=(7, 8)) -> Req:
    if sem == "relaxed":
        return Req((8, 6))
    if sem is not None:
        return Req(max(base, (8, 0)))
    return Req(base)


def _sem_scope(what, sem, scope, sems) -> None:
    """.sem and .scope come together (ptxas: '.release requires scope', '.cta requires order')."""
    choice(f"{what} sem", sem, sems)
    choice(f"{what} scope", scope, SCOPE)
    if (sem is None) != (scope is None):
        raise DSLError(f"{what}: sem={sem!r}, scope={scope!r}: PTX takes .sem and .scope together; "
                       f"give both or neither")


@dataclass(eq=False)
class MbarrierInit(Op):
    """mbarrier.init.shared::cta.b64 [addr], count."""

    mnemonic: ClassVar[str] = "mbarrier.init"
    addr: object
    count: object = 1
    space: str = "shared::cta"

    def __post_init__(self):
        choice("mbarrier.init space", self.space, LOCAL_SPACES)
        self.addr = memory("mbarrier.init address", self.addr, self.space)
        self.count = _count("mbarrier.init count", self.count)

    def emit(self) -> str:
        return f"{join(self.mnemonic, self.space, 'b64')} {ops(self.addr, self.count)}"


@dataclass(eq=False)
class MbarrierInval(Op):
    """mbarrier.inval.shared::cta.b64 [addr]."""

    mnemonic: ClassVar[str] = "mbarrier.inval"
    addr: object
    space: str = "shared::cta"

    def __post_init__(self):
        choice("mbarrier.inval space", self.space, LOCAL_SPACES)
        self.addr = memory("mbarrier.inval address", self.addr, self.space)

    def emit(self) -> str:
        return f"{join(self.mnemonic, self.space, 'b64')} {self.addr}"


@dataclass(eq=False)
class MbarrierArrive(Op):
    """mbarrier.arrive / arrive_drop {.expect_tx | .noComplete}{.sem.scope}{.space}.b64 state, [addr]{, count | txCount}.

    `tx` set makes it the .expect_tx form (txCount replaces count). A shared::cluster (remote) barrier
    takes the sink `_` as destination and cluster scope.
    """

    addr: object
    dst: object = None              # .b64 state register, or None for the sink `_`
    count: object = None
    tx: object = None
    sem: str | None = None
    scope: str | None = None
    space: str = "shared::cta"
    drop: bool = False
    no_complete: bool = False

    def __post_init__(self):
        _sem_scope(self.base, self.sem, self.scope, ARRIVE_SEM)
        choice(f"{self.base} space", self.space, ANY_SPACE)
        if self.tx is not None and self.count is not None:
            raise DSLError(f"{self.base}.expect_tx takes a transaction count, not an arrival count")
        if self.no_complete:
            if self.tx is not None or self.count is None:
                raise DSLError(f"{self.base}.noComplete needs count= and no tx=")
            choice(f"{self.base}.noComplete sem", self.sem, {None, "release"})
            choice(f"{self.base}.noComplete scope", self.scope, {None, "cta"})
            choice(f"{self.base}.noComplete space", self.space, LOCAL_SPACES)
        if self.space == "shared::cluster":
            if isinstance(self.dst, Reg):
                raise DSLError(f"{self.base}.shared::cluster: the destination must be the sink '_', "
                               f"got {self.dst.name}")
            if self.scope != "cluster":
                raise DSLError(f"{self.base}.shared::cluster: a remote arrive needs scope='cluster' (and sem=), "
                               f"got scope={self.scope!r}")
        self.addr = memory(f"{self.base} address", self.addr, self.space)
        self.dst = dest(f"{self.base} state", self.dst, b64, sink=True)
        if self.count is not None:
            self.count = _count(f"{self.base} count", self.count)
        if self.tx is not None:
            self.tx = _tx(f"{self.base} tx", self.tx)

    @property
    def base(self) -> str:
        return "mbarrier.arrive_drop" if self.drop else "mbarrier.arrive"

    @property
    def mnemonic(self) -> str:  # type: ignore[override]
        return join(self.base, "expect_tx" if self.tx is not None else "", "noComplete" if self.no_complete else "")

    def emit(self) -> str:
        tail = [self.count] if self.count is not None else []
        tail += [self.tx] if self.tx is not None else []
        return f"{join(self.mnemonic, self.sem, self.scope, self.space, 'b64')} " \
               f"{ops(self.dst, self.addr, *tail)}"

    def requires(self) -> Req:
        base = (8, 0) if (self.tx is not None or self.space == "shared::cluster") else (7, 8)
        return _sem_req(self.sem, base)


@dataclass(eq=False)
class MbarrierExpectTx(Op):
    """mbarrier.expect_tx / complete_tx{.relaxed.scope}{.space}.b64 [addr], txCount (no arrival; space '' = generic)."""

    addr: object
    tx: object
    sem: str | None = None
    scope: str | None = None
    space: str = "shared::cta"
    complete: bool = False

    def __post_init__(self):
        _sem_scope(self.mnemonic, self.sem, self.scope, {None, "relaxed"})
        choice(f"{self.mnemonic} space", self.space, ANY_SPACE)
        self.addr = memory(f"{self.mnemonic} address", self.addr, self.space)
        self.tx = _tx(f"{self.mnemonic} tx", self.tx)

    @property
    def mnemonic(self) -> str:  # type: ignore[override]
        return "mbarrier.complete_tx" if self.complete else "mbarrier.expect_tx"

    def emit(self) -> str:
        return f"{join(self.mnemonic, self.sem, self.scope, self.space, 'b64')} {ops(self.addr, self.tx)}"

    def requires(self) -> Req:
        return Req((8, 0))


@dataclass(eq=False)
class MbarrierWait(Op):
    """mbarrier.test_wait / try_wait{.parity}{.sem.scope}{.space}.b64 p, [addr], state|parity{, hint}.

    With `parity` set the operand is the phase parity (0/1 or a .b32 register); otherwise `state`,
    the .b64 token an arrive returned.
    """

    addr: object
    dst: Reg
    parity: object = None
    state: object = None
    hint: object = None
    sem: str | None = None
    scope: str | None = None
    space: str = "shared::cta"
    kind: str = "try_wait"

    def __post_init__(self):
        choice("mbarrier wait kind", self.kind, {"try_wait", "test_wait"})
        _sem_scope(self.mnemonic, self.sem, self.scope, WAIT_SEM)
        if self.space == "shared::cluster":
            raise DSLError(f"{self.mnemonic}: waits take only a local barrier; space='shared::cluster' is not allowed")
        choice(f"{self.mnemonic} space", self.space, LOCAL_SPACES)
        self.addr = memory(f"{self.mnemonic} address", self.addr, self.space)
        self.dst = dest(f"{self.mnemonic} p", self.dst, pred)
        if (self.parity is None) == (self.state is None):
            raise DSLError(f"{self.mnemonic}: give exactly one of parity= or state=")
        if self.parity is not None:
            self.parity = value(f"{self.mnemonic} parity", self.parity, b32)
            if isinstance(self.parity, Imm) and self.parity.value not in (0, 1):
                raise DSLError(f"{self.mnemonic} parity={self.parity.value}: expected 0 or 1")
        else:
            self.state = value(f"{self.mnemonic} state", self.state, b64, imm=False)
        if self.hint is not None:
            if self.kind != "try_wait":
                raise DSLError("mbarrier.test_wait takes no suspend-time hint")
            self.hint = value(f"{self.mnemonic} hint", self.hint, b32)

    @property
    def mnemonic(self) -> str:  # type: ignore[override]
        return join("mbarrier", self.kind, "parity" if self.parity is not None else "")

    def emit(self) -> str:
        tail = [self.parity if self.parity is not None else self.state]
        tail += [self.hint] if self.hint is not None else []
        return f"{join(self.mnemonic, self.sem, self.scope, self.space, 'b64')} {ops(self.dst, self.addr, *tail)}"

    def requires(self) -> Req:
        return _sem_req(self.sem)


@dataclass(eq=False)
class MbarrierPendingCount(Op):
    """mbarrier.pending_count.b64 count, state."""

    mnemonic: ClassVar[str] = "mbarrier.pending_count"
    dst: Reg
    state: Reg

    def __post_init__(self):
        self.dst = dest("mbarrier.pending_count count", self.dst, b32)
        self.state = value("mbarrier.pending_count state", self.state, b64, imm=False)

    def emit(self) -> str:
        return f"mbarrier.pending_count.b64 {ops(self.dst, self.state)}"

