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
"""Fixes of bugs jax 0.4.26 has that later releases fixed, found by the sweep
of upstream's history (patches 0080, 0082, 0083, 0086-0089), one test class
per patch. The sweep's var, rel_entr and idct fixes are patches 0090, 0058
and 0057, tested beside them."""
from __future__ import annotations

import contextlib
import io
from unittest import mock

from absl.testing import absltest
import numpy as np
import scipy.fft as osp_fft
import scipy.special as osp_special
import scipy.stats as osp_stats

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import test_util as jtu
from jax.experimental import pallas as pl
# At import, so that the flags it defines exist before any test's config check.
from jax.experimental.pallas.ops.tpu.splash_attention import (
    splash_attention_kernel as splash, splash_attention_mask as mask_lib)
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

jax.config.parse_flags_with_absl()


class VectorNormTest(jtu.JaxTestCase):
  """0080: vector_norm over several axes flattens them into one vector."""

  def test_tuple_axes_match_flattened_vectors(self):
    x = np.random.RandomState(0).randn(3, 4, 5).astype(np.float32)
    flat = np.moveaxis(x, (0, 2), (1, 2)).reshape(4, 15)
    for ord in [1, 2, np.inf, -np.inf, 0, 3]:
      expected = np.linalg.norm(flat, ord=ord, axis=1)
      got = jnp.linalg.vector_norm(x, axis=(0, 2), ord=ord)
      self.assertAllClose(got, expected, rtol=1e-5, check_dtypes=False)
      got = jnp.linalg.vector_norm(x, axis=(2, 0), ord=ord, keepdims=True)
      self.assertAllClose(got, expected.reshape(1, 4, 1), rtol=1e-5,
                          check_dtypes=False)

  def test_all_axes_and_one_axis(self):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 10
    self.assertAllClose(jnp.linalg.vector_norm(x, axis=(0, 1, 2)),
                        np.linalg.norm(x.ravel()), rtol=1e-6)
    self.assertAllClose(jnp.linalg.vector_norm(x, axis=(1,), ord=1),
                        np.abs(x).sum(1))


class TridiagonalSolveTransposeTest(jtu.JaxTestCase):
  """0082: the transpose of tridiagonal_solve solves with A^T."""

  def test_linear_transpose_non_symmetric(self):
    rng = np.random.RandomState(0)
    batch, m = 2, 5
    dl = rng.randn(batch, m).astype(np.float32)
    dl[:, 0] = 0
    d = (rng.randn(batch, m) + 5).astype(np.float32)
    du = rng.randn(batch, m).astype(np.float32)
    du[:, -1] = 0
    b = rng.randn(batch, m, 2).astype(np.float32)
    ct = rng.randn(batch, m, 2).astype(np.float32)
    a = np.stack([np.diag(d[i]) + np.diag(dl[i, 1:], -1) + np.diag(du[i, :-1], 1)
                  for i in range(batch)])
    solve = lambda b: lax.linalg.tridiagonal_solve(dl, d, du, b)
    got, = jax.linear_transpose(solve, b)(ct)
    expected = np.linalg.solve(np.swapaxes(a, -1, -2), ct)
    self.assertAllClose(got, expected, atol=1e-5, rtol=1e-5)


class ScipyDomainsTest(jtu.JaxTestCase):
  """0083: ndtri outside [0, 1] and beta outside its domain are nan."""
  superseded_patch = "0083"

  def test_ndtri(self):
    p = np.array([-0.5, 0., 0.3, 1., 1.5], np.float32)
    got = jax.scipy.special.ndtri(p)
    self.assertAllClose(got, osp_special.ndtri(p.astype(np.float64)),
                        rtol=1e-5, check_dtypes=False)
    self.assertTrue(np.isnan(got[0]) and np.isnan(got[4]))

  def test_beta_nonpositive_parameters(self):
    x = np.array([0., 0.5, 1.], np.float32)
    for args in [(-1.1, -1.1), (0., 1.), (2., 0.), (1., 1., 0., -1.)]:
      got = jax.scipy.stats.beta.logpdf(x, *args)
      self.assertTrue(np.isnan(got).all(), (args, got))
      self.assertTrue(np.isnan(osp_stats.beta.logpdf(x, *args)).all())
    self.assertAllClose(jax.scipy.stats.beta.logpdf(x, 2., 3.),
                        osp_stats.beta.logpdf(x, 2., 3.), rtol=1e-5,
                        check_dtypes=False)


