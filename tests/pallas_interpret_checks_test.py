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
"""`pltpu.InterpretParams`: each check catches a kernel with the TPU bug it is
for, and passes the corrected kernel (under `detect_races=True` too), whose
result is compared with NumPy (`jax/_src/pallas/mosaic/interpret.py`)."""
from __future__ import annotations

import functools
import tracemalloc
import warnings

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
import pytest

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import test_util as jtu
from jax.experimental import export
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ANY = pltpu.TPUMemorySpace.ANY
VMEM = pltpu.TPUMemorySpace.VMEM
SMEM = pltpu.TPUMemorySpace.SMEM
DMA = pltpu.SemaphoreType.DMA
REGULAR = pltpu.SemaphoreType.REGULAR
PARAMS = pltpu.InterpretParams()
RACES = pltpu.InterpretParams(detect_races=True)
X = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
HERE = __file__.rsplit("/", 1)[-1]


def call(kernel, *args, out_shape=None, interpret=PARAMS, grid=(),
         in_specs=None, out_specs=None, scratch_shapes=(), **kwargs):
  """pallas_call of `kernel` on `args`, its output shaped like X."""
  return pl.pallas_call(
      kernel, out_shape=out_shape or jax.ShapeDtypeStruct(X.shape, X.dtype),
      interpret=interpret, grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0, grid=grid,
          in_specs=in_specs or [pl.no_block_spec] * len(args),
          out_specs=out_specs or pl.no_block_spec,
          scratch_shapes=scratch_shapes), **kwargs)(*args)


def copy_in(kernel_body):
  """A kernel copying its ANY input into a VMEM scratch buffer with a DMA."""
  return lambda *args, **kwargs: call(
      kernel_body, X, in_specs=[pl.BlockSpec(memory_space=ANY)],
      scratch_shapes=[VMEM(X.shape, jnp.float32), DMA((2,))], **kwargs)


def quiet(f, *args, **kwargs):
  """f's result; a warning of interpret mode fails the test."""
  with warnings.catch_warnings():
    warnings.simplefilter("error", pltpu.InterpretWarning)
    return np.asarray(f(*args, **kwargs))


class ParamsTest(jtu.JaxTestCase):

  def test_upstream_defaults(self):
    p = pltpu.InterpretParams()
    self.assertEqual(
        (p.detect_races, p.out_of_bounds_reads, p.uninitialized_memory,
         p.dma_execution_mode, p.random_seed, p.grid_point_recorder,
         p.allow_hbm_allocation_in_run_scoped),
        (False, "raise", "nan", "on_wait", None, None, False))

  @parameterized.parameters(
      dict(skip_floating_point_ops=True), dict(buffer_bounds="padded"),
      dict(logging_mode=1))
  def test_what_is_not_modelled_is_refused_by_name(self, **field):
    [name] = field
    with self.assertRaisesRegex(NotImplementedError, f"InterpretParams.{name}="):
      pltpu.InterpretParams(**field)

  def test_bad_values(self):
    with self.assertRaisesRegex(ValueError, "dma_execution_mode='later': must "
                                "be one of"):
      pltpu.InterpretParams(dma_execution_mode="later")
    with self.assertRaisesRegex(ValueError, "vector_clock_size"):
      pltpu.InterpretParams(vector_clock_size=0)


