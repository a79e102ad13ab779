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
"""Forward-mode AD and vmap of `lax.reduce_window` with generic reducers."""
from __future__ import annotations

from functools import partial
import itertools

from absl.testing import absltest
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import core
from jax._src import test_util as jtu
from jax._src.interpreters import partial_eval as pe
from jax._src.lax import windowed_reductions as lax_windowed
from jax.test_util import check_grads, check_jvp

jax.config.parse_flags_with_absl()


def _sub(a, b):
  return a - b

def _mul(a, b):
  return a * b

def _add(a, b):
  return a + b

def _logaddexp(a, b):
  return jnp.logaddexp(a, b)

def _smooth(a, b):
  # Neither associative nor commutative, smooth everywhere.
  return a * jnp.cos(b) + jnp.sin(a) * b

# name -> (computation, init value, tolerance)
REDUCERS = {
    "add": (_add, 0., None),
    "add_init": (_add, 1.5, None),
    "mul": (_mul, 1., 2e-2),
    "mul_init": (_mul, -0.7, 2e-2),
    "sub": (_sub, 0.3, None),
    "logaddexp": (_logaddexp, -np.inf, 2e-2),
    "smooth": (_smooth, 0.5, 5e-2),
}

# (shape, dims, strides, padding, base_dilation, window_dilation)
GEOMETRIES = list(itertools.chain(
    itertools.product(
        [(4, 5)],
        [(2, 1), (2, 3)],
        [(1, 1), (2, 1), (1, 2)],
        ["VALID", "SAME", ((0, 3), (1, 2))],
        [(1, 1), (2, 3)],
        [(1, 1), (1, 2)]),
    itertools.product(
        [(2, 3, 4, 2)],
        [(1, 2, 2, 1), (2, 1, 2, 1)],
        [(1, 2, 2, 1), (1, 1, 1, 1)],
        ["VALID", "SAME", ((0, 1), (1, 0), (2, 1), (0, 2))],
        [(1, 1, 1, 1), (2, 1, 3, 1)],
        [(1, 1, 1, 1), (1, 2, 1, 1)]),
))


def _rw(comp, init, dims, strides, padding, base_dilation=None,
        window_dilation=None):
  return lambda x: lax.reduce_window(x, init, comp, dims, strides, padding,
                                     base_dilation, window_dilation)


