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
"""`build/fork.py upstream-tests --pallas-interpret`: upstream's Pallas TPU
tests in interpret mode on CPU, without editing them."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from absl.testing import absltest

from forktool import upstream_tests as UT

REPO = Path(__file__).resolve().parents[1]

# Stands in for an upstream TPU test file: gated on a TPU generation, calling
# pallas_call without interpret=True, comparing with numpy's default rtol.
TPU_TEST = """
import os
from absl.testing import absltest
from absl.testing import parameterized
import hypothesis as hp
import hypothesis.strategies as hps
import numpy as np
import jax
import jax.numpy as jnp
from jax._src import test_util as jtu
from jax.experimental import pallas as pl


class TinyTpuTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    if not jtu.is_device_tpu_at_least(5):
      self.skipTest("Only works with TPU v5")

  def test_kernel(self):
    def kernel(x_ref, o_ref):
      o_ref[...] = x_ref[...] * 3
    x = np.arange(1, 9, dtype=np.float32)
    out = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((8,), jnp.float32))(x)
    np.testing.assert_allclose(out * (1 + 3e-6), 3 * x)

  def test_collective(self):
    raise NotImplementedError(
        "Remote copies are not supported in interpret mode.")

  def test_unrelated_error(self):
    raise NotImplementedError("something else")


class GatesTest(absltest.TestCase):
  # The gates upstream's kernel test files use, answered as a TPU v5e.

  def test_gates(self):
    if not jtu.test_device_matches(["tpu"]):
      self.skipTest("Need TPU devices")
    self.assertEqual(jtu.device_under_test(), "tpu")
    self.assertTrue(jtu.test_device_matches(["tpu"]))
    self.assertTrue(jtu.is_device_tpu(version=5, variant="e"))
    self.assertTrue(jtu.is_device_tpu(version=5))
    self.assertFalse(jtu.is_device_tpu(version=5, variant="p"))
    self.assertFalse(jtu.is_device_tpu(version=4))
    self.assertTrue(jtu.is_device_tpu_at_least(4))
    self.assertFalse(jtu.is_device_tpu_at_least(6))


hp.settings.register_profile("upstreams", max_examples=20, database=None,
                             derandomize=True)
hp.settings.load_profile("upstreams")


class HypothesisTest(absltest.TestCase):

  @hp.given(hps.integers())
  def test_examples(self, n):
    with open(os.environ["TINY_EXAMPLES_FILE"], "a") as f:
      f.write(f"{n} ")


class ParameterizedHypothesisTest(parameterized.TestCase):
  # As upstream's kernel files: `parameterized` over `hypothesis.given`.

  @parameterized.parameters(1, 2)
  @hp.given(hps.integers())
  def test_examples(self, k, n):
    with open(os.environ["TINY_EXAMPLES_FILE"], "a") as f:
      f.write(f"{k}:{n} ")
"""

# A hypothesis test that fails on every example: shrinking it takes many.
FAILING_HYPOTHESIS_TEST = """
import os
from absl.testing import absltest
import hypothesis as hp
import hypothesis.strategies as hps


class FailingTest(absltest.TestCase):

  @hp.settings(max_examples=20, database=None, derandomize=True)
  @hp.given(hps.lists(hps.integers(), min_size=5))
  def test_fails(self, xs):
    with open(os.environ["TINY_EXAMPLES_FILE"], "a") as f:
      f.write(f"{len(xs)} ")
    raise AssertionError("fails")
"""

# Stands in for upstream's pallas_call_tpu_test, whose test of the TPU
# compiler's cost analysis --pallas-interpret names as not runnable.
CALL_TEST = """
from absl.testing import absltest


class PallasCallTest(absltest.TestCase):

  def test_cost_analysis(self):
    raise AssertionError("the TPU compiler's cost analysis")
"""


# A kernel that accumulates into its output without initializing it: right
# under interpret=True (zeros), NaN under InterpretParams() (uninitialized).
ACCUMULATE_TEST = """
from absl.testing import absltest
import numpy as np
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


class AccumulateTest(absltest.TestCase):

  def test_accumulate(self):
    def kernel(x_ref, o_ref):
      o_ref[...] += x_ref[...]
    x = np.ones((8, 128), np.float32)
    out = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
    np.testing.assert_array_equal(out, x)
"""

# Stands in for jax 0.4.26's paged attention test: its megacore gate is true
# of no chip, and its "batch" cases fail on any (a bug of the kernel's).
PAGED_TEST = """
from absl.testing import absltest
from absl.testing import parameterized


def _megacore_enabled():
  return False


class PagedAttentionKernelTest(parameterized.TestCase):

  @parameterized.product(megacore_mode=("batch", "kv_head", None))
  def test_paged_attention(self, megacore_mode):
    if megacore_mode and not _megacore_enabled():
      self.skipTest("Megacore is only available on TPU v4 and TPU v5p")
    if megacore_mode == "batch":
      raise AssertionError("the kernel reads the wrong sequence length")