class BoundsTest(jtu.JaxTestCase):

  @pytest.mark.interpret_true_only("compares with interpret=True")
  def test_read_past_the_end_of_a_block(self):
    def kernel(x_ref, o_ref):   # rows 8 + i .. 23 + i of a 16-row block
      o_ref[...] = x_ref[pl.ds(8 + pl.program_id(0), 16), :]
    specs = dict(grid=(1,), in_specs=[pl.BlockSpec(lambda i: (0, 0), X.shape)],
                 out_specs=pl.BlockSpec(lambda i: (0, 0), X.shape))
    with self.assertRaisesRegex(
        IndexError, r"Pallas kernel 'kernel': out-of-bounds read of "
        rf"x_ref\[8:24, 0:128\] at .*{HERE}:\d+(:\d+)? \(.*kernel\): the buffer "
        r"has shape \(16, 128\)"):
      call(kernel, X, **specs)
    out = call(kernel, X, **specs, interpret=pltpu.InterpretParams(
        out_of_bounds_reads="uninitialized"))
    np.testing.assert_array_equal(out[:8], X[8:])
    self.assertTrue(np.isnan(out[8:]).all())
    # interpret=True is jax 0.4.26's: the slice is moved inside the block.
    np.testing.assert_array_equal(call(kernel, X, **specs, interpret=True), X)
    def fixed(x_ref, o_ref):
      o_ref[:8] = x_ref[pl.ds(8 + pl.program_id(0), 8), :]
      o_ref[8:] = x_ref[:8]
    np.testing.assert_array_equal(quiet(call, fixed, X, **specs,
                                        interpret=RACES),
                                  np.roll(X, 8, axis=0))

  def test_write_past_the_end(self):
    def kernel(x_ref, o_ref):
      o_ref[...] = x_ref[...]
      o_ref[pl.ds(12 + pl.program_id(0), 8), :] = x_ref[:8]
    whole = pl.BlockSpec(lambda i: (0, 0), X.shape)
    with self.assertRaisesRegex(IndexError, r"out-of-bounds write of "
                                r"o_ref\[12:20, 0:128\]"):
      call(kernel, X, grid=(1,), in_specs=[whole], out_specs=whole)

  def test_dma_source_and_destination_through_chained_indexers(self):
    def kernel(x_hbm, o_ref, buf, sems, *, row):
      src = x_hbm.at[pl.ds(row + pl.program_id(0), 8)].at[pl.ds(0, 4)]
      pltpu.async_copy(src, buf.at[pl.ds(0, 4)], sems.at[0]).wait()
      pltpu.async_copy(src, buf.at[pl.ds(14 + pl.program_id(0), 4)],
                       sems.at[1]).wait()
      o_ref[...] = buf[...]
    whole = pl.BlockSpec(lambda i: (0, 0), X.shape)
    with self.assertRaisesRegex(IndexError, r"out-of-bounds DMA read of "
                                r"x_hbm\[14:22, 0:128\]\[0:4, 0:128\]"):
      copy_in(functools.partial(kernel, row=14))(grid=(1,), out_specs=whole)
    with self.assertRaisesRegex(IndexError, r"out-of-bounds DMA write of "
                                r"buf\[14:18, 0:128\].*shape \(16, 128\)"):
      copy_in(functools.partial(kernel, row=0))(grid=(1,), out_specs=whole)


class UninitializedMemoryTest(jtu.JaxTestCase):

  def accumulate(self, init, interpret):
    def kernel(x_ref, o_ref):
      if init:
        @pl.when(pl.program_id(0) == 0)
        def _():
          o_ref[...] = jnp.zeros_like(o_ref)
      o_ref[...] += x_ref[...]
    return call(kernel, X.reshape(2, 8, 128), grid=(2,), interpret=interpret,
                out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                in_specs=[pl.BlockSpec(lambda i: (i, 0, 0), (None, 8, 128))],
                out_specs=pl.BlockSpec(lambda i: (0, 0), (8, 128)))

  @pytest.mark.interpret_true_only("compares with interpret=True")
  def test_output_accumulated_without_being_initialized(self):
    self.assertTrue(np.isnan(self.accumulate(False, PARAMS)).all())
    np.testing.assert_array_equal(    # jax 0.4.26's: zeros
        self.accumulate(False, True), X[:8] + X[8:])
    np.testing.assert_array_equal(quiet(self.accumulate, True, RACES),
                                  X[:8] + X[8:])

  @parameterized.parameters(("nan", np.nan, 32767), ("zero", 0, 0))
  def test_outputs_scratch_and_scoped_buffers(self, mode, floats, ints):
    def kernel(f_ref, i_ref, s_ref, t_ref):
      t_ref[...] = f_ref[...] * 0 + s_ref[...]   # s_ref: read unwritten
      pltpu.run_scoped(lambda r: i_ref.__setitem__(..., i_ref[...] + r[...]
                                                   - i_ref[...]),
                       VMEM((8, 128), jnp.int16))
    f, i, t = call(
        kernel, interpret=pltpu.InterpretParams(uninitialized_memory=mode),
        out_shape=[jax.ShapeDtypeStruct((8, 128), jnp.float32),
                   jax.ShapeDtypeStruct((8, 128), jnp.int16),
                   jax.ShapeDtypeStruct((8, 128), jnp.float32)],
        out_specs=[pl.no_block_spec] * 3,
        scratch_shapes=[VMEM((8, 128), jnp.float32)])
    np.testing.assert_array_equal(f, np.full((8, 128), floats, np.float32))
    np.testing.assert_array_equal(t, np.full((8, 128), floats, np.float32))
    np.testing.assert_array_equal(i, np.full((8, 128), ints, np.int16))


