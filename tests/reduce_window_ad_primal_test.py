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
"""Generic `lax.reduce_window` under AD: the primal is the primal (bit for
bit), the init value check of reverse mode, batched init values in any
association order, and export of a gradient."""
from __future__ import annotations

import functools
import itertools

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import test_util as jtu
from jax._src.lax import windowed_reductions as lax_windowed

jax.config.parse_flags_with_absl()


def _bits(x):
  """The raw bits of an array (NaNs with different payloads differ)."""
  x = np.asarray(x)
  if x.dtype.kind == "c":
    x = np.stack([x.real, x.imag])
  return x.view(np.dtype(f"uint{8 * x.dtype.itemsize}"))


def _mul(a, b):
  return a * b

def _add(a, b):
  return a + b

def _weighted(a, b):  # (value, weight) pair: weighted mean and total weight
  return ((a[0] * a[1] + b[0] * b[1]) / (a[1] + b[1]), a[1] + b[1])

def _argmax(a, b):
  pick = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
  return (jnp.where(pick, a[0], b[0]), jnp.where(pick, a[1], b[1]))


# name -> (computation, init(dtype), operand(x) -> pytree, window geometry)
CASES = {
    # The issue's case: a 5x5 log-sum-exp pool.
    "logaddexp_5x5": (jnp.logaddexp, lambda d: jnp.array(-np.inf, d),
                      lambda x: x, ((5, 5), (1, 1), "SAME")),
    "mul_3x3_s2": (_mul, lambda d: jnp.array(1, d), lambda x: x,
                   ((3, 3), (2, 2), "SAME")),
    "add": (_add, lambda d: jnp.array(0, d), lambda x: x,
                 ((2, 3), (1, 2), ((1, 2), (0, 1)))),
    "max": (jnp.maximum, lambda d: jnp.array(-np.inf, d), lambda x: x,
            ((3, 3), (2, 1), "SAME")),
    "weighted_pair": (_weighted, lambda d: (jnp.array(0, d), jnp.array(0, d)),
                      lambda x: (x, x * x + 1), ((3, 2), (1, 1), "SAME")),
    "argmax_pair": (_argmax, lambda d: (jnp.array(-np.inf, d), np.int32(-1)),
                    lambda x: (x, jnp.arange(x.size, dtype=np.int32
                                             ).reshape(x.shape)),
                    ((2, 3), (2, 1), "SAME")),
}
DTYPES = {"bfloat16": jnp.bfloat16, "float16": np.float16,
          "float32": np.float32, "float64": np.float64}


