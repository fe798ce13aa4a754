"""`ptxdsl emit|check|run FILE...`: print, verify/assemble, or run the kernels a file defines.

A .py file defines kernels at module level (builders, Kernel or Module objects); a .ptxd file is
parsed by ptxdsl.lang. `run` also calls the file's `run(device=None, kernel=None)` host check when a
GPU is present (for FILE.ptxd, the `run` of the sibling FILE.py, given the .ptxd kernel).
"""
from __future__ import annotations

import argparse
import runpy
import sys
import time
from pathlib import Path

from .builder import KernelBuilder
from .emit import emit
from .errors import PtxdslError
from .ir import Kernel, Module


def load_kernels(path: str) -> tuple[list[Kernel], dict]:
    """The kernels a .py or .ptxd file defines, in definition order, and the .py file's namespace."""
    p = Path(path)
    if p.suffix == ".ptxd":
        from .lang import load

        return [_as_kernel(k) for k in load(str(p))], {}
    sys.path.insert(0, str(p.resolve().parent))
    try:
        ns = runpy.run_path(str(p), run_name=f"ptxdsl_file_{p.stem}")
    finally:
        sys.path.pop(0)
    kernels, seen = [], set()
    for v in ns.values():
        items = v.kernels if isinstance(v, Module) else [v]
        for item in items:
            if isinstance(item, (KernelBuilder, Kernel)):
                k = _as_kernel(item)
                if id(k) not in seen:
                    seen.add(id(k))
                    kernels.append(k)
    return kernels, ns


def _as_kernel(obj) -> Kernel:
    return obj.finish() if isinstance(obj, KernelBuilder) else obj


def _select(kernels, name):
    if name is None:
        return kernels
    chosen = [k for k in kernels if k.name == name]
    if not chosen:
        raise SystemExit(f"ptxdsl: no kernel {name!r}; the file defines {', '.join(k.name for k in kernels)}")
    return chosen


def _module_of(kernels, args) -> Module:
    return Module(kernels, args.arch, args.ptx)


def _asm_arch(args) -> str:
    return args.arch or "sm_90a"


def cmd_emit(args) -> int:
    for path in args.files:
        kernels = _select(load_kernels(path)[0], args.kernel)
        ptx = emit(_module_of(kernels, args), source_comments=args.source_comments, line_info=args.line_info)
        sys.stdout.write(ptx.text)
        if args.check:
            from .assemble import assemble

            print(assemble(ptx.text, _asm_arch(args), origins=ptx.origins).report(), file=sys.stderr)
    return 0


def cmd_check(args) -> int:
    from . import verify
    from .assemble import assemble

    failed = 0
    for path in args.files:
        with verify.deferred():
            kernels = _select(load_kernels(path)[0], args.kernel)
        diags = [d for k in kernels for d in verify.check(k)]
        if diags:
            print(verify.format_diagnostics(diags))
            failed += sum(1 for d in diags if d.severity == "error")
            if failed:
                continue
        ptx = emit(_module_of(kernels, args))
        res = assemble(ptx.text, _asm_arch(args), origins=ptx.origins)
        print(f"{path}: {len(kernels)} kernel(s), PTX {ptx.target.version} {ptx.target.arch}; assembled for "
              f"{_asm_arch(args)}:")
        print(res.report())
    return 1 if failed else 0


def cmd_run(args) -> int:
    from .assemble import assemble
    from .runtime.driver import driver_available, unavailable_reason

    gpu = driver_available()
    bad = 0
    for path in args.files:
        kernels, ns = load_kernels(path)
        if not kernels:
            print(f"{path}: defines no kernels")
            continue
        ptx = emit(_module_of(kernels, args))
        t0 = time.perf_counter()
        assemble(ptx.text, _asm_arch(args), origins=ptx.origins)
        names = ", ".join(k.name for k in kernels)
        print(f"{path}: emitted {names} (PTX {ptx.target.version} {ptx.target.arch}), assembled for {_asm_arch(args)} "
              f"in {1e3 * (time.perf_counter() - t0):.1f} ms")
        host = _host_check(path, ns)
        if host is None:
            print(f"{path}: no host check (run function) to run")
            continue
        if not gpu:
            print(f"{path}: not run: {unavailable_reason()}")
            continue
        kw = {"kernel": kernels[0]} if Path(path).suffix == ".ptxd" else {}
        ok, verdict = host(**kw)
        print(f"{path}: {'PASS' if ok else 'FAIL'}: {verdict}")
        bad += 0 if ok else 1
    return 1 if bad else 0


def _host_check(path, ns):
    if "run" in ns:
        return ns["run"]
    p = Path(path)
    if p.suffix == ".ptxd" and p.with_suffix(".py").exists():
        return load_kernels(str(p.with_suffix(".py")))[1].get("run")
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="ptxdsl", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, fn, helptext in (("emit", cmd_emit, "print the PTX of the kernels a file defines"),
                               ("check", cmd_check, "verify the kernels and assemble them with nvJitLink"),
                               ("run", cmd_run, "emit, assemble and (on a GPU) run each file's host check")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("files", nargs="+")
        p.add_argument("--arch", help="pin .target to this architecture and assemble for it (default: the "
                       "lowest .target the kernels need, assembled for sm_90a)")
        p.add_argument("--kernel", help="only this kernel")
        p.add_argument("--ptx", help="pin .version (default: the lowest the kernels need)")
        if name == "emit":
            p.add_argument("--check", action="store_true", help="also assemble and print resource usage")
            p.add_argument("--source-comments", action="store_true", help="comment each PTX line with its origin")
            p.add_argument("--line-info", action="store_true",
                           help=".file/.loc directives mapping the code to its source lines (profilers, debuggers)")
        p.set_defaults(fn=fn)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except PtxdslError as e:
        print(f"ptxdsl: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
