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
# benchmarks/tpu_step_parts.py on the TPU machine: where the fork's training
# step spends its extra time against the machine's own JAX, in one run.
#   bash chipcheck/tpu_step_parts.sh [--budget 220 ...]
# (the checkout and its .tpu/, laid by chipcheck/prepare.sh, copied over;
# about 4 minutes: the workers stop taking new programs at --budget seconds.)
# Logs in $CHIPCHECK_LOGS (default chipcheck-logs/): tpu_step_parts.log.
set -u -o pipefail
cd "$(dirname "$0")/.."
. chipcheck/on_device.sh
out=${CHIPCHECK_LOGS:-chipcheck-logs}
mkdir -p "$out"
timeout 300 python3 benchmarks/tpu_step_parts.py \
  --baseline-pythonpath "$JAX_FORK_CHIP_BASE" "$@" 2>&1 |
  tee "$out/tpu_step_parts.log"
