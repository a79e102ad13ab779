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
"""The refactored Pallas TPU pipeline emitter, in interpret mode on CPU
(patch 0015-pallas-tpu-refactored-pipeline-emitter.patch).

Data are small integers in float32, so every result is exact whatever the
order of summation, and is compared with NumPy exactly."""
from __future__ import annotations

import functools
from unittest import mock

from absl.testing import absltest
import pytest
from absl.testing import parameterized
import numpy as np

import jax
import jax.numpy as jnp
from jax._src import test_util as jtu
from jax.experimental import export
from jax.experimental import mosaic
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
import pallas_kernels

register = pallas_kernels.registrar(__name__)
ANY = pltpu.TPUMemorySpace.ANY
VMEM = pltpu.TPUMemorySpace.VMEM


def ints(seed, *shape):
  return np.random.RandomState(seed).randint(-3, 4, shape).astype(np.float32)


def outer_call(kernel, out_shape, *args, space=ANY, scratch_shapes=(),
               grid=(), input_output_aliases=None, interpret=True):
  """pallas_call of `kernel`, every operand whole in `space`."""
  spec = pl.BlockSpec(memory_space=space)
  n_out = len(out_shape) if isinstance(out_shape, (list, tuple)) else 1
  return pl.pallas_call(
      kernel, out_shape=out_shape, interpret=interpret,
      input_output_aliases=input_output_aliases or {},
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0, grid=grid, in_specs=[spec] * len(args),
          out_specs=[spec] * n_out if n_out > 1 else spec,
          scratch_shapes=scratch_shapes))(*args)


# The emitter copies the next block of an accumulator into the slot whose
# last block is still being copied out (upstream 0.4.28's schedule does the
# same): a race a TPU can lose, which `detect_races` reports
# (pallas_interpret_checks_test).
ACCUMULATOR_RACE = "copies into a slot still being copied out"


# Small integers in float32, dots included: every kernel's data are exact.
def _elementwise(shape, block, grid, index_map, spec_space, outer_space):
  def make(interpret):
    spec = pl.BlockSpec(index_map, block, memory_space=spec_space)
    def body(x_ref, o_ref):
      o_ref[...] = 2 * x_ref[...] + 1
    def kernel(x_ref, o_ref):
      pltpu.emit_pipeline(body, grid=grid, in_specs=[spec],
                          out_specs=spec)(x_ref, o_ref)
    return lambda x: outer_call(kernel, jax.ShapeDtypeStruct(
        shape, jnp.float32), x, space=outer_space, interpret=interpret)
  x = ints(0, *shape)
  return make, (x,), 2 * x + 1
ELEMENTWISE = [
    register(f"elementwise_{case}_{spaces}",
             *_elementwise(*shape_block_grid_map, *space_pair))
    for case, shape_block_grid_map in [
        # (x shape, block, grid, index map): out = 2 * x + 1, blockwise
        ("blocks", ((64, 256), (16, 128), (4, 2), lambda i, j: (i, j))),
        ("transposed", ((64, 256), (16, 128), (2, 4), lambda j, i: (i, j))),
        ("one_step", ((32, 128), (32, 128), (1, 1), lambda i, j: (i, j))),
        ("squeezed", ((8, 384), (None, 128), (8, 3), lambda i, j: (i, j))),
        ("rank3", ((6, 16, 128), (2, 8, 128), (3, 2, 1),
                   lambda i, j, k: (i, j, k)))]
    # (the pipeline's spec, the operands'): a VMEM spec needs VMEM operands
    for spaces, space_pair in [("any", (None, ANY)), ("vmem", (None, VMEM)),
                               ("vmem_specs", (VMEM, VMEM))]]


