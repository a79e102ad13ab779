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
import pallas_kernels

register = pallas_kernels.registrar(__name__)
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


# The corrected twins below are the kernels a TPU runs (pallas_kernels); the
# data are integers below 2**11 in float32: exact.
_ONE_BLOCK = dict(grid=(1,),
                  in_specs=[pl.BlockSpec(lambda i: (0, 0), X.shape)],
                  out_specs=pl.BlockSpec(lambda i: (0, 0), X.shape))


def _read_within_the_block(x_ref, o_ref):
  o_ref[:8] = x_ref[pl.ds(8 + pl.program_id(0), 8), :]
  o_ref[8:] = x_ref[:8]
READ_WITHIN_THE_BLOCK = register(
    "read_within_the_block", lambda interpret: functools.partial(
        call, _read_within_the_block, **_ONE_BLOCK, interpret=interpret),
    (X,), np.roll(X, 8, axis=0))
for _name in ["read_past_the_end_of_a_block", "write_past_the_end",
              "dma_source_and_destination_through_chained_indexers"]:
  register(_name, excluded="reads or writes out of bounds (a bug "
           "InterpretParams() reports)")


class BoundsTest(jtu.JaxTestCase):

  @pytest.mark.interpret_true_only("compares with interpret=True")
  def test_read_past_the_end_of_a_block(self):
    def kernel(x_ref, o_ref):   # rows 8 + i .. 23 + i of a 16-row block
      o_ref[...] = x_ref[pl.ds(8 + pl.program_id(0), 16), :]
    specs = _ONE_BLOCK
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
    quiet(READ_WITHIN_THE_BLOCK.check, RACES)

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


def _accumulate(init, interpret):
  def kernel(x_ref, o_ref):
    if init:
      @pl.when(pl.program_id(0) == 0)
      def _():
        o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[...] += x_ref[...]
  return lambda x: call(
      kernel, x, grid=(2,), interpret=interpret,
      out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
      in_specs=[pl.BlockSpec(lambda i: (i, 0, 0), (None, 8, 128))],
      out_specs=pl.BlockSpec(lambda i: (0, 0), (8, 128)))
ACCUMULATE = register("output_accumulated_once_initialized",
                      functools.partial(_accumulate, True),
                      (X.reshape(2, 8, 128),), X[:8] + X[8:])
for _name in ["output_accumulated_without_being_initialized",
              "outputs_scratch_and_scoped_buffers"]:
  register(_name, excluded="reads memory never written")


class UninitializedMemoryTest(jtu.JaxTestCase):

  def accumulate(self, init, interpret):
    return _accumulate(init, interpret)(X.reshape(2, 8, 128))

  @pytest.mark.interpret_true_only("compares with interpret=True")
  def test_output_accumulated_without_being_initialized(self):
    self.assertTrue(np.isnan(self.accumulate(False, PARAMS)).all())
    np.testing.assert_array_equal(    # jax 0.4.26's: zeros
        self.accumulate(False, True), X[:8] + X[8:])
    quiet(ACCUMULATE.check, RACES)

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


def _wait_names_another_ref(x_hbm, o_ref, buf, sems):
  # The copy lands in its own destination, `buf`, whatever the wait names.
  pltpu.make_async_copy(x_hbm, buf, sems.at[0]).start()
  pltpu.make_async_copy(x_hbm, o_ref, sems.at[0]).wait()
  o_ref[...] = buf[...] * 2
WAIT_NAMES_ANOTHER_REF = register(
    "what_a_wait_names_is_not_where_the_copy_lands",
    lambda interpret: functools.partial(copy_in(_wait_names_another_ref),
                                        interpret=interpret), (), X * 2)
register("read_before_the_wait", excluded="reads a DMA's destination before "
         "its wait (a race)")


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
    for interpret in (PARAMS, pltpu.InterpretParams(dma_execution_mode="eager"),
                      True):
      WAIT_NAMES_ANOTHER_REF.check(interpret)


