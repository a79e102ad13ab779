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
"""Bugs of jax 0.4.26's jit, API and transformations that the fork fixes.

Each test fails on upstream jax 0.4.26 (most of them were fixed by a later
upstream release, named in the test's docstring) and passes on the fork.
"""
from __future__ import annotations

import os
if "--xla_force_host_platform_device_count" not in os.environ.get(
    "XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=8")

from functools import partial
import gc
import weakref

from absl.testing import absltest
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import test_util as jtu
from jax.experimental import checkify
from jax.experimental import pallas as pl
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from indexing_slices_test import _import_export

jax.config.parse_flags_with_absl()


class JitArgumentsTest(jtu.JaxTestCase):

  def test_donate_argnames_with_kwargs_in_any_order(self):
    """Upstream fixed it in jax 0.4.27: the donation vector followed the
    call's keyword order, the arguments their sorted order."""
    def f(b, a, c):
      return a + b + c
    for donated in ("a", "b", "c"):
      f_jit = jax.jit(f, donate_argnames=donated)
      args = {name: jnp.full(3, i, jnp.float32)
              for i, name in enumerate("abc")}
      out = f_jit(c=args["c"], b=args["b"], a=args["a"])
      np.testing.assert_array_equal(out, np.full(3, 3.))
      for name, x in args.items():
        self.assertEqual(x.is_deleted(), name == donated, (donated, name))

  def test_donate_argnames_mixed_positional_and_keyword(self):
    f = jax.jit(lambda x, y, z: x * y + z, donate_argnames="z")
    x, y, z = jnp.ones(2), jnp.ones(2), jnp.ones(2)
    f(x, z=z, y=y)
    self.assertEqual([x.is_deleted(), y.is_deleted(), z.is_deleted()],
                     [False, False, True])

  def test_negative_static_argnums(self):
    """Upstream fixed it in jaxlib 0.4.31 (the C++ dispatch path): the
    second call ran the first call's program."""
    f = jax.jit(lambda x, n: x * n, static_argnums=-1)
    for n in (3, 3, 4, 5, 4):
      np.testing.assert_array_equal(f(jnp.ones(2), n), np.full(2, n))
    # The name of a negative static argnum is static too.
    np.testing.assert_array_equal(f(jnp.ones(2), n=6), np.full(2, 6))
    np.testing.assert_array_equal(f(jnp.ones(2), n=7), np.full(2, 7))

  def test_negative_static_argnums_with_varargs(self):
    # Here the C++ dispatch path cannot know which argument is static: it
    # must leave every call to the Python path.
    f = jax.jit(lambda *args: args[0] * args[-1], static_argnums=-1)
    for n in (3, 4, 3, 5):
      np.testing.assert_array_equal(f(jnp.ones(2), n), np.full(2, n))
    np.testing.assert_array_equal(f(jnp.ones(2), 1., 6), np.full(2, 6))


class CondLeakTest(jtu.JaxTestCase):

  def _captured(self, use):
    big = jnp.arange(1000.)
    ref = weakref.ref(big)
    use(big)
    return ref

  def test_cond_keeps_no_captured_array_alive(self):
    """Upstream fixed it in jax 0.4.31 (jax-ml/jax#12719)."""
    def use(big):
      lax.cond(True, lambda x: x + big, lambda x: x - big, jnp.ones(1000))
    ref = self._captured(use)
    gc.collect()
    self.assertIsNone(ref())

  def test_switch_under_jit_keeps_no_captured_array_alive(self):
    def use(big):
      branches = [lambda x: x + big, lambda x: x * big, lambda x: x]
      f = jax.jit(lambda i, x: lax.switch(i, branches, x))
      f(1, jnp.ones(1000)).block_until_ready()
    ref = self._captured(use)
    gc.collect()
    self.assertIsNone(ref())

  def test_cond_still_reuses_its_jaxprs(self):
    c = jnp.arange(3.)
    branches = (lambda x: x + c, lambda x: x - c)
    jaxprs = [jax.make_jaxpr(lambda p: lax.cond(p, *branches, jnp.ones(3)))(
        True).eqns[-1].params["branches"] for _ in range(2)]
    self.assertIs(jaxprs[0][0], jaxprs[1][0])


class ShardMapPsumTest(jtu.JaxTestCase):

  def test_psum_of_psum(self):
    """Upstream fixed it in jax 0.4.31: a psum of a value replicated over
    the summed axis raised."""
    mesh = Mesh(np.array(jax.devices()[:8]), ("i",))
    f = shard_map(lambda x: lax.psum(lax.psum(x, "i"), "i"), mesh,
                  in_specs=P("i"), out_specs=P())
    x = jnp.arange(8.)
    np.testing.assert_array_equal(f(x), [8 * 28.])
    np.testing.assert_array_equal(jax.jit(f)(x), [8 * 28.])
    np.testing.assert_array_equal(jax.grad(lambda x: f(x).sum())(x),
                                  np.full(8, 8.))

  def test_psum_over_partly_replicated_axes(self):
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("i", "j"))
    f = shard_map(lambda x: lax.psum(lax.psum(x, "i"), ("i", "j")), mesh,
                  in_specs=P("i", "j"), out_specs=P())
    x = jnp.arange(8.).reshape(2, 4)
    np.testing.assert_array_equal(f(x), [[2 * 28.]])
    np.testing.assert_array_equal(jax.grad(lambda x: f(x).sum())(x),
                                  np.full((2, 4), 2.))


