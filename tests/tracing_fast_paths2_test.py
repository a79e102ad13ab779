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
"""The tracing fast paths of patches 0170-0174 answer what the general paths do.

Each fast path skips work for the common case; these tests hold it to the
general path's answer (which pristine jax 0.4.26 gives too).
"""
from __future__ import annotations

import threading

from absl.testing import absltest
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import config
from jax._src import core
from jax._src import dtypes
from jax._src import test_util as jtu
from jax._src.interpreters import partial_eval as pe


class PjitPartialEvalPruneTest(jtu.JaxTestCase):
  """0170: a prune that keeps every output is skipped."""

  def test_keeping_every_output_prunes_nothing(self):
    def f(x, y):
      return jnp.sin(x) * y, x, {"z": y + 1.0}

    closed = jax.make_jaxpr(f)(1.0, 2.0)
    closed = core.ClosedJaxpr(
        closed.jaxpr.replace(debug_info=core.JaxprDebugInfo(
            "jit", "f", ("x", "y"), ("[0]", "[1]", "[2]['z']"))),
        closed.consts)
    pruned = pe.prune_closed_jaxpr_outputs(closed, [True] * 3)
    self.assertEqual(str(pruned), str(closed))
    self.assertEqual(pruned.out_avals, closed.out_avals)
    self.assertEqual(pruned.effects, closed.effects)
    self.assertEqual(pruned.jaxpr.debug_info, closed.jaxpr.debug_info)
    self.assertEqual(pruned.consts, closed.consts)

  def test_linearize_through_jits_with_and_without_forwarding(self):
    @jax.jit
    def forwards(x, y):  # an input forwarded: the first prune drops it
      return x, jnp.sin(x) * y

    @jax.jit
    def residual_is_output(x):  # a residual that is an output: second prune
      s = jnp.sin(x)
      return s, s * s

    @jax.jit
    def plain(x, y):  # nothing forwarded: no prune
      return jnp.cos(x) * jnp.exp(y)

    def f(x, y):
      a, b = forwards(x, y)
      c, d = residual_is_output(b)
      return plain(a + c, d)

    x, y = 0.3, 0.7
    primal, f_jvp = jax.linearize(f, x, y)
    self.assertAllClose(primal, f(x, y))
    eps = 1e-3
    expected = (f(x + eps, y) - f(x - eps, y)) / (2 * eps)
    self.assertAllClose(f_jvp(1.0, 0.0), expected, rtol=1e-2, atol=1e-3)
    self.assertAllClose(jax.grad(f)(x, y), expected, rtol=1e-2, atol=1e-3)
    self.assertAllClose(jax.jit(jax.grad(f, (0, 1)))(x, y),
                        jax.grad(f, (0, 1))(x, y))


class _DtypeAttr:
  dtype = np.dtype(np.int8)


class DtypeTest(jtu.JaxTestCase):
  """0171: dtypes.dtype of a value with a NumPy `dtype` takes it directly."""

  def _values(self):
    vals = []
    for dt in (np.float32, np.int8, np.uint32, np.bool_, np.complex64,
               np.float16, dtypes.bfloat16, dtypes.int4, np.float64,
               np.int64):
      vals += [np.zeros((2, 3), dt), np.zeros((), dt), np.zeros((), dt)[()]]
    vals += [jnp.zeros(3, jnp.float32), jnp.zeros((), jnp.int32),
             jnp.zeros(2, dtypes.bfloat16), _DtypeAttr()]
    return vals

  def test_matches_result_type(self):
    for x in self._values():
      with self.subTest(x=type(x), dtype=getattr(x, "dtype", None)):
        self.assertEqual(dtypes.dtype(x), np.result_type(x))
        self.assertEqual(dtypes.dtype(x, canonicalize=True),
                         dtypes.canonicalize_dtype(np.result_type(x)))

  def test_tracers(self):
    seen = []

    def f(x, n):
      seen.append((dtypes.dtype(x), np.result_type(x)))
      seen.append((dtypes.dtype(n), np.result_type(n)))
      return x

    jax.make_jaxpr(f)(np.float32(1.0), 3)
    jax.grad(lambda x: f(x, 2) * 1.0)(1.0)
    jax.vmap(f, in_axes=(0, None))(jnp.arange(3, dtype=jnp.int32), 1.5)
    jax.jit(f)(jnp.zeros(2, dtypes.bfloat16), True)
    self.assertLen(seen, 8)
    for got, expected in seen:
      self.assertEqual(got, expected)

  def test_invalid_and_extended_dtypes(self):
    for x in (np.array(["a"]), np.array([object()], dtype=object)):
      with self.subTest(dtype=x.dtype):
        with self.assertRaisesRegex(TypeError, "is not a valid JAX array type"):
          dtypes.dtype(x)
    key = jax.random.key(0)
    self.assertEqual(dtypes.dtype(key), key.dtype)
    self.assertTrue(dtypes.issubdtype(dtypes.dtype(key), dtypes.prng_key))
    self.assertEqual(dtypes.dtype(np.float32), np.dtype(np.float32))
    self.assertEqual(dtypes.dtype(np.dtype("int16")), np.dtype(np.int16))
    self.assertEqual(dtypes.dtype("float16"), np.dtype(np.float16))
    with self.assertRaises(ValueError):
      dtypes.dtype(None)


