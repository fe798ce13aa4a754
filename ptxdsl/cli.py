"""`ptxdsl emit|check|run|sass FILE...`, `ptxdsl docs [TOPIC]`: print, verify/assemble, run or disassemble the
kernels a file defines; print the installed documentation.

A .py file defines kernels at module level (builders, Kernel or Module objects); a .ptxd file is
parsed by ptxdsl.lang. `run` also calls the file's `run(device=None, kernel=None)` host check on the GPU
(for FILE.ptxd, the `run` of the sibling FILE.py, given the .ptxd kernel); it exits 1 when a check fails or
when nothing ran on a GPU, unless told --emit-only (emit and assemble, run nothing).
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
            if args.resources:
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
            res = assemble(ptx, _asm_arch(args), strict=True if args.strict else None)
            print(f"{path}: {len(kernels)} kernel(s), PTX {ptx.target.version} {ptx.target.arch}; assembled for "
                  f"{_asm_arch(args)}:")
            print(res.report())
            for note in res.notes(ptx):             # ptxas serialised a wgmma pipeline: a warning, per line
                print(note)
            if args.launch is not None or args.grid is not None or args.block is not None:
                for k in kernels:
                    _check_launch(k, args)
        except PtxdslError as e:
            _error(e)
            failed += 1
    return 1 if failed else 0


def _check_launch(k, args) -> None:
    """ptxdsl.verify.check_launch with the command line's launch: --launch gives the scalar parameters
    (name=value,...), maps keep their declared specs, pointers are not read; grid and block default to 1 and to
    the kernel's .reqntid. Prints what it checked; a broken check raises its LaunchError."""
    from .verify import check_launch

    given = {}
    for item in filter(None, (args.launch or "").split(",")):
        name, sep, value = item.partition("=")
        try:
            given[name.strip()] = int(value, 0)
        except ValueError:
            raise FileError(f"--launch {item!r}: expected name=integer") from None
    values = []
    for p in k.params:
        if p.kind == "scalar":
            if p.name not in given:
                raise FileError(f"kernel {k.name!r}: --launch gives no value for its parameter {p.name!r}")
            values.append(given[p.name])
        else:
            values.append(getattr(p, "tmap", None) if p.kind == "tensormap" else 0)
    reqntid = k.directives.get("reqntid")
    block = _dims(args.block, "--block") if args.block else (tuple(reqntid) if reqntid else None)
    if block is None:
        raise FileError(f"kernel {k.name!r} declares no .reqntid: give --block")
    grid = _dims(args.grid, "--grid") if args.grid else (1, 1, 1)
    check_launch(k, tuple(values), grid=grid, block=block)
    shown = ", ".join(f"{n}={v}" for n, v in given.items())
    print(f"{k.name}: launch checks hold for {shown or 'no scalar arguments'}, grid={grid}, block={block}")


def _dims(text: str, what: str) -> tuple:
    try:
        dims = tuple(int(x, 0) for x in text.split(","))
    except ValueError:
        raise FileError(f"{what} {text!r}: expected up to three integers, comma-separated") from None
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise FileError(f"{what} {text!r}: expected up to three positive integers, comma-separated")
    return dims + (1,) * (3 - len(dims))


def cmd_run(args) -> int:
    from .assembler import assemble
    from .runtime.driver import driver_available, unavailable_reason

    gpu = not args.emit_only and driver_available()
    passed = failed = not_run = 0
    for path in args.files:
        try:
            kernels, ns = _kernels_of(path, args)
            ptx = emit(_module_of(kernels, args))
            for k in kernels:
                _warn(k)
            t0 = time.perf_counter()
            assemble(ptx.text, _asm_arch(args), origins=ptx.origins)
        except PtxdslError as e:
            _error(e)
            failed += 1
            continue
        names = ", ".join(k.name for k in kernels)
        print(f"{path}: emitted {names} (PTX {ptx.target.version} {ptx.target.arch}), assembled for {_asm_arch(args)} "
              f"in {1e3 * (time.perf_counter() - t0):.1f} ms")
        if args.emit_only:
            continue
        host = _host_check(path, ns)
        if host is None or not gpu:
            why = "no host check (a run() function) to run" if host is None else unavailable_reason()
            print(f"{path}: not run: {why}")
            not_run += 1
            continue
        kw = {"kernel": kernels[0]} if Path(path).suffix == ".ptxd" else {}
        try:
            ok, verdict = host(**kw)
        except PtxdslError as e:                # a launch or tensor-map error in the host check
            _error(e)
            failed += 1
            continue
        print(f"{path}: {'PASS' if ok else 'FAIL'}: {verdict}")
        passed, failed = passed + ok, failed + (not ok)
    print(_run_summary(args, passed, failed, not_run), file=sys.stderr)
    return 1 if failed or not_run else 0


