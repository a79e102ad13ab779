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
"""Basic indexing lowers to slices, and `.at[]` updates to dynamic_update_slice.

Patches 0004/0005: `x[idx]` with integers, static slices (any step), `...` and
`None` lowers to slice/rev/squeeze/reshape, never to gather; `x.at[idx].op(v)`
lowers to dynamic_update_slice where that equals the scatter's result.
"""
from __future__ import annotations

import sys
import types

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import jaxpr_util
from jax._src import test_util as jtu
from jax._src.numpy import lax_numpy
from jax._src.ops import scatter
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import upstream_parity

jax.config.parse_flags_with_absl()


def _primitive_names(closed_jaxpr) -> set[str]:
  # Every primitive of a jaxpr, at any depth.
  return set(jaxpr_util.collect_eqns(closed_jaxpr.jaxpr,
                                     lambda e: e.primitive.name))


def _no_gather_scatter(testcase, jaxpr, what):
  prims = _primitive_names(jaxpr)
  bad = {p for p in prims if p in ("gather", "scatter") or
         p.startswith("scatter")}
  testcase.assertFalse(bad, f"{what} uses {sorted(bad)}:\n{jaxpr}")


def _import_export():
  """jax.experimental.export, importable without the flatbuffers package.

  Only its serialization needs flatbuffers; when that is not installed, a
  stand-in lets the package import (its annotations name flatbuffers types).
  """
  try:
    from jax.experimental import export
    return export
  except ImportError:
    pass
  fb = types.ModuleType("flatbuffers")
  compat = types.ModuleType("flatbuffers.compat")
  compat.import_numpy = lambda: np  # type: ignore[attr-defined]
  fb.compat = compat  # type: ignore[attr-defined]
  fb.__getattr__ = lambda name: type(name, (), {})  # type: ignore
  sys.modules["flatbuffers"] = fb
  sys.modules["flatbuffers.compat"] = compat
  try:
    from jax.experimental import export
  finally:
    del sys.modules["flatbuffers"], sys.modules["flatbuffers.compat"]
  return export


def _random_basic_index(rng: np.random.RandomState, shape: tuple[int, ...]):
  """A random basic index (in-bounds ints, slices, ..., None) for `shape`."""
  ndim = len(shape)
  n_consumed = rng.randint(0, ndim + 1)
  if rng.rand() < 0.5:
    # With an ellipsis, the consumed dims are split around it.
    split = rng.randint(0, n_consumed + 1)
    dims = list(range(split)) + list(range(ndim - (n_consumed - split), ndim))
    items = ([("dim", d) for d in dims[:split]] + [("ell", None)] +
             [("dim", d) for d in dims[split:]])
  else:
    items = [("dim", d) for d in range(n_consumed)]
  out = []
  for kind, d in items:
    if kind == "ell":
      out.append(Ellipsis)
      continue
    size = shape[d]
    r = rng.rand()
    if r < 0.35 and size > 0:
      out.append(int(rng.randint(-size, size)))
    else:
      def bound():
        if rng.rand() < 0.3:
          return None
        return int(rng.randint(-size - 2, size + 3))
      steps = [-3, -2, -1, 1, 2, 3]
      step = None if rng.rand() < 0.3 else int(rng.choice(steps))
      out.append(slice(bound(), bound(), step))
  # Sprinkle Nones anywhere.
  for _ in range(rng.choice([0, 0, 1, 2])):
    out.insert(rng.randint(0, len(out) + 1), None)
  if len(out) == 1 and rng.rand() < 0.5:
    return out[0]
  return tuple(out)


