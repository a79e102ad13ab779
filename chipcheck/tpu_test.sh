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
# tests/tpu_test.py on the TPU machine, in one process (one program at a time
# holds the chip: no -n), with the differential of the fork's Pallas test
# kernels (TpuTest.test_pallas_kernels_on_the_chip: a line per kernel, then
# the counts). Exits non-zero when JAX does not see the chip, when a test
# fails (the chip disagrees with NumPy, the CPU backend or interpret mode),
# or at the time limit.
# Here: bash chipcheck/prepare.sh (lays .tpu/, git-ignored). There, with
# the checkout and its .tpu/ copied over (about 8 minutes: the differential
# took 380 s for 307 of its 312 kernels on a TPU v5e):
#   bash chipcheck/tpu_test.sh
# Logs in $CHIPCHECK_LOGS (default chipcheck-logs/): tpu_test.log.
set -u -o pipefail
cd "$(dirname "$0")/.."
. chipcheck/on_device.sh
out=${CHIPCHECK_LOGS:-chipcheck-logs}
mkdir -p "$out"
export JAX_PLATFORMS=${JAX_PLATFORMS:-tpu,cpu}
{
  # Every test skips without a TPU: first make sure JAX has one.
  timeout 120 python3 -c 'import jax; d = jax.devices()[0]
print("device:", d.device_kind); assert d.platform == "tpu", d' &&
  timeout 570 python3 -m pytest -q tests/tpu_test.py -rA
} 2>&1 | tee "$out/tpu_test.log"