class DmaTimingTest(jtu.JaxTestCase):
  """A DMA's destination is written when a wait takes its bytes (`on_wait`)
  or when it starts (`eager`)."""

  def read_before_wait(self, buf_init):
    def kernel(x_hbm, o_ref, buf, sems):
      buf[...] = jnp.full(buf.shape, buf_init, jnp.float32)
      copy = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
      copy.start()
      o_ref[...] = buf[...]    # the bug: before the wait
      copy.wait()
    return kernel

  @parameterized.parameters("on_wait", "eager")
  def test_read_before_the_wait(self, mode):
    out = copy_in(self.read_before_wait(-1.))(
        interpret=pltpu.InterpretParams(dma_execution_mode=mode))
    np.testing.assert_array_equal(out, np.full_like(X, -1.) if mode ==
                                  "on_wait" else X)

  def test_what_a_wait_names_is_not_where_the_copy_lands(self):
    # The copy lands in its own destination, `buf`, whatever the wait names.
    def kernel(x_hbm, o_ref, buf, sems):
      pltpu.make_async_copy(x_hbm, buf, sems.at[0]).start()
      pltpu.make_async_copy(x_hbm, o_ref, sems.at[0]).wait()
      o_ref[...] = buf[...] * 2
    for interpret in (PARAMS, pltpu.InterpretParams(dma_execution_mode="eager"),
                      True):
      np.testing.assert_array_equal(
          copy_in(kernel)(interpret=interpret), X * 2)


class RaceTest(jtu.JaxTestCase):

  def races(self, f, *args, **kwargs) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      f(*args, **kwargs)
    return [str(w.message) for w in caught
            if issubclass(w.category, pltpu.RaceWarning)]

  @parameterized.parameters("on_wait", "eager")
  def test_read_of_a_dma_destination_before_its_wait(self, mode):
    params = pltpu.InterpretParams(detect_races=True, dma_execution_mode=mode)
    [race] = self.races(copy_in(DmaTimingTest().read_before_wait(0.)),
                        interpret=params)
    self.assertRegex(race, rf"race: a read of buf\[0:16, 0:128\] at .*{HERE}:"
                     rf"\d+(:\d+)? .* while a DMA into buf started at .*{HERE}:"
                     r"\d+(:\d+)? .* is in flight")
    with self.assertWarns(pltpu.RaceWarning):
      copy_in(DmaTimingTest().read_before_wait(0.))(interpret=params)

  def test_two_dmas_in_flight_into_one_buffer(self):
    def kernel(x_hbm, o_ref, buf, sems, *, fixed):
      first = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
      first.start()
      if fixed:
        first.wait()
      pltpu.make_async_copy(x_hbm, buf, sems.at[1]).start()
      if not fixed:
        first.wait()
      pltpu.make_async_copy(x_hbm, buf, sems.at[1]).wait()
      o_ref[...] = buf[...]
    [race] = self.races(copy_in(functools.partial(kernel, fixed=False)),
                        interpret=RACES)
    self.assertIn("while another DMA into it, started at", race)
    np.testing.assert_array_equal(
        quiet(copy_in(functools.partial(kernel, fixed=True)), interpret=RACES), X)

  def test_a_dma_source_written_while_in_flight(self):
    def kernel(x_hbm, o_ref, buf, sems, *, fixed):
      buf[...] = jnp.ones_like(buf)
      copy = pltpu.make_async_copy(buf, o_ref, sems.at[0])
      copy.start()
      if fixed:
        copy.wait()
      buf[...] = jnp.zeros_like(buf)
      if not fixed:
        copy.wait()
    out_any = dict(out_specs=pl.BlockSpec(memory_space=ANY))
    [race] = self.races(copy_in(functools.partial(kernel, fixed=False)),
                        interpret=RACES, **out_any)
    self.assertRegex(race, r"a write of buf\[0:16, 0:128\] .* while a DMA "
                     "from buf started at .* reads it")
    np.testing.assert_array_equal(quiet(copy_in(
        functools.partial(kernel, fixed=True)), interpret=RACES, **out_any),
                                  np.ones_like(X))

  def test_correct_double_buffering_has_no_race(self):
    def kernel(x_hbm, o_ref, buf, sems):
      rows = lambda i: pl.ds(i * 4, 4)
      copies = [pltpu.make_async_copy(x_hbm.at[rows(i)], buf.at[rows(i)],
                                      sems.at[i % 2]) for i in range(4)]
      copies[0].start()
      for i in range(4):
        if i + 1 < 4:
          copies[i + 1].start()
        copies[i].wait()
        o_ref[rows(i)] = buf[rows(i)] + 1
    np.testing.assert_array_equal(quiet(copy_in(kernel), interpret=RACES),
                                  X + 1)

  # Neither the race detector's records nor the copies that land move or
  # shadow a whole buffer: copies to static offsets (two starts) or dynamic
  # ones (one in a loop).
  @parameterized.parameters(False, True)
  def test_memory_grows_with_the_regions_accessed_not_the_buffer(self, loop):
    n = 1 << 16  # rows: a 32 MiB output, of which the kernel writes 16 rows
    def kernel(x_hbm, o_hbm, sem):
      def body(i, carry):
        copy = pltpu.make_async_copy(x_hbm, o_hbm.at[pl.ds(i * 8, 8)], sem)
        copy.start()
        copy.wait()
        return carry
      if loop:
        lax.fori_loop(0, 2, body, None)
      else:
        body(0, body(1, None))
    x = X[:8]
    f = jax.jit(lambda: pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((n, 128), jnp.float32),
        interpret=RACES, grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, in_specs=[pl.BlockSpec(memory_space=ANY)],
            out_specs=pl.BlockSpec(memory_space=ANY), scratch_shapes=[DMA]))(x))
    jax.block_until_ready(f())  # compiled
    tracemalloc.start()
    try:
      with warnings.catch_warnings():
        warnings.simplefilter("error", pltpu.InterpretWarning)
        out = jax.block_until_ready(f())
      _, peak = tracemalloc.get_traced_memory()
    finally:
      tracemalloc.stop()
    np.testing.assert_array_equal(out[:16], np.concatenate([x, x]))
    self.assertLess(peak, 8 << 20)  # a clock per element: 12 bytes of each


