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
"""Generic `lax.reduce_window` gives the same derivatives, and the same
refusal of an init value that is not an identity, in every order of grad,
vmap, jit, jacfwd, jacrev and linearize, eagerly and jitted."""
from __future__ import annotations

import itertools
import re

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import test_util as jtu
from jax.test_util import check_grads

jax.config.parse_flags_with_absl()

tree_map = jax.tree_util.tree_map


def _mul(a, b):
  return a * b

def _add(a, b):
  return a + b

def _weighted(a, b):  # (value, weight) pair: weighted mean and total weight
  return ((a[0] * a[1] + b[0] * b[1]) / (a[1] + b[1]), a[1] + b[1])


# name -> (computation, identity, batched init values (not identities, but
# for the first), a concrete init value that is not an identity)
REDUCERS = {
    "mul": (_mul, 1., [1., 1.5, 0.5], 2.),
    "add": (_add, 0., [0., 1., -2.], 0.5),
    "max": (jnp.maximum, -np.inf, [-np.inf, 0.3, 1.31], 0.),
    "min": (jnp.minimum, np.inf, [np.inf, 1.31, 0.91], 0.),
    "logaddexp": (jnp.logaddexp, -np.inf, [-np.inf, 0., 1.], 0.),
    "pair": (_weighted, (0., 0.), ([0., 1., -1.], [0., 0.5, 2.]), (0., 1.)),
}
ORDERS = ["vmap(grad)", "grad(vmap)", "jit(grad(vmap))", "grad(jit(vmap))",
          "vmap(jit(grad))", "jacrev", "jacfwd"]
# Some windows hold only padding (their result is the init value).
WINDOW = ((2, 3), (1, 2), ((2, 0), (1, 1)))
BATCH, SHAPE = 3, (4, 5)


def _operand(name, x):
  return (x, x * x + 1.) if name == "pair" else x


def _loss(out):
  # sin of every finite output: padding-only windows of max, min and
  # logaddexp are infinite.
  leaves = jax.tree_util.tree_leaves(out)
  finite = [jnp.isfinite(o) for o in leaves]
  return sum(jnp.sum(jnp.where(m, jnp.sin(jnp.where(m, o, 0.)), 0.))
             for m, o in zip(finite, leaves))


def _reference(comp, x, init):
  """reduce_window as a left fold of `comp` over window offsets from `init`,
  with masks for the padding: plain jnp, differentiated by JAX as usual."""
  dims, strides, pads = WINDOW
  leaves, tree = jax.tree_util.tree_flatten(x)
  inits = jax.tree_util.tree_leaves(init)
  valid = lax.pad(jnp.ones(SHAPE, bool), False,
                  [(lo, hi, 0) for lo, hi in pads])
  padded = [lax.pad(v, jnp.ones((), v.dtype), [(lo, hi, 0) for lo, hi in pads])
            for v in leaves]
  take = lambda v, o: lax.slice(
      v, o, [o[d] + (n - 1) * strides[d] + 1
             for d, n in enumerate(out_shape)], strides)
  out_shape = lax.reduce_window_shape_tuple(SHAPE, dims, strides, pads)
  acc = [jnp.full(out_shape, i, v.dtype) for i, v in zip(inits, leaves)]
  for offset in itertools.product(*map(range, dims)):
    elems = [take(v, offset) for v in padded]
    new = jax.tree_util.tree_leaves(comp(tree.unflatten(acc),
                                         tree.unflatten(elems)))
    m = take(valid, offset)
    acc = [jnp.where(m, n, a) for n, a in zip(new, acc)]
  return tree.unflatten(acc)


