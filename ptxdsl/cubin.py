"""What a device loads for an emitted PTX module: nvJitLink's cubin for the device's arch (from the on-disk
cache when it was made before), or, where nvJitLink cannot serve, the PTX for the driver's JIT and the reason.

Knows nothing of the driver: the device's compute capability and the driver's CUDA version come in as numbers,
so the choice is made (and tested) without a GPU.
"""
from __future__ import annotations

from .errors import AssembleError, TargetError
from . import log

ARCH_SPECIFIC_FROM = (9, 0)          # sm_90a, sm_100a, sm_103a, sm_110a, sm_120a, sm_121a


class Image:
    """The choice for one PTX module: `assembled` (nvJitLink's cubin and report) and `jit_reason`, empty when
    the cubin is what the device loads, else why the driver JIT compiles the PTX instead. (A plain class: this
    module is imported by every first compile, and a dataclass costs a millisecond to make.)"""

    __slots__ = ("arch", "assembled", "jit_reason")

    def __init__(self, arch: str, assembled=None, jit_reason: str = ""):
        self.arch = arch
        self.assembled = assembled     # ptxdsl.assembler.Assembled, or None when nvJitLink was not used
        self.jit_reason = jit_reason

    def __repr__(self) -> str:
        return f"Image({self.arch!r}, {self.assembled!r}, {self.jit_reason!r})"

    @property
    def cubin(self) -> bytes | None:
        """The cubin to load, None when the PTX goes to the driver JIT."""
        return None if self.jit_reason or self.assembled is None else self.assembled.cubin


