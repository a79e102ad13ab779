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
"""The jvp of a generic `lax.reduce_window` as lowered (issue 63): the
primal is XLA's ReduceWindow of the user's computation, bit for bit that of
`lax.reduce_window` without differentiation; the tangent is a fold over the
window offsets in row-major order, unrolled for small windows and a loop for
large ones, whatever order the backend's ReduceWindow takes; off the CPU, for
strided or large windows, the ReduceWindow of (value, tangent) pairs."""
from __future__ import annotations

import itertools
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import test_util as jtu
from jax._src.lax import windowed_reductions as lax_windowed
from jax.experimental import export

jax.config.parse_flags_with_absl()


def _bits(x):
  x = np.asarray(x)
  return x.view(np.dtype(f"uint{8 * x.dtype.itemsize}"))


def _add(a, b):
  return a + b

def _mul(a, b):
  return a * b

def _smooth(a, b):  # neither associative nor commutative
  return a * jnp.cos(b) + jnp.sin(a) * b

def _weighted(a, b):  # (value, weight) pair
  return ((a[0] * a[1] + b[0] * b[1]) / (a[1] + b[1]), a[1] + b[1])


REDUCERS = {"add": (_add, 0.), "mul": (_mul, 1.), "smooth": (_smooth, 0.5),
            "max": (jnp.maximum, -np.inf), "logaddexp": (jnp.logaddexp,
                                                         -np.inf)}
# (shape, dims, strides, padding, base_dilation, window_dilation): small
# windows (unrolled, split where padding reaches some outputs), large ones
# (a loop over the leading offsets), 1-D to 4-D, padding only windows,
# negative padding, dilations.
GEOMETRIES = {
    "3x3_same": ((9, 11), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1)),
    "2x3_dilated": ((7, 6), (2, 3), (2, 1), ((1, 2), (0, 1)), (2, 1),
                    (1, 2)),
    "1d_negative_pad": ((10,), (3,), (2,), ((-1, 3),), (1,), (1,)),
    "nhwc": ((2, 6, 7, 3), (1, 3, 3, 1), (1, 2, 2, 1),
             ((0, 0), (1, 1), (1, 1), (0, 0)), (1, 1, 1, 1), (1, 1, 1, 1)),
    "8x8": ((12, 13), (8, 8), (1, 2), ((3, 4), (4, 3)), (1, 1), (1, 1)),
    "6x5_base_dilated": ((5, 6), (6, 5), (2, 3), ((2, 3), (0, 4)), (2, 1),
                         (1, 2)),
    "17": ((20,), (17,), (3,), ((8, 8),), (1,), (1,)),
    # Split into border and bulk along two leading dimensions (one with
    # window dilation, one with negative padding); a window longer than
    # the operand (no bulk).
    "3d_split": ((7, 9, 4), (3, 2, 2), (2, 1, 1), ((2, 1), (-1, 2), (1, 0)),
                 (1, 1, 1), (2, 1, 1)),
    "no_bulk": ((3, 5), (5, 2), (1, 2), ((2, 3), (0, 1)), (1, 1), (1, 1)),
    # 48 offsets, none reaching padding: unrolled.
    "8x6_valid": ((17, 13), (8, 6), (2, 3), ((0, 0), (-1, 0)), (1, 1),
                  (1, 1)),
}


def _distinct(shape, seed):
  """An operand of distinct values (no ties for max) and a tangent."""
  rng = np.random.RandomState(seed)
  n = np.prod(shape)
  x = jnp.asarray(0.5 + rng.permutation(n).reshape(shape) / n, np.float32)
  return x, jnp.asarray(rng.normal(size=shape), np.float32)


