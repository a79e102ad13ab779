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
"""Fixes of `jax.numpy` and `jax.nn` bugs that later upstream releases fixed.

One class per patch; each class has tests that fail on upstream jax 0.4.26
(others guard behaviour the patch keeps).
"""
from __future__ import annotations

import math

from absl.testing import absltest
import numpy as np

import jax
from jax.experimental import enable_x64
import jax.numpy as jnp
from jax._src import test_util as jtu

jax.config.parse_flags_with_absl()


class LdexpGradTest(jtu.JaxTestCase):
  """`jnp.ldexp` differentiates with respect to its mantissa."""

  def test_grad(self):
    self.assertEqual(float(jax.grad(jnp.ldexp)(3.0, 2)), 4.0)
    self.assertEqual(float(jax.grad(jnp.ldexp)(3.0, -3)), 0.125)

  def test_jvp_arrays(self):
    x = jnp.array([1.5, -2.0, 0.0, 3.0], jnp.float32)
    n = jnp.array([1, -3, 5, 0], jnp.int32)
    out, tangent = jax.jvp(lambda x: jnp.ldexp(x, n), (x,), (jnp.ones_like(x),))
    self.assertArraysEqual(out, np.ldexp(np.asarray(x), np.asarray(n)))
    self.assertArraysEqual(tangent, np.ldexp(np.ones(4, np.float32),
                                             np.asarray(n)))

  def test_broadcasting(self):
    n = np.arange(6, dtype=np.int32).reshape(2, 3)
    with jax.numpy_rank_promotion("allow"):
      g = jax.grad(lambda x: jnp.ldexp(x, n).sum())(jnp.ones(3))
    self.assertArraysEqual(g, np.array([9.0, 18.0, 36.0], np.float32))

  def test_grad_of_grad_and_vmap(self):
    self.assertEqual(float(jax.grad(jax.grad(jnp.ldexp))(3.0, 2)), 0.0)
    g = jax.jit(jax.vmap(jax.grad(jnp.ldexp)))(jnp.arange(3.0), jnp.arange(3))
    self.assertArraysEqual(g, np.array([1.0, 2.0, 4.0], np.float32))

  def test_integer_mantissa_jvp(self):
    # The tangent of an integer mantissa is float0; the output's is zero.
    out, tangent = jax.jvp(lambda x: jnp.ldexp(x, 2), (3,),
                           (np.zeros((), jax.dtypes.float0),))
    self.assertEqual(float(out), 12.0)
    self.assertEqual(float(tangent), 0.0)


class GeluExactTailTest(jtu.JaxTestCase):
  """Exact `jax.nn.gelu` keeps its relative accuracy for negative inputs."""

  def test_negative_tail(self):
    xs = [-12.0, -10.0, -8.0, -6.0, -5.5, -5.0, -3.0, -1.0, 0.0, 1.0, 3.0]
    expected = [x * math.erfc(-x / math.sqrt(2)) / 2 for x in xs]
    out = jax.nn.gelu(jnp.array(xs, jnp.float32), approximate=False)
    self.assertAllClose(np.asarray(out, np.float64), np.array(expected),
                        rtol=1e-4, atol=0)

  def test_grad_in_tail(self):
    x = -6.0
    pdf = math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    expected = math.erfc(-x / math.sqrt(2)) / 2 + x * pdf
    g = jax.grad(lambda x: jax.nn.gelu(x, approximate=False))(x)
    self.assertAllClose(float(g), expected, rtol=1e-4, atol=0)

  def test_dtype_kept(self):
    for dtype in [jnp.float16, jnp.bfloat16, jnp.float32]:
      x = jnp.array([-7.0, -1.0, 2.0], dtype)
      self.assertEqual(jax.nn.gelu(x, approximate=False).dtype, dtype)


