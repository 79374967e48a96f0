#!/usr/bin/env bash
# Installs the Debian 12 packages stoker needs to build, test and run its demo.
# Idempotent: only packages that are missing are installed; when everything is
# present it does nothing (no apt-get update, no network).
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake make pkg-config clang libclang-rt-14-dev
  # codecs
  libjpeg62-turbo-dev libpng-dev
  # WebP, TIFF and GIF decoding (src/decode/webp.cc, tiff.cc, gif.cc)
  libwebp-dev libtiff-dev libgif-dev
  # C++ tests, benchmarks, CLI
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  # Python bindings and tests (Debian's python, never PyPI)
  python3 python3-dev pybind11-dev python3-numpy python3-pytest
  python3-pil python3-torch python3-torchvision
  # packaging: pip wheel/install with setuptools, venvs; the wheel's static
  # codecs are built from Debian's source packages (dpkg-dev, nasm for SIMD)
  python3-venv python3-pip python3-wheel python3-setuptools dpkg-dev nasm unzip
  # the resize benchmark's baseline (bench/resize_compare.py)
  python3-opencv
  # libtorch for the C++ training example
  libtorch-dev
  # headless browser: the doctor's HTML report is rendered and screenshot in a test
  chromium
  # real photographs for the sample dataset
  mate-backgrounds lomiri-wallpapers-16.04 lomiri-wallpapers-20.04
  plasma-workspace-wallpapers
  # 3D volumes: tests' NIfTI reference reader and resampling reference, the
  # volume benchmark's DataLoader baseline (bench/volume_bench.py)
  python3-nibabel python3-scipy
  # .nii.gz volumes inflate with libdeflate when it is there (dlopen()ed; zlib otherwise)
  libdeflate0
  # remote shard tests: nginx serves shards on 127.0.0.1 (tests/python/remote_servers.py)
  nginx-light
  # libcurl headers: the HTTP(S)/S3 shard reader
  libcurl4-openssl-dev
  # make docs: Sphinx (autodoc + napoleon), Markdown pages, the theme, the C++ API from the headers
  python3-sphinx python3-myst-parser furo doxygen python3-breathe
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
      echo "install-deps: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
      exit 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # The tests start their own nginx on 127.0.0.1; the package's postinst may have started the
  # system one on port 80 (where an init system runs): stop it, and keep it from starting at boot.
  if printf '%s\n' "${missing[@]}" | grep -qx nginx-light; then
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
      $SUDO systemctl disable --now nginx >/dev/null 2>&1 || true
    fi
    if [ -s /run/nginx.pid ] && $SUDO kill -0 "$(cat /run/nginx.pid)" 2>/dev/null; then
      $SUDO kill -QUIT "$(cat /run/nginx.pid)" || true
    fi
  fi
  echo "install-deps: done"
fi

# The S3 test server (@20minutes/s3rver, pinned by tests/fixtures/s3/package-lock.json). npm only
# runs when node_modules is missing; without npm the S3 tests skip and say why.
S3_FIXTURE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/fixtures/s3"
if [ -d "$S3_FIXTURE/node_modules/@20minutes/s3rver" ]; then
  echo "install-deps: S3 test server present (tests/fixtures/s3/node_modules)"
elif command -v npm >/dev/null 2>&1; then
  echo "install-deps: npm ci in tests/fixtures/s3 (the S3 test server)"
  npm ci --prefix "$S3_FIXTURE" --no-audit --no-fund
else
  echo "install-deps: WARNING: npm not found: the S3 test server (tests/fixtures/s3) is not" \
       "installed and the S3 tests will be skipped; install node >= 20 and npm, then rerun" >&2
fi
