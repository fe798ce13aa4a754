"""An mbarrier's life: init, inval, arrivals, and who may use it.

Rules: mbarrier-uninit (used before mbarrier.init, after mbarrier.inval, or never initialised),
mbarrier-init-fence (a TMA load completes on a barrier whose init no fence.mbarrier_init /
fence.proxy.async published), mbarrier-init-sync (threads other than the initialising ones use it with no
bar.sync / cluster barrier in between, or a multicast load of other CTAs completes on it with no cluster barrier
wait after the init), mbarrier-align (not 8-byte aligned).
"""
from __future__ import annotations

from dataclasses import replace

from ..isa.effects import Arrive, Init
from .facts import ACROSS_WARPS, key_name
from .state import ZERO, InitInfo, line

MBARRIER_ALIGN = 8


def sites(cx):
    """Where the kernel initialises barriers ((buffer, offset) -> the first init), the barriers its local
    arrives name, and whether some arrive names a barrier the facts cannot place (remote or unknown)."""
    inits, arrives, remote = {}, set(), False
    for ins, effects in cx.facts.effects.items():
        for e in effects:
            if isinstance(e, Init):
                w = cx.where(e.bar)
                if w is not None:
                    inits.setdefault(w, ins)
            elif isinstance(e, Arrive):
                w = cx.where(e.bar) if not e.remote else None
                if w is None:
                    remote = True
                else:
                    arrives.add(w)
    return inits, arrives, remote


def bar_key(cx, addr, s):
    """(buffer, offset or None) of the barrier at `addr`, or None; reports a misaligned one."""
    w = cx.where(addr)
    if w is None:
        return None
    a, off = w
    k = cx.k
    if off is not None and ((a.offset + off if a.dynamic else off) % MBARRIER_ALIGN
                            or (k.dynamic_align if a.dynamic else a.align) < MBARRIER_ALIGN):
        cx.report("mbarrier-align", f"mbarrier {key_name(w)} is not {MBARRIER_ALIGN}-byte aligned "
                  f"(buffer align {a.align}, offset {off})", s)
    return w


def keys_of(st, key):
    """The barrier keys an access to `key` may touch (all of a buffer for an unknown offset)."""
    if key[1] is not None:
        return [key]
    return [k for k in set(st.acc) | set(st.init) | {key} if k[0] is key[0]]


def _lookup_init(st, key):
    a, off = key
    if key in st.init:
        return st.init[key]
    if (a, None) in st.init:
        return st.init[(a, None)]
    if off is None:
        return next((v for k, v in st.init.items() if k[0] is a), None)
    return None


def _warp_split(cx, region) -> bool:
    """Whether the conditions an init ran under can leave out whole warps (`tid == 0`, `warp == 0`): then other
    warps use the barrier unordered with the init (an error). Under lane conditions alone (elect_one in every
    warp) the users are lanes of the initialising warp (a warning)."""
    ntid = cx.k.directives.get("reqntid")
    if ntid is not None and ntid[0] * (ntid[1] if len(ntid) > 1 else 1) * (ntid[2] if len(ntid) > 2 else 1) <= 32:
        return False
    for reg, _ in region:
        if reg == "elect":
            continue
        if cx.facts.get(reg).tags & ACROSS_WARPS:
            return True
    return False


def use(cx, key, s, st, ctx, what):
    """Checks every use of a barrier (`what`: arrive, expect, poll, inval, wait, tma) against its init."""
    info = _lookup_init(st, key)
    name = key_name(key)
    if info is None:
        if key in st.inval:
            cx.report("mbarrier-uninit", f"mbarrier {name} is used after its mbarrier.inval at "
                      f"{line(st.inval[key])} and before a new mbarrier.init", s)
        elif key in cx.init_sites or (key[0], None) in cx.init_sites:
            site = cx.init_sites.get(key) or cx.init_sites[(key[0], None)]
            cx.report("mbarrier-uninit", f"mbarrier {name} is used before its mbarrier.init at {line(site)}", s)
        elif what in ("wait", "tma") and key[1] is not None and not any(k[0] is key[0] for k in cx.init_sites):
            cx.report("mbarrier-uninit", f"mbarrier {name} is never initialised: add mbarrier.init "
                      f"(and fence.mbarrier_init) before the first use", s)
        return
    if not info.synced and info.region != ctx.region[:len(info.region)]:
        other_warps = _warp_split(cx, info.region)
        cx.report("mbarrier-init-sync", f"mbarrier {name} was initialised at {line(info.stmt)} by other "
                  f"threads{'' if other_warps else ' of the same warp'}; put bar.sync (or a cluster barrier) "
                  f"between the init and this use: until then these threads may see the barrier's old memory (a "
                  f"wait can return at once)", s, severity=None if other_warps else "warning")
    elif what == "multicast" and not info.synced:
        cx.report("mbarrier-init-sync", f"this multicast load also completes on mbarrier {name} of the other CTAs "
                  f"of the mask, which may not have run its mbarrier.init ({line(info.stmt)}) yet: put "
                  f"barrier.cluster.arrive + barrier.cluster.wait between the init and the load", s)
    if what == "tma" and not info.fenced:
        cx.report("mbarrier-init-fence", f"a TMA load completes on mbarrier {name}, but its mbarrier.init at "
                  f"{line(info.stmt)} is not followed by fence.mbarrier_init (or fence.proxy.async), so the "
                  f"async proxy may see an uninitialised barrier", s, info.stmt)


# ----------------------------------------------------------------------------------- effects


def init(cx, s, e, st, ctx):
    key = bar_key(cx, e.bar, s)
    if key is None:
        return
    st.init[key] = InitInfo(s, False, False, ctx.region)
    st.phase[key] = 0
    st.arrived.discard(key)
    st.inval.pop(key, None)
    st.acc[key] = ZERO
    st.src[key] = ()
    st.last.pop(key, None)


def inval(cx, s, e, st, ctx):
    key = bar_key(cx, e.bar, s)
    if key is not None:
        use(cx, key, s, st, ctx, "inval")
        st.init.pop(key, None)
        st.inval[key] = s


def arrive(cx, s, e, st, ctx):
    """A local arrival (a remote one, on another CTA's barrier, is not followed)."""
    key = bar_key(cx, e.bar, s) if not e.remote else None
    if key is not None:
        use(cx, key, s, st, ctx, "arrive")
        st.arrived.update(keys_of(st, key))


def fence(cx, s, e, st, ctx):
    """fence.mbarrier_init and fence.proxy.async (not of global memory alone) publish earlier inits."""
    if e.proxy == "mbarrier_init" or (e.proxy == "async" and e.sem is None and e.space != "global"):
        st.init = {k: replace(v, fenced=True) for k, v in st.init.items()}


def sync(cx, s, e, st, ctx):
    """A CTA or cluster barrier that waits makes earlier inits visible to every thread."""
    if e.wait:
        st.init = {k: replace(v, synced=True) for k, v in st.init.items()}