class GridTest(jtu.JaxTestCase):

  def test_output_block_revisited(self):
    def kernel(x_ref, o_ref):
      o_ref[...] = x_ref[...] * 2
    specs = dict(in_specs=[pl.BlockSpec(lambda i, j: (j, 0), (8, 128))],
                 out_specs=pl.BlockSpec(lambda i, j: (j, 0), (8, 128)))
    with self.assertRaisesRegex(
        RuntimeError, r"revisited block \(0, 0\) of output 0 at grid point "
        r"\(1, 0\)"):
      call(kernel, X, grid=(2, 2), **specs)
    # Consecutive steps on one block (an accumulator) are fine.
    specs = dict(in_specs=[pl.BlockSpec(lambda i, j: (i, 0), (8, 128))],
                 out_specs=pl.BlockSpec(lambda i, j: (i, 0), (8, 128)))
    np.testing.assert_array_equal(quiet(call, kernel, X, grid=(2, 2),
                                        interpret=RACES, **specs), X * 2)

  def test_parallel_dimensions_run_shuffled(self):
    def kernel(o_ref):
      o_ref[...] = jnp.full(o_ref.shape, pl.program_id(0) * 10 +
                            pl.program_id(1), jnp.float32)
    def run(seed, semantics):
      points = []
      out = call(
          kernel, grid=(4, 2), out_shape=jax.ShapeDtypeStruct(
              (4 * 8, 2 * 128), jnp.float32),
          out_specs=pl.BlockSpec(lambda i, j: (i, j), (8, 128)),
          compiler_params=dict(mosaic=dict(dimension_semantics=semantics)),
          interpret=pltpu.InterpretParams(
              random_seed=seed, grid_point_recorder=lambda p, core: points.append(
                  (tuple(map(int, p)), int(core)))))
      np.testing.assert_array_equal(  # whatever the order, the same blocks
          out[::8, ::128], np.arange(4)[:, None] * 10 + np.arange(2))
      self.assertEqual({core for _, core in points}, {0})
      return [p for p, _ in points]
    in_order = [(i, j) for i in range(4) for j in range(2)]
    self.assertEqual(run(1, ("arbitrary", "arbitrary")), in_order)
    orders = {tuple(run(seed, ("parallel", "arbitrary"))) for seed in range(4)}
    self.assertGreater(len(orders), 1)
    for order in orders:
      self.assertEqual(sorted(order), in_order)
      self.assertEqual([j for _, j in order], [0, 1] * 4)  # inner in order
    self.assertEqual(run(7, ("parallel", "arbitrary")),
                     run(7, ("parallel", "arbitrary")))

  def test_scalar_prefetch_writes_last_across_steps(self):
    def kernel(s_ref, o_ref):
      s_ref[0] += 1
      o_ref[...] = jnp.full(o_ref.shape, s_ref[0], jnp.float32)
    out = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((4, 8, 128), jnp.float32),
        interpret=PARAMS, grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(4,),
            out_specs=pl.BlockSpec(lambda i, s: (i, 0, 0), (None, 8, 128))))(
                jnp.zeros((1,), jnp.int32))
    np.testing.assert_array_equal(out[:, 0, 0], [1, 2, 3, 4])


