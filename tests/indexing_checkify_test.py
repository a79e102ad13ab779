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
"""`checkify.index_checks` reports every out-of-bounds index, as upstream.

Patches 0004/0005 lower in-bounds basic indices to slices. Static integers out
of bounds keep upstream's gather/scatter, whose checkify check reports them;
traced integers keep `dynamic_slice`/`dynamic_update_slice`, whose checks
report the same (index, axis, size). The expected messages below are upstream
0.4.26's, observed with it on the same inputs; `UpstreamCheckifyParityTest`
compares a wider grid against upstream run in a subprocess.
"""
from __future__ import annotations

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
import jax.numpy as jnp
from jax._src import jaxpr_util
from jax._src import test_util as jtu
from jax.experimental import checkify

import upstream_parity

jax.config.parse_flags_with_absl()


def _primitive_names(closed_jaxpr) -> set[str]:
  # Every primitive of a jaxpr, at any depth.
  return set(jaxpr_util.collect_eqns(closed_jaxpr.jaxpr,
                                     lambda e: e.primitive.name))


def _gathers_scatters(jaxpr) -> set[str]:
  return {p for p in _primitive_names(jaxpr)
          if p == "gather" or p.startswith("scatter")}


def _checked(f):
  return checkify.checkify(f, errors=checkify.index_checks)


def _oob(shape, index, axis, size) -> str:
  """Upstream 0.4.26's OOBError text."""
  return (f"out-of-bounds indexing for array of shape {shape}: index {index} "
          f"is out of bounds for axis {axis} with size {size}. ")


# The table and its neighbours: (name, x's shape, f(x, *args), args,
# (index, axis, size) that upstream reports, NumPy function for the value).
# Python ints in `args` are concrete (checkify closes over its arguments)
# except under jit, where they are traced.
_TABLE = [
    ("int_past_end", (2,), lambda x: x[5], (), (5, 0, 2),
     lambda a: a[1]),
    ("negative_int", (2,), lambda x: x[-3], (), (-1, 0, 2),
     lambda a: a[0]),
    ("ellipsis_int", (2, 3), lambda x: x[..., 7], (), (7, 1, 3),
     lambda a: a[:, 2]),
    ("newaxis_int", (2, 3), lambda x: x[None, 1, -4], (), (-1, 1, 3),
     lambda a: a[None, 1, 0]),
    ("ints_and_slices", (2, 3, 7), lambda x: x[0, ::2, 100], (), (100, 2, 7),
     lambda a: a[0, ::2, 6]),
    ("concrete_index", (2,), lambda x, i: x[i], (5,), (5, 0, 2),
     lambda a: a[1]),
    ("concrete_negative_index", (2,), lambda x, i: x[i], (-3,), (-1, 0, 2),
     lambda a: a[0]),
    ("concrete_array_index", (2,), lambda x, i: x[jnp.asarray(i, jnp.int32)],
     (5,), (5, 0, 2), lambda a: a[1]),
    ("concrete_index_ellipsis", (2, 3), lambda x, i: x[..., i], (7,),
     (7, 1, 3), lambda a: a[:, 2]),
    ("get_clip", (2, 3), lambda x: x.at[..., -4].get(mode="clip"), (),
     (-1, 1, 3), lambda a: a[:, 0]),
    ("get_fill", (2, 3), lambda x: x.at[1, 3].get(mode="fill", fill_value=-1),
     (), (3, 1, 3), lambda a: np.float32(-1)),
    ("set", (2,), lambda x: x.at[5].set(1.), (), (5, 0, 2), lambda a: a),
    ("set_index", (2,), lambda x, i: x.at[i].set(1.), (5,), (5, 0, 2),
     lambda a: a),
    ("add_ellipsis", (2, 3), lambda x: x.at[..., 3].add(1.), (), (3, 1, 3),
     lambda a: a),
    ("set_clip", (2,), lambda x: x.at[5].set(-1., mode="clip"), (),
     (5, 0, 2), lambda a: np.array([a[0], -1.], a.dtype)),
    ("max_clip_negative", (2, 3), lambda x: x.at[1, -4].max(9., mode="clip"),
     (), (-1, 1, 3), lambda a: np.where(np.arange(6).reshape(2, 3) == 3,
                                        np.maximum(a, 9.), a).astype(a.dtype)),
]


