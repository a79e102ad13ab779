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
"""`jnp.take_along_axis` picks one element per row without gather/scatter.

Patch 0029: where `indices` has size 1 along `axis` (its other dimensions
equal to `arr`'s or 1, `arr.ndim >= 2`), the pick is a select and a reduction
(its gradient a select), with upstream's results bit for bit, its
out-of-bounds handling under every mode, and its errors.
"""
from __future__ import annotations

from functools import partial

from absl.testing import absltest
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import jaxpr_util
from jax._src import test_util as jtu

import upstream_parity

jax.config.parse_flags_with_absl()

_DTYPES = [np.float16, np.float32, jnp.bfloat16, np.int8, np.int32,
           np.uint32, np.bool_, np.complex64]
_SPECIAL = [-0.0, 0.0, np.inf, -np.inf, np.nan, 1.5, -2.25, 3.0]


def _primitive_names(f, *args) -> set[str]:
  jaxpr = jax.make_jaxpr(f)(*args)
  return set(jaxpr_util.collect_eqns(jaxpr.jaxpr, lambda e: e.primitive.name))


def _gathers(names: set[str]) -> set[str]:
  return {p for p in names if p == "gather" or p.startswith("scatter")}


def _array(rng, shape, dtype, special=False):
  """Values of `dtype`; with `special`, floats include -0.0, infs and NaN."""
  if np.dtype(dtype) == np.bool_:
    return rng.rand(*shape) < 0.5
  if np.issubdtype(np.dtype(dtype), np.integer):
    info = np.iinfo(dtype)
    return rng.randint(max(info.min, -1000), min(info.max, 1000),
                       size=shape).astype(dtype)
  if special:
    x = rng.choice(np.array(_SPECIAL, np.float32), size=shape)
  else:
    x = rng.randn(*shape).astype(np.float32)
  if np.issubdtype(np.dtype(dtype), np.complexfloating):
    z = np.empty(shape, dtype)
    z.real, z.imag = x, rng.choice(np.array(_SPECIAL, np.float32), size=shape)
    return z
  return x.astype(dtype)


def _bits(x) -> bytes:
  return np.asarray(x).tobytes()


def _pick_shapes():
  # (arr shape, index shape, axis): one element per row, some dimensions of
  # the index broadcast (size 1).
  return [((3, 5), (3, 1), 1), ((3, 5), (3, 1), -1), ((5, 3), (1, 3), 0),
          ((2, 3, 7), (2, 3, 1), 2), ((2, 3, 7), (2, 1, 1), -1),
          ((2, 3, 7), (1, 3, 1), 2), ((2, 7, 3), (2, 1, 3), 1),
          ((4, 2, 3), (1, 2, 3), 0), ((2, 1, 4), (2, 1, 1), 2),
          ((2, 3, 4, 6), (2, 3, 4, 1), 3), ((3, 1), (3, 1), 1)]


