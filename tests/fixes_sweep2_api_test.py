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
"""Bugs of jax 0.4.26's shard_map, AOT calls and transformations (issue 62).

Each test fails on upstream jax 0.4.26 and passes on the fork; the upstream
release that fixed the bug and the fork's patch are named in its docstring.
"""
from __future__ import annotations

import os
if "--xla_force_host_platform_device_count" not in os.environ.get(
    "XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=8")

from functools import partial

from absl.testing import absltest
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import core
from jax._src import test_util as jtu
from jax._src.interpreters import mlir
from jax.experimental import multihost_utils
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


def _mesh(shape, names):
  devices = jax.devices()[:int(np.prod(shape))]
  return Mesh(np.array(devices).reshape(shape), names)


class ShardMapStaticArgsTest(jtu.JaxTestCase):
  """A None entry of in_specs marks its arguments static (0110; jax 0.4.34)."""

  def setUp(self):
    super().setUp()
    if jax.device_count() < 2:
      self.skipTest("needs 2 devices")

  def test_dict_argument(self):
    mesh = _mesh((2,), ("x",))
    def body(x, cfg):
      return x * cfg["k"] if cfg["mode"] == "mul" else x + cfg["k"]
    f = shard_map(body, mesh, in_specs=(P("x"), None), out_specs=P("x"))
    x = jnp.arange(4.)
    self.assertAllClose(f(x, {"k": 2., "mode": "mul"}), x * 2.)
    g = jax.jit(lambda x, k: f(x, {"k": k, "mode": "add"}))
    self.assertAllClose(g(x, 3.), x + 3.)
    dx, dk = jax.grad(lambda x, k: f(x, {"k": k, "mode": "mul"}).sum(),
                      argnums=(0, 1))(x, 3.)
    self.assertAllClose(dx, jnp.full(4, 3.))
    self.assertAllClose(dk, x.sum())

  def test_static_between_sharded_and_errors(self):
    mesh = _mesh((2,), ("x",))
    f = shard_map(lambda a, c, b: a + b * c[0], mesh,
                  in_specs=(P("x"), None, P("x")), out_specs=P("x"))
    x = jnp.arange(4.)
    self.assertAllClose(f(x, [10., "s"], jnp.ones(4)), x + 10.)
    with self.assertRaisesRegex(ValueError, r"args\[2\] of shape float32\[3\]"):
      f(x, [10., "s"], jnp.ones(3))


class ShardMapReplicationRulesTest(jtu.JaxTestCase):

  def setUp(self):
    super().setUp()
    if jax.device_count() < 4:
      self.skipTest("needs 4 devices")

  def test_pmax_pmin(self):
    """check_rep=True knows pmax/pmin replicate (0111; jax 0.4.34)."""
    mesh = _mesh((2, 2), ("x", "y"))
    x = jnp.arange(1., 17.).reshape(4, 4)

    @partial(shard_map, mesh=mesh, in_specs=P("x", "y"), out_specs=P())
    def f(x):
      return lax.pmax(x, ("x", "y")) + lax.pmin(x, ("x", "y"))
    blocks = x.reshape(2, 2, 2, 2).transpose(0, 2, 1, 3)
    self.assertAllClose(f(x), blocks.max((0, 1)) + blocks.min((0, 1)))

    @partial(shard_map, mesh=mesh, in_specs=P("x", "y"),
             out_specs=P(None, "y"))
    def g(x):
      return lax.pmax(x, "x")
    self.assertAllClose(g(x), jnp.maximum(x[:2], x[2:]))

    @partial(shard_map, mesh=mesh, in_specs=P("x", "y"), out_specs=P())
    def h(x):
      return lax.pmax(x, "x")  # still varies over "y"
    with self.assertRaisesRegex(ValueError, "require replication"):
      h(x)

  def _cg(self, in_spec, out_spec, check_rep):
    mesh = _mesh((2,), ("x",))
    @partial(shard_map, mesh=mesh, in_specs=(in_spec, P()),
             out_specs=out_spec, check_rep=check_rep)
    def f(b, a):
      return jax.scipy.sparse.linalg.cg(lambda v: a * v + 0.5 * v, b)[0]
    return f

  def test_custom_linear_solve(self):
    """check_rep=True has a rule for custom_linear_solve (0112; 0.4.31)."""
    b, a = jnp.arange(1., 5.), jnp.float32(2.)
    f = jax.jit(self._cg(P(), P(), True))
    self.assertAllClose(f(b, a), b / 2.5)
    f = self._cg(P("x"), P("x"), True)
    jvp = jax.jit(lambda b, a: jax.jvp(f, (b, a), (jnp.ones(4), 1.)))
    x, t = jvp(b, a)
    self.assertAllClose(x, b / 2.5)
    self.assertAllClose(t, 1. / 2.5 - b / 2.5 ** 2)
    f_norep = self._cg(P("x"), P("x"), False)
    grad = lambda f: jax.jit(jax.grad(lambda b, a: (f(b, a) ** 2).sum(),
                                      argnums=(0, 1)))
    self.assertAllClose(grad(f)(b, a), grad(f_norep)(b, a))

  def test_custom_linear_solve_collective_in_matvec(self):
    mesh = _mesh((2,), ("x",))
    def dist(check_rep):
      @partial(shard_map, mesh=mesh, in_specs=P("x"), out_specs=P("x"),
               check_rep=check_rep)
      def f(b):
        matvec = lambda v: 3. * v + lax.psum(v.sum(), "x")
        return lax.custom_linear_solve(matvec, b, lambda mv, b: b / 3.,
                                       symmetric=True)
      return f
    b = jnp.arange(1., 5.)
    self.assertAllClose(dist(True)(b), b / 3.)
    loss = lambda f: lambda b: (f(b) ** 2).sum()
    self.assertAllClose(jax.grad(loss(dist(True)))(b),
                        jax.grad(loss(dist(False)))(b))