class TensorCoreTest(jtu.JaxTestCase):
  """`num_cores_or_threads`: each TensorCore has its own SMEM (scalar prefetch
  copies), scratch and semaphores, and takes its share of the grid's leading
  parallel dimensions, as on a megacore chip."""

  def test_each_core_has_its_own_smem_and_takes_its_share(self):
    def kernel(s_ref, o_ref):
      s_ref[0] += 1   # the steps this core ran
      o_ref[...] = jnp.full(o_ref.shape, s_ref[0], jnp.float32)
    def run(cores):
      points = []
      out = pl.pallas_call(
          kernel, out_shape=jax.ShapeDtypeStruct((4, 3, 8, 128), jnp.float32),
          compiler_params=dict(mosaic=dict(
              dimension_semantics=("parallel", "arbitrary"))),
          interpret=pltpu.InterpretParams(
              num_cores_or_threads=cores,
              grid_point_recorder=lambda p, core: points.append(
                  (tuple(map(int, p)), int(core)))),
          grid_spec=pltpu.PrefetchScalarGridSpec(
              num_scalar_prefetch=1, grid=(4, 3), out_specs=pl.BlockSpec(
                  lambda i, j, s: (i, j, 0, 0), (None, None, 8, 128))))(
                      jnp.zeros((1,), jnp.int32))
      return out[:, :, 0, 0], points
    out, points = run(2)
    # Core 0 takes 2 points of the parallel dimension, in a shuffled order,
    # and core 1 the other 2, each counting from 0.
    self.assertEqual([core for _, core in points], [0] * 6 + [1] * 6)
    for core in (0, 1):
      rows = [i for (i, _), c in points if c == core][::3]
      np.testing.assert_array_equal(out[np.array(rows)], [[1, 2, 3], [4, 5, 6]])
    out, points = run(1)
    self.assertEqual({core for _, core in points}, {0})
    self.assertEqual(sorted(out.ravel().tolist()), list(range(1, 13)))

  def prefetching(self, per_point, interpret):
    """Each step waits for its block, copied from HBM, and starts the copy of
    the next step's: from the grid's first step on (a kernel for one core),
    or from each point of the parallel dimension on (for any)."""
    x = np.arange(4 * 8 * 128, dtype=np.float32).reshape(2, 2, 8, 128)
    def kernel(x_hbm, o_ref, buf, sem):
      i, j = pl.program_id(0), pl.program_id(1)
      copy = lambda i, j: pltpu.make_async_copy(x_hbm.at[i, j],
                                                buf.at[j % 2], sem)
      @pl.when((j == 0) & ((i == 0) | per_point))
      def _():
        copy(i, j).start()
      @pl.when((j == 0) | ((i == 0) & (not per_point)))
      def _():
        copy(i + j, 1 - j).start()   # (i, 1); without per_point (1, 0) too
      copy(i, j).wait()
      o_ref[...] = buf[j % 2] + 1
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=dict(mosaic=dict(
            dimension_semantics=("parallel", "arbitrary"))),
        interpret=interpret, grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=(2, 2),
            in_specs=[pl.BlockSpec(memory_space=ANY)],
            out_specs=pl.BlockSpec(lambda i, j: (i, j, 0, 0),
                                   (None, None, 8, 128)),
            scratch_shapes=[VMEM((2, 8, 128), jnp.float32), DMA]))(x)

  def test_a_kernel_for_one_core_on_two(self):
    # Core 1's first step waits for the copy that core 0's last step started
    # (on its own semaphore): a megacore chip hangs.
    with self.assertRaisesRegex(
        RuntimeError, "no device can proceed: device 0 waits for 4096 bytes "
        "on DMA semaphore sem"), self.assertWarnsRegex(
            pltpu.InterpretWarning, "DMA semaphore sem is 4096 bytes at the "
            "end of the kernel on core 0: DMAs never waited for"):
      self.prefetching(False, pltpu.InterpretParams(num_cores_or_threads=2))
    for cores in (1, 2):
      np.testing.assert_array_equal(quiet(
          self.prefetching, True, pltpu.InterpretParams(
              num_cores_or_threads=cores, detect_races=True)),
                                    np.arange(4 * 8 * 128).reshape(2, 2, 8, 128) + 1)