class CheckifyRematTest(jtu.JaxTestCase):

  def test_checkify_of_remat(self):
    """Upstream fixed it in jax 0.4.34 (jax-ml/jax#23867): the check ran,
    and raised, outside checkify."""
    @jax.remat
    def f(x):
      checkify.check(x > 0, "x must be positive")
      return jnp.sin(x)
    for g in (f, jax.jit(f)):
      err, y = checkify.checkify(g)(1.)
      self.assertIsNone(err.get())
      self.assertAllClose(y, np.sin(1.))
      err, y = checkify.checkify(g)(-1.)
      self.assertIn("x must be positive", err.get())
    err, _ = checkify.checkify(jax.vmap(f))(jnp.array([1., -2.]))
    self.assertIn("x must be positive", err.get())

  def test_checkify_of_grad_of_remat(self):
    @partial(jax.remat, policy=jax.checkpoint_policies.nothing_saveable)
    def f(x):
      checkify.check(x > 0, "x must be positive")
      return jnp.sin(x)
    err, g = checkify.checkify(jax.grad(f))(1.)
    self.assertIsNone(err.get())
    self.assertAllClose(g, np.cos(1.))
    err, _ = checkify.checkify(jax.grad(f))(-1.)
    self.assertIn("x must be positive", err.get())

  def test_automatic_checks_in_remat(self):
    f = jax.remat(lambda x, i: x[i])
    err, _ = checkify.checkify(f, errors=checkify.index_checks)(
        jnp.ones(3), 5)
    self.assertIn("out-of-bounds", err.get())


class ExportStaticArgsTest(jtu.JaxTestCase):
  superseded_patch = "0065"

  def test_export_with_static_argnames(self):
    """Upstream fixed it in jax 0.4.27: export looked for a shape on the
    static arguments."""
    export = _import_export()
    f = jax.jit(lambda x, n: x * n, static_argnames="n")
    exp = export.export(f)(jnp.ones(3), n=2)
    self.assertLen(exp.in_avals, 1)
    np.testing.assert_array_equal(export.call_exported(exp)(jnp.ones(3)),
                                  np.full(3, 2.))

  def test_export_with_static_argnums_and_symbolic_shapes(self):
    export = _import_export()
    f = jax.jit(lambda x, n, y: x * n + y, static_argnums=1)
    a, = export.symbolic_shape("a")
    spec = jax.ShapeDtypeStruct((a,), jnp.float32)
    exp = export.export(f)(spec, 3, spec)
    np.testing.assert_array_equal(
        export.call_exported(exp)(jnp.ones(5), jnp.ones(5)), np.full(5, 4.))


class PallasCapturedArrayTest(jtu.JaxTestCase):
  superseded_patch = "0066"

  def test_kernel_closing_over_an_array(self):
    """Upstream made it a clear error (jax 0.4.32); on 0.4.26 it failed in
    safe_zip."""
    c = jnp.arange(8.).reshape(1, 8)
    def kernel(x_ref, o_ref):
      o_ref[...] = x_ref[...] + c
    for grid in ((), (4,)):
      specs = {} if not grid else dict(
          in_specs=[pl.BlockSpec(lambda i: (i, 0), (1, 8))],
          out_specs=pl.BlockSpec(lambda i: (i, 0), (1, 8)))
      f = pl.pallas_call(kernel, jax.ShapeDtypeStruct((4, 8), jnp.float32),
                         grid=grid, interpret=True, **specs)
      with self.assertRaisesRegex(
          ValueError, r"closes over arrays \(float32\[1,8\]\).*as inputs"):
        f(jnp.ones((4, 8)))

  def test_kernel_with_scalar_constants_still_runs(self):
    def kernel(x_ref, o_ref):
      o_ref[...] = x_ref[...] * np.float32(2.) + jnp.float32(1.)
    f = pl.pallas_call(kernel, jax.ShapeDtypeStruct((8,), jnp.float32),
                       interpret=True)
    np.testing.assert_array_equal(f(jnp.ones(8)), np.full(8, 3.))


class CustomGradientClosureTest(jtu.JaxTestCase):
  """No release fixed it (jax 0.10.2 fails too): a custom_gradient function
  closing over a jit tracer that is not differentiated raised
  UnexpectedTracerError when the jit was differentiated."""

  @staticmethod
  def _f(x, w):
    s = jnp.tanh(w)  # a tracer of the enclosing jit
    @jax.custom_gradient
    def g(x):
      e = jnp.exp(x * s)
      return e.sum(), lambda ct: (ct * s * e,)
    return g(x) * 2.

  def test_grad_of_jit_against_finite_differences(self):
    x = jnp.linspace(-1., 1., 5)
    w = jnp.linspace(.5, 1., 5)
    f_jit = jax.jit(self._f)
    jtu.check_grads(lambda x: f_jit(x, w), (x,), order=1, modes=["rev"])
    self.assertAllClose(jax.grad(f_jit)(x, w),
                        2 * np.tanh(w) * np.exp(x * np.tanh(w)))

  def test_grad_of_grad_and_vmap(self):
    def h(x, y):
      @jax.custom_gradient
      def g(x):
        return jnp.sin(x) * y, lambda ct: (ct * jnp.cos(x) * y,)
      return g(x)
    dh = jax.jit(jax.grad(h))
    self.assertAllClose(dh(1., 2.), 2 * np.cos(1.))
    self.assertAllClose(jax.jit(jax.vmap(dh))(jnp.ones(3), jnp.full(3, 2.)),
                        np.full(3, 2 * np.cos(1.)))
    self.assertAllClose(jax.grad(jax.jit(jax.grad(h)))(1., 2.),
                        -2 * np.sin(1.))

  def test_differentiating_the_closed_over_value_still_raises(self):
    with self.assertRaisesRegex(Exception, "with respect to a closed-over value"):
      jax.grad(lambda y: jax.jit(self._f)(jnp.ones(2), y))(jnp.ones(2))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
