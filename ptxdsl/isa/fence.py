"""Fences: fence.proxy.async, fence.proxy.alias, fence.proxy.tensormap::generic, fence.{sc,acq_rel,...} and
the sync_restrict forms."""
from __future__ import annotations

from ..target import Req
from . import effects as fx
from .decl import Flag, Op, Qual
from .operands import Address, Literal, Slot

SCOPES = ("cta", "cluster", "gpu", "sys")


class FenceProxyAsync(Op):
    """fence.proxy.async: order generic-proxy accesses (of `space`, or of every space) before later
    async-proxy (TMA) ones."""

    ptx = "fence.proxy.async{.<space>}"
    quals = {"space": Qual(None, "global", "shared::cta", "shared::cluster", aliases={"": None})}
    args = ("space",)
    floor = Req((8, 0))
    family, level = "fence", "gpu"

    def effects(self):
        return (fx.ProxyFence("async", self.space),)


class FenceProxyAlias(Op):
    """fence.proxy.alias: order accesses made through different virtual aliases of the same memory."""

    ptx = "fence.proxy.alias"
    floor = Req((7, 5))
    family = "fence"

    def effects(self):
        return (fx.ProxyFence("alias"),)


class FenceProxyTensormapRelease(Op):
    """fence.proxy.tensormap::generic.release: publish earlier generic writes of tensor maps to the tensormap
    proxy, at `scope`."""

    ptx = "fence.proxy.tensormap::generic.<sem>.<scope>"
    quals = {"sem": Qual("release", default="release"), "scope": Qual(*SCOPES)}
    floor = Req((8, 3))
    family = "fence"
    method = "fence_proxy_tensormap"
    form = frozenset({"release"})

    def effects(self):
        return (fx.ProxyFence("tensormap", sem="release"),)


class FenceProxyTensormapAcquire(Op):
    """fence.proxy.tensormap::generic.acquire [addr], 128: make the tensor map at `addr` (a generic address)
    as the tensormap proxy sees it visible to later uses."""

    ptx = "fence.proxy.tensormap::generic.<sem>.<scope>"
    quals = {"sem": Qual("acquire", default="acquire"), "scope": Qual(*SCOPES)}
    operands = (Slot("addr", Address("")), Slot("size", Literal("128")))
    floor = Req((8, 3))
    family, level = "fence", "gpu"
    method = "fence_proxy_tensormap"
    form = frozenset({"acquire"})

    def effects(self):
        return (fx.ProxyFence("tensormap", sem="acquire", addr=self.addr),)


class Fence(Op):
    """fence.sem.scope: a memory fence (sc, acq_rel; acquire and release from ISA 8.6)."""

    ptx = "fence.<sem>.<scope>"
    quals = {"sem": Qual("sc", "acq_rel", "acquire", "release", default="acq_rel"),
             "scope": Qual(*SCOPES, default="cta")}
    args = ("sem", "scope")
    floor = Req((7, 8))
    raises = (({"sem": ("acquire", "release")}, Req((8, 6))),)
    family = "fence"

    def effects(self):
        return (fx.Order("acq_rel" if self.sem == "sc" else self.sem, self.scope, fence=True),)


class FenceSyncRestrictRelease(Op):
    """fence{.proxy.async::generic}.release.sync_restrict::shared::cta.cluster: release this CTA's shared
    memory writes to the cluster (with the proxy: to the async proxy too)."""

    ptx = "fence{.<proxy_async>}.<sem>.sync_restrict::shared::cta.cluster"
    quals = {"proxy_async": Flag("proxy.async::generic"), "sem": Qual("release", default="release")}
    floor = Req((8, 6))
    family = "fence"
    method = "fence_sync_restrict"
    form = frozenset({"sync_restrict::shared::cta"})

    def effects(self):
        return (fx.ProxyFence("async", "shared::cta", sem="release"),) if self.proxy_async else ()


class FenceSyncRestrictAcquire(Op):
    """fence{.proxy.async::generic}.acquire.sync_restrict::shared::cluster.cluster: acquire what other CTAs
    of the cluster released into this CTA's shared memory."""

    ptx = "fence{.<proxy_async>}.<sem>.sync_restrict::shared::cluster.cluster"
    quals = {"proxy_async": Flag("proxy.async::generic"), "sem": Qual("acquire", default="acquire")}
    floor = Req((8, 6))
    family = "fence"
    method = "fence_sync_restrict"
    form = frozenset({"sync_restrict::shared::cluster"})
