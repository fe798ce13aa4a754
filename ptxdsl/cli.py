"""`ptxdsl emit|check|run FILE...`: print, verify/assemble, or run the kernels a file defines.

A .py file defines kernels at module level (builders, Kernel or Module objects); a .ptxd file is
parsed by ptxdsl.lang. `run` also calls the file's `run(device=None, kernel=None)` host check when a
GPU is present (for FILE.ptxd, the `run` of the sibling FILE.py, given the .ptxd kernel).
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import time
import traceback
from pathlib import Path

from .builder import KernelBuilder
from .emit import emit
from .errors import PtxdslError
from .ir import Kernel, Module


class FileError(PtxdslError):
    """A file the command line cannot read as kernels."""


def load_kernels(path: str, *, verify: bool = True) -> tuple[list[Kernel], dict]:
    """The kernels a .py or .ptxd file defines, in definition order, and the .py file's namespace. With
    verify=False the kernels are built without the verifier raising (PTXDSL_VERIFY=0 while a .py file runs),
    so that `check` can list every finding."""
    p = Path(path)
    if not path:
        raise FileError("an empty file name was given")
    if not p.exists():
        raise FileError(f"{path}: no such file")
    if p.is_dir():
        raise FileError(f"{path}: is a directory; give a .py or .ptxd file")
    if p.suffix not in (".py", ".ptxd"):
        raise FileError(f"{path}: not a .py or .ptxd file")
    if p.suffix == ".ptxd":
        from .lang import loads

        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise FileError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
        return [_as_kernel(k) for k in loads(text, str(p), verify=verify)], {}
    ns = _run_file(p, verify)
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


def _run_file(p: Path, verify: bool) -> dict:
    """Run a .py file as a module; its own errors and exits become a FileError naming the file's line."""
    saved = os.environ.get("PTXDSL_VERIFY")
    if not verify:
        os.environ["PTXDSL_VERIFY"] = "0"
    sys.path.insert(0, str(p.resolve().parent))
    try:
        return runpy.run_path(str(p), run_name=f"ptxdsl_file_{p.stem}")
    except PtxdslError:
        raise
    except SystemExit as e:
        raise FileError(f"{p}: the file called sys.exit({e.code!r}) while it was loaded") from None
    except SyntaxError as e:
        raise FileError(f"{e.filename or p}:{e.lineno}: {e.msg}") from None
    except Exception as e:                    # the user's own code failed
        frame = next((f for f in reversed(traceback.extract_tb(e.__traceback__)) if f.filename == str(p)), None)
        where = f"{p}:{frame.lineno}" if frame else str(p)
        raise FileError(f"{where}: {type(e).__name__}: {e}") from None
    finally:
        sys.path.pop(0)
        if not verify:
            if saved is None:
                os.environ.pop("PTXDSL_VERIFY", None)
            else:
                os.environ["PTXDSL_VERIFY"] = saved


def _kernels_of(path, args, *, verify=True):
    """The selected kernels of a file; FileError when it defines none."""
    kernels, ns = load_kernels(path, verify=verify)
    if not kernels:
        raise FileError(f"{path}: defines no kernels")
    return _select(kernels, args.kernel), ns


def _as_kernel(obj) -> Kernel:
    return obj.finish() if isinstance(obj, KernelBuilder) else obj


def _select(kernels, name):
    if name is None:
        return kernels
    chosen = [k for k in kernels if k.name == name]
    if not chosen:
        raise FileError(f"no kernel {name!r}; the file defines {', '.join(k.name for k in kernels)}")
    return chosen


def _module_of(kernels, args) -> Module:
    return Module(kernels, args.arch, args.ptx)


def _asm_arch(args) -> str:
    return args.arch or "sm_90a"


def cmd_emit(args) -> int:
    failed = 0
    for path in args.files:
        try:
            kernels, _ = _kernels_of(path, args)
            ptx = emit(_module_of(kernels, args), source_comments=args.source_comments, line_info=args.line_info)
            for k in kernels:
                _warn(k)
            sys.stdout.write(ptx.text)
            if args.check:
                from .assembler import assemble

                print(assemble(ptx.text, _asm_arch(args), origins=ptx.origins).report(), file=sys.stderr)
        except PtxdslError as e:
            _error(e)
            failed += 1
    return 2 if failed else 0


def _warn(k) -> None:
    """The verifier's warnings on stderr (its errors have already stopped the build)."""
    from . import verify

    warnings = [d for d in verify.check(k) if d.severity == "warning"]
    if warnings:
        print(verify.format_diagnostics(warnings), file=sys.stderr)


def _error(e: PtxdslError) -> None:
    print(f"ptxdsl: error: {e}", file=sys.stderr)


def cmd_check(args) -> int:
    from . import verify
    from .assembler import assemble

    failed = 0
    for path in args.files:
        try:
            kernels, _ = _kernels_of(path, args, verify=False)
            diags = [d for k in kernels for d in verify.check(k)]
            if diags:
                print(verify.format_diagnostics(diags))
            if any(d.severity == "error" for d in diags):
                failed += 1
                continue
            ptx = emit(_module_of(kernels, args))
            res = assemble(ptx.text, _asm_arch(args), origins=ptx.origins)
            print(f"{path}: {len(kernels)} kernel(s), PTX {ptx.target.version} {ptx.target.arch}; assembled for "
                  f"{_asm_arch(args)}:")
            print(res.report())
        except PtxdslError as e:
            _error(e)
            failed += 1
    return 1 if failed else 0


def cmd_run(args) -> int:
    from .assembler import assemble
    from .runtime.driver import driver_available, unavailable_reason

    gpu = driver_available()
    bad = 0
    for path in args.files:
        try:
            kernels, ns = _kernels_of(path, args)
            ptx = emit(_module_of(kernels, args))
            t0 = time.perf_counter()
            assemble(ptx.text, _asm_arch(args), origins=ptx.origins)
        except PtxdslError as e:
            _error(e)
            bad += 1
            continue
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
        try:
            ok, verdict = host(**kw)
        except PtxdslError as e:                # a launch or tensor-map error in the host check
            _error(e)
            bad += 1
            continue
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
        _error(e)
        return 2


if __name__ == "__main__":
    sys.exit(main())
