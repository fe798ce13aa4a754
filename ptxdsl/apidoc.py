"""docs/api.md: the public API that is not an instruction, rendered from its docstrings and signatures.

    python -m ptxdsl.apidoc > docs/api.md

SECTIONS lists what the page shows, in reading order; tests/test_docs.py regenerates the page and compares, and
checks that every public name and every builder method that is not an instruction is on it. The instruction
methods (`k.mbarrier_init`, `k.cp_async_bulk_tensor`, ...) are derived from the op declarations and listed in
docs/isa.md (`python -m ptxdsl.isa.registry`); this page links there.
"""
from __future__ import annotations

import importlib
import inspect
import sys

# (title, what the section is about, [(dotted path of the object, how the page names it), ...])
# A name ending in "()" is a callable shown with its signature; "k." stands for a KernelBuilder.
SECTIONS: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("Building a kernel", "A kernel is built inside a `with` block; leaving the block runs the verifier. Every "
     "builder method records the file and line of the call that made it.", [
        ("ptxdsl.kernel", "ptxdsl.kernel()"),
        ("ptxdsl.builder.KernelBuilder", "ptxdsl.KernelBuilder"),
        ("ptxdsl.builder.KernelBuilder.finish", "k.finish()"),
        ("ptxdsl.builder.KernelBuilder.ptx", "k.ptx()"),
        ("ptxdsl.module", "ptxdsl.module()"),
        ("ptxdsl.ir.Kernel", "ptxdsl.Kernel"),
        ("ptxdsl.ir.Module", "ptxdsl.Module"),
    ]),
    ("Parameters", "Kernel parameters, in the order they are declared.", [
        ("ptxdsl.builder.KernelBuilder.param", "k.param()"),
        ("ptxdsl.builder.KernelBuilder.param_ptr", "k.param_ptr()"),
        ("ptxdsl.builder.KernelBuilder.param_tensormap", "k.param_tensormap()"),
    ]),
    ("Shared memory, barriers and registers", "Types are the PTX names: `ptxdsl.b8`, `ptxdsl.b16`, `ptxdsl.b32`, "
     "`ptxdsl.b64`, `ptxdsl.u8`, `ptxdsl.u16`, `ptxdsl.u32`, `ptxdsl.u64`, `ptxdsl.s8`, `ptxdsl.s16`, `ptxdsl.s32`, "
     "`ptxdsl.s64`, `ptxdsl.f16`, `ptxdsl.bf16`, `ptxdsl.f32`, `ptxdsl.f64`, `ptxdsl.pred` (a method also takes "
     "the name as a string, `\"u32\"`). Special registers are `ptxdsl.sreg.tid_x`, "
     "`sreg.ctaid_y`, `sreg.laneid`, `sreg.cluster_ctarank`, ... (the PTX name with dots as underscores), read "
     "with `k.mov(sreg.tid_x)`.", [
        ("ptxdsl.builder.KernelBuilder.shared", "k.shared()"),
        ("ptxdsl.builder.KernelBuilder.mbarrier", "k.mbarrier()"),
        ("ptxdsl.ir.SharedAlloc.at", "buffer.at()"),
        ("ptxdsl.builder.KernelBuilder.reg", "k.reg()"),
    ]),
    ("Addresses and tensor maps in registers", "`k.cvta` is an instruction (see docs/isa.md); it is listed here "
     "because it turns a state-space address into the generic one that `TensorMapRef` takes.", [
        ("ptxdsl.ir.Addr", "ptxdsl.Addr"),
        ("ptxdsl.ir.TensorMapRef", "ptxdsl.TensorMapRef"),
        ("ptxdsl.builder.KernelBuilder.cvta", "k.cvta()"),
        ("ptxdsl.builder.KernelBuilder.tid_x", "k.tid_x()"),
        ("ptxdsl.builder.KernelBuilder.warp_idx", "k.warp_idx()"),
    ]),
    ("Control flow", "Structured blocks: each is a `with` statement; the emitter writes the branches and labels.", [
        ("ptxdsl.builder.KernelBuilder.if_", "k.if_()"),
        ("ptxdsl.builder.KernelBuilder.else_", "k.else_()"),
        ("ptxdsl.builder.KernelBuilder.loop", "k.loop()"),
        ("ptxdsl.builder.KernelBuilder.elect_one", "k.elect_one()"),
        ("ptxdsl.builder.KernelBuilder.guard", "k.guard()"),
        ("ptxdsl.builder.KernelBuilder.mbarrier_wait", "k.mbarrier_wait()"),
        ("ptxdsl.builder.KernelBuilder.label", "k.label()"),
    ]),
    ("Verifier exceptions and source locations", "The rules are listed, each with a bad and a fixed kernel, in "
     "[verifier.md](verifier.md).", [
        ("ptxdsl.builder.KernelBuilder.allow", "k.allow()"),
        ("ptxdsl.builder.KernelBuilder.at", "k.at()"),
        ("ptxdsl.verify.check", "ptxdsl.verify.check()"),
        ("ptxdsl.verify.verify_kernel", "ptxdsl.verify.verify_kernel()"),
        ("ptxdsl.verify.format_diagnostics", "ptxdsl.verify.format_diagnostics()"),
        ("ptxdsl.verify.rules.Diagnostic", "ptxdsl.verify.Diagnostic"),
    ]),
    ("Instructions outside the table", "Shorthands for one form of an instruction of [isa.md](isa.md), and the "
     "call behind every instruction method.", [
        ("ptxdsl.builder.KernelBuilder.atom_add", "k.atom_add()"),
        ("ptxdsl.builder.KernelBuilder.cp_async_bulk_wait_group_read", "k.cp_async_bulk_wait_group_read()"),
        ("ptxdsl.builder.KernelBuilder.op", "k.op()"),
    ]),
    ("PTX and assembly", "", [
        ("ptxdsl.emit.emit", "ptxdsl.emit()"),
        ("ptxdsl.emit.PTX", "ptxdsl.PTX"),
        ("ptxdsl.target.Target", "ptxdsl.Target"),
        ("ptxdsl.assembler.assemble", "ptxdsl.assemble()"),
        ("ptxdsl.assembler.Assembled", "ptxdsl.Assembled"),
        ("ptxdsl.assembler.Assembled.report", "assembled.report()"),
        ("ptxdsl.assembler.Resources", "ptxdsl.assembler.Resources"),
    ]),
    ("Compiling and launching", "How launches, streams and arrays behave is told in [runtime.md](runtime.md); "
     "how kernels are compiled and cached, in [compile.md](compile.md).", [
        ("ptxdsl.program.compile", "ptxdsl.compile()"),
        ("ptxdsl.program.Program", "ptxdsl.program.Program"),
        ("ptxdsl.program.Launcher", "ptxdsl.program.Launcher"),
        ("ptxdsl.program.Launcher.__call__", "prog[name]()"),
        ("ptxdsl.program.Launcher.shared_bytes_for", "prog[name].shared_bytes_for()"),
        ("ptxdsl.program.Launcher.max_active_ctas", "prog[name].max_active_ctas()"),
        ("ptxdsl.verify.launch.check_launch", "ptxdsl.verify.check_launch()"),
        ("ptxdsl.verify.launch.explain_launch", "ptxdsl.verify.explain_launch()"),
        ("ptxdsl.verify.launch.Outcome", "ptxdsl.verify.Outcome"),
    ]),
    ("Files the command line reads", "`ptxdsl emit|check|run|sass FILE` reads a `.py` file by running it: its "
     "kernels are the builders, `Kernel`s and `Module`s it defines at module level, in definition order. Beside "
     "them it may define two functions. `run(device=None, kernel=None)` is its host check: `ptxdsl run` calls it "
     "on the GPU and it returns `(ok, verdict)`, `ok` a bool (PASS or FAIL) and `verdict` one line saying what "
     "was compared (for `FILE.ptxd`, the `run` of the `.py` file beside it is called with `kernel=` the .ptxd "
     "kernel). `launches()` returns the `ptxdsl.Launch` descriptions of the launches the kernels are meant for: "
     "`ptxdsl check` runs every launch check with each (a `.ptxd` file's come from the `.py` file beside it, "
     "matched by kernel name); see [verifier.md](verifier.md#declared-launches).", [
        ("ptxdsl.verify.launch.Launch", "ptxdsl.Launch"),
        ("ptxdsl.verify.launch.Launch.check", "launch.check()"),
        ("ptxdsl.verify.launch.Launch.explain", "launch.explain()"),
    ]),
    ("Pipelines", "`ptxdsl.pipeline`: rings of shared-memory stages with full and empty mbarriers, flags between "
     "CTAs, written with the "
     "builder calls above (a library, not part of the language); [pipelines.md](pipelines.md) is the tutorial.", [
        ("ptxdsl.pipeline.Ring", "ptxdsl.pipeline.Ring"),
        ("ptxdsl.pipeline.Ring.init", "ring.init()"),
        ("ptxdsl.pipeline.Ring.cursor", "ring.cursor()"),
        ("ptxdsl.pipeline.Cursor", "ptxdsl.pipeline.Cursor"),
        ("ptxdsl.pipeline.Cursor.advance", "cur.advance()"),
        ("ptxdsl.pipeline.Ring.full", "ring.full()"),
        ("ptxdsl.pipeline.Ring.empty", "ring.empty()"),
        ("ptxdsl.pipeline.Ring.buffer", "ring.buffer()"),
        ("ptxdsl.pipeline.Ring.producer_acquire", "ring.producer_acquire()"),
        ("ptxdsl.pipeline.Ring.producer_arm", "ring.producer_arm()"),
        ("ptxdsl.pipeline.Ring.consumer_wait", "ring.consumer_wait()"),
        ("ptxdsl.pipeline.Ring.consumer_release", "ring.consumer_release()"),
        ("ptxdsl.pipeline.Ring.produce", "with ring.produce()"),
        ("ptxdsl.pipeline.Ring.consume", "with ring.consume()"),
        ("ptxdsl.pipeline.Ring.release", "ring.release()"),
        ("ptxdsl.pipeline.Ring.load_bytes", "ring.load_bytes"),
        ("ptxdsl.pipeline.Stage", "ptxdsl.pipeline.Stage"),
        ("ptxdsl.pipeline.Stage.load", "st.load()"),
        ("ptxdsl.pipeline.Stage.slot", "st.slot()"),
        ("ptxdsl.pipeline.Roles", "ptxdsl.pipeline.Roles"),
        ("ptxdsl.pipeline.Roles.warpgroups", "with roles.warpgroups()"),
        ("ptxdsl.pipeline.Roles.warpgroup", "with roles.warpgroup()"),
        ("ptxdsl.pipeline.Roles.warp", "with roles.warp()"),
        ("ptxdsl.pipeline.Roles.entry_registers", "roles.entry_registers"),
        ("ptxdsl.pipeline.TileScheduler", "ptxdsl.pipeline.TileScheduler"),
        ("ptxdsl.pipeline.TileScheduler.coords", "sched.coords()"),
        ("ptxdsl.pipeline.StoreDrain", "ptxdsl.pipeline.StoreDrain"),
        ("ptxdsl.pipeline.StoreDrain.committed", "drain.committed()"),
        ("ptxdsl.pipeline.StoreDrain.finish", "drain.finish()"),
        ("ptxdsl.pipeline.Flags", "ptxdsl.pipeline.Flags"),
        ("ptxdsl.pipeline.Flags.addr", "flags.addr()"),
        ("ptxdsl.pipeline.Flags.publish", "flags.publish()"),
        ("ptxdsl.pipeline.Flags.wait", "flags.wait()"),
        ("ptxdsl.pipeline.persistent", "ptxdsl.pipeline.persistent()"),
        ("ptxdsl.pipeline.tile_coords", "ptxdsl.pipeline.tile_coords()"),
        ("ptxdsl.pipeline.tile_box", "ptxdsl.pipeline.tile_box()"),
        ("ptxdsl.pipeline.tile_grid", "ptxdsl.pipeline.tile_grid()"),
        ("ptxdsl.pipeline.launch_shape", "ptxdsl.pipeline.launch_shape()"),
    ]),
    ("GEMM", "`ptxdsl.gemm`: a persistent, warp-specialised TMA + wgmma GEMM built with `ptxdsl.pipeline` (a "
     "library on the builder API); [gemm.md](gemm.md) walks through it.", [
        ("ptxdsl.gemm.launch.matmul", "ptxdsl.gemm.matmul()"),
        ("ptxdsl.gemm.config.GemmConfig", "ptxdsl.gemm.GemmConfig"),
        ("ptxdsl.gemm.config.choose", "ptxdsl.gemm.choose()"),
        ("ptxdsl.gemm.kernel.build", "ptxdsl.gemm.build()"),
        ("ptxdsl.gemm.epilogue.relu", "ptxdsl.gemm.epilogue.relu()"),
        ("ptxdsl.gemm.epilogue.scale", "ptxdsl.gemm.epilogue.scale()"),
    ]),
    ("Tensor cores: descriptors and fragments", "The values that name wgmma operands: a shared tile's layout and "
     "its 64-bit descriptor, the accumulator and A-fragment registers, and the CPU model of what the hardware "
     "reads and computes. [tensor-cores.md](tensor-cores.md) is the tutorial, with pictures of the layouts.", [
        ("ptxdsl.descriptor.MatrixLayout", "ptxdsl.MatrixLayout"),
        ("ptxdsl.descriptor.MatrixLayout.for_tensormap", "MatrixLayout.for_tensormap()"),
        ("ptxdsl.descriptor.MatrixLayout.lbo", "layout.lbo"),
        ("ptxdsl.descriptor.MatrixLayout.sbo", "layout.sbo"),
        ("ptxdsl.descriptor.MatrixLayout.template", "layout.template"),
        ("ptxdsl.descriptor.MatrixLayout.descriptor", "layout.descriptor()"),
        ("ptxdsl.descriptor.MatrixLayout.byte_offset", "layout.byte_offset()"),
        ("ptxdsl.descriptor.MatrixLayout.k_offset", "layout.k_offset()"),
        ("ptxdsl.descriptor.MatrixLayout.k_steps", "layout.k_steps"),
        ("ptxdsl.descriptor.MatrixLayout.nbytes", "layout.nbytes"),
        ("ptxdsl.descriptor.tensormap_mismatches", "ptxdsl.descriptor.tensormap_mismatches()"),
        ("ptxdsl.builder.KernelBuilder.matrix_descriptor", "k.matrix_descriptor()"),
        ("ptxdsl.descriptor.MatrixDescriptor", "ptxdsl.descriptor.MatrixDescriptor"),
        ("ptxdsl.descriptor.MatrixDescriptor.advance_k", "desc.advance_k()"),
        ("ptxdsl.descriptor.MatrixDescriptor.advance", "desc.advance()"),
        ("ptxdsl.descriptor.MatrixDescriptor.at_row", "desc.at_row()"),
        ("ptxdsl.fragment.Accumulator", "ptxdsl.fragment.Accumulator"),
        ("ptxdsl.fragment.Accumulator.zero", "acc.zero()"),
        ("ptxdsl.fragment.Accumulator.coords", "acc.coords()"),
        ("ptxdsl.fragment.Accumulator.elements", "acc.elements()"),
        ("ptxdsl.fragment.Accumulator.load_columns", "acc.load_columns()"),
        ("ptxdsl.fragment.Accumulator.load_rows", "acc.load_rows()"),
        ("ptxdsl.fragment.Accumulator.map", "acc.map()"),
        ("ptxdsl.fragment.Accumulator.pack", "acc.pack()"),
        ("ptxdsl.fragment.Accumulator.store", "acc.store()"),
        ("ptxdsl.fragment.AFragment", "ptxdsl.fragment.AFragment"),
        ("ptxdsl.fragment.AFragment.load", "frag.load()"),
        ("ptxdsl.fragment.acc_coord", "ptxdsl.fragment.acc_coord()"),
        ("ptxdsl.fragment.a_coord", "ptxdsl.fragment.a_coord()"),
        ("ptxdsl.reference.wgmma.read_operand", "ptxdsl.reference.wgmma.read_operand()"),
        ("ptxdsl.reference.wgmma.place_tile", "ptxdsl.reference.wgmma.place_tile()"),
        ("ptxdsl.reference.wgmma.read_tile", "ptxdsl.reference.wgmma.read_tile()"),
        ("ptxdsl.reference.wgmma.mma_async", "ptxdsl.reference.wgmma.mma_async()"),
        ("ptxdsl.reference.wgmma.wgmma", "ptxdsl.reference.wgmma.wgmma()"),
        ("ptxdsl.reference.wgmma.acc_to_matrix", "ptxdsl.reference.wgmma.acc_to_matrix()"),
        ("ptxdsl.reference.wgmma.a_regs_to_matrix", "ptxdsl.reference.wgmma.a_regs_to_matrix()"),
    ]),
    ("Tensor maps on the host", "A 2-D map's sizes are written in three orders, and each call says which it "
     "takes:\n\n"
     "| Order | Spelled | Who takes it |\n"
     "| --- | --- | --- |\n"
     "| numpy order: outermost first, (rows, columns) | `shape`, `box` of `tiled_for`, `from_array` | "
     "`TensorMapSpec.tiled_for(shape, dtype, box)`, `TensorMapSpec.from_array(arr, box)`, numpy, torch |\n"
     "| PTX coordinate order: innermost first, (x, y) = (column, row) | the coordinates of a TMA copy | "
     "`k.cp_async_bulk_tensor(dst, src, (x, y))`, `ptxdsl.pipeline.tile_coords`' result |\n"
     "| box order: innermost first, (columns, rows), as the driver keeps it | `spec.dims`, `spec.box`, "
     "`spec.strides` | `TensorMapSpec(...)` itself, `tile_coords(k, tile, across, box)`, `tile_grid` |\n\n"
     "`tile_coords` and `tile_grid` take the map itself (its spec's box) so that the order cannot be swapped; a "
     "(columns, rows) pair given with `tmap=` is checked against the map's box (rule `pipeline.box-order`).", [
        ("ptxdsl.tensormap.TensorMapSpec", "ptxdsl.TensorMapSpec"),
        ("ptxdsl.tensormap.TensorMapSpec.tiled_for", "TensorMapSpec.tiled_for()"),
        ("ptxdsl.tensormap.TensorMapSpec.im2col_for", "TensorMapSpec.im2col_for()"),
        ("ptxdsl.tensormap.TensorMapSpec.from_array", "TensorMapSpec.from_array()"),
        ("ptxdsl.tensormap.TensorMapSpec.validate", "spec.validate()"),
        ("ptxdsl.tensormap.TensorMapSpec.bind", "spec.bind()"),
        ("ptxdsl.tensormap.TensorMapSpec.box_bytes", "spec.box_bytes"),
        ("ptxdsl.tensormap.TensorMapSpec.smem_bytes", "spec.smem_bytes"),
        ("ptxdsl.runtime.tensormap.encode", "ptxdsl.runtime.encode()"),
        ("ptxdsl.runtime.tensormap.to_device", "ptxdsl.runtime.tensormap.to_device()"),
    ]),
    ("Device memory", "", [
        ("ptxdsl.runtime.memory.DeviceArray", "ptxdsl.runtime.DeviceArray"),
        ("ptxdsl.runtime.memory.DeviceArray.to_device", "DeviceArray.to_device()"),
        ("ptxdsl.runtime.memory.DeviceArray.empty", "DeviceArray.empty()"),
        ("ptxdsl.runtime.memory.DeviceArray.zeros", "DeviceArray.zeros()"),
        ("ptxdsl.runtime.memory.DeviceArray.to_host", "array.to_host()"),
        ("ptxdsl.runtime.memory.DeviceArray.copy_from", "array.copy_from()"),
        ("ptxdsl.runtime.memory.DeviceArray.fill_bytes", "array.fill_bytes()"),
        ("ptxdsl.runtime.memory.DeviceArray.free", "array.free()"),
    ]),
    ("The .ptxd language", "The language itself is described in [language.md](language.md).", [
        ("ptxdsl.lang.load", "ptxdsl.lang.load()"),
        ("ptxdsl.lang.loads", "ptxdsl.lang.loads()"),
        ("ptxdsl.lang.to_ptxd", "ptxdsl.lang.to_ptxd()"),
    ]),
    ("Errors", "Every error ptxdsl raises on purpose is a `PtxdslError`; its message names the value, the rule "
     "and the source line (`error.loc`, `error.rule`).", [
        ("ptxdsl.errors.PtxdslError", "ptxdsl.PtxdslError"),
        ("ptxdsl.errors.DSLError", "ptxdsl.DSLError"),
        ("ptxdsl.errors.TargetError", "ptxdsl.TargetError"),
        ("ptxdsl.errors.VerifyError", "ptxdsl.VerifyError"),
        ("ptxdsl.errors.ParseError", "ptxdsl.ParseError"),
        ("ptxdsl.errors.AssembleError", "ptxdsl.AssembleError"),
        ("ptxdsl.errors.TensorMapError", "ptxdsl.TensorMapError"),
        ("ptxdsl.errors.LayoutError", "ptxdsl.LayoutError"),
        ("ptxdsl.errors.CudaError", "ptxdsl.CudaError"),
        ("ptxdsl.errors.LaunchError", "ptxdsl.LaunchError"),
        ("ptxdsl.errors.KernelTrap", "ptxdsl.KernelTrap"),
        ("ptxdsl.errors.SourceLoc", "ptxdsl.SourceLoc"),
    ]),
]