class PartitionIntegerTest(jtu.JaxTestCase):
  """`jnp.partition`/`argpartition` order 0 (unsigned) and the minimum
  (signed) correctly."""

  def _check_partitioned(self, values, kth, expected_sorted):
    self.assertEqual(values[kth], expected_sorted[kth])
    self.assertTrue(np.all(values[:kth] <= values[kth]))
    self.assertTrue(np.all(values[kth + 1:] >= values[kth]))
    self.assertArraysEqual(np.sort(values), expected_sorted)

  def test_integer_extremes(self):
    for dtype in [np.uint8, np.uint32, np.int8, np.int32]:
      info = np.iinfo(dtype)
      a = np.array([3, info.max, 0, info.min, 1, 2, info.max, info.min],
                   dtype)
      expected = np.sort(a)
      for kth in (0, 1, 3, a.size - 1):
        with self.subTest(dtype=dtype.__name__, kth=kth):
          self._check_partitioned(np.asarray(jnp.partition(a, kth)), kth,
                                  expected)
          indices = np.asarray(jnp.argpartition(a, kth))
          self.assertArraysEqual(np.sort(indices), np.arange(a.size))
          self._check_partitioned(a[indices], kth, expected)

  def test_unsigned_zeros_along_axis(self):
    a = np.array([[5, 0, 7, 0], [0, 9, 1, 2], [4, 4, 0, 8]], np.uint32).T
    out = np.asarray(jnp.partition(a, 1, axis=0))
    self.assertArraysEqual(out[1], np.sort(a, axis=0)[1])
    indices = np.asarray(jnp.argpartition(a, 1, axis=0))
    self.assertArraysEqual(np.take_along_axis(a, indices, axis=0)[1],
                           np.sort(a, axis=0)[1])


class SortComplexTest(jtu.JaxTestCase):
  """`jnp.sort_complex` sorts along the last axis, as NumPy's does."""

  def test_nd(self):
    a = np.array([[[3, 1 + 1j, 2], [0, 5, 4 - 1j]],
                  [[9, 8, 7], [1j, -1j, 0]]], np.complex64)
    self.assertArraysEqual(jnp.sort_complex(a), np.sort_complex(a))

  def test_2d_real(self):
    a = np.array([[3, 1, 2], [0, 5, 4]], np.int32)
    out = jnp.sort_complex(a)
    self.assertArraysEqual(out, np.array([[1, 2, 3], [0, 4, 5]], np.complex64))


class ComplexAsBoolTest(jtu.JaxTestCase):
  """A complex array cast to bool is True where either part is nonzero."""
  superseded_patch = "0044"

  def test_astype_bool(self):
    x = np.array([1j, 0, 1, -0.0j, complex(np.nan, 0), complex(0, np.inf)],
                 np.complex64)
    expected = x.astype(bool)
    self.assertArraysEqual(jnp.asarray(x).astype(bool), expected)
    self.assertArraysEqual(jnp.astype(x, "bool"), expected)
    self.assertArraysEqual(jax.jit(lambda v: v.astype(jnp.bool_))(x),
                           expected)

  def test_scalar(self):
    self.assertTrue(bool(jnp.astype(1j, bool)))
    self.assertFalse(bool(jnp.astype(0j, bool)))


class HypotInfTest(jtu.JaxTestCase):
  """`jnp.hypot` is inf where either argument is infinite, as in NumPy."""
  superseded_patch = "0045"

  def test_special_values(self):
    v = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 3.0, -4.0, 1e30],
                 np.float32)
    x1, x2 = np.meshgrid(v, v)
    self.assertArraysEqual(jnp.hypot(x1, x2), np.hypot(x1, x2))

  def test_inf_nan(self):
    self.assertEqual(float(jnp.hypot(jnp.inf, jnp.nan)), np.inf)
    self.assertEqual(float(jnp.hypot(jnp.nan, -jnp.inf)), np.inf)
    self.assertEqual(float(jnp.hypot(jnp.inf, jnp.inf)), np.inf)

  def test_broadcasting(self):
    x1 = np.array([[1.0, np.inf, 3.0, np.nan]], np.float32)
    x2 = np.array([[np.nan], [4.0]], np.float32)
    if jtu.device_under_test() == "cpu":
      self.assertArraysEqual(jnp.hypot(x1, x2), np.hypot(x1, x2))
    else:   # NaNs and infinities where NumPy has them; the rest within an ulp
      self.assertAllClose(jnp.hypot(x1, x2), np.hypot(x1, x2), rtol=2e-7,
                          atol=0)


