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
"""Wrong answers of jax 0.4.26 / jaxlib 0.4.26 that later releases fixed.

Patch 0071: XLA:CPU's oneDNN matmuls that add a bias before an elementwise
op (`relu(x @ w) + b`, `c * (x @ w) + b`, a `jit(grad(...))` of a mean).
Patch 0072: the QDWH SVD's U for rank-deficient matrices.
Patch 0092: advanced indices on both sides of an Ellipsis.
Patch 0074: batched triangular solves of singular matrices on CPU.

Every answer is checked against NumPy (or the unbatched solver). On a newer
XLA CPU plugin (JAX_FORK_TEST_ON_PLUGIN=1) the tests of 0071 and 0092
pass; those of 0072 and 0074 need jaxlib's LAPACK calls, which the plugin
does not have.
"""
from __future__ import annotations

from functools import partial
import itertools
import os
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import compiler
from jax._src import test_util as jtu
from jax._src.lax import svd as lax_svd

jax.config.parse_flags_with_absl()

class OneDnnMatmulTest(jtu.JaxTestCase):
  """Patch 0071: large enough matmuls followed by an op and a bias."""

  def test_grad_of_mean_over_a_million_rows(self):
    # openxla/xla#13054: the jitted gradient was 1e6 times too small.
    w = jnp.array([1., 2., 3.])
    def loss(x, ys):
      def f(y):
        diff = y - x
        return jnp.dot(diff, w) + jnp.dot(jnp.dot(diff, jnp.zeros((3, 3))), diff)
      return jnp.mean(jax.vmap(f)(ys))
    x = jnp.ones(3)
    ys = jnp.ones((10**6, 3))
    self.assertAllClose(jax.jit(jax.grad(loss))(x, ys), -np.array([1., 2., 3.]),
                        rtol=1e-4, atol=0)

  @absltest.skipIf(os.environ.get("JAX_FORK_TEST_ON_PLUGIN") == "1",
                   "the plugin compiles without jaxlib's oneDNN rewriter")
  @jtu.skip_on_devices("gpu", "tpu")   # the rewriter is XLA:CPU's
  def test_programs_without_matmuls_are_not_scanned(self):
    # (The test's name is in the programs' locations: no op name in it.)
    scanned = []
    scan = compiler._onednn_bias_after_elementwise
    def spy(executable):
      scanned.append(executable)
      return scan(executable)
    with mock.patch.object(compiler, "_onednn_bias_after_elementwise", spy):
      jax.jit(lambda x: jnp.sin(x) + 1).lower(jnp.ones(3)).compile()
      self.assertEmpty(scanned)
      jax.jit(lambda x: x @ x).lower(jnp.ones((3, 3))).compile()
      self.assertLen(scanned, 1)
      jax.jit(lambda x, k: lax.conv(x, k, (1, 1), "SAME")).lower(
          jnp.ones((1, 2, 5, 5)), jnp.ones((3, 2, 1, 1))).compile()
      self.assertLen(scanned, 2)

  @parameterized.named_parameters(
      ("_relu", lambda y, b, xp: xp.maximum(y, 0) + b[None, :]),
      ("_gelu", lambda y, b, xp: 0.5 * y * (1 + xp.tanh(
          0.7978845608 * (y + 0.044715 * y ** 3))) + b[None, :]),
      ("_scale_column_bias", lambda y, b, xp: 0.5 * y + b[:, None]),
      ("_scale_row_bias", lambda y, b, xp: 0.5 * y + b[None, :]),
      ("_scale_add_bias", lambda y, b, xp: 0.5 * y + y[::-1] + b[None, :]),
      ("_bias_then_scale", lambda y, b, xp: 0.5 * (y + b[None, :])),
  )
  def test_matmul_epilogue(self, epilogue):
    rng = np.random.RandomState(0)
    x = rng.randn(256, 256).astype(np.float32)
    w = rng.randn(256, 256).astype(np.float32) / 16
    b = rng.randn(256).astype(np.float32)
    f = jax.jit(lambda x, w, b: epilogue(x @ w, b, jnp))
    expected = epilogue(x.astype(np.float64) @ w.astype(np.float64),
                        b.astype(np.float64), np)
    # A TPU multiplies float32 in bfloat16 passes at default precision.
    tol = 1e-3 if jtu.device_under_test() == "cpu" else 3e-2
    self.assertAllClose(f(x, w, b), expected, rtol=tol, atol=tol,
                        check_dtypes=False)