def _reference(comp, init, x, geometry):
  """The row-major left fold from init over the window offsets, skipping
  padding and base-dilation holes: plain jnp, differentiated as usual."""
  _, dims, strides, pads, base, wdil = geometry
  config = [(lo, hi, b - 1) for (lo, hi), b in zip(pads, base)]
  leaves, tree = jax.tree_util.tree_flatten(x)
  inits = jax.tree_util.tree_leaves(init)
  padded = [lax.pad(v, jnp.zeros((), v.dtype), config) for v in leaves]
  valid = lax.pad(jnp.ones(leaves[0].shape, bool), False, config)
  out_shape = lax.reduce_window_shape_tuple(leaves[0].shape, dims, strides,
                                            pads, base, wdil)
  acc = [jnp.full(out_shape, i, v.dtype) for i, v in zip(inits, leaves)]
  for offset in itertools.product(*map(range, dims)):
    start = [o * w for o, w in zip(offset, wdil)]
    limit = [s + (n - 1) * k + 1 for s, n, k in zip(start, out_shape,
                                                     strides)]
    take = lambda v: lax.slice(v, start, limit, strides)
    new = jax.tree_util.tree_leaves(comp(tree.unflatten(acc),
                                         tree.unflatten(map(take, padded))))
    acc = [jnp.where(take(valid), n, a) for n, a in zip(new, acc)]
  return tree.unflatten(acc)


