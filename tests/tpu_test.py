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
"""The fork on a TPU; every test skips without one, but those of the
registry of Pallas test kernels (PallasKernelsTest) that need none.

On a TPU machine: `JAX_PLATFORMS=tpu,cpu python -m pytest tests/tpu_test.py`
(chipcheck/tpu_test.sh). A runtime newer than jaxlib 0.4.26's is served
through the PJRT adapter (jax._src.pjrt_adapter). Data are small integers (or
powers of 2), so that results are exact in any order of summation, and are
compared with NumPy or with the CPU backend.

The differential: every kernel of the fork's Pallas tests that a TPU can run
(tests/pallas_kernels.py) runs on the chip and, on the CPU, under
`interpret=True` and `pltpu.InterpretParams()`; the three agree with each
other and with NumPy, exactly where the data are exact. A kernel the chip
refuses, `InterpretParams()` refuses too. `JAX_FORK_TEST_KERNELS=REGEX`
takes only the registered kernels whose names it matches (`re.search`),
e.g. `^pallas_tpu_lowering[.]`.
"""
from __future__ import annotations

import collections
import contextlib
import io
import os
import re
import tempfile
import time
import traceback
import unittest.mock

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax._src import pjrt_adapter
from jax._src import test_util as jtu
from jax.experimental import export
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
import pallas_kernels

jax.config.parse_flags_with_absl()

ANY = pltpu.TPUMemorySpace.ANY
VMEM = pltpu.TPUMemorySpace.VMEM


def ints(seed, *shape, dtype=np.float32):
  return np.random.RandomState(seed).randint(-3, 4, shape).astype(dtype)


def on_cpu(kernel: pallas_kernels.Kernel, interpret):
  """The kernel's output in interpret mode on the CPU backend."""
  with jax.default_device(jax.devices("cpu")[0]):
    return kernel.run(interpret)


def presets(kernel: pallas_kernels.Kernel):
  """(name, interpret) of both interpret presets, for this kernel."""
  return [("interpret=True", True),
          ("InterpretParams()", pltpu.InterpretParams(**kernel.params))]


def words(e: BaseException) -> str:
  """An exception's type and first line, and its causes'."""
  lines = []
  while e is not None:
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    lines.append(text.splitlines()[0][:300] if text else type(e).__name__)
    e = e.__cause__
  return " <- ".join(lines)


def selected() -> list[pallas_kernels.Kernel]:
  pattern = os.environ.get("JAX_FORK_TEST_KERNELS", "")
  return [k for k in pallas_kernels.registry() if re.search(pattern, k.name)]


def runnable() -> list[pallas_kernels.Kernel]:
  return [k for k in selected() if not k.excluded]


def counts_line(kernels, **counts) -> str:
  excluded = [k for k in selected() if k.excluded]
  return (f"{len(kernels) + len(excluded)} kernels registered: "
          f"{len(excluded)} excluded, {len(kernels)} run "
          f"({sum(k.exact for k in kernels)} exact, "
          f"{sum(not k.exact for k in kernels)} to a tolerance, "
          f"{sum(bool(k.refused) for k in kernels)} refused by "
          "InterpretParams(), "
          f"{sum(bool(k.split) for k in kernels)} not lowered on a CPU host, "
          f"{sum(bool(k.rule) for k in kernels)} twins of a rule); " +
          ", ".join(f"{n.replace('_', ' ')} {v}" for n, v in counts.items()))


