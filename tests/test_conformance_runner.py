"""tools/conformance.py's own logic: reading pytest's verbose log, naming tests apart from their device,
comparing devices, and running a file that crashes (a real pytest process on a generated test file)."""
from __future__ import annotations

import os
import sys
import textwrap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import conformance  # noqa: E402

LOG = textwrap.dedent("""\
    ============================= test session starts ==============================
    collecting ... collected 5 items

    test_view_ops.py::TestViewOpsNEURON::test_view_neuron_float32 PASSED     [ 20%]
    test_view_ops.py::TestViewOpsNEURON::test_unfold_neuron FAILED           [ 40%]
    test_view_ops.py::TestViewOpsNEURON::test_big_neuron SKIPPED (too big)   [ 60%]
    test_view_ops.py::TestViewOpsNEURON::test_flaky_neuron XFAIL             [ 80%]
    test_view_ops.py::TestViewOpsNEURON::test_crash_neuron_int64 Fatal Python error: Segmentation fault
    """)


def test_outcomes_and_the_test_that_was_running_are_read_from_the_log():
    outcomes, running = conformance.parse_verbose_log(LOG)
    assert outcomes == {
        "test_view_ops.py::TestViewOpsNEURON::test_view_neuron_float32": "passed",
        "test_view_ops.py::TestViewOpsNEURON::test_unfold_neuron": "failed",
        "test_view_ops.py::TestViewOpsNEURON::test_big_neuron": "skipped",
        "test_view_ops.py::TestViewOpsNEURON::test_flaky_neuron": "passed",  # an expected failure held
    }
    assert running == "test_view_ops.py::TestViewOpsNEURON::test_crash_neuron_int64"
    _, running = conformance.parse_verbose_log(LOG.replace(" Fatal Python error: Segmentation fault", ""))
    assert running == "test_view_ops.py::TestViewOpsNEURON::test_crash_neuron_int64"
    assert conformance.parse_verbose_log(LOG.splitlines(keepends=True)[0])[1] is None


def test_cpu_and_neuron_instances_of_a_test_get_one_name():
    cpu = conformance.device_neutral("test/test_ops.py::TestCommonCPU::test_out_abs_cpu_float32")
    neuron = conformance.device_neutral("test_ops.py::TestCommonNEURON::test_out_abs_neuron_float32")
    assert cpu == neuron == "test_ops.py::TestCommon<DEV>::test_out_abs_<dev>_float32"
    # A device name inside an op's name stays: only the instantiation suffix goes.
    assert conformance.device_neutral("t.py::TestCPU::test_cpu_tensor_cpu") == "t.py::Test<DEV>::test_cpu_tensor_<dev>"


def test_neuron_only_failures_are_those_that_pass_on_cpu():
    cpu = conformance.FileResult({"a": "passed", "b": "failed", "c": "passed", "d": "skipped", "e": "passed"})
    neuron = conformance.FileResult({"a": "failed", "b": "failed", "c": "passed", "d": "failed", "e": "crashed"})
    assert conformance.neuron_only_failures(cpu, neuron) == [("a", "failed"), ("e", "crashed")]
    table = conformance.markdown({"t.py": {"cpu": cpu, "neuron": neuron}})
    assert "| t.py | 3 / 1 / 1 / 0 | 1 / 3 / 0 / 1 | 2 |" in table
    assert "- `a` (failed)" in table and "- `e` (crashed)" in table


def test_a_crashing_file_is_counted_and_finished(tmp_path):
    """A test that kills its process is counted as crashed; the file goes on after it."""
    test_file = tmp_path / "test_generated.py"
    test_file.write_text(textwrap.dedent("""\
        import os

        def test_first():
            pass

        def test_dies():
            os.abort()

        def test_fails():
            assert False

        def test_last():
            pass
        """))
    result = conformance.run_file(str(test_file), "cpu", timeout=120)
    assert result.outcomes == {"test_generated.py::test_first": "passed", "test_generated.py::test_dies": "crashed",
                               "test_generated.py::test_fails": "failed", "test_generated.py::test_last": "passed"}
    assert result.note == ""


def test_a_file_that_does_not_import_is_reported(tmp_path):
    test_file = tmp_path / "test_broken.py"
    test_file.write_text("from torch.testing._internal.common_device_type import no_such_name\n")
    result = conformance.run_file(str(test_file), "cpu", timeout=120)
    assert result.outcomes == {}
    assert result.note.startswith("pytest exit code 2: ImportError: cannot import name 'no_such_name'"), result.note