def _two_dmas_into_one_buffer(x_hbm, o_ref, buf, sems, *, fixed):
  first = pltpu.make_async_copy(x_hbm, buf, sems.at[0])
  first.start()
  if fixed:
    first.wait()
  pltpu.make_async_copy(x_hbm, buf, sems.at[1]).start()
  if not fixed:
    first.wait()
  pltpu.make_async_copy(x_hbm, buf, sems.at[1]).wait()
  o_ref[...] = buf[...]


def _dma_source_written(x_hbm, o_ref, buf, sems, *, fixed):
  buf[...] = jnp.ones_like(buf)
  copy = pltpu.make_async_copy(buf, o_ref, sems.at[0])
  copy.start()
  if fixed:
    copy.wait()
  buf[...] = jnp.zeros_like(buf)
  if not fixed:
    copy.wait()
_OUT_ANY = dict(out_specs=pl.BlockSpec(memory_space=ANY))


def _double_buffering(x_hbm, o_ref, buf, sems):
  rows = lambda i: pl.ds(i * 4, 4)
  copies = [pltpu.make_async_copy(x_hbm.at[rows(i)], buf.at[rows(i)],
                                  sems.at[i % 2]) for i in range(4)]
  copies[0].start()
  for i in range(4):
    if i + 1 < 4:
      copies[i + 1].start()
    copies[i].wait()
    o_ref[rows(i)] = buf[rows(i)] + 1


TWO_DMAS_ONE_AFTER_THE_OTHER = register(
    "two_dmas_into_one_buffer_one_after_the_other",
    lambda interpret: functools.partial(copy_in(functools.partial(
        _two_dmas_into_one_buffer, fixed=True)), interpret=interpret), (), X)
DMA_SOURCE_WRITTEN_AFTER_ITS_WAIT = register(
    "dma_source_written_after_its_wait",
    lambda interpret: functools.partial(copy_in(functools.partial(
        _dma_source_written, fixed=True)), interpret=interpret, **_OUT_ANY),
    (), np.ones_like(X))
DOUBLE_BUFFERING = register(
    "correct_double_buffering", lambda interpret: functools.partial(
        copy_in(_double_buffering), interpret=interpret), (), X + 1)
for _name in ["two_dmas_in_flight_into_one_buffer",
              "dma_source_written_while_in_flight"]:
  register(_name, excluded="a race")
register("memory_grows_with_the_regions_accessed", excluded="writes 16 of "
         "its output's 65,536 rows (and 32 MiB are too big to compare)")


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
    [race] = self.races(copy_in(functools.partial(
        _two_dmas_into_one_buffer, fixed=False)), interpret=RACES)
    self.assertIn("while another DMA into it, started at", race)
    quiet(TWO_DMAS_ONE_AFTER_THE_OTHER.check, RACES)

  def test_a_dma_source_written_while_in_flight(self):
    [race] = self.races(copy_in(functools.partial(
        _dma_source_written, fixed=False)), interpret=RACES, **_OUT_ANY)
    self.assertRegex(race, r"a write of buf\[0:16, 0:128\] .* while a DMA "
                     "from buf started at .* reads it")
    quiet(DMA_SOURCE_WRITTEN_AFTER_ITS_WAIT.check, RACES)

  def test_correct_double_buffering_has_no_race(self):
    quiet(DOUBLE_BUFFERING.check, RACES)

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