class BasicIndexingLowersToSlicesTest(jtu.JaxTestCase):

  def test_ellipsis_int_is_slice_squeeze(self):
    jaxpr = jax.make_jaxpr(lambda x: x[..., 0])(jnp.ones((3, 4, 5)))
    self.assertEqual([e.primitive for e in jaxpr.eqns],
                     [lax.slice_p, lax.squeeze_p])

  @jtu.sample_product(
      [dict(shape=shape, ellipsis_idx=e, explicit_idx=x)
       for shape, e, x in [
           ((2, 3, 4, 5), np.s_[..., 0, 0, :], np.s_[:, 0, 0, :]),
           ((2, 3, 4, 5), np.s_[0, ...], np.s_[0]),
           ((2, 3, 4, 5), np.s_[..., -1], np.s_[:, :, :, -1]),
           ((2, 3, 4, 5), np.s_[1, ..., 1:3], np.s_[1, :, :, 1:3]),
           ((2, 3, 4, 5), np.s_[::2, ..., ::-3], np.s_[::2, :, :, ::-3]),
           ((2, 3, 4, 5), np.s_[None, ..., -1], np.s_[None, :, :, :, -1]),
           ((2, 3, 4, 5), np.s_[..., None, 2], np.s_[:, :, :, None, 2]),
           ((2, 3, 4, 5), np.s_[1, 2, 3, 4, ...], np.s_[1, 2, 3, 4]),
           ((3,), np.s_[...], np.s_[:]),
           ((), np.s_[..., None], np.s_[None]),
       ]])
  def test_ellipsis_lowers_as_explicit_form(self, shape, ellipsis_idx,
                                            explicit_idx):
    x = jnp.ones(shape, jnp.float32)
    j_ell = jax.make_jaxpr(lambda x: x[ellipsis_idx])(x)
    j_exp = jax.make_jaxpr(lambda x: x[explicit_idx])(x)
    self.assertEqual(str(j_ell), str(j_exp))
    _no_gather_scatter(self, j_ell, "get")
    s_ell = jax.make_jaxpr(lambda x: x.at[ellipsis_idx].set(1.))(x)
    s_exp = jax.make_jaxpr(lambda x: x.at[explicit_idx].set(1.))(x)
    self.assertEqual(str(s_ell), str(s_exp))
    _no_gather_scatter(self, s_ell, "set")
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    self.assertArraysEqual(jnp.asarray(a)[ellipsis_idx], a[ellipsis_idx])

  def test_static_negative_int_has_no_runtime_normalization(self):
    jaxpr = jax.make_jaxpr(lambda x: x[-1])(jnp.ones((3, 4)))
    self.assertEqual([e.primitive for e in jaxpr.eqns],
                     [lax.slice_p, lax.squeeze_p])
    self.assertEqual(jaxpr.eqns[0].params["start_indices"], (2, 0))

  def test_strided_slices(self):
    x = jnp.arange(20.)
    jaxpr = jax.make_jaxpr(lambda x: x[::2])(x)
    self.assertEqual([e.primitive for e in jaxpr.eqns], [lax.slice_p])
    self.assertEqual(jaxpr.eqns[0].params["strides"], (2,))
    jaxpr = jax.make_jaxpr(lambda x: x[::-3])(x)
    self.assertEqual([e.primitive for e in jaxpr.eqns],
                     [lax.slice_p, lax.rev_p])
    self.assertArraysEqual(x[::-3], np.arange(20.)[::-3])
    self.assertArraysEqual(x[17:2:-4], np.arange(20.)[17:2:-4])

  def test_newaxis(self):
    x = jnp.ones((3, 4))
    # The slice's (1, 4) already is the result's shape.
    jaxpr = jax.make_jaxpr(lambda x: x[None, 0])(x)
    self.assertEqual([e.primitive for e in jaxpr.eqns], [lax.slice_p])
    jaxpr = jax.make_jaxpr(lambda x: x[None, :, 0])(x)
    self.assertEqual([e.primitive for e in jaxpr.eqns],
                     [lax.slice_p, lax.reshape_p])
    self.assertArraysEqual(x[None, :, 0], np.ones((1, 3)))
    jaxpr = jax.make_jaxpr(lambda x: x[:, None])(x)
    self.assertEqual([e.primitive for e in jaxpr.eqns],
                     [lax.broadcast_in_dim_p])

  def test_traced_int_uses_dynamic_slice(self):
    f = lambda x, i: x[i, ::2, ..., None, -1]
    x = np.arange(60.).reshape(3, 4, 5)
    jaxpr = jax.make_jaxpr(f)(x, 1)
    prims = _primitive_names(jaxpr)
    self.assertIn("dynamic_slice", prims)
    _no_gather_scatter(self, jaxpr, "get")
    for i in [-3, -1, 0, 2]:
      self.assertArraysEqual(jax.jit(f)(x, i), x[i, ::2, ..., None, -1])
    # Out of bounds traced indices clamp, as upstream's dynamic_slice does.
    self.assertArraysEqual(jax.jit(f)(x, 7), x[2, ::2, ..., None, -1])
    # mode='fill' needs a gather to fill out-of-bounds values.
    g = lambda x, i: x.at[i, ::2].get(mode="fill", fill_value=-1)
    self.assertIn("gather", _primitive_names(jax.make_jaxpr(g)(x, 1)))
    self.assertArraysEqual(jax.jit(g)(x, 7), np.full((2, 5), -1.))

  def test_static_out_of_bounds_int(self):
    x = jnp.arange(5.)
    # Gets clamp, as upstream's gather does; like upstream, they gather (so
    # that checkify.index_checks reports them, see indexing_checkify_test).
    self.assertEqual(float(x[10]), 4.)
    self.assertEqual(float(x[-10]), 0.)
    self.assertArraysEqual(x[..., 10], 4.)
    for get in [lambda x: x[..., 10], lambda x: x[-6],
                lambda x: x.at[7].get(mode="clip")]:
      self.assertIn("gather", _primitive_names(jax.make_jaxpr(get)(x)))
    self.assertTrue(np.isnan(x.at[10].get(mode="fill")))
    # Updates drop out-of-bounds updates by default: that needs the scatter.
    self.assertArraysEqual(x.at[10].set(9.), x)
    self.assertIn("scatter",
                  _primitive_names(jax.make_jaxpr(lambda x: x.at[10].set(9.))(x)))
    # mode='clip' clamps; static indices out of bounds still scatter.
    self.assertArraysEqual(x.at[10].set(9., mode="clip"),
                           np.array([0., 1., 2., 3., 9.]))
    self.assertIn("scatter", _primitive_names(jax.make_jaxpr(
        lambda x: x.at[10].set(9., mode="clip"))(x)))
    # In-bounds neighbours stay slices.
    _no_gather_scatter(self, jax.make_jaxpr(lambda x: x[..., 4])(x), "get")
    _no_gather_scatter(self, jax.make_jaxpr(lambda x: x[-5])(x), "get")
    _no_gather_scatter(
        self, jax.make_jaxpr(lambda x: x.at[-1].set(9., mode="clip"))(x),
        "set")

  @jtu.sample_product(op=["set", "add", "multiply", "min", "max", "divide",
                          "power", "get"])
  def test_update_ops(self, op):
    a = np.arange(1., 61.).reshape(3, 4, 5).astype(np.float32)
    v = np.float32(2.5)
    np_ops = {
        "set": lambda s, v: np.broadcast_to(v, s.shape),
        "add": lambda s, v: s + v, "multiply": lambda s, v: s * v,
        "min": np.minimum, "max": np.maximum, "divide": lambda s, v: s / v,
        "power": lambda s, v: s ** v}
    for idx in [np.s_[..., 0], np.s_[::2, ..., ::-3], np.s_[None, ..., -1],
                np.s_[1:, None, 3:0:-2], np.s_[-1, 2]]:
      f = lambda x: (getattr(x.at[idx], op)(v) if op != "get"
                     else x.at[idx].get())
      jaxpr = jax.make_jaxpr(f)(a)
      _no_gather_scatter(self, jaxpr, op)
      _no_gather_scatter(self, jax.make_jaxpr(jax.grad(
          lambda x: f(x).sum()))(a), f"grad of {op}")
      if op == "get":
        expected = a[idx]
      else:
        expected = a.copy()
        expected[idx] = np_ops[op](a[idx], v)
      self.assertAllClose(f(jnp.asarray(a)), expected, rtol=1e-6)

  def test_traced_update_index_needs_clip(self):
    x = np.arange(12.).reshape(3, 4)
    f = lambda x, i: x.at[i, 1:].set(-1.)
    self.assertIn("scatter", _primitive_names(jax.make_jaxpr(f)(x, 1)))
    # Out of bounds updates are dropped.
    self.assertArraysEqual(jax.jit(f)(x, 5), x)
    g = lambda x, i: x.at[i, 1:].add(10., mode="clip")
    jaxpr = jax.make_jaxpr(g)(x, 1)
    self.assertIn("dynamic_update_slice", _primitive_names(jaxpr))
    _no_gather_scatter(self, jaxpr, "add")
    for i in [-5, -1, 0, 1, 7]:
      expected = x.copy()
      expected[min(max(i + 3 if i < 0 else i, 0), 2), 1:] += 10.
      self.assertArraysEqual(jax.jit(g)(x, i), expected)
    _no_gather_scatter(self, jax.make_jaxpr(jax.grad(
        lambda x, i: g(x, i).sum()))(x, 1), "grad")

  def test_update_dtype_promotion_falls_back(self):
    # int x, float y: the scatter works in float32 and casts back, so large
    # ints elsewhere in x change too; stay on the scatter to keep that.
    x = jnp.array([2 ** 24 + 1, 3], dtype=jnp.int32)
    with jax.numpy_dtype_promotion("standard"):
      with self.assertWarns(FutureWarning):
        out = x.at[1].set(1.5)
      with self.assertWarns(FutureWarning):
        jaxpr = jax.make_jaxpr(lambda x: x.at[1].set(1.5))(x)
    self.assertEqual(int(out[0]), int(np.float32(2 ** 24 + 1)))
    self.assertIn("scatter", _primitive_names(jaxpr))
    self.assertEqual(out.dtype, jnp.int32)
    # Same-dtype updates keep weak types as the scatter does.
    from jax._src.lax import lax as lax_internal
    w = lax_internal._convert_element_type(np.ones(3, np.float32),
                                           np.float32, weak_type=True)
    self.assertTrue(w.weak_type)
    self.assertTrue(w.at[0].set(2.).weak_type)
    self.assertTrue(w.at[::2].add(2.).weak_type)

  def test_empty_update_is_identity(self):
    x = jnp.arange(6.).reshape(2, 3)
    self.assertArraysEqual(x.at[:, 2:1].set(jnp.ones(5)), x)
    self.assertArraysEqual(x.at[1:1].add(3.), x)

  def test_errors_match_gather_path(self):
    x = jnp.ones((2, 3))
    with self.assertRaisesRegex(IndexError, "Too many indices"):
      x[0, 0, 0]
    with self.assertRaises(IndexError):
      x[..., 0, ...]
    with self.assertRaises(ValueError):
      x[::0]
    with self.assertRaisesRegex(IndexError, "size 0"):
      jnp.ones((0, 3))[..., 0, :]
    with self.assertRaises(TypeError):
      x[..., 1.5]
    with self.assertRaisesRegex(ValueError, "Unknown gather mode"):
      x.at[..., ::2].get(mode="bogus")
    with self.assertRaisesRegex(ValueError, "must be a scalar"):
      x.at[None, 0].get(fill_value=np.ones(2))
    with self.assertRaisesRegex(ValueError, "Incompatible shapes"):
      x.at[..., 0].set(jnp.ones(3))
    # Traced slice bounds are never compared in Python.
    for get in [lambda x, i: x[:i], lambda x, i: x[..., ::i]]:
      with self.assertRaisesRegex(IndexError, "must have static"):
        jax.jit(get)(x, 1)

  def test_sharded_arrays_fall_back_to_gather(self):
    devices = np.array(jax.devices()[:2])
    if len(devices) < 2:
      self.skipTest("needs 2 devices")
    mesh = Mesh(devices, ("x",))
    a = np.arange(24.).reshape(4, 6)
    x = jax.device_put(a, NamedSharding(mesh, P("x")))
    take = lax_numpy._attempt_rewriting_take_via_slice
    self.assertIsNone(take(x, (Ellipsis, 0), None))
    self.assertIsNone(take(x, (slice(None, None, 2),), None))
    self.assertIsNone(take(x, (None,), None))
    self.assertIsNotNone(take(x, (Ellipsis, slice(None, None, -1)), None))
    self.assertIsNone(scatter._update_via_slices(
        x, (Ellipsis, 0), jnp.float32(1.), lax.scatter, None))
    for idx in [np.s_[..., 0], np.s_[::2, None], np.s_[..., ::-1], np.s_[-1]]:
      self.assertArraysEqual(x[idx], a[idx])
      expected = a.copy()
      expected[idx] = 7.
      self.assertArraysEqual(x.at[idx].set(7.), expected)

  def test_symbolic_shapes_fall_back_to_gather(self):
    export = _import_export()
    arg = jax.ShapeDtypeStruct(export.symbolic_shape("b, 4"), np.float32)
    for get in [lambda x: x[..., 0], lambda x: x[:, 0], lambda x: x[0, None],
                lambda x: x[None, ..., -1], lambda x: x[..., ::-2],
                lambda x: x[1:3]]:
      jaxpr = jax.make_jaxpr(get)(arg)
      self.assertIn("gather", _primitive_names(jaxpr))
    exp = export.export(jax.jit(lambda x: x[None, ..., ::-2]))(arg)
    a = np.arange(12., dtype=np.float32).reshape(3, 4)
    self.assertArraysEqual(export.call(exp)(a), a[None, ..., ::-2])

  def test_random_basic_indices(self):
    """Property test: random basic indices agree with NumPy, no gather."""
    rng = np.random.RandomState(0)
    n_cases = 200
    for case in range(n_cases):
      ndim = rng.randint(0, 5)
      shape = tuple(int(s) for s in rng.randint(0, 6, size=ndim))
      idx = _random_basic_index(rng, shape)
      a = np.asarray(rng.randn(*shape), dtype=np.float32)
      expected = a[idx]
      msg = f"case {case}: shape={shape} idx={idx!r}"
      x = jnp.asarray(a)
      out = x[idx]
      self.assertEqual(out.shape, expected.shape, msg)
      self.assertArraysEqual(out, expected, err_msg=msg)
      get = lambda x: x[idx]
      _no_gather_scatter(self, jax.make_jaxpr(get)(a), "get " + msg)
      _no_gather_scatter(
          self, jax.make_jaxpr(jax.grad(lambda x: get(x).sum()))(a),
          "grad " + msg)
      v = np.asarray(rng.randn(*expected.shape), dtype=np.float32)
      setf = lambda x, v: x.at[idx].set(v)
      _no_gather_scatter(self, jax.make_jaxpr(setf)(a, v), "set " + msg)
      _no_gather_scatter(
          self, jax.make_jaxpr(jax.grad(lambda x, v: setf(x, v).sum(),
                                        argnums=(0, 1)))(a, v),
          "grad set " + msg)
      if case % 3 == 0:
        b = a.copy()
        b[idx] = v
        self.assertArraysEqual(setf(x, v), b, err_msg=msg)
        b = a.copy()
        b[idx] += v
        self.assertArraysEqual(x.at[idx].add(v), b, err_msg=msg)
      if case % 10 == 0 and a.size:
        jtu.check_grads(lambda x: get(x) * 2., (a,), order=1,
                        modes=["rev"], atol=1e-2, rtol=1e-2)


