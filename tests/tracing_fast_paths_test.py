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
"""The tracing fast paths (patches 0153, 0160-0169) answer what the general
paths do.

Each fast path skips work for the common case; these tests hold it to the
general path's answer (which pristine jax 0.4.26 gives too).
"""
from __future__ import annotations

import contextlib
import inspect
import threading

from absl.testing import absltest
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import api_util
from jax._src import config
from jax._src import core
from jax._src import dtypes
from jax._src import source_info_util
from jax._src import test_util as jtu
from jax._src import traceback_util
from jax._src.interpreters import mlir


def _f_plain(x, y, axis=None, dtype=None): pass
def _f_positional_only(x1, x2, /): pass
def _f_variadic(a, *args, b, c=1, **kw): pass
def _f_keyword_only(a, b=2, *, c): pass
def _f_mixed(a, /, b, *c, d=1, **e): pass
def _f_defaults(a, b=1, /): pass


class ArgNamesTest(jtu.JaxTestCase):

  def test_positional_names_match_signature_bind(self):
    x = np.ones(3)
    tree = {"p": x, "q": [x, (x,)]}
    for fun in (_f_plain, _f_positional_only, _f_variadic, _f_keyword_only,
                _f_mixed, _f_defaults, lambda *a: 0, lambda **k: 0,
                lambda: 0):
      sig = inspect.signature(fun)
      for n in range(5):
        args = (x, tree, 3, None)[:n]
        try:
          bound = sig.bind(*args)
        except TypeError:
          expected = None
        else:
          expected = tuple(
              f"{name}{jax.tree_util.keystr(path)}"
              for name, v in bound.arguments.items()
              for path, _ in jax.tree_util.tree_flatten_with_path(v)[0])
        with self.subTest(fun=fun, n=n):
          self.assertEqual(api_util._arg_names(sig, args, {}, (), ()),
                           expected)

  def test_jit_arg_names_in_jaxpr(self):
    def f(x, y):
      return x["a"] * y
    jaxpr = jax.make_jaxpr(jax.jit(f))({"a": 1.0}, 2.0)
    self.assertEqual(jaxpr.eqns[0].params["jaxpr"].jaxpr.debug_info.arg_names,
                     ("x['a']", "y"))


class TraceContextTest(jtu.JaxTestCase):

  def _expected(self):
    return tuple(state.value for state in config._trace_context_states)

  def test_values_follow_overrides(self):
    self.assertEqual(config.trace_context()[2:], self._expected())
    with jax.numpy_rank_promotion("warn"):
      with jax.default_matmul_precision("float32"):
        ctx = config.trace_context()
        self.assertEqual(ctx[2:], self._expected())
        self.assertIn("warn", ctx)
        self.assertIn("float32", ctx)
    self.assertEqual(config.trace_context()[2:], self._expected())

  def test_other_thread_sees_no_overrides(self):
    seen = []
    with jax.numpy_rank_promotion("warn"):
      t = threading.Thread(target=lambda: seen.append(config.trace_context()))
      t.start()
      t.join()
      self.assertNotEqual(seen[0], config.trace_context())
    self.assertEqual(seen[0], config.trace_context())


class IssubdtypeTest(jtu.JaxTestCase):

  def test_numpy_dtype_against_scalar_types(self):
    cases = [
        (np.float32, np.inexact, True), (np.float32, np.integer, False),
        (np.int8, np.signedinteger, True), (np.uint8, np.signedinteger, False),
        (dtypes.bfloat16, np.floating, True), (dtypes.bfloat16, np.integer,
                                                False),
        (dtypes.int4, np.signedinteger, True), (dtypes.uint4, np.integer, True),
        (dtypes.uint4, np.signedinteger, False), (np.complex64, np.floating,
                                                  False),
        (np.bool_, np.number, False), (np.float32, dtypes.extended, False),
        (dtypes.float0, np.inexact, False),
    ]
    for a, b, expected in cases:
      with self.subTest(a=a, b=b):
        self.assertIs(dtypes.issubdtype(np.dtype(a), b), expected)
        self.assertIs(dtypes.issubdtype(a, b), expected)

  def test_extended_dtype(self):
    key_dtype = jax.random.key(0).dtype
    self.assertTrue(dtypes.issubdtype(key_dtype, dtypes.extended))
    self.assertTrue(dtypes.issubdtype(key_dtype, dtypes.prng_key))
    self.assertFalse(dtypes.issubdtype(key_dtype, np.inexact))
    self.assertFalse(dtypes.issubdtype(np.dtype(np.float32), dtypes.prng_key))