def _double(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2


# Consecutive steps on one block (an accumulator) are fine.
SAME_BLOCK_IN_CONSECUTIVE_STEPS = register(
    "output_block_in_consecutive_steps", lambda interpret: functools.partial(
        call, _double, grid=(2, 2), interpret=interpret,
        in_specs=[pl.BlockSpec(lambda i, j: (i, 0), (8, 128))],
        out_specs=pl.BlockSpec(lambda i, j: (i, 0), (8, 128))), (X,), X * 2)
register("output_block_revisited", excluded="revisits an output block (a bug "
         "InterpretParams() reports)")


def _program_ids(semantics, interpret):
  def kernel(o_ref):
    o_ref[...] = jnp.full(o_ref.shape, pl.program_id(0) * 10 +
                          pl.program_id(1), jnp.float32)
  return lambda: call(
      kernel, grid=(4, 2), out_shape=jax.ShapeDtypeStruct(
          (4 * 8, 2 * 128), jnp.float32),
      out_specs=pl.BlockSpec(lambda i, j: (i, j), (8, 128)),
      compiler_params=dict(mosaic=dict(dimension_semantics=semantics)),
      interpret=interpret)
PARALLEL_DIMENSIONS = register(
    "parallel_dimensions", functools.partial(
        _program_ids, ("parallel", "arbitrary")),
    want=np.kron(np.arange(4)[:, None] * 10 + np.arange(2),
                 np.ones((8, 128))).astype(np.float32),
    # Without inputs, its tpu_custom_call has result layouts and no operand
    # layouts: StableHLO's verifier refuses the module (in some processes).
    split="Failed to deserialize StableHLO")


def _scalar_prefetch_written(interpret):
  def kernel(s_ref, o_ref):
    s_ref[0] += 1
    o_ref[...] = jnp.full(o_ref.shape, s_ref[0], jnp.float32)
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((4, 8, 128), jnp.float32),
      interpret=interpret, grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=1, grid=(4,),
          out_specs=pl.BlockSpec(lambda i, s: (i, 0, 0), (None, 8, 128))))
SCALAR_PREFETCH_WRITTEN = register(
    "scalar_prefetch_writes_last_across_steps", _scalar_prefetch_written,
    (np.zeros((1,), np.int32),),
    np.broadcast_to(np.arange(1, 5, dtype=np.float32)[:, None, None],
                    (4, 8, 128)))


class GridTest(jtu.JaxTestCase):

  def test_output_block_revisited(self):
    specs = dict(in_specs=[pl.BlockSpec(lambda i, j: (j, 0), (8, 128))],
                 out_specs=pl.BlockSpec(lambda i, j: (j, 0), (8, 128)))
    with self.assertRaisesRegex(
        RuntimeError, r"revisited block \(0, 0\) of output 0 at grid point "
        r"\(1, 0\)"):
      call(_double, X, grid=(2, 2), **specs)
    quiet(SAME_BLOCK_IN_CONSECUTIVE_STEPS.check, RACES)

  def test_parallel_dimensions_run_shuffled(self):
    def run(seed, semantics):
      points = []
      out = _program_ids(
          semantics, interpret=pltpu.InterpretParams(
              random_seed=seed, grid_point_recorder=lambda p, core: points.append(
                  (tuple(map(int, p)), int(core)))))()
      # whatever the order, the same blocks
      PARALLEL_DIMENSIONS.assert_close(out, PARALLEL_DIMENSIONS.want)
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
    SCALAR_PREFETCH_WRITTEN.check(PARAMS)


def _prefetching(per_point, interpret):
  """Each step waits for its block, copied from HBM, and starts the copy of
  the next step's: from the grid's first step on (a kernel for one core), or
  from each point of the parallel dimension on (for any)."""
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
      kernel, out_shape=jax.ShapeDtypeStruct((2, 2, 8, 128), jnp.float32),
      compiler_params=dict(mosaic=dict(
          dimension_semantics=("parallel", "arbitrary"))),
      interpret=interpret, grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0, grid=(2, 2),
          in_specs=[pl.BlockSpec(memory_space=ANY)],
          out_specs=pl.BlockSpec(lambda i, j: (i, j, 0, 0),
                                 (None, None, 8, 128)),
          scratch_shapes=[VMEM((2, 8, 128), jnp.float32), DMA]))
_x = np.arange(4 * 8 * 128, dtype=np.float32).reshape(2, 2, 8, 128)
PREFETCHING_PER_POINT = register(
    "prefetching_from_each_point_of_the_parallel_dimension",
    functools.partial(_prefetching, True), (_x,), _x + 1)