def _eqn_params(jaxpr, name):
  return [e.params for _, e in jaxpr_util.all_eqns(jaxpr.jaxpr)
          if e.primitive.name == name]


def _dus_starts(jaxpr):
  # The static start indices of each dynamic_update_slice.
  return [[v.val for v in e.invars[2:] if isinstance(v, jax.core.Literal)]
          for _, e in jaxpr_util.all_eqns(jaxpr.jaxpr)
          if e.primitive.name == "dynamic_update_slice"]


class PastInt32Test(jtu.JaxTestCase):
  """Static indices and slice bounds past int32, on arrays of more than 2**31
  elements (abstract: `jax.eval_shape` and jaxprs need no memory). Upstream
  0.4.26 gives the slice for `x[:2**32 + 5]` and raises OverflowError for most
  other forms; values on small arrays are in UpstreamParityTest."""

  N = 2 ** 33

  @parameterized.parameters(False, True)
  def test_getitem(self, x64):
    n = self.N
    cases = [
        ((n,), np.s_[:2 ** 32 + 5]), ((n,), np.s_[2 ** 32:]),
        ((n,), np.s_[..., :2 ** 32 + 5]), ((n,), np.s_[None, 2 ** 32:]),
        ((n,), np.s_[-2 ** 32 - 3:]), ((n,), np.s_[2 ** 32::3]),
        ((n,), np.s_[2 ** 32 + 7::-2]), ((n,), np.s_[::2 ** 32 + 1]),
        ((n,), np.s_[2 ** 32 + 1]), ((n,), np.s_[-2 ** 32]),
        ((n,), np.s_[..., 2 ** 32 + 1, None]),
        ((2, 2 ** 32), np.s_[1, 2 ** 31:]),
        ((2, 2 ** 32), np.s_[None, -1, ..., 2 ** 32 - 5:2 ** 31:-7]),
    ]
    for shape, idx in cases:
      x = jax.ShapeDtypeStruct(shape, jnp.uint32)
      with jax.experimental.enable_x64(x64):
        out = jax.eval_shape(lambda x: x[idx], x)
        jaxpr = jax.make_jaxpr(lambda x: x[idx])(x)
      expected = np.broadcast_to(np.uint32(0), shape)[idx]  # a view
      self.assertEqual(out.shape, expected.shape, idx)
      self.assertEqual(out.dtype, jnp.uint32)
      _no_gather_scatter(self, jaxpr, f"get {idx}")
    # The slice takes the elements NumPy takes.
    with jax.experimental.enable_x64(x64):
      jaxpr = jax.make_jaxpr(lambda x: x[2 ** 32 + 7:2 ** 31:-2])(
          jax.ShapeDtypeStruct((n,), jnp.uint32))
    r = range(*slice(2 ** 32 + 7, 2 ** 31, -2).indices(n))
    params, = _eqn_params(jaxpr, "slice")
    self.assertEqual(params["start_indices"], (r[-1],))
    self.assertEqual(params["limit_indices"], (r[0] + 1,))
    self.assertEqual(params["strides"], (2,))
    self.assertLen(_eqn_params(jaxpr, "rev"), 1)

  @parameterized.parameters(False, True)
  def test_updates(self, x64):
    n = self.N
    x = jax.ShapeDtypeStruct((n,), jnp.uint32)
    for f, start in [
        (lambda x: x.at[2 ** 32 + 1].set(1), 2 ** 32 + 1),
        (lambda x: x.at[:2 ** 32 + 5].set(1), 0),
        (lambda x: x.at[2 ** 32::2].add(1), 2 ** 32),
        (lambda x: x.at[..., -1].set(1), n - 1),
        (lambda x: x.at[None, -2 ** 32 - 1:-2 ** 32 + 1].max(3), 2 ** 32 - 1),
        (lambda x: x.at[2 ** 32 + 3:2 ** 32:-1].multiply(2), 2 ** 32 + 1)]:
      with jax.experimental.enable_x64(x64):
        out = jax.eval_shape(f, x)
        jaxpr = jax.make_jaxpr(f)(x)
      self.assertEqual((out.shape, out.dtype), ((n,), jnp.uint32))
      _no_gather_scatter(self, jaxpr, "update")
      # dynamic_update_slice takes int32 indices without x64: a start past
      # int32 is written with pad and select instead, never wrapped.
      for starts in _dus_starts(jaxpr):
        self.assertEqual(starts, [start])
      if not x64 and start >= 2 ** 31:
        self.assertEqual(_dus_starts(jaxpr), [])
        pad, *_ = _eqn_params(jaxpr, "pad")
        self.assertEqual(pad["padding_config"][0][0], start)

  def test_2d_traced_index_with_far_static_bound(self):
    x = jax.ShapeDtypeStruct((3, 2 ** 32), jnp.uint32)
    f = lambda x, i: x[i, 2 ** 32 - 6::2]
    out = jax.eval_shape(f, x, np.int32(1))
    self.assertEqual(out.shape, (3,))
    jaxpr = jax.make_jaxpr(f)(x, np.int32(1))
    self.assertIn("dynamic_slice", _primitive_names(jaxpr))
    _no_gather_scatter(self, jaxpr, "get")


