"""Dtypes a NeuronCore lacks (float64, complex) still compute, and are reported as CPU fallbacks."""
import json
import warnings

import pytest
import torch

import torch_neuronx
from conftest import check_ok, run_python_many


def _entries(report, op_prefix, dtype_name):
    return {k: v for k, v in report.items() if k.startswith(op_prefix) and f"({dtype_name})" in k}


def test_float64_ops_compute_and_are_counted():
    a = torch.randn(5, 6, dtype=torch.float64)
    b = torch.randn(5, 6, dtype=torch.float64)
    na, nb = a.to("neuron"), b.to("neuron")
    torch_neuronx.reset_fallback_report()
    assert torch_neuronx.fallback_report() == {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            s = na + nb
        e = torch.exp(na)
        m = na @ nb.t()
    torch.testing.assert_close(s.cpu(), a + b, rtol=0, atol=0)
    torch.testing.assert_close(e.cpu(), torch.exp(a))
    torch.testing.assert_close(m.cpu(), a @ b.t())
    assert s.dtype == torch.float64 and s.device.type == "neuron"
    report = torch_neuronx.fallback_report()
    add = _entries(report, "aten::add", "Double")
    assert sum(add.values()) == 3, report
    assert sum(_entries(report, "aten::exp", "Double").values()) >= 1, report
    assert all(isinstance(v, int) and v > 0 for v in report.values())
    counts = list(report.values())
    assert counts == sorted(counts, reverse=True)  # most frequent first


def test_complex_ops_compute_and_are_counted():
    a = torch.randn(8, dtype=torch.complex64)
    b = torch.randn(8, dtype=torch.complex64)
    na, nb = a.to("neuron"), b.to("neuron")
    torch_neuronx.reset_fallback_report()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = na * nb
        ab = na.abs()
    torch.testing.assert_close(p.cpu(), a * b)
    torch.testing.assert_close(ab.cpu(), a.abs())
    report = torch_neuronx.fallback_report()
    assert sum(_entries(report, "aten::mul", "ComplexFloat").values()) == 1, report
    assert _entries(report, "aten::abs", "ComplexFloat"), report


def test_float32_op_is_not_a_fallback():
    a = torch.randn(5, 6, device="neuron")
    torch_neuronx.reset_fallback_report()
    b = (a + a) * 2
    c = torch.exp(b).sum(dim=1)
    d = a.to(torch.bfloat16) @ a.t().to(torch.bfloat16)
    assert c.shape == (5,) and d.dtype == torch.bfloat16
    assert torch_neuronx.fallback_report() == {}
    torch_neuronx.reset_fallback_report()


def test_warning_and_disabled_fallback_in_subprocesses():
    warn_code = """
        import json, warnings, torch
        a = torch.ones(4, dtype=torch.float64).to("neuron")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            b = a + a
        msgs = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        print(json.dumps({"msgs": msgs, "sum": b.sum().item()}))
    """
    disabled_code = """
        import json, torch
        out = {}
        a = torch.ones(4, dtype=torch.float64).to("neuron")  # a copy is no compute: allowed
        try:
            a + a
            out["error"] = None
        except NotImplementedError as e:
            out["error"] = str(e)
        x = torch.arange(4, dtype=torch.float32, device="neuron")
        out["f32"] = (x * 2 + 1).tolist()
        out["mm"] = (x.view(2, 2) @ x.view(2, 2)).tolist()
        print(json.dumps(out))
    """
    warn_res, disabled_res = run_python_many([(warn_code, None),
                                              (disabled_code, {"TORCH_NEURONX_DISABLE_CPU_FALLBACK": "1"})])
    w = json.loads(check_ok(warn_res).strip().splitlines()[-1])
    assert w["sum"] == 8.0
    assert len(w["msgs"]) == 1, w["msgs"]
    assert "aten::add" in w["msgs"][0] and "Double" in w["msgs"][0]
    d = json.loads(check_ok(disabled_res).strip().splitlines()[-1])
    assert d["error"] is not None, "float64 op ran although CPU fallback is disabled"
    assert "aten::add" in d["error"] and "TORCH_NEURONX_DISABLE_CPU_FALLBACK" in d["error"]
    assert d["f32"] == [1.0, 3.0, 5.0, 7.0]
    assert d["mm"] == [[2.0, 3.0], [6.0, 11.0]]


@pytest.fixture(autouse=True)
def _clean_report():
    yield
    torch_neuronx.reset_fallback_report()
