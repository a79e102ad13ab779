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
"""The PJRT adapter (jax._src.pjrt_adapter): jaxlib 0.4.26 on a newer plugin.

The plugin is a 2026 XLA CPU plugin (PJRT C API 0.115; PyPI's
lammps-jax-pjrt-cpu, or the .so that $JAX_FORK_TEST_PJRT_PLUGIN names,
conftest.pjrt_plugin_path),
loaded beside the built-in CPU backend in this process: every program runs
on both and the answers are compared. Plugins the adapter cannot serve are
small fakes compiled here, each tripping one check.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import io
import os
import re
from pathlib import Path
import shutil
import subprocess
import tempfile
import sys
import textwrap
import threading
import time
from unittest import mock
import weakref

from absl.testing import absltest
import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax._src import config
from jax._src import lib as jax_lib
from jax._src import pjrt_adapter
from jax._src import test_util as jtu
from jax._src import xla_bridge
from jax._src.lib import xla_client
from jax.experimental import export
from jax.experimental import io_callback
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from conftest import pjrt_plugin_path as plugin_path
from pjrt_adapter_renumber import field, varint

jax.config.parse_flags_with_absl()

NAME = "adapter_test_cpu"  # the plugin's name in jaxlib

# What the adapter says jaxlib speaks: "jaxlib 0.4.26 speaks 0.47" (on the
# series rebased onto jax 0.4.30, jaxlib 0.4.30's 0.54).
OURS = "jaxlib {} speaks {}.{}".format(jax_lib.version_str,
                                       *pjrt_adapter.JAXLIB_PJRT_VERSION)

# Whether the plugin refuses this jax's StableHLO artifact of scatter_sin:
# 0.4.26's, not 0.4.30's (the series rebased onto it), which it reads.
REFUSES_SCATTER = pjrt_adapter.JAXLIB_PJRT_VERSION == (0, 47)


@functools.lru_cache(maxsize=None)
def plugin_client():
  """A client of the plugin, 8 devices, next to the built-in backend."""
  c_api = pjrt_adapter.load(NAME, library_path=plugin_path())
  assert c_api is not None
  return pjrt_adapter.make_client(NAME, {"cpu_device_count": 8})


def on_both(f, *args):
  """f(*args) on the built-in CPU backend and on the plugin's first device."""
  cpu = jax.jit(f)(*args)
  dev = plugin_client().local_devices()[0]
  out = jax.jit(f)(*jax.device_put(args, dev))
  leaves = jax.tree_util.tree_leaves(out)
  assert all(leaf.devices() == {dev} for leaf in leaves), out
  return cpu, out


def scatter_sin(x, rows):
  """x with sin applied to its `rows`: a scatter with an update computation
  of its own, which a later StableHLO cannot upgrade."""
  dnums = lax.ScatterDimensionNumbers(
      update_window_dims=tuple(range(1, x.ndim)), inserted_window_dims=(0,),
      scatter_dims_to_operand_dims=(0,))
  return lax.scatter_apply(x, jnp.asarray(rows)[:, None], jnp.sin, dnums,
                           update_shape=(len(rows), *x.shape[1:]))


class PluginTestCase(jtu.JaxTestCase):

  def setUp(self):
    super().setUp()
    if plugin_path() is None:
      self.skipTest("no newer PJRT CPU plugin: pip install lammps-jax-pjrt-cpu"
                    " or set JAX_FORK_TEST_PJRT_PLUGIN")


