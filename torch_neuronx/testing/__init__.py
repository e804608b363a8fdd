"""What other projects' test suites read to run on neuron.

- transformers: `TRANSFORMERS_TEST_DEVICE_SPEC` names a device-spec file (`transformers_spec.py` here;
  see docs/conformance.md for how to point the suite at it).
"""
import os

TRANSFORMERS_SPEC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformers_spec.py")
