#!/usr/bin/env bash
# Runs the comparison suite (W1–W7, `examples/compare.rs`) on the machine
# it is started on and prints its markdown table, headed by the adapter's
# name; the figures also go to a JSON file (`$JSON`, default
# target/lazywgpu-out/compare-<date>-<time>.json).
#
# Usage, from the repository root:
#   tools/gpu-bench.sh [--quick]
#
# On a GPU machine without a Vulkan loader (a bare container with the
# NVIDIA driver mounted), carry the loader's Debian packages in `.gl/`
# (`apt-get download libvulkan1` on an amd64 machine); they are unpacked
# here. Set COMPARE_BIN to a compare binary built elsewhere (built here
# with cargo otherwise).
set -euo pipefail

if ! ldconfig -p | grep -q 'libvulkan\.so\.1'; then
  if compgen -G '.gl/*.deb' > /dev/null; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
  else
    echo "gpu-bench: no Vulkan loader (libvulkan.so.1) and no .gl/*.deb to unpack" >&2
    exit 1
  fi
fi
# NVIDIA's driver mounted outside the loader's default search path.
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nvidia_icd" ]; then
  export VK_DRIVER_FILES="$nvidia_icd"
fi

bin="${COMPARE_BIN:-target/release/examples/compare}"
if [ ! -x "$bin" ]; then
  cargo build --release --example compare
fi
adapter_tag=$(date +%Y%m%d-%H%M%S)
json="${JSON:-target/lazywgpu-out/compare-${adapter_tag}.json}"
mkdir -p "$(dirname "$json")"
# The table goes to stdout (with the adapter's name in its heading line);
# progress goes to stderr.
"$bin" "$@" --json "$json"
echo "figures written to $json" >&2