class UsedAxisNamesTest(jtu.JaxTestCase):

  def test_pjit_with_collective_names_its_axis(self):
    def f(x):
      return jax.jit(lambda y: lax.psum(y, "i"))(x)
    jaxpr = jax.make_jaxpr(f, axis_env=[("i", 2)])(1.0)
    eqn, = jaxpr.eqns
    self.assertEqual(core.used_axis_names(eqn.primitive, eqn.params), {"i"})

  def test_vmap_of_jit_with_collective(self):
    f = jax.vmap(jax.jit(lambda y: lax.psum(y, "i")), axis_name="i")
    self.assertAllClose(f(jnp.arange(3.0)), jnp.full(3, 3.0))


class InlinedJaxprTest(jtu.JaxTestCase):

  def test_inlined_jnp_functions_and_consts(self):
    c = np.arange(4.0)

    def f(x):
      y = jnp.where(x > 1, x, c)
      return jnp.mean(jnp.square(y - c)) + jnp.sum(y)

    self.assertAllClose(jax.jit(f)(jnp.arange(4.0) + 1),
                        f(jnp.arange(4.0) + 1))
    self.assertAllClose(jax.grad(f)(jnp.arange(4.0)),
                        jax.jit(jax.grad(f))(jnp.arange(4.0)))


@contextlib.contextmanager
def _generator_user_context(c, *, name_stack=None):
  """jax 0.4.26's user_context, the general form patch 0153 replaced."""
  prev = source_info_util._source_info_context.context
  source_info_util._source_info_context.context = prev.replace(
      traceback=c, name_stack=name_stack)
  try:
    yield
  except Exception as e:
    if c is None or source_info_util.has_user_context(e):
      raise
    filtered_tb = traceback_util.filter_traceback(c.as_python_traceback())
    if filtered_tb:
      msg = traceback_util.format_exception_only(e)
      msg = f"{msg}\n\n{source_info_util._message}"
      exp = source_info_util.JaxStackTraceBeforeTransformation(
          msg).with_traceback(filtered_tb)
      exp.__context__ = e.__context__
      exp.__cause__ = e.__cause__
      exp.__suppress_context__ = e.__suppress_context__
      e.__context__ = None
      e.__cause__ = exp
    raise
  finally:
    source_info_util._source_info_context.context = prev


class UserContextTest(jtu.JaxTestCase):

  def _leaving(self, user_context, c, exc, name_stack=None, nested=False):
    """What leaves `user_context(c)` when `exc` is raised inside it."""
    before = source_info_util._source_info_context.context
    seen = None
    try:
      with user_context(c, name_stack=name_stack):
        seen = source_info_util._source_info_context.context
        if nested:
          with user_context(c):
            raise exc
        if exc is not None:
          raise exc
    except BaseException as e:  # pylint: disable=broad-except
      left = e
    else:
      left = None
    self.assertIs(source_info_util._source_info_context.context, before)
    cause = getattr(left, "__cause__", None)
    frames = [(f.f_code.co_name, line) for f, line in
              traceback_util.traceback.walk_tb(cause.__traceback__)
              ] if cause is not None else None
    return (seen, type(left), left is exc, type(cause),
            cause and str(cause), frames,
            getattr(left, "__context__", None) is None)

  def test_class_and_generator_forms_agree(self):
    tb = source_info_util.xla_client.Traceback.get_traceback()
    name_stack = source_info_util.new_name_stack("scope")
    for c in (tb, None):
      for nested in (False, True):
        for make in (lambda: None, lambda: ValueError("bad input"),
                     lambda: KeyboardInterrupt()):
          exc = make()
          got = self._leaving(source_info_util.user_context, c, exc,
                              name_stack, nested)
          want = self._leaving(_generator_user_context, c, make(),
                               name_stack, nested)
          self.assertEqual(got, want)
          if c is not None and isinstance(exc, ValueError):
            self.assertIs(got[3], source_info_util.JaxStackTraceBeforeTransformation)
            self.assertIn("bad input", got[4])

  def test_a_lowering_error_names_the_user_frame(self):
    def bad_lowering(ctx, x):
      raise ValueError("refused lowering")
    bad_p = core.Primitive("fork_test_refused_lowering")
    bad_p.def_abstract_eval(lambda x: x)
    mlir.register_lowering(bad_p, bad_lowering)

    def user_function(x):
      return bad_p.bind(x)

    with self.assertRaisesRegex(ValueError, "refused lowering") as cm:
      jax.jit(user_function).lower(np.float32(1))
    cause = cm.exception.__cause__
    self.assertIsInstance(cause, source_info_util.JaxStackTraceBeforeTransformation)
    self.assertIn("refused lowering", str(cause))
    names = [f.f_code.co_name for f, _ in
             traceback_util.traceback.walk_tb(cause.__traceback__)]
    self.assertIn("user_function", names)
    self.assertNotIn("bad_lowering", names)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