class SplashShrunkGridTest(jtu.JaxTestCase):
  """0086: splash attention masks a shrunk grid at the kv block's position
  (the TPU kernel, run in interpret mode)."""

  def test_computable_mask_with_shrunk_grid(self):
    class IdentityMask(mask_lib._ComputableMask):
      # Each q position sees only itself: the grid of every q block shrinks
      # to the one kv block on its diagonal.
      def __init__(self, shape):
        super().__init__(shape=shape, mask_function=lambda q, k: q == k)

      def __eq__(self, other):
        return type(other) is type(self) and self.shape == other.shape

      def __hash__(self):
        return hash((type(self), self.shape))

    seq_len, head_dim = 256, 128
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(k1, (1, seq_len, head_dim))
    k = jax.random.normal(k2, (seq_len, head_dim))
    v = jax.random.normal(k3, (seq_len, head_dim))
    mask = mask_lib.MultiHeadMask([IdentityMask((seq_len, seq_len))])
    pallas_call = pl.pallas_call
    interpreted = lambda *a, **kw: pallas_call(*a, **{**kw, "interpret": True})
    with mock.patch.object(pl, "pallas_call", interpreted):
      attention = splash.make_splash_mqa_single_device(mask)
      out = attention(q, k, v)
      dq = jax.grad(lambda q: (attention(q, k, v) * v[None]).sum())(q)
    # Every position attends to itself alone: the output is v, and no
    # gradient reaches q.
    self.assertAllClose(out, v[None], atol=1e-5, rtol=1e-5)
    self.assertAllClose(dq, jnp.zeros_like(q), atol=1e-4, rtol=1e-4)


class DebugCallbackStaticArgsTest(jtu.JaxTestCase):
  """0087: debug.print/callback take arguments that are not JAX values."""

  def test_print_dtype_and_string_under_jit(self):
    @jax.jit
    def f(x):
      jax.debug.print("x {x}, dtype: {d}, {s}", x=x, d=x.dtype, s="str")
      return x * 2

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      f(jnp.array([1., 2.], jnp.float32))
      jax.effects_barrier()
    self.assertEqual(out.getvalue(), "x [1. 2.], dtype: float32, str\n")

  def test_callback_eager_and_vmap(self):
    seen = []
    jax.debug.callback(lambda a, b: seen.append((a, b)), "tag", jnp.ones(2))
    jax.vmap(lambda x: jax.debug.callback(
        lambda t, x: seen.append((t, x)), np.float32, x))(jnp.arange(2.))
    jax.effects_barrier()
    self.assertEqual([s[0] for s in seen], ["tag", np.float32, np.float32])
    self.assertEqual(sorted(float(s[1]) for s in seen[1:]), [0., 1.])


class JitOfPmapKeysTest(jtu.JaxTestCase):
  """0088: jit of pmap with typed PRNG key arguments and results."""
  superseded_patch = "0088"

  @jtu.ignore_warning(category=UserWarning, message=".* includes a pmap")
  def test_keys_in_and_out(self):
    n = jax.device_count()
    keys = jax.random.split(jax.random.key(0), n)
    self.assertArraysEqual(jax.jit(jax.pmap(jax.random.bits))(keys),
                           jax.pmap(jax.random.bits)(keys))
    split = lambda k: jax.random.split(k)
    self.assertArraysEqual(
        jax.random.key_data(jax.jit(jax.pmap(split))(keys)),
        jax.random.key_data(jax.pmap(split)(keys)))


class JitOfPmapOutAxesTest(jtu.JaxTestCase):
  """0146: jit of a pmap whose outputs are mapped along axis 1 or 2."""

  @jtu.ignore_warning(category=UserWarning, message=".* includes a pmap")
  def test_out_axes_above_zero(self):
    if jax.device_count() < 4:
      self.skipTest("needs 4 devices")
    for shape, out_axes in [((4, 3), 1), ((4, 3, 2), 1), ((4, 3, 2), 2)]:
      x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
      f = jax.pmap(lambda x: x * 2, out_axes=out_axes,
                   devices=jax.devices()[:4])
      expected = np.moveaxis(x * 2, 0, out_axes)
      with self.subTest(shape=shape, out_axes=out_axes):
        self.assertArraysEqual(f(x), expected)
        self.assertArraysEqual(jax.jit(f)(x), expected)


class PartitionSpecListTest(jtu.JaxTestCase):
  """0089: list entries of a PartitionSpec are kept as tuples."""
  superseded_patch = "0089"

  def test_list_entry(self):
    self.assertEqual(P(["x", "y"], None), P(("x", "y"), None))
    self.assertEqual(hash(P(["x"])), hash(P(("x",))))
    mesh = Mesh(np.array(jax.devices()[:2]), ("x",))
    with mesh:
      out = lax.with_sharding_constraint(jnp.arange(8), P(["x"]))
    self.assertEqual(out.sharding, NamedSharding(mesh, P("x")))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