class ReduceWindowJvpTest(jtu.JaxTestCase):

  @jtu.sample_product(
      [dict(shape=shape, dims=dims, strides=strides, padding=padding,
            base_dilation=base_dilation, window_dilation=window_dilation)
       for shape, dims, strides, padding, base_dilation, window_dilation
       in GEOMETRIES],
      reducer=list(REDUCERS),
  )
  def testJvpAgainstFiniteDifferences(self, shape, dims, strides, padding,
                                      base_dilation, window_dilation,
                                      reducer):
    comp, init, tol = REDUCERS[reducer]
    rng = jtu.rand_small(self.rng())
    x = rng(shape, np.float32) + (1. if reducer.startswith("mul") else 0.)
    f = _rw(comp, init, dims, strides, padding, base_dilation,
            window_dilation)
    check_grads(f, (x,), order=3, modes=["fwd"], atol=tol, rtol=tol)
    check_jvp(f, partial(jax.jvp, jax.jit(f)), (x,), atol=tol, rtol=tol)

  @jtu.sample_product(reducer=["mul", "sub", "smooth"])
  def testThirdOrderForward(self, reducer):
    comp, init, tol = REDUCERS[reducer]
    x = jtu.rand_small(self.rng())((3, 4), np.float32) + 1.
    f = _rw(comp, init, (2, 2), (1, 2), "SAME", (1, 2), (1, 1))
    check_grads(f, (x,), order=3, modes=["fwd"], atol=tol or 2e-2,
                rtol=tol or 2e-2)
    check_grads(jax.jit(f), (x,), order=3, modes=["fwd"], atol=tol or 2e-2,
                rtol=tol or 2e-2)

  def testJvpEagerMatchesJit(self):
    x = jtu.rand_small(self.rng())((5, 6), np.float32) + 1.
    t = jtu.rand_small(self.rng())((5, 6), np.float32)
    f = _rw(_mul, 1., (2, 3), (1, 2), "SAME")
    eager = jax.jvp(f, (x,), (t,))
    jitted = jax.jit(lambda x, t: jax.jvp(f, (x,), (t,)))(x, t)
    self.assertAllClose(eager, jitted)
    # The tangent of a product over a window: sum_k t_k * prod_{j != k} x_j.
    expected = jax.jvp(
        lambda x: jnp.exp(_rw(_add, 0., (2, 3), (1, 2), "SAME")(jnp.log(x))),
        (x,), (t,))
    self.assertAllClose(eager, expected, rtol=1e-5, atol=1e-5)

  @jtu.sample_product(
      [dict(generic=generic, monoid=monoid, init=init)
       for generic, monoid, init in [
           (_add, lax.add, 0.),
           (jnp.maximum, lax.max, -np.inf),
           (jnp.minimum, lax.min, np.inf)]],
      padding=["VALID", "SAME"],
      strides=[(1, 1), (2, 1)],
  )
  def testConsistentWithMonoids(self, generic, monoid, init, padding, strides):
    x = jtu.rand_unique_int(self.rng())((6, 5), np.float32)
    t = jtu.rand_small(self.rng())((6, 5), np.float32)
    f_generic = _rw(generic, init, (3, 2), strides, padding)
    f_monoid = _rw(monoid, init, (3, 2), strides, padding)
    # The Python reducers really take the generic path.
    self.assertIn("reduce_window[", str(jax.make_jaxpr(f_generic)(x)))
    self.assertNotIn("reduce_window[", str(jax.make_jaxpr(f_monoid)(x)))
    self.assertAllClose(jax.jvp(f_generic, (x,), (t,)),
                        jax.jvp(f_monoid, (x,), (t,)))
    self.assertAllClose(jax.jit(jax.jacfwd(f_generic))(x),
                        jax.jit(jax.jacfwd(f_monoid))(x))

  @jtu.sample_product(reducer=["add_init", "mul_init", "sub", "smooth"],
                      padding=["VALID", "SAME"])
  def testInitValueTangent(self, reducer, padding):
    comp, _, tol = REDUCERS[reducer]
    x = jtu.rand_small(self.rng())((5, 4), np.float32) + 1.
    f = lambda x, init: lax.reduce_window(x, init, comp, (2, 3), (1, 1),
                                          padding)
    init = np.float32(0.8)
    check_grads(f, (x, init), order=2, modes=["fwd"], atol=tol, rtol=tol)
    check_jvp(lambda init: f(x, init),
              partial(jax.jvp, lambda init: f(x, init)), (init,),
              atol=tol, rtol=tol)
    if reducer == "add_init":
      # XLA folds the init value in once per window: every output moves
      # one-for-one with it.
      _, t_out = jax.jvp(lambda i: f(x, i), (init,), (np.float32(1.),))
      self.assertAllClose(t_out, jnp.ones_like(t_out))

  def testVariadicPytree(self):
    rng = jtu.rand_small(self.rng())
    value, weight = rng((4, 6), np.float32), rng((4, 6), np.float32) + 2.

    def weighted_pool(value, weight):
      def comp(a, b):
        wa, wb = a["w"], b["w"]
        w = wa + wb
        return {"v": (a["v"] * wa + b["v"] * wb) / w, "w": w}
      out = lax.reduce_window({"v": value, "w": weight},
                              {"v": np.float32(0.), "w": np.float32(1.)},
                              comp, (2, 3), (1, 2), "SAME", (1, 1), (2, 1))
      return out["v"], out["w"]

    check_grads(weighted_pool, (value, weight), order=2, modes=["fwd"],
                atol=2e-2, rtol=2e-2)
    # Variadic init values with their own tangents.
    def f(value, weight, iv, iw):
      def comp(a, b):
        return (a[0] * b[1] + b[0], a[1] - b[1])
      return lax.reduce_window((value, weight), (iv, iw), comp, (2, 2),
                               (1, 1), "SAME")
    check_grads(f, (value, weight, np.float32(0.5), np.float32(-1.)),
                order=2, modes=["fwd"], atol=2e-2, rtol=2e-2)

  def testIntegerAndBooleanOperands(self):
    x = jnp.arange(12, dtype=jnp.int32).reshape(3, 4)
    f = _rw(_add, 0, (2, 2), (1, 1), "VALID")
    t = np.zeros(x.shape, jax.dtypes.float0)
    y, y_dot = jax.jvp(f, (x,), (t,))
    self.assertArraysEqual(y, lax.reduce_window(x, 0, lax.add, (2, 2),
                                                (1, 1), "VALID"))
    self.assertEqual(y_dot.dtype, jax.dtypes.float0)
    b = x % 3 == 0
    g = _rw(jnp.logical_or, False, (2, 2), (1, 1), "SAME")
    _, b_dot = jax.jvp(g, (b,), (np.zeros(b.shape, jax.dtypes.float0),))
    self.assertEqual(b_dot.dtype, jax.dtypes.float0)

    # Mixed: an argmax pool carrying integer indices next to float values.
    v = jtu.rand_unique_int(self.rng())((4, 5), np.float32)
    def argmax_pool(v):
      idx = lax.broadcasted_iota(jnp.int32, v.shape, 1)
      def comp(a, b):
        pick = a[0] >= b[0]
        return (jnp.where(pick, a[0], b[0]), jnp.where(pick, a[1], b[1]))
      return lax.reduce_window((v, idx), (-jnp.inf, jnp.int32(0)), comp,
                               (2, 2), (1, 1), "VALID")
    t = jtu.rand_small(self.rng())((4, 5), np.float32)
    (m, i), (m_dot, i_dot) = jax.jvp(argmax_pool, (v,), (t,))
    self.assertEqual(i_dot.dtype, jax.dtypes.float0)
    _, expected = jax.jvp(_rw(lax.max, -np.inf, (2, 2), (1, 1), "VALID"),
                          (v,), (t,))
    self.assertAllClose(m_dot, expected)
    check_grads(lambda v: argmax_pool(v)[0], (v,), order=2, modes=["fwd"],
                eps=1e-2, atol=5e-2, rtol=5e-2)

  @jtu.sample_product(reducer=["sub", "mul_init", "logaddexp", "smooth"])
  def testVmap(self, reducer):
    comp, _, tol = REDUCERS[reducer]
    rng = jtu.rand_small(self.rng())
    xs = rng((3, 5, 4), np.float32) + 1.
    inits = rng((3,), np.float32) + 1.
    ts, t_inits = rng((3, 5, 4), np.float32), rng((3,), np.float32)
    f = lambda x, init: lax.reduce_window(x, init, comp, (3, 2), (1, 2),
                                          ((1, 1), (0, 2)), (1, 2), (2, 1))
    loop = lambda g, *args: jax.tree_util.tree_map(
        lambda *xs: jnp.stack(xs),
        *[g(*(a[k] for a in args)) for k in range(3)])
    tol = tol or 1e-5
    # Batched operands, unbatched init.
    self.assertAllClose(jax.vmap(f, (0, None))(xs, inits[0]),
                        loop(lambda x: f(x, inits[0]), xs), rtol=tol, atol=tol)
    jvp = lambda x, i, t, ti: jax.jvp(f, (x, i), (t, ti))
    if reducer in ("mul_init", "logaddexp"):
      # Batched init values, with and without batched operands: the init is
      # combined once per window (for associative, commutative computations
      # what the unbatched reduction computes; see reduce_window_ad_primal_test
      # for the semantics and their order independence).
      self.assertAllClose(jax.vmap(f)(xs, inits), loop(f, xs, inits),
                          rtol=tol, atol=tol)
      self.assertAllClose(jax.vmap(f, (None, 0))(xs[0], inits),
                          loop(lambda i: f(xs[0], i), inits), rtol=tol,
                          atol=tol)
      # vmap of jvp, with batched tangents for operands and init values.
      self.assertAllClose(jax.vmap(jvp)(xs, inits, ts, t_inits),
                          loop(jvp, xs, inits, ts, t_inits), rtol=tol,
                          atol=tol)
    self.assertAllClose(jax.jit(jax.vmap(jvp, (None, None, 0, 0)))(
                            xs[0], inits[0], ts, t_inits),
                        loop(lambda t, ti: jvp(xs[0], inits[0], t, ti),
                             ts, t_inits), rtol=tol, atol=tol)
    # vmap of the linearized function.
    _, f_lin = jax.linearize(f, xs[0], inits[0])
    self.assertAllClose(jax.vmap(f_lin)(ts, t_inits),
                        loop(f_lin, ts, t_inits), rtol=tol, atol=tol)
    # jvp of vmap with batched inits agrees with finite differences.
    check_grads(jax.vmap(f), (xs, inits), order=2, modes=["fwd"],
                atol=5e-2, rtol=5e-2)

  def testJacfwd(self):
    x = jtu.rand_small(self.rng())((3, 4), np.float32) + 1.
    f = _rw(_mul, 1., (2, 2), (1, 1), "SAME")
    jac = jax.jacfwd(f)(x)
    self.assertEqual(jac.shape, (3, 4, 3, 4))
    expected = jax.jacfwd(
        lambda x: jnp.exp(_rw(lax.add, 0., (2, 2), (1, 1), "SAME")(
            jnp.log(x))))(x)
    self.assertAllClose(jac, expected, rtol=1e-4, atol=1e-4)
    hess = jax.jit(jax.jacfwd(jax.jacfwd(f)))(x)
    expected = jax.jacfwd(jax.jacfwd(
        lambda x: jnp.exp(_rw(lax.add, 0., (2, 2), (1, 1), "SAME")(
            jnp.log(x)))))(x)
    self.assertAllClose(hess, expected, rtol=1e-3, atol=1e-3)
    # With respect to the init value (a batched init tangent under vmap).
    g = lambda x, init: lax.reduce_window(x, init, _sub, (2, 2), (1, 1),
                                          "SAME")
    init = np.float32(0.7)
    jac_init = jax.jit(jax.jacfwd(g, argnums=1))(x, init)
    self.assertAllClose(jac_init, jnp.ones((3, 4)))
    h = lambda x, init: lax.reduce_window(x, init, _mul, (2, 2), (1, 1),
                                          "SAME")
    self.assertAllClose(jax.jacfwd(h, argnums=1)(x, init), h(x, init) / init,
                        rtol=1e-5, atol=1e-5)

  def testLinearizeStagesLinearTangentPrimitive(self):
    x = jtu.rand_small(self.rng())((4, 5), np.float32) + 1.
    t = jtu.rand_small(self.rng())((4, 5), np.float32)
    f = _rw(_smooth, 0.5, (2, 3), (2, 1), "SAME")
    y, f_lin = jax.linearize(f, x)
    y_ref, t_ref = jax.jvp(f, (x,), (t,))
    self.assertAllClose(y, y_ref)
    self.assertAllClose(f_lin(t), t_ref)
    # The linear part holds one reduce_window_jvp, whose tangent outputs are
    # linear in its tangent inputs and whose primal outputs are dropped.
    lin_jaxpr = jax.make_jaxpr(f_lin)(t).jaxpr
    prims = [e.primitive for e in lin_jaxpr.eqns]
    self.assertEqual(prims, [lax_windowed.reduce_window_jvp_p])
    self.assertEqual([type(v) for v in lin_jaxpr.eqns[0].outvars],
                     [core.DropVar, core.Var])
    # Under jit too, and with remat.
    y2, f_lin2 = jax.linearize(jax.jit(f), x)
    self.assertAllClose(f_lin2(t), t_ref)
    g = jax.checkpoint(lambda x: jnp.sin(f(x)))
    _, g_lin = jax.linearize(g, x)
    self.assertAllClose(g_lin(t), jnp.cos(y_ref) * t_ref, rtol=1e-5,
                        atol=1e-5)
    del y2
    # Inside a scan body (partial evaluation of the body jaxpr).
    f_same = _rw(_smooth, 0.5, (2, 3), (1, 1), "SAME")
    scanned = lambda x: lax.scan(lambda c, _: (jnp.tanh(f_same(c) / 4), None),
                                 x, None, length=2)[0]
    _, s_lin = jax.linearize(scanned, x)
    self.assertAllClose(s_lin(t), jax.jvp(scanned, (x,), (t,))[1],
                        rtol=1e-5, atol=1e-5)
    # A remat policy that saves nothing recomputes the primal reduction.
    g2 = jax.checkpoint(lambda x: jnp.sin(f(x)),
                        policy=jax.checkpoint_policies.nothing_saveable)
    self.assertAllClose(jax.linearize(g2, x)[1](t), jnp.cos(y_ref) * t_ref,
                        rtol=1e-5, atol=1e-5)
    jvp_jaxpr = jax.make_jaxpr(lambda x, t: jax.jvp(
        lambda x: jnp.sin(f(x)), (x,), (t,)))(x, t).jaxpr
    for policy in [lambda *_, **__: True, lambda *_, **__: False]:
      known, staged, unks, _, _ = pe.partial_eval_jaxpr_custom(
          jvp_jaxpr, [False, True], [True, True], False, False, policy)
      self.assertEqual(unks, [False, True])
      # The primal by reduce_window_p itself, the tangent staged.
      self.assertIn(lax_windowed.reduce_window_p,
                    [e.primitive for e in known.eqns])
      self.assertNotIn(lax_windowed.reduce_window_jvp_p,
                       [e.primitive for e in known.eqns])
      self.assertIn(lax_windowed.reduce_window_jvp_p,
                    [e.primitive for e in staged.eqns])

  def testJvpIsOneReduceWindow(self):
    x = jnp.ones((8, 8), jnp.float32)
    f = _rw(_mul, 1., (3, 3), (1, 1), "SAME")
    jvp = jax.jit(lambda x, t: jax.jvp(f, (x,), (t,)))
    hlo = jvp.lower(x, x).as_text()
    self.assertEqual(hlo.count("stablehlo.reduce_window"), 1)
    # Only the tangent: still a single reduction.
    t_only = jax.jit(lambda x, t: jax.jvp(f, (x,), (t,))[1])
    self.assertEqual(t_only.lower(x, x).as_text().count(
        "stablehlo.reduce_window"), 1)
    jaxpr = jax.make_jaxpr(lambda x, t: jax.jvp(f, (x,), (t,)))(x, x).jaxpr
    self.assertEqual([e.primitive for e in jaxpr.eqns],
                     [lax_windowed.reduce_window_jvp_p])

  def testJitOfJvpOfJit(self):
    x = jtu.rand_small(self.rng())((4, 4), np.float32)
    f = jax.jit(_rw(_logaddexp, -np.inf, (2, 2), (1, 1), "VALID"))
    expected = jax.jvp(
        lambda x: jnp.log(_rw(lax.add, 0., (2, 2), (1, 1), "VALID")(
            jnp.exp(x))), (x,), (jnp.ones_like(x),))
    self.assertAllClose(jax.jit(lambda x: jax.jvp(f, (x,), (jnp.ones_like(x),)))(x),
                        expected, rtol=1e-5, atol=1e-5)

  def testErrorsUnchanged(self):
    x = np.ones((4, 4), np.float32)
    with self.assertRaisesRegex(TypeError, "init_values to be scalars"):
      lax.reduce_window(x, np.zeros(2, np.float32), _mul, (2, 2), (1, 1),
                        "VALID")
    with self.assertRaisesRegex(TypeError, "inconsistent dtypes"):
      lax.reduce_window(x, np.int32(1), _mul, (2, 2), (1, 1), "VALID")
    with self.assertRaisesRegex(ValueError, "same tree structure"):
      lax.reduce_window((x, x), 0., _mul, (2, 2), (1, 1), "VALID")
    with self.assertRaisesRegex(ValueError, "same tree structure"):
      lax.reduce_window(x, 0., lambda a, b: [a * b], (2, 2), (1, 1), "VALID")
    # Under jvp the same errors come out.
    with self.assertRaisesRegex(TypeError, "init_values to be scalars"):
      jax.jvp(lambda x: lax.reduce_window(x, jnp.zeros(2), _mul, (2, 2),
                                          (1, 1), "VALID"), (x,), (x,))

  def testJvpPrimitive(self):
    # reduce_window_jvp(operands, operand tangents, init values, init
    # tangents) is reduce_window of the carried computation, and checks its
    # arguments as reduce_window does.
    x = jnp.ones((4, 4), jnp.float32)
    jaxpr = jax.make_jaxpr(_mul)(np.float32(0), np.float32(0)).jaxpr
    params = dict(jaxpr=jaxpr, consts=(), order=1, window_dimensions=(2, 2),
                  window_strides=(1, 1), padding=((0, 0), (0, 0)),
                  base_dilation=(1, 1), window_dilation=(1, 1))
    prim = lax_windowed.reduce_window_jvp_p
    with self.assertRaisesRegex(TypeError, "inconsistent dtypes"):
      prim.bind(x, x, np.float32(1), np.int32(0), **params)
    with self.assertRaisesRegex(TypeError, "init_values to be scalars"):
      prim.bind(x, x, np.float32(1), jnp.ones(2), **params)
    out, t_out = prim.bind(2 * x, 3 * x, np.float32(1), np.float32(0),
                           **params)
    self.assertAllClose(out, 16 * jnp.ones((3, 3)))
    # d(x1 * x2 * x3 * x4) = 4 * 3 * 2**3.
    self.assertAllClose(t_out, 96 * jnp.ones((3, 3)))
    # Its jvp is of order 2, of the same computation: the user's, whose init
    # values come first at every order.
    f = _rw(_mul, 1., (2, 2), (1, 1), "VALID")
    jvp = lambda x, t: jax.jvp(f, (x,), (t,))
    eqns = [jax.make_jaxpr(jvp)(x, x).eqns[0],
            jax.make_jaxpr(lambda x, t: jax.jvp(jvp, (x, t), (t, t)))(
                x, x).eqns[0]]
    self.assertEqual([e.primitive for e in eqns], [prim, prim])
    self.assertEqual([e.params["order"] for e in eqns], [1, 2])
    self.assertIs(eqns[0].params["jaxpr"], eqns[1].params["jaxpr"])
    self.assertEqual(eqns[1].invars[len(eqns[1].invars) // 2].val, 1.)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
