"""`ptxdsl emit|check|run|sass FILE...`, `ptxdsl docs [TOPIC]`, `ptxdsl examples [NAME]`, `ptxdsl cache
[info|clear]`: print, verify/assemble, run or disassemble the kernels a file defines; print the installed
documentation; print or copy an example; show or empty the cache.

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
            cubin = None
            if args.resources:
                from .assembler import assemble

                res = assemble(ptx.text, _asm_arch(args), origins=ptx.origins)
                cubin = res.cubin
                print(res.report(), file=sys.stderr)
            _dump(ptx, cubin)
        except PtxdslError as e:
            _error(e)
            failed += 1
    return 1 if failed else 0


def _dump(ptx, cubin) -> None:
    """PTXDSL_DUMP_DIR: the PTX (and the cubin and its SASS, where the command assembled) written there."""
    from .dump import dump, dump_dir

    if dump_dir() is not None:
        paths = dump(ptx, cubin)
        print(f"ptxdsl: dumped {', '.join(str(p) for p in paths)}", file=sys.stderr)


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
            kernels, ns = _kernels_of(path, args, verify=False)
            diags = [d for k in kernels for d in verify.check(k)]
            if diags:
                print(verify.format_diagnostics(diags))
            if any(d.severity == "error" for d in diags):
                failed += 1
                continue
            ptx = emit(_module_of(kernels, args))
            res = assemble(ptx, _asm_arch(args), strict=True if args.strict else None)
            _dump(ptx, res.cubin)
            print(f"{path}: {len(kernels)} kernel(s), PTX {ptx.target.version} {ptx.target.arch}; assembled for "
                  f"{_asm_arch(args)}:")
            print(res.report())
            for note in res.notes(ptx):             # ptxas serialised a wgmma pipeline: a warning, per line
                print(note)
            if not _launch_checks(path, kernels, ns, args):
                failed += 1
        except PtxdslError as e:
            _error(e)
            failed += 1
    return 1 if failed else 0


def _launch_checks(path, kernels, ns, args) -> bool:
    """The launch checks of each kernel: with the command line's launch (--launch, --grid, --block) where given,
    else with the launches the file declares (its `launches()`, or the .py beside a .ptxd file), else with what
    is known without a launch (the declared maps, the .reqntid), naming each check that could not run and what
    it needs. Prints what it checked; False when a check is broken."""
    from .verify import launch_plan

    cli = args.launch is not None or args.grid is not None or args.block is not None
    declared = {} if cli else _declared_launches(path, ns, kernels)
    extra = [declared[key][0] for key in declared if key not in {id(k) for k in kernels}]
    ok = True
    for k in kernels + extra:
        checks = launch_plan(k).checks
        mine = declared.get(id(k), (k, []))[1]
        if not checks:
            print(f"{k.name}: no launch checks: nothing the verifier checks depends on a launch's values")
            continue
        if cli:
            values, grid, block = _command_line_launch(k, args, ns)
            ok &= _show(path, k, _explain(k, values, grid, block), _shown(k, values, grid, block))
        elif mine:
            print(f"{k.name}{'' if k in kernels else ' (made by launches())'}: {len(checks)} launch check(s), with "
                  f"the {len(mine)} launch(es) the file declares:")
            for launch in mine:
                ok &= _show(path, k, launch.explain(k), launch.describe(k), indent="  ")
        else:
            ok &= _show(path, k, _explain(k, (None,) * len(launch_plan(k).params), None, None), None)
    return ok


def _explain(k, values, grid, block):
    from .verify import explain_launch

    return explain_launch(k, values, grid=grid, block=block)


def _show(path, k, outcomes, launch, indent="") -> bool:
    """Print one launch's outcomes: a broken check as `file:line: rule: message (see ...)`, the checks that did not
    run with what each needs, a run of the threads cut short or not followed; False when one is broken."""
    from .verify import format_diagnostics
    from .verify.rules import RULES, Diagnostic

    broken = [o for o in outcomes if o.verdict == "broken"]
    held = [o for o in outcomes if o.verdict == "holds"]
    not_run = [o for o in outcomes if o.verdict == "not run"]
    partial = [o for o in outcomes if o.verdict in ("cut short", "not followed")]
    head = f"{indent}{launch}: " if indent else f"{k.name}: " + (f"{launch}: " if launch else "")
    summary = [f"{len(held)} of {len(outcomes)} launch check(s) hold"]
    if broken:
        summary.insert(0, f"{len(broken)} broken")
    if partial:
        summary.append(f"{len(partial)} not concluded")
    if not_run:
        summary.append(f"{len(not_run)} not run" + ("" if launch else " without a launch's values"))
    print(head + ", ".join(summary))
    for o in broken:
        doc = RULES[o.rule].doc if o.rule in RULES else f"`ptxdsl docs {o.rule}`"
        text = f"kernel {k.name!r}{f' launched with {launch}' if launch else ''}: {o.message} (see {doc})"
        print(indent + format_diagnostics([Diagnostic(o.rule, text, o.loc, "error")]))
    for o in partial:
        print(f"{indent}  {o.what}: {o.verdict}: {o.message}")
    for o in not_run:
        where = f" at {_where(o.loc)}" if o.loc is not None and o.what == o.rule else ""
        print(f"{indent}  not run: {o.what}{where} needs {_needs(k, o.needs)}")
    if not_run and not launch:
        print(f"{indent}  (declare the launches the file is meant for in a module-level launches(), or give one with "
              f"--launch NAME=VALUE,... --grid X[,Y,Z]: see `ptxdsl docs declared-launches`)")
    return not broken


def _where(loc) -> str:
    from .verify import _path

    return f"{_path(loc.file)}:{loc.line}"


def _needs(k, names) -> str:
    """What a check needs, as the command line gives it."""
    kinds = {p.name: p.kind for p in k.params}
    parts = []
    for n in names:
        kind = kinds.get(n)
        if n == "grid":
            parts.append("the grid (--grid X[,Y,Z])")
        elif n == "block":
            parts.append("the block (--block X[,Y,Z]; the kernel declares no .reqntid)")
        elif kind == "ptr":
            parts.append(f"the table {n} points at (--launch {n}=FILE.npy, or a Python expression giving a numpy "
                         f"array)")
        elif kind == "tensormap":
            parts.append(f"the map {n} (--launch '{n}=px.TensorMapSpec...': it has no declared spec)")
        else:
            parts.append(f"{n} (--launch {n}=VALUE)")
    return ", ".join(parts)


def _shown(k, values, grid, block) -> str:
    from .verify import launch_plan

    params = launch_plan(k).params
    parts = [f"{p.name}={v}" for p, v in zip(params, values) if p.kind == "scalar" and v is not None]
    parts += [f"{p.name}=<table>" for p, v in zip(params, values) if p.kind == "ptr" and v is not None]
    if grid is not None:
        parts.append(f"grid={grid}")
    if block is not None:
        parts.append(f"block={block}")
    return "--launch " + (", ".join(parts) if parts else "(no values)")


def _declared_launches(path, ns, kernels) -> dict:
    """{id(kernel): (kernel, [Launch, ...])} from the file's `launches()` (a .ptxd file: the .py file's beside it,
    its launches matched to the .ptxd kernels by name). A launch of a kernel the file does not define at module
    level (one launches() builds) is checked on that kernel."""
    from .verify import Launch

    p = Path(path)
    fn = ns.get("launches")
    if fn is None and p.suffix == ".ptxd" and p.with_suffix(".py").exists():
        fn = load_kernels(str(p.with_suffix(".py")))[1].get("launches")
    if fn is None:
        return {}
    if not callable(fn):
        raise FileError(f"{path}: launches is {type(fn).__name__}, expected a function returning px.Launch "
                        f"descriptions")
    try:
        got = list(fn())
    except PtxdslError:
        raise
    except Exception as e:
        raise FileError(f"{path}: launches() raised {type(e).__name__}: {e}") from None
    by_name = {k.name: k for k in kernels}
    by_id = {id(k): k for k in kernels}
    out: dict = {}
    for launch in got:
        if not isinstance(launch, Launch):
            raise FileError(f"{path}: launches() returned {launch!r}, expected px.Launch(kernel, args, grid=...)")
        own = None if isinstance(launch.kernel, str) else _as_kernel(launch.kernel)
        if p.suffix == ".ptxd" or own is None:
            k = by_name.get(launch.name)    # a .ptxd file's kernel of that name (none: a kernel it does not define)
        else:
            k = by_id.get(id(own), own)     # the file's kernel, or one launches() made
        if k is not None:
            out.setdefault(id(k), (k, []))[1].append(launch)
        else:
            print(f"{path}: launches() names kernel {launch.name!r}, which the file does not define (it defines "
                  f"{', '.join(by_name) or 'none'}): that launch is not checked")
    return out


def _command_line_launch(k, args, ns):
    """The launch --launch, --grid and --block give: (values in parameter order, None where not given; grid or
    None; block or None)."""
    from .verify import launch_plan

    params = launch_plan(k).params
    given = _parse_launch(args.launch or [], ns)
    names = {p.name for p in params}
    unknown = [n for n in given if n not in names]
    if unknown and len(args.files) == 1 and args.kernel is not None:
        raise FileError(f"--launch {unknown[0]}: kernel {k.name!r} has no parameter {unknown[0]!r} (it has "
                        f"{', '.join(names) or 'none'})")
    values = []
    for p in params:
        v = given.get(p.name)
        if v is not None and p.kind == "scalar" and isinstance(v, float) and p.type.name[0] not in "fb":
            raise FileError(f"--launch {p.name}={v}: {p.name} is a {p.type.name} parameter: give an integer")
        values.append(v)
    block = _dims(args.block, "--block") if args.block else None
    grid = _dims(args.grid, "--grid") if args.grid else (1, 1, 1)
    return tuple(values), grid, block


def _parse_launch(items, ns) -> dict:
    """NAME=VALUE items (each --launch, split at its top-level commas): an integer, a float, a .npy file (a table
    for a pointer) or a Python expression (numpy as np, ptxdsl as px and the file's names in scope)."""
    given = {}
    for text in items:
        for item in _split_top(text):
            name, sep, value = item.partition("=")
            name, value = name.strip(), value.strip()
            if not sep or not name.isidentifier() or not value:
                raise FileError(f"--launch {item!r}: expected NAME=VALUE (an integer, a float, a .npy file or a "
                                f"Python expression)")
            given[name] = _launch_value(name, value, ns)
    return given


def _launch_value(name, value, ns):
    for conv in (lambda v: int(v, 0), float):
        try:
            return conv(value)
        except ValueError:
            pass
    if value.endswith(".npy"):
        import numpy as np

        try:
            return np.load(value, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise FileError(f"--launch {name}={value}: cannot read it as a .npy table: {e}") from None
    import numpy as np

    import ptxdsl as px

    scope = {"np": np, "px": px, **ns}
    try:
        return eval(value, scope)               # the user's own expression, as a Python file of theirs would be
    except Exception as e:
        raise FileError(f"--launch {name}={value}: not an integer, a float, a .npy file or a Python expression that "
                        f"evaluates ({type(e).__name__}: {e})") from None


def _split_top(text: str) -> list:
    """`text` split at the commas outside brackets and quotes."""
    out, depth, quote, cur = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        cur += ch
    out.append(cur)
    return [x for x in (y.strip() for y in out) if x]


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

    cpu = getattr(args, "cpu", False)
    gpu = not args.emit_only and (cpu or driver_available())
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
            if cpu:                             # the interpreter is the device: px.compile and DeviceArray use it
                from .interpret import CPU

                with CPU:
                    ok, verdict = host(**kw)
            else:
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
    where = "on the CPU interpreter" if getattr(args, "cpu", False) else "on the GPU"
    text = f"ptxdsl run: {passed} passed {where}, {failed} failed, {not_run} not run"
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

            _dump(ptx, res.cubin)
            text = sass.disassemble(res.cubin, ptx=ptx)
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        except PtxdslError as e:
            _error(e)
            failed += 1
    return 1 if failed else 0


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


def cmd_examples(args) -> int:
    """`ptxdsl examples`: the examples' names; `ptxdsl examples NAME`: its text; `--copy DIR`: the file and the
    example modules it imports, copied into DIR."""
    from . import exampleset

    if args.name is None:
        print(f"examples in {exampleset.examples_dir()}:")
        for name in exampleset.names():
            print(f"  {name}")
        print("`ptxdsl examples NAME` prints one, `ptxdsl examples NAME --copy DIR` copies it (with the modules it "
              "imports) into DIR")
        return 0
    if args.copy:
        for p in exampleset.copy(args.name, args.copy):
            print(p)
        return 0
    sys.stdout.write(exampleset.path(args.name).read_text(encoding="utf-8"))
    return 0


def cmd_cache(args) -> int:
    """`ptxdsl cache [info]`: where the cache is, its cap and what it holds; `ptxdsl cache clear` empties it."""
    from . import cache

    if args.action == "clear":
        before = cache.info()
        cache.clear()
        n = sum(c for c, _ in before["kinds"].values())
        print(f"removed {before['dir']} ({n} file(s), {sum(b for _, b in before['kinds'].values())} bytes)")
        return 0
    got = cache.info()
    state = "on" if got["enabled"] else "off (PTXDSL_CACHE)"
    print(f"cache: {got['dir']} ({state}; each kind kept under {got['max_bytes'] >> 20} MiB: PTXDSL_CACHE_MAX_MB)")
    if not got["kinds"]:
        print("  empty")
    for kind, (count, size) in got["kinds"].items():
        print(f"  {kind}: {count} file(s), {size} bytes")
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
    ap = argparse.ArgumentParser(prog="ptxdsl", description="Print, verify and assemble, run or disassemble the "
                                 "kernels a .py or .ptxd file defines; print the installed documentation.",
                                 epilog="`ptxdsl COMMAND --help` describes a command; `ptxdsl docs` lists the pages.")
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
            p.add_argument("--launch", metavar="NAME=VALUE,...", action="append",
                           help="run the launch checks with this launch's arguments instead of the file's "
                           "launches(): integers, floats, a .npy file or a Python expression (a table for a pointer, "
                           "a TensorMapSpec for a map); maps not given keep their declared specs")
            p.add_argument("--grid", metavar="X[,Y,Z]", help="the launch's grid for --launch (default 1)")
            p.add_argument("--block", metavar="X[,Y,Z]", help="the launch's block for --launch (default .reqntid)")
            p.add_argument("--strict", action="store_true",
                           help="fail when ptxas serialises a wgmma pipeline (its C75xx notes), as a kernel made "
                           "with strict=True does")
        if name == "run":
            p.add_argument("--emit-only", action="store_true",
                           help="emit and assemble only; run nothing (exit 0 without a GPU)")
            p.add_argument("--cpu", action="store_true",
                           help="run the host checks on the CPU interpreter (ptxdsl.interpret), no GPU needed")
        p.set_defaults(fn=fn)
    p = sub.add_parser("examples", help="list the examples that ship with ptxdsl, print one, or copy it")
    p.add_argument("name", nargs="?", help="an example (pipe_copy, pipe_copy.py, tma_load_tile.ptxd)")
    p.add_argument("--copy", metavar="DIR", help="copy the example and the example modules it imports into DIR")
    p.set_defaults(fn=cmd_examples)
    p = sub.add_parser("cache", help="show the on-disk cache (info) or empty it (clear)")
    p.add_argument("action", nargs="?", choices=("info", "clear"), default="info")
    p.set_defaults(fn=cmd_cache)
    p = sub.add_parser("docs", help="print the installed documentation: a page, or a verifier rule's section")
    p.add_argument("topic", nargs="?", help="a page (verifier, api, ...), a rule (expect-tx-mismatch) or page#anchor")
    p.add_argument("--path", action="store_true", help="print the file of the page instead of its text")
    p.set_defaults(fn=cmd_docs)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except PtxdslError as e:                    # every command: 1 for an error in what it was given, 2 for usage
        _error(e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
