"""The error the neuron compile paths raise; light to import (torch_neuronx exports it at load)."""


class NeuronCompileError(RuntimeError):
    """A graph the neuron backend refused or failed to compile."""
