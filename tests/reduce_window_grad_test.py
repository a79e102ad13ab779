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
"""Reverse-mode AD of `lax.reduce_window` with generic reducers."""
from __future__ import annotations

import itertools

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import test_util as jtu
from jax._src.lax import lax as lax_internal
from jax._src.lax import windowed_reductions as lax_windowed
from jax.test_util import check_grads

jax.config.parse_flags_with_absl()


def _mul(a, b):
  return a * b

def _add(a, b):
  return a + b

def _sub(a, b):
  return a - b

def _mean(a, b):
  return (a + b) / 2

# name -> (computation, init value)
REDUCERS = {
    "mul": (_mul, 1.),
    "add": (_add, 0.),
    "max": (jnp.maximum, -np.inf),
    "min": (jnp.minimum, np.inf),
    "logaddexp": (jnp.logaddexp, -np.inf),
}

# (shape, dims, strides, padding, base_dilation, window_dilation)
GEOMETRIES = [
    ((7,), (3,), (1,), "VALID", (1,), (1,)),
    ((8,), (3,), (2,), "SAME", (1,), (1,)),
    ((5,), (3,), (2,), ((3, 4),), (2,), (2,)),
    ((9,), (6,), (1,), ((2, 1),), (1,), (2,)),       # window > 4: doubling
    ((11,), (7,), (3,), ((4, 5),), (2,), (1,)),      # doubling, base dilation
    ((8,), (2,), (1,), ((-1, 1),), (1,), (1,)),      # negative padding
    ((4, 5), (2, 3), (2, 1), ((1, 2), (0, 1)), (1, 2), (2, 1)),
    ((3, 4), (2, 2), (1, 1), ((3, 0), (0, 4)), (1, 1), (1, 1)),  # empty windows
    ((3, 4, 5), (2, 2, 2), (1, 2, 1), "SAME", (1, 1, 2), (1, 2, 1)),
    ((2, 4, 4, 3), (1, 3, 3, 1), (1, 2, 2, 1), "SAME", (1,) * 4, (1,) * 4),
    ((6, 3), (2, 1), (1, 1), ((-1, 2), (0, 0)), (1, 1), (1, 1)),
    ((9, 2), (3, 2), (2, 1), ((4, 3), (1, 0)), (1, 1), (2, 1)),
]

# Every geometry with three reducers, every reducer with several geometries.
_NAMES = list(REDUCERS)
SWEEP = [(g, _NAMES[(i + k) % len(_NAMES)])
         for i, g in enumerate(GEOMETRIES) for k in (0, 2, 4)]


def _pads(shape, dims, strides, padding, base_dilation, window_dilation):
  if isinstance(padding, str):
    return tuple(lax.padtype_to_pads(
        lax_internal._dilate_shape(shape, base_dilation),
        lax_internal._dilate_shape(dims, window_dilation), strides, padding))
  return tuple(padding)


def _reference(comp, operands, inits, dims, strides, padding, base_dilation,
               window_dilation):
  """reduce_window as a gather and a left fold over window offsets, in the
  row-major order XLA's CPU backend uses, skipping padding and holes."""
  shape = np.shape(operands[0])
  pads = _pads(shape, dims, strides, padding, base_dilation, window_dilation)
  out_shape = lax.reduce_window_shape_tuple(shape, dims, strides, pads,
                                            base_dilation, window_dilation)
  out_idx = np.indices(out_shape)
  flat = [jnp.ravel(x) for x in operands]
  acc = tuple(jnp.broadcast_to(jnp.asarray(i), out_shape) for i in inits)
  for offset in itertools.product(*map(range, dims)):
    valid = np.ones(out_shape, bool)
    src = []
    for d in range(len(shape)):
      p = (out_idx[d] * strides[d] + offset[d] * window_dilation[d]
           - pads[d][0])
      valid &= (p >= 0) & (p % base_dilation[d] == 0)
      q = p // base_dilation[d]
      valid &= q < shape[d]
      src.append(np.clip(q, 0, max(shape[d] - 1, 0)))
    if not valid.any():
      continue
    idx = np.ravel_multi_index(src, shape)
    elems = tuple(x[idx] for x in flat)
    new = comp(acc, elems)
    acc = tuple(jnp.where(valid, n, a) for n, a in zip(new, acc))
  return acc