HEADER = """# API reference

Generated by `python -m ptxdsl.apidoc > docs/api.md` from the docstrings; do not edit by hand. The builder's
instruction methods (`k.mbarrier_init`, `k.cp_async_bulk_tensor`, `k.add`, ... one per PTX instruction, named
after its mnemonic with dots as underscores) are listed with their PTX syntax, qualifiers and floors in
[isa.md](isa.md); this page has everything else. In the signatures, `k` is a `KernelBuilder`.
"""


def resolve(path: str):
    """The object at a dotted path: the longest importable module prefix, then attributes (a property is
    returned as the property)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for j, name in enumerate(parts[i:], i):
            owner = obj
            obj = inspect.getattr_static(owner, name) if inspect.isclass(owner) else getattr(owner, name)
            if isinstance(obj, (classmethod, staticmethod)):
                obj = getattr(owner, name)
        return obj
    raise ModuleNotFoundError(path)


def _default(v) -> str:
    if repr(v) == "<factory>":                  # a dataclass field's default_factory
        return "..."
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0x10000:
        return hex(v)
    return repr(v) if not hasattr(v, "name") or isinstance(v, (str, type)) else str(v.name)


def signature(obj, shown: str) -> str:
    """`name(a, b=1, *, c=None)`: parameters and defaults, without annotations or `self`."""
    if isinstance(obj, property):
        return shown
    target = obj.__init__ if inspect.isclass(obj) and "__init__" in vars(obj) else obj
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return shown
    parts, star_done = [], False
    params = list(sig.parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    for p in params:
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star_done = True
        elif p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        elif p.default is p.empty:
            parts.append(p.name)
        else:
            parts.append(f"{p.name}={_default(p.default)}")
        if p.kind is p.POSITIONAL_ONLY and (p is params[-1] or params[params.index(p) + 1].kind is not p.kind):
            parts.append("/")
    name = shown[:-2] if shown.endswith("()") else shown
    return f"{name}({', '.join(parts)})"


def doc_of(obj) -> str:
    """The object's own docstring (none inherited), cleaned; an error class also names its base."""
    own = (obj.fget if isinstance(obj, property) else obj).__doc__
    doc = inspect.cleandoc(own) if own else ""
    if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__bases__[0] is not Exception:
        doc = f"{doc}\n\nA `{obj.__bases__[0].__name__}`.".strip()
    return doc


def render() -> str:
    """The whole page."""
    out = [HEADER]
    out.append("- " + "\n- ".join(f"[{title}](#{_slug(title)})" for title, _, _ in SECTIONS) + "\n")
    for title, intro, items in SECTIONS:
        out.append(f"## {title}\n")
        if intro:
            out.append(f"{intro}\n")
        for path, shown in items:
            obj = resolve(path)
            out.append(f"### `{signature(obj, shown)}`\n")
            doc = doc_of(obj)
            if doc:
                out.append(f"{doc}\n")
    return "\n".join(out)


def _slug(title: str) -> str:
    return "".join(c for c in title.lower() if c.isalnum() or c in " -").replace(" ", "-")


if __name__ == "__main__":
    sys.stdout.write(render())
