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
# benchmarks/tpu.py on the TPU machine: the fork against the machine's own
# JAX (the PYTHONPATH it came with), in one run; exits non-zero when the
# benchmark fails (or at the time limit). Here: bash chipcheck/prepare.sh.
# There, with the checkout and its .tpu/ copied over (about 3-4 minutes):
#   bash chipcheck/tpu_benchmark.sh [--rounds 2 ...]
# Logs in $CHIPCHECK_LOGS (default chipcheck-logs/): tpu_benchmark.log.
set -u -o pipefail
cd "$(dirname "$0")/.."
. chipcheck/on_device.sh
out=${CHIPCHECK_LOGS:-chipcheck-logs}
mkdir -p "$out"
base=$JAX_FORK_CHIP_BASE
{
  PYTHONPATH=$base python3 -c 'import jax; print("baseline: jax", jax.__version__, jax.__file__)' &&
  timeout 420 python3 benchmarks/tpu.py --baseline-pythonpath "$base" "$@"
} 2>&1 | tee "$out/tpu_benchmark.log"
