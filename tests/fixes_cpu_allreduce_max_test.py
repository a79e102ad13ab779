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
"""Float max and min reductions across CPU devices (patch 0145).

jaxlib 0.4.26's CPU all-reduce starts a MAX from numeric_limits<T>::min()
and a MIN from numeric_limits<T>::max(): for floats, the smallest positive
normal and the largest finite value. A sharded `jnp.max` of negative floats
gave 1.1754944e-38, a `pmin` of infinities 3.4028235e+38. Every answer here
is checked against NumPy.
"""
from __future__ import annotations

from functools import partial
import os
from unittest import mock

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
import jax.experimental
from jax._src import test_util as jtu
from jax._src.interpreters import mlir
from jax._src.lax import lax as lax_internal
from jax._src.lax import parallel as lax_parallel
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

jax.config.parse_flags_with_absl()


def _cases(dtype, n: int) -> dict[str, np.ndarray]:
  finfo = jnp.finfo(dtype)
  negative = -np.arange(1, n + 1, dtype=np.float32)
  with_nan = negative.copy()
  with_nan[n // 2] = np.nan
  with_negative_nan = negative.copy()
  with_negative_nan[n - 1] = -np.nan
  zeros = np.full(n, -0., np.float32)
  zeros[n // 3] = 0.
  infs = negative.copy()
  infs[[1, n - 2]] = [-np.inf, np.inf]
  cases = {
      "all_negative": negative,
      "mixed": np.roll(negative + n // 2, 5),
      "all_minus_inf": np.full(n, -np.inf, np.float32),
      "all_plus_inf": np.full(n, np.inf, np.float32),
      "infs": infs,
      "nan": with_nan,
      "negative_nan": with_negative_nan,
      "all_nan": np.full(n, np.nan, np.float32),
      "signed_zeros": zeros,
      "all_minus_zero": np.full(n, -0., np.float32),
  }
  cases = {name: x.astype(dtype) for name, x in cases.items()}
  if dtype == jnp.bfloat16:
    # XLA:CPU flushes bfloat16 subnormals in its float ops, on one device too.
    return cases
  subnormal = np.array(finfo.smallest_subnormal, dtype)
  steps = np.arange(1, n + 1).astype(dtype)
  cases["negative_subnormals"] = -steps * subnormal
  cases["subnormals"] = np.roll(steps * subnormal - 3 * subnormal, 3)
  cases["largest"] = np.full(n, -finfo.max, dtype)
  return cases


def _expected(np_reduce, x: np.ndarray, **kwargs) -> np.ndarray:
  return np_reduce(x.astype(np.float64), **kwargs)


class CpuAllReduceMaxTest(jtu.JaxTestCase):

  def setUp(self):
    super().setUp()
    if jax.device_count() < 8:
      self.skipTest("needs 8 CPU devices")
    self.mesh = Mesh(np.array(jax.devices()[:8]), ("x",))

  def assertSame(self, actual, expected, name=""):
    actual = np.asarray(actual).astype(np.float64)
    np.testing.assert_array_equal(actual, expected, err_msg=name)
    if name == "all_minus_zero":
      np.testing.assert_array_equal(np.signbit(actual), np.signbit(expected),
                                    err_msg=name)

  def _check_jit_reductions(self, dtype):
    sharding = NamedSharding(self.mesh, P("x"))
    for n in (16, 13):
      if n % 8:
        # Uneven: sharded inside the program.
        shard = partial(jax.lax.with_sharding_constraint, shardings=sharding)
      else:
        shard = lambda x: x
      jit_max = jax.jit(lambda x: jnp.max(shard(x)))
      jit_min = jax.jit(lambda x: jnp.min(shard(x)))
      for name, x in _cases(dtype, n).items():
        arg = jax.device_put(x, sharding) if n % 8 == 0 else x
        self.assertSame(jit_max(arg), _expected(np.max, x), f"max {n} {name}")
        self.assertSame(jit_min(arg), _expected(np.min, x), f"min {n} {name}")

  @parameterized.parameters(jnp.float16, jnp.bfloat16, jnp.float32)
  def test_sharded_jit_max_min(self, dtype):
    self._check_jit_reductions(dtype)

  def test_sharded_jit_max_min_float64(self):
    with jax.experimental.enable_x64():
      self._check_jit_reductions(np.float64)

  def test_eager_max_of_sharded_array(self):
    x = jax.device_put(-jnp.arange(1., 17.), NamedSharding(self.mesh, P("x")))
    self.assertEqual(float(jnp.max(x)), -1.)
    self.assertEqual(float(jnp.min(-x)), 1.)
    self.assertEqual(float(x.max()), -1.)

  def test_mesh_2x4_reductions_over_one_axis(self):
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("a", "b"))
    x = -np.arange(1., 33., dtype=np.float32).reshape(4, 8)
    x[1, 3] = -np.inf
    x[2, 5] = np.nan
    arg = jax.device_put(x, NamedSharding(mesh, P("a", "b")))
    for axis in (0, 1):
      self.assertSame(jax.jit(partial(jnp.max, axis=axis))(arg),
                      _expected(np.max, x, axis=axis))
      self.assertSame(jax.jit(partial(jnp.min, axis=axis))(-arg),
                      _expected(np.min, -x, axis=axis))

  def test_other_max_reductions(self):
    x = -np.arange(1., 17., dtype=np.float32)
    arg = jax.device_put(x, NamedSharding(self.mesh, P("x")))
    self.assertEqual(
        float(jax.jit(lambda a: jnp.max(a, where=a < -2, initial=-100.))(arg)),
        -3.)
    self.assertEqual(float(jax.jit(partial(jnp.max, initial=-100.))(arg)), -1.)
    self.assertEqual(float(jax.jit(jnp.nanmax)(arg.at[0].set(np.nan))), -2.)
    self.assertEqual(float(jax.jit(jnp.nanmin)(-arg)), 1.)
    self.assertEqual(float(jax.jit(jnp.amax)(arg)), -1.)
    self.assertEqual(
        float(jax.jit(lambda a: lax.reduce(a, -np.inf, lax.max, (0,)))(arg)),
        -1.)
    self.assertEqual(
        float(jax.jit(lambda a: lax.reduce(a, np.float32(-100.), lax.max,
                                           (0,)))(arg)), -1.)
    self.assertEqual(
        float(jax.jit(lambda a: lax.reduce(
            a, -np.inf, lambda p, q: jnp.maximum(q, p), (0,)))(arg)), -1.)
    self.assertEqual(
        float(jax.jit(lambda a: lax.reduce(
            a, np.inf, jax.jit(jnp.minimum), (0,)))(-arg)), 1.)
    self.assertAllClose(jax.jit(jax.grad(jnp.max))(arg),
                        np.eye(16, dtype=np.float32)[0])
    self.assertAllClose(jax.jit(jax.nn.logsumexp)(arg * 100.),
                        jax.nn.logsumexp(x * 100.))

  def test_empty_reduction_is_the_identity(self):
    arg = jax.device_put(np.zeros((8, 0), np.float32),
                         NamedSharding(self.mesh, P("x")))
    reduce_max = lambda a: lax.reduce(a, -np.inf, lax.max, (0, 1))
    reduce_min = lambda a: lax.reduce(a, np.inf, lax.min, (0, 1))
    self.assertSame(jax.jit(reduce_max)(arg), np.float64(-np.inf))
    self.assertSame(jax.jit(reduce_min)(arg), np.float64(np.inf))

  def test_argmax_argmin(self):
    x = np.full(16, -5., np.float32)
    x[11] = -1.
    arg = jax.device_put(x, NamedSharding(self.mesh, P("x")))
    self.assertEqual(int(jax.jit(jnp.argmax)(arg)), 11)
    self.assertEqual(int(jax.jit(jnp.argmin)(-arg)), 11)
    self.assertEqual(int(jax.jit(jnp.argmax)(arg.at[6].set(np.nan))), 6)

  @parameterized.parameters(jnp.float16, jnp.bfloat16, jnp.float32)
  def test_pmap_pmax_pmin(self, dtype):
    pmax = jax.pmap(lambda v: lax.pmax(v, "i"), axis_name="i")
    pmin = jax.pmap(lambda v: lax.pmin(v, "i"), axis_name="i")
    for name, x in _cases(dtype, 8).items():
      self.assertSame(pmax(x), np.full(8, _expected(np.max, x)), f"pmax {name}")
      self.assertSame(pmin(x), np.full(8, _expected(np.min, x)), f"pmin {name}")

  def test_pmap_pmax_mixed_operands_and_groups(self):
    x = -np.arange(1., 9., dtype=np.float32)
    i = -np.arange(1, 9, dtype=np.int32)
    out_x, out_i = jax.pmap(lambda v, w: lax.pmax((v, w), "i"),
                            axis_name="i")(x, i)
    self.assertSame(out_x, np.full(8, -1.))
    self.assertSame(out_i, np.full(8, -1))
    groups = [[0, 1, 2, 3], [4, 5, 6, 7]]
    out = jax.pmap(lambda v: lax.pmax(v, "i", axis_index_groups=groups),
                   axis_name="i")(x)
    self.assertSame(out, np.repeat([-1., -5.], 4))

  def test_shard_map_pmax_pmin(self):
    x = -np.arange(1., 17., dtype=np.float32)
    x[3] = -np.inf
    arg = jax.device_put(x, NamedSharding(self.mesh, P("x")))
    f = shard_map(lambda v: lax.pmax(v, "x"), self.mesh, P("x"), P("x"),
                  check_rep=False)
    self.assertSame(f(arg), np.tile(x.reshape(8, 2).max(0), 8))
    g = jax.jit(shard_map(lambda v: lax.pmin(jnp.min(v, keepdims=True), "x"),
                          self.mesh, P("x"), P(), check_rep=False))
    self.assertSame(g(-arg), np.array([1.]))

  def test_single_device_and_other_platforms_lower_as_before(self):
    try:
      from jax.experimental import export as jax_export  # pylint: disable=g-import-not-at-top
    except ImportError as e:  # jax 0.4.26 without flatbuffers
      self.skipTest(str(e))
    x = jnp.arange(6., dtype=jnp.float32).reshape(2, 3)
    def lowered():
      texts = [jax.jit(lambda v: jnp.max(v, axis=1)).lower(x),
               jax.jit(lambda v: lax.reduce(v, -np.inf, jnp.maximum, (1,))
                       ).lower(x),
               jax.pmap(lambda v: lax.pmax(v, "i"), axis_name="i",
                        devices=jax.devices()[:1]).lower(x[:1])]
      texts = [t.compiler_ir().operation.get_asm(enable_debug_info=True)
               for t in texts]
      for platforms in [("tpu",), ("cuda",), ("cpu", "tpu")]:
        exported = jax_export.export(jax.jit(lambda v: jnp.min(v, axis=1)),
                                     lowering_platforms=platforms)(x)
        texts.append(exported.mlir_module())
      return texts
    texts = []
    # The rules of jax 0.4.26, from the same private functions.
    rules_0426 = {
        lax_internal.reduce_max_p: partial(
            lax_internal._unary_reduce_lower, mlir.max_hlo,
            lax_internal._get_max_identity),
        lax_internal.reduce_min_p: partial(
            lax_internal._unary_reduce_lower, mlir.min_hlo,
            lax_internal._get_min_identity),
        lax_internal.reduce_p: lax_internal._reduce_lower,
        lax_parallel.pmax_p: partial(lax_parallel._allreduce_lowering,
                                     lax.max_p, lax_internal._reduce_max),
    }
    for rules in ({}, rules_0426):
      with mock.patch.dict(mlir._lowerings, rules):
        texts.append(lowered())
    self.assertEqual(texts[0], texts[1])

if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