@jtu.with_config(jax_enable_x64=True)
class ReduceWindowPrimalUnderAdTest(jtu.JaxTestCase):
  """The primal output under AD is XLA's ReduceWindow's, bit for bit."""

  def _fns(self, case, dtype):
    comp, init, operand, (dims, strides, padding) = CASES[case]
    init = init(dtype)

    def pool(x):
      out = lax.reduce_window(operand(x), init, comp, dims, strides, padding)
      return out[0] if isinstance(out, tuple) else out

    def loss(x):  # summed in float32, as in the issue
      return jnp.sum(pool(x).astype(np.float32) ** 2)
    return pool, loss

  def _check(self, pool, loss, x):
    expected_out = _bits(pool(x))
    expected_loss = _bits(loss(x))
    jit_out = _bits(jax.jit(pool)(x))
    jit_loss = _bits(jax.jit(loss)(x))
    # (Eager and jitted primals need not agree with each other: XLA may
    # contract a complex product into fused multiply-adds in one and not the
    # other.  What AD must not change is either of them.)

    with_aux = lambda x: (loss(x), pool(x))
    fns = {
        "value_and_grad": lambda x: jax.value_and_grad(loss)(x)[0],
        "grad_aux": lambda x: jax.grad(with_aux, has_aux=True)(x)[1],
        "vjp": lambda x: jax.vjp(pool, x)[0],
        "vjp_loss": lambda x: jax.vjp(loss, x)[0],
        "linearize": lambda x: jax.linearize(pool, x)[0],
    }
    for name, policy in [
        ("remat", None),
        ("nothing", jax.checkpoint_policies.nothing_saveable),
        ("everything", jax.checkpoint_policies.everything_saveable),
        ("dots", jax.checkpoint_policies.dots_with_no_batch_dims_saveable)]:
      ck = jax.checkpoint(with_aux, policy=policy)
      fns[f"checkpoint_{name}"] = (
          lambda x, ck=ck: jax.grad(ck, has_aux=True)(x)[1])
    for name, fn in fns.items():
      is_loss = name in ("value_and_grad", "vjp_loss")
      for jitted in (False, True):
        got = _bits((jax.jit(fn) if jitted else fn)(x))
        want = ((jit_loss if jitted else expected_loss) if is_loss
                else (jit_out if jitted else expected_out))
        np.testing.assert_array_equal(
            got, want, err_msg=f"{name}, jit={jitted}")

  @parameterized.named_parameters(
      dict(testcase_name=f"_{case}_{dname}", case=case, dtype=dtype)
      for case, (dname, dtype) in itertools.product(CASES, DTYPES.items())
      if not (case == "weighted_pair" and dname == "float16"))
  def testPrimalIsBitwiseTheSame(self, case, dtype):
    shape = (64, 64) if case == "logaddexp_5x5" else (9, 10)
    rng = np.random.RandomState(0)
    x = jnp.asarray(rng.normal(size=shape) * 3., dtype)
    pool, loss = self._fns(case, dtype)
    self._check(pool, loss, x)

  def testIssueNumbers(self):
    # bfloat16 5x5 log-sum-exp pool on (64, 64) summed in float32: the loss
    # and the value of value_and_grad are the same number.
    pool, loss = self._fns("logaddexp_5x5", jnp.bfloat16)
    x = jnp.asarray(np.random.RandomState(0).normal(size=(64, 64)) * 3.,
                    jnp.bfloat16)
    loss = lambda x, loss=loss: jnp.sum(pool(x).astype(np.float32))
    self.assertEqual(_bits(loss(x)), _bits(jax.value_and_grad(loss)(x)[0]))
    self.assertEqual(_bits(jax.jit(loss)(x)),
                     _bits(jax.jit(jax.value_and_grad(loss))(x)[0]))

  def testComplexProduct(self):
    rng = np.random.RandomState(1)
    for dtype in (np.complex64, np.complex128):
      x = jnp.asarray(rng.uniform(0.5, 1.5, (6, 7))
                      + 1j * rng.uniform(-0.5, 0.5, (6, 7)), dtype)
      pool = lambda x: lax.reduce_window(x, jnp.array(1, x.dtype),
                                         _mul, (3, 2), (1, 1), "SAME")
      loss = lambda x: jnp.sum(jnp.abs(pool(x)) ** 2)
      self._check(pool, loss, x)

  def testBatchedInitValues(self):
    # vmap with batched init values, under AD too.
    rng = np.random.RandomState(2)
    xs = jnp.asarray(rng.normal(size=(3, 8, 9)), np.float32)
    inits = jnp.asarray([0.5, -1., 2.], np.float32)
    pool = lambda x, i: lax.reduce_window(x, i, jnp.logaddexp, (3, 3),
                                          (1, 2), "SAME")
    loss = lambda x, i: jnp.sum(pool(x, i) ** 2)
    want = _bits(jax.vmap(pool)(xs, inits))
    got = jax.vmap(lambda x, i: jax.vjp(pool, x, i)[0])(xs, inits)
    np.testing.assert_array_equal(_bits(got), want)
    got = jax.vjp(jax.vmap(pool), xs, inits)[0]
    np.testing.assert_array_equal(_bits(got), want)
    want = _bits(jax.jit(jax.vmap(loss))(xs, inits))
    got = jax.jit(jax.vmap(jax.value_and_grad(loss, (0, 1))))(xs, inits)[0]
    np.testing.assert_array_equal(_bits(got), want)

  def testLinearizedPrimalIsReduceWindow(self):
    x = jnp.arange(12.).reshape(3, 4)
    f = lambda x: lax.reduce_window(x, 0., _mul, (2, 2), (1, 1), "SAME")
    jaxpr = jax.make_jaxpr(lambda x: jax.linearize(f, x)[0])(x)
    self.assertEqual([e.primitive for e in jaxpr.eqns],
                     [lax_windowed.reduce_window_p])


