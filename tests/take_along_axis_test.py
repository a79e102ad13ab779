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
"""`jnp.take_along_axis` picking one element per row: its gradient is a select.

Patch 0029: where `indices` has size 1 along `axis` (its other dimensions
equal to `arr`'s or 1) and `arr` is floating or complex, the pick and its
forward-mode tangent stay upstream's gathers, bit for bit (subnormals,
signalling NaNs, NaN payloads, signed zeros), under every mode, with
upstream's errors; the gradient, the transpose of the tangent, is a select of
the broadcast cotangent instead of a scatter-add, with the same values except
that it keeps the cotangent's bits where the scatter-add's `0.0 + c` does not.
"""
from __future__ import annotations

from functools import partial
import os
from pathlib import Path
import re
import subprocess
import sys

from absl.testing import absltest
import ml_dtypes
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import jaxpr_util
from jax._src import test_util as jtu
from jax.experimental import enable_x64
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh, PartitionSpec as P

import upstream_parity

jax.config.parse_flags_with_absl()

REPO = Path(__file__).resolve().parents[1]

_DTYPES = [np.float16, np.float32, jnp.bfloat16, np.int8, np.int32,
           np.uint32, np.bool_, np.complex64]
_SPECIAL = [-0.0, 0.0, np.inf, -np.inf, np.nan, 1.5, -2.25, 3.0]
# Bit patterns: -0.0, subnormals (positive, negative, the largest), signalling
# NaNs (with payloads, either sign), quiet NaNs with payloads, -inf, 1.5.
_SPECIAL_BITS = {
    np.dtype(np.float16): (np.uint16, [
        0x8000, 0x0001, 0x83ff, 0x03ff, 0x7c01, 0xfd55, 0x7e55, 0xfc00,
        0x3e00]),
    np.dtype(jnp.bfloat16): (np.uint16, [
        0x8000, 0x0001, 0x8040, 0x007f, 0x7f81, 0xffa5, 0x7fc5, 0xff80,
        0x3fc0]),
    np.dtype(np.float32): (np.uint32, [
        0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x7f800001, 0xffa00005,
        0x7fc01234, 0xff800000, 0x3fc00000]),
    np.dtype(np.float64): (np.uint64, [
        0x8000000000000000, 0x0000000000000001, 0x800fffffffffffff,
        0x000fffffffffffff, 0x7ff0000000000001, 0xfff4000000000005,
        0x7ff8000000001234, 0xfff0000000000000, 0x3ff8000000000000]),
}
_FLOATS = list(_SPECIAL_BITS)
_MODES = [None, "fill", "clip", "promise_in_bounds"]


def _primitive_names(f, *args) -> set[str]:
  jaxpr = jax.make_jaxpr(f)(*args)
  return set(jaxpr_util.collect_eqns(jaxpr.jaxpr, lambda e: e.primitive.name))


def _scatters(names: set[str]) -> set[str]:
  return {p for p in names if p.startswith("scatter")}


def _special_bits(rng, shape, dtype) -> np.ndarray:
  """An array of `dtype` (floating or complex) made of _SPECIAL_BITS."""
  if np.issubdtype(np.dtype(dtype), np.complexfloating):
    part = np.float32 if np.dtype(dtype) == np.complex64 else np.float64
    z = np.empty(shape, dtype)
    z.real = _special_bits(rng, shape, part)
    z.imag = _special_bits(rng, shape, part)
    return z
  uint, pats = _SPECIAL_BITS[np.dtype(dtype)]
  return rng.choice(np.array(pats, uint), size=shape).view(dtype)


def _array(rng, shape, dtype, special=False):
  """Values of `dtype`; with `special`, floats from _SPECIAL_BITS and
  _SPECIAL (-0.0, subnormals, signalling and payload NaNs, infs)."""
  if np.dtype(dtype) == np.bool_:
    return rng.rand(*shape) < 0.5
  if np.issubdtype(np.dtype(dtype), np.integer):
    info = np.iinfo(dtype)
    return rng.randint(max(info.min, -1000), min(info.max, 1000),
                       size=shape).astype(dtype)
  if special:
    x = _special_bits(rng, shape, dtype)
    plain = rng.choice(np.array(_SPECIAL, np.float32), size=shape)
    return np.where(rng.rand(*shape) < 0.5, x, plain.astype(dtype))
  x = rng.randn(*shape).astype(np.float32)
  if np.issubdtype(np.dtype(dtype), np.complexfloating):
    z = np.empty(shape, dtype)
    z.real, z.imag = x, rng.choice(np.array(_SPECIAL, np.float32), size=shape)
    return z
  return x.astype(dtype)


