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
"""jax.numpy and jax.scipy fixes found by the sweep of upstream's history
(patches 0101 to 0106), one test class per patch, each against NumPy or
SciPy where they agree across the versions the tests run with (NumPy 1.26
and 2.x, SciPy 1.13 and 1.17), else against values written out."""
from __future__ import annotations

from absl.testing import absltest
import numpy as np

import jax
import jax.numpy as jnp
from jax._src import test_util as jtu

jax.config.parse_flags_with_absl()


class UniqueInverseWithAxisTest(jtu.JaxTestCase):
  """0101: with an axis, unique's inverse is 1-D, as in NumPy."""
  superseded_patch = "0101"

  def test_inverse_shape_along_axis(self):
    x = np.array([[1, 2], [1, 2], [3, 4]])
    for axis in [0, 1, -1]:
      values, inverse = jnp.unique(x, axis=axis, return_inverse=True)
      expected_values, expected_inverse = np.unique(
          x, axis=axis, return_inverse=True)
      self.assertEqual(inverse.shape, (x.shape[axis],))
      self.assertArraysEqual(inverse, expected_inverse, check_dtypes=False)
      self.assertArraysEqual(jnp.take(values, inverse, axis=axis), x)

  def test_all_outputs_three_dimensional(self):
    x = np.array([[[1, 2]], [[0, 5]], [[1, 2]]])
    got = jnp.unique(x, return_index=True, return_inverse=True,
                     return_counts=True, axis=0)
    expected = np.unique(x, return_index=True, return_inverse=True,
                         return_counts=True, axis=0)
    for g, e in zip(got, expected):
      self.assertArraysEqual(g, e, check_dtypes=False)
    got = jnp.unique(x, return_inverse=True, axis=2, size=3, fill_value=0)
    self.assertArraysEqual(got[1], np.array([0, 1]), check_dtypes=False)


class CumulativeDtypeBoolTest(jtu.JaxTestCase):
  """0102: cumsum and cumprod with dtype=bool are logical or and and scans."""
  superseded_patch = "0102"

  def test_against_numpy(self):
    inputs = [
        np.array([0, 1, 2, 0, -1]),
        np.array([1, 2, 0, 3], np.int8),
        np.array([0.5, 0.0, np.nan, 2.0], np.float32),
        np.array([0j, 1j, 0j], np.complex64),
        np.array([True, False, True]),
        np.array([[0, 1, 0], [2, 0, 0]]),
        np.zeros((0,), np.int32),
    ]
    for name in ["cumsum", "cumprod", "nancumsum", "nancumprod"]:
      for x in inputs:
        for axis in [None, -1]:
          got = getattr(jnp, name)(x, axis=axis, dtype=bool)
          expected = getattr(np, name)(x, axis=axis, dtype=bool)
          self.assertArraysEqual(got, expected, err_msg=f"{name} {x}")

  def test_long_scan_under_jit(self):
    # 300 ones: a count kept in an 8-bit type would wrap to False.
    x = np.ones(300, np.int8)
    self.assertTrue(jax.jit(lambda x: jnp.cumsum(x, dtype=bool))(x)[-1])
    x[150] = 0
    self.assertArraysEqual(
        jax.jit(lambda x: jnp.cumprod(x, dtype=bool))(x),
        np.cumprod(x, dtype=bool))

  def test_other_dtypes_unchanged(self):
    x = np.array([True, True, False])
    self.assertArraysEqual(jnp.cumsum(x), np.array([1, 2, 2]),
                           check_dtypes=False)
    self.assertArraysEqual(jnp.cumprod(np.array([1, 2, 3]), dtype=np.float32),
                           np.array([1., 2., 6.], np.float32))