class InitCheckTest(jtu.JaxTestCase):
  """Reverse mode checks an init value known while tracing, trusts others."""

  def _grad(self, comp, init, dtype, pair=False):
    x = jnp.asarray(np.linspace(0.5, 2., 12).reshape(3, 4), dtype)
    if pair:
      f = lambda x: jnp.sum(lax.reduce_window(
          (x, x + 1), init, comp, (2, 2), (1, 1), "SAME")[0].astype(
              np.float32))
    else:
      f = lambda x: jnp.sum(lax.reduce_window(
          x, init, comp, (2, 2), (1, 1), "SAME").astype(np.float32))
    return jax.grad(f)(x)

  @parameterized.named_parameters(
      dict(testcase_name="_max_plus", comp=lambda a, b: jnp.maximum(a, b) + 1e-4,
           init=-np.inf),
      dict(testcase_name="_scaled_add", comp=lambda a, b: (a + b) * (1 + 1e-4),
           init=0.),
      dict(testcase_name="_mean", comp=lambda a, b: (a + b) / 2, init=0.),
      dict(testcase_name="_sub", comp=lambda a, b: a - b, init=0.),
      dict(testcase_name="_first", comp=lambda a, b: a, init=0.))
  def testNotAnIdentityRaisesFloat32(self, comp, init):
    # Each init value is off by far more than the tolerance (8 * eps * |a|)
    # on one side at least: e.g. max(-inf, a) + 1e-4 = a + 1e-4.
    msg = (r"is not an identity: computation\(init, a\) == a == "
           r"computation\(a, init\) fails at a=")
    with self.assertRaisesRegex(ValueError, msg):
      self._grad(comp, np.float32(init), np.float32)
    with self.assertRaisesRegex(ValueError, msg):
      jax.jit(jax.grad(lambda x: jnp.sum(lax.reduce_window(
          x, np.float32(init), comp, (3,), (1,), "SAME"))))(
              jnp.arange(1., 6., dtype=np.float32))

  def testInitMustBeAnIdentity(self):
    # a * b * (1 + 1e-4) is associative and commutative (multiplication
    # conjugated by x -> x * (1 + 1e-4)), but 1 is not its identity: XLA may
    # combine the init value any number of times, so the primal itself would
    # depend on the backend.  The same holds for any init value that is not
    # an identity, even an idempotent one like 0 for max.
    scaled = lambda a, b: a * b * (1 + 1e-4)
    x = jnp.asarray(np.linspace(0.5, 2., 12).reshape(3, 4), np.float32)
    for comp, init in [(scaled, 1.), (_mul, 1.5), (_add, 0.3),
                       (jnp.logaddexp, 0.2), (jnp.maximum, 0.)]:
      f = lambda x, init=init, comp=comp: jnp.sum(lax.reduce_window(
          x, np.float32(init), comp, (2, 2), (1, 1), "SAME"))
      msg = (r"needs an init value that is an identity .* is not an "
             r"identity: computation\(init, a\) == a == "
             r"computation\(a, init\) fails at a=")
      with self.assertRaisesRegex(ValueError, msg):
        jax.grad(f)(x)
      with self.assertRaisesRegex(ValueError, "not an identity"):
        jax.jit(jax.grad(f))(x)   # a NumPy scalar of the traced function
      with self.assertRaisesRegex(ValueError, "not an identity"):
        jax.grad(jax.jit(f))(x)
      with self.assertRaisesRegex(ValueError, "not an identity"):
        jax.vjp(lambda x, i: lax.reduce_window(x, i, comp, (2,), (1,),
                                               "SAME"), x[0], init)[1](x[0])
      # Forward mode differentiates XLA's own reduction: any init works.
      jax.jacfwd(f)(x)
    # With its identity, the scaled product is accepted and its gradient is
    # right: reverse mode agrees with forward mode.
    init = np.float32(1) / np.float32(1 + 1e-4)
    f = lambda x: lax.reduce_window(x, init, scaled, (2, 2), (1, 1), "SAME")
    self.assertAllClose(jax.jacrev(f)(x), jax.jacfwd(f)(x), rtol=1e-5,
                        atol=1e-6)

  @parameterized.named_parameters(
      dict(testcase_name=f"_{name}_{dname}", comp=comp, init=init,
           dtype=dtype, pair=pair)
      for (name, comp, init, pair), (dname, dtype) in itertools.product(
          [("mul", _mul, 1., False), ("add", _add, 0., False),
           ("logaddexp", jnp.logaddexp, -np.inf, False),
           ("maximum", jnp.maximum, -np.inf, False),
           ("minimum", jnp.minimum, np.inf, False),
           ("weighted", _weighted, (0., 0.), True),
           ("sum_sq", lambda a, b: (a[0] + b[0], a[1] + b[1]), (0., 0.), True)],
          DTYPES.items()))
  def testMonoidsPass(self, comp, init, dtype, pair):
    with jax.experimental.enable_x64(dtype == np.float64):
      init = jax.tree_util.tree_map(lambda v: jnp.array(v, dtype), init)
      g = self._grad(comp, init, dtype, pair)
      self.assertEqual(g.dtype, dtype)

  def testComplexAndArgmaxGradients(self):
    # Against the same pools written without the generic reducer: products
    # of shifted slices, and lax.max's own (select_and_gather) gradient.
    def mul_pool(x):  # (2, 2) windows, stride 1, SAME: pad (0, 1) with 1s.
      p = jnp.pad(x, ((0, 1), (0, 1)), constant_values=1)
      return p[:-1, :-1] * p[1:, :-1] * p[:-1, 1:] * p[1:, 1:]
    for dtype in (np.complex64, np.complex128):
      with jax.experimental.enable_x64(dtype == np.complex128):
        x = jnp.asarray(np.linspace(0.5, 2., 12).reshape(3, 4) * (1 + 0.5j),
                        dtype)
        f = lambda x: jnp.sum(jnp.abs(lax.reduce_window(
            x, jnp.array(1, dtype), _mul, (2, 2), (1, 1), "SAME")) ** 2)
        g = jax.grad(f)(x)
        self.assertEqual(g.dtype, dtype)
        self.assertAllClose(
            g, jax.grad(lambda x: jnp.sum(jnp.abs(mul_pool(x)) ** 2))(x))
    for dname, dtype in DTYPES.items():
      with jax.experimental.enable_x64(dtype == np.float64):
        x = jnp.asarray(np.linspace(2., 0.5, 12).reshape(3, 4), dtype)
        idx = jnp.arange(12, dtype=np.int32).reshape(3, 4)
        loss = lambda out: jnp.sum(jnp.sin(out.astype(np.float32)))
        f = lambda x: loss(lax.reduce_window(
            (x, idx), (jnp.array(-np.inf, dtype), np.int32(-1)), _argmax,
            (2, 2), (1, 1), "SAME")[0])
        ref = lambda x: loss(lax.reduce_window(
            x, jnp.array(-np.inf, dtype), lax.max, (2, 2), (1, 1), "SAME"))
        self.assertAllClose(jax.grad(f)(x), jax.grad(ref)(x), err_msg=dname)

  def testTracedInitIsTrusted(self):
    # Not known while tracing (a jit argument), the init value is trusted:
    # reverse mode differentiates computation(init, r), r the reduction of
    # the window's elements (an identity init inside).
    x = jnp.asarray(np.linspace(0.5, 2., 12).reshape(3, 4), np.float32)
    for comp, identity, init in [(_mul, 1., 1.5), (_add, 0., 0.3),
                                 (jnp.logaddexp, -np.inf, 0.2)]:
      rw = lambda x, i, comp=comp: lax.reduce_window(x, i, comp, (2, 2),
                                                     (1, 1), "VALID")
      f = lambda x, i: jnp.sum(jnp.sin(rw(x, i)))
      ref = lambda x, i, comp=comp, identity=identity: jnp.sum(jnp.sin(
          comp(i, rw(x, np.float32(identity)))))
      got = jax.jit(jax.grad(f, (0, 1)))(x, np.float32(init))
      self.assertAllClose(got, jax.grad(ref, (0, 1))(x, np.float32(init)),
                          rtol=1e-4, atol=1e-5)
      with self.assertRaisesRegex(ValueError, "not an identity"):
        jax.grad(f, (0, 1))(x, np.float32(init))   # known: checked

  def testReverseOverForwardOfIllConditionedPair(self):
    # jacrev(jacfwd) transposes the dual-number form of the computation,
    # whose init value (0, 0, 0, 0) is checked as an identity of that form.
    x = jnp.asarray(np.linspace(0.5, 2., 12).reshape(3, 4), np.float32)
    f = lambda x: jnp.sum(jnp.sin(lax.reduce_window(
        (x, x * x + 1), (np.float32(0), np.float32(0)), _weighted, (2, 2),
        (1, 1), "SAME")[0]))
    self.assertAllClose(jax.jacrev(jax.jacfwd(f))(x),
                        jax.jacfwd(jax.jacfwd(f))(x), rtol=1e-4, atol=1e-5)


