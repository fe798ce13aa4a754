"""Fences: fence.proxy.async, fence.mbarrier_init, fence.proxy.tensormap::generic, fence.{sc,acq_rel,...},
and the sync_restrict forms. Floors: shared/reference/ptx-tma-isa.md section 6."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import DSLError
from ..target import Req
from .base import Op, choice, join, memory

ASYNC_SPACES = frozenset({None, "global", "shared::cta", "shared::cluster"})
SCOPES = frozenset({"cta", "cluster", "gpu", "sys"})


@dataclass(eq=False)
class FenceProxyAsync(Op):
    """fence.proxy.async{.space}: order generic-proxy and async-proxy (TMA) accesses."""

    mnemonic: ClassVar[str] = "fence.proxy.async"
    space: str | None = None

    def __post_init__(self):
        choice("fence.proxy.async space", self.space, ASYNC_SPACES)

    def emit(self) -> str:
        return join(self.mnemonic, self.space)

    def requires(self) -> Req:
        return Req((8, 0))


@dataclass(eq=False)
class FenceMbarrierInit(Op):
    """fence.mbarrier_init.release.cluster: publish prior mbarrier.init to the cluster and the async proxy."""

    mnemonic: ClassVar[str] = "fence.mbarrier_init"

    def emit(self) -> str:
        return "fence.mbarrier_init.release.cluster"

    def requires(self) -> Req:
        return Req((8, 0))


@dataclass(eq=False)
class FenceProxyTensormap(Op):
    """fence.proxy.tensormap::generic.{release|acquire}.scope {[addr], 128}."""

    mnemonic: ClassVar[str] = "fence.proxy.tensormap::generic"
    sem: str
    scope: str
    addr: object = None

    def __post_init__(self):
        choice(f"{self.mnemonic} sem", self.sem, {"release", "acquire"})
        choice(f"{self.mnemonic} scope", self.scope, SCOPES)
        if self.sem == "acquire":
            if self.addr is None:
                raise DSLError(f"{self.mnemonic}.acquire needs addr= (the tensor map it acquires)")
            self.addr = memory(f"{self.mnemonic} addr", self.addr, "")
        elif self.addr is not None:
            raise DSLError(f"{self.mnemonic}.release takes no address")

    def emit(self) -> str:
        q = join(self.mnemonic, self.sem, self.scope)
        return f"{q} {self.addr}, 128" if self.addr is not None else q

    def requires(self) -> Req:
        return Req((8, 3))


@dataclass(eq=False)
class Fence(Op):
    """fence.{sc|acq_rel|acquire|release}.scope (acquire/release: ISA 8.6)."""

    mnemonic: ClassVar[str] = "fence"
    sem: str = "acq_rel"
    scope: str = "cta"

    def __post_init__(self):
        choice("fence sem", self.sem, {"sc", "acq_rel", "acquire", "release"})
        choice("fence scope", self.scope, SCOPES)

    def emit(self) -> str:
        return join("fence", self.sem, self.scope)

    def requires(self) -> Req:
        return Req((8, 6)) if self.sem in ("acquire", "release") else Req((7, 8))


@dataclass(eq=False)
class FenceSyncRestrict(Op):
    """fence{.proxy.async::generic}.{release.sync_restrict::shared::cta | acquire.sync_restrict::shared::cluster}.cluster."""

    mnemonic: ClassVar[str] = "fence.sync_restrict"
    sem: str
    proxy_async: bool = False

    def __post_init__(self):
        choice("fence sync_restrict sem", self.sem, {"release", "acquire"})

    def emit(self) -> str:
        space = "shared::cta" if self.sem == "release" else "shared::cluster"
        return join("fence", "proxy.async::generic" if self.proxy_async else "", self.sem,
                    f"sync_restrict::{space}", "cluster")

    def requires(self) -> Req:
        return Req((8, 6))