register("prefetching_from_the_first_step", excluded="a kernel for one "
         "TensorCore: interpret=True models a megacore chip, where it hangs")
register("each_core_has_its_own_smem", excluded="its answer is the count of "
         "TensorCores' (interpret=True models two)")


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

  def test_a_kernel_for_one_core_on_two(self):
    # Core 1's first step waits for the copy that core 0's last step started
    # (on its own semaphore): a megacore chip hangs.
    with self.assertRaisesRegex(
        RuntimeError, "no device can proceed: device 0 waits for 4096 bytes "
        "on DMA semaphore sem"), self.assertWarnsRegex(
            pltpu.InterpretWarning, "DMA semaphore sem is 4096 bytes at the "
            "end of the kernel on core 0: DMAs never waited for"):
      _prefetching(False, pltpu.InterpretParams(num_cores_or_threads=2))(
          *PREFETCHING_PER_POINT.args)
    for cores in (1, 2):
      quiet(PREFETCHING_PER_POINT.check, pltpu.InterpretParams(
          num_cores_or_threads=cores, detect_races=True))


def _copy(shape, dtype, block):
  def make(interpret):
    spec = pl.BlockSpec(lambda *i: i, block)
    def kernel(x_ref, o_ref):  # a copy (a TPU adds no float8)
      o_ref[...] = x_ref[...]
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(shape, dtype),
        grid=tuple(n // b for n, b in zip(shape, block)), in_specs=[spec],
        out_specs=spec, interpret=interpret)
  x = (np.arange(np.prod(shape)) % 100).astype(dtype).reshape(shape)
  return make, (x,), x


# Blocks of a (64, 256) array, by dtype: (8, 128) blocks of 8-bit types,
# (4, 128) blocks and (64, 64) blocks of any type do not hold whole tiles of
# its layout (a TPU v5e refused them, accepted the others: its tiling of
# 8-bit types is (32, 128), of the others (8, 128)); rank 1: a (2048,) int8
# array in (256,) blocks (refused) and (512,) ones; blocks of the dtypes a
# TPU v5e refuses whatever the shape, and their twins of a wider dtype.
_BLOCK_TYPES = ("float32", "int32", "bfloat16", "int16", "int8", "float8_e5m2",
                "float8_e4m3fn")
BLOCKS = [
    register(f"blocks_{'x'.join(map(str, block))}_of_{dtype}",
             *_copy(shape, jnp.dtype(dtype), block), rule="block shapes",
             refused="a TPU refuses the block shape .* not divisible by "
             r"tiling \(Mosaic: E2002" if refused else None)
    for shape, dtype, block, refused in [
        *(((64, 256), t, b, b[1] == 64 or b[0] % (32 if t.startswith(
            ("int8", "float8")) else 8) > 0)
          for t in _BLOCK_TYPES
          for b in ((8, 128), (32, 128), (4, 128), (64, 64))),
        ((2048,), "int8", (256,), True), ((2048,), "int8", (512,), False)]]
DTYPE_BLOCKS = [
    register(f"blocks_of_{dtype}", *_copy((64, 256), jnp.dtype(dtype),
                                          (32, 256)), rule="block dtypes",
             refused=None if dtype in ("int32", "float32") else
             rf"a TPU refuses .* of x_ref: Mosaic fails to compile blocks of "
             rf"{dtype}")
    for dtype in ("float16", "uint8", "uint16", "uint32", "bool", "int32",
                  "float32")]


class BlockShapeTest(jtu.JaxTestCase):
  """Blocks a TPU refuses: refused, in its words."""

  @parameterized.named_parameters(
      (k.name.split(".")[1], k) for k in [*BLOCKS, *DTYPE_BLOCKS])
  def test_blocks_a_tpu_refuses(self, kernel):
    if kernel.refused is None:
      quiet(kernel.check, RACES)
      return
    with self.assertRaisesRegex(Exception, kernel.refused):
      kernel.run(PARAMS)
    # interpret=True (checks=False) runs what a TPU refuses.
    kernel.check(pltpu.InterpretParams(checks=False))