def _fold(comp, xs, order):
  """Reduces the list xs with comp in the given association order."""
  if order == "left":
    return functools.reduce(comp, xs)
  if order == "right":
    return functools.reduce(lambda acc, x: comp(x, acc), xs[::-1])
  if order == "balanced":
    while len(xs) > 1:
      xs = [comp(xs[i], xs[i + 1]) if i + 1 < len(xs) else xs[i]
            for i in range(0, len(xs), 2)]
    return xs[0]
  if order == "reversed_pairs":  # right to left, b-argument accumulating
    while len(xs) > 1:
      xs = ([xs[0]] if len(xs) % 2 else []) + [
          comp(xs[i + 1], xs[i]) for i in range(len(xs) % 2, len(xs), 2)]
    return xs[0]
  raise ValueError(order)


class BatchedInitOrderTest(jtu.JaxTestCase):
  """vmap over init values computes init once per window, in any order."""

  @parameterized.named_parameters(
      dict(testcase_name=f"_{name}", comp=comp)
      for name, comp in [("add", _add), ("mul", _mul),
                         ("logaddexp", jnp.logaddexp)])
  def testAnyAssociationOrder(self, comp):
    # The batched rule reduces with slices and elementwise applications of the
    # computation, not a ReduceWindow whose association order (and how often
    # it combines the init value) a backend chooses; its result is init
    # combined once with each window's elements, folded in any order.
    x = np.arange(1., 5., dtype=np.float32)
    inits = np.array([10., 0.5], np.float32)
    window = ((3,), (1,), ((1, 1),))
    batched = jax.vmap(lambda i: lax.reduce_window(jnp.asarray(x), i, comp,
                                                   *window))
    jaxpr = jax.make_jaxpr(batched)(inits)
    self.assertNotIn("reduce_window", str(jaxpr))
    got = batched(inits)
    padded = [None] + list(x) + [None]   # SAME padding (1, 1), skipped
    for order in ("left", "right", "balanced", "reversed_pairs"):
      for b, i in enumerate(inits):
        want = [comp(i, _fold(comp, [v for v in padded[w:w + 3]
                                     if v is not None], order))
                for w in range(4)]
        np.testing.assert_allclose(np.asarray(got[b]),
                                   np.asarray(want, np.float32), rtol=1e-6,
                                   err_msg=order)
    if comp is _add:
      # The issue's example: add, init 10, over 1..4 (one window).
      y = jax.vmap(lambda i: lax.reduce_window(
          jnp.arange(1., 5.), i, _add, (4,), (1,), "VALID"))(
              jnp.array([10., 0.]))
      self.assertAllClose(y, jnp.array([[20.], [10.]]))

  def testMatchesUnbatchedForMonoids(self):
    rng = np.random.RandomState(3)
    x = jnp.asarray(rng.uniform(0.5, 2., (5, 6)), np.float32)
    for comp, inits in [(_add, [0., 10., -3.]), (_mul, [1., 2., -0.5]),
                        (jnp.logaddexp, [-np.inf, 0., 3.]),
                        (jnp.maximum, [-np.inf, 1., 5.])]:
      inits = jnp.asarray(inits, np.float32)
      f = lambda x, i: lax.reduce_window(x, i, comp, (3, 2), (2, 1),
                                         ((2, 1), (0, 3)), (1, 2), (1, 1))
      self.assertAllClose(jax.vmap(f, (None, 0))(x, inits),
                          jnp.stack([f(x, i) for i in inits]),
                          rtol=1e-6, atol=1e-6)


