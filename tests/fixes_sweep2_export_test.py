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
"""Bugs of jax 0.4.26's export (shape polymorphism, sharded VJPs) and remat
that the fork fixes (issue 62's sweep, rows 38, 41, 42, 43 and 56, and remat
in bf16).

Each test fails on upstream jax 0.4.26 (a later upstream release fixed the
bug, named in the test's docstring) and passes on the fork, except those
marked as guards. Classes that test what a patch alone promises (its error
messages, where it rounds) name it in `superseded_patch`: upstream's own fix
behaves otherwise there.
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
from jax._src import ad_checkpoint as ad_checkpoint_internal
from jax._src import config as jax_config
from jax._src import test_util as jtu
from jax._src.interpreters import partial_eval as pe
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from indexing_slices_test import _import_export

jax.config.parse_flags_with_absl()


def _spec(shape: str, dtype=np.float32) -> jax.ShapeDtypeStruct:
  return jax.ShapeDtypeStruct(_import_export().symbolic_shape(shape), dtype)


class SortJvpSymbolicTest(jtu.JaxTestCase):

  def test_jvp_of_sort(self):
    """Upstream fixed it in jax 0.4.36: the jvp of sort compared a symbolic
    size with the int32 maximum (InconclusiveDimensionOperation)."""
    export = _import_export()
    f = lambda a: jax.jvp(lax.sort, (a,), (2 * a,))
    exp = export.export(f)(_spec("b"))
    a = np.random.RandomState(0).randn(7).astype(np.float32)
    primal, tangent = export.call(exp)(a)
    self.assertArraysEqual(primal, np.sort(a))
    self.assertArraysEqual(tangent, 2 * np.sort(a))

  def test_grad_of_sort(self):
    """Upstream fixed it in jax 0.4.36."""
    export = _import_export()
    f = jax.grad(lambda a: jnp.sum(jnp.sort(a, axis=0) * jnp.arange(
        a.shape[0], dtype=np.float32)[:, None]))
    exp = export.export(f)(_spec("b, 3"))
    a = np.random.RandomState(1).randn(5, 3).astype(np.float32)
    self.assertArraysEqual(export.call(exp)(a), f(a))


class LinalgSymbolicTest(jtu.JaxTestCase):

  def test_inv_of_symbolic_matrix(self):
    """Upstream fixed it in jax 0.4.35: LU on CPU refused symbolic matrix
    dimensions (NotImplementedError)."""
    export = _import_export()
    rng = np.random.RandomState(2)
    for f in [jnp.linalg.inv, jnp.linalg.det,
              lambda x: jnp.linalg.solve(x, x[:, :1])]:
      exp = export.export(f)(_spec("b, b"))
      for b in (1, 4):
        x = (rng.randn(b, b) + 3 * np.eye(b)).astype(np.float32)
        self.assertAllClose(export.call(exp)(x), f(x), rtol=1e-5, atol=1e-5)


class SymbolicPowTest(jtu.JaxTestCase):

  def test_pow(self):
    """Upstream fixed it in jax 0.4.38: d ** 0 and 2 ** d raised TypeError."""
    export = _import_export()
    for f in [lambda d: d ** 0, lambda d: d ** 3, lambda d: 2 ** d,
              lambda d: d ** d]:
      exp = export.export(lambda x, f=f: jnp.asarray(f(x.shape[0])))(
          _spec("b"))
      for b in (1, 3):
        self.assertEqual(int(export.call(exp)(np.zeros(b, np.float32))),
                         f(b))


class SymbolicPowErrorTest(jtu.JaxTestCase):
  superseded_patch = "0122"

  def test_negative_and_fractional_powers_raise(self):
    """0.4.26 truncated d ** 2.5 to d ** 2 and raised TypeError for
    d ** -1."""
    d, = _import_export().symbolic_shape("d")
    for power in (-1, 2.5):
      with self.assertRaisesRegex(ValueError, "non-negative integer"):
        d ** power  # pylint: disable=pointless-statement


class ExportGradShardingTest(jtu.JaxTestCase):

  def test_grad_with_reversed_mesh(self):
    """Upstream fixed it in jax 0.4.29 (#21314): the VJP of an exported
    function got the first devices of jax.devices(), not the primal's."""
    if jax.local_device_count() < 2:
      self.skipTest("needs several devices")
    export = _import_export()
    f = lambda x: jnp.sum(x * 2.)
    n = jax.local_device_count()
    devices = jax.local_devices()
    s = NamedSharding(Mesh(devices, "i"), P("i"))
    s_rev = NamedSharding(Mesh(list(reversed(devices)), "i"), P("i"))
    x = jax.device_put(jnp.arange(n, dtype=np.float32), s)
    x_rev = jax.device_put(jnp.arange(n, dtype=np.float32), s_rev)
    exp = export.export(jax.jit(f, in_shardings=s))(x)
    exp_rev = export.export(jax.jit(f, in_shardings=s_rev))(x_rev)
    g = jax.grad(export.call(exp))(x)
    g_rev = jax.grad(export.call(exp_rev))(x_rev)
    self.assertArraysEqual(g_rev, np.full(n, 2., np.float32))
    self.assertArraysEqual(g, g_rev)


class SaveFromBothPoliciesTest(jtu.JaxTestCase):
  # Upstream's fix raises for every answer that is not a bool.
  superseded_patch = "0124"

  def _offload_policy(self):
    return jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=["a"], names_which_can_be_offloaded=["o"],
        offload_src="device", offload_dst="pinned_host")

  def test_second_policy_is_heard(self):
    """Upstream fixed it in jax 0.4.38: an enum answer of the first policy
    (pe.Recompute included) was true, so the second was never asked."""
    cp = jax.checkpoint_policies
    policy = cp.save_from_both_policies(self._offload_policy(),
                                        cp.dots_saveable)
    self.assertIs(policy(lax.dot_general_p, precision=None,
                         preferred_element_type=None), True)

    def f(x, w):
      return jnp.sum(jnp.sin(jnp.sin(x @ w) @ w))
    saved = ad_checkpoint_internal.saved_residuals(
        jax.checkpoint(f, policy=policy), jnp.ones((4, 4)), jnp.ones((4, 4)))
    self.assertEqual(
        sum("dot_general" in where for _, where in saved), 2)

  def test_disagreeing_policies_raise(self):
    """0.4.26 returned the first policy's answer."""
    cp = jax.checkpoint_policies
    policy = cp.save_from_both_policies(self._offload_policy(),
                                        cp.everything_saveable)
    name_p = ad_checkpoint_internal.name_p
    with self.assertRaisesRegex(ValueError, "policies disagree"):
      policy(name_p, name="o")
    # Agreeing answers, and recompute against an offload, are fine.
    self.assertIs(pe.ensure_enum(policy(name_p, name="a")), pe.Saveable)
    policy = cp.save_from_both_policies(cp.nothing_saveable,
                                        self._offload_policy())
    self.assertEqual(policy(name_p, name="o"),
                     self._offload_policy()(name_p, name="o"))