class GammaAtPolesTest(jtu.JaxTestCase):
  """0103: gamma is NaN at the negative integers and -inf, -inf at -0.

  SciPy 1.15 and later (the fork's test venv has 1.17) give these values;
  SciPy 1.13 gave inf at every pole and -inf at -inf, so the values are
  written out here."""
  superseded_patch = "0103"

  def test_poles(self):
    x = np.array([-0.0, 0.0, -1.0, -2.0, -7.0, -1e10, -np.inf, np.inf,
                  np.nan], np.float32)
    expected = np.array([-np.inf, np.inf, np.nan, np.nan, np.nan, np.nan,
                         np.nan, np.inf, np.nan], np.float32)
    self.assertArraysEqual(jax.scipy.special.gamma(x), expected)
    self.assertArraysEqual(jax.jit(jax.scipy.special.gamma)(x), expected)

  def test_values_between_poles(self):
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.0, 4.0, 5.5], np.float32)
    # scipy.special.gamma(x.astype(np.float64)).
    expected = np.array([-0.9453087205, 2.3632718012, -3.5449077018,
                         1.7724538509, 1.0, 6.0, 52.3427777846], np.float32)
    self.assertAllClose(jax.scipy.special.gamma(x), expected, rtol=2e-6)


class FabsComplexTest(jtu.JaxTestCase):
  """0104: jnp.fabs of a complex input raises TypeError, as np.fabs."""
  superseded_patch = "0104"

  def test_complex_raises(self):
    for x in [np.array([3 + 4j]), np.complex64(1j), 2j]:
      with self.assertRaises(TypeError):
        np.fabs(x)
      with self.assertRaisesRegex(TypeError, "fabs"):
        jnp.fabs(x)
      with self.assertRaises(TypeError):
        jax.jit(jnp.fabs)(x)

  def test_real_inputs_unchanged(self):
    for x in [np.array([-3, 2]), np.array([-1.5, np.nan], np.float32),
              np.array([True, False])]:
      self.assertArraysEqual(jnp.fabs(x), np.fabs(x), check_dtypes=False)


class TriIndicesFromTwoDimensionalTest(jtu.JaxTestCase):
  """0105: triu_indices_from and tril_indices_from take 2-D arrays only."""
  superseded_patch = "0105"

  def test_not_two_dimensional_raises(self):
    for name in ["triu_indices_from", "tril_indices_from"]:
      for shape in [(), (3,), (2, 3, 4)]:
        arr = np.ones(shape)
        with self.assertRaises(ValueError):
          getattr(np, name)(arr)
        with self.assertRaisesRegex(ValueError, "2-D"):
          getattr(jnp, name)(arr)

  def test_two_dimensional_unchanged(self):
    arr = np.ones((3, 5))
    for name in ["triu_indices_from", "tril_indices_from"]:
      for k in [-1, 0, 2]:
        got = getattr(jnp, name)(arr, k=k)
        expected = getattr(np, name)(arr, k=k)
        for g, e in zip(got, expected):
          self.assertArraysEqual(g, e, check_dtypes=False)


class BincountBoolTest(jtu.JaxTestCase):
  """0106: jnp.bincount counts False and True as 0 and 1, as NumPy."""
  superseded_patch = "0106"

  def test_against_numpy(self):
    x = np.array([True, False, True, True])
    w = np.array([0.5, 1.0, 2.0, 4.0], np.float32)
    self.assertArraysEqual(jnp.bincount(x), np.bincount(x),
                           check_dtypes=False)
    self.assertArraysEqual(jnp.bincount(x, minlength=4),
                           np.bincount(x, minlength=4), check_dtypes=False)
    self.assertAllClose(jnp.bincount(x, weights=w),
                        np.bincount(x, weights=w).astype(np.float32))
    self.assertArraysEqual(jnp.bincount(np.array([False])),
                           np.bincount(np.array([False])), check_dtypes=False)
    self.assertEqual(jnp.bincount(np.zeros(0, bool)).shape, (0,))

  def test_traced_with_length(self):
    x = np.array([[True, False], [True, True]])
    got = jax.jit(jax.vmap(lambda x: jnp.bincount(x, length=3)))(x)
    self.assertArraysEqual(got, np.array([[1, 1, 0], [0, 2, 0]]),
                           check_dtypes=False)

  def test_other_dtypes_still_rejected(self):
    with self.assertRaises(TypeError):
      jnp.bincount(np.array([1.0, 2.0]))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