def _bits(x) -> bytes:
  return np.asarray(x).tobytes()


def _upstream_gather(a, idx, axis: int, mode, fill_value=None):
  """Upstream 0.4.26's one-per-row gather, built directly with lax.gather:
  an iota start index for every other dimension (idx broadcast to the
  output's shape), idx normalized along `axis`."""
  a = jnp.asarray(a)
  n = a.shape[axis]
  out_shape = a.shape[:axis] + (1,) + a.shape[axis + 1:]
  idx = jnp.broadcast_to(jnp.asarray(idx), out_shape)
  idx = lax.select(idx < 0, idx + n, idx)
  columns = [idx if d == axis else lax.broadcasted_iota(idx.dtype, out_shape, d)
             for d in range(a.ndim)]
  dims = tuple(range(a.ndim))
  dnums = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=dims,
                                     start_index_map=dims)
  return lax.gather(a, jnp.stack(columns, -1), dnums, (1,) * a.ndim,
                    mode="fill" if mode is None else mode,
                    fill_value=fill_value)


def _pick_shapes():
  # (arr shape, index shape, axis): one element per row, some dimensions of
  # the index broadcast (size 1).
  return [((3, 5), (3, 1), 1), ((3, 5), (3, 1), -1), ((5, 3), (1, 3), 0),
          ((2, 3, 7), (2, 3, 1), 2), ((2, 3, 7), (2, 1, 1), -1),
          ((2, 3, 7), (1, 3, 1), 2), ((2, 7, 3), (2, 1, 3), 1),
          ((4, 2, 3), (1, 2, 3), 0), ((2, 1, 4), (2, 1, 1), 2),
          ((2, 3, 4, 6), (2, 3, 4, 1), 3), ((3, 1), (3, 1), 1), ((7,), (1,), 0)]