class TakeAlongAxisPickTest(jtu.JaxTestCase):

  @jtu.sample_product(
      [dict(shape=s, idx_shape=i, axis=a) for s, i, a in _pick_shapes()],
      dtype=_DTYPES,
      mode=[None, "fill", "clip", "promise_in_bounds"],
  )
  def test_against_numpy(self, shape, idx_shape, axis, dtype, mode):
    rng = np.random.RandomState(0)
    arr = _array(rng, shape, dtype)
    n = shape[axis]
    idx = rng.randint(-n, n, size=idx_shape).astype(np.int32)
    expected = np.take_along_axis(arr, idx, axis)
    out = jnp.take_along_axis(arr, idx, axis, mode=mode)
    self.assertEqual(out.dtype, np.dtype(dtype))
    self.assertEqual(out.shape, expected.shape)
    self.assertEqual(_bits(out), _bits(expected))
    self.assertFalse(_gathers(_primitive_names(
        partial(jnp.take_along_axis, axis=axis, mode=mode), arr, idx)))

  @jtu.sample_product(dtype=[np.float16, np.float32, jnp.bfloat16,
                             np.complex64],
                      seed=range(3))
  def test_exact_whatever_the_order(self, dtype, seed):
    # -0.0, infs and NaN come out bit for bit, and permuting `arr` along the
    # axis (the indices permuted to match) changes no bit: each row's
    # reduction adds the picked value to -0.0s only.
    rng = np.random.RandomState(seed)
    arr = _array(rng, (6, 4, 9), dtype, special=True)
    idx = rng.randint(-9, 9, size=(6, 4, 1)).astype(np.int32)
    arr[0, 0, idx[0, 0, 0]] = -0.0
    out = jnp.take_along_axis(arr, idx, 2)
    expected = np.take_along_axis(arr, idx, 2)
    self.assertEqual(_bits(out), _bits(expected))
    perm = rng.permutation(9)
    inv = np.argsort(perm)
    idx_p = inv[idx % 9].astype(np.int32)
    out_p = jnp.take_along_axis(arr[..., perm], idx_p, 2)
    self.assertEqual(_bits(out_p), _bits(out))
    # The identity matters: with +0.0 (a reduce_sum's init) a picked -0.0
    # would come out +0.0.
    self.assertTrue(np.signbit(np.real(out[0, 0, 0])))

  @jtu.sample_product(mode=[None, "clip"], axis=[0, 1, -1])
  def test_grads(self, mode, axis):
    rng = np.random.RandomState(1)
    arr = rng.randn(4, 5, 6).astype(np.float32)
    n = arr.shape[axis]
    idx_shape = list(arr.shape)
    idx_shape[axis] = 1
    # "clip" also clamps out-of-bounds indices; "fill" would give NaN there.
    lo, hi = (-n - 2, n + 2) if mode == "clip" else (-n, n)
    idx = rng.randint(lo, hi, size=idx_shape).astype(np.int32)
    f = lambda a: jnp.take_along_axis(a, idx, axis, mode=mode)
    jtu.check_grads(f, (arr,), order=2, modes=["fwd", "rev"])
    for g in (jax.grad(lambda a: jnp.sum(f(a) ** 2)), jax.jacfwd(f)):
      self.assertFalse(_gathers(_primitive_names(g, arr)))

  def test_out_of_bounds_gradient_is_zero_under_fill(self):
    arr = np.arange(12., dtype=np.float32).reshape(3, 4)
    idx = np.array([[1], [4], [-5]], np.int32)
    out = jnp.take_along_axis(arr, idx, 1)
    np.testing.assert_array_equal(out, [[1.], [np.nan], [np.nan]])
    g = jax.grad(lambda a: jnp.nansum(jnp.take_along_axis(a, idx, 1)))(arr)
    expected = np.zeros_like(arr)
    expected[0, 1] = 1.
    np.testing.assert_array_equal(g, expected)

  @jtu.sample_product(batched=["idx", "arr", "both"])
  def test_vmap(self, batched):
    rng = np.random.RandomState(2)
    arr = rng.randn(5, 3, 7).astype(np.float32)
    idx = rng.randint(-7, 7, size=(5, 3, 1)).astype(np.int32)
    in_axes = {"idx": (None, 0), "arr": (0, None), "both": (0, 0)}[batched]
    a = arr if in_axes[0] == 0 else arr[0]
    i = idx if in_axes[1] == 0 else idx[0]
    f = jax.vmap(lambda a, i: jnp.take_along_axis(a, i, -1), in_axes)
    expected = np.stack([np.take_along_axis(arr[k] if in_axes[0] == 0 else a,
                                            idx[k] if in_axes[1] == 0 else i,
                                            -1) for k in range(5)])
    self.assertEqual(_bits(f(a, i)), _bits(expected))
    self.assertFalse(_gathers(_primitive_names(f, a, i)))
    g = jax.grad(lambda a: jnp.sum(f(a, i) * 3.))(a)
    self.assertEqual(g.shape, a.shape)
    np.testing.assert_allclose(g.sum(), 3. * expected.size)

  def test_jit_with_traced_indices(self):
    rng = np.random.RandomState(3)
    arr = rng.randn(6, 10).astype(np.float32)
    idx = rng.randint(-12, 12, size=(6, 1)).astype(np.int32)
    f = jax.jit(lambda a, i: jnp.take_along_axis(a, i, 1, mode="clip"))
    expected = np.take_along_axis(arr, np.clip(np.where(idx < 0, idx + 10, idx),
                                               0, 9), 1)
    self.assertEqual(_bits(f(arr, idx)), _bits(expected))
    hlo = f.lower(arr, idx).as_text()
    self.assertNotIn("gather", hlo)
    self.assertNotIn("scatter", hlo)

  @jtu.sample_product(
      [dict(shape=s, idx_shape=i, axis=a) for s, i, a in [
          ((3, 5), (3, 2), 1),     # two elements per row
          ((7,), (1,), 0),         # rank 1
          ((1, 5), (3, 1), 1),     # arr broadcast along a dimension
      ]])
  def test_other_indices_still_gather(self, shape, idx_shape, axis):
    rng = np.random.RandomState(4)
    arr = rng.randn(*shape).astype(np.float32)
    idx = rng.randint(0, shape[axis], size=idx_shape).astype(np.int32)
    f = partial(jnp.take_along_axis, axis=axis)
    self.assertIn("gather", _primitive_names(f, arr, idx))
    self.assertIn("scatter-add", _primitive_names(
        jax.grad(lambda a: f(a, idx).sum()), arr))
    np.testing.assert_array_equal(
        f(arr, idx), np.take_along_axis(np.broadcast_to(arr, (3, 5))
                                        if shape == (1, 5) else arr, idx,
                                        axis))