class AnswersTest(PluginTestCase):
  """Programs give the built-in CPU backend's answers on the plugin."""

  def test_the_plugin_is_newer_and_served(self):
    client = plugin_client()
    major, minor = pjrt_adapter.plugin_version(client)
    self.assertEqual(major, 0)
    self.assertGreater(minor, 47)
    self.assertEqual(client.platform, "cpu")
    self.assertLen(client.local_devices(), 8)

  def test_exact_programs(self):
    rng = np.random.default_rng(0)
    ints = rng.integers(-8, 8, (16, 32)).astype(np.float32)
    cases = {
        "elementwise": (lambda x: x * 2 + 1, ints),
        "sum": (lambda x: x.sum(0), ints),  # small integers: exact sums
        "matmul": (lambda x: x @ x.T, ints),
        "bf16 matmul": (lambda x: x.astype(jnp.bfloat16) @ x.T.astype(
            jnp.bfloat16), ints),
        "sort": (jnp.sort, rng.normal(size=(5, 7)).astype(np.float32)),
        "cumsum": (lambda x: jnp.cumsum(x, 1), ints),
        "int64": (lambda x: (x.astype(jnp.int32) * 3) // 2, ints),
        "random": (lambda s: jax.random.normal(jax.random.key(s), (4, 4)),
                   np.uint32(3)),
        "while": (lambda x: lax.fori_loop(0, 5, lambda i, c: c * 2 + i, x),
                  ints),
        "scatter_apply": (lambda x: lax.scatter_apply(
            x, jnp.array([[0], [2]]), lambda v: v * 3,
            lax.ScatterDimensionNumbers((), (0,), (0,)), update_shape=(2,)),
            np.arange(10.0, dtype=np.float32)),
        # The fork's own features (patches 0003, 0004/0005); powers of 2
        # multiply exactly in any order.
        "reduce_window grad": (jax.grad(lambda x: lax.reduce_window(
            x, 1., lax.mul, (3, 3), (1, 1), "SAME").sum()),
            2.0 ** rng.integers(-2, 3, (8, 8)).astype(np.float32)),
        "basic indexing": (lambda x: x[..., 1, ::2].sum() + x.at[1:3].set(
            0.)[::-1, 5], ints[:4].reshape(4, 8, 4)),
    }
    for name, (f, x) in cases.items():
      with self.subTest(name):
        cpu, plugin = on_both(f, x)
        np.testing.assert_array_equal(plugin, cpu)

  def test_max_and_min_propagate_nans(self):
    """jaxlib's CompileOptions() turns XLA's fast min/max off (patch 0176):
    on the plugin without it, max(1, nan) was 1 and jnp.hypot(1, nan) 1.41."""
    x = np.array([1., np.nan, -np.inf, 3., np.nan], np.float32)
    y = np.array([np.nan, 2., np.nan, -0., np.nan], np.float32)
    for f in (lax.max, lax.min, jnp.fmax, jnp.hypot):
      with self.subTest(f.__name__):
        cpu, plugin = on_both(f, x, y)
        np.testing.assert_array_equal(plugin, cpu)

  def test_transcendentals(self):
    x = np.linspace(-3, 3, 101, dtype=np.float32)
    for f in (jnp.sin, jnp.exp, jnp.tanh, lax.erf, jnp.log1p):
      with self.subTest(f.__name__):
        cpu, plugin = on_both(f, x)
        # Two XLA releases' approximations agree to a few ulps.
        np.testing.assert_allclose(plugin, cpu, rtol=2e-6, atol=1e-7)

  def test_sharded_programs(self):
    devices = np.array(plugin_client().local_devices())
    mesh = Mesh(devices.reshape(4, 2), ("i", "j"))
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    xs = jax.device_put(x, NamedSharding(mesh, P("i", "j")))
    y = jax.jit(lambda x: jnp.sin(x) @ x)(xs)   # output sharding from XLA
    self.assertEqual(y.sharding.device_set, set(devices.flat))
    np.testing.assert_allclose(y, jnp.sin(x) @ x, rtol=1e-5)
    f = shard_map(lambda b: lax.psum(b, "i"), mesh=mesh,
                  in_specs=P("i", "j"), out_specs=P(None, "j"))
    np.testing.assert_array_equal(jax.jit(f)(xs), x.reshape(4, 2, 8).sum(0))
    # vmap(grad(shard_map)) under spmd_axis_name (patch 0010).
    g = shard_map(jnp.sin, mesh=mesh, in_specs=P("j"), out_specs=P("j"))
    xs2 = jnp.arange(4 * 16.0).reshape(4, 16)
    grads = jax.vmap(jax.grad(lambda v: g(v).sum()), spmd_axis_name="i")(
        jax.device_put(xs2, NamedSharding(mesh, P())))
    np.testing.assert_allclose(grads, jnp.cos(xs2), rtol=1e-6)

  def compiles(self, f, x):
    """f(x) on the plugin, and the forms the program was compiled as."""
    forms = []
    def counted(*args):
      forms.append(args[-1])
      return compile_staged(*args)
    compile_staged = pjrt_adapter._compile_staged
    dev = plugin_client().local_devices()[0]
    with mock.patch.object(pjrt_adapter, "_compile_staged", counted):
      try:
        return jax.jit(f)(jax.device_put(x, dev)), forms
      finally:
        self.forms = forms

  def test_a_program_the_plugin_cannot_upgrade(self):
    """A later StableHLO fails to upgrade 0.4.26's scatter with an update
    computation of its own ("Failed to upgrade versioned StableHLO"): the
    plugin compiles its HLO instead."""
    x = np.arange(6.0, dtype=np.float32)
    out, forms = self.compiles(lambda x: scatter_sin(x, np.array([1, 3])), x)
    self.assertEqual(forms, [b"mlir", b"hlo"] if REFUSES_SCATTER else [b"mlir"])
    np.testing.assert_array_equal(out, jax.jit(scatter_sin)(x, [1, 3]))
    np.testing.assert_allclose(out, [0, np.sin(1), 2, np.sin(3), 4, 5])

  def test_a_program_that_fails_compiles_once(self):
    """The plugin has no LAPACK (NOT_FOUND): the error is the plugin's own,
    and the program is not compiled again as HLO."""
    with self.assertRaisesRegex(xla_client.XlaRuntimeError,
                                "NOT_FOUND: .*lapack_sgetrf"):
      self.compiles(jnp.linalg.inv, np.eye(3, dtype=np.float32))
    self.assertEqual(self.forms, [b"mlir"])

  def test_a_refused_program_that_fails_as_hlo(self):
    """Where the plugin refuses the artifact and the HLO fails too, the HLO's
    error is raised with the refusal chained; where it reads the artifact,
    the program fails once, with the plugin's own error."""
    f = lambda x: jnp.linalg.inv(scatter_sin(x, np.array([0, 1])))
    with self.assertRaisesRegex(xla_client.XlaRuntimeError,
                                "NOT_FOUND: .*lapack_sgetrf") as cm:
      self.compiles(f, np.eye(3, dtype=np.float32))
    if REFUSES_SCATTER:
      self.assertEqual(self.forms, [b"mlir", b"hlo"])
      self.assertRegex(str(cm.exception.__cause__),
                       "INVALID_ARGUMENT: Failed to upgrade versioned StableHLO")
    else:
      self.assertEqual(self.forms, [b"mlir"])
      self.assertIsNone(cm.exception.__cause__)

  def test_compiled_hlo_reads_back(self):
    """The optimized HLO of a plugin executable (instruction ids above
    INT_MAX, renumbered) reaches as_text() and the executable's shardings."""
    dev = plugin_client().local_devices()[0]
    compiled = jax.jit(lambda x: jnp.sin(x) * 2).lower(
        jax.device_put(np.ones(3, np.float32), dev)).compile()
    # Without the renumbering jaxlib fails to read it: "Instruction with id >
    # INT_MAX".
    self.assertIn("sine", compiled.as_text())
    (module,) = compiled.runtime_executable().hlo_modules()
    self.assertIn("sine", module.to_string())

  def test_donation(self):
    dev = plugin_client().local_devices()[0]
    x = jax.device_put(np.arange(4.0, dtype=np.float32), dev)
    y = jax.jit(lambda x: x + 1, donate_argnums=0)(x)
    np.testing.assert_array_equal(y, np.arange(4.0) + 1)
    self.assertTrue(x.is_deleted())


class CallbackTest(PluginTestCase):
  """Host callbacks run on the plugin through the adapter's FFI handler."""

  def test_io_callback_in_order(self):
    seen = []
    def record(i):
      seen.append(int(i))
      return np.int32(i * 10)
    def f(n):
      def body(i, acc):
        return acc + io_callback(record, jax.ShapeDtypeStruct((), jnp.int32),
                                 i, ordered=True)
      return lax.fori_loop(0, n, body, jnp.int32(0))
    dev = plugin_client().local_devices()[0]
    out = jax.jit(f)(jax.device_put(np.int32(6), dev))
    self.assertEqual(int(out), sum(range(6)) * 10)
    self.assertEqual(seen, list(range(6)))

  def test_pure_callback_and_vmap(self):
    f = lambda x: jax.pure_callback(
        lambda v: np.sin(v).astype(v.dtype), x, x, vectorized=True)
    cpu, plugin = on_both(jax.vmap(f), np.linspace(0, 1, 12,
                                                   dtype=np.float32))
    np.testing.assert_array_equal(plugin, cpu)

  def test_debug_print(self):
    dev = plugin_client().local_devices()[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      jax.jit(lambda x: jax.debug.print("x={x}", x=x))(
          jax.device_put(np.arange(3), dev))
      jax.effects_barrier()
    self.assertEqual(out.getvalue(), "x=[0 1 2]\n")

  def test_reading_an_array_while_a_callback_runs(self):
    """Reading a CPU array waits in the plugin (a later plugin's buffer
    pointer waits for the buffer) with the GIL released, so that callbacks
    of the executions queued before it run."""
    seen = []
    def record(x):
      time.sleep(0.05)
      seen.append(int(x.sum()))
    devices = plugin_client().local_devices()
    for i in range(4):
      mesh = Mesh(np.array(devices[i:i + 2]), ("x",))
      sharding = NamedSharding(mesh, P("x"))
      x = jax.device_put(np.arange(2) + 10 * i, sharding)
      jax.jit(lambda x: io_callback(record, None, x, ordered=True),
              in_shardings=sharding)(x)
      self.assertEqual(int(x.sum()), 20 * i + 1)  # queued behind the callback
    jax.effects_barrier()
    self.assertEqual(seen, [1, 21, 41, 61])

  def test_a_callback_lives_while_its_execution_runs(self):
    """The program is gone (its executable collected) before the execution
    that calls back has run; the callback still answers."""
    release = threading.Event()
    def slow(x):
      release.wait(10)
      return x + 1
    dev = plugin_client().local_devices()[0]
    f = jax.jit(lambda x: jax.pure_callback(slow, x, x))
    out = f(jax.device_put(np.arange(3.0), dev))
    del f
    jax.clear_caches()
    gc.collect()
    release.set()
    np.testing.assert_array_equal(out, np.arange(3.0) + 1)

  def test_a_callback_is_released_with_its_program(self):
    dev = plugin_client().local_devices()[0]
    x = jax.device_put(np.arange(3.0), dev)
    f = jax.jit(lambda x: jax.pure_callback(lambda v: v * 2, x, x))
    np.testing.assert_array_equal(f(x), np.arange(3.0) * 2)
    hosts = [weakref.ref(h) for h in pjrt_adapter._callbacks.values()]
    self.assertNotEmpty(hosts)
    del f
    jax.clear_caches()
    for _ in range(50):  # the pin of the last execution is let go
      gc.collect()
      if not any(h() for h in hosts):
        break
      time.sleep(0.1)
    self.assertEqual([h for h in hosts if h()], [])

  def test_a_pmapped_callback_lives_as_long_as_its_program(self):
    # pmap's C++ fast path keeps only the execute function of its program.
    f = jax.pmap(lambda x: jax.pure_callback(np.sin, x, x),
                 devices=plugin_client().local_devices()[:2])
    x = np.arange(2.0, dtype=np.float32)
    for _ in range(3):
      np.testing.assert_allclose(f(x), np.sin(x), rtol=1e-6)
      gc.collect()

  def test_the_plugins_version_is_reported(self):
    client = plugin_client()
    version = xla_bridge.backend_pjrt_c_api_version(client)
    self.assertEqual(version, pjrt_adapter.plugin_version(client))
    self.assertGreater(version, (0, 47))

  def test_compiler_callbacks_are_refused(self):
    mesh = Mesh(np.array(plugin_client().local_devices()[:2]), ("x",))
    x = jax.device_put(np.arange(8.0), NamedSharding(mesh, P("x")))
    f = jax.jit(lambda x: jax.debug.inspect_array_sharding(x, callback=print))
    with self.assertRaisesRegex(NotImplementedError,
                                "calls back into jaxlib's own XLA compiler"):
      f(x)

  def test_a_failing_callback_raises_its_error(self):
    def bad(x):
      raise ValueError("no thanks")
    dev = plugin_client().local_devices()[0]
    with self.assertRaisesRegex(Exception, "no thanks"):
      jax.block_until_ready(jax.jit(
          lambda x: jax.pure_callback(bad, x, x))(jax.device_put(1.0, dev)))
    # and the plugin runs the next program
    self.assertEqual(float(jax.jit(lambda x: x + 1)(jax.device_put(
        1.0, dev))), 2.0)

  def test_an_interpret_mode_error_reaches_the_caller(self):
    """Interpret mode's checks run in host callbacks and raise after the
    execution, which pxla waits for as for jaxlib's own callbacks."""
    def call(start):
      def kernel(x_ref, o_ref, sem):
        copy = pltpu.make_async_copy(x_ref, o_ref, sem)
        if start:
          copy.start()
        copy.wait()
      return pl.pallas_call(
          kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
          grid_spec=pltpu.PrefetchScalarGridSpec(
              num_scalar_prefetch=0, grid=(),
              in_specs=[pl.BlockSpec(memory_space=pltpu.TPUMemorySpace.ANY)],
              out_specs=pl.BlockSpec(memory_space=pltpu.TPUMemorySpace.ANY),
              scratch_shapes=[pltpu.SemaphoreType.DMA]),
          interpret=True)
    x = jax.device_put(np.ones((8, 128), np.float32),
                       plugin_client().local_devices()[0])
    np.testing.assert_array_equal(call(start=True)(x), x)
    with self.assertRaisesRegex(RuntimeError, "no device can proceed"):
      jax.block_until_ready(call(start=False)(x))
    # Deterministically: the executable is one with host callbacks.
    compiled = jax.jit(call(start=False)).lower(x).compile()
    self.assertTrue(compiled._executable.unsafe_call.has_host_callbacks)

  def test_pallas_kernels_across_devices(self):
    """A kernel of the fork's interpret mode that talks across devices (its
    runtime is host callbacks) gives the built-in backend's answer."""
    def kernel(x_ref, o_ref, send_sem, recv_sem):  # a ring of 4
      me = lax.axis_index("x")
      right = lax.rem(me + 1, 4)
      copy = pltpu.make_async_remote_copy(
          x_ref, o_ref, send_sem, recv_sem, device_id=(right,),
          device_id_type=pltpu.DeviceIdType.MESH)
      copy.start()
      copy.wait()
    def ring(devices):
      mesh = Mesh(np.array(devices[:4]), ("x",))
      call = pl.pallas_call(
          kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
          grid_spec=pltpu.PrefetchScalarGridSpec(
              num_scalar_prefetch=0, grid=(),
              in_specs=[pl.BlockSpec(memory_space=pltpu.TPUMemorySpace.ANY)],
              out_specs=pl.BlockSpec(memory_space=pltpu.TPUMemorySpace.ANY),
              scratch_shapes=[pltpu.SemaphoreType.DMA] * 2),
          interpret=True)
      f = jax.jit(shard_map(call, mesh=mesh, in_specs=P("x"),
                            out_specs=P("x"), check_rep=False))
      x = jnp.arange(32 * 128, dtype=jnp.float32).reshape(32, 128)
      return f(jax.device_put(x, NamedSharding(mesh, P("x"))))
    cpu = ring(jax.devices())
    plugin = ring(plugin_client().local_devices())
    np.testing.assert_array_equal(plugin, cpu)
    np.testing.assert_array_equal(
        cpu, np.roll(np.arange(32 * 128.0).reshape(4, 8, 128), 1, 0).reshape(
            32, 128))


def hlo_module(new_id=lambda c, i: c << 32 | i) -> bytes:
  """An HloModuleProto with computations 7 and 1 and a schedule, instruction
  i of computation c numbered new_id(c, i)."""
  def instruction(c, i, *operands, packed=True):
    ops = [new_id(*o) for o in operands]
    ops = (field(36, b"".join(map(varint, ops))) if packed and ops else
           b"".join(field(36, o) for o in ops))
    return field(2, field(1, b"name") + field(35, new_id(c, i)) + ops +
                 varint(50 << 3 | 1) + bytes(8) + varint(51 << 3 | 5) +
                 bytes(4))  # a fixed64 and a fixed32 field
  comp7 = (instruction(7, 0) +
           instruction(7, 1, (7, 0), (1, 2), packed=False))
  comp1 = instruction(1, 0) + instruction(1, 2, (1, 0))
  # computations (3; root_id 6), schedule (7): sequences (1, a map) -> value
  # (2) -> instruction_ids (1)
  sequence = b"".join(map(varint, (new_id(7, 0), new_id(7, 1))))
  schedule = field(7, field(1, field(1, 7) + field(2, field(1, sequence))))
  return (field(1, b"m") + field(3, comp7 + field(6, new_id(7, 1))) +
          field(3, comp1) + schedule)


class NativeEditTest(jtu.JaxTestCase):
  """The C half's walker over serialized protocol buffers: optimized HLO
  renumbered with ids jaxlib 0.4.26 reads, host callbacks retargeted,
  compile options without their DebugOptions."""

  def edit(self, what: str, message: bytes, arg: bytes = b"") -> bytes:
    """`message` as the C half edits it: `what` is renumber (`arg`: the
    format), retarget (`arg`: the target) or options."""
    native = pjrt_adapter._native()
    if what == "options":
      return pjrt_adapter._edited(native.jax_pjrt_adapter_options, message)
    if what == "retarget":
      return pjrt_adapter._edited(native.jax_pjrt_adapter_retarget, message,
                                  arg)
    renumber = native.jax_pjrt_adapter_renumber
    renumber.restype = ctypes.c_size_t
    renumber.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                         ctypes.c_size_t]
    buf = ctypes.create_string_buffer(message, len(message))
    size = renumber(arg, len(arg), buf, len(message))
    return buf.raw[:size]

  def test_ids_above_int_max_become_intervals(self):
    # computation 1 holds ids 0..2, computation 7 ids 3..4
    small = hlo_module(lambda c, i: {1: 0, 7: 3}[c] + i)
    self.assertEqual(self.edit("renumber", hlo_module(), b"hlo"), small)
    with_config = lambda m: field(1, m) + field(2, b"c")
    self.assertEqual(self.edit("renumber", with_config(hlo_module()),
                               b"hlo_with_config"), with_config(small))
    self.assertEqual(self.edit("renumber", small, b"hlo"), small)
    self.assertEqual(self.edit("renumber", hlo_module(), b"mlir"),
                     hlo_module())  # not HLO

  def test_a_computation_whose_ids_come_apart(self):
    part = lambda i: field(2, field(35, 5 << 32 | i))
    module = field(3, part(0)) + field(3, field(2, field(35, 1 << 32))) + (
        field(3, part(3)))
    self.assertEqual(self.edit("renumber", module, b"hlo"),
                     field(3, field(2, field(35, 1))) + field(
                         3, field(2, field(35, 0))) + field(
                             3, field(2, field(35, 4))))

  def test_a_malformed_program_is_left_as_it_is(self):
    for module in (varint(3 << 3 | 2) + b"\x7f\x00",  # runs past its end
                   hlo_module()[:-3], b"\xff", b""):
      with self.subTest(module=module[:8]):
        self.assertEqual(self.edit("renumber", module, b"hlo"), module)

  def test_host_callbacks_become_typed_ffi(self):
    call = lambda target: field(3, field(2, field(28, target) + field(77, 2)))
    self.assertEqual(
        self.edit("retarget", call(b"mine") + call(b"other"), b"mine"),
        field(3, field(2, field(28, b"mine") + field(77, 4))) + call(b"other"))

  def test_compile_options_lose_their_debug_options(self):
    build = field(1, 3) + field(3, field(1, 1)) + field(4, b"x")
    self.assertEqual(self.edit("options", field(3, build) + field(4, 1)),
                     field(3, field(1, 3) + field(4, b"x")) + field(4, 1))


_DRIVER = textwrap.dedent("""
    #include <stdio.h>
    #include "pjrt_adapter.c"

    // argv[1] renumber, retarget or options (argv[2]: the format, the
    // target) of the message on stdin, written to stdout; prefixes: all of
    // them on each prefix of it, each in a buffer of its exact size; plugin:
    // it as a fake plugin's optimized program, read back as jaxlib does.
    static size_t edit(const char* what, const char* arg, char* in,
                       size_t size, char* out) {
      if (!strcmp(what, "options")) {
        return jax_pjrt_adapter_options(in, size, out);
      }
      if (!strcmp(what, "retarget")) {
        return jax_pjrt_adapter_retarget(in, size, out, arg);
      }
      size = jax_pjrt_adapter_renumber(arg, strlen(arg), in, size);
      memcpy(out, in, size);
      return size;
    }

    static char data[1 << 20];
    static size_t size;
    static int serialized;  // how often the fake plugin wrote its program

    static PJRT_Error* optimized(void* a) {
      Program* program = ((OptimizedArgs*)a)->program;
      if (program->code) memcpy(program->code, data, size);
      program->code_size = size;
      program->format = "hlo";
      program->format_size = 3;
      serialized++;
      return NULL;
    }

    static PJRT_Error* destroyed(void* args) {
      (void)args;
      return NULL;
    }

    // Two executables, each read twice (its size, then its bytes, each
    // time), then destroyed; the second's program written to stdout.
    static int plugin(void) {
      Api* fake = calloc(1, sizeof(Api) + kNumFns * sizeof(Fn));
      fake->fns[kOptimizedProgram] = optimized;
      fake->fns[kExecutableDestroy] = destroyed;
      const Api* api = jax_pjrt_adapter_new(fake);
      for (uintptr_t executable = 1; executable <= 2; executable++) {
        for (int read = 0; read < 2; read++) {
          Program program = {{sizeof(Program), NULL}, NULL, 0, NULL, 0};
          OptimizedArgs args = {{sizeof(args), NULL}, (void*)executable,
                                &program};
          api->fns[kOptimizedProgram](&args);
          program.code = malloc(program.code_size);
          api->fns[kOptimizedProgram](&args);
          if (executable == 2 && read == 1) {
            fwrite(program.code, 1, program.code_size, stdout);
          }
          free(program.code);
        }
        ExecutableArgs args = {{sizeof(args), NULL}, (void*)executable};
        api->fns[kExecutableDestroy](&args);
      }
      return serialized == 4 ? 0 : 3;  // twice an executable
    }

    int main(int argc, char** argv) {
      size = fread(data, 1, sizeof(data), stdin);
      if (!strcmp(argv[1], "plugin")) return plugin();
      char* out = malloc(size + 128);
      if (strcmp(argv[1], "prefixes")) {
        char* in = malloc(size);
        memcpy(in, data, size);
        fwrite(out, 1, edit(argv[1], argc > 2 ? argv[2] : "", in, size, out),
               stdout);
        free(in);
      }
      for (size_t n = 0; !strcmp(argv[1], "prefixes") && n <= size; n++) {
        const char* edits[][2] = {{"renumber", "hlo"},
                                  {"renumber", "hlo_with_config"},
                                  {"retarget", "mine"}, {"options", ""}};
        for (int i = 0; i < 4; i++) {
          char* in = malloc(n);
          memcpy(in, data, n);
          edit(edits[i][0], edits[i][1], in, n, out);
          free(in);
        }
      }
      free(out);
      return 0;
    }
    """)


class SanitizedNativeEditTest(NativeEditTest):
  """The same, the C half built with -fsanitize=address,undefined into a
  small program that edits what it is given; also every prefix of a
  module. Any finding of the sanitizers fails the run."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cc = os.environ.get("CC") or shutil.which("cc")
    if cc is None:
      raise absltest.SkipTest("no C compiler")
    cls.tmp = tempfile.mkdtemp()
    source = Path(pjrt_adapter.__file__).with_name("pjrt_adapter.c")
    Path(cls.tmp, "driver.c").write_text(_DRIVER)
    probe = Path(cls.tmp, "probe.c")
    probe.write_text("int main(void) { return 0; }\n")
    flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    run = subprocess.run([cc, *flags, "-o", str(probe.with_suffix("")),
                          str(probe)], capture_output=True, text=True)
    if run.returncode:
      raise absltest.SkipTest(f"{cc} has no address and undefined behavior "
                              f"sanitizer runtime: {run.stderr}")
    cls.driver = Path(cls.tmp, "driver")
    subprocess.run([cc, *flags, "-g", "-O1", "-I", str(source.parent), "-o",
                    str(cls.driver), str(Path(cls.tmp, "driver.c")),
                    "-lpthread"], check=True)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def edit(self, what, message, arg=b""):
    run = subprocess.run([self.driver, what, arg], input=message,
                         capture_output=True,
                         env=dict(os.environ, ASAN_OPTIONS="detect_leaks=1"))
    self.assertEqual(run.returncode, 0, run.stderr.decode())
    self.assertEqual(run.stderr, b"")
    return run.stdout

  def test_a_plugins_optimized_program_read_back(self):
    self.assertEqual(self.edit("plugin", hlo_module()),
                     hlo_module(lambda c, i: {1: 0, 7: 3}[c] + i))

  def test_every_prefix(self):
    module = hlo_module()
    self.edit("prefixes", field(1, module) + field(2, b"c"))
    self.edit("prefixes", field(3, field(3, field(1, 1)) + field(4, b"x")))


class CompileOptionsTest(jtu.JaxTestCase):
  """What the plugin is asked to compile with."""

  def test_jax_settings_become_overrides(self):
    options = xla_client.CompileOptions()
    debug = options.executable_build_options.debug_options
    flipped = not debug.xla_detailed_logging
    debug.xla_detailed_logging = flipped
    options.env_option_overrides = [("xla_cpu_enable_fast_math", False)]
    parsed = xla_client.CompileOptions.ParseFromString(
        pjrt_adapter._options(options))
    self.assertNotEqual(parsed.executable_build_options.debug_options
                        .xla_detailed_logging, flipped)  # the plugin's own
    self.assertCountEqual(parsed.env_option_overrides,
                          [("xla_cpu_enable_fast_min_max", False),
                           ("xla_gpu_enable_fast_min_max", False),
                           ("xla_cpu_enable_fast_math", False),
                           ("xla_detailed_logging", flipped)])


class CompilePathTest(PluginTestCase):
  """Compiling on the plugin runs no Python over the program: the Python
  calls a compile makes do not grow with the program (a walk of its HLO in
  Python would add calls for each instruction)."""

  def python_calls(self, n: int) -> int:
    def f(x):
      for i in range(n):
        x = jnp.sin(x) * (i + 1.0) + jnp.cos(x).sum()
      return x
    dev = plugin_client().local_devices()[0]
    lowered = jax.jit(f).lower(jax.device_put(np.ones(8, np.float32), dev))
    calls = 0
    def count(frame, event, arg):
      nonlocal calls
      calls += event == "call"
    sys.setprofile(count)
    try:  # (a slow compile would also offer the program to the disk cache)
      with config.persistent_cache_min_compile_time_secs(1e9):
        compiled = lowered.compile()
      compiled.as_text(), compiled.cost_analysis()
    finally:
      sys.setprofile(None)
    self.assertIn("sine", compiled.as_text())
    return calls

  def test_python_calls_do_not_grow_with_the_program(self):
    self.python_calls(1)  # warm
    small, large = self.python_calls(2), self.python_calls(60)
    self.assertEqual(small, large)


_FAKE = textwrap.dedent("""
    #include <stddef.h>
    static struct { size_t size; void* ext; size_t vsize; void* priv;
                    int major, minor; void* fns[140]; } api;
    void* GetPjrtApi(void) {
      api.size = SIZE; api.vsize = 24; api.major = MAJOR; api.minor = MINOR;
      return &api;
    }
    """)


@functools.lru_cache(maxsize=None)
def fake_plugin(major: int, minor: int, num_fns: int = 120,
                symbol: bool = True) -> str:
  """A .so whose GetPjrtApi returns an empty table of that version."""
  cc = shutil.which("cc")
  if cc is None:
    raise absltest.SkipTest("no C compiler for the fake plugins")
  d = Path(tempfile.mkdtemp())
  (d / "fake.c").write_text(_FAKE if symbol else "int nothing;\n")
  so = d / f"fake_{major}_{minor}_{num_fns}.so"
  subprocess.run([cc, "-shared", "-fPIC", "-o", str(so), str(d / "fake.c"),
                  f"-DMAJOR={major}", f"-DMINOR={minor}",
                  f"-DSIZE={40 + 8 * num_fns}"], check=True)
  return str(so)


class PluginErrorTest(jtu.JaxTestCase):
  """A plugin the adapter cannot serve fails with one message naming it,
  both versions and what to do; a servable plugin's twin is served."""

  def assertRefused(self, path, *patterns):
    with self.assertRaises(pjrt_adapter.PluginError) as cm:
      pjrt_adapter.load("fake", library_path=path)
    for pattern in patterns:
      self.assertRegex(str(cm.exception), pattern)

  def test_another_major_version(self):
    self.assertRefused(fake_plugin(1, 2), r"'fake' \(.*fake_1_2_120.so\)",
                       r"speaks PJRT C API 1\.2", re.escape(OURS),
                       "major 0 only")

  def test_version_0_56(self):
    self.assertRefused(fake_plugin(0, 56), r"0\.56", "another release")

  def test_an_older_plugin(self):
    if pjrt_adapter.JAXLIB_PJRT_VERSION != (0, 47):
      # jaxlib 0.4.30 drives an older plugin itself (its PJRT compatibility
      # is on by default): the adapter leaves it to jaxlib.
      pjrt_adapter.load("fake_0_40", library_path=fake_plugin(0, 40))
      self.assertNotIn("fake_0_40", pjrt_adapter._plugins)
      return
    with jtu.set_env(ENABLE_PJRT_COMPATIBILITY=None):
      self.assertRefused(fake_plugin(0, 40), r"0\.40, older than",
                         "ENABLE_PJRT_COMPATIBILITY=1")

  def test_no_symbol(self):
    # jaxlib's to report, as upstream does
    with self.assertRaisesRegex(xla_client.XlaRuntimeError,
                                "GetPjrtApi not found in .*fake_0_90"):
      pjrt_adapter.load("fake", library_path=fake_plugin(0, 90, symbol=False))

  def test_no_native_half(self):
    # A wheel without the native half (built with no C compiler) says what
    # to do.
    here = Path(self.create_tempdir().full_path)
    source = Path(pjrt_adapter.__file__).with_name("pjrt_adapter.c")
    shutil.copy(source, here)
    with mock.patch.object(pjrt_adapter, "__file__",
                           str(here / "pjrt_adapter.py")):
      with self.assertRaisesRegex(pjrt_adapter.PluginError,
                                  "install a wheel of the fork built for this"
                                  r" platform .*cc -O2 -shared -fPIC -o "
                                  f"{here}/pjrt_adapter-"):
        pjrt_adapter._native.__wrapped__()

  def test_no_such_file(self):
    # jaxlib's to report, as upstream does (its tests mock the loader)
    with self.assertRaisesRegex(xla_client.XlaRuntimeError,
                                "Failed to open /nonexistent/plugin.so"):
      pjrt_adapter.load("fake", library_path="/nonexistent/plugin.so")

  def test_the_error_reaches_backend_initialization(self):
    name = "fake_major_1"
    xla_bridge.register_plugin(name, library_path=fake_plugin(1, 0))
    factory = xla_bridge._backend_factories.pop(name).factory
    with self.assertRaisesRegex(pjrt_adapter.PluginError,
                                f"'{name}'.*major 0 only"):
      factory()

  def test_a_newer_fake_is_served(self):
    c_api = pjrt_adapter.load("fake_0_90", library_path=fake_plugin(0, 90))
    self.assertEqual(pjrt_adapter._plugins["fake_0_90"].version, (0, 90))
    # The same table again (as a jax_plugins module's capsule) is served by
    # the same adapter.
    self.assertIsNotNone(c_api)


class TpuRuntimeTest(jtu.JaxTestCase):
  """What a process sees of a TPU runtime JAX finds (in a fresh process each,
  since the backends are chosen once)."""

  def run_jax(self, env, code="print(jax.devices()[0].platform)"):
    env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-c", "import os, jax\n" + code], env=env,
        capture_output=True, text=True, timeout=120)

  def test_a_runtime_the_fork_cannot_serve_is_a_warning(self):
    path = fake_plugin(1, 2)
    run = self.run_jax({"TPU_LIBRARY_PATH": path, "JAX_PLATFORMS": None},
                       "import logging; logging.basicConfig()\n"
                       "print(jax.devices()[0].platform)")
    self.assertEqual(run.returncode, 0, run.stderr)
    self.assertEqual(run.stdout.strip(), "cpu")
    self.assertRegex(run.stderr, "WARNING:.*Unable to initialize backend 'tpu'")
    for words in (path, "speaks PJRT C API 1.2", OURS,
                  "use a release of the plugin built for PJRT C API 0.x"):
      self.assertIn(words, run.stderr)
    self.assertNotIn("libtpu is not installed", run.stderr)
    run = self.run_jax({"TPU_LIBRARY_PATH": path, "JAX_PLATFORMS": "tpu"})
    self.assertNotEqual(run.returncode, 0)
    self.assertIn("speaks PJRT C API 1.2", run.stderr)

  def test_another_plugin_the_fork_cannot_serve_is_an_error(self):
    """A plugin named in PJRT_NAMES_AND_LIBRARY_PATHS or registered by a
    jax_plugins module fails JAX's backend initialization, as upstream's
    (0.4.26 and 0.10.2) does for any plugin that fails to start, with
    JAX_PLATFORMS unset too; JAX_PLATFORMS=cpu leaves it out."""
    path = fake_plugin(1, 2)
    site = Path(self.create_tempdir().full_path)
    (site / "jax_plugins" / "fake_module").mkdir(parents=True)
    (site / "jax_plugins" / "fake_module" / "__init__.py").write_text(
        "from jax._src import xla_bridge\n"
        "def initialize():\n"
        f"  xla_bridge.register_plugin('fake_module', library_path={path!r})\n")
    pythonpath = f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    for name, env in (("fake_env", {"PJRT_NAMES_AND_LIBRARY_PATHS":
                                    f"fake_env:{path}"}),
                      ("fake_module", {"PYTHONPATH": pythonpath})):
      with self.subTest(name):
        run = self.run_jax({**env, "JAX_PLATFORMS": None})
        self.assertNotEqual(run.returncode, 0, run.stdout)
        self.assertRegex(run.stderr, f"RuntimeError: Unable to initialize "
                         f"backend '{name}': PJRT plugin '{name}'")
        for words in (path, "speaks PJRT C API 1.2",
                      "set JAX_PLATFORMS=cpu to skip this backend"):
          self.assertIn(words, run.stderr)
        run = self.run_jax({**env, "JAX_PLATFORMS": "cpu"})
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.strip(), "cpu")

  def test_libtpu_on_a_machine_without_a_tpu(self):
    """As today's JAX: the runtime is not sent to the cloud's metadata server
    for a TPU that is not there, and JAX_PLATFORMS is left to the user."""
    if xla_bridge.hardware_utils.num_available_tpu_chips_and_device_id()[0]:
      self.skipTest("this machine has a TPU")
    site = Path(self.create_tempdir().full_path)
    (site / "libtpu").mkdir()
    (site / "libtpu" / "__init__.py").write_text(
        f"def get_library_path():\n  return {fake_plugin(1, 2)!r}\n"
        "def configure_library_path():\n  pass\n")
    run = self.run_jax(
        {"PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
         "JAX_PLATFORMS": None, "TPU_SKIP_MDS_QUERY": None},
        "print(jax.devices()[0].platform, os.environ.get('TPU_SKIP_MDS_QUERY'),"
        " os.environ.get('JAX_PLATFORMS'))")
    self.assertEqual(run.returncode, 0, run.stderr)
    self.assertEqual(run.stdout.split(), ["cpu", "1", "None"])