class ComplexLogBaseTest(jtu.JaxTestCase):
  """Complex `jnp.log10`/`jnp.log2` of 0 and infinities have NumPy's
  imaginary parts (no NaN)."""

  def test_zero_and_inf(self):
    inf = np.inf
    z = np.array([0, -0.0, complex(-0.0, 0), complex(-0.0, -0.0), inf, -inf,
                  complex(0, inf), complex(0, -inf), complex(inf, inf),
                  complex(-inf, -inf), complex(inf, 1), complex(-inf, 1)],
                 np.complex64)
    for name in ["log10", "log2"]:
      with self.subTest(name), np.errstate(divide="ignore", invalid="ignore"):
        expected = getattr(np, name)(z)
        out = np.asarray(getattr(jnp, name)(z))
        self.assertArraysEqual(out.real, expected.real)
        self.assertAllClose(out.imag, expected.imag, rtol=1e-6, atol=0)

  def test_finite_unchanged(self):
    z = np.array([1 + 2j, -3 - 0.5j, 1e-3 + 1e3j], np.complex64)
    tol = 1e-6 if jtu.device_under_test() == "cpu" else 1e-4
    self.assertAllClose(jnp.log10(z), np.log10(z), rtol=tol)
    self.assertAllClose(jnp.log2(z), np.log2(z), rtol=tol)


class AstypeCopyTest(jtu.JaxTestCase):
  """`jnp.astype(x, x.dtype, copy=True)` returns a new array."""
  superseded_patch = "0047"

  def test_copy_survives_donation(self):
    x = jnp.arange(4.0)
    y = jnp.astype(x, x.dtype, copy=True)
    self.assertIsNot(y, x)
    jax.jit(lambda a: a * 2, donate_argnums=0)(x)
    self.assertFalse(y.is_deleted())
    self.assertArraysEqual(y, np.arange(4.0, dtype=np.float32))

  def test_default_and_conversions(self):
    x = jnp.arange(4.0)
    self.assertIs(jnp.astype(x, x.dtype), x)  # copy=False, as before
    self.assertIsNot(jnp.astype(x, x.dtype, copy=True), x)
    self.assertEqual(jnp.astype(x, jnp.int32, copy=True).dtype, jnp.int32)


class SoftmaxEmptyTest(jtu.JaxTestCase):
  """`jax.nn.softmax`/`log_softmax` of an empty axis return an empty array."""
  superseded_patch = "0048"

  def test_empty_axis(self):
    for f in [jax.nn.softmax, jax.nn.log_softmax]:
      for shape, axis in [((2, 0), -1), ((0, 3), 0), ((2, 0), None),
                          ((0, 3), (0, 1))]:
        with self.subTest(f=f.__name__, shape=shape, axis=axis):
          out = f(jnp.zeros(shape, jnp.float32), axis=axis)
          self.assertEqual(out.shape, shape)
          self.assertEqual(out.dtype, jnp.float32)
      self.assertEqual(f(jnp.zeros((2, 0), jnp.int32)).dtype, jnp.float32)
      self.assertEqual(f(jnp.zeros((2, 0), jnp.bfloat16)).dtype, jnp.bfloat16)

  def test_transformations(self):
    for f in [jax.nn.softmax, jax.nn.log_softmax]:
      x = jnp.zeros((3, 0))
      self.assertEqual(jax.jit(f)(x).shape, (3, 0))
      self.assertEqual(jax.grad(lambda x: f(x).sum())(x).shape, (3, 0))
      self.assertEqual(jax.vmap(f)(x).shape, (3, 0))