class BlockShapeTest(jtu.JaxTestCase):
  """Blocks that Mosaic does not tile: refused, in Pallas's words."""

  @parameterized.named_parameters(
      ("minor_dims", (64, 256), np.float32, (32, 64), (32, 128),
       "the last two dimensions of your block shape are divisible by 8 and "
       "128 respectively, or be equal to the respective dimensions of the "
       r"overall array. Block spec for x_ref in pallas_call kernel has block "
       r"shape \(32, 64\), array shape \(64, 256\)"),
      ("rank_1_int8", (2048,), np.int8, (256,), (512,),
       r"rank 1 block shapes, .* is a power of 2 and at least the tiling size "
       r"\(512 = 128 \* \(32 // 8\)\)"),
      # A TPU v5e refused int8 (8, 128), accepted int8 (32, 128) and bf16
      # (8, 128) (chipcheck/tiling_on_chip.py).
      ("int8_tiling", (64, 256), np.int8, (8, 128), (32, 128),
       r"blocks hold whole tiles of their arrays. Block spec for x_ref in "
       r"pallas_call kernel: the int8 array of shape \(64, 256\) has tiling "
       r"\(32, 128\), but its block shape \(8, 128\) is not divisible by "
       "tiling"),
      ("fp8_tiling", (64, 256), jnp.float8_e5m2, (16, 256), (64, 128),
       r"blocks hold whole tiles .* has tiling \(32, 128\), but its block "
       r"shape \(16, 256\)"))
  def test_blocks_mosaic_does_not_tile(self, shape, dtype, bad, good, words):
    x = (np.arange(np.prod(shape)) % 100).astype(dtype).reshape(shape)
    def run(block, interpret):
      spec = pl.BlockSpec(lambda *i: i, block)
      def kernel(x_ref, o_ref):  # a copy (a TPU adds no float8)
        o_ref[...] = x_ref[...]
      return pl.pallas_call(
          kernel, out_shape=jax.ShapeDtypeStruct(shape, dtype),
          grid=tuple(n // b for n, b in zip(shape, block)), in_specs=[spec],
          out_specs=spec, interpret=interpret)(x)
    with self.assertRaisesRegex(ValueError, "The Pallas TPU lowering "
                                "currently requires that " + words):
      run(bad, PARAMS)
    np.testing.assert_array_equal(quiet(run, good, RACES), x)
    # interpret=True (checks=False) runs what a TPU refuses.
    np.testing.assert_array_equal(
        run(bad, pltpu.InterpretParams(checks=False)), x)

  def test_bf16_tiling_takes_blocks_of_8_rows(self):
    x = jnp.arange(64 * 256, dtype=jnp.bfloat16).reshape(64, 256)
    spec = pl.BlockSpec(lambda i, j: (i, j), (8, 128))
    out = pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(8, 2),
        in_specs=[spec], out_specs=spec, interpret=PARAMS)(x)
    np.testing.assert_array_equal(out, x)


  # A TPU v5e, copy kernels on a (64, 256) array (chipcheck/tiling_on_chip.py):
  # the blocks it accepted and refused, by dtype.
  @parameterized.parameters(
      *((t, (8, 128)) for t in ("float32", "int32", "bfloat16", "int16")),
      *((t, (32, 128)) for t in ("int8", "float8_e4m3fn", "float8_e5m2")))
  def test_tiling_measured_on_a_chip(self, dtype, tile):
    x = jnp.zeros((64, 256), dtype)
    def lower(block):
      spec = pl.BlockSpec(lambda i, j: (i, j), block)
      return jax.jit(pl.pallas_call(
          lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]),
          out_shape=x, grid=(64 // block[0], 256 // block[1]),
          in_specs=[spec], out_specs=spec, interpret=PARAMS)).lower(x)
    for rows in (8, 16, 32, 64):
      if rows % tile[0] == 0:
        lower((rows, 128))
      else:
        with self.assertRaisesRegex(ValueError, rf"has tiling \({tile[0]}, "):
          lower((rows, 128))
    for block in ((1, 128), (2, 128), (4, 128)):
      with self.assertRaisesRegex(ValueError, "The Pallas TPU lowering"):
        lower(block)
    if tile[0] == 8:
      lower((8, 256))
    else:
      with self.assertRaisesRegex(ValueError, r"has tiling \(32, 128\)"):
        lower((8, 256))

  @parameterized.parameters("float16", "uint8", "uint16", "uint32", "bool")
  def test_dtypes_a_chip_refuses(self, dtype):
    # A TPU v5e refused every block of these (Mosaic failed to compile).
    x = np.ones((64, 256), dtype)
    def run(x, interpret):
      spec = pl.BlockSpec(lambda i: (i, 0), (32, 256))
      return pl.pallas_call(
          lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]),
          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
          in_specs=[spec], out_specs=spec, interpret=interpret)(x)
    with self.assertRaisesRegex(
        NotImplementedError, f"Pallas kernel <lambda>: a TPU refuses blocks "
        f"of {dtype} \\(x_ref\\)"):
      run(x, PARAMS)
    np.testing.assert_array_equal(run(x, pltpu.InterpretParams(checks=False)),
                                  x)
    # The corrected kernel: a dtype the chip takes (int32 for bool, float32
    # for float16, int32 for unsigned ints).
    wide = x.astype(np.float32 if dtype == "float16" else np.int32)
    np.testing.assert_array_equal(quiet(run, wide, RACES), wide)