# Cases run on both upstream 0.4.26 (subprocess) and this tree: results
# (values, dtypes, weak types), errors and warnings must agree. Strings "dN"
# in an index stand for a traced integer N (passed to a jitted function).
_COMPARE_WORKER = r'''
import pickle, sys, warnings
import numpy as np
import jax, jax.numpy as jnp
from jax._src.lax import lax as lax_internal

def _array(shape, dtype, weak):
  a = (np.arange(int(np.prod(shape))) % 7 - 2).reshape(shape).astype(dtype)
  return lax_internal._convert_element_type(a, np.dtype(dtype), weak)

def _run_case(case):
  shape, dtype, weak, idx, op, value, kw = case
  x = _array(shape, dtype, weak)
  idx_t = idx if isinstance(idx, tuple) else (idx,)
  dyn = [i for i, e in enumerate(idx_t) if isinstance(e, str)]
  def f(x, *dvals):
    full = list(idx_t)
    for i, d in zip(dyn, dvals):
      full[i] = d
    full = tuple(full) if isinstance(idx, tuple) else full[0]
    if op == "getitem":
      return x[full]
    return getattr(x.at[full], op)(value, **kw) if op != "get" else (
        x.at[full].get(**kw))
  dvals = [np.int32(int(idx_t[i][1:])) for i in dyn]
  with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    try:
      out = jax.jit(f)(x, *dvals) if dyn else f(x)
      res = ("ok", np.asarray(out), str(out.dtype), bool(out.weak_type))
    except Exception as e:
      res = ("error", type(e).__name__, str(e).split("\n")[0])
  return res + (sorted({c.category.__name__ for c in w}),)

def run_all(cases):
  return [_run_case(c) for c in cases]

if __name__ == "__main__":
  with open(sys.argv[1], "rb") as fh:
    cases = pickle.load(fh)
  with open(sys.argv[2], "wb") as fh:
    pickle.dump(run_all(cases), fh)
'''