# Cases run on both upstream 0.4.26 (its gather path, in a subprocess) and this
# tree: values (bit for bit), dtypes, weak types, gradients and errors agree.
_WORKER = r'''
import pickle, sys
import numpy as np
import jax, jax.numpy as jnp
from jax._src.lax import lax as lax_internal

def _run_case(case):
  arr, weak, idx, axis, mode, op = case
  a = lax_internal._convert_element_type(arr, arr.dtype, weak)
  try:
    if op == "take":
      out = jnp.take_along_axis(a, idx, axis, mode=mode)
    elif op == "jit":
      out = jax.jit(lambda a, i: jnp.take_along_axis(a, i, axis, mode=mode))(
          a, idx)
    else:  # "grad": a gradient with no zero cotangent
      def f(a):
        out = jnp.take_along_axis(a, idx, axis, mode=mode)
        w = jnp.arange(1, out.size + 1, dtype=out.dtype).reshape(out.shape)
        return jnp.sum(jnp.where(jnp.isnan(out), 0, out * w))
      out = jax.grad(f)(a)
    res = ("ok", np.asarray(out), str(out.dtype), bool(out.weak_type),
           np.asarray(out).tobytes())
  except Exception as e:
    res = ("error", type(e).__name__, str(e).split("\n")[0])
  return res

def run_all(cases):
  return [_run_case(c) for c in cases]

if __name__ == "__main__":
  with open(sys.argv[1], "rb") as fh:
    cases = pickle.load(fh)
  with open(sys.argv[2], "wb") as fh:
    pickle.dump(run_all(cases), fh)
'''


def _parity_cases() -> list:
  rng = np.random.RandomState(5)
  cases = []
  modes = [None, "fill", "clip", "promise_in_bounds"]
  for shape, idx_shape, axis in _pick_shapes():
    n = shape[axis]
    for k, dtype in enumerate(_DTYPES):
      arr = _array(rng, shape, dtype, special=True)
      # In-bounds, negative and out-of-bounds indices (past -n and n).
      idx = rng.randint(-n - 3, n + 3, size=idx_shape).astype(np.int32)
      # Every mode for every shape and dtype, over take, jit and grad.
      j = len(cases)
      cases.append((arr, False, idx, axis, modes[j % 4], "take"))
      cases.append((arr, False, idx, axis, modes[(j + 1) % 4], "take"))
      cases.append((arr, k % 2 == 0, idx, axis, modes[(j + 2) % 4], "jit"))
      if np.issubdtype(np.dtype(dtype), np.floating):
        cases.append((arr, False, idx, axis, modes[(j + 3) % 3], "grad"))
  arr = _array(rng, (3, 5), np.float32, special=True)
  idx = np.array([[0], [4], [-1]], np.int32)
  cases += [
      (arr, False, idx.astype(np.uint8), 1, None, "take"),
      (arr, False, np.array([[2 ** 31 - 1], [-2 ** 31], [5]], np.int32), 1,
       None, "take"),
      (arr, False, np.array([[9], [250], [3]], np.uint8), 1, "clip", "take"),
      (arr, True, idx, 1, None, "take"),             # weak-typed arr
      (arr, False, idx, 1, "bogus", "take"),         # errors, as upstream
      (arr, False, idx, 1, "bogus", "jit"),
      (arr, False, idx, 2, None, "take"),
      (arr, False, idx, -3, None, "take"),
      (arr, False, idx[:, 0], 1, None, "take"),
      (arr, False, idx.astype(np.float32), 1, None, "take"),
      (arr, False, idx, None, None, "take"),
      (arr, False, np.zeros((3, 1), np.int32), 0, None, "take"),
      (arr, False, np.zeros((1, 0), np.int32), 0, None, "take"),
      (np.zeros((3, 0), np.float32), False, np.zeros((3, 1), np.int32), 1,
       None, "take"),
  ]
  return cases


# Upstream's gather path raises for these (the slice of an empty dimension),
# where NumPy and ours give the empty result.
_UPSTREAM_RAISES = [(np.zeros((0, 4), np.float32), np.zeros((0, 1), np.int32),
                     1),
                    (np.zeros((2, 0, 4), np.int8),
                     np.zeros((1, 0, 1), np.int32), 2)]


class UpstreamParityTest(jtu.JaxTestCase):

  def test_same_results_gradients_and_errors_as_upstream(self):
    cases = _parity_cases()
    raising = [(arr, False, idx, axis, None, "take")
               for arr, idx, axis in _UPSTREAM_RAISES]
    ours, theirs = upstream_parity.run_side_by_side(_WORKER, cases + raising,
                                                    timeout=600)
    for (arr, _, idx, axis, _, _), a, b in zip(raising, ours[len(cases):],
                                               theirs[len(cases):]):
      self.assertEqual(b[0], "error")
      self.assertIn("gather", b[2])
      expected = np.take_along_axis(arr, idx, axis)
      self.assertEqual(a[0], "ok")
      self.assertEqual((a[1].shape, a[2]), (expected.shape, str(arr.dtype)))
    ours, theirs = ours[:len(cases)], theirs[:len(cases)]
    ok = upstream_parity.assert_same_outcomes(self, cases, ours, theirs,
                                              array_field=1)
    self.assertGreater(len(ok), len(cases) * 3 // 4)
    errors = {r[1] for r in ours if r[0] == "error"}
    self.assertEqual(errors, {"ValueError", "TypeError"})
    self.assertEqual(
        {mode for case, r in zip(cases, ours) if r[0] == "ok"
         for mode in [case[4]]}, {None, "fill", "clip", "promise_in_bounds"})



if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