class IndexingCheckifyTest(jtu.JaxTestCase):

  @parameterized.named_parameters(
      (f"{name}_{wrap}", shape, f, args, err, expected, wrap)
      for name, shape, f, args, err, expected in _TABLE
      for wrap in ["eager", "jit", "vmap_of_checkify", "checkify_of_vmap"])
  def test_out_of_bounds_reported_as_upstream(self, shape, f, args, err,
                                              expected, wrap):
    a = np.arange(1., 1. + np.prod(shape), dtype=np.float32).reshape(shape)
    x = jnp.asarray(a)
    index, axis, size = err
    msg = _oob(shape, index, axis, size)
    if wrap in ("eager", "jit"):
      g = jax.jit(f) if wrap == "jit" else f
      error, out = _checked(g)(x, *args)
      self.assertEqual(error.get(), msg)
      self.assertArraysEqual(out, expected(a))
      with self.assertRaisesRegex(checkify.JaxRuntimeError,
                                  "out-of-bounds indexing"):
        error.throw()
      return
    # Batch x only; the index is the same for both examples.
    batch = jnp.asarray(np.stack([a, a + 10.]))
    in_axes = (0,) + (None,) * len(args)
    if wrap == "vmap_of_checkify":
      error, out = jax.vmap(_checked(f), in_axes=in_axes)(batch, *args)
      expected_msg = "\n".join(f"at mapped index {b}: {msg}" for b in (0, 1))
    else:
      error, out = _checked(jax.vmap(f, in_axes=in_axes))(batch, *args)
      expected_msg = _oob((2, *shape), index, axis + 1, size)
    self.assertEqual(error.get(), expected_msg)
    self.assertArraysEqual(out, np.stack([expected(a), expected(a + 10.)]))

  @parameterized.named_parameters(
      ("eager", False), ("jit", True))
  def test_checkify_test_cases(self, jit):
    # Upstream's checkify_test.test_jit_oob/test_multiple_payloads.
    f = lambda x, i: jnp.cos(jnp.sin(x)[i])
    f = jax.jit(f) if jit else f
    err, _ = _checked(f)(jnp.arange(3), 2)
    self.assertIsNone(err.get())
    err, _ = _checked(f)(jnp.arange(3), 5)
    self.assertEqual(err.get(), _oob((3,), 5, 0, 3))

    def g(x):
      _ = x[5]
      _ = x[6]
    err, _ = _checked(jax.jit(g) if jit else g)(jnp.ones((2,)))
    self.assertEqual(err.get(), _oob((2,), 5, 0, 2))

  def test_batched_index_reports_failing_examples(self):
    f = lambda x, i: x[..., i]
    xs = jnp.ones((3, 2, 4))
    err, _ = jax.vmap(_checked(f))(xs, jnp.array([5, 0, -7]))
    self.assertEqual(err.get(), "\n".join([
        "at mapped index 0: " + _oob((2, 4), 5, 1, 4),
        "at mapped index 2: " + _oob((2, 4), -3, 1, 4)]))
    err, _ = _checked(jax.vmap(f))(xs, jnp.array([0, 9, 1]))
    self.assertEqual(err.get(), _oob((3, 2, 4), 9, 2, 4))

  def test_automatic_checks_report_oob_first(self):
    # Upstream's checkify_test.test_jit_ordering: the index error comes first.
    def f(x, i):
      return x[i] * jnp.sin(x)
    for g in [f, jax.jit(f)]:
      err, _ = checkify.checkify(g, errors=checkify.automatic_checks)(
          jnp.array([0., 1., jnp.inf]), 5)
      self.assertEqual(err.get(), _oob((3,), 5, 0, 3))

  def test_in_bounds_indices_do_not_error(self):
    x = jnp.arange(24.).reshape(2, 3, 4)
    for f, args in [(lambda x: x[1, -3, ::-2], ()),
                    (lambda x: x[..., 3], ()),
                    (lambda x, i: x[i, None, ..., -4], (-2,)),
                    (lambda x, i: x.at[..., i].add(1., mode="clip"), (3,)),
                    (lambda x: x.at[-1, 2:0:-1].set(0.), ())]:
      for g in [f, jax.jit(f)]:
        err, out = _checked(g)(x, *args)
        self.assertIsNone(err.get())
        self.assertArraysEqual(out, f(x, *args))


