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
"""`lax.reduce` with a max or min computation across CPU devices (patch 0145).

XLA inlines calls and drops dead code in a reduction's computation before
jaxlib 0.4.26's CPU all-reduce reads it as a MAX (MIN), which it starts from
the smallest positive normal (largest finite) float: a jitted `lax.reduce`
of an array sharded over 8 CPU devices, whose computation is a max wrapped
in `jax.checkpoint`, `custom_jvp`, `custom_vjp` or beside dead code, gave
1.1754944e-38 for negative values. Every answer here is checked against
NumPy.
"""
from __future__ import annotations

import os

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS",
                                                                ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=8")

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import test_util as jtu
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

jax.config.parse_flags_with_absl()


@jax.custom_jvp
def _custom_jvp_max(a, b):
  return lax.max(a, b)

_custom_jvp_max.defjvp(lambda primals, tangents: (
    _custom_jvp_max(*primals), tangents[0]))


@jax.custom_vjp
def _custom_vjp_min(a, b):
  return jnp.minimum(a, b)

_custom_vjp_min.defvjp(lambda a, b: (_custom_vjp_min(a, b), None),
                       lambda _, g: (g, g))


def _max_beside_dead_code(a, b):
  _ = a * b
  return lax.max(a, b)


def _min_beside_dead_code(a, b):
  _ = a + b
  return lax.min(b, a)


_MAX_COMPUTATIONS = {
    "jnp_maximum": lambda a, b: jnp.maximum(a, b),
    "lax_max": lax.max,
    "dead_code": _max_beside_dead_code,
    "checkpoint": jax.checkpoint(lax.max),
    "custom_jvp": _custom_jvp_max,
    "jit_of_checkpoint": jax.jit(jax.checkpoint(lambda a, b: jnp.maximum(b, a))),
}

_MIN_COMPUTATIONS = {
    "jnp_minimum": lambda a, b: jnp.minimum(a, b),
    "dead_code": _min_beside_dead_code,
    "custom_vjp": _custom_vjp_min,
    "checkpoint": jax.checkpoint(lax.min),
}


def _cases() -> dict[str, np.ndarray]:
  n = 16
  negative = -np.arange(1., n + 1., dtype=np.float32)
  with_nan = negative.copy()
  with_nan[5] = np.nan
  zeros = np.full(n, -0., np.float32)
  subnormal = np.float32(np.finfo(np.float32).smallest_subnormal)
  return {
      "all_negative": negative,
      "all_plus_inf": np.full(n, np.inf, np.float32),
      "subnormals": np.arange(1., n + 1., dtype=np.float32) * subnormal,
      "nan": with_nan,
      "all_minus_zero": zeros,
  }


class ReduceComputationMaxTest(jtu.JaxTestCase):

  def setUp(self):
    super().setUp()
    if jax.device_count() < 8:
      self.skipTest("needs 8 CPU devices")
    self.sharding = NamedSharding(Mesh(np.array(jax.devices()[:8]), ("x",)),
                                  P("x"))

  def assertSame(self, actual, expected, name):
    actual = np.asarray(actual).astype(np.float64)
    expected = np.asarray(expected).astype(np.float64)
    np.testing.assert_array_equal(actual, expected, err_msg=name)
    np.testing.assert_array_equal(np.signbit(actual) | np.isnan(actual),
                                  np.signbit(expected) | np.isnan(expected),
                                  err_msg=name)

  def _check(self, computations, np_reduce, init):
    for name, computation in computations.items():
      # A traced initial value keeps even `lax.max` a general reduction.
      f = jax.jit(lambda x, i, c=computation: lax.reduce(x, i, c, (0,)))
      for case, x in _cases().items():
        arg = jax.device_put(x, self.sharding)
        self.assertSame(f(arg, np.float32(init)), np_reduce(x),
                        f"{name} {case}")

  def test_max_computations(self):
    self._check(_MAX_COMPUTATIONS, np.max, -np.inf)

  def test_min_computations(self):
    self._check(_MIN_COMPUTATIONS, np.min, np.inf)

  @parameterized.parameters(jnp.float16, jnp.bfloat16)
  def test_half_precision_with_a_constant_initial_value(self, dtype):
    x = -np.arange(1., 33., dtype=np.float32).reshape(8, 4).astype(dtype)
    arg = jax.device_put(x, self.sharding)
    f = jax.jit(lambda v: lax.reduce(v, dtype(-np.inf), _max_beside_dead_code,
                                     (0, 1)))
    self.assertSame(f(arg), np.max(x), "all dimensions")
    g = jax.jit(lambda v: lax.reduce(v, dtype(-50.), jax.checkpoint(lax.max),
                                     (0,)))
    self.assertSame(g(arg), np.max(x, axis=0), "dimension 0")

  def test_a_sum_is_left_alone(self):
    x = np.tile(np.array([-3., 5., -0., 2.], np.float32), 4)
    f = jax.jit(lambda v, i: lax.reduce(v, i, lax.add, (0,)))
    self.assertSame(f(jax.device_put(x, self.sharding), np.float32(0.)),
                    np.float32(16.),
                    "sum")


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