class TakeAlongAxisPickTest(jtu.JaxTestCase):

  @jtu.sample_product(
      [dict(shape=s, idx_shape=i, axis=a) for s, i, a in _pick_shapes()],
      dtype=_DTYPES,
      mode=_MODES,
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
    self.assertIn("gather", _primitive_names(
        partial(jnp.take_along_axis, axis=axis, mode=mode), arr, idx))

  @jtu.sample_product(
      [dict(shape=s, idx_shape=i, axis=a) for s, i, a in _pick_shapes()],
      dtype=_FLOATS + [np.complex64],
      mode=_MODES,
  )
  def test_value_and_tangent_bits_are_upstream_gathers(self, shape, idx_shape,
                                                       axis, dtype, mode):
    # Against upstream's gather built directly: the pick, and its JVP (a
    # gather of the tangent, filling with 0), for subnormals, signalling NaNs,
    # NaN payloads and signed zeros, in and out of bounds, under jit too.
    with enable_x64(np.dtype(dtype) == np.float64):
      rng = np.random.RandomState(1)
      arr = _special_bits(rng, shape, dtype)
      tangent = _special_bits(rng, shape, dtype)
      n = shape[axis]
      idx = rng.randint(-n - 2, n + 2, size=idx_shape).astype(np.int32)
      ours = lambda a: jnp.take_along_axis(a, idx, axis, mode=mode)
      theirs = lambda a: _upstream_gather(a, idx, axis % len(shape), mode)
      for f in (ours, jax.jit(ours)):
        out, out_dot = jax.jvp(f, (arr,), (tangent,))
        expected, expected_dot = jax.jvp(theirs, (arr,), (tangent,))
        self.assertEqual(out.dtype, np.dtype(dtype))
        self.assertEqual(out.shape, expected.shape)
        self.assertEqual(_bits(f(arr)), _bits(expected))
        self.assertEqual(_bits(out), _bits(expected))
        self.assertEqual(_bits(out_dot), _bits(expected_dot))

  @jtu.sample_product(dtype=_FLOATS, mode=_MODES)
  def test_gradient_keeps_the_cotangent_bits(self, dtype, mode):
    # The gradient puts each cotangent c at its picked element, bit for bit,
    # and +0.0 elsewhere; upstream's scatter-add into zeros computes 0.0 + c
    # there with the backend's addition instead.
    with enable_x64(np.dtype(dtype) == np.float64):
      rng = np.random.RandomState(2)
      shape, axis = (4, 3, 9), 2
      arr = _array(rng, shape, dtype)
      idx = rng.randint(-11, 11, size=(4, 1, 1)).astype(np.int32)
      uint, pats = _SPECIAL_BITS[np.dtype(dtype)]
      ct = np.resize(np.array(pats, uint), (4, 3, 1)).view(dtype)
      grad = lambda f: jax.jit(lambda a, c: jax.vjp(f, a)[1](c)[0])(arr, ct)
      ours = grad(lambda a: jnp.take_along_axis(a, idx, axis, mode=mode))
      theirs = grad(lambda a: _upstream_gather(a, idx, axis, mode))
      # Where the index lands: clamped under "clip", nowhere when out of
      # bounds otherwise (XLA's scatter drops those updates).
      k = np.broadcast_to(np.where(idx < 0, idx + 9, idx), (4, 3, 1))
      if mode == "clip":
        k = np.clip(k, 0, 8)
      expected = np.zeros(shape, dtype)
      rows = np.nonzero((k >= 0) & (k < 9))
      expected[rows[0], rows[1], k[rows]] = ct[rows]
      self.assertEqual(_bits(ours), _bits(expected))
      add = jax.jit(lambda z, g: z + g)(np.zeros(shape, dtype), ours)
      self.assertEqual(_bits(theirs), _bits(add))
      self.assertNotEqual(_bits(theirs), _bits(ours))  # -0.0 at least

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
    loss = lambda a: jnp.sum(f(a) ** 2)
    for g in (jax.grad(loss), jax.hessian(loss), jax.jacfwd(jax.grad(loss)),
              jax.jacrev(jax.jacfwd(f))):
      self.assertFalse(_scatters(_primitive_names(g, arr)))
    self.assertIn("select_n", _primitive_names(jax.grad(loss), arr))
    hessian = jax.hessian(loss)(arr).reshape(arr.size, arr.size)
    expected = jax.hessian(
        lambda a: jnp.sum(_upstream_gather(a, idx, axis % 3, mode) ** 2))(arr)
    self.assertAllClose(hessian, expected.reshape(arr.size, arr.size))

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
    pick = lambda a, i: jnp.take_along_axis(a, i, -1)
    f = jax.vmap(pick, in_axes)
    expected = np.stack([np.take_along_axis(arr[k] if in_axes[0] == 0 else a,
                                            idx[k] if in_axes[1] == 0 else i,
                                            -1) for k in range(5)])
    self.assertEqual(_bits(f(a, i)), _bits(expected))
    w = rng.randn(5, 3, 1).astype(np.float32)
    g = jax.grad(lambda a: jnp.sum(f(a, i) * w))(a)
    g_loop = sum(jax.grad(lambda a: jnp.sum(pick(
        a[k] if in_axes[0] == 0 else a, i[k] if in_axes[1] == 0 else i) *
        w[k]))(a) for k in range(5))
    self.assertAllClose(g, g_loop)
    # Per-example gradients: vmap of grad, the index batched or not.
    per_example = jax.vmap(jax.grad(lambda a, i, w: jnp.sum(pick(a, i) * w)),
                           (0, in_axes[1], 0))
    pe = per_example(arr, i, w)
    self.assertEqual(pe.shape, arr.shape)
    self.assertFalse(_scatters(_primitive_names(per_example, arr, i, w)))
    _, t = jax.jvp(lambda a: f(a, i), (a,), (a,))
    self.assertEqual(_bits(t), _bits(f(a, i)))

  def test_jit_with_traced_indices(self):
    rng = np.random.RandomState(3)
    arr = rng.randn(6, 10).astype(np.float32)
    idx = rng.randint(-12, 12, size=(6, 1)).astype(np.int32)
    f = jax.jit(lambda a, i: jnp.take_along_axis(a, i, 1, mode="clip"))
    expected = np.take_along_axis(arr, np.clip(np.where(idx < 0, idx + 10, idx),
                                               0, 9), 1)
    self.assertEqual(_bits(f(arr, idx)), _bits(expected))
    g = jax.jit(jax.grad(lambda a, i: jnp.sum(f(a, i) * 2.)))
    self.assertNotIn("scatter", g.lower(arr, idx).as_text())
    expected_g = np.zeros_like(arr)
    np.put_along_axis(expected_g, np.clip(np.where(idx < 0, idx + 10, idx),
                                          0, 9), 2., 1)
    np.testing.assert_array_equal(g(arr, idx), expected_g)

  def test_grad_in_shard_map(self):
    mesh = Mesh(np.array(jax.devices()[:1]), ("d",))
    arr = np.random.RandomState(4).randn(4, 6).astype(np.float32)
    idx = np.array([[1], [5], [0], [-1]], np.int32)
    loss = lambda a, i: jnp.sum(jnp.take_along_axis(a, i, 1) ** 2)
    f = jax.jit(shard_map(jax.grad(loss), mesh=mesh, in_specs=(P("d"), P("d")),
                          out_specs=P("d")))
    self.assertAllClose(f(arr, idx), jax.grad(loss)(arr, idx))

  @jtu.sample_product(
      [dict(shape=s, idx_shape=i, axis=a, dtype=d) for s, i, a, d in [
          ((3, 5), (3, 2), 1, np.float32),  # two elements per row
          ((1, 5), (3, 1), 1, np.float32),  # arr broadcast along a dimension
          ((3, 5), (3, 1), 1, np.int32),    # not differentiable
      ]])
  def test_other_indices_still_gather(self, shape, idx_shape, axis, dtype):
    rng = np.random.RandomState(4)
    arr = rng.randn(*shape).astype(dtype)
    idx = rng.randint(0, shape[axis], size=idx_shape).astype(np.int32)
    f = partial(jnp.take_along_axis, axis=axis)
    names = _primitive_names(f, arr, idx)
    self.assertIn("gather", names)
    self.assertNotIn("custom_jvp_call", names)
    if dtype == np.float32:
      self.assertIn("scatter-add", _primitive_names(
          jax.grad(lambda a: f(a, idx).sum()), arr))
    np.testing.assert_array_equal(
        f(arr, idx), np.take_along_axis(np.broadcast_to(arr, (3, 5))
                                        if shape == (1, 5) else arr, idx,
                                        axis))


# Cases run on both upstream 0.4.26 (in a subprocess) and this tree: values
# and forward-mode tangents (bit for bit: subnormals, signalling NaNs, NaN
# payloads, signed zeros), dtypes, weak types, gradients and errors agree.
_WORKER = r'''
import pickle, sys
import numpy as np
import jax, jax.numpy as jnp
from jax.experimental import enable_x64
from jax._src.lax import lax as lax_internal

def _run_case(case):
  arr, weak, idx, axis, mode, op = case
  with enable_x64(arr.dtype == np.float64):
    return _run(arr, weak, idx, axis, mode, op)

def _run(arr, weak, idx, axis, mode, op):
  a = lax_internal._convert_element_type(arr, arr.dtype, weak)
  try:
    bits = b""
    if op == "take":
      out = jnp.take_along_axis(a, idx, axis, mode=mode)
    elif op == "jit":
      out = jax.jit(lambda a, i: jnp.take_along_axis(a, i, axis, mode=mode))(
          a, idx)
    elif op == "jvp":  # the tangent: arr's elements in reverse order
      tangent = np.ascontiguousarray(arr.reshape(-1)[::-1].reshape(arr.shape))
      primal, out = jax.jvp(
          lambda a: jnp.take_along_axis(a, idx, axis, mode=mode), (a,),
          (lax_internal._convert_element_type(tangent, arr.dtype, weak),))
      bits = np.asarray(primal).tobytes()
    else:  # "grad": a gradient with no zero cotangent
      def f(a):
        out = jnp.take_along_axis(a, idx, axis, mode=mode)
        w = jnp.arange(1, out.size + 1, dtype=out.dtype).reshape(out.shape)
        return jnp.sum(jnp.where(jnp.isnan(out), 0, out * w))
      out = jax.grad(f)(a)
    res = ("ok", np.asarray(out), str(out.dtype), bool(out.weak_type),
           bits + np.asarray(out).tobytes())
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
  for shape, idx_shape, axis in _pick_shapes():
    n = shape[axis]
    for k, dtype in enumerate(_DTYPES + [np.float64]):
      arr = _array(rng, shape, dtype, special=True)
      # In-bounds, negative and out-of-bounds indices (past -n and n).
      idx = rng.randint(-n - 3, n + 3, size=idx_shape).astype(np.int32)
      # The modes in turn, over take, jit, jvp and grad.
      j = len(cases)
      cases.append((arr, False, idx, axis, _MODES[j % 4], "take"))
      cases.append((arr, k % 2 == 0, idx, axis, _MODES[(j + 1) % 4], "jit"))
      if np.issubdtype(np.dtype(dtype), np.inexact):
        cases.append((arr, False, idx, axis, _MODES[(j + 2) % 4], "jvp"))
      if np.issubdtype(np.dtype(dtype), np.floating):
        cases.append((arr, False, idx, axis, _MODES[(j + 3) % 4], "grad"))
  arr = _array(rng, (3, 5), np.float32, special=True)
  idx = np.array([[0], [4], [-1]], np.int32)
  cases += [
      (arr, False, idx.astype(np.uint8), 1, None, "take"),
      (arr, False, np.array([[2 ** 31 - 1], [-2 ** 31], [5]], np.int32), 1,
       None, "take"),
      (arr, False, np.array([[9], [250], [3]], np.uint8), 1, "clip", "take"),
      (arr, True, idx, 1, None, "take"),             # weak-typed arr
      (arr, True, idx, 1, None, "jvp"),
      (arr, False, idx, 1, "bogus", "take"),         # errors, as upstream
      (arr, False, idx, 1, "bogus", "jit"),
      (arr, False, idx, 1, "bogus", "grad"),
      (arr, False, idx, 2, None, "take"),
      (arr, False, idx, -3, None, "take"),
      (arr, False, idx[:, 0], 1, None, "take"),
      (arr, False, idx.astype(np.float32), 1, None, "take"),
      (arr, False, idx, None, None, "take"),
      (arr, False, idx[:1, 0], None, None, "grad"),  # axis=None: raveled
      (arr, False, np.zeros((3, 1), np.int32), 0, None, "take"),
      (arr, False, np.zeros((1, 0), np.int32), 0, None, "take"),
      (np.zeros((3, 0), np.float32), False, np.zeros((3, 1), np.int32), 1,
       None, "take"),
      # An empty row dimension: upstream's gather raises (a slice of size 1
      # of a dimension of size 0), and so does ours.
      (np.zeros((0, 4), np.float32), False, np.zeros((0, 1), np.int32), 1,
       None, "take"),
      (np.zeros((2, 0, 4), np.float32), False, np.zeros((1, 0, 1), np.int32),
       2, None, "jvp"),
  ]
  return cases


class UpstreamParityTest(jtu.JaxTestCase):

  def test_same_results_tangents_gradients_and_errors_as_upstream(self):
    cases = _parity_cases()
    ours, theirs = upstream_parity.run_side_by_side(_WORKER, cases,
                                                    timeout=600)
    ok = upstream_parity.assert_same_outcomes(self, cases, ours, theirs,
                                              array_field=1)
    self.assertGreater(len(ok), len(cases) * 3 // 4)
    errors = {r[1] for r in ours if r[0] == "error"}
    self.assertEqual(errors, {"ValueError", "TypeError"})
    self.assertEqual(
        {mode for case, r in zip(cases, ours) if r[0] == "ok"
         for mode in [case[4]]}, {None, "fill", "clip", "promise_in_bounds"})
    self.assertEqual({case[5] for case, r in zip(cases, ours) if r[0] == "ok"},
                     {"take", "jit", "jvp", "grad"})


class BenchmarkSmokeTest(absltest.TestCase):

  def test_every_case_runs_on_both_sides(self):
    # This jax stands in for the baseline too (tiny sizes, one round).
    site = str(Path(jax.__file__).resolve().parents[1])
    r = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "take_along_axis.py"),
         "--smoke", "--baseline-pythonpath", site],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PYTHONPATH=site))
    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
    rows = re.findall(r"^\| (pick|grad|ce) (\S+) \| [0-9.e-]+ \| [0-9.e-]+ \|",
                      r.stdout, re.M)
    self.assertEqual(len(rows), 6, r.stdout)
    self.assertIn("pick bits equal on both sides: True", r.stdout)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
