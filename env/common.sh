# Sourced by ./dev and env/provision.sh: where the environment lives, the one
# mark that says it is complete, and how to tell that the host's own python3
# is the environment. Bump the mark's version when the package list changes,
# so that older environments are provisioned again.
TORCH_NEURONX_ROOTFS="${TORCH_NEURONX_ROOTFS:-/var/cache/torch-neuronx/sid-rootfs}"
TORCH_NEURONX_CACHE="${TORCH_NEURONX_CACHE:-/var/cache/torch-neuronx}"
# Downloaded .deb files only: the one part a fresh environment may reuse.
TORCH_NEURONX_APT_CACHE="${TORCH_NEURONX_APT_CACHE:-/var/cache/torch-neuronx-apt}"
TORCH_NEURONX_READY_MARK="$TORCH_NEURONX_ROOTFS/.torch-neuronx-provisioned-v3"

host_has_torch() {
  python3 - <<'PY' 2>/dev/null
import sys
import torch, transformers
major, minor = (int(x) for x in torch.__version__.split(".")[:2])
sys.exit(0 if (major, minor) >= (2, 14) else 1)
PY
}