class TpuTest(jtu.JaxTestCase):

  def setUp(self):
    super().setUp()
    if jax.default_backend() != "tpu":
      self.skipTest("needs a TPU (and JAX_PLATFORMS naming tpu)")  # conftest

  def test_the_runtime(self):
    client = jax.devices()[0].client
    version = pjrt_adapter.plugin_version(client)
    print(f"\n{jax.devices()[0].device_kind}: {client.platform_version}; "
          f"PJRT C API {version or (0, 47)}"
          f"{' through the adapter' if version else ''}")
    self.assertTrue(jax.devices()[0].device_kind.startswith("TPU v"))

  def test_xla_programs(self):
    x = ints(0, 256, 512)
    y = ints(1, 512, 128)
    np.testing.assert_array_equal(
        jnp.dot(x.astype(jnp.bfloat16), y.astype(jnp.bfloat16),
                preferred_element_type=jnp.float32), x @ y)
    np.testing.assert_array_equal(jax.jit(lambda x: x[..., 3, ::2])(
        x.reshape(16, 16, 512)), x.reshape(16, 16, 512)[..., 3, ::2])
    bits = lambda s: jax.random.bits(jax.random.key(s), (64,))
    np.testing.assert_array_equal(
        jax.jit(bits)(np.uint32(7)),
        jax.jit(bits)(jax.device_put(np.uint32(7), jax.devices("cpu")[0])))

  def test_reduce_window_ad(self):   # patches 0002, 0016, 0003
    x = 2.0 ** np.random.RandomState(2).randint(-2, 3, (16, 16))
    def f(x):
      return lax.reduce_window(x, 1., lax.mul, (3, 3), (1, 1), "SAME").sum()
    x = x.astype(np.float32)
    np.testing.assert_array_equal(
        jax.grad(f)(x),
        jax.jit(jax.grad(f))(jax.device_put(x, jax.devices("cpu")[0])))

  def test_host_callbacks(self):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      jax.jit(lambda x: jax.debug.print("x={x}", x=x))(jnp.arange(3))
      jax.effects_barrier()
    self.assertEqual(out.getvalue(), "x=[0 1 2]\n")
    y = jax.jit(lambda x: jax.pure_callback(np.sin, x, x))(
        jnp.linspace(0, 1, 8))
    np.testing.assert_allclose(y, np.sin(np.linspace(0, 1, 8)), rtol=1e-6)

  def test_pallas_dma_and_dots(self):
    """A DMA and its wait; dots whose output is bf16 and whose lhs is
    contracted on its first dimension (forms a later Mosaic reads only as
    the adapter rewrites them)."""
    x = ints(3, 128, 128)
    y = ints(4, 128, 256)
    for transpose_lhs in (False, True):
      for dtype in (jnp.float32, jnp.bfloat16):
        def kernel(x_ref, y_ref, o_ref, scratch, sem):
          copy = pltpu.make_async_copy(x_ref, scratch, sem)
          copy.start()
          copy.wait()
          dims = (((0,) if transpose_lhs else (1,), (0,)), ((), ()))
          o_ref[...] = lax.dot_general(scratch[...], y_ref[...], dims)
        f = pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((128, 256), dtype),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=0, grid=(),
                in_specs=[pl.BlockSpec(memory_space=ANY),
                          pl.BlockSpec(memory_space=VMEM)],
                out_specs=pl.BlockSpec(memory_space=VMEM),
                scratch_shapes=[pltpu.VMEM((128, 128), dtype),
                                pltpu.SemaphoreType.DMA]))
        with self.subTest(transpose_lhs=transpose_lhs, dtype=dtype.__name__):
          out = f(x.astype(dtype), y.astype(dtype))
          np.testing.assert_array_equal(
              out.astype(np.float32), (x.T if transpose_lhs else x) @ y)

  def test_emit_pipeline_matmul(self):   # patch 0015, on the chip
    m, k, n, tm, tk, tn = 512, 1024, 512, 128, 256, 128
    for dtype in (jnp.float32, jnp.bfloat16):
      x, y = ints(5, m, k), ints(6, k, n)
      def body(x_ref, y_ref, z_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
          z_ref[...] = jnp.zeros(z_ref.shape, jnp.float32)
        z_ref[...] += jnp.dot(x_ref[...], y_ref[...],
                              preferred_element_type=jnp.float32)
      def kernel(x_ref, y_ref, z_ref):
        pltpu.emit_pipeline(
            body, grid=(m // tm, n // tn, k // tk),
            in_specs=[pl.BlockSpec(lambda i, j, l: (i, l), (tm, tk)),
                      pl.BlockSpec(lambda i, j, l: (l, j), (tk, tn))],
            out_specs=pl.BlockSpec(lambda i, j, l: (i, j), (tm, tn)),
        )(x_ref, y_ref, z_ref)
      spec = pl.BlockSpec(memory_space=ANY)
      out = pl.pallas_call(
          kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
          in_specs=[spec, spec], out_specs=spec)(x.astype(dtype),
                                                 y.astype(dtype))
      with self.subTest(dtype=dtype.__name__):
        np.testing.assert_array_equal(out, x @ y)

  def test_flash_attention_of_jax_0_4_26(self):
    from jax.experimental.pallas.ops.tpu import flash_attention as fa  # pylint: disable=g-import-not-at-top
    shape = (2, 2, 256, 128)
    q, k, v = (jax.random.normal(jax.random.key(i), shape, jnp.float32)
               for i in range(3))
    def both(attention):   # its output and its gradient with respect to q
      return (attention(q, k, v, causal=True),
              jax.grad(lambda q: attention(q, k, v).sum())(q))
    reference = lambda *a, **kw: fa.mha_reference(*a, None, **kw)
    kernel = both(fa.flash_attention)
    xla = both(reference)   # XLA's, at the TPU's default precision
    with jax.default_matmul_precision("float32"):
      exact = both(reference)
    # The dots take bf16 passes in both: the kernel errs as XLA does.
    error = lambda got, want: np.linalg.norm(got - want) / np.linalg.norm(want)
    for got, ref, want in zip(kernel, xla, exact):
      self.assertLess(error(got, want), 2 * error(ref, want) + 1e-3)

  def test_interpret_mode_gives_the_chips_answers(self):   # patch 0014
    """Kernels the chip runs give its answers in interpret mode on the CPU
    (both presets), and a block shape the chip refuses is refused there."""
    from jax.experimental.pallas.ops.tpu.paged_attention import (  # pylint: disable=g-import-not-at-top
        paged_attention)
    batch, heads, head_dim, page_size, pages = 2, 2, 128, 16, 4
    args = (ints(3, batch, heads, head_dim) / 4,
            ints(4, heads, batch * pages, page_size, head_dim) / 4,
            ints(5, heads, batch * pages, page_size, head_dim),
            np.array([40, 64], np.int32),
            np.arange(batch * pages, dtype=np.int32).reshape(batch, pages))
    attention = lambda *a: paged_attention(*a, pages_per_compute_block=2)
    def matmul(x, y):   # a parallel grid and a VMEM accumulator
      def kernel(x_ref, y_ref, o_ref, acc):
        @pl.when(pl.program_id(2) == 0)
        def _():
          acc[...] = jnp.zeros(acc.shape, jnp.float32)
        acc[...] += jnp.dot(x_ref[...], y_ref[...],
                            preferred_element_type=jnp.float32)
        o_ref[...] = acc[...]
      return pl.pallas_call(
          kernel, out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32),
          grid_spec=pltpu.PrefetchScalarGridSpec(
              num_scalar_prefetch=0, grid=(2, 2, 4),
              in_specs=[pl.BlockSpec(lambda i, j, k: (i, k), (128, 128)),
                        pl.BlockSpec(lambda i, j, k: (k, j), (128, 128))],
              out_specs=pl.BlockSpec(lambda i, j, k: (i, j), (128, 128)),
              scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)]),
          compiler_params=dict(mosaic=dict(dimension_semantics=(
              "parallel", "parallel", "arbitrary"))))(x, y)
    def narrow_blocks(x):   # (128, 64) float32 blocks: not TPU tiles
      spec = pl.BlockSpec(lambda i: (0, i), (128, 64))
      return pl.pallas_call(
          lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + 1),
          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
          in_specs=[spec], out_specs=spec)(x)
    x, y = ints(6, 256, 512), ints(7, 512, 256)
    chip = attention(*args), matmul(x, y)
    self.assertRaises(Exception, jax.jit(narrow_blocks), x[:128, :128])
    call = pl.pallas_call
    for interpret in (True, pltpu.InterpretParams()):
      jax.clear_caches()  # paged_attention is jitted
      with contextlib.ExitStack() as stack:
        stack.enter_context(self.subTest(interpret=interpret))
        stack.enter_context(jax.default_device(jax.devices("cpu")[0]))
        stack.enter_context(unittest.mock.patch.object(
            pl, "pallas_call",
            lambda *a, **k: call(*a, **{**k, "interpret": interpret})))
        out = matmul(x, y)
        np.testing.assert_array_equal(out, chip[1])
        np.testing.assert_array_equal(out, x @ y)
        if interpret is True:
          # InterpretParams() fails 0.4.26's kernel: it reads lengths_ref out
          # of bounds. The chip's dots take bf16 passes: the weights round.
          got, want = np.asarray(attention(*args)), np.asarray(chip[0])
          self.assertLess(np.linalg.norm(got - want) / np.linalg.norm(want),
                          1e-2)
        else:
          with self.assertRaisesRegex(ValueError, "not divisible by tiling"):
            narrow_blocks(x[:128, :128])

  def test_pallas_kernels_on_the_chip(self):   # tests/pallas_kernels.py
    """Each kernel the fork's Pallas tests run, on the chip and under both
    interpret presets on the CPU: the same answers (exact where the data
    are), NumPy's; a kernel the chip refuses, InterpretParams() refuses."""
    self.differential([k for k in runnable() if not k.rule])

  def test_mosaic_rules_on_the_chip(self):   # tests/pallas_kernels.py
    """The twins of InterpretParams()' rules of what Mosaic refuses (each
    kernel with a `rule`): the chip's verdict is InterpretParams()'."""
    self.differential([k for k in runnable() if k.rule])

  def differential(self, kernels):
    results = collections.Counter()
    failures = []
    start = time.time()
    for kernel in kernels:
      try:
        chip, chip_error = kernel.run(False), None
      except Exception as e:  # pylint: disable=broad-except
        chip, chip_error = None, e
      problems = []
      tol = kernel.chip_tol or kernel.tol
      if chip_error is not None:
        try:
          on_cpu(kernel, pltpu.InterpretParams(**kernel.params))
          if kernel.split:   # known: issue 48
            results["refused_by_the_chip_alone_as_known"] += 1
            print(f"split {kernel.name}: chip: {words(chip_error)}")
          else:
            problems.append(f"the chip refuses ({words(chip_error)}); "
                            "InterpretParams() runs it")
        except Exception as e:  # pylint: disable=broad-except
          results["refused_by_both"] += 1
          print(f"refused by both {kernel.name}: chip: {words(chip_error)}; "
                f"InterpretParams(): {words(e)}")
      else:
        results["ran_on_the_chip"] += 1
        if kernel.refused:
          try:
            on_cpu(kernel, pltpu.InterpretParams(**kernel.params))
            refusal = "(not now)"
          except Exception as e:  # pylint: disable=broad-except
            refusal = f"({words(e)})"
          problems.append(
              f"the chip runs it; InterpretParams() refuses it {refusal}")
        for check, got in [("NumPy", kernel.want)] + [
            (name, lambda interpret=interpret: on_cpu(kernel, interpret))
            for name, interpret in presets(kernel)
            if not (kernel.refused and interpret is not True)]:
          try:
            got = got() if callable(got) else got
            kernel.assert_close(chip, got, tol)
          except Exception as e:  # pylint: disable=broad-except
            problems.append(f"{check} differs: {str(e).strip()[:600]}")
        if not problems:
          results["agreed_exactly" if kernel.exact else
                  "agreed_to_a_tolerance"] += 1
          if kernel.split:
            print(f"note {kernel.name}: runs on the chip, though Pallas's "
                  "lowering refuses it on a CPU host")
      for p in problems:
        failures.append(f"{kernel.name}: {p}")
      print(f"FAIL {kernel.name}: {' | '.join(problems)}" if problems else
            f"ok   {kernel.name}")
    print(counts_line(kernels, **results, disagreed=len(
        {f.split(":")[0] for f in failures})) +
          f"; {time.time() - start:.0f} s")
    self.assertEqual(failures, [])

  def test_profiler_sees_the_device(self):
    with tempfile.TemporaryDirectory() as d:
      with jax.profiler.trace(d):
        jax.block_until_ready(jnp.ones((256, 256)) @ jnp.ones((256, 256)))
      files = [f for _, _, fs in os.walk(d) for f in fs]
      self.assertTrue(any(f.endswith(".xplane.pb") for f in files), files)