@jtu.with_config(jax_enable_x64=True)
class ReduceWindowOrdersTest(jtu.JaxTestCase):

  def _setup(self, name, batched):
    comp, identity, batched_inits, _ = REDUCERS[name]
    rng = np.random.RandomState(0)
    # Distinct values: no ties for max and min.
    x = jnp.asarray(0.6 + rng.permutation(BATCH * np.prod(SHAPE)).reshape(
        BATCH, *SHAPE) / (BATCH * np.prod(SHAPE)))
    if batched:
      init = tree_map(jnp.asarray, batched_inits,
                      is_leaf=lambda v: isinstance(v, list))
    else:
      init = tree_map(jnp.float64, identity)
    f = lambda x, i: _loss(lax.reduce_window(_operand(name, x), i, comp,
                                             *WINDOW))
    ref = lambda x, i: _loss(_reference(comp, _operand(name, x), i))
    return f, ref, x, init, (0, 0 if batched else None)

  def _grads(self, order, f, x, init, in_axes):
    """Per-example gradients with respect to x and the init value (summed over
    the batch when the init value is shared)."""
    vf = jax.vmap(f, in_axes)
    shared = lambda g: g if in_axes[1] == 0 else tree_map(lambda v: v.sum(0),
                                                          g)
    if order in ("jacrev", "jacfwd"):
      # The diagonal of the Jacobian of the per-example losses.
      jx, ji = getattr(jax, order)(vf, (0, 1))(x, init)
      diag = lambda j: j[np.arange(BATCH), np.arange(BATCH)]
      return diag(jx), shared(ji if in_axes[1] is None else tree_map(diag, ji))
    grad = jax.grad(f, (0, 1))
    total = jax.grad(lambda x, i: vf(x, i).sum(), (0, 1))
    fn = {"vmap(grad)": jax.vmap(grad, in_axes),
          "grad(vmap)": total,
          "jit(grad(vmap))": jax.jit(total),
          "grad(jit(vmap))": jax.grad(lambda x, i: jax.jit(vf)(x, i).sum(),
                                      (0, 1)),
          "vmap(jit(grad))": jax.vmap(jax.jit(grad), in_axes)}[order]
    gx, gi = fn(x, init)
    return gx, shared(gi) if order.startswith("vmap") else gi

  @parameterized.named_parameters(
      dict(testcase_name=f"_{name}_{'batched' if batched else 'shared'}_init",
           name=name, batched=batched)
      for name, batched in itertools.product(REDUCERS, (True, False)))
  def testEveryOrderAgrees(self, name, batched):
    f, ref, x, init, in_axes = self._setup(name, batched)
    # Against the reference, example by example.
    want = [jax.grad(ref, (0, 1))(x[k], tree_map(
        lambda i: i[k] if batched else i, init)) for k in range(BATCH)]
    want_x = jnp.stack([w[0] for w in want])
    want_i = tree_map(lambda *g: jnp.stack(g) if batched else sum(g),
                      *[w[1] for w in want])
    for order in ORDERS:
      gx, gi = self._grads(order, f, x, init, in_axes)
      self.assertAllClose(gx, want_x, rtol=1e-10, atol=1e-10, err_msg=order)
      self.assertAllClose(gi, want_i, rtol=1e-10, atol=1e-10, err_msg=order)
    # Full Jacobians, reverse against forward mode.
    vf = jax.vmap(f, in_axes)
    self.assertAllClose(jax.jacrev(vf, (0, 1))(x, init),
                        jax.jacfwd(vf, (0, 1))(x, init),
                        rtol=1e-10, atol=1e-10)
    if name in ("mul", "logaddexp", "pair"):
      check_grads(vf, (x, init), order=1, modes=["rev"])

  @parameterized.named_parameters(
      dict(testcase_name=f"_{name}_{'batched' if batched else 'shared'}_init",
           name=name, batched=batched)
      for name, batched in itertools.product(REDUCERS, (True, False)))
  def testLinearize(self, name, batched):
    comp = REDUCERS[name][0]
    _, _, x, init, in_axes = self._setup(name, batched)
    pool = jax.vmap(lambda x, i: lax.reduce_window(
        _operand(name, x), i, comp, *WINDOW), in_axes)
    ref_pool = jax.vmap(lambda x, i: _reference(comp, _operand(name, x), i),
                        in_axes)
    rng = np.random.RandomState(1)
    t = (jnp.asarray(rng.normal(size=x.shape)),
         tree_map(lambda i: jnp.asarray(rng.normal(size=i.shape)), init))
    y, lin = jax.linearize(pool, x, init)
    y_ref, t_ref = jax.jvp(ref_pool, (x, init), t)
    finite = lambda v: tree_map(lambda a: jnp.where(jnp.isfinite(a), a, 0.),
                                v)
    self.assertAllClose(finite(y), finite(y_ref), rtol=1e-10, atol=1e-10)
    self.assertAllClose(finite(lin(*t)), finite(t_ref), rtol=1e-10,
                        atol=1e-10)
    ct = tree_map(lambda v: jnp.where(jnp.isfinite(v), jnp.asarray(
        rng.normal(size=v.shape)), 0.), y)
    self.assertAllClose(jax.linear_transpose(lin, *t)(ct),
                        jax.vjp(ref_pool, x, init)[1](ct),
                        rtol=1e-10, atol=1e-10)

  @parameterized.named_parameters(
      dict(testcase_name=f"_{name}", name=name) for name in REDUCERS)
  def testNotAnIdentityRefusedInEveryOrder(self, name):
    comp, _, _, bad = REDUCERS[name]
    bad = tree_map(np.float64, bad)
    _, _, x, _, _ = self._setup(name, False)
    # The init value is a constant of the function: known in every order.
    f = lambda x, i: _loss(lax.reduce_window(_operand(name, x), bad, comp,
                                             *WINDOW)) + 0 * i
    init = jnp.zeros(())
    leaves = [str(v) for v in jax.tree_util.tree_leaves(bad)]
    shown = leaves[0] if len(leaves) == 1 else f"({', '.join(leaves)})"
    msg = (rf"but {re.escape(shown)} is not an identity: "
           r"computation\(init, a\) == a == computation\(a, init\) fails at "
           r"a=[^\n]* The computation: \{ lambda")
    for order in ORDERS:
      if order == "jacfwd":
        continue
      with self.assertRaisesRegex(ValueError, msg, msg=order):
        self._grads(order, f, x, init, (0, None))
    vf = jax.vmap(f, (0, None))
    _, lin = jax.linearize(vf, x, init)
    with self.assertRaisesRegex(ValueError, msg):
      jax.linear_transpose(lin, x, init)(jnp.ones(BATCH))
    with self.assertRaisesRegex(ValueError, msg):
      jax.jacrev(jax.jacfwd(vf))(x, init)
    # Known as an argument too: second order in either order.
    g = lambda x, i: _loss(lax.reduce_window(_operand(name, x), i, comp,
                                             *WINDOW))
    for h in [jax.hessian(g, (0, 1)), jax.jacrev(jax.jacrev(g, (0, 1)))]:
      with self.assertRaisesRegex(ValueError, msg):
        h(x[0], bad)
    # Forward mode takes any init value.
    jax.jacfwd(vf)(x, init)
    jax.jacfwd(jax.jacfwd(g, (0, 1)))(x[0], bad)
    lin(x, init)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