class InBoundsIndexingStaysSlicesTest(jtu.JaxTestCase):
  """Checkify's fix keeps in-bounds basic indexing off gather/scatter."""

  _IN_BOUNDS = [
      ("int", lambda x: x[1]),
      ("negative_int", lambda x: x[-2]),
      ("ellipsis", lambda x: x[..., 0, ::-2]),
      ("newaxis", lambda x: x[None, 1, ..., -4]),
      ("strided", lambda x: x[::2, 1:3, ::-1]),
      ("set", lambda x: x.at[..., 3].set(0.)),
      ("add_strided", lambda x: x.at[1, ::2].add(1.)),
      ("set_clip", lambda x: x.at[0, -3].set(7., mode="clip")),
  ]

  @parameterized.named_parameters(_IN_BOUNDS)
  def test_static_in_bounds_no_gather(self, f):
    x = jnp.ones((2, 3, 4))
    self.assertEqual(_gathers_scatters(jax.make_jaxpr(f)(x)), set())
    # Under checkify too: slices need no check, so nothing is added.
    jaxpr = jax.make_jaxpr(_checked(f))(x)
    self.assertEqual(_gathers_scatters(jaxpr), set())

  def test_traced_index_keeps_dynamic_slice(self):
    x = jnp.ones((2, 3, 4))
    for f in [lambda x, i: x[i], lambda x, i: x[..., i, ::2],
              lambda x, i: x.at[None, i].add(1., mode="clip")]:
      for g in [f, _checked(f)]:
        jaxpr = jax.make_jaxpr(g)(x, 1)
        self.assertEqual(_gathers_scatters(jaxpr), set(), str(jaxpr))
        self.assertTrue({"dynamic_slice", "dynamic_update_slice"} &
                        _primitive_names(jaxpr))

  def test_static_out_of_bounds_takes_upstream_path(self):
    x = jnp.ones((2, 3))
    for f, prim in [(lambda x: x[5], "gather"), (lambda x: x[..., -4], "gather"),
                    (lambda x: x.at[1, 3].get(mode="clip"), "gather"),
                    (lambda x: x.at[5].set(1.), "scatter"),
                    (lambda x: x.at[..., 3].set(1., mode="clip"), "scatter"),
                    (lambda x: x.at[-3].add(1., mode="clip"), "scatter-add")]:
      self.assertIn(prim, _primitive_names(jax.make_jaxpr(f)(x)))


