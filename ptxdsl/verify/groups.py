"""Async-group queues: one mechanism for every kind of asynchronous group a thread commits and waits on.

A queue is named by the effects (`CommitGroup(queue)`, `WaitGroup(n, read, queue)`): 'bulk' for
cp.async.bulk.commit_group / wait_group (TMA stores, reduces and bulk copies out of shared memory), 'wgmma' for
wgmma.commit_group / wait_group (the warpgroup's mma_async). An operation joins its queue's open group as one or
more entries, each tagged with what it holds until the group retires:

    READ   it reads shared memory (a TMA store's source, an mma_async's operand stage): free once a wait_group
           (cp.async.bulk.wait_group.read, or any wgmma.wait_group) retires its group
    WRITE  it writes global memory (a TMA store or reduce): complete only once a wait_group without .read
           retires its group
    REGS   it reads and writes registers (an mma_async's accumulators and A fragment): usable again once a
           wgmma.wait_group retires its group

`Groups` is a value (every update returns a new one), so the walk (flow.py) keeps it in its per-path state and
joins it at branches, and the run of the threads (ring.py) keeps one per class of threads. The entries are the
engine's own (the walk's Pending, the run's read records); this module only orders, commits and retires them.
"""
from __future__ import annotations

from dataclasses import dataclass

READ, WRITE, REGS = "read", "write", "regs"
QUEUES = ("bulk", "wgmma")
MAX_GROUPS = 64                 # committed groups kept per queue (the newest)


@dataclass(frozen=True)
class Entry:
    """One thing an async operation holds until its group retires: `what` (READ, WRITE, REGS) and the engine's
    record of it (`item`)."""

    what: str
    item: object


@dataclass(frozen=True)
class Queue:
    """One queue: the entries since the last commit (`open`) and the committed groups, oldest first."""

    open: tuple = ()
    committed: tuple = ()

    def entries(self):
        yield from self.open
        for g in self.committed:
            yield from g


@dataclass(frozen=True)
class Groups:
    """A thread's async-group queues, by name."""

    queues: tuple = ()          # ((name, Queue), ...) in first-use order

    def queue(self, name: str) -> Queue:
        return next((q for n, q in self.queues if n == name), _EMPTY)

    def _with(self, name: str, q: Queue) -> "Groups":
        rest = tuple((n, x) for n, x in self.queues if n != name)
        return Groups(rest + ((name, q),) if q.open or q.committed else rest)

    def add(self, name: str, what: str, item) -> "Groups":
        """An operation's entry joins the open group of queue `name`."""
        q = self.queue(name)
        return self._with(name, Queue(q.open + (Entry(what, item),), q.committed))

    def commit(self, name: str, empty: bool = False) -> "Groups":
        """commit_group: the open entries become the newest group. An empty commit makes an empty group only with
        `empty` (the run counts them; the walk, whose state joins paths, keeps only groups that hold something)."""
        q = self.queue(name)
        if not q.open and not empty:
            return self
        return self._with(name, Queue((), (q.committed + (q.open,))[-MAX_GROUPS:]))

    def wait(self, name: str, n: int, read: bool = False) -> tuple:
        """wait_group n: all but the newest n committed groups retire; with `read` (cp.async.bulk.wait_group.read)
        only their READ entries do (their global writes may still be under way). Returns (the retired entries,
        the queues after the wait)."""
        q = self.queue(name)
        cut = max(0, len(q.committed) - n)
        done, kept = [], []
        for g in q.committed[:cut]:
            if read:
                done.extend(x for x in g if x.what == READ)
                rest = tuple(x for x in g if x.what != READ)
                if rest:
                    kept.append(rest)
            else:
                done.extend(g)
        return tuple(done), self._with(name, Queue(q.open, tuple(kept) + q.committed[cut:]))

    def pending(self, name: str, what: str | None = None) -> tuple:
        """The entries of queue `name` not yet retired (of kind `what` when given), open ones first."""
        return tuple(x for x in self.queue(name).entries() if what is None or x.what == what)

    def uncommitted(self, name: str, entry: Entry) -> bool:
        return entry in self.queue(name).open

    def map(self, fn) -> "Groups":
        """The queues with each entry's item replaced by fn(item) (the run's split gives each half its own
        records)."""
        return Groups(tuple((n, Queue(tuple(Entry(x.what, fn(x.item)) for x in q.open),
                                      tuple(tuple(Entry(x.what, fn(x.item)) for x in g) for g in q.committed)))
                            for n, q in self.queues))

    def keep(self, pred) -> "Groups":
        """Only the entries whose item satisfies `pred`; groups left empty are dropped."""
        out = Groups()
        for n, q in self.queues:
            committed = tuple(g for g in (tuple(x for x in g if pred(x.item)) for g in q.committed) if g)
            out = out._with(n, Queue(tuple(x for x in q.open if pred(x.item)), committed))
        return out

    @staticmethod
    def join(a: "Groups", b: "Groups") -> "Groups":
        """The queues after two branches (each already reduced to the entries of the threads that ran it): the
        open entries and the groups of both, each once, the newest MAX_GROUPS groups kept."""
        out = Groups()
        for n in dict.fromkeys([n for n, _ in a.queues] + [n for n, _ in b.queues]):
            qa, qb = a.queue(n), b.queue(n)
            committed = tuple(dict.fromkeys(qa.committed + qb.committed))[-MAX_GROUPS:]
            out = out._with(n, Queue(tuple(dict.fromkeys(qa.open + qb.open)), committed))
        return out


_EMPTY = Queue()


# ----------------------------------------------------------------------------------- the walk's handlers


def commit(cx, s, e, st, ctx):
    """CommitGroup(queue): the thread's open entries of that queue become its newest group."""
    st.asyncg = st.asyncg.commit(e.queue)


def wait(cx, s, e, st, ctx):
    """WaitGroup(n, read, queue): all but the newest n groups of the queue retire. Global writes that complete
    here are not yet ordered before later generic accesses (fence.proxy.async.global: verify/ordering.py)."""
    done, st.asyncg = st.asyncg.wait(e.queue, e.n, e.read)
    st.writes_unfenced = st.writes_unfenced + tuple(x.item for x in done if x.what == WRITE)