# Slices with bounds past int32 (with None, Ellipsis, negative, strided), on
# which upstream raises OverflowError, and an index that selects the same
# elements of a (3, 4, 5) array: ours must give upstream's result for that one.
_PAST_INT32 = [
    (np.s_[2 ** 40:-2 ** 70:-1], np.s_[::-1]),
    (np.s_[..., :2 ** 40], np.s_[..., :]),
    (np.s_[None, -2 ** 33::2 ** 32], np.s_[None, 0:1]),
    (np.s_[1, 2 ** 31:0:-2], np.s_[1, 3:0:-2]),
    (np.s_[..., 2 ** 32:], np.s_[..., 5:]),
]
_EQUIVALENT = {repr(big): small for big, small in _PAST_INT32}


# Arguments of `.at[].get()` that upstream's gather path rejects (the mode
# only for a non-empty result). Ours checks them so for every basic index;
# upstream's own slice rewrite did not look at them for the indices it took
# (in-bounds integers, contiguous slices, `::-1`), and answers those.
_BAD_GET_ARGS = [{"mode": "bogus"}, {"mode": "promise_inbounds"},
                 {"fill_value": np.ones(2, np.float32)}]


def _compare_cases() -> list:
  rng = np.random.RandomState(1)
  cases = []
  shapes = [(3, 4, 5), (4,), (2, 0, 3), (), (5, 1)]
  for shape in shapes:
    for _ in range(8):
      idx = _random_basic_index(rng, shape)
      cases.append((shape, "float32", False, idx, "getitem", None, {}))
      cases.append((shape, "float32", False, idx, "set", 3.5, {}))
  s = (3, 4, 5)
  special = [
      np.s_[..., 0], np.s_[::2, ..., ::-3], np.s_[None, ..., -1],
      np.s_[-1], np.s_[7], np.s_[-9], np.s_[..., 5], np.s_[1, 9, ...],
      np.s_[0, 0, 0, 0], np.s_[..., 0, ...], np.s_[::0], np.s_[1.5],
      np.s_[True], np.s_[..., False], np.s_[np.int8(-1), None],
      np.s_[np.array(1)], np.s_[np.array(-1), ::2], np.s_[np.uint8(2)],
      np.s_["d1"], np.s_["d-1", ::2, None], np.s_["d7", ..., -1],
      np.s_[..., "d2"], np.s_[1, "d-9"], np.s_[..., [0, 1]],
      np.s_[np.int64(2):None:np.int32(-1)], np.s_[::-1], np.s_[:],
      np.s_[...], np.s_[()], np.s_[None], np.s_[slice(1, 2, None), 0],
      np.s_[2 ** 31], np.s_[..., -2 ** 31 - 2],
      *(big for big, _ in _PAST_INT32),
  ]
  dtypes = [("float32", False), ("int32", True), ("uint8", False),
            ("bool", False)]
  k = 0
  for idx in special:
    for dtype, weak in [("float32", False), ("int32", True), ("bool", False)]:
      cases.append((s, dtype, weak, idx, "getitem", None, {}))
    ops = [
        ("set", 7, {}), ("set", 2.5, {}), ("add", 1, {}),
        ("add", np.float32(1.25), {}), ("multiply", 3, {}),
        ("min", 0, {}), ("max", 1, {}), ("set", 1, {"mode": "clip"}),
        ("add", 2, {"mode": "drop"}), ("set", 2, {"mode": "promise_in_bounds"}),
        ("get", None, {"mode": "fill", "fill_value": -1}),
        ("get", None, {"mode": "clip"}),
        *(("get", None, kw) for kw in _BAD_GET_ARGS),
        ("set", np.ones(4, np.float32), {}), ("set", True, {}),
        ("divide", 2, {}), ("power", 2, {}),
        ("set", 1, {"mode": "bogus"}), ("set", "x", {})]
    # Half of the operations per index, alternating, to keep the test short.
    for op, value, kw in ops[len(cases) % 2::2]:
      k += 1
      dtype, weak = dtypes[k % 4]
      cases.append((s, dtype, weak, idx, op, value, kw))
  return cases