# Cases run under checkify on both upstream 0.4.26 (subprocess) and this tree;
# error messages and values must agree. Strings "dN" in an index stand for an
# integer N passed as an argument (concrete eagerly, traced under jit, one per
# example under vmap); "aN" for a concrete jax.Array N.
_PARITY_WORKER = r'''
import pickle, sys, warnings
import numpy as np
import jax, jax.numpy as jnp
from jax.experimental import checkify

def run_case(case):
  shape, idx, op, value, kw, wrap = case
  idx_t = idx if isinstance(idx, tuple) else (idx,)
  dyn = [i for i, e in enumerate(idx_t) if isinstance(e, str)]
  def f(x, *dvals):
    full = list(idx_t)
    for i, d in zip(dyn, dvals):
      full[i] = d
    full = tuple(full) if isinstance(idx, tuple) else full[0]
    if op == "getitem":
      return x[full]
    if op == "get":
      return x.at[full].get(**kw)
    return getattr(x.at[full], op)(value, **kw)
  kinds = [idx_t[i][0] for i in dyn]
  vals = [int(idx_t[i][1:]) for i in dyn]
  ck = lambda g: checkify.checkify(g, errors=checkify.index_checks)
  x = np.arange(1, int(np.prod(shape)) + 1, dtype=np.float32).reshape(shape)
  args = [np.int32(v) if k == "d" else jnp.asarray(np.int32(v))
          for k, v in zip(kinds, vals)]
  try:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      if wrap == "eager":
        err, out = ck(f)(x, *args)
      elif wrap == "jit":
        err, out = ck(jax.jit(f))(x, *args)
      else:
        xs = np.stack([x, x + 100])
        ds = [np.array([0, v], np.int32) for v in vals]
        if wrap == "vmap":
          err, out = jax.vmap(ck(f))(xs, *ds)
        else:
          err, out = ck(jax.vmap(f))(xs, *ds)
    return ("ok", err.get(), np.asarray(out), str(out.dtype))
  except Exception as e:
    return ("error", type(e).__name__, str(e).split("\n")[0])

def run_all(cases):
  return [run_case(c) for c in cases]

if __name__ == "__main__":
  with open(sys.argv[1], "rb") as fh:
    cases = pickle.load(fh)
  with open(sys.argv[2], "wb") as fh:
    pickle.dump(run_all(cases), fh)
'''


def _parity_cases() -> list:
  indices = {
      (2,): [5, -3, 1, "d5", "d-3", "a5", (Ellipsis, 7), (None, "d5"),
             slice(None, None, -1)],
      (2, 3): [(Ellipsis, -4), (5, 1), ("d0", "d3"),
               ("d5", slice(None, None, 2)), (Ellipsis, "d7"),
               ("d5", None, 1), ("d1", 7), ("d5", "d9"),
               (slice(None, None, -1), "d4"), (Ellipsis, "a7")],
      (2, 3, 7): [(0, 5, 100), ("d-5", slice(None), "d9"),
                  ("d1", Ellipsis, "d8")],
  }
  ops = [("getitem", None, {}), ("get", None, {"mode": "clip"}),
         ("get", None, {"mode": "fill"}),
         ("get", None, {"mode": "promise_in_bounds"}),
         ("set", 1., {}), ("add", 1., {}), ("min", 1., {}),
         ("set", 1., {"mode": "clip"}), ("multiply", 2., {"mode": "clip"}),
         ("set", 1., {"mode": "drop"})]
  wraps = ["eager", "jit", "vmap", "checkify_of_vmap"]
  cases = []
  k = 0
  for shape, idxs in indices.items():
    for idx in idxs:
      for op, value, kw in ops:
        # One wrapper per (index, operation), rotating: each index is run
        # under all four across its operations.
        cases.append((shape, idx, op, value, kw, wraps[k % len(wraps)]))
        k += 1
  return cases


class UpstreamCheckifyParityTest(jtu.JaxTestCase):

  def test_same_checkify_errors_and_values_as_upstream(self):
    cases = _parity_cases()
    ours, theirs = upstream_parity.run_side_by_side(_PARITY_WORKER, cases,
                                                    timeout=900)
    ok = upstream_parity.assert_same_outcomes(self, cases, ours, theirs,
                                              array_field=2)
    n_reported = sum(a[1] is not None for a in ok)
    # Most cases index out of bounds somewhere; make sure they were checked.
    self.assertGreater(n_reported, len(cases) // 2)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
