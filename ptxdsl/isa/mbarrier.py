"""mbarrier.*: init, inval, arrive / arrive_drop (+expect_tx, noComplete), expect_tx, complete_tx,
test_wait / try_wait (+parity), pending_count, and fence.mbarrier_init."""
from __future__ import annotations

from ..errors import DSLError
from ..ir import Imm, Reg
from ..target import Req
from ..types import b64, pred, u32, u64
from . import effects as fx
from .decl import Op, Qual
from .operands import Address, Dst, Slot, Value

MAX_COUNT = (1 << 20) - 1
GENERIC = {"": None}

# Where the barrier is: its own CTA's shared memory (shared::cta, shared), a generic address (None), and
# for arrivals and tx counts also another CTA of the cluster (shared::cluster).
LOCAL_SPACE = Qual("shared::cta", "shared", None, default="shared::cta", aliases=GENERIC, none_token="generic",
                   doc="the barrier's state space (None: a generic address)")
ANY_SPACE = Qual("shared::cta", "shared", None, "shared::cluster", default="shared::cta", aliases=GENERIC,
                 none_token="generic", doc="the barrier's state space (shared::cluster: a peer CTA's barrier)")
SCOPE = Qual(None, "cta", "cluster", doc="the scope of .sem")
# PTX writes .sem and .scope together: one without the other would be dropped from the instruction, so ptxdsl
# refuses it (ptxas accepts the instruction without both).
APART = (({"sem": None, "scope": ("cta", "cluster")}, "PTX takes .sem and .scope together; give both or neither"),
         ({"sem": ("release", "relaxed", "acquire"), "scope": None},
          "PTX takes .sem and .scope together; give both or neither"))
RELAXED = (({"sem": "relaxed"}, Req((8, 6))),)

COUNT = Value(u32, lo=1, hi=MAX_COUNT)
TX = Value(u32, lo=-MAX_COUNT, hi=MAX_COUNT)


def _remote(op) -> bool:
    return op.space == "shared::cluster"


class MbarrierInit(Op):
    """mbarrier.init: the barrier expects `count` arrivals per phase; its current phase is 0."""

    ptx = "mbarrier.init{.<space>}.b64"
    quals = {"space": LOCAL_SPACE}
    operands = (Slot("bar", Address("space")), Slot("count", COUNT, default=1))
    floor = Req((7, 8))
    family, level = "mbarrier", "gpu"

    def effects(self):
        return (fx.Init(self.bar, self.count),)


class MbarrierInval(Op):
    """mbarrier.inval: the barrier's memory is no longer an mbarrier."""

    ptx = "mbarrier.inval{.<space>}.b64"
    quals = {"space": LOCAL_SPACE}
    operands = (Slot("bar", Address("space")),)
    floor = Req((7, 8))
    family = "mbarrier"

    def effects(self):
        return (fx.Inval(self.bar),)


class _Arrive(Op):
    """What the six arrive forms share: .sem.scope, the space, the `state` destination (the sink `_` unless
    state=True or a register is given), and a remote (shared::cluster) barrier taking the sink and
    cluster scope."""

    abstract = True
    quals = {"sem": Qual(None, "release", "relaxed"), "scope": SCOPE, "space": ANY_SPACE}
    refuses = APART
    excludes = (({"space": "shared::cluster", "state": "reg"}, "a remote (shared::cluster) arrive's destination is "
                                                               "the sink '_'; pass no state"),)
    raises = (({"space": "shared::cluster"}, Req((8, 0))), ({"sem": "release"}, Req((8, 0)))) + RELAXED
    floor = Req((7, 8))
    family = "mbarrier"
    drop = False

    def effects(self):
        count = getattr(self, "count", None)
        tx = getattr(self, "tx", None)
        out = [fx.Arrive(self.bar, count, _remote(self), self.drop, "noComplete" in self.ptx)]
        if tx is not None:
            out.append(fx.ExpectTx(self.bar, tx, _remote(self)))
        if isinstance(self.state, Reg):
            out.append(fx.Opaque(self.state))
        return tuple(out)


STATE = Slot("state", Dst(b64, sink=True))


class MbarrierArrive(_Arrive):
    """mbarrier.arrive: one arrival (or `count`) on the barrier's current phase."""

    ptx = "mbarrier.arrive{.<sem>.<scope>}{.<space>}.b64"
    operands = (STATE, Slot("bar", Address("space")), Slot("count", COUNT, optional=True))


class MbarrierArriveExpectTx(_Arrive):
    """mbarrier.arrive.expect_tx: expect `tx` more transaction bytes in the current phase, then arrive."""

    ptx = "mbarrier.arrive.expect_tx{.<sem>.<scope>}{.<space>}.b64"
    operands = (STATE, Slot("bar", Address("space")), Slot("tx", TX))
    floor = Req((8, 0))
    raises = RELAXED + (({"sem": "release"}, Req((8, 0))),)
    level = "gpu"


class MbarrierArriveNoComplete(_Arrive):
    """mbarrier.arrive.noComplete: `count` arrivals that must not complete the phase."""

    ptx = "mbarrier.arrive.noComplete{.<sem>.<scope>}{.<space>}.b64"
    quals = {"sem": Qual(None, "release"), "scope": Qual(None, "cta"), "space": LOCAL_SPACE}
    operands = (Slot("state", Dst(b64)), Slot("bar", Address("space")), Slot("count", COUNT))
    refuses = APART
    excludes = ()
    raises = (({"sem": "release"}, Req((8, 0))),)
    method = "mbarrier_arrive_no_complete"


class MbarrierArriveDrop(MbarrierArrive):
    """mbarrier.arrive_drop: arrive, and expect one (or `count`) fewer arrivals in later phases."""

    ptx = "mbarrier.arrive_drop{.<sem>.<scope>}{.<space>}.b64"
    drop = True
    level = "assembled"


