"""ptxdsl.pipeline on the GPU (the pipe_* examples' own host checks run in tests/test_examples.py):

- a ring mistake (half the tile's bytes armed) built with the library is refused by the launcher before the
  driver sees the launch, and the same launch with the right kernel copies bit-exactly;
- `Launcher.shared_bytes_for(n)` caps the CTAs an SM holds at n (the driver's occupancy calculator agrees);
- a persistent grid that laps an 8-stage ring hundreds of times copies a 2048x4096 matrix bit-exactly.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import ptxdsl as px

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from test_pipeline import SPEC, copy_kernel  # noqa: E402

pytestmark = pytest.mark.gpu


def _matrix(rows, cols, seed=3):
    import ml_dtypes

    return np.random.default_rng(seed).standard_normal((rows, cols), dtype=np.float32).astype(ml_dtypes.bfloat16)


def test_a_ring_mistake_is_refused_before_the_launch_and_the_fixed_kernel_copies():
    from ptxdsl.runtime import DeviceArray

    rows, cols = 512, 1024
    a = _matrix(rows, cols)
    src, out = DeviceArray.to_device(a), DeviceArray.to_device(np.zeros_like(a))
    maps = (px.TensorMapSpec.from_array(src, (32, 256)), px.TensorMapSpec.from_array(out, (32, 256)))
    ntiles = rows // 32 * (cols // 256)
    bad = px.compile(copy_kernel("bytes"))
    with pytest.raises(px.LaunchError) as info:
        bad["copy"](*maps, ntiles, cols // 256, grid=4, block=64, sync=True)
    assert info.value.rule == "expect-tx-mismatch"
    good = px.compile(copy_kernel())
    good["copy"](*maps, ntiles, cols // 256, grid=4, block=64, sync=True)
    assert out.to_host().view(np.uint16).tobytes() == a.view(np.uint16).tobytes()


@pytest.mark.parametrize("n", [1, 2, 4, 6])
def test_shared_bytes_for_caps_the_ctas_per_sm(n):
    from cuda.bindings import driver

    import pipe_copy

    launch = px.compile(pipe_copy.KERNEL)["pipe_copy"]
    shared = launch.shared_bytes_for(n)
    assert shared >= launch.shared_bytes
    launch.function.set_max_dynamic_shared(shared)
    err, blocks = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(launch.function.handle, 64, shared)
    assert err == driver.CUresult.CUDA_SUCCESS
    assert blocks == n


def test_a_persistent_grid_laps_the_ring():
    import pipe_copy
    from ptxdsl.runtime import DeviceArray

    rows, cols = 2048, 4096
    a = _matrix(rows, cols, seed=8)
    src, out = DeviceArray.to_device(a), DeviceArray.to_device(np.zeros_like(a))
    box = (256, 32)
    prog = px.compile(pipe_copy.build(box=box, stages=8))
    run = pipe_copy.launcher(prog, rows, cols, box=box, tiles_per_cta=None, ctas_per_sm=None)
    run(px.TensorMapSpec.from_array(src, (32, 256)), px.TensorMapSpec.from_array(out, (32, 256)))
    px.runtime.current_device().synchronize()
    assert out.to_host().view(np.uint16).tobytes() == a.view(np.uint16).tobytes()