class UpstreamParityTest(jtu.JaxTestCase):

  def test_same_results_errors_and_warnings_as_upstream(self):
    cases = _compare_cases()
    # Each case with a bound past int32 also runs with its equivalent index;
    # where upstream raises OverflowError, that one's result is the expected,
    # unless the update's mode is invalid or it warns of a deprecated dtype
    # promotion: those stay on the scatter path (and raise as upstream does).
    equivalents = [c[:3] + (_EQUIVALENT[repr(c[3])],) + c[4:] for c in cases
                   if repr(c[3]) in _EQUIVALENT]
    # Upstream gathers x[::2], and raises its errors for _BAD_GET_ARGS there.
    gathered = [((3, 4, 5), "float32", False, np.s_[::2], "get", None, kw)
                for kw in _BAD_GET_ARGS]
    ours, theirs = upstream_parity.run_side_by_side(
        _COMPARE_WORKER, cases + equivalents + gathered, timeout=600)
    theirs_eq = iter(theirs[len(cases):len(cases) + len(equivalents)])
    gather_errors = theirs[len(cases) + len(equivalents):]
    ours, theirs = ours[:len(cases)], theirs[:len(cases)]
    n_past_int32 = n_stricter = 0
    for k, case in enumerate(cases):
      op, kw = case[4], case[6]
      if repr(case[3]) in _EQUIVALENT:
        eq = next(theirs_eq)
        if (theirs[k][:2] == ("error", "OverflowError") and
            "FutureWarning" not in eq[-1] and
            (op == "get" or kw.get("mode") != "bogus")):
          theirs[k] = eq
          n_past_int32 += 1
      if (op == "get" and kw in _BAD_GET_ARGS and theirs[k][0] == "ok" and
          (theirs[k][1].size or "fill_value" in kw)):
        # Upstream's slice rewrite took the index without the gather path's
        # checks (which skip the mode for an empty result): ours makes them.
        error = gather_errors[_BAD_GET_ARGS.index(kw)]
        self.assertEqual(error[0], "error")
        self.assertEqual(ours[k], error, str(case))
        theirs[k] = error
        n_stricter += 1
    self.assertGreater(n_past_int32, 20)
    self.assertGreater(n_stricter, 5)
    n_ok = len(upstream_parity.assert_same_outcomes(self, cases, ours, theirs,
                                                    array_field=1))
    self.assertGreater(n_ok, len(cases) // 2)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