class LoweringTest(jtu.JaxTestCase):
  """A kernel the Pallas TPU lowering refuses: InterpretParams() refuses it, in
  the lowering's words (lowered as for a TPU, on the CPU)."""

  def tpu_error(self, kernel, x):
    """The error of exporting `kernel` on x for a TPU (no chip needed)."""
    f = lambda x: pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    try:
      export.export(f, lowering_platforms=("tpu",))(x)
    except Exception as e:  # pylint: disable=broad-except
      return e
    self.fail("the TPU lowering took the kernel")

  @parameterized.named_parameters(
      ("integer_argmax", np.int32, "Exception while lowering eqn:\n  "
       "a:i32\\[8\\] = argmax\\[axes=\\(1,\\) index_dtype=int32\\] b",
       lambda v: jnp.argmax(v, 1, keepdims=True)),
      ("cumprod", np.float32, "Unimplemented primitive in Pallas TPU lowering: "
       "cumprod", lambda v: lax.cumprod(v, 1)))
  def test_what_the_lowering_refuses(self, dtype, words, op):
    x = (np.arange(8 * 128) % 7 + 1).astype(dtype).reshape(8, 128)
    def kernel(x_ref, o_ref):
      o_ref[...] = jnp.broadcast_to(op(x_ref[...]), o_ref.shape).astype(
          o_ref.dtype)
    run = lambda kernel, x, interpret: pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=interpret)(x)
    tpu = self.tpu_error(kernel, x)
    with self.assertRaisesRegex(type(tpu), words) as caught:
      run(kernel, x, PARAMS)
    self.assertIs(type(caught.exception), type(tpu))
    self.assertEqual(str(caught.exception).split("With context")[0],
                     str(tpu).split("With context")[0])
    want = np.broadcast_to(op(x), x.shape)
    np.testing.assert_array_equal(
        run(kernel, x, pltpu.InterpretParams(checks=False)), want)
    if dtype == np.int32:  # the twin: argmax of floats lowers
      def fixed(x_ref, o_ref):
        o_ref[...] = jnp.broadcast_to(op(x_ref[...].astype(jnp.float32)),
                                      o_ref.shape).astype(o_ref.dtype)
      np.testing.assert_array_equal(quiet(run, fixed, x, RACES), want)


class MemorySpaceAndSemaphoreTest(jtu.JaxTestCase):

  def test_hbm_ref_loaded_directly(self):
    def kernel(x_hbm, o_ref):
      o_ref[...] = x_hbm[...]
    with self.assertRaisesRegex(ValueError, r"x_hbm is in HBM \(memory space "
                                r"ANY\) and cannot be referenced directly"):
      call(kernel, X, in_specs=[pl.BlockSpec(memory_space=ANY)])

  def test_hbm_in_run_scoped(self):
    def kernel(o_ref):
      pltpu.run_scoped(lambda h: None, ANY((8, 128), jnp.float32))
      o_ref[...] = jnp.zeros_like(o_ref)
    with self.assertRaisesRegex(ValueError, "cannot allocate HBM"):
      call(kernel)
    np.testing.assert_array_equal(call(kernel, interpret=pltpu.InterpretParams(
        allow_hbm_allocation_in_run_scoped=True)), np.zeros_like(X))

  def test_dma_never_waited_for(self):
    def kernel(x_hbm, o_ref, buf, sems, *, wait):
      copy = pltpu.make_async_copy(x_hbm, buf, sems.at[1])
      copy.start()
      if wait:
        copy.wait()
      o_ref[...] = jnp.zeros_like(o_ref)
    with self.assertWarnsRegex(
        pltpu.InterpretWarning, r"DMA semaphore sems\[1\] is 8192 bytes at the "
        rf"end of the kernel: DMAs never waited for, started at .*{HERE}"):
      copy_in(functools.partial(kernel, wait=False))()
    quiet(copy_in(functools.partial(kernel, wait=True)), interpret=RACES)

  def test_signal_never_waited_for(self):
    def kernel(o_ref, sem):
      pltpu.semaphore_signal(sem, 3)
      pltpu.semaphore_wait(sem, 2)
      o_ref[...] = jnp.zeros_like(o_ref)
    with self.assertWarnsRegex(pltpu.InterpretWarning,
                               "semaphore sem is 1 at the end of the kernel"):
      call(kernel, scratch_shapes=[REGULAR])

  def test_a_wait_nothing_will_signal(self):
    def kernel(o_ref, sem):
      pltpu.semaphore_wait(sem, 1)
    with self.assertRaisesRegex(
        RuntimeError, r"no device can proceed: device 0 waits for semaphore sem "
        "to reach 1"):
      call(kernel, scratch_shapes=[REGULAR])


