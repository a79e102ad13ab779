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
"""jax._src.test_util.rand_like, as upstream's later test files call it
(patch 0013-test-util-rand-like.patch)."""
from __future__ import annotations

from functools import partial

from absl.testing import absltest
import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax._src import test_util as jtu


class RandLikeTest(jtu.JaxTestCase):

  def test_real_array_is_standard_normal_of_its_shape_and_dtype(self):
    x = np.zeros((3, 4), np.float32)
    got = jtu.rand_like(np.random.RandomState(7), x)
    want = np.random.RandomState(7).randn(3, 4).astype(np.float32)
    self.assertIsInstance(got, np.ndarray)
    self.assertEqual(got.dtype, np.float32)
    np.testing.assert_array_equal(got, want)

  def test_jax_array_and_low_precision_dtype(self):
    x = jnp.ones((5,), jnp.float16)
    got = jtu.rand_like(np.random.RandomState(1), x)
    self.assertEqual(got.dtype, np.float16)
    np.testing.assert_array_equal(
        got, np.random.RandomState(1).randn(5).astype(np.float16))

  def test_complex_draws_real_then_imaginary_part(self):
    x = np.zeros((2, 3), np.complex64)
    got = jtu.rand_like(np.random.RandomState(3), x)
    rng = np.random.RandomState(3)
    re = rng.randn(2, 3).astype(np.complex64)
    im = rng.randn(2, 3).astype(np.complex64)
    self.assertEqual(got.dtype, np.complex64)
    np.testing.assert_array_equal(got, re + np.complex64(1j) * im)
    self.assertTrue(np.all(got.imag != 0))

  def test_python_scalar_gives_python_scalar(self):
    got = jtu.rand_like(np.random.RandomState(0), 2.5)
    self.assertIsInstance(got, float)
    self.assertEqual(got, float(np.random.RandomState(0).randn()))

  def test_successive_calls_advance_the_generator(self):
    rng = np.random.RandomState(0)
    a = jtu.rand_like(rng, np.zeros(4, np.float32))
    b = jtu.rand_like(rng, np.zeros(4, np.float32))
    self.assertFalse(np.array_equal(a, b))

  def test_upstream_style_jvp_check_through_reduce_window(self):
    # The pattern of upstream's later lax_test: tangents from rand_like via
    # tree_map, a generic reduce_window's jvp against the monoid one.
    operand = np.random.RandomState(0).randn(4, 6).astype(np.float32)
    tangent = jax.tree.map(partial(jtu.rand_like, np.random.RandomState(0)),
                           operand)
    def f(op, x):
      return lax.reduce_window(x, np.float32(0), op, (2, 2), (1, 1), "VALID")
    generic = jax.jvp(partial(f, lambda a, b: a + b), (operand,), (tangent,))
    monoid = jax.jvp(partial(f, lax.add), (operand,), (tangent,))
    self.assertAllClose(generic, monoid, rtol=1e-6, atol=1e-6)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