def _load_hbm(x_hbm, o_ref):
  o_ref[...] = x_hbm[...]
HBM_LOADED_DIRECTLY = register(
    "hbm_ref_loaded_directly", lambda interpret: functools.partial(
        call, _load_hbm, in_specs=[pl.BlockSpec(memory_space=ANY)],
        interpret=interpret), (X,), X,
    # A TPU v5e refuses it at lowering too (Pallas's TPU lowering).
    refused=r"x_hbm is in HBM \(memory space ANY\) and cannot be referenced "
    "directly")


def _dma_waited_for(x_hbm, o_ref, buf, sems, *, wait):
  copy = pltpu.make_async_copy(x_hbm, buf, sems.at[1])
  copy.start()
  if wait:
    copy.wait()
  o_ref[...] = jnp.zeros_like(o_ref)
DMA_WAITED_FOR = register(
    "dma_waited_for", lambda interpret: functools.partial(copy_in(
        functools.partial(_dma_waited_for, wait=True)), interpret=interpret),
    (), np.zeros_like(X))
register("hbm_in_run_scoped", excluded="allocates HBM in run_scoped")
for _name in ["dma_never_waited_for", "signal_never_waited_for",
              "a_wait_nothing_will_signal"]:
  register(_name, excluded="leaves a semaphore non-zero or waits forever")


# What a TPU's Mosaic refuses of kernels that Pallas lowers (a TPU v5e
# refused the kernels of pallas_tpu_interpret_test and pallas_pipeline_test
# these stand for, in these words): copies of (8, 128) column blocks of a
# (8, 512) array, and stores into a view of 128 columns.
_W = np.arange(8 * 512, dtype=np.float32).reshape(8, 512)


def _column_copies(start):
  """o[:, 128 j:128 (j + 1)] = x[:, start(j):start(j) + 128], by DMAs."""
  def kernel(x_hbm, o_ref, buf, sem):
    def body(j, _):
      copy = pltpu.make_async_copy(
          x_hbm.at[:, pl.ds(start(j), 128)], buf, sem.at[0])
      copy.start()
      copy.wait()
      o_ref[:, pl.ds(pl.multiple_of(j * 128, 128), 128)] = buf[...]
    lax.fori_loop(0, 3, body, None)
  return lambda interpret: functools.partial(
      call, kernel, out_shape=jax.ShapeDtypeStruct((8, 384), jnp.float32),
      in_specs=[pl.BlockSpec(memory_space=ANY)],
      scratch_shapes=[VMEM((8, 128), jnp.float32), DMA((1,))],
      interpret=interpret)
COLUMN_COPIES = {
    name: register(f"dma_of_columns_{name}", _column_copies(start), (_W,),
                   np.concatenate([_W[:, s:s + 128] for s in want], 1),
                   refused=None if name.startswith("aligned") else
                   pallas_kernels.DMA_WINDOW)
    for name, start, want in [
        # The offsets Mosaic knows: literals, pl.multiple_of, their sums and
        # products; not a traced number alone.
        ("aligned_by_multiple_of", lambda j: pl.multiple_of(j * 128, 128),
         (0, 128, 256)),
        ("aligned_by_a_product", lambda j: 128 * j + 128, (128, 256, 384)),
        ("at_a_traced_multiple_of_64", lambda j: pl.multiple_of(j * 64, 64),
         (0, 64, 128)),
        ("at_a_traced_column", lambda j: j, (0, 1, 2))]}