def _matmul(m, k, n, tm, tk, tn):
  # The output block stays the same along the last grid axis: it is copied
  # out only when it changes.
  def make(interpret):
    def body(x_ref, y_ref, z_ref):
      @pl.when(pl.program_id(2) == 0)
      def _():
        z_ref[...] = jnp.zeros(z_ref.shape, jnp.float32)
      z_ref[...] += jnp.dot(x_ref[...], y_ref[...])
    def kernel(x_ref, y_ref, z_ref):
      pltpu.emit_pipeline(
          body, grid=(m // tm, n // tn, k // tk),
          in_specs=[pl.BlockSpec(lambda i, j, l: (i, l), (tm, tk)),
                    pl.BlockSpec(lambda i, j, l: (l, j), (tk, tn))],
          out_specs=pl.BlockSpec(lambda i, j, l: (i, j), (tm, tn)),
      )(x_ref, y_ref, z_ref)
    return lambda x, y: outer_call(kernel, jax.ShapeDtypeStruct(
        (m, n), jnp.float32), x, y, interpret=interpret)
  x, y = ints(1, m, k), ints(2, k, n)
  return make, (x, y), x @ y
# A TPU refuses a DMA that starts a block at a column not a multiple of 128
# (tk = 32 below; InterpretParams() refuses it too).
MATMULS = [register(f"matmul_with_reduction_axis_{'_'.join(map(str, c))}",
                    *_matmul(*c), refused=pallas_kernels.DMA_WINDOW
                    if c[4] % 128 and c[4] != c[1] else None)
           for c in [(64, 96, 128, 16, 32, 128),  # (m, k, n, tm, tk, tn)
                     (32, 64, 256, 32, 64, 128),
                     (128, 128, 128, 128, 32, 128)]]


def _block_never_changes(interpret):
  def body(x_ref, b_ref, o_ref):
    o_ref[...] = x_ref[...] * b_ref[...]
  def kernel(x_ref, b_ref, o_ref):
    pltpu.emit_pipeline(
        body, grid=(8,),
        in_specs=[pl.BlockSpec(lambda i: (i, 0), (8, 128)),
                  pl.BlockSpec(lambda i: (0, 0), (8, 128))],
        out_specs=pl.BlockSpec(lambda i: (i, 0), (8, 128)),
    )(x_ref, b_ref, o_ref)
  return lambda x, b: outer_call(kernel, jax.ShapeDtypeStruct(
      x.shape, jnp.float32), x, b, interpret=interpret)
BLOCK_NEVER_CHANGES = register(
    "operand_whose_block_never_changes", _block_never_changes,
    (ints(3, 64, 128), ints(4, 8, 128)),
    ints(3, 64, 128) * np.tile(ints(4, 8, 128), (8, 1)))


def _accumulators(spec_space):
  # Like upstream's test_double_pipeline_matmul: the second pipeline adds its
  # result to what the first wrote; with init_accumulators it does not.
  def make(interpret):
    def body(x_ref, y_ref, z_ref):
      @pl.when(pl.program_id(2) == 0)
      def _():
        z_ref[...] = jnp.zeros(z_ref.shape, jnp.float32)
      z_ref[...] += jnp.dot(x_ref[...], y_ref[...])
    def pipeline(accumulate):
      return pltpu.emit_pipeline(
          body, grid=(2, 2, 2),
          in_specs=[pl.BlockSpec(lambda i, j, k: (i, k), (32, 32)),
                    pl.BlockSpec(lambda i, j, k: (k, j), (32, 64))],
          out_specs=pl.BlockSpec(lambda i, j, k: (i, j), (32, 64),
                                 memory_space=spec_space),
          should_accumulate_out=accumulate)
    def kernel(x_ref, y_ref, z_ref, z2_ref):
      pipeline(False)(x_ref, y_ref, z_ref)
      pipeline(True)(x_ref, y_ref, z_ref)
      z2_ref[...] = 7 * jnp.ones_like(z2_ref)
      pipeline(True)(x_ref, y_ref, z2_ref, init_accumulators=True)
    shape = jax.ShapeDtypeStruct((64, 128), jnp.float32)
    return lambda x, y: outer_call(kernel, (shape, shape), x, y, space=VMEM,
                                   interpret=interpret)
  x, y = ints(5, 64, 64), ints(6, 64, 128)
  return make, (x, y), (2 * (x @ y), x @ y)
ACCUMULATORS = [register(f"accumulators_{name}", *_accumulators(space),
                         refused=pallas_kernels.DMA_WINDOW)
                for name, space in [("hbm", None), ("vmem", VMEM)]]


def _nested(interpret):
  # An outer pipeline over row blocks in HBM; its body runs an inner one over
  # (8, 128) tiles of each VMEM block.
  tile = pl.BlockSpec(lambda i, j: (i, j), (8, 128))
  def inner_body(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * y_ref[...] - pl.program_id(1)
  def outer_body(x_ref, y_ref, o_ref):
    pltpu.emit_pipeline(inner_body, grid=(4, 2), in_specs=[tile, tile],
                        out_specs=tile)(x_ref, y_ref, o_ref)
  rows = pl.BlockSpec(lambda i: (i, 0), (32, 256))
  def kernel(x_ref, y_ref, o_ref):
    pltpu.emit_pipeline(outer_body, grid=(2,), in_specs=[rows, rows],
                        out_specs=rows)(x_ref, y_ref, o_ref)
  return lambda x, y: outer_call(kernel, jax.ShapeDtypeStruct(
      x.shape, jnp.float32), x, y, interpret=interpret)
NESTED = register(
    "nested_pipelines", _nested, (ints(7, 64, 256), ints(8, 64, 256)),
    ints(7, 64, 256) * ints(8, 64, 256) - np.repeat(np.arange(2), 128))

for _name in ["accumulator_across_cycles_with_the_fixed_schedule",
              "manual_schedule_that_skips_reading_the_accumulator"]:
  register(_name, excluded=f"a race a TPU can lose: the emitter "
           f"{ACCUMULATOR_RACE}")
register("lowering_matmul_with_accumulators", excluded="adds to its output's "
         "uninitialized content (a test of the lowering alone)")


class PipelineTest(jtu.JaxTestCase):

  @parameterized.named_parameters((k.name.split(".")[1], k) for k in
                                  ELEMENTWISE + MATMULS + ACCUMULATORS
                                  if not k.refused)
  def test_elementwise_matmuls_and_accumulators(self, kernel):
    kernel.check()

  @pytest.mark.interpret_true_only("of copies a TPU refuses")
  def test_matmuls_and_accumulators_with_unaligned_blocks(self):
    for kernel in MATMULS + ACCUMULATORS:
      if kernel.refused:
        with self.subTest(kernel.name):
          kernel.check()

  def test_operand_whose_block_never_changes(self):
    BLOCK_NEVER_CHANGES.check()

  def test_nested_pipelines(self):
    NESTED.check()


class CyclesAndSchedulesTest(jtu.JaxTestCase):
  """One pipeline run once per step of the outer grid, sharing allocations."""

  CHUNKS, ROWS = 3, 32
  spec = pl.BlockSpec(lambda i: (i, 0), (8, 128))

  def run_cycles(self, x, *, prefetch=True, accumulate=False, schedule=None,
                 out_init=None, init_accumulators=True, interpret=True):
    """out[c] = x[c] + 1; with `accumulate`, out = sum over c of x[c] + 1
    (plus `out_init`, the output's old content, unless `init_accumulators`
    zeroes the accumulator in the first cycle)."""
    pipeline, make_allocations = pltpu.emit_pipeline_with_allocations(
        lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + 1),
        grid=(self.ROWS // 8,), in_specs=[self.spec], out_specs=[self.spec],
        # One bool per output: jax 0.4.30's make_allocations broadcasts none.
        should_accumulate_out=(accumulate,))
    out_rows = self.ROWS if accumulate else self.CHUNKS * self.ROWS
    out_shape = jax.ShapeDtypeStruct((out_rows, 128), jnp.float32)
    args = (x,) if out_init is None else (x, out_init)
    def kernel(*refs):
      x_ref, o_ref, allocations = refs[0], refs[len(args)], refs[-2:]
      c = pl.program_id(0)
      rows = lambda c: pl.ds(c * self.ROWS, self.ROWS)
      dst = o_ref if accumulate else o_ref.at[rows(c)]
      def prefetch_next(x_bref, o_bref, scheduler):
        @pl.when(c + 1 < self.CHUNKS)
        def _():
          scheduler.prefetch(x_bref, x_ref.at[rows(c + 1)])
          if accumulate:
            scheduler.prefetch(o_bref, o_ref, schedule)
      pipeline(x_ref.at[rows(c)], dst, allocations=allocations,
               first_cycle=c == 0, last_cycle=c == self.CHUNKS - 1,
               init_accumulators=init_accumulators & (c == 0),
               prefetch=prefetch_next if prefetch else None,
               schedule=[None, schedule])
    allocs = make_allocations(jax.ShapeDtypeStruct(x.shape, jnp.float32),
                              out_shape)
    return outer_call(kernel, out_shape, *args, grid=(self.CHUNKS,),
                      scratch_shapes=list(allocs), interpret=interpret,
                      input_output_aliases={} if out_init is None else {1: 0})

  def test_cycles_carry_prefetches(self):
    CYCLES.check()

  def test_cycle_without_its_prefetch_is_an_error_not_a_hang(self):
    # Cycle 1 waits at its first step for the copy that only a prefetch in
    # cycle 0 would have started.
    x = ints(9, self.CHUNKS * self.ROWS, 128)
    with self.assertRaisesRegex(RuntimeError, "no device can proceed: device "
                                r"0 waits for 4096 bytes on DMA semaphore"):
      jax.block_until_ready(self.run_cycles(x, prefetch=False))

  @pytest.mark.interpret_true_only(ACCUMULATOR_RACE)
  def test_accumulator_across_cycles_with_the_fixed_schedule(self):
    self.check_fixed_schedule_accumulator(init=True)

  def check_fixed_schedule_accumulator(self, init):
    # The output Ref is the same in every cycle: the 'fixed' schedule.
    x = ints(10, self.CHUNKS * self.ROWS, 128)
    old = ints(13, self.ROWS, 128)
    out = self.run_cycles(x, accumulate=True, out_init=old,
                          init_accumulators=init,
                          schedule=pltpu.get_pipeline_schedule("fixed"))
    want = (x + 1).reshape(self.CHUNKS, self.ROWS, 128).sum(0)
    np.testing.assert_array_equal(out, want if init else want + old)

  def test_the_accumulator_race_is_reported(self):
    x = ints(10, self.CHUNKS * self.ROWS, 128)
    with self.assertWarnsRegex(
        pltpu.RaceWarning, r"race: a DMA into refs\[4\]\[<flat index 0>\]"
        r"\[1, 0:8, 0:128\] started at .* while a DMA started at .* reads "
        "it"):
      # jax 0.4.30's emit_pipeline closes over an array constant that its
      # Mosaic lowering cannot take (a TPU refuses the kernel): no checks.
      self.run_cycles(x, accumulate=True, out_init=ints(13, self.ROWS, 128),
                      schedule=pltpu.get_pipeline_schedule("fixed"),
                      interpret=pltpu.InterpretParams(
                          detect_races=True,
                          checks=jax.__version_info__ < (0, 4, 30)))

  @pytest.mark.interpret_true_only(ACCUMULATOR_RACE)
  def test_manual_schedule_that_skips_reading_the_accumulator(self):
    # Upstream's collective tests' tweak: an accumulator zeroed in the first
    # cycle need not be copied in then.
    schedule = pltpu.get_pipeline_schedule("fixed")
    for k in ["prologue_copy_in", "wait_in", "copy_in"]:
      schedule[k] = (lambda pred: lambda s, bref, ref: pred(s, bref, ref) &
                     ~s.first_cycle)(schedule[k])
    x = ints(11, self.CHUNKS * self.ROWS, 128)
    old = ints(14, self.ROWS, 128)
    out = self.run_cycles(x, accumulate=True, out_init=old, schedule=schedule)
    want = (x + 1).reshape(self.CHUNKS, self.ROWS, 128).sum(0)
    np.testing.assert_array_equal(out, want)

  def test_schedule_that_waits_for_no_copy_is_an_error(self):
    schedule = dict(pltpu.get_pipeline_schedule("default"),
                    wait_in=lambda s, bref, ref: True)
    b = ints(12, 8, 128)
    def kernel(b_ref, o_ref):
      pltpu.emit_pipeline(
          lambda b, o: o.__setitem__(..., b[...]), grid=(2,),
          in_specs=[pl.BlockSpec(lambda i: (0, 0), (8, 128))],
          out_specs=pl.BlockSpec(lambda i: (i, 0), (8, 128)),
      )(b_ref, o_ref, schedule=[schedule, None])
    with self.assertRaisesRegex(RuntimeError, "no device can proceed"):
      jax.block_until_ready(outer_call(
          kernel, jax.ShapeDtypeStruct((16, 128), jnp.float32), b))


CYCLES = register(
    "cycles_carry_prefetches", lambda interpret: functools.partial(
        CyclesAndSchedulesTest.run_cycles, CyclesAndSchedulesTest,
        interpret=interpret),
    (ints(9, 3 * 32, 128),), ints(9, 3 * 32, 128) + 1)
assert CyclesAndSchedulesTest.CHUNKS * CyclesAndSchedulesTest.ROWS == 3 * 32


class FixedScheduleWithoutInitTest(jtu.JaxTestCase):
  """Patch 0015's pipeline: an accumulator the first cycle does not
  initialize adds the output's old content. Its copies race
  (test_the_accumulator_race_is_reported); upstream's emit_pipeline, which
  supersedes 0015 (rebases/), adds a share of it that depends on them."""

  superseded_patch = "0015"
  CHUNKS, ROWS = CyclesAndSchedulesTest.CHUNKS, CyclesAndSchedulesTest.ROWS
  spec = CyclesAndSchedulesTest.spec
  run_cycles = CyclesAndSchedulesTest.run_cycles
  check_fixed_schedule_accumulator = (
      CyclesAndSchedulesTest.check_fixed_schedule_accumulator)

  @pytest.mark.interpret_true_only(ACCUMULATOR_RACE)
  def test_accumulator_across_cycles_without_init(self):
    self.check_fixed_schedule_accumulator(init=False)


class TpuLoweringTest(jtu.JaxTestCase):
  """On CPU, exporting for TPU runs Pallas's lowering of the kernel to a
  Mosaic module, which these tests take from `as_tpu_kernel` and check: it
  verifies and holds the DMAs, loops and matmuls of the pipeline."""

  def assert_lowers_to_mosaic(self, kernel, out_shape, *shapes, ops):
    modules = []
    as_tpu_kernel = mosaic.as_tpu_kernel
    def capture(module, *args, **kwargs):
      module.operation.verify()
      modules.append(module.operation.get_asm())
      return as_tpu_kernel(module, *args, **kwargs)
    call = lambda *args: outer_call(kernel, out_shape, *args, interpret=False)
    export_ = export.export(call, lowering_platforms=("tpu",))
    with mock.patch.object(mosaic, "as_tpu_kernel", capture):
      export_(*shapes)
    self.assertLen(modules, 1)
    for op in ops:
      self.assertIn(op, modules[0])

  def test_matmul_with_accumulators(self):
    def body(x_ref, y_ref, z_ref):
      z_ref[...] += jnp.dot(x_ref[...], y_ref[...])
    def kernel(x_ref, y_ref, z_ref):
      pltpu.emit_pipeline(
          body, grid=(4, 4, 4),
          in_specs=[pl.BlockSpec(lambda i, j, k: (i, k), (128, 128)),
                    pl.BlockSpec(lambda i, j, k: (k, j), (128, 128))],
          out_specs=pl.BlockSpec(lambda i, j, k: (i, j), (128, 128)),
          should_accumulate_out=True)(x_ref, y_ref, z_ref)
    shape = jax.ShapeDtypeStruct((512, 512), jnp.float32)
    self.assert_lowers_to_mosaic(
        kernel, shape, shape, shape,
        ops=["tpu.enqueue_dma", "tpu.wait_dma", "scf.for", "tpu.matmul"])

  def test_nested_pipelines_with_vmem_specs(self):
    tile = pl.BlockSpec(lambda i: (i, 0), (8, 128), memory_space=VMEM)
    def outer_body(x_ref, o_ref):
      pltpu.emit_pipeline(lambda x, o: o.__setitem__(..., x[...] + 1),
                          grid=(4,), in_specs=[tile], out_specs=tile)(
                              x_ref, o_ref)
    rows = pl.BlockSpec(lambda i: (i, 0), (32, 128))
    def kernel(x_ref, o_ref):
      pltpu.emit_pipeline(outer_body, grid=(4,), in_specs=[rows],
                          out_specs=rows)(x_ref, o_ref)
    shape = jax.ShapeDtypeStruct((128, 128), jnp.float32)
    self.assert_lowers_to_mosaic(kernel, shape, shape,
                                 ops=["tpu.enqueue_dma", "tpu.wait_dma"])


class ApiTest(jtu.JaxTestCase):

  def test_public_names(self):
    for name in ["emit_pipeline", "emit_pipeline_with_allocations",
                 "BufferedRef", "get_pipeline_schedule",
                 "make_pipeline_allocations"]:
      self.assertTrue(hasattr(pltpu, name), name)
    for name in ["PipelineCallbackArgs", "PipelinePrefetchArgs",
                 "ManualPrefetchArgs"]:
      self.assertFalse(hasattr(pltpu, name), name)

  def test_named_schedules(self):
    keys = {"prologue_copy_in", "wait_in", "copy_in", "prefetch", "wait_out",
            "copy_out", "epilogue_wait_out"}
    fixed = pltpu.get_pipeline_schedule("fixed")
    self.assertEqual(set(fixed), keys)
    self.assertEqual(set(pltpu.get_pipeline_schedule("default")), keys)
    fixed["wait_in"] = None   # a copy: the named schedule is unchanged
    self.assertIsNotNone(pltpu.get_pipeline_schedule("fixed")["wait_in"])
    custom = {}
    self.assertIs(pltpu.get_pipeline_schedule(custom), custom)
    if jax.__version_info__ >= (0, 4, 30):
      # Upstream's get_pipeline_schedule looks the name up in a dict.
      with self.assertRaisesRegex(KeyError, "'x'"):
        pltpu.get_pipeline_schedule("x")
      return
    with self.assertRaisesRegex(ValueError, "Unknown pipeline schedule 'x'"):
      pltpu.get_pipeline_schedule("x")

  def test_allocations(self):
    # The fork's make_pipeline_allocations on jax 0.4.26 broadcasts a bool
    # `should_accumulate_out` (default False) and takes a bare spec; jax
    # 0.4.30's own takes spec sequences and one bool per output spec.
    fork = jax.__version_info__ < (0, 4, 30)
    hbm = pl.BlockSpec(lambda i: (i, 0), (8, 128))
    vmem = pl.BlockSpec(lambda i: (i, 0), (None, 128), memory_space=VMEM)
    f32 = jax.ShapeDtypeStruct((64, 128), jnp.float32)
    i32 = jax.ShapeDtypeStruct((64, 128), jnp.int32)
    x, y, z = pltpu.make_pipeline_allocations(
        f32, i32, f32, in_specs=[hbm, vmem], out_specs=[hbm],
        should_accumulate_out=True if fork else (True,))
    self.assertTrue(x.is_input and not x.is_output)
    self.assertEqual(x.vmem_ref.shape, (2, 8, 128))
    self.assertEqual(x.sem_recv, pltpu.SemaphoreType.DMA)
    self.assertIsNone(x.sem_send)
    self.assertIsNone(y.vmem_ref)   # VMEM operands are used in place
    self.assertEqual(y.dtype, jnp.int32)
    self.assertTrue(z.is_accumulator and z.is_input and z.is_output)
    self.assertEqual(z.accum_ref.shape, (8, 128))
    if fork:
      _, make = pltpu.emit_pipeline_with_allocations(
          lambda *refs: None, grid=(8,), in_specs=hbm, out_specs=hbm)
    else:
      _, make = pltpu.emit_pipeline_with_allocations(
          lambda *refs: None, grid=(8,), in_specs=[hbm], out_specs=[hbm],
          should_accumulate_out=(False,))
    a, b = make(f32, f32)
    self.assertFalse(a.is_output)
    self.assertFalse(b.is_input)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