class AxisPrimitiveBindTest(jtu.JaxTestCase):
  """0172: a bind with no axis names goes to the top trace at once."""

  def test_without_axis_names(self):
    f = jax.jit(lambda x: jnp.sin(x) * 2.0)
    self.assertAllClose(jax.vmap(f)(jnp.arange(3.0)),
                        jnp.sin(jnp.arange(3.0)) * 2.0)
    self.assertAllClose(jax.grad(f)(0.5), 2.0 * np.cos(0.5))

  def test_with_axis_names_the_axis_trace_still_binds(self):
    # The jit's operand is not batched: only its axis name sends the bind
    # to the vmap's trace.
    g = jax.jit(lambda y: lax.psum(y, "i"))
    f = jax.vmap(lambda x: g(2.0) + x, axis_name="i")
    self.assertAllClose(f(jnp.arange(3.0)), jnp.arange(3.0) + 6.0)


class DynamicJaxprFrameTest(jtu.JaxTestCase):
  """0173: arguments, consts and outputs bound with one read of the frame."""

  def test_args_consts_and_outputs(self):
    c = np.arange(3.0)

    def f(x, y):
      return jnp.sin(x) + c * y, x

    closed = jax.make_jaxpr(f)(np.ones(3, np.float32), 2.0)
    self.assertLen(closed.jaxpr.invars, 2)
    self.assertLen(closed.jaxpr.constvars, len(closed.consts))
    self.assertTrue(any(np.array_equal(k, c) for k in closed.consts))
    self.assertIs(closed.jaxpr.outvars[1], closed.jaxpr.invars[0])
    self.assertAllClose(core.jaxpr_as_fun(closed)(np.ones(3, np.float32), 2.0),
                        f(np.ones(3, np.float32), 2.0))


class TraceContextGlobalValuesTest(jtu.JaxTestCase):
  """0174: with no override, trace_context() returns the kept global values."""

  def _check(self):
    states = getattr(config, "_trace_context_states", None)
    if states is None:  # before patch 0160: trace_context has no such list
      return
    self.assertEqual(config.trace_context()[2:],
                     tuple(state.value for state in states))

  def test_global_updates(self):
    self.assertEqual(config._thread_local_state.__dict__, {})
    self._check()
    for name, value in (("jax_numpy_rank_promotion", "warn"),
                        ("jax_default_matmul_precision", "float32"),
                        ("jax_threefry_partitionable", True),
                        ("jax_enable_x64", True)):
      old = getattr(jax.config, name)
      with self.subTest(name=name):
        try:
          jax.config.update(name, value)
          self._check()
          self.assertIn(value, config.trace_context())
        finally:
          jax.config.update(name, old)
        self._check()

  def test_unrelated_and_related_overrides(self):
    with jax.enable_checks(True):  # not a trace-context state
      self._check()
      with jax.numpy_rank_promotion("warn"):
        self._check()
        self.assertIn("warn", config.trace_context())
    self._check()

  def test_update_from_another_thread(self):
    old = jax.config.jax_numpy_rank_promotion
    try:
      t = threading.Thread(
          target=lambda: jax.config.update("jax_numpy_rank_promotion", "warn"))
      t.start()
      t.join()
      self._check()
      self.assertIn("warn", config.trace_context())
    finally:
      jax.config.update("jax_numpy_rank_promotion", old)
    self._check()

  def test_jit_cache_follows_global_update(self):
    f = jax.jit(lambda x, y: x + y)
    x, y = jnp.ones(3), jnp.ones((2, 3))
    old = jax.config.jax_numpy_rank_promotion
    try:
      jax.config.update("jax_numpy_rank_promotion", "allow")
      self.assertEqual(f(x, y).shape, (2, 3))
      jax.config.update("jax_numpy_rank_promotion", "raise")
      with self.assertRaisesRegex(ValueError,
                                  "jax_numpy_rank_promotion='raise'"):
        f(x, y)
      jax.config.update("jax_numpy_rank_promotion", "allow")
      self.assertEqual(f(x, y).shape, (2, 3))
    finally:
      jax.config.update("jax_numpy_rank_promotion", old)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
