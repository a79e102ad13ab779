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
"""Runs the same worker on the fork (here) and on pristine upstream.

A worker is Python source defining `run_all(cases) -> list`; when run as a
script with `CASES OUT` arguments it must pickle `run_all(cases)` to OUT.
Upstream runs in a subprocess over the pristine upstream tree that
`benchmarks/_common.py` prepares, at the same time as the fork runs here:
upstream's release of the running jax (0.4.26 for the fork; 0.4.30 for the
series rebased onto it), which the same jaxlib serves.
"""
from __future__ import annotations

import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import numpy as np

REPO = Path(__file__).resolve().parents[1]


def run_side_by_side(worker_source: str, cases: list, *,
                     timeout: float = 900) -> tuple[list, list]:
  """Returns (ours, upstream's) results of `run_all(cases)`."""
  import _common  # benchmarks/ (pytest's pythonpath)
  namespace: dict = {"__name__": "worker"}
  exec(compile(worker_source, "worker", "exec"), namespace)
  with tempfile.TemporaryDirectory() as tmp:
    worker = Path(tmp) / "worker.py"
    worker.write_text(worker_source)
    cases_file, out_file = Path(tmp) / "cases", Path(tmp) / "out"
    with open(cases_file, "wb") as fh:
      pickle.dump(cases, fh)
    env = _common.env_for("upstream", jax.version._version)
    env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = ""
    upstream = subprocess.Popen(
        [sys.executable, str(worker), str(cases_file), str(out_file)],
        env=env)
    try:
      # The worker runs with JAX's default (standard) dtype promotion.
      with jax.numpy_dtype_promotion("standard"):
        ours = namespace["run_all"](cases)
      if upstream.wait(timeout=timeout) != 0:
        raise AssertionError("the upstream worker failed")
    finally:
      if upstream.poll() is None:
        upstream.kill()
    with open(out_file, "rb") as fh:
      theirs = pickle.load(fh)
  return ours, theirs


def assert_same_outcomes(test, cases: list, ours: list, theirs: list, *,
                         array_field: int) -> list:
  """Asserts that every case ended the same way on the fork and upstream.

  Each result is a tuple whose first field is "ok" or an error kind.  For "ok"
  the field at `array_field` is a NumPy array, which must have the same shape
  and values, and every other field must be equal; for an error every field
  must be equal.  Returns our "ok" results.
  """
  test.assertEqual(len(ours), len(theirs))
  ok = []
  for case, a, b in zip(cases, ours, theirs):
    rest = lambda r: r[:array_field] + r[array_field + 1:]
    msg = f"case {case}: ours={rest(a)!r} upstream={rest(b)!r}"
    test.assertEqual(a[0], b[0], msg)
    if a[0] == "ok":
      test.assertEqual(rest(a), rest(b), msg)
      test.assertEqual(a[array_field].shape, b[array_field].shape, msg)
      x, y = a[array_field], b[array_field]
      if x.dtype.kind == "V":  # ml_dtypes' types, which float32 holds exactly:
        # with ml_dtypes 0.5 NumPy's assert takes their NaN for a mismatch.
        x, y = x.astype(np.float32), y.astype(np.float32)
      np.testing.assert_array_equal(x, y, err_msg=msg)
      ok.append(a)
    else:
      test.assertEqual(a[1:], b[1:], msg)
  return ok

