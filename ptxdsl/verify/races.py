"""The run's shared-memory races (verify/ring.py): what each class of threads reads and writes of the ring's
buffers, against the TMA loads in flight into them and the TMA stores still reading them.

A class keeps its accesses as (alloc, lo, hi, clock, stmt, write); a TMA store's read (or a bulk copy's out of
shared memory) is a list whose clock stays PENDING until a cp.async.bulk.wait_group retires its bulk group.
Another class has seen an access when its knowledge of the accessing class (vector clocks, joined at arrive ->
wait and at bar.sync) reaches the access's clock. Rules: refill-race, tma-load-race, bulk-group-pending.
"""
from __future__ import annotations

from ..ir import Addr
from ..isa.effects import MmaAsync
from .groups import READ
from .wgmma import atom_row
from .threads import PENDING, Affine, Desc, Sym, describe

SHARED = ("shared", "shared::cta", "")
WARPGROUP = 128


class Races:
    """The race handlers of _Run (verify/ring.py), which holds `classes`, `loads`, `ring`, `values` and reports
    through `_report`."""

    def span(self, th, v):
        """(buffer, lowest offset, highest offset) that the shared address `v` takes in the class's threads: one
        offset (a Sym), or one per thread (an Affine in %tid, or a tuple); None where the run cannot place it."""
        x = self.values.get(th, v.base if isinstance(v, Addr) else v)
        off = v.offset if isinstance(v, Addr) else 0
        if type(x) is Sym:
            return x.alloc, x.off + off, x.off + off
        if type(x) is Affine:
            if x.alloc is None:
                return None
            lo, hi = x.bounds(th.tids)
            return x.alloc, lo + off, hi + off
        if type(x) is tuple and x and type(x[0]) is Sym:
            alloc = x[0].alloc
            if any(type(a) is not Sym or a.alloc is not alloc for a in x):
                return None
            return alloc, min(a.off for a in x) + off, max(a.off for a in x) + off
        return None

    def access(self, th, s, e):
        if e.space not in SHARED:
            return
        where = self.span(th, e.addr)
        if where is None:
            return
        alloc, lo, hi = where
        hi += e.nbytes
        clock = th.tick()
        th.reads.append((alloc, lo, hi, clock, s, e.write))
        self._against_loads(th, s, alloc, lo, hi, e.write)
        if e.write:
            self._against_stores(th, s, alloc, lo, hi)

    def _against_loads(self, th, s, alloc, lo, hi, write):
        """A read (or write) of [lo, hi) of `alloc` while a TMA load into it may still be in flight."""
        for ld in self.loads:
            if ld.alloc is not alloc or not (ld.lo < hi and lo < ld.hi) or ld.key.alloc not in self.ring:
                continue
            seen = th.vc.get(("bar", ld.key), -1)
            if seen >= ld.phase:
                continue
            verb = "write" if write else "read"
            if seen == ld.phase - 1 and ld.phase > 0:
                # they are still on the slot's previous data, and the refill is already on its way
                self._report_refill(ld.issuer, alloc, ld.lo, ld.hi, th.tids, verb, ld.stmt, s)
            else:
                self._report("tma-load-race", f"{describe(th.tids)} {verb}(s) {alloc.name}[{lo}:{hi}] here while the "
                             f"TMA load at line {_line(ld.stmt)} into it may still be in flight: they have not "
                             f"waited for phase {ld.phase} of mbarrier {_slot(ld.key)}, which it completes on", s,
                             ld.stmt)
            break

    def _against_stores(self, th, s, alloc, lo, hi):
        """A write of [lo, hi) while a TMA store may still read it: its bulk group not yet retired by a
        wait_group.read, or retired in a thread whose progress this one has not seen (an arrive -> wait)."""
        for g in self.classes:
            if g.state == "split":
                continue
            for r in g.reads:
                if type(r) is not list or len(r) > 6 or r[0] is not alloc or not (r[1] < hi and lo < r[2]):
                    continue
                if r[3] is PENDING if g is th else th.vc.get(g.id, -1) < r[3]:
                    self._report("bulk-group-pending", f"{describe(th.tids)} write(s) {alloc.name}[{lo}:{hi}] here "
                                 f"while the TMA store at line {_line(r[4])} ({describe(g.tids)}) may still be "
                                 f"reading it: its bulk group is not retired by cp.async.bulk.wait_group.read, or "
                                 f"nothing orders that retirement before this write", s, r[4])
                    return

    def store_read(self, th, s, e):
        """A TMA store or bulk copy out of shared memory, through a bulk group: it reads its source from now until
        a cp.async.bulk.wait_group{.read} retires the group, so a refill of that buffer before then (ordered
        after an arrive that came too early) races it. A source the run cannot place is not followed."""
        if e.bar is not None or th.n != 1:
            return
        x = self.values.get(th, e.src.base if isinstance(e.src, Addr) else e.src)
        if type(x) is not Sym:
            return
        _, room = self._sizes(th, e)
        if room is None:
            return
        lo = x.off + (e.src.offset if isinstance(e.src, Addr) else 0)
        read = [x.alloc, lo, lo + room, PENDING, s, False]
        self._against_writes(th, s, x.alloc, lo, lo + room)
        th.reads.append(read)
        th.asyncg = th.asyncg.add("bulk", READ, read)
        self._against_loads(th, s, x.alloc, lo, lo + room, False)

    def _against_writes(self, th, s, alloc, lo, hi):
        """A TMA store or bulk copy reading [lo, hi) that other threads wrote with stores this thread has not seen
        (no bar.sync, or arrive -> wait, after them): it may read the bytes before they are written."""
        for g in self.classes:
            if g is th or g.state == "split":
                continue
            for r in g.reads:
                if type(r) is tuple and r[5] and r[0] is alloc and r[1] < hi and lo < r[2] \
                        and th.vc.get(g.id, -1) < r[3]:
                    self._report("bulk-group-pending", f"this TMA store reads {alloc.name}[{lo}:{hi}], which "
                                 f"{describe(g.tids)} write at line {_line(r[4])} with nothing ordering those writes "
                                 f"before it: it may read the bytes before they land; put bar.sync (after the "
                                 f"writers' fence.proxy.async) between the writes and the store", s, r[4])
                    return

    def mma_read(self, th, s, e):
        """wgmma.mma_async reads its operand tiles through its descriptors until a wgmma.wait_group retires its
        group: a refill of a tile before then (its stage released by an arrive that came too early) races it. A
        tile is placed by the descriptor value's offset, or by the descriptor register's value (a Desc: the
        buffer's address, shifted, plus the template and the stage's offset); a tile it cannot place is not
        followed. What it surely reads is the swizzle-atom row its start address falls in (verify/wgmma.py
        atom_row): a refill of its stage covers that row."""
        for d in e.descs:
            buf, lay = getattr(d, "buffer", None), getattr(d, "layout", None)
            if buf is None or lay is None:
                continue
            off = getattr(d, "offset", None)
            if off is None:
                v = self.values.get(th, getattr(d, "reg", None))
                if type(v) is not Desc or v.alloc is not buf:
                    continue
                off = v.off
            lo, size = atom_row(lay, off)
            hi = min(lo + size, buf.nbytes)
            # One MMA per warpgroup: the classes of its threads (split by a lead's branch, say) share one record
            # per iteration, and any of them retiring it with wgmma.wait_group (collective: all wait together)
            # retires it for all; `owners` holds (class id -> clock) of each retirement.
            it = self._iteration(th, s)
            key = (s, d, frozenset(t // WARPGROUP for t in th.tids), it)
            read = self.mma_reads.get(key) if None not in it else None
            if read is None:
                read = [buf, lo, hi, PENDING, s, False, {}]
                if None not in it:
                    self.mma_reads[key] = read
            th.reads.append(read)
            th.asyncg = th.asyncg.add("wgmma", READ, read)
            self._against_loads(th, s, buf, lo, hi, False)

    def _iteration(self, th, s) -> tuple:
        """Which pass of the loops around `s` a class is in: their counters' values."""
        return tuple(th.regs.get(v) if type(th.regs.get(v)) is int else None for v in self.loop_vars.get(s, ()))

    def commit_group(self, th, s, e):
        th.asyncg = th.asyncg.commit(e.queue, empty=True)

    def wait_group(self, th, s, e):
        """The oldest groups of the queue, all but e.n, are done reading: their reads now have this thread's
        clock."""
        done, th.asyncg = th.asyncg.wait(e.queue, e.n, e.read)
        clock = None
        for x in done:
            if x.what == READ:
                clock = clock or th.tick()
                read = x.item
                if len(read) > 6:               # an MMA's: retired for whoever sees any retirement of it
                    read[6].setdefault(th.id, clock)
                if read[3] is PENDING:
                    read[3] = clock

    @staticmethod
    def _seen(th, g, r) -> bool:
        """Whether the class `th` has seen the access `r` of class `g` complete."""
        if len(r) > 6:
            return any(th.vc.get(o, -1) >= c for o, c in r[6].items())
        return th.vc.get(g.id, -1) >= r[3]

    def _refill_race(self, th, s, alloc, lo, hi):
        for g in self.classes:
            if g is th or g.state == "split":
                continue
            for r in reversed(g.reads):
                a, l, h, clock, stmt, write = r[:6]
                if a is alloc and l < hi and lo < h and not self._seen(th, g, r):
                    self._report_refill(th.tids, alloc, lo, hi, g.tids, "write" if write else "read", s, stmt)
                    return

    def _report_refill(self, issuers, alloc, lo, hi, readers, verb, load, access):
        """refill-race: `issuers` start the TMA load `load` into alloc[lo:hi] while `readers` may still `verb` it
        at `access`."""
        if any(isinstance(e, MmaAsync) for e in self.fx.of(access)):
            self._report("wgmma-stage-release", f"{describe(issuers)} start(s) a TMA load into {alloc.name}[{lo}:{hi}] "
                         f"here while the wgmma.mma_async at line {_line(access)} ({describe(readers)}) may still "
                         f"read it: the stage was released (its empty-barrier arrive) before a wgmma.wait_group "
                         f"retired that MMA's group; arrive after the wait_group", load, access)
            return
        self._report("refill-race", f"{describe(issuers)} start(s) a TMA load into {alloc.name}[{lo}:{hi}] here "
                     f"while {describe(readers)} may still {verb} it ({verb} at line {_line(access)}): nothing "
                     f"orders that {verb} before this load (wait on the slot's empty barrier, which every reader "
                     f"arrives on after reading, or bar.sync, before the refill)", load, access)


def _slot(key: Sym) -> str:
    """How a finding names a barrier: `full[2]` for a slot of an array, the buffer's name for a single one."""
    return f"{key.alloc.name}[{key.off // 8}]" if key.alloc.nbytes > 8 else key.alloc.name


def _line(s) -> str:
    return str(s.loc.line) if getattr(s, "loc", None) is not None else "?"