class QdwhSvdRankDeficientTest(jtu.JaxTestCase):
  """Patch 0072: jax._src.lax.svd, what jnp.linalg.svd is on TPU."""

  @parameterized.named_parameters(
      ("_diag", np.diag([1., 0.])),
      ("_diag4", np.diag([3., 2., 0., 0.])),
      ("_zero_column", np.array([[1, 0, 2], [3, 0, 4], [5, 0, 6], [7, 0, 8.]])),
      ("_zero_row", np.array([[1, 2, 3, 4], [0, 0, 0, 0], [5, 6, 7, 8.]])),
      ("_rank1_tall", np.eye(5, 3) * np.array([1., 0., 0.])),
      ("_rank1_complex", np.diag([1 + 1j, 0, 2j])),
      ("_random_rank2", np.random.RandomState(0).randn(6, 2)
       @ np.random.RandomState(1).randn(2, 5)),
  )
  def test_unitary_factors(self, a):
    a = a.astype(np.complex64 if np.iscomplexobj(a) else np.float32)
    m, n = a.shape
    k = min(m, n)
    tol = 1e-5
    if jtu.device_under_test() != "cpu":   # rounding relative to |a| there
      tol *= max(1., np.abs(a).max())
    for full_matrices in [True, False]:
      u, s, vh = map(np.asarray, lax_svd.svd(a, full_matrices=full_matrices))
      with self.subTest(full_matrices=full_matrices):
        self.assertEqual(u.shape, (m, m) if full_matrices else (m, k))
        self.assertEqual(vh.shape, (n, n) if full_matrices else (k, n))
        self.assertAllClose(u.conj().T @ u, np.eye(u.shape[1]), atol=1e-5,
                            rtol=0, check_dtypes=False)
        self.assertAllClose(vh @ vh.conj().T, np.eye(vh.shape[0]), atol=1e-5,
                            rtol=0, check_dtypes=False)
        self.assertAllClose((u[:, :k] * s) @ vh[:k], a, atol=tol, rtol=0,
                            check_dtypes=False)
        self.assertAllClose(s, np.linalg.svd(a, compute_uv=False), atol=tol,
                            rtol=0, check_dtypes=False)


class EllipsisBetweenAdvancedIndicesTest(jtu.JaxTestCase):
  """Patch 0092."""

  def test_matches_numpy(self):
    x = np.arange(3 * 2 * 5).reshape(3, 2, 5)
    i = np.array([0, 1])
    j = np.array([[1], [0]])
    forms = 0
    # Two advanced indices (arrays or an int with an array) and basic
    # entries, one of them an Ellipsis, in every order.
    for first, second in [(i, j), (i, 1), (1, j)]:
      for basics in [(Ellipsis,), (Ellipsis, slice(None)), (Ellipsis, None)]:
        for idx in set(itertools.permutations(
            (0, 1) + tuple(range(2, 2 + len(basics))))):
          entries = (first, second) + basics
          idx = tuple(entries[n] for n in idx)
          try:
            expected = x[idx]
          except IndexError:
            continue
          forms += 1
          with self.subTest(idx=idx):
            np.testing.assert_array_equal(jnp.asarray(x)[idx], expected)
            updated = x.copy()
            updated[idx] = -1
            np.testing.assert_array_equal(jnp.asarray(x).at[idx].set(-1),
                                          updated)
    self.assertGreater(forms, 30)

  def test_issue_example(self):
    x = jnp.arange(3 * 2 * 5).reshape(3, 2, 5)
    i, j = jnp.array([0, 1]), jnp.array([1, 2])
    self.assertEqual(x[:, i, ..., j].shape, (2, 3))
    self.assertEqual(jax.jit(lambda x: x[:, i, ..., j])(x).shape, (2, 3))
    np.testing.assert_array_equal(x[:, i, ..., j],
                                  np.asarray(x)[:, [0, 1], ..., [1, 2]])

  def test_basic_indices_still_slices(self):
    # Patch 0004: basic indices lower to slices, never a gather.
    jaxpr = jax.make_jaxpr(lambda x: x[:, 1, ..., ::2])(jnp.ones((3, 4, 5, 6)))
    self.assertNotIn("gather", str(jaxpr))


