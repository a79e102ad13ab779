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
# the counts).
# Here, in the checkout (laying .tpu/, git-ignored):  bash ../shared/tpu/carry.sh
# There (one call, carry [".tpu"], timeout_s 600):
#   source .tpu/on_device.sh && bash chipcheck/tpu_test.sh
# Back in $OUT: tpu_test.log.
set -u -o pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/tpu-test-out}
mkdir -p "$out"
export JAX_PLATFORMS=${JAX_PLATFORMS:-tpu,cpu}
timeout 540 python -m pytest -q tests/tpu_test.py -rA 2>&1 | tee "$out/tpu_test.log"
