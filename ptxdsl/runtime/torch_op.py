"""A ptxdsl kernel as a torch operator (torch.library.custom_op), so torch code, torch.compile and CUDA graphs
call it like any other op. torch is imported here only, by whoever calls torch_op.

    copy = ptxdsl.torch_op(prog["tile_copy"], "mylib::tile_copy", mutates_args=("dst",),
                           grid=lambda src, dst: (dst.shape[1] // 64, dst.shape[0] // 64), block=128)
    copy(src, dst)                        # or torch.ops.mylib.tile_copy(src, dst)

The operator's arguments are the kernel's parameters, in order and by name: a pointer parameter takes a
tensor, a tensor-map parameter takes a tensor and builds the map over it (with the box and options the kernel
declared in param_tensormap(name, spec), or `maps={name: (box, options)}`), an integer parameter an int and a
float one a float. The operator returns nothing: the kernel writes into the tensors named in mutates_args. It
launches on torch's current stream of the kernel's device.
"""
from __future__ import annotations

import re

from ..errors import LaunchError, SourceLoc
from ..tensormap import TensorMapSpec
from ..watchdog import PARAM as DEBUG_PARAM

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _schema_type(p) -> str:
    if p.kind in ("ptr", "tensormap"):
        return "Tensor"
    if p.type is not None and p.type.kind == "f":
        return "float"
    return "int"


def _declared_map(p, maps: dict):
    """(box in numpy order, options) of tensor-map parameter p: from `maps`, else from the spec it was declared
    with; None when neither says."""
    if p.name in maps:
        entry = maps[p.name]
        if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], dict):
            return tuple(entry[0]), dict(entry[1])
        return tuple(entry), {}
    spec = getattr(p, "tmap", None)
    if spec is None:
        return None
    options = {"swizzle": spec.swizzle, "interleave": spec.interleave, "l2_promotion": spec.l2_promotion,
               "oob_fill": spec.oob_fill}
    if spec.element_strides:
        options["element_strides"] = tuple(reversed(spec.element_strides))
    return tuple(reversed(spec.box)), options


def torch_op(launcher, name: str, *, mutates_args=(), grid, block, shared_bytes=None, cluster=None, maps=None):
    """Register `launcher` (a `prog["k"]`) as the torch custom operator `name` ("namespace::op") and return it.

    grid, block, shared_bytes, cluster: values, or callables that take the operator's arguments. mutates_args:
    the names of the tensor parameters the kernel writes. maps: {tensor-map parameter: box (numpy order) or
    (box, TensorMapSpec.from_array options)} for maps the kernel did not declare with a spec."""
    import torch

    loc = SourceLoc.caller()
    params = [p for p in launcher.info.params if p.name != DEBUG_PARAM]
    names = [p.name for p in params]
    maps = dict(maps or {})
    mutates = tuple(mutates_args)

    def refuse(text, rule):
        return LaunchError(f"torch_op({name!r}): {text}", loc, rule=f"torch-op.{rule}")

    for n in names:
        if not _SCHEMA_NAME.match(n):
            raise refuse(f"parameter {n!r} breaks 'an operator argument is a Python identifier'", "name")
    tensors = {p.name for p in params if p.kind in ("ptr", "tensormap")}
    for n in mutates:
        if n not in tensors:
            raise refuse(f"mutates_args entry {n!r} breaks 'mutates_args names tensor parameters of kernel "
                         f"{launcher.info.name!r} ({', '.join(sorted(tensors)) or 'none'})'", "mutates")
    boxes = {}
    for p in params:
        if p.kind == "tensormap":
            boxes[p.name] = _declared_map(p, maps)
            if boxes[p.name] is None:
                raise refuse(f"tensor-map parameter {p.name!r} breaks 'a map's box comes from the spec the kernel "
                             f"declared (param_tensormap(name, spec)) or from maps={{{p.name!r}: box}}'", "map")
    aliases = iter("abcdefghijklmnopqrstuvwxyz")
    args = []
    for p in params:
        t = _schema_type(p)
        if p.name in mutates:
            t = f"Tensor({next(aliases)}!)"
        args.append(f"{t} {p.name}")
    schema = f"({', '.join(args)}) -> ()"

    def resolve(v, values):
        return v(*values) if callable(v) else v

    cache: dict = {}
    ordinal = launcher.device.ordinal

    def tensor_map(pname, t):
        key = (pname, t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)
        spec = cache.get(key)
        if spec is None:
            box, options = boxes[pname]
            spec = cache[key] = TensorMapSpec.from_array(t, box, **options)
            if len(cache) > 64:
                del cache[next(iter(cache))]
        return spec

    from .stream import torch_current

    def impl(*values):
        packed = [tensor_map(p.name, v) if p.kind == "tensormap" else v for p, v in zip(params, values)]
        launcher(*packed, grid=resolve(grid, values), block=resolve(block, values),
                 shared_bytes=resolve(shared_bytes, values), cluster=resolve(cluster, values),
                 stream=torch_current(ordinal))

    impl.__name__ = launcher.info.name
    op = torch.library.custom_op(name, impl, mutates_args=mutates, device_types="cuda", schema=schema)
    op.register_fake(lambda *values: None)
    return op