def _run_summary(args, passed: int, failed: int, not_run: int) -> str:
    """The last line of `ptxdsl run`: what ran on the GPU, what did not, and why the exit status is what it is."""
    if args.emit_only:
        return (f"ptxdsl run: --emit-only: emitted and assembled; nothing ran on a GPU"
                f"{f' ({failed} file(s) failed)' if failed else ''}")
    text = f"ptxdsl run: {passed} passed on the GPU, {failed} failed, {not_run} not run"
    if not_run and not passed and not failed:
        text += " (nothing ran on a GPU; `ptxdsl run --emit-only` only emits and assembles)"
    return text


def _host_check(path, ns):
    if "run" in ns:
        return ns["run"]
    p = Path(path)
    if p.suffix == ".ptxd" and p.with_suffix(".py").exists():
        return load_kernels(str(p.with_suffix(".py")))[1].get("run")
    return None


def cmd_sass(args) -> int:
    """Emit, assemble with nvJitLink and disassemble the cubin (ptxdsl.sass, the `sass` extra's nvdisasm)."""
    from .assembler import assemble

    failed = 0
    for path in args.files:
        try:
            kernels, _ = _kernels_of(path, args)
            ptx = emit(_module_of(kernels, args), line_info=args.line_info)
            res = assemble(ptx, _asm_arch(args), options=("-lineinfo",) if args.line_info else ())
            from . import sass                  # imported here: only this command needs nvdisasm

            text = sass.disassemble(res.cubin, ptx=ptx)
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        except PtxdslError as e:
            _error(e)
            failed += 1
    return 2 if failed else 0


def cmd_docs(args) -> int:
    """Print a documentation page or section from the installed docs (or, with --path, the page's file)."""
    from . import docpages

    if args.topic is None:
        print(f"pages in {docpages.docs_dir()}:")
        for name in docpages.page_names():
            print(f"  {name}")
        print("`ptxdsl docs PAGE` prints a page, `ptxdsl docs RULE` a verifier rule's section "
              "(e.g. `ptxdsl docs expect-tx-mismatch`)")
        return 0
    if args.path:
        print(docpages.page_path(args.topic.partition("#")[0]))
        return 0
    sys.stdout.write(docpages.lookup(args.topic))
    return 0


def version() -> str:
    """The installed distribution's version (importlib.metadata), else the package's own __version__."""
    from importlib import metadata

    try:
        return metadata.version("ptxdsl")
    except metadata.PackageNotFoundError:
        from . import __version__

        return __version__


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="ptxdsl", description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, fn, helptext in (("emit", cmd_emit, "print the PTX of the kernels a file defines"),
                               ("check", cmd_check, "verify the kernels and assemble them with nvJitLink"),
                               ("run", cmd_run, "emit, assemble and run each file's host check on the GPU"),
                               ("sass", cmd_sass, "assemble the kernels and print their SASS (needs ptxdsl[sass])")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("files", nargs="+")
        p.add_argument("--arch", help="pin .target to this architecture and assemble for it (default: the "
                       "lowest .target the kernels need, assembled for sm_90a)")
        p.add_argument("--kernel", help="only this kernel")
        p.add_argument("--ptx", help="pin .version (default: the lowest the kernels need)")
        if name == "emit":
            p.add_argument("--resources", "--check", dest="resources", action="store_true",
                           help="also assemble and print each kernel's resource usage on stderr (--check: the "
                           "same)")
            p.add_argument("--source-comments", action="store_true", help="comment each PTX line with its origin")
        if name in ("emit", "sass"):
            p.add_argument("--line-info", action="store_true",
                           help=".file/.loc directives mapping the code to its source lines (profilers, debuggers"
                           "; `sass` interleaves them)")
        if name == "check":
            p.add_argument("--launch", metavar="NAME=VALUE,...",
                           help="also run the launch checks with these scalar arguments (maps keep their declared "
                           "specs): the run of the CTA's threads with the loop bounds and grid of a real launch")
            p.add_argument("--grid", metavar="X[,Y,Z]", help="the launch's grid for --launch (default 1)")
            p.add_argument("--block", metavar="X[,Y,Z]", help="the launch's block for --launch (default .reqntid)")
            p.add_argument("--strict", action="store_true",
                           help="fail when ptxas serialises a wgmma pipeline (its C75xx notes), as a kernel made "
                           "with strict=True does")
        if name == "run":
            p.add_argument("--emit-only", action="store_true",
                           help="emit and assemble only; run nothing (exit 0 without a GPU)")
        p.set_defaults(fn=fn)
    p = sub.add_parser("docs", help="print the installed documentation: a page, or a verifier rule's section")
    p.add_argument("topic", nargs="?", help="a page (verifier, api, ...), a rule (expect-tx-mismatch) or page#anchor")
    p.add_argument("--path", action="store_true", help="print the file of the page instead of its text")
    p.set_defaults(fn=cmd_docs)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except PtxdslError as e:
        _error(e)
        return 2


if __name__ == "__main__":
    sys.exit(main())