def _rw(comp, init, dims, strides, padding, base_dilation=None,
        window_dilation=None):
  return lambda x, init=init: lax.reduce_window(
      x, init, comp, dims, strides, padding, base_dilation, window_dilation)


def _operand(rng, shape, reducer, dtype=np.float64):
  # Distinct values (no ties for max/min), away from zero for products.
  x = rng.permutation(np.prod(shape, dtype=int)).reshape(shape)
  return jnp.asarray(0.6 + x / max(x.size, 1), dtype)


@jtu.with_config(jax_enable_x64=True)
class ReduceWindowGradTest(jtu.JaxTestCase):

  @parameterized.named_parameters(
      dict(testcase_name=f"_{reducer}_{i}_{'x'.join(map(str, g[0]))}",
           geometry=g, reducer=reducer)
      for i, (g, reducer) in enumerate(SWEEP))
  def testVjpAgainstReferenceAndJvp(self, geometry, reducer):
    shape, dims, strides, padding, base_dilation, window_dilation = geometry
    comp, init = REDUCERS[reducer]
    rng = np.random.RandomState(len(shape) * 7 + dims[0])
    x = _operand(rng, shape, reducer)
    init = jnp.float64(init)
    f = _rw(comp, init, dims, strides, padding, base_dilation,
            window_dilation)
    ref = lambda x, i: _reference(
        lambda a, b: (comp(a[0], b[0]),), [x], [i], dims, strides, padding,
        base_dilation, window_dilation)[0]
    out, vjp = jax.jit(lambda x, i: jax.vjp(f, x, i))(x, init)
    ref_out, ref_vjp = jax.vjp(ref, x, init)
    self.assertAllClose(out, ref_out)
    ct = jnp.asarray(rng.normal(size=out.shape))
    ct_x, ct_init = vjp(ct)
    ref_ct_x, ref_ct_init = ref_vjp(ct)
    finite = np.isfinite(float(init))
    self.assertAllClose(ct_x, ref_ct_x, rtol=1e-10, atol=1e-10)
    if finite:
      self.assertAllClose(ct_init, ref_ct_init, rtol=1e-10, atol=1e-10)
    # <ct, J t> == <J^T ct, t>, J t from (exact) forward mode.
    t_x = jnp.asarray(rng.normal(size=shape))
    t_init = jnp.float64(rng.normal()) if finite else jnp.float64(0.)
    _, jt = jax.jvp(f, (x, init), (t_x, t_init))
    self.assertAllClose(jnp.vdot(ct, jt),
                        jnp.vdot(ct_x, t_x) + ct_init * t_init,
                        rtol=1e-10, atol=1e-10)

  @parameterized.named_parameters(
      dict(testcase_name=f"_{name}", comp=comp, init=init)
      for name, comp, init in [
          ("mul", _mul, 1.), ("add", _add, 0.),
          ("logaddexp", jnp.logaddexp, -np.inf),
          ("max", jnp.maximum, -np.inf)])
  def testCheckGradsSecondOrderRev(self, comp, init):
    rng = np.random.RandomState(0)
    x = _operand(rng, (4, 5), "")
    for dims, strides, padding, bd, wd in [
        ((2, 3), (1, 2), "SAME", (1, 1), (1, 1)),
        ((3, 2), (2, 1), ((1, 2), (0, 1)), (2, 1), (1, 2)),
        ((5, 1), (1, 1), ((2, 2), (0, 0)), (1, 1), (1, 1))]:
      f = _rw(comp, init, dims, strides, padding, bd, wd)
      # Reverse mode is defined at the identity init only, so second order
      # (finite differences of the vjp) in x alone.
      check_grads(f, (x,), order=2, modes=["rev"])
      if np.isfinite(init):
        check_grads(f, (x, init), order=1, modes=["rev"])

  def testGradWithRespectToInitValue(self):
    # out = init * prod(window), so d sum(out) / d init = sum(prod(window)),
    # and windows entirely in the padding give out = init.
    x = jnp.arange(1., 7.)
    f = lambda i: lax.reduce_window(x, i, _mul, (2,), (2,), ((3, 3),)).sum()
    windows = [1., 2. * 3., 4. * 5., 6., 1., 1.]  # pads/empties give init
    self.assertEqual(lax.reduce_window(x, 1., _mul, (2,), (2,),
                                       ((3, 3),)).shape, (6,))
    self.assertAllClose(jax.grad(f)(1.), sum(windows))
    self.assertAllClose(jax.grad(jax.grad(f))(1.), 0.)
    self.assertAllClose(jax.jit(jax.grad(f))(1.), sum(windows))
    # A sum: d sum(out) / d init is the number of windows.
    g = lambda i: lax.reduce_window(x, i, _add, (3,), (1,), "VALID").sum()
    self.assertAllClose(jax.grad(g)(0.), 4.)
    # Reverse mode is defined at the identity only: first order in the init
    # value (finite differences of the primal), second order in x.
    check_grads(g, (0.,), order=1, modes=["rev"])

  def testJacrevEqualsJacfwd(self):
    rng = np.random.RandomState(1)
    x = _operand(rng, (3, 5), "")
    for comp, init in [(_mul, 1.), (_add, 0.)]:
      f = _rw(comp, init, (2, 2), (1, 2), "SAME", (2, 1), (1, 1))
      self.assertAllClose(jax.jacrev(f, argnums=(0, 1))(x, init),
                          jax.jacfwd(f, argnums=(0, 1))(x, init))

  def testHigherOrder(self):
    rng = np.random.RandomState(2)
    x = _operand(rng, (3, 4), "")
    f = lambda x, i: jnp.sum(jnp.sin(lax.reduce_window(
        x, i, _mul, (2, 3), (1, 1), "SAME")))
    both = (0, 1)
    h_fwd = jax.jit(jax.jacfwd(jax.jacfwd(f, both), both))(x, 1.)
    for h in [jax.hessian(f, both),                       # jacfwd(jacrev)
              jax.jacrev(jax.jacrev(f, both), both),
              jax.jacrev(jax.jacfwd(f, both), both)]:
      self.assertAllClose(jax.jit(h)(x, 1.), h_fwd, rtol=1e-10, atol=1e-10)
    # Eagerly too: reverse over forward checks the user's init value 1, not
    # the dual numbers (1, 1) the forward pass reduces with.
    for h in [jax.hessian(f, both), jax.jacrev(jax.jacrev(f, both), both),
              jax.jacrev(jax.jacfwd(f, both), both)]:
      self.assertAllClose(h(x, 1.), h_fwd, rtol=1e-10, atol=1e-10)
    g = lambda x: jnp.sum(jnp.sin(lax.reduce_window(
        x, -jnp.inf, jnp.logaddexp, (2, 3), (1, 1), "SAME")))
    self.assertAllClose(jax.hessian(g)(x), jax.jacfwd(jax.jacfwd(g))(x),
                        rtol=1e-10, atol=1e-10)
    sq = lambda x: jnp.sum(jax.grad(f)(x, 1.) ** 2)
    self.assertAllClose(jax.jit(jax.grad(sq))(x), jax.jit(jax.jacfwd(sq))(x))

  def testVmapBatchedOperandsAndInits(self):
    # A known init value is checked for being an identity; a traced one (a
    # jit argument, a batched one under vmap) is trusted, and reverse mode
    # differentiates init combined once per window.
    rng = np.random.RandomState(3)
    xs = _operand(rng, (3, 4, 5), "")
    inits = jnp.array([1., 2., 0.5])
    rw = lambda x, i: lax.reduce_window(x, i, _mul, (2, 2), (1, 2), "SAME")
    f = lambda x, i: jnp.sum(rw(x, i) ** 2)
    grad_f = jax.grad(f, argnums=(0, 1))
    with self.assertRaisesRegex(ValueError, "not an identity"):
      grad_f(xs[1], 2.)
    with self.assertRaisesRegex(ValueError, "not an identity"):
      jax.vmap(grad_f, (0, None))(xs, 2.)   # unbatched: known
    g = jax.vmap(grad_f)(xs, jnp.ones(3))
    for k in range(3):
      self.assertAllClose((g[0][k], g[1][k]), grad_f(xs[k], 1.))
    # Every window has elements: the result is init * (product of window).
    ref = lambda x, i: jnp.sum((i * rw(x, 1.)) ** 2)
    for g in [jax.vmap(grad_f)(xs, inits), jax.jit(jax.vmap(grad_f))(xs, inits)]:
      for k in range(3):
        gk = jax.grad(ref, argnums=(0, 1))(xs[k], inits[k])
        self.assertAllClose((g[0][k], g[1][k]), gk)
        self.assertAllClose(jax.jit(grad_f)(xs[k], inits[k]), gk)
    # Batched operands, shared init; and jit.
    g = jax.jit(jax.vmap(jax.grad(f), in_axes=(0, None)))(xs, 1.)
    for k in range(3):
      self.assertAllClose(g[k], jax.grad(f)(xs[k], 1.))
    # Transposing the batched tangent primitive (batched init tangents):
    # linear_transpose of a vmapped linearized function.
    y, lin = jax.linearize(lambda x, i: lax.reduce_window(
        x, i, _mul, (2, 3), (1, 1), "SAME"), xs[0], 1.)
    vlin = jax.vmap(lin)
    dx = jnp.asarray(rng.normal(size=xs.shape))
    di = jnp.asarray(rng.normal(size=(3,)))
    ct = jnp.asarray(rng.normal(size=(3,) + y.shape))
    ct_dx, ct_di = jax.linear_transpose(vlin, dx, di)(ct)
    self.assertAllClose(jnp.vdot(ct, vlin(dx, di)),
                        jnp.vdot(ct_dx, dx) + jnp.vdot(ct_di, di))

  def testCheckpointAndScan(self):
    rng = np.random.RandomState(4)
    x = _operand(rng, (5, 6), "")
    rw = _rw(jnp.logaddexp, -np.inf, (2, 2), (1, 1), "SAME")
    f = lambda x: jnp.sum(jnp.sin(rw(x)) ** 2)
    expected = jax.jit(jax.grad(f))(x)
    for policy in [None, jax.checkpoint_policies.nothing_saveable,
                   jax.checkpoint_policies.everything_saveable]:
      g = jax.jit(jax.grad(jax.checkpoint(f, policy=policy)))(x)
      self.assertAllClose(g, expected)
    self.assertAllClose(jax.jit(jax.grad(jax.remat(f)))(x), expected)

    def body(c, _):
      return rw(c) * 0.1, None
    scanned = lambda x: jnp.sum(lax.scan(body, x, None, length=3)[0])
    unrolled = lambda x: jnp.sum(rw(rw(rw(x) * 0.1) * 0.1) * 0.1)
    self.assertAllClose(jax.jit(jax.grad(scanned))(x),
                        jax.jit(jax.grad(unrolled))(x))
    check_grads(jax.jit(scanned), (x,), order=2, modes=["rev"])

  def testLinearizeThenLinearTranspose(self):
    rng = np.random.RandomState(5)
    x = _operand(rng, (4, 6), "")
    f = _rw(_mul, 1., (3, 2), (2, 1), ((1, 1), (0, 1)), (1, 2), (1, 1))
    y, lin = jax.linearize(f, x, 1.)
    ct = jnp.asarray(rng.normal(size=y.shape))
    ct_x, ct_i = jax.linear_transpose(lin, x, 1.)(ct)
    ref_x, ref_i = jax.vjp(f, x, 1.)[1](ct)
    self.assertAllClose((ct_x, ct_i), (ref_x, ref_i))

  def testVariadicPytreeReducers(self):
    rng = np.random.RandomState(6)
    x = _operand(rng, (5, 4), "")
    w = jnp.asarray(rng.uniform(0.5, 2., (5, 4)))
    geom = ((2, 2), (1, 1), "SAME", (1, 1), (2, 1))

    def stats(a, b):  # (sum, sum of squares) over a dict pytree
      return {"s": a["s"] + b["s"], "q": a["q"] + b["q"]}
    f = lambda x: lax.reduce_window({"s": x, "q": x * x},
                                    {"s": 0., "q": 0.}, stats, *geom)
    ref = lambda x: dict(zip("sq", _reference(
        lambda a, b: (a[0] + b[0], a[1] + b[1]), [x, x * x], [0., 0.],
        *geom)))
    ct = {"s": jnp.asarray(rng.normal(size=(5, 4))),
          "q": jnp.asarray(rng.normal(size=(5, 4)))}
    self.assertAllClose(jax.vjp(f, x)[1](ct), jax.vjp(ref, x)[1](ct))

    def softmax_pair(a, b):  # weighted mean with accumulated weight
      wa, wb = a[1], b[1]
      return ((a[0] * wa + b[0] * wb) / (wa + wb), wa + wb)
    # Identity (0, 0): (v * w) / w = v up to rounding.
    g = lambda x, w: lax.reduce_window((x, w), (0., 0.), softmax_pair,
                                       *geom)
    gref = lambda x, w: _reference(softmax_pair, [x, w], [0., 0.], *geom)
    cts = tuple(jnp.asarray(rng.normal(size=(5, 4))) for _ in range(2))
    self.assertAllClose(jax.vjp(g, x, w)[1](cts),
                        jax.vjp(gref, x, w)[1](cts))
    check_grads(g, (x, w), order=2, modes=["rev"])

  def testComplexMultiplication(self):
    rng = np.random.RandomState(7)
    x = jnp.asarray(rng.uniform(0.5, 1.5, (4, 5))
                    + 1j * rng.uniform(-0.5, 0.5, (4, 5)))
    geom = ((2, 3), (1, 1), "SAME", (1, 1), (1, 1))
    f = lambda x: lax.reduce_window(x, jnp.complex128(1), _mul, *geom)
    ref = lambda x: _reference(lambda a, b: (a[0] * b[0],), [x],
                               [jnp.complex128(1)], *geom)[0]
    ct = jnp.asarray(rng.normal(size=(4, 5)) + 1j * rng.normal(size=(4, 5)))
    self.assertAllClose(jax.vjp(f, x)[1](ct), jax.vjp(ref, x)[1](ct))
    loss = lambda x: jnp.sum(jnp.abs(f(x)) ** 2)
    self.assertAllClose(jax.grad(loss)(x),
                        jax.grad(lambda x: jnp.sum(jnp.abs(ref(x)) ** 2))(x))
    check_grads(f, (x,), order=2, modes=["rev"])

  def testIntegerOperandInVariadicReducer(self):
    # (value, index) argmax-style reducer: associative and commutative on
    # distinct values; gradients flow to the values only.
    rng = np.random.RandomState(8)
    x = _operand(rng, (6, 5), "")
    idx = jnp.arange(30, dtype=jnp.int32).reshape(6, 5)

    def argmax_pair(a, b):
      pick = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
      return (jnp.where(pick, a[0], b[0]), jnp.where(pick, a[1], b[1]))
    geom = ((2, 3), (2, 1), "SAME", (1, 1), (1, 1))
    f = lambda x: lax.reduce_window((x, idx), (-jnp.inf, jnp.int32(-1)),
                                    argmax_pair, *geom)[0]
    ref = lambda x: lax.reduce_window(x, -jnp.inf, lax.max, *geom)
    ct = jnp.asarray(rng.normal(size=f(x).shape))
    self.assertAllClose(jax.vjp(f, x)[1](ct), jax.vjp(ref, x)[1](ct))

  def testKnownAndTracedIdentityInitsAgree(self):
    # A known init value is checked, and as an identity skips the combination
    # with the init value; a traced one is trusted and combined once per
    # window.  Both give the same gradient.
    rng = np.random.RandomState(11)
    x = _operand(rng, (5, 6), "")
    geom = ((3, 2), (2, 1), ((1, 2), (0, 1)), (1, 2), (1, 1))
    for comp, init in [(_mul, 1.), (jnp.logaddexp, -np.inf), (_add, 0.)]:
      known = lambda x, comp=comp, init=init: jnp.sum(jnp.sin(
          lax.reduce_window(x, init, comp, *geom)))
      traced = lambda x, comp=comp, init=init: jnp.sum(jnp.sin(
          lax.reduce_window(x, lax.stop_gradient(x[0, 0]) * 0 + init, comp,
                            *geom)))
      check = lax_windowed._rw_check_identity
      checked = []
      def spy(jaxpr, consts, init_values):
        checked.append(init_values)
        return check(jaxpr, consts, init_values)
      lax_windowed._rw_check_identity = spy
      try:
        want = jax.grad(known)(x)
        self.assertLen(checked, 1)
        got_traced = jax.jit(jax.grad(traced))(x)
        self.assertLen(checked, 1)
        got_known = jax.jit(jax.grad(known))(x)
        self.assertLen(checked, 2)
      finally:
        lax_windowed._rw_check_identity = check
      self.assertAllClose(got_traced, want, rtol=1e-12, atol=1e-12)
      self.assertAllClose(got_known, want, rtol=1e-12, atol=1e-12)

  def testChunkedCotangent(self):
    # Large operands get their cotangent in chunks along a leading dimension
    # that no window spans; force that on small ones and compare.
    rng = np.random.RandomState(10)
    x = _operand(rng, (6, 5, 7, 2), "")
    geom = ((1, 3, 2, 1), (1, 2, 1, 1), "SAME", (1, 1, 1, 1), (1, 1, 2, 1))
    chunks = lambda dims, chunk_bytes: lax_windowed._rw_num_chunks(
        [x], window_dimensions=dims, window_strides=(1,), padding=((0, 0),),
        base_dilation=(1,), chunk_bytes=chunk_bytes)
    self.assertEqual(chunks((1,), x.nbytes // 3), 3)
    self.assertEqual(chunks((1,), 1), 6)
    # A window that spans dimension 0: no chunks.
    self.assertEqual(chunks((2,), 1), 1)
    for comp, init in [(_mul, 1.), (jnp.logaddexp, -np.inf)]:
      f = _rw(comp, init, *geom)
      ref = lambda x, i, comp=comp: _reference(
          lambda a, b: (comp(a[0], b[0]),), [x], [i], *geom)[0]
      ct = jnp.asarray(rng.normal(size=f(x).shape))
      want = jax.vjp(ref, x, init)[1](ct)
      for chunk_bytes in [x.nbytes // 3, 1]:
        old = lax_windowed._RW_CHUNK_BYTES
        lax_windowed._RW_CHUNK_BYTES = chunk_bytes
        try:
          got_x = jax.vjp(f, x)[1](ct)[0]
          self.assertAllClose(got_x, want[0], rtol=1e-10, atol=1e-10)
          if np.isfinite(init):  # the init cotangent sums over chunks
            got = jax.jit(lambda x, i: jax.vjp(f, x, i)[1](ct))(x, init)
            self.assertAllClose(got, want, rtol=1e-10, atol=1e-10)
          jaxpr = jax.make_jaxpr(jax.vjp(f, x)[1])(ct)
          self.assertIn("scan", str(jaxpr))   # lax.map over the chunks
        finally:
          lax_windowed._RW_CHUNK_BYTES = old

  def testFloat32(self):
    rng = np.random.RandomState(9)
    x = _operand(rng, (6, 7), "", np.float32)
    f = lambda x: lax.reduce_window(x, jnp.array(-np.inf, x.dtype),
                                    jnp.logaddexp, (3, 3), (2, 2), "SAME")
    g = jax.jit(jax.grad(lambda x: jnp.sum(f(x) ** 2)))(x)
    self.assertEqual(g.dtype, np.float32)
    g64 = jax.grad(lambda x: jnp.sum(f(x) ** 2))(x.astype(np.float64))
    self.assertAllClose(g, g64.astype(np.float32), rtol=1e-5, atol=1e-5)

  @parameterized.named_parameters(
      dict(testcase_name=f"_{name}", comp=comp, init=init)
      for name, comp, init in [
          ("sub", _sub, 0.), ("mean", _mean, 0.), ("first", lambda a, b: a, 0.),
          ("pair", lambda a, b: (a[0] * b[1] + a[1], a[1] + b[1]), (0., 1.))])
  def testComputationWithoutIdentityRaises(self, comp, init):
    # None of these has an identity, so their (known) init value is not one.
    x = jnp.arange(1., 9.)
    f = lambda x: lax.reduce_window(x if not isinstance(init, tuple)
                                    else (x, x), init, comp, (3,), (1,),
                                    "SAME")
    loss = lambda x: sum(jnp.sum(o) for o in jax.tree_util.tree_leaves(f(x)))
    with self.assertRaisesRegex(ValueError, "is not an identity"):
      jax.grad(loss)(x)
    with self.assertRaisesRegex(ValueError, "is not an identity"):
      jax.jit(jax.vjp(f, x)[1])(jax.tree_util.tree_map(jnp.ones_like, f(x)))
    # Forward mode is unaffected, and agrees with finite differences.
    check_grads(loss, (x,), order=1, modes=["fwd"])

  def testEmptyOperand(self):
    # No elements at all: every window is the init value.
    x = jnp.zeros((0, 3))
    f = lambda x, i: jnp.sum(lax.reduce_window(x, i, _mul, (1, 2), (1, 1),
                                               ((2, 1), (0, 0))))
    gx, gi = jax.grad(f, argnums=(0, 1))(x, 1.)
    self.assertEqual(gx.shape, (0, 3))
    self.assertAllClose(gi, 6.)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