class ReduceWindowJvpFoldTest(jtu.JaxTestCase):

  @parameterized.named_parameters(
      dict(testcase_name=f"_{r}_{g}", reducer=r, geometry=g)
      for r, g in itertools.chain(
          itertools.product(REDUCERS, ["3x3_same", "nhwc"]),
          itertools.product(["mul", "smooth"], [
              g for g in GEOMETRIES if g not in ("3x3_same", "nhwc")])))
  def testPrimalBitwiseTangentIsTheFold(self, reducer, geometry):
    comp, init = REDUCERS[reducer]
    geo = GEOMETRIES[geometry]
    x, t = _distinct(geo[0], seed=0)
    f = lambda x: lax.reduce_window(x, init, comp, *geo[1:])
    want_t = jax.jvp(lambda x: _reference(comp, init, x, geo), (x,), (t,))[1]
    for jitted in (False, True):
      jvp = jax.jit(jax.jvp, static_argnums=0) if jitted else jax.jvp
      y, y_t = jvp(f, (x,), (t,))
      np.testing.assert_array_equal(_bits(y),
                                    _bits((jax.jit(f) if jitted else f)(x)))
      finite = np.isfinite(np.asarray(want_t))
      self.assertAllClose(np.where(finite, y_t, 0.),
                          np.where(finite, want_t, 0.), rtol=2e-5, atol=2e-5)

  def testUnrolledAndRolledAgree(self):
    # The same fold, unrolled or as a loop over some or all offsets.
    comp, init = REDUCERS["smooth"]
    geo = GEOMETRIES["6x5_base_dilated"]
    rng = np.random.RandomState(1)
    x = jnp.asarray(rng.uniform(0.5, 1.5, geo[0]), np.float32)
    t = jnp.asarray(rng.normal(size=geo[0]), np.float32)
    f = lambda x: lax.reduce_window(x, init, comp, *geo[1:])
    outs = []
    for unroll in (1, 5, 30):
      with mock.patch.object(lax_windowed, "_RW_FOLD_UNROLL", unroll):
        jvp = jax.jit(lambda x, t: jax.jvp(f, (x,), (t,)))
        hlo = jvp.lower(x, t).as_text()
        self.assertEqual("stablehlo.while" in hlo, unroll < 30)
        outs.append(jvp(x, t))
    for y, y_t in outs[1:]:
      np.testing.assert_array_equal(_bits(y), _bits(outs[0][0]))
      self.assertAllClose(y_t, outs[0][1], rtol=1e-6, atol=1e-6)

  def testVariadicAndHigherOrder(self):
    # A pair reducer with an init tangent; and the jvp of the jvp, whose
    # primal and first-order tangent are the first order's, bit for bit.
    geo = GEOMETRIES["3x3_same"]
    rng = np.random.RandomState(2)
    v = jnp.asarray(rng.uniform(0.5, 1.5, geo[0]), np.float32)
    w = jnp.asarray(rng.uniform(0.5, 1.5, geo[0]), np.float32)
    tv, tw = (jnp.asarray(rng.normal(size=geo[0]), np.float32)
              for _ in range(2))
    init = (np.float32(0.25), np.float32(0.5))
    t_init = (np.float32(1.), np.float32(-1.))
    f = lambda v, w, i: lax.reduce_window((v, w), i, _weighted, *geo[1:])
    ref = lambda v, w, i: _reference(_weighted, i, (v, w), geo)
    got = jax.jit(lambda *a: jax.jvp(f, a, (tv, tw, t_init)))(v, w, init)
    want = jax.jvp(ref, (v, w, init), (tv, tw, t_init))
    self.assertAllClose(got, want, rtol=2e-5, atol=2e-5)
    comp, init = REDUCERS["mul"]
    g = lambda x: lax.reduce_window(x, init, comp, *GEOMETRIES["8x8"][1:])
    x = jnp.asarray(rng.uniform(0.9, 1.1, GEOMETRIES["8x8"][0]), np.float32)
    t = jnp.asarray(rng.normal(size=x.shape), np.float32)
    first = jax.jvp(g, (x,), (t,))
    (y, y_t), (y_t2, y_tt) = jax.jvp(lambda x: jax.jvp(g, (x,), (t,)), (x,),
                                     (t,))
    np.testing.assert_array_equal(_bits(y), _bits(first[0]))
    np.testing.assert_array_equal(_bits(y_t), _bits(first[1]))
    self.assertAllClose(y_t2, first[1], rtol=1e-6, atol=1e-6)
    want = jax.jvp(lambda x: jax.jvp(
        lambda x: _reference(comp, init, x, GEOMETRIES["8x8"]), (x,),
        (t,))[1], (x,), (t,))[1]
    self.assertAllClose(y_tt, want, rtol=1e-4, atol=1e-4)

  @parameterized.named_parameters(
      dict(testcase_name=f"_{r}_{g}", reducer=r, geometry=g)
      for r, g in [("mul", "nhwc"), ("smooth", "2x3_dilated"),
                   ("logaddexp", "8x8"), ("add", "17")])
  def testOffTheCpuTheCarriedReduceWindow(self, reducer, geometry):
    # Lowered for a TPU or a GPU, a strided or large window: the primal's
    # ReduceWindow and the carried one's, no fold; run here, the primal as on
    # the CPU, bit for bit, and the tangent the fold's up to rounding (no
    # ties).
    comp, init = REDUCERS[reducer]
    geo = GEOMETRIES[geometry]
    x, t = _distinct(geo[0], seed=3)
    f = lambda x: lax.reduce_window(x, init, comp, *geo[1:])
    jvp = lambda x, t: jax.jvp(f, (x,), (t,))
    for platform in ("tpu", "cuda"):
      text = export.export(jax.jit(jvp), lowering_platforms=(platform,))(
          x, t).mlir_module()
      self.assertEqual(text.count("stablehlo.reduce_window"), 2)
      self.assertNotIn("stablehlo.slice", text)
    eqn, = [e for e in jax.make_jaxpr(jvp)(x, t).eqns
            if e.primitive is lax_windowed.reduce_window_jvp_p]
    args = [x, t, np.float32(init), np.float32(0.)]
    y, y_t = jax.jit(lambda *a: lax_windowed._reduce_window_jvp_carried(
        *a, **eqn.params))(*args)
    want, want_t = jax.jit(jvp)(x, t)
    np.testing.assert_array_equal(_bits(y), _bits(want))
    self.assertAllClose(y_t, want_t, rtol=2e-5, atol=2e-5)

  def testOffTheCpuSmallStrideOneWindowsFold(self):
    # A window of stride 1 and at most 16 elements is folded there too.
    comp, init = REDUCERS["mul"]
    geo = GEOMETRIES["3x3_same"]
    f = lambda x: lax.reduce_window(x, init, comp, *geo[1:])
    x = jnp.ones(geo[0], np.float32)
    text = export.export(jax.jit(lambda x, t: jax.jvp(f, (x,), (t,))),
                         lowering_platforms=("tpu",))(x, x).mlir_module()
    self.assertEqual(text.count("stablehlo.reduce_window"), 1)
    self.assertIn("stablehlo.slice", text)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