"""


class PallasInterpretOptionTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = Path(tempfile.mkdtemp(prefix="pallas-interpret-test-"))
    work = cls.tmp / "jax"
    (work / "tests" / "pallas").mkdir(parents=True)
    (work / "tests" / "pallas" / "tiny_tpu_test.py").write_text(TPU_TEST)
    (work / "tests" / "pallas" / "pallas_call_tpu_test.py").write_text(
        CALL_TEST)
    (work / "tests" / "pallas" / "failing_hypothesis_test.py").write_text(
        FAILING_HYPOTHESIS_TEST)
    (work / "tests" / "pallas" / "accumulate_test.py").write_text(
        ACCUMULATE_TEST)
    (work / "tests" / "pallas" / "paged_attention_kernel_test.py").write_text(
        PAGED_TEST)
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "t"],
                 ["tag", "jax-v0.4.28"]):
      subprocess.run([*git, *args], check=True, capture_output=True)
    cls.work = work
    # The runner drops PYTHONPATH; this interpreter sees the jax under test.
    import jax
    site = Path(jax.__file__).resolve().parents[1]
    cls.python = cls.tmp / "python"
    cls.python.write_text(f'#!/bin/sh\nPYTHONPATH="$PYTHONPATH:{site}" '
                          f'exec {sys.executable} "$@"\n')
    cls.python.chmod(0o755)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def run_tests(self, *options: str, tests=None) -> subprocess.CompletedProcess:
    self.examples = self.tmp / f"examples-{len(options)}-{time.time()}"
    return subprocess.run(
        [sys.executable, str(REPO / "build" / "fork.py"), "upstream-tests",
         "--jax-repo", str(self.work), "--tag", "jax-v0.4.28", "--python",
         str(self.python), "--log-dir", str(self.tmp / "logs"), *options,
         *(tests or ["pallas/tiny_tpu_test"])], capture_output=True,
        text=True, env={**os.environ, "TINY_EXAMPLES_FILE": str(self.examples)})

  def test_without_the_option_the_tpu_tests_skip(self):
    r = self.run_tests()
    self.assertIn("pallas/tiny_tpu_test: 3 passed, 0 failed, 4 skipped",
                  r.stdout, r.stderr)

  def test_interpret_mode_tpu_gates_and_unrunnable_tests_by_name(self):
    r = self.run_tests("--pallas-interpret")
    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
    self.assertIn("pallas/tiny_tpu_test: 5 passed, 1 failed, 1 skipped",
                  r.stdout, r.stderr)
    listed = [l.strip() for l in r.stdout.splitlines() if UT.NOT_RUNNABLE in l]
    self.assertEqual(listed, [
        "pallas/tiny_tpu_test.py::TinyTpuTest::test_collective: not runnable "
        "on CPU: Remote copies are not supported in interpret mode."])
    self.assertEqual(len(self.examples.read_text().split()), 60)

  def test_the_tolerance_is_the_options_value(self):
    r = self.run_tests("--pallas-interpret", "--pallas-rtol", "1e-7")
    self.assertIn("pallas/tiny_tpu_test: 4 passed, 2 failed, 1 skipped",
                  r.stdout, r.stderr)

  def test_hypothesis_examples_are_capped(self):
    r = self.run_tests("--pallas-interpret", "--hypothesis-max-examples", "3")
    self.assertIn("pallas/tiny_tpu_test: 5 passed, 1 failed, 1 skipped",
                  r.stdout, r.stderr)
    examples = self.examples.read_text().split()
    self.assertEqual(len(examples), 3 + 2 * 3, examples)  # parameterized too

  def test_a_capped_failing_example_is_not_shrunk(self):
    r = self.run_tests("--pallas-interpret", "--hypothesis-max-examples", "3",
                       tests=["pallas/failing_hypothesis_test"])
    self.assertIn("pallas/failing_hypothesis_test: 0 passed, 1 failed",
                  r.stdout, r.stderr)
    # The first example fails and is run again to report it; no more.
    self.assertEqual(len(self.examples.read_text().split()), 2)

  def test_interpret_params_and_their_fields(self):
    for options, verdict in [
        ((), "1 passed, 0 failed"),
        (("--interpret-params",), "0 passed, 1 failed"),
        (("--interpret-param", "uninitialized_memory='zero'"),
         "1 passed, 0 failed")]:
      r = self.run_tests("--pallas-interpret", *options,
                         tests=["pallas/accumulate_test"])
      self.assertIn(f"pallas/accumulate_test: {verdict}", r.stdout,
                    (options, r.stderr))

  def test_megacore_cases_run_on_two_cores_and_kernel_bugs_are_named(self):
    for options, verdict in [
        ((), "2 passed, 0 failed, 0 skipped, 0 errors, 1 expected to fail"),
        (("--interpret-params",), "1 passed, 0 failed, 2 skipped, 0 errors ("),
        (("--interpret-param", "num_cores_or_threads=2"),
         "2 passed, 0 failed, 0 skipped, 0 errors, 1 expected to fail")]:
      r = self.run_tests("--pallas-interpret", *options,
                         tests=["pallas/paged_attention_kernel_test"])
      self.assertIn(f"pallas/paged_attention_kernel_test: {verdict}",
                    r.stdout, (options, r.stderr))
      self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
    self.assertIn("pallas/paged_attention_kernel_test.py::PagedAttention"
                  "KernelTest::test_paged_attention0: a bug of upstream's "
                  "kernel: jax 0.4.26's paged_attention with megacore_mode="
                  "'batch'", r.stdout)

  def test_tests_of_the_tpu_compiler_are_named(self):
    r = self.run_tests("--pallas-interpret",
                       tests=["pallas/pallas_call_tpu_test"])
    self.assertIn("pallas/pallas_call_tpu_test: 0 passed, 0 failed, 1 skipped",
                  r.stdout, r.stderr)
    self.assertIn("pallas/pallas_call_tpu_test.py::PallasCallTest::"
                  "test_cost_analysis: not runnable on CPU: checks the TPU "
                  "compiler's cost analysis", r.stdout)


if __name__ == "__main__":
  absltest.main()