# One test per kernel (each within CI's time limit, spread over xdist's
# workers): (name, kernel) of runnable().
KERNELS = [(k.name.replace(".", "_"), k) for k in runnable()]


class PallasKernelsTest(jtu.JaxTestCase):
  """The registry of the fork's Pallas test kernels, without a TPU: what
  TpuTest.test_pallas_kernels_on_the_chip runs, less the chip."""

  def test_the_registry(self):
    kernels = pallas_kernels.registry()
    for kernel in kernels:
      self.assertTrue(kernel.excluded or kernel.make, kernel.name)
      self.assertFalse(kernel.refused and kernel.excluded, kernel.name)
    by_file = collections.Counter(k.name.split(".")[0] for k in kernels
                                  if not k.excluded)
    self.assertEqual(set(by_file) | {"pallas_interpret_devices"}, {
        m.removesuffix("_test") for m in pallas_kernels.MODULES})
    self.assertEqual(len({k.name for k in kernels}), len(kernels))
    print(counts_line(runnable()))

  @parameterized.named_parameters(KERNELS)
  def test_both_presets_agree_with_numpy(self, kernel):
    if jax.default_backend() == "tpu":
      self.skipTest("on a TPU, test_pallas_kernels_on_the_chip runs these")
    outputs = {}
    for name, interpret in presets(kernel):
      if kernel.refused and interpret is not True:
        with self.assertRaisesRegex(Exception, kernel.refused):
          on_cpu(kernel, interpret)
        continue
      outputs[name] = on_cpu(kernel, interpret)
      kernel.assert_close(outputs[name], kernel.want)
    if len(outputs) == 2:
      kernel.assert_close(*outputs.values())

  @parameterized.named_parameters(
      (name, kernel) for name, kernel in KERNELS if not kernel.refused)
  def test_kernels_lower_for_a_tpu(self, kernel):
    """Pallas's lowering to Mosaic, for a TPU, on this host (what Mosaic
    then refuses, only a chip tells: the block shapes of `refused`)."""
    if jax.default_backend() == "tpu":
      self.skipTest("on a TPU, test_pallas_kernels_on_the_chip compiles them")
    shapes = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype)
              for a in kernel.args]
    lower = lambda: export.export(kernel.make(False), lowering_platforms=(
        "tpu",))(*shapes)
    if kernel.split:
      # Refused in the known words. (Kernels without inputs fail only in
      # some processes: their custom call's module, with result layouts
      # and no operand layouts, is refused when StableHLO verifies it.)
      try:
        lower()
        print(f"{kernel.name} lowers here: drop its `split` if it does "
              "in every process")
      except Exception as e:  # pylint: disable=broad-except
        self.assertRegex(words(e), kernel.split)
    else:
      self.assertIn("tpu_custom_call", lower().mlir_module())


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