def _store_through_view(lanes):
  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)
    view = o_ref.at[:, lanes:2 * lanes]
    view[...] = x_ref[:, :lanes]
  want = np.zeros((8, 512), np.float32)
  want[:, lanes:2 * lanes] = _W[:, :lanes]
  return register(
      f"store_through_a_view_of_{lanes}_lanes", lambda interpret: (
          functools.partial(call, kernel, out_shape=jax.ShapeDtypeStruct(
              (8, 512), jnp.float32), interpret=interpret)), (_W,), want,
      refused=None if lanes % 128 == 0 else pallas_kernels.VIEW)
VIEWS = {lanes: _store_through_view(lanes) for lanes in (128, 64)}


# Twins for each rule of InterpretParams() about what a TPU's Mosaic refuses
# of kernels Pallas lowers, for each dtype it speaks of: a kernel the rule
# refuses, and one it runs (tests/tpu_test.py runs both on a chip, which must
# agree; `rule` names the rule).
_TYPES = ("float32", "bfloat16", "int16", "int8")


def _data(shape, dtype):
  return (np.arange(np.prod(shape)) % 97 - 48).astype(
      jnp.dtype(dtype)).reshape(shape)


def _np(index):  # a pl.ds or an int, of a Python int i, as NumPy's index
  if isinstance(index, int):
    return index
  return slice(int(index.start), int(index.start) + index.size)


def _dma_window(dtype, rows, cols, width=512):
  """DMAs of x[rows(i), cols(i)] (each a pl.ds or an int of a traced i) out
  of a (64, width) array in HBM, through VMEM, back to HBM, for i = 0, 1: a
  loop of one trip Mosaic unrolls, and its index is then a constant."""
  x = _data((64, width), dtype)
  want = x[_np(rows(1)), _np(cols(1))]
  def kernel(x_hbm, o_hbm, buf, sem):
    def body(i, _):
      pltpu.async_copy(x_hbm.at[rows(i), cols(i)], buf, sem.at[0]).wait()
      pltpu.async_copy(buf, o_hbm, sem.at[1]).wait()
    lax.fori_loop(0, 2, body, None)
  out = jax.ShapeDtypeStruct(want.shape, dtype)
  return lambda interpret: functools.partial(
      call, kernel, out_shape=out, in_specs=[pl.BlockSpec(memory_space=ANY)],
      out_specs=pl.BlockSpec(memory_space=ANY), interpret=interpret,
      scratch_shapes=[VMEM(out.shape, dtype), DMA((2,))]), (x,), want


def _view(dtype, rows, cols, width=512):
  """o = x_ref.at[rows, cols][...], x a (64, width) VMEM block."""
  x = _data((64, width), dtype)
  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref.at[rows, cols][...]
  out = jax.ShapeDtypeStruct((rows.stop - rows.start, cols.stop - cols.start),
                             dtype)
  return lambda interpret: functools.partial(
      call, kernel, out_shape=out, interpret=interpret), (x,), x[rows, cols]


def _ds(start, size):  # pl.ds(start(i), size) of a traced i
  return lambda i: pl.ds(start(i), size)


