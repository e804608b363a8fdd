#!/usr/bin/env bash
# Provisions the environment that builds and tests torch_neuronx.
#
# Where python3 already has torch >= 2.14 and transformers, nothing is done:
# the project uses that interpreter directly. Otherwise a Debian sid root
# filesystem is made with debootstrap (outside the repository, reused when it
# is there) and the packages the project needs are installed inside it.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ROOTFS="$TORCH_NEURONX_ROOTFS"
MIRROR="${TORCH_NEURONX_MIRROR:-http://deb.debian.org/debian}"
STAMP="$TORCH_NEURONX_READY_MARK"

# libsleef-dev: the header of Inductor's vectorised CPU kernels (see
# torch_neuronx/compile/vector_isa.py). python3-ml-dtypes: bf16 and fp8 NumPy
# arrays for NKI kernels called with NumPy, as AWS's simulator takes them.
PACKAGES=(
  python3 python3-dev python3-pip python3-setuptools python3-pytest
  python3-torch libtorch-dev python3-transformers python3-accelerate
  python3-safetensors python3-tokenizers python3-numpy python3-expecttest python3-ml-dtypes
  pybind11-dev libopenblas0-pthread libopenblas-dev libdnnl-dev
  libsleef-dev
  g++ make cmake ninja-build ccache libgtest-dev git
)

log() { printf '[provision] %s\n' "$*" >&2; }

ensure_host_tools() {
  local missing=()
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v bwrap >/dev/null || missing+=(bubblewrap)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing on the host: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

make_rootfs() {
  if [ ! -x "$ROOTFS/usr/bin/apt-get" ]; then
    log "debootstrap sid into $ROOTFS"
    rm -rf "$ROOTFS.partial"
    mkdir -p "$(dirname "$ROOTFS")"
    debootstrap --variant=minbase --cache-dir="$APT_CACHE" sid "$ROOTFS.partial" "$MIRROR" >/dev/null
    rm -rf "$ROOTFS"
    mv "$ROOTFS.partial" "$ROOTFS"
  fi
}

install_packages() {
  log "installing packages inside the rootfs"
  cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf" 2>/dev/null || true
  echo "deb $MIRROR sid main" >"$ROOTFS/etc/apt/sources.list"
  local inside=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
                DEBIAN_FRONTEND=noninteractive)
  local mounts=(--bind "$ROOTFS" / --dev /dev --proc /proc --perms 1777 --tmpfs /tmp
                --ro-bind /etc/resolv.conf /etc/resolv.conf
                --bind "$APT_CACHE" /var/cache/apt/archives)
  mkdir -p "$ROOTFS/var/cache/apt/archives"
  bwrap "${mounts[@]}" "${inside[@]}" \
    apt-get -o Acquire::Check-Valid-Until=false -qq update
  bwrap "${mounts[@]}" "${inside[@]}" \
    apt-get -o Acquire::Check-Valid-Until=false install -y -qq \
    --no-install-recommends "${PACKAGES[@]}" >/dev/null
  touch "$STAMP"
}

# AWS's import names (nki, neuronxcc.nki) for scripts that import them before torch: a start-up hook in
# the environment's site-packages (torch_neuronx/nki/aliases.py says how it works). Refreshed on every run.
install_import_names() {
  local hook="$(dirname "${BASH_SOURCE[0]}")/../torch_neuronx/nki/torch-neuronx-nki-names.pth"
  local target="$ROOTFS/usr/lib/python3/dist-packages/torch-neuronx-nki-names.pth"
  if [ -d "$(dirname "$target")" ] && ! cmp -s "$hook" "$target"; then
    cp "$hook" "$target"
  fi
}

main() {
  if [ "${TORCH_NEURONX_USE_HOST:-}" = 1 ] || host_has_torch; then
    exit 0
  fi
  if [ -f "$STAMP" ]; then
    install_import_names
    exit 0
  fi
  mkdir -p "$TORCH_NEURONX_APT_CACHE/partial"  # apt's download folder inside it
  APT_CACHE="$(cd "$TORCH_NEURONX_APT_CACHE" && pwd)"  # debootstrap wants it absolute
  ensure_host_tools
  make_rootfs
  install_packages
  install_import_names
  log "ready: $ROOTFS"
}

main "$@"
