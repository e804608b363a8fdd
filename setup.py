"""Builds torch_neuronx against the torch that runs this script (pip install .).

The project's own environment builds with CMake (see the Makefile); this file
also carries the package metadata and the entry points that make `import torch`
load the plugin.
"""
import glob
import os

from setuptools import find_packages, setup

ENTRY_POINTS = {
    "torch.backends": ["neuron = torch_neuronx:_autoload"],
    # Loaded by Dynamo the first time a compile names backend="neuron".
    "torch_dynamo_backends": ["neuron = torch_neuronx.compile.entry:neuron"],
}


def extensions():
    # Building must not autoload a previously installed torch_neuronx (or this
    # unbuilt source tree) through torch's device-backend entry point.
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    from torch.utils.cpp_extension import BuildExtension, CppExtension

    root = os.path.dirname(os.path.abspath(__file__))
    sources = sorted(glob.glob("runtime/*.cpp") + glob.glob("nki_runtime/*.cpp") + glob.glob("aten/**/*.cpp", recursive=True)
                     + glob.glob("distributed/*.cpp"))
    ext = CppExtension(
        "torch_neuronx._C",
        sources,
        include_dirs=[root],
        extra_compile_args=["-O2", "-fopenmp", "-std=c++20"],
        extra_link_args=["-fopenmp"],
    )
    return [ext], {"build_ext": BuildExtension}


NAMES_HOOK = "torch-neuronx-nki-names.pth"  # torch_neuronx/nki/aliases.py says what it does


def build_py_with_names_hook():
    from setuptools.command.build_py import build_py

    class BuildPy(build_py):
        """Also puts the NKI import-name hook at the top of site-packages, where .pth files run."""

        def run(self):
            super().run()
            self.copy_file(os.path.join("torch_neuronx", "nki", NAMES_HOOK), os.path.join(self.build_lib, NAMES_HOOK))

    return BuildPy


def main():
    import sys

    metadata_only = any(arg in sys.argv for arg in ("egg_info", "dist_info"))
    ext_modules, cmdclass = ([], {}) if metadata_only else extensions()
    cmdclass = {**cmdclass, "build_py": build_py_with_names_hook()}
    setup(
        name="torch-neuronx",
        version="0.1.0",
        description="Emulated AWS NeuronCore as a native PyTorch device named 'neuron'",
        packages=find_packages(include=["torch_neuronx", "torch_neuronx.*"]),
        # The NKI kernel repository shipped in the Hugging Face `kernels` layout (not a Python package itself).
        package_data={"torch_neuronx.nki.hub": ["nki-llama-kernels/metadata.json",
                                                "nki-llama-kernels/build/torch-neuron/*/*.py"]},
        ext_modules=ext_modules,
        cmdclass=cmdclass,
        entry_points=ENTRY_POINTS,
        python_requires=">=3.10",
    )


if __name__ == "__main__":
    main()