@jax.custom_vjp
def _square(x):
  return x * x
_square.defvjp(lambda x: (_square(x), None), lambda _, g: (g,))


@jax.custom_vjp
def _widen(x):  # bf16 -> f32; its gradient is the value it saved
  return x.astype(jnp.float32)
_widen.defvjp(lambda x: (_widen(x), x), lambda x, _: (x.astype(jnp.float32),))


def _bf16_near_one() -> jax.Array:
  eps = float(jnp.finfo(jnp.bfloat16).eps)
  return jnp.array([1 + eps, 1 + 2 * eps, 3., 1 - eps / 2], jnp.bfloat16)


def _remat_widen_square():
  return partial(jax.remat,
                 policy=jax.checkpoint_policies.everything_saveable)(
                     lambda x: _widen(_square(x)))


class RematExcessPrecisionTest(jtu.JaxTestCase):
  """XLA may keep a bf16 value in f32 for the ops of the same computation
  that use it (excess precision); a residual that leaves that computation is
  stored rounded."""

  def test_saved_value_is_the_forward_value(self):
    """Upstream fixed it in jax 0.4.31: the backward pass of a jit of a
    remat saw the rounded residual, the forward pass its f32 value."""
    x = _bf16_near_one()
    y, f_vjp = jax.vjp(jax.jit(_remat_widen_square()), x)
    saved, = f_vjp(jnp.ones_like(y))
    self.assertArraysEqual(y, saved)

  def test_saved_value_is_the_forward_value_in_scan(self):
    """Upstream fixed it in jax 0.4.31: scan residuals are stored rounded."""
    r = _remat_widen_square()
    def f(xs):
      y, f_vjp = jax.vjp(
          lambda xs: lax.scan(lambda c, x: (c, r(x)), 0., xs)[1], xs)
      return y, f_vjp(jnp.ones_like(y))[0]
    xs = _bf16_near_one().reshape(2, 2)
    for g in (f, jax.jit(f)):
      y, saved = g(xs)
      self.assertArraysEqual(y, saved)


  def test_saved_value_is_the_forward_value_in_one_computation(self):
    """Forward and backward in one jit: remat's lowering keeps the residual
    apart from the forward pass, in a cond (jax_remat_opt_barrier off; it
    failed on 0.4.26 too), or behind an optimization barrier, which a later
    XLA keeps through fusion (it failed on the 2026 XLA CPU plugin,
    JAX_FORK_TEST_ON_PLUGIN=1): either stores it rounded."""
    def f(x):  # traced anew by each jit: the flag is no part of jit's key
      r = _remat_widen_square()
      y, f_vjp = jax.vjp(r, x)
      return y, f_vjp(jnp.ones_like(y))[0]
    x = _bf16_near_one()
    y, saved = jax.jit(lambda x: f(x))(x)
    self.assertArraysEqual(y, saved)
    with jax_config.remat_opt_barrier(False):
      y, saved = jax.jit(lambda x: f(x))(x)
    self.assertArraysEqual(y, saved)