class UpstreamKernelTest(jtu.JaxTestCase):
  """What the checks find in jax 0.4.26's own kernels."""

  def test_paged_attention_reads_a_length_past_the_batch(self):
    # `lengths_ref[next_b]` with next_b == batch_size, in
    # compute_block_indices' advance_b (jnp.logical_and does not
    # short-circuit): on a TPU an SMEM read out of bounds, its value unused.
    from jax.experimental.pallas.ops.tpu.paged_attention import (
        paged_attention_kernel as pak)
    q = jnp.ones((2, 2, 128), jnp.float32)
    pages = jnp.ones((2, 8, 16, 128), jnp.float32)
    lengths = jnp.array([40, 64], jnp.int32)
    indices = jnp.arange(8, dtype=jnp.int32).reshape(2, 4)
    run = lambda params: pak.paged_attention(
        q, pages, pages, lengths, indices, pages_per_compute_block=2)
    pallas_call = pl.pallas_call
    def with_params(params):
      def f(*args, **kwargs):
        return pallas_call(*args, **{**kwargs, "interpret": params})
      return f
    try:
      jax.clear_caches()   # paged_attention is jitted: trace it afresh
      pak.pl.pallas_call = with_params(PARAMS)
      with self.assertRaisesRegex(
          IndexError, r"out-of-bounds read of lengths_ref\[2\] at .*"
          r"paged_attention_kernel.py:137(:\d+)? .*advance_b"):
        run(PARAMS)
      jax.clear_caches()
      pak.pl.pallas_call = with_params(pltpu.InterpretParams(
          detect_races=True, out_of_bounds_reads="uninitialized"))
      np.testing.assert_allclose(quiet(run, None), np.ones((2, 2, 128)),
                                 rtol=1e-6)
    finally:
      pak.pl.pallas_call = pallas_call
      jax.clear_caches()

  @parameterized.parameters(None, "kv_head", "batch")
  def test_paged_attention_on_two_cores(self, megacore_mode):
    # Its megacore modes give each core its own scalar prefetch copies (the
    # step count from which it prefetches), scratch and semaphore. (With
    # inline_seq_dim, "batch" reads the sequence length at the unadjusted
    # batch index: wrong on any chip, fixed in jax 0.4.27.)
    from jax.experimental.pallas.ops.tpu.paged_attention import (
        paged_attention_kernel as pak)
    k1, k2, k3, k4 = jax.random.split(jax.random.key(0), 4)
    q = jax.random.normal(k1, (4, 8, 128), jnp.float32)
    k_pages, v_pages = (jax.random.normal(k, (2, 32, 16, 128), jnp.float32)
                        for k in (k2, k3))
    lengths = jnp.array([16, 128, 40, 100], jnp.int32)
    indices = jax.random.permutation(k4, 32).reshape(4, 8).astype(jnp.int32)
    k, v = (p[:, indices].reshape(2, 4, 128, 128).transpose(1, 0, 2, 3)
            for p in (k_pages, v_pages))
    logits = jnp.einsum("bhgd,bhtd->bhgt", q.reshape(4, 2, 4, 128), k)
    valid = jnp.arange(128)[None, None, None] < lengths[:, None, None, None]
    weights = jax.nn.softmax(jnp.where(valid, logits, -jnp.inf), -1)
    want = jnp.einsum("bhgt,bhtd->bhgd", weights, v).reshape(q.shape)
    pallas_call = pl.pallas_call
    def run(params):
      jax.clear_caches()
      pak.pl.pallas_call = lambda *args, **kwargs: pallas_call(
          *args, **{**kwargs, "interpret": params})
      return pak.paged_attention(
          q, k_pages, v_pages, lengths, indices, pages_per_compute_block=2,
          megacore_mode=megacore_mode, inline_seq_dim=megacore_mode != "batch")
    try:
      np.testing.assert_allclose(quiet(run, pltpu.InterpretParams(
          num_cores_or_threads=2, detect_races=True,
          out_of_bounds_reads="uninitialized")), want, rtol=1e-5, atol=1e-5)
      if megacore_mode:  # on one core, core 1's share waits for its prefetch
        with self.assertRaisesRegex(
            RuntimeError, "no device can proceed: device 0 waits for 8192 "
            "bytes on DMA semaphore sem"):
          run(pltpu.InterpretParams(out_of_bounds_reads="uninitialized"))
    finally:
      pak.pl.pallas_call = pallas_call
      jax.clear_caches()


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
