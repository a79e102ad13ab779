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
# Upstream jax 0.4.26's test suites on the TPU machine, one generated case
# each (hypothesis: one example), every failure rerun on the built-in CPU
# backend (docs/upstream_suites.md, "On a TPU").
#
# Here, in the checkout (laying .tpu/, git-ignored; $JAX_UPSTREAM_REPO as
# for build/fork.py upstream-tests):
#   bash chipcheck/prepare.sh --upstream-tests
# There, with the checkout and its .tpu/ copied over:
#   PIP_INDEX_URL=<the machine's package index> \
#     bash chipcheck/upstream_suites.sh [BUDGET] [FILE[:SECONDS] ...]
#
# BUDGET (default 420 s) bounds the suites' part of the run: no file starts
# after it, and each file and its CPU recheck are cut at their own limit
# (below) or at what is left of it, reporting what they had done. Without
# FILEs, the files run most telling first; the report ends with the command
# for those the budget left out (run them in a second call). Logs in $CHIPCHECK_LOGS (default chipcheck-logs/):
# upstream_suites.log (everything), upstream_summary.txt (per-file counts,
# failing test ids, each with its CPU verdict), upstream_logs.tar.gz (pytest's
# log and JUnit XML of each run). Exits 1 when the chip disagrees: a test
# failed on the chip that does not fail on the CPU too (it passes or skips
# there, or was not rechecked), or a file's pytest crashed; a file cut at its
# limit, or left out by the budget, is reported and is not a disagreement.
set -u -o pipefail
cd "$(dirname "$0")/.."
. chipcheck/on_device.sh
out=${CHIPCHECK_LOGS:-chipcheck-logs}
mkdir -p "$out"
tmp="$(python3 -c 'import tempfile; print(tempfile.gettempdir())')/jax-fork-chip"
logs="$(mktemp -d)"
rm -f "$out/upstream_summary.txt"
budget=${1:-420}
[ $# -gt 0 ] && shift
# Own limits (s) on the chip, for one generated case; CPU times on a loaded
# 2-core machine were: lax_test 19, lax_autodiff_test 17,
# lax_numpy_indexing_test 10, python_callback_test 8, debugging_primitives 3,
# pjit_test 10, random_test 28, checkify_test 65, lax_numpy_test 55,
# api_test 231, lax_control_flow_test 300, splash_attention_mask_test 12
# (each program that opens the chip adds 6-15 s).
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(
  lax_test:100 pallas/pallas_call_tpu_test:90 lax_autodiff_test:80
  lax_numpy_indexing_test:50 python_callback_test:45
  debugging_primitives_test:30 pjit_test:45 random_test:70
  pallas/splash_attention_kernel_test:80 pallas/paged_attention_kernel_test:50
  pallas/gmm_test:60 pallas/indexing_test:30 pallas/ops_test:30
  checkify_test:100 lax_numpy_test:150 api_test:240
  lax_control_flow_test:240 shard_map_test:30
  pallas/splash_attention_mask_test:40 pallas/all_gather_test:30)
{
  # Upstream's 0.4.26 lax_numpy_test does not collect with NumPy 2.x (its
  # ufunc table trips over `matvec`): the counts of CHANGELOG.md are taken
  # with NumPy 1.26.4 and SciPy 1.13.1; use them where the machine's package
  # index (pip's own PIP_INDEX_URL, else pip's configuration) has them (and
  # ml_dtypes 0.5.4, which serves NumPy 1 and 2). KEEP_NUMPY=1: the machine's.
  np_dir=$tmp/np126
  if [ "${KEEP_NUMPY:-0}" != 1 ] && [ ! -f "$np_dir/.ok" ]; then
    for pkgs in "numpy==1.26.4 scipy==1.13.1 ml_dtypes==0.5.4" \
                "numpy==1.26.4 ml_dtypes==0.5.4"; do
      rm -rf "$np_dir"
      # With PIP_INDEX_URL, the machine's pip configuration does not apply.
      env ${PIP_INDEX_URL:+PIP_CONFIG_FILE=/dev/null} timeout 120 python3 -m pip install -q --retries 0 \
        --timeout 15 --only-binary=:all: --no-deps --target "$np_dir" $pkgs \
        2>&1 | grep -v notice
      if PYTHONPATH=$np_dir:${PYTHONPATH:-} python3 -c \
          'import numpy, scipy.special, jax.numpy as jnp; jnp.ones(2).sum()' \
          2>/dev/null; then
        touch "$np_dir/.ok"; break
      fi
    done
  fi
  if [ "${KEEP_NUMPY:-0}" != 1 ] && [ -f "$np_dir/.ok" ]; then
    export PYTHONPATH=$np_dir:${PYTHONPATH:-}
  fi
  python3 -c 'import numpy, scipy, ml_dtypes, pytest, hypothesis, absl; print("numpy", numpy.__version__, "scipy", scipy.__version__, "ml_dtypes", ml_dtypes.__version__, "pytest", pytest.__version__, "hypothesis", hypothesis.__version__)'
  echo "budget ${budget} s: ${files[*]}"
  t0=$SECONDS
  python3 build/fork.py upstream-tests --tests-dir .tpu/upstream-tests \
    --keep-pythonpath --num-cases 1 --hypothesis-max-examples 1 --devices 1 \
    --recheck-on-cpu --budget "$budget" --log-dir "$logs" \
    --summary "$out/upstream_summary.txt" "${files[@]}"
  echo "runner exit status $? after $((SECONDS - t0)) s"
  rest=$(sed -n 's/^\([^ ]*\): not run, the budget.*/\1/p' "$out/upstream_summary.txt")
  if [ -n "$rest" ]; then
    echo "left out by the budget; in a second call:"
    echo "  ${PIP_INDEX_URL:+PIP_INDEX_URL=$PIP_INDEX_URL }bash chipcheck/upstream_suites.sh 480 $(for f in $rest; do for g in "${files[@]}"; do [ "${g%%:*}" = "$f" ] && printf '%s ' "$g"; done; done)"
  fi
  disagree=$(grep -cE 'failure: .*(\((passes on CPU|skipped on CPU|not rechecked[^)]*)\)$|pytest exit status)' \
    "$out/upstream_summary.txt")
  echo "$disagree test(s) on which the chip disagrees with the CPU backend"
  [ "$disagree" = 0 ]
} 2>&1 | tee "$out/upstream_suites.log"
status=$?
tar -czf "$out/upstream_logs.tar.gz" -C "$logs" . 2>/dev/null
exit "$status"
