"""ptxdsl.gemm on the H200: out = a @ b against an f32 reference (TF32 off), within twice cuBLAS's error on the
same inputs, for every configuration of the table, both layouts of B (K-major: a @ w.T; MN-major: a @ b), and
shapes that are and are not multiples of the tile (TMA zero-fills the loads past the edges and clips the
stores); a Hypothesis run over shapes; the launch on the caller's torch stream."""
from dataclasses import replace

import pytest

from ptxdsl.gemm.config import FAST, SIMPLE, SMALL

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

CONFIGS = {"fast": FAST, "small": SMALL, "simple": SIMPLE}


def rel_error(c, ref):
    return ((c.float() - ref).abs().max() / ref.abs().max()).item()


def check(m, n, k, cfg, major, seed=0):
    import ptxdsl.gemm as pg

    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    ref = a.float() @ w.float().t()
    cublas = rel_error(a @ w.t(), ref)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    pg.matmul(a, w.t() if major == "K" else w.t().contiguous(), out=c, config=replace(cfg, b_major=major))
    torch.cuda.synchronize()
    err = rel_error(c, ref)
    assert not torch.isnan(c).any() and err <= 2 * cublas + 1e-6, (m, n, k, cfg.name, major, err, cublas)
    return err, cublas


@pytest.mark.parametrize("major", ["K", "MN"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("m, n, k", [(128, 256, 64), (1024, 1024, 1024), (389, 520, 200), (2048, 768, 4096)])
def test_matmul_matches_an_f32_reference_within_cublas_error(m, n, k, name, major):
    check(m, n, k, CONFIGS[name], major)


def test_matmul_on_shapes_hypothesis_draws():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    dims = st.integers(1, 96).map(lambda x: 8 * x)

    @settings(max_examples=20, deadline=None, derandomize=True)
    @given(dims, dims, dims, st.sampled_from(sorted(CONFIGS)), st.sampled_from(["K", "MN"]))
    def run(m, n, k, name, major):
        check(m, n, k, CONFIGS[name], major)

    run()


def test_matmul_runs_on_the_callers_stream_and_makes_out():
    import ptxdsl.gemm as pg

    a = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(384, 256, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        c = pg.matmul(a, w.t())
    s.synchronize()
    assert c.shape == (512, 384) and c.dtype == torch.bfloat16
    assert rel_error(c, a.float() @ w.float().t()) < 1e-2


def test_the_relu_and_scale_epilogues():
    import ptxdsl.gemm as pg
    from ptxdsl.gemm.epilogue import relu, scale

    a = torch.randn(640, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(384, 256, device="cuda", dtype=torch.bfloat16)
    ref = a.float() @ w.float().t()
    for fn, want in ((relu, ref.clamp(min=0)), (scale(0.5), 0.5 * ref)):
        c = pg.matmul(a, w.t(), config=SMALL, epilogue=fn)
        torch.cuda.synchronize()
        assert rel_error(c, want) < 1e-2, fn.__name__


class Exported:
    """Any DLPack producer: only __dlpack__ and __dlpack_device__ (here a torch tensor's, behind a plain
    object, so the launcher reads it as DLPack and not as torch)."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, **kw):
        return self._t.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_matmul_takes_dlpack_arrays():
    import ptxdsl.gemm as pg

    a = torch.randn(300, 136, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(136, 200, device="cuda", dtype=torch.bfloat16)
    c = torch.zeros(300, 200, device="cuda", dtype=torch.bfloat16)
    pg.matmul(Exported(a), Exported(b), out=Exported(c), config=SMALL)
    torch.cuda.synchronize()
    assert rel_error(c, a.float() @ b.float()) < 1e-2