def _windows(dtype):
  """(name, window maker, rows, cols, refused, width): DMA windows and
  views, each refused one with its twin. A (64, 512) array's tiles are
  (tile, 128): tile = 8 rows, 32 of an 8-bit type; a 32-bit word holds
  `word` rows."""
  word = 4 // jnp.dtype(dtype).itemsize
  tile = 32 if word == 4 else 8
  at = lambda n: (lambda i: i + n)   # a traced start Mosaic knows nothing of
  aligned = lambda n, m: (lambda i: pl.multiple_of(i * m + n, m))
  rows, cols = _ds(lambda i: 0, 32), _ds(lambda i: 0, 128)
  fixed = lambda n: (lambda i: n)
  cases = [
      ("dma_at_column_64", _dma_window, rows, _ds(fixed(64), 128), True),
      ("dma_at_column_128", _dma_window, rows, _ds(fixed(128), 128), False),
      ("dma_of_64_columns", _dma_window, rows, _ds(fixed(128), 64), True),
      ("dma_at_a_traced_column", _dma_window, rows, _ds(at(128), 128), True),
      ("dma_at_a_traced_multiple_of_128", _dma_window, rows,
       _ds(aligned(128, 128), 128), False),
      (f"dma_at_row_{word}", _dma_window, _ds(fixed(word), 32), cols, True),
      (f"dma_at_row_{tile}", _dma_window, _ds(fixed(tile), 32), cols, False),
      (f"dma_at_a_traced_row_{word}", _dma_window,
       _ds(aligned(word, word), 32), cols, True),
      (f"dma_at_a_traced_multiple_of_{tile}_rows", _dma_window,
       _ds(aligned(0, tile), 32), cols, False),
      # Sizes in whole 8 rows, of an 8-bit type too.
      (f"dma_of_{tile + tile // 2}_rows", _dma_window,
       _ds(fixed(0), tile + tile // 2), cols, (tile + tile // 2) % 8 != 0),
      (f"dma_of_{tile // 2}_rows", _dma_window, _ds(fixed(0), tile // 2),
       cols, False),
      # One row (a squeezed dimension) at any row: of 32-bit types alone.
      (f"dma_of_row_{word}", _dma_window, fixed(word), cols, word > 1),
      # Rows of a 32-bit array one tile wide: at any row.
      (f"dma_at_row_{word}_of_128_columns", _dma_window,
       _ds(fixed(word), 32), cols, word > 1, 128),
      ("view_at_column_64", _view, slice(0, 32), slice(64, 192), True),
      ("view_at_column_128", _view, slice(0, 32), slice(128, 256), False),
      (f"view_at_row_{word}", _view, slice(word, word + 32), slice(0, 128),
       True),
      (f"view_at_row_{tile}", _view, slice(tile, tile + 32), slice(0, 128),
       False)]
  if word == 1:  # ... through a view too
    cases.append(("view_at_row_1_of_128_columns", _view, slice(1, 33),
                  slice(0, 128), False, 128))
  if word > 1:   # a row inside a 32-bit word
    cases += [
        (f"dma_at_row_{word // 2}", _dma_window, _ds(fixed(word // 2), 32),
         cols, True),
        (f"dma_of_{word + word // 2}_rows", _dma_window,
         _ds(fixed(0), word + word // 2), cols, True),
        (f"dma_of_{2 * word}_rows", _dma_window, _ds(fixed(0), 2 * word),
         cols, False),
        ("dma_at_a_traced_row", _dma_window, _ds(at(word), 32), cols, True),
        (f"view_at_row_{word // 2}", _view,
         slice(word // 2, word // 2 + 32), slice(0, 128), True)]
  return {c[0]: c for c in cases}.values()   # each name once


WINDOWS = [
    register(f"{name}_{dtype}", *make(dtype, rows, cols, *width),
             rule="tiles of DMA windows and views",
             refused=None if not refused else pallas_kernels.DMA_WINDOW
             if make is _dma_window else pallas_kernels.VIEW)
    for dtype in _TYPES
    for name, make, rows, cols, refused, *width in _windows(dtype)]


def _arithmetic(name, op, dtype, cast, refused):
  x, y = _data((32, 128), dtype), _data((32, 128), dtype)[::-1] // 2
  x[0] = y[0]   # some equal
  wide = np.int32 if cast or name in _COMPARES else dtype
  def kernel(x_ref, y_ref, o_ref):
    x, y = x_ref[...], y_ref[...]
    if cast:
      x, y = x.astype(jnp.int32), y.astype(jnp.int32)
    o_ref[...] = op(x, y).astype(o_ref.dtype)
  return register(
      f"{name}_of_{dtype}_vectors{'_cast_to_int32' * cast}",
      lambda interpret: functools.partial(
          call, kernel, out_shape=jax.ShapeDtypeStruct(x.shape, wide),
          interpret=interpret), (x, y),
      np.asarray(op(x.astype(np.int32), y.astype(np.int32))).astype(wide),
      rule="integer vector arithmetic",
      refused=pallas_kernels.INT_VECTORS if refused and not cast else None)
# (name, op, refused of int8, of int16): what a TPU v5e refuses.
_COMPARES = {"gt": jnp.greater, "lt": jnp.less, "le": jnp.less_equal,
             "ge": jnp.greater_equal, "eq": jnp.equal, "ne": jnp.not_equal}
ARITHMETIC = [
    _arithmetic(name, op, dtype, cast, refused[dtype == "int16"])
    for name, op, refused in [
        ("add", jnp.add, (True, False)), ("sub", jnp.subtract, (True, False)),
        ("mul", jnp.multiply, (True, False)),
        ("max", jnp.maximum, (True, True)), ("min", jnp.minimum, (True, True)),
        *[(k, _COMPARES[k], (k not in ("eq", "ne"), False))
          for k in _COMPARES],
        # jnp.where by the mask of a compare of narrow integers
        ("where_by_eq", lambda x, y: jnp.where(x == y, 1, 0), (True, True))]
    for dtype, cast in [("int8", False), ("int8", True), ("int16", False)]
    # (A TPU v5e refused jnp.where(x == y, 1, 0) of int8 vectors cast to
    # int32 too, and ran jnp.where by an int32 compare in pallas_tpu_lowering
    # and upstream's paged attention: not a rule yet.)
    if not cast or name in ("add", "max", "gt", "eq")]


class MosaicRefusalsTest(jtu.JaxTestCase):
  """What a TPU's Mosaic refuses of a kernel that lowers: InterpretParams()
  refuses it in Mosaic's words, naming the line; interpret=True runs it."""

  @parameterized.named_parameters(
      (k.name.split(".")[1], k)
      for k in [*COLUMN_COPIES.values(), *VIEWS.values(), *WINDOWS,
                *ARITHMETIC])
  def test_refused_as_a_tpu_refuses(self, kernel):
    if kernel.refused is None:
      quiet(kernel.check, RACES)
      return
    with self.assertRaisesRegex(Exception, kernel.refused) as e:
      kernel.run(PARAMS)
    self.assertIn(HERE, str(e.exception))   # the line, in the message
    kernel.check(pltpu.InterpretParams(checks=False))


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
    with self.assertRaisesRegex(ValueError, HBM_LOADED_DIRECTLY.refused):
      HBM_LOADED_DIRECTLY.run(PARAMS)

  def test_hbm_in_run_scoped(self):
    def kernel(o_ref):
      pltpu.run_scoped(lambda h: None, ANY((8, 128), jnp.float32))
      o_ref[...] = jnp.zeros_like(o_ref)
    with self.assertRaisesRegex(ValueError, "cannot allocate HBM"):
      call(kernel)
    np.testing.assert_array_equal(call(kernel, interpret=pltpu.InterpretParams(
        allow_hbm_allocation_in_run_scoped=True)), np.zeros_like(X))

  def test_dma_never_waited_for(self):
    for interpret in (PARAMS, True):   # one semaphore model, both presets
      with self.assertWarnsRegex(
          pltpu.InterpretWarning, r"DMA semaphore sems\[1\] is 8192 bytes at "
          rf"the end of the kernel: DMAs never waited for, started at .*{HERE}"):
        copy_in(functools.partial(_dma_waited_for, wait=False))(
            interpret=interpret)
    quiet(DMA_WAITED_FOR.check, RACES)

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


for _name in ["paged_attention_reads_a_length_past_the_batch",
              "paged_attention_on_two_cores"]:
  register(_name, excluded="jax 0.4.26's paged_attention: registered by "
           "pallas_interpret_kernels_test (megacore modes: two TensorCores)")


# Upstream's kernels are written for standard promotion (jax 0.4.30's
# paged_attention multiplies float32 weights by its bfloat16 pages).
@jtu.with_config(jax_numpy_dtype_promotion="standard")
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
          r"paged_attention_kernel.py:\d+(:\d+)? .*advance_b"):
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