def device_arch(cc: tuple[int, int], target: str) -> str:
    """The -arch nvJitLink assembles for on a device of compute capability `cc`: the arch-specific variant
    (sm_90a, sm_100a ...) from 9.0 on, since the cubin runs only on this device anyway and the `a` variant
    accepts PTX for the plain target too. TargetError when PTX for `target` cannot run on such a device."""
    n = cc[0] * 10 + cc[1]
    m = _sm(target)
    if m is not None:
        t, suffix = m
        fits = {"a": n == t, "f": n // 10 == t // 10 and n >= t, "": n >= t}[suffix]
        if not fits:
            needs = {"a": f"compute capability {t // 10}.{t % 10} exactly",
                     "f": f"a {t // 10}.x device of compute capability {t // 10}.{t % 10} or later",
                     "": f"compute capability {t // 10}.{t % 10} or later"}[suffix]
            raise TargetError(f".target {target} breaks 'the kernel runs on this device': PTX for {target} runs on "
                              f"{needs}, and this device is {cc[0]}.{cc[1]} (sm_{n}); build the kernel for "
                              f"sm_{n}{'a' if cc >= ARCH_SPECIFIC_FROM else ''} or run it on such a device",
                              rule="target.device")
    return f"sm_{n}a" if cc >= ARCH_SPECIFIC_FROM else f"sm_{n}"


def _sm(target: str):
    """(90, 'a') for 'sm_90a'; None for what is not sm_<number>, optionally followed by a or f."""
    digits = target[3:].rstrip("af")
    suffix = target[3 + len(digits):]
    return (int(digits), suffix) if target.startswith("sm_") and digits.isdigit() and len(suffix) <= 1 else None


def nvjitlink_unusable(driver: tuple[int, int]) -> str:
    """Why the driver cannot load nvJitLink's cubins ('' when it can): a cubin from a newer major CUDA release
    than the driver's needs a newer driver (minor releases are compatible within a major one)."""
    from .assembler import nvjitlink_release

    release = nvjitlink_release()
    major = int(release.split(".")[0])
    if major > driver[0]:
        return (f"nvJitLink {release} is newer than the driver's CUDA {driver[0]}.{driver[1]}: its cubins need a "
                f"CUDA {major} driver")
    return ""


def prepare(ptx, arch: str, *, driver: tuple[int, int], line_info: bool = False) -> Image:
    """nvJitLink's cubin of `ptx` (an emitted PTX) for `arch`, through the cache; or the reason the driver JIT
    must compile the PTX: nvJitLink newer than the driver, nvJitLink refusing the arch, or setmaxnreg (which
    nvJitLink's relocatable compile drops). ptxas errors in the PTX itself raise AssembleError."""
    from .assembler import assemble

    reason = nvjitlink_unusable(driver)
    if reason:
        return _jit(arch, None, reason)
    options = ["-lineinfo"] if line_info else []
    try:
        asm = assemble(ptx, arch, options=options, cache=True)
    except AssembleError as e:
        if e.rule != "nvJitLink":           # ptxas refused the PTX: the driver's ptxas would too
            raise
        return _jit(arch, None, f"nvJitLink cannot target {arch}: {e.message}")
    for note in asm.notes(ptx):
        log.warning("%s", note)
    if asm.setmaxnreg_dropped:
        return _jit(arch, asm, "nvJitLink compiles PTX as relocatable code, which drops setmaxnreg (ptxas info "
                               "C7504); the driver JIT's whole-program compile keeps it")
    misaligned = misaligned_dynamic_shared(asm.cubin, ptx)
    if misaligned:
        return _jit(arch, asm, misaligned)
    return Image(arch, asm)


def misaligned_dynamic_shared(cubin: bytes, ptx) -> str:
    """Why the cubin would start a kernel's dynamic shared memory off the alignment its `.extern .shared .align`
    declares ('' when none would). The dynamic window starts where the kernel's `.nv.shared.<name>` section (the
    reserved kilobyte and the static buffers) ends; nvJitLink 13.0 leaves that section at a 16-byte alignment
    (0x410 bytes for a kernel with 16 bytes of mbarriers), so a 128B-swizzled TMA box into a 1024-aligned
    buffer faults with a misaligned address, while nvJitLink 13.5 pads it to the declared alignment."""
    ends = None
    for name, info in ptx.kernels.items():
        align = info.dynamic_shared_align
        if align <= 16 or not info.dynamic_shared_bytes:
            continue
        if ends is None:
            ends = shared_section_sizes(cubin)
        end = ends.get(name, 0)
        if end % align:
            from .assembler import nvjitlink_release

            return (f"nvJitLink {nvjitlink_release()}'s cubin starts the dynamic shared memory of kernel {name!r} at "
                    f"byte {end:#x}, off the {align}-byte alignment the kernel declares (the driver JIT honours it)")
    return ""


def shared_section_sizes(cubin: bytes) -> dict[str, int]:
    """{kernel: the size of its .nv.shared.<kernel> section} in a cubin (an ELF64 image; section headers read
    directly: e_shoff at 0x28, e_shentsize/e_shnum/e_shstrndx at 0x3a/0x3c/0x3e; sh_name at +0, sh_offset at +24,
    sh_size at +32 of each 64-byte header)."""
    import struct

    if len(cubin) < 64 or cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return {}
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    entsize, count, strndx = struct.unpack_from("<HHH", cubin, 0x3A)
    if entsize < 40 or shoff + count * entsize > len(cubin) or strndx >= count:
        return {}
    headers = [struct.unpack_from("<I4xQQQQ", cubin, shoff + i * entsize) for i in range(count)]
    names_at = headers[strndx][3]
    prefix = b".nv.shared."
    out = {}
    for name_off, _flags, _addr, _offset, size in headers:
        start = names_at + name_off
        end = cubin.find(b"\0", start)
        if end > start and cubin.startswith(prefix, start):
            out[cubin[start + len(prefix):end].decode(errors="replace")] = size
    return out


def _jit(arch: str, asm, reason: str) -> Image:
    log.info("loading the PTX through the driver JIT, not nvJitLink's cubin: %s", reason)
    return Image(arch, asm, reason)