class ExportTest(jtu.JaxTestCase):

  def testExportGradOfGenericReduceWindow(self):
    try:
      from jax.experimental import export
    except ImportError as e:  # needs flatbuffers (requirements-test.txt)
      self.skipTest(str(e))
    rng = np.random.RandomState(4)
    x = jnp.asarray(rng.uniform(0.5, 2., (6, 7)), np.float32)
    pool = lambda x: lax.reduce_window(x, np.float32(-np.inf), jnp.logaddexp,
                                       (3, 3), (2, 1), "SAME")
    f = jax.jit(jax.value_and_grad(lambda x: jnp.sum(pool(x) ** 2)))
    exp = export.export(f)(x)
    blob = export.serialize(exp)
    restored = export.deserialize(blob)
    got = export.call_exported(restored)(x)
    want = f(x)
    np.testing.assert_array_equal(_bits(got[0]), _bits(want[0]))
    np.testing.assert_array_equal(_bits(got[1]), _bits(want[1]))
    # jvp (the carried ReduceWindow) exports too.
    g = jax.jit(lambda x, t: jax.jvp(pool, (x,), (t,)))
    restored = export.deserialize(export.serialize(export.export(g)(x, x)))
    for a, b in zip(export.call_exported(restored)(x, x), g(x, x)):
      np.testing.assert_array_equal(_bits(a), _bits(b))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