class EinsumDefaultPathTest(jtu.JaxTestCase):
  """`jnp.einsum` searches contraction paths with optimize="auto" by default,
  not with the factorial "optimal" search."""

  def _chain(self, n):
    rng = np.random.default_rng(0)
    dims = [3, 5, 4, 6, 2, 7, 3, 5, 4, 6]
    mats = [rng.standard_normal((dims[i], dims[i + 1])).astype(np.float32)
            for i in range(n)]
    args = [x for i, m in enumerate(mats) for x in (m, (i, i + 1))]
    return mats, args + [(0, n)]

  def test_default_is_auto(self):
    # 9 operands: "auto" (opt_einsum's branch-1 search) and "optimal" pick
    # different paths here, so the default's jaxpr tells which one ran.
    _, args = self._chain(9)
    default = jax.make_jaxpr(lambda: jnp.einsum(*args))()
    auto = jax.make_jaxpr(lambda: jnp.einsum(*args, optimize="auto"))()
    self.assertEqual(str(default), str(auto))

  def test_results(self):
    for n in [2, 4, 9]:
      mats, args = self._chain(n)
      expected = np.linalg.multi_dot([m.astype(np.float64) for m in mats])
      # A TPU multiplies float32 in bfloat16 passes unless told otherwise
      # (at default precision, the 9-matrix chain was off by 20 %).
      with jax.default_matmul_precision("float32"):
        got = np.asarray(jnp.einsum(*args), np.float64)
      tol = 1e-5 if jtu.device_under_test() == "cpu" else 1e-2
      self.assertAllClose(got, expected, rtol=tol, atol=tol)

  def test_optimize_true_is_optimal(self):
    _, args = self._chain(4)
    self.assertEqual(
        str(jax.make_jaxpr(lambda: jnp.einsum(*args, optimize=True))()),
        str(jax.make_jaxpr(lambda: jnp.einsum(*args, optimize="optimal"))()))


class VarDdofTest(jtu.JaxTestCase):
  """`jnp.var`/`jnp.std` with ddof at or above the count follow NumPy: inf
  (or NaN for no spread), never a negative variance."""
  superseded_patch = "0090"

  @jtu.ignore_warning(category=RuntimeWarning, message="Degrees of freedom")
  def test_ddof_above_count(self):
    x = np.arange(3.0, dtype=np.float32)
    ones = np.ones(3, np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
      for ddof in [2, 3, 4, 5]:
        with self.subTest(ddof=ddof):
          self.assertAllClose(jnp.var(x, ddof=ddof), np.var(x, ddof=ddof),
                              check_dtypes=False)
          self.assertAllClose(jnp.std(x, ddof=ddof), np.std(x, ddof=ddof),
                              check_dtypes=False)
          self.assertAllClose(jnp.var(ones, ddof=ddof),
                              np.var(ones, ddof=ddof), check_dtypes=False)

  @jtu.ignore_warning(category=RuntimeWarning, message="Degrees of freedom")
  def test_where(self):
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    where = np.array([[True, True, False], [True, False, False]])
    with np.errstate(divide="ignore", invalid="ignore"):
      expected = np.var(x, axis=1, ddof=2, where=where)
    self.assertAllClose(jnp.var(x, axis=1, ddof=2, where=where), expected,
                        check_dtypes=False)


class IndicesDefaultDtypeTest(jtu.JaxTestCase):
  """`jnp.indices` defaults to the default integer type (int64 with x64)."""

  def test_x64(self):
    with enable_x64():
      self.assertEqual(jnp.indices((2, 3)).dtype, np.int64)
      self.assertEqual(jnp.indices((2, 3), sparse=True)[1].dtype, np.int64)
      self.assertEqual(jnp.indices((2,), dtype=np.int16).dtype, np.int16)

  def test_default(self):
    expected = jax.dtypes.canonicalize_dtype(np.int64)
    self.assertEqual(jnp.indices((2, 3)).dtype, expected)
    self.assertArraysEqual(jnp.indices((2, 3)),
                           np.indices((2, 3)).astype(expected))


class EmptyEllipsisIndexingTest(jtu.JaxTestCase):
  """Advanced indices on either side of an Ellipsis that stands for no axes
  are not adjacent: their axes go first, as in NumPy."""

  def test_get_and_set(self):
    x = np.arange(60).reshape(3, 4, 5)
    a = np.array([0, 1])
    for idx in [(slice(None), a, ..., a), (slice(None), 1, ..., a),
                (a, ..., a), (slice(None), ..., a, a), (a, a, ...)]:
      with self.subTest(idx=idx):
        self.assertArraysEqual(jnp.asarray(x)[idx], x[idx])
        expected = x.copy()
        expected[idx] = -1
        self.assertArraysEqual(jnp.asarray(x).at[idx].set(-1), expected)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