def _on_adapted_plugin() -> bool:
  """Whether the default backend is a newer PJRT plugin (patch 0026)."""
  try:
    from jax._src import pjrt_adapter  # pylint: disable=g-import-not-at-top
  except ImportError:  # upstream
    return False
  return pjrt_adapter.plugin_of(jax.devices()[0].client) is not None


class RematRoundsOnlyWhatLeavesTest(jtu.JaxTestCase):
  """Guards (pass on 0.4.26 too)."""
  # Upstream's fix rounds every residual, in one computation too, f32 too.
  superseded_patch = "0125"

  def test_grad_under_jit_keeps_forward_bits(self):
    """Forward and backward traced into one computation share their values:
    jaxlib's XLA drops remat's optimization barrier before it fuses, so
    nothing is rounded and the forward value is jit's own. A newer plugin's
    XLA keeps the barrier: there the residual is rounded where computed."""
    r = _remat_widen_square()
    def f(x):
      y, f_vjp = jax.vjp(r, x)
      return y, f_vjp(jnp.ones_like(y))[0]
    x = _bf16_near_one()
    y, saved = jax.jit(f)(x)
    self.assertArraysEqual(y, saved)
    jaxpr = str(jax.make_jaxpr(f)(x))
    if _on_adapted_plugin():
      self.assertIn("reduce_precision", jaxpr)
      rounded = jax.jit(r)(x).astype(jnp.bfloat16).astype(jnp.float32)
      self.assertArraysEqual(y, rounded)
    else:
      self.assertNotIn("reduce_precision", jaxpr)
      self.assertArraysEqual(y, jax.jit(r)(x))

  def test_no_rounding_without_prevent_cse(self):
    """Without prevent_cse nothing keeps the residual apart."""
    r = jax.remat(lambda x: _widen(_square(x)), prevent_cse=False,
                  policy=jax.checkpoint_policies.everything_saveable)
    jaxpr = jax.make_jaxpr(lambda x: jax.vjp(r, x)[1](jnp.ones(4)))(
        _bf16_near_one())
    self.assertNotIn("reduce_precision", str(jaxpr))

  def test_f32_residuals_are_not_rounded(self):
    r = jax.remat(lambda x: jnp.sin(x) * x,
                  policy=jax.checkpoint_policies.everything_saveable)
    jaxpr = jax.make_jaxpr(lambda x: jax.vjp(jax.jit(r), x)[1](x))(
        jnp.ones(3))
    self.assertNotIn("reduce_precision", str(jaxpr))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