class MbarrierArriveDropExpectTx(MbarrierArriveExpectTx):
    """mbarrier.arrive_drop.expect_tx: expect `tx` more bytes, arrive, and drop out of later phases."""

    ptx = "mbarrier.arrive_drop.expect_tx{.<sem>.<scope>}{.<space>}.b64"
    drop = True
    level = "assembled"


class MbarrierArriveDropNoComplete(MbarrierArriveNoComplete):
    """mbarrier.arrive_drop.noComplete: drop out with `count` arrivals that must not complete the phase."""

    ptx = "mbarrier.arrive_drop.noComplete{.<sem>.<scope>}{.<space>}.b64"
    method = "mbarrier_arrive_drop_no_complete"
    drop = True


class MbarrierExpectTx(Op):
    """mbarrier.expect_tx: the current phase expects `tx` more transaction bytes (no arrival)."""

    ptx = "mbarrier.expect_tx{.<sem>.<scope>}{.<space>}.b64"
    quals = {"sem": Qual(None, "relaxed"), "scope": SCOPE, "space": ANY_SPACE}
    operands = (Slot("bar", Address("space")), Slot("tx", TX))
    refuses = APART
    floor = Req((8, 0))
    family = "mbarrier"

    def effects(self):
        return (fx.ExpectTx(self.bar, self.tx, _remote(self)),)


class MbarrierCompleteTx(MbarrierExpectTx):
    """mbarrier.complete_tx: `tx` transaction bytes of the current phase arrive (no copy, no arrival)."""

    ptx = "mbarrier.complete_tx{.<sem>.<scope>}{.<space>}.b64"

    def effects(self):
        return (fx.CompleteTx(self.bar, self.tx, _remote(self)),)


class _Wait(Op):
    """What the four waits share: the local barrier, .sem.scope, the .pred result."""

    abstract = True
    quals = {"sem": Qual(None, "acquire", "relaxed"), "scope": SCOPE, "space": LOCAL_SPACE}
    refuses = APART
    floor = Req((7, 8))
    raises = (({"sem": "acquire"}, Req((8, 0))),) + RELAXED
    family = "mbarrier"

    def effects(self):
        return (fx.Wait(self.bar, self.done, getattr(self, "parity", None), getattr(self, "state", None)),
                fx.Opaque(self.done))


DONE = Slot("done", Dst(pred))
PARITY = Slot("parity", Value(u32, lo=0, hi=1))
TOKEN = Slot("state", Value(u64, imm=False))
HINT = Slot("hint", Value(u32), optional=True)


class MbarrierTestWait(_Wait):
    """mbarrier.test_wait: p = whether the phase of the `state` token (from an arrive) has completed."""

    ptx = "mbarrier.test_wait{.<sem>.<scope>}{.<space>}.b64"
    operands = (DONE, Slot("bar", Address("space")), TOKEN)


class MbarrierTestWaitParity(_Wait):
    """mbarrier.test_wait.parity: p = whether the phase of parity `parity` (0/1) has completed."""

    ptx = "mbarrier.test_wait.parity{.<sem>.<scope>}{.<space>}.b64"
    operands = (DONE, Slot("bar", Address("space")), PARITY)
    method = "mbarrier_test_wait"


class MbarrierTryWait(_Wait):
    """mbarrier.try_wait: like test_wait, but the thread may sleep up to a system (or `hint` ns) limit."""

    ptx = "mbarrier.try_wait{.<sem>.<scope>}{.<space>}.b64"
    operands = (DONE, Slot("bar", Address("space")), TOKEN, HINT)


class MbarrierTryWaitParity(_Wait):
    """mbarrier.try_wait.parity: like test_wait.parity, but the thread may sleep; `k.mbarrier_wait` loops on it."""

    ptx = "mbarrier.try_wait.parity{.<sem>.<scope>}{.<space>}.b64"
    operands = (DONE, Slot("bar", Address("space")), PARITY, HINT)
    method = "mbarrier_try_wait"
    level = "gpu"


WAITS = {("try_wait", False): MbarrierTryWait, ("try_wait", True): MbarrierTryWaitParity,
         ("test_wait", False): MbarrierTestWait, ("test_wait", True): MbarrierTestWaitParity}


def wait_class(kind: str, parity, state):
    """The wait op for kind 'try_wait'/'test_wait' polling a parity or a state token."""
    if kind not in ("try_wait", "test_wait"):
        raise DSLError(f"mbarrier wait kind={kind!r} is not allowed; expected 'try_wait' or 'test_wait'")
    if (parity is None) == (state is None):
        raise DSLError(f"mbarrier.{kind}: give exactly one of parity= or state=")
    return WAITS[(kind, parity is not None)]


class MbarrierPendingCount(Op):
    """mbarrier.pending_count: the arrivals still pending in the phase of a `state` token."""

    ptx = "mbarrier.pending_count.b64"
    mnemonic = "mbarrier.pending_count"
    operands = (Slot("count", Dst(u32)), Slot("state", Value(u64, imm=False)))
    floor = Req((7, 8))
    family = "mbarrier"

    def effects(self):
        return (fx.Opaque(self.count),)


class FenceMbarrierInit(Op):
    """fence.mbarrier_init.release.cluster: publish earlier mbarrier.init to the cluster and the async proxy."""

    ptx = "fence.mbarrier_init.release.cluster"
    mnemonic = "fence.mbarrier_init"
    floor = Req((8, 0))
    family, level = "mbarrier", "gpu"

    def effects(self):
        return (fx.ProxyFence("mbarrier_init"),)


def count_value(v):
    """An arrival count or tx operand as an int, when it is a constant."""
    return int(v.value) if isinstance(v, Imm) else None