class MosaicTest(jtu.JaxTestCase):
  """Pallas TPU kernels are written as a later runtime reads them."""

  def lowered(self, kernel, version):
    from jax._src import tpu_custom_call  # pylint: disable=g-import-not-at-top
    from jax._src.lib.mlir import ir  # pylint: disable=g-import-not-at-top
    from jax._src.pallas.mosaic import pallas_call_registration as reg  # pylint: disable=g-import-not-at-top
    from jaxlib.mlir.passmanager import PassManager  # pylint: disable=g-import-not-at-top
    captured = []
    def as_tpu_kernel(module, out_type, **_):
      captured.append(module)
      return lambda *a, **k: [jnp.zeros(t.shape, t.dtype) for t in out_type]
    with jtu.ignore_warning(), contextlib.ExitStack() as stack:
      stack.callback(setattr, reg.mosaic, "as_tpu_kernel",
                     reg.mosaic.as_tpu_kernel)
      reg.mosaic.as_tpu_kernel = as_tpu_kernel
      x = jnp.ones((128, 128), jnp.bfloat16)
      export.export(jax.jit(kernel), lowering_platforms=("tpu",))(x, x)
    (module,) = captured
    with module.context:
      module = ir.Module.parse(module.operation.get_asm(binary=True))
      module.context.allow_unregistered_dialects = True
      PassManager.parse("builtin.module(mosaic-serde{serialize=true})").run(
          module.operation)
      tpu_custom_call.upgrade_for_runtime(module, version)
      return str(module)

  def kernel(self, transpose_lhs):
    def body(x_ref, y_ref, o_ref, scratch, sem):
      copy = pltpu.make_async_copy(x_ref, scratch, sem)
      copy.start()
      copy.wait()
      dims = (((0,) if transpose_lhs else (1,), (0,)), ((), ()))
      o_ref[...] = lax.dot_general(scratch[...], y_ref[...], dims)
    return pl.pallas_call(
        body, out_shape=jax.ShapeDtypeStruct((128, 128), jnp.bfloat16),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=(),
            in_specs=[pl.BlockSpec(memory_space=pltpu.TPUMemorySpace.ANY),
                      pl.BlockSpec(memory_space=pltpu.TPUMemorySpace.VMEM)],
            out_specs=pl.BlockSpec(memory_space=pltpu.TPUMemorySpace.VMEM),
            scratch_shapes=[pltpu.VMEM((128, 128), jnp.bfloat16),
                            pltpu.SemaphoreType.DMA]))

  def test_wait_dma_from_0_68(self):
    new = self.lowered(self.kernel(False), (0, 112))
    self.assertNotIn('"stable_mosaic.tpu.wait_dma"', new)
    self.assertRegex(new, r'"stable_mosaic.tpu.wait_dma2"\((%\w+), (%\w+), '
                          r'\2\)')
    old = self.lowered(self.kernel(False), (0, 60))
    self.assertIn('"stable_mosaic.tpu.wait_dma"', old)
    self.assertNotIn("wait_dma2", old)

  def test_matmul_accumulates_in_f32_with_its_lhs_untransposed(self):
    for transpose_lhs in (False, True):
      with self.subTest(transpose_lhs=transpose_lhs):
        text = self.lowered(self.kernel(transpose_lhs), (0, 60))
        self.assertRegex(
            text, r'"stable_mosaic.tpu.matmul"\(.*\) \{transpose_lhs = false, '
                  r'transpose_rhs = false\} : \(vector<128x128xbf16>, '
                  r'vector<128x128xbf16>, vector<128x128xf32>\) -> '
                  r'vector<128x128xf32>')
        self.assertIn('"stable_mosaic.arith.truncf"', text)
        self.assertEqual('"stable_mosaic.vector.transpose"' in text,
                         transpose_lhs)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