class AotCommittedDeviceTest(jtu.JaxTestCase):
  """A compiled call rejects arrays on other devices (0113; jax 0.4.32)."""

  def setUp(self):
    super().setUp()
    if jax.device_count() < 4:
      self.skipTest("needs 4 devices")

  def test_single_device(self):
    d0, d1 = jax.devices()[:2]
    x0 = jax.device_put(jnp.arange(8.), d0)
    x1 = jax.device_put(jnp.arange(8.), d1)
    compiled = jax.jit(lambda x: x * 2).lower(x0).compile()
    self.assertAllClose(compiled(x0), x0 * 2)
    self.assertAllClose(compiled(jnp.arange(8.)), x0 * 2)  # uncommitted
    with self.assertRaisesRegex(ValueError, "does not match the sharding"):
      compiled(x1)

  def test_other_mesh(self):
    x = jnp.arange(8.)
    put = lambda devices, name="x": jax.device_put(
        x, NamedSharding(Mesh(np.array(devices), (name,)), P(name)))
    devices = jax.devices()
    compiled = jax.jit(lambda x: x + 1).lower(put(devices[:2])).compile()
    self.assertAllClose(compiled(put(devices[:2], "y")), x + 1)
    for other in (devices[2:4], devices[1::-1]):
      with self.assertRaisesRegex(ValueError, "does not match the sharding"):
        compiled(put(other))


class ProcessAllgatherTest(jtu.JaxTestCase):
  """One process stacks as several do (0114; jax 0.5.0)."""

  def test_shapes(self):
    x = np.arange(4.)
    self.assertEqual(multihost_utils.process_allgather(x).shape, (1, 4))
    self.assertEqual(
        multihost_utils.process_allgather(x, tiled=True).shape, (4,))
    self.assertEqual(
        multihost_utils.process_allgather(np.float32(1.), tiled=True).shape,
        (1,))
    out = multihost_utils.process_allgather({"a": jnp.arange(3)})
    self.assertArraysEqual(out["a"], np.arange(3)[None])


class PmapOutAxesNoneGradTest(jtu.JaxTestCase):
  """grad through out_axes=None: NotImplementedError (0115; jax 0.4.31)."""

  def test_error(self):
    n = jax.device_count()
    f = jax.pmap(lambda x: lax.psum(x, "i") * 2., axis_name="i",
                 out_axes=None)
    x = jnp.arange(float(n))
    with self.assertRaisesRegex(NotImplementedError, "out_axes=None"):
      jax.grad(lambda x: f(x).sum())(x)

  def test_unused_unmapped_output(self):
    n = jax.device_count()
    g = jax.pmap(lambda x: (lax.psum(x, "i"), x * 3.), axis_name="i",
                 out_axes=(None, 0))
    x = jnp.arange(float(n))
    self.assertAllClose(jax.grad(lambda x: g(x)[1].sum())(x),
                        jnp.full(n, 3.))


class CustomVjpBwdListTest(jtu.JaxTestCase):
  """A bwd rule may return a list of cotangents (0116; jax 0.4.29)."""

  def test_list(self):
    @jax.custom_vjp
    def f(x, y):
      return x * y
    f.defvjp(lambda x, y: (x * y, (x, y)),
             lambda r, g: [g * r[1], g * r[0]])
    self.assertAllClose(jax.grad(f, argnums=(0, 1))(2., 3.), (3., 2.))

  def test_list_of_wrong_length(self):
    @jax.custom_vjp
    def f(x, y):
      return x * y
    f.defvjp(lambda x, y: (x * y, (x, y)), lambda r, g: [g * r[1]])
    with self.assertRaisesRegex(TypeError, "Custom VJP bwd rule"):
      jax.grad(f)(2., 3.)


_no_such_target_p = core.Primitive("fork_test_no_such_target")
_no_such_target_p.def_abstract_eval(lambda x: x)
mlir.register_lowering(
    _no_such_target_p,
    lambda ctx, x: mlir.hlo.CustomCallOp(
        [x.type], [x],
        call_target_name=mlir.ir.StringAttr.get(
            "fork_test_no_such_target")).results)


class PlatformDependentEagerTest(jtu.JaxTestCase):
  """Eagerly only this platform's branch is lowered (0117; jax 0.4.31)."""

  def test_other_branch_does_not_lower(self):
    platform = jax.default_backend()
    out = lax.platform_dependent(1.0, default=_no_such_target_p.bind,
                                 **{platform: jnp.sin})
    self.assertAllClose(out, np.sin(np.float32(1.0)))

  def test_transformations(self):
    platform = jax.default_backend()
    f = lambda x: lax.platform_dependent(x, default=jnp.cos,
                                         **{platform: jnp.sin})
    self.assertAllClose(f(1.), np.sin(np.float32(1.)))
    self.assertAllClose(jax.jit(f)(1.), np.sin(np.float32(1.)))
    self.assertAllClose(jax.grad(f)(1.), np.cos(np.float32(1.)))
    self.assertAllClose(jax.vmap(f)(jnp.ones(2)), np.sin(np.ones(2, "f")))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
