"""`nki.isa.constants`: the enumerations of nki.isa under the module name kernels import them from
(`from nki.isa import constants`; `constants.dge_mode.hwdge`)."""
from .isa import dge_mode, engine, nc_version, oob_mode, reduce_cmd  # noqa: F401