def _substitute(a, b, lower):
  """Column-by-column substitution in NumPy (IEEE division by zero)."""
  n = a.shape[0]
  x = np.zeros_like(b)
  order = range(n) if lower else range(n - 1, -1, -1)
  with np.errstate(all="ignore"):
    for r in order:
      others = [c for c in range(n) if (c < r if lower else c > r)]
      acc = b[r] - sum((a[r, c] * x[c] for c in others), np.zeros_like(b[r]))
      x[r] = acc / a[r, r]
  return x


class BatchedTriangularSolveSingularTest(jtu.JaxTestCase):
  """Patch 0074."""

  @jtu.skip_on_devices("gpu", "tpu")   # 0074 mends jaxlib's CPU kernel
  def test_example_matches_back_substitution(self):
    a = np.array([[1., 0., 0.], [2., 0., 0.], [3., 4., 5.]], np.float32)
    b = np.ones((3, 1), np.float32)
    expected = _substitute(a, b, lower=True)
    self.assertFalse(np.isfinite(expected).all())
    solve = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True,
                                                      lower=True)
    np.testing.assert_array_equal(solve(a, b), expected)
    np.testing.assert_array_equal(solve(np.stack([a, a]), np.stack([b, b])),
                                  np.stack([expected, expected]))
    np.testing.assert_array_equal(
        jax.jit(jax.vmap(solve))(np.stack([a, a]), np.stack([b, b])),
        np.stack([expected, expected]))

  @parameterized.named_parameters(
      (f"_{np.dtype(dtype).name}_{n}", dtype, n)
      for dtype, n in [(np.float32, 1), (np.float32, 33), (np.complex64, 8)])
  def test_batched_equals_unbatched(self, dtype, n):
    rng = np.random.RandomState(n)
    for left_side, lower, (transpose_a, conjugate_a) in itertools.product(
        [True, False], [True, False], [(False, False), (True, True)]):
      a = rng.randn(3, n, n).astype(dtype)
      if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.randn(3, n, n).astype(dtype)
      a = np.tril(a) if lower else np.triu(a)
      a[1, n // 2, n // 2] = 0
      a[2] = np.eye(n, dtype=dtype) * (np.arange(n) % 2)
      b = rng.randn(*((3, n, 2) if left_side else (3, 2, n))).astype(dtype)
      solve = partial(lax.linalg.triangular_solve, left_side=left_side,
                      lower=lower, transpose_a=transpose_a,
                      conjugate_a=conjugate_a)
      batched, each = jax.jit(lambda a, b: (
          solve(a, b), [solve(a[k], b[k]) for k in range(3)]))(a, b)
      each = np.stack(each)
      with self.subTest(left_side=left_side, lower=lower,
                        transpose_a=transpose_a, conjugate_a=conjugate_a):
        np.testing.assert_array_equal(np.isfinite(batched), np.isfinite(each))
        np.testing.assert_allclose(batched, each, rtol=1e-4, atol=1e-4)

  def test_nonsingular_batch(self):
    rng = np.random.RandomState(0)
    a = np.tril(rng.randn(5, 6, 6)).astype(np.float32) + 4 * np.eye(6, dtype=np.float32)
    b = rng.randn(5, 6, 3).astype(np.float32)
    x = lax.linalg.triangular_solve(a, b, left_side=True, lower=True)
    self.assertAllClose(np.asarray(a) @ np.asarray(x), b, atol=1e-4, rtol=1e-4)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
