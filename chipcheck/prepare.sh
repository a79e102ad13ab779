#!/usr/bin/env bash
# Copyright 2026 The JAX fork authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     https://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
#
# Lays .tpu/ (git-ignored) for a TPU machine with Python 3.11 and no
# network, which receives the checkout and the folders named to go along,
# 64 MiB at most: jaxlib 0.4.26 (its cp311 manylinux2014 wheel, from pip
# download, verified against the sha256 below, unpacked and xz-compressed:
# about 48 MB where the wheel is 79 MB), absl-py and flatbuffers (jaxlib's
# requirements the machine may lack), and the fork's wheel built from this
# checkout (build/fork.py wheel). With --upstream-tests, also upstream
# 0.4.26's test files of the `tpu` set (build/fork.py upstream-tests
# --export; needs $JAX_UPSTREAM_REPO, docs/upstream_suites.md).
#   bash chipcheck/prepare.sh [--upstream-tests]
# Then copy the checkout with .tpu/ to the machine and run there
# bash chipcheck/tpu_test.sh, or
# tpu_benchmark.sh, or upstream_suites.sh; each sources
# chipcheck/on_device.sh. jaxlib's tarball is made once and kept.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
jaxlib=jaxlib==0.4.26
sha256=3069da7d75f5b4dd15350fffe6e6b86ca09c4b9fde60b10515edb09cef653335
tarball=.tpu/jaxlib-0.4.26-cp311-manylinux2014_x86_64.tar.xz
mkdir -p .tpu
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ "$(cat "$tarball.sha256" 2>/dev/null)" != "$sha256" ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --implementation cp --abi cp311 --platform manylinux2014_x86_64 \
    -d "$work" "$jaxlib"
  whl=("$work"/jaxlib-*.whl)
  echo "$sha256  ${whl[0]}" | sha256sum -c --quiet
  python3 - "${whl[0]}" "$work/unpacked" "$tarball" <<'PY'
import os, sys, tarfile, zipfile
wheel, unpacked, tarball = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
  for info in z.infolist():
    path = z.extract(info, unpacked)
    if info.external_attr >> 16:   # the wheel's modes (executable .so files)
      os.chmod(path, (info.external_attr >> 16) & 0o777)
with tarfile.open(tarball, "w:xz") as tar:
  tar.add(unpacked, arcname=".")
PY
  echo "$sha256" >"$tarball.sha256"
fi

rm -rf .tpu/wheels .tpu/jax-*.whl
python3 -m pip download -q --no-deps --only-binary=:all: -d .tpu/wheels \
  absl-py==2.5.1 flatbuffers==25.12.19
python3 build/fork.py wheel --out "$work/dist" >/dev/null
cp "$work"/dist/jax-*.whl .tpu/

if [ "${1:-}" = --upstream-tests ]; then
  rm -rf .tpu/upstream-tests
  python3 build/fork.py upstream-tests --set tpu --export .tpu/upstream-tests
fi
du -sh .tpu
