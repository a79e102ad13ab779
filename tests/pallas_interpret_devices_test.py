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
"""Pallas TPU kernels that communicate across devices, in interpret mode on
host CPU devices (`jax/_src/pallas/mosaic/interpret.py`).

Data are small integers in float32, so every result is exact whatever the
order of summation, and is compared with NumPy exactly. Kernels that fail do
so in this process, and the programs after them must still work."""
from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
import threading
import time
from unittest import mock
import warnings

from absl.testing import absltest
from absl.testing import parameterized
import pytest
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import test_util as jtu
from jax.experimental import pallas as pl
from jax.experimental import shard_map
from jax.experimental.pallas import tpu as pltpu
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
import pallas_kernels

# Every kernel here runs on a mesh of several devices (the TPU machine has one
# chip), most with remote DMAs; FailureTest and RunTest's fail on purpose.
_register = pallas_kernels.registrar(__name__)
for _name in ["ring_permute", "bidirectional_exchange_with_the_barrier",
              "ring_all_reduce", "2d_mesh_with_mesh_ids",
              "all_gather_kernel_of_jax_0_4_26", "all_gather_matmul",
              "matmul_reduce_scatter", "copy_lands_where_the_sender_points",
              "devices_that_finish_at_different_times",
              "two_threads_on_disjoint_meshes"]:
  _register(_name, excluded="remote DMAs and semaphores across devices: the "
            "chip machine has one chip")
_register("device_position_in_a_local_kernel", excluded="a mesh of 2 x 4 "
          "devices: the chip machine has one chip")

ANY = pltpu.TPUMemorySpace.ANY
VMEM = pltpu.TPUMemorySpace.VMEM
DMA = pltpu.SemaphoreType.DMA
REGULAR = pltpu.SemaphoreType.REGULAR
N = 4  # devices in the 1-D tests
# jaxlib 0.4.26's Mosaic has no semaphore read: the TPU lowering, so
# InterpretParams(), refuses a kernel that reads one.
_SEMAPHORE_READ = "semaphore_read does not lower for a TPU"


def ints(seed, *shape):
  return np.random.RandomState(seed).randint(-3, 4, shape).astype(np.float32)


def mesh(*shape, names=("x",)):
  return Mesh(np.array(jax.devices()[:np.prod(shape)]).reshape(shape), names)


def kernel_call(kernel, out_shape, *args, space=ANY, scratch_shapes=(),
                grid=(), barrier=False, interpret=True):
  """pallas_call of `kernel` in interpret mode, every operand whole."""
  spec = pl.BlockSpec(memory_space=space)
  n_out = len(out_shape) if isinstance(out_shape, (list, tuple)) else 1
  return pl.pallas_call(
      kernel, out_shape=out_shape, interpret=interpret,
      compiler_params=dict(mosaic=dict(collective_id=0)) if barrier else {},
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0, grid=grid, in_specs=[spec] * len(args),
          out_specs=[spec] * n_out if n_out > 1 else spec,
          scratch_shapes=scratch_shapes))(*args)


def on_mesh(f, m, in_specs, out_specs):
  return jax.jit(shard_map.shard_map(f, m, in_specs=in_specs,
                                     out_specs=out_specs, check_rep=False))


def on_blocks(kernel, m=None, spec=P("x"), **kwargs):
  """`kernel_call` of `kernel` on each device's block of x, its output shaped
  like it, jitted under shard_map over `m` (default: N devices along x)."""
  return on_mesh(lambda x: kernel_call(
      kernel, jax.ShapeDtypeStruct(x.shape, x.dtype), x, **kwargs),
                 mesh(N) if m is None else m, spec, spec)


def barrier(left, right):
  """Signals both neighbours' barrier semaphores and waits for theirs."""
  sem = pltpu.get_barrier_semaphore()
  pltpu.semaphore_signal(sem, device_id=left)
  pltpu.semaphore_signal(sem, device_id=right)
  pltpu.semaphore_wait(sem, 2)


def neighbours(axis="x", size=N):
  me = lax.axis_index(axis)
  return me, lax.rem(me + size - 1, size), lax.rem(me + 1, size)


class RemoteCopyTest(jtu.JaxTestCase):

  @parameterized.product(shift=[1, -1], ids=["logical", "mesh"])
  def test_ring_permute(self, shift, ids):
    x = ints(0, N * 8, 128)
    def kernel(x_ref, o_ref, send_sem, recv_sem):
      if ids == "logical":
        target = lax.rem(pltpu.device_id() + N + shift, N)
        kind = pltpu.DeviceIdType.LOGICAL
      else:
        target = (lax.rem(lax.axis_index("x") + N + shift, N),)
        kind = pltpu.DeviceIdType.MESH
      pltpu.async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                              device_id=target, device_id_type=kind).wait()
    f = on_blocks(kernel, scratch_shapes=[DMA, DMA])
    np.testing.assert_array_equal(f(x), np.roll(x, 8 * shift, axis=0))

  def test_bidirectional_exchange_with_the_barrier(self):
    # Each device sends one half of its block left and the other right, into
    # views of its neighbours' output, after a barrier with both.
    x = ints(1, N * 8, 128)
    def kernel(x_ref, o_ref, sems):
      _, left, right = neighbours()
      barrier(left, right)
      to_left = pltpu.make_async_remote_copy(
          x_ref.at[pl.ds(0, 4)], o_ref.at[1], sems.at[0], sems.at[1],
          device_id=left)
      to_right = pltpu.make_async_remote_copy(
          x_ref.at[pl.ds(4, 4)], o_ref.at[0], sems.at[2], sems.at[3],
          device_id=right)
      to_left.start()
      to_right.start()
      to_left.wait()
      to_right.wait()
    f = on_mesh(lambda x: kernel_call(
        kernel, jax.ShapeDtypeStruct((2, 4, 128), x.dtype), x,
        scratch_shapes=[DMA((4,))], barrier=True), mesh(N), P("x"), P("x"))
    blocks = x.reshape(N, 2, 4, 128)
    want = np.stack([np.roll(blocks[:, 1], 1, axis=0),    # from the left
                     np.roll(blocks[:, 0], -1, axis=0)], 1)  # from the right
    np.testing.assert_array_equal(f(x), want.reshape(N * 2, 4, 128))

  def test_ring_all_reduce(self):
    # N - 1 steps of a ring: pass on what came from the left, add it up.
    x = ints(2, N * 8, 128)
    def kernel(x_ref, o_ref, buf, send_sem, recv_sem, ready):
      _, left, right = neighbours()
      buf[0] = x_ref[...]
      o_ref[...] = x_ref[...]
      def step(i, carry):
        slot = lax.rem(i, 2)
        # The right neighbour's other slot is free once it says so.
        pltpu.semaphore_signal(ready, device_id=left)
        pltpu.semaphore_wait(ready)
        pltpu.async_remote_copy(buf.at[slot], buf.at[1 - slot], send_sem,
                                recv_sem, device_id=right).wait()
        o_ref[...] += buf[1 - slot]
        return carry
      lax.fori_loop(0, N - 1, step, 0)
    f = on_blocks(kernel, space=VMEM, scratch_shapes=[
        pltpu.VMEM((2, 8, 128), jnp.float32), DMA, DMA, REGULAR])
    total = x.reshape(N, 8, 128).sum(0)
    np.testing.assert_array_equal(f(x), np.tile(total, (N, 1)))

  @pytest.mark.interpret_true_only(_SEMAPHORE_READ)
  def test_2d_mesh_with_mesh_ids(self):
    # On a (2, 4) mesh, each device sends its block to the next device along
    # "x", then signals the device across "y", which waits for it.
    x = ints(3, 2 * 8, 4 * 128)
    def kernel(x_ref, o_ref, send_sem, recv_sem, sem):
      y, xi = lax.axis_index("y"), lax.axis_index("x")
      pltpu.async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                              device_id=(y, lax.rem(xi + 1, 4))).wait()
      pltpu.semaphore_signal(sem, 3, device_id=(1 - y, xi))
      pltpu.semaphore_wait(sem, 3)
      o_ref[...] += pltpu.semaphore_read(sem).astype(jnp.float32)
    f = on_blocks(kernel, mesh(2, 4, names=("y", "x")), P("y", "x"),
                  space=VMEM, scratch_shapes=[DMA, DMA, REGULAR])
    blocks = x.reshape(2, 8, 4, 128)
    np.testing.assert_array_equal(
        f(x), np.roll(blocks, 1, axis=2).reshape(x.shape))

  # Its barrier signals 2 to each neighbour and waits for 2: it leaves 2 at
  # the end (the warning), and does not keep a neighbour from copying in
  # while the initial copy waits on the same semaphore (under InterpretParams
  # that wait may then take the neighbour's half block: a ValueError).
  @pytest.mark.interpret_true_only("jax 0.4.26's kernel has a bad barrier")
  def test_all_gather_kernel_of_jax_0_4_26(self):
    from jax.experimental.pallas.ops.tpu import all_gather
    m = mesh(N)
    x = ints(4, N * 8, 128)
    pallas_call = pl.pallas_call
    with mock.patch.object(pl, "pallas_call", lambda *args, **kwargs:
                           pallas_call(*args, **{**kwargs, "interpret": True})
                           ), warnings.catch_warnings(record=True) as seen:
      warnings.simplefilter("always")
      out = all_gather.all_gather(
          jax.device_put(x, jax.sharding.NamedSharding(m, P("x"))), mesh=m,
          axis_name="x")
    barrier = [w for w in seen if w.category is pltpu.InterpretWarning and
               "the barrier semaphore is 2 at the end of the kernel: signals "
               "never waited for" in str(w.message)]
    # jax 0.4.30's own kernel signals 1, as it waits for 2: no warning.
    self.assertEqual(bool(barrier), jax.__version_info__ < (0, 4, 30))
    np.testing.assert_array_equal(out, x)


def _matmul_body(x_ref, y_ref, z_ref):
  @pl.when(pl.program_id(2) == 0)
  def _():
    z_ref[...] = jnp.zeros(z_ref.shape, z_ref.dtype)
  z_ref[...] += jnp.dot(x_ref[...], y_ref[...])


def _matmul(x_ref, y_ref, z_ref):
  """z += x @ y by the pipeline emitter, in (8, 128) tiles: the body's
  result is added to what z held."""
  (m, k), (_, n) = x_ref.shape, y_ref.shape
  pltpu.emit_pipeline(
      _matmul_body, grid=(m // 8, n // 128, k // 128),
      in_specs=[pl.BlockSpec(lambda i, j, l: (i, l), (8, 128)),
                pl.BlockSpec(lambda i, j, l: (l, j), (128, 128))],
      out_specs=pl.BlockSpec(lambda i, j, l: (i, j), (8, 128)),
      should_accumulate_out=True)(x_ref, y_ref, z_ref)


class CollectiveMatmulTest(jtu.JaxTestCase):
  """The pipeline emitter's collective matmuls, small: one grid step per
  ring step, the remote copy in flight while the pipeline computes."""

  def test_all_gather_matmul(self):
    # all_gather(x) @ y: the shard that step s computes on goes on to the
    # right while the pipeline multiplies it.
    m, k, p = 16, 256, 128
    x, y = ints(5, N * m, k), ints(6, k, p)
    def kernel(x_ref, y_ref, o_ref, gathered, zeros, send_sem, recv_sem):
      step = pl.program_id(0)
      me, left, right = neighbours()
      shard = lax.rem(me + N - step, N)
      @pl.when(step == 0)
      def _():
        barrier(left, right)
        pltpu.async_copy(x_ref, gathered.at[me], send_sem).wait()
        zeros[...] = jnp.zeros(zeros.shape, zeros.dtype)
        pltpu.async_copy(zeros, o_ref, send_sem).wait()  # o_ref is in HBM
      copy = pltpu.make_async_remote_copy(
          gathered.at[shard], gathered.at[shard], send_sem, recv_sem,
          device_id=right)
      @pl.when(step < N - 1)
      def _():
        copy.start()
      _matmul(gathered.at[shard], y_ref, o_ref.at[shard])
      @pl.when(step < N - 1)
      def _():
        copy.wait()
    f = on_mesh(lambda x, y: kernel_call(
        kernel, [jax.ShapeDtypeStruct((N, m, p), jnp.float32),
                 jax.ShapeDtypeStruct((N, m, k), jnp.float32)], x, y,
        scratch_shapes=[pltpu.VMEM((N, m, p), jnp.float32), DMA, DMA],
        grid=(N,), barrier=True)[0],
        mesh(N), (P("x"), P()), P("x"))
    want = np.tile((x @ y).reshape(1, N, m, p), (N, 1, 1, 1))
    np.testing.assert_array_equal(f(x, y), want.reshape(N * N, m, p))

  def test_matmul_reduce_scatter(self):
    # Block `me` of sum over devices of x_d @ y_d: the partial sum of block
    # b goes round the ring, each device adding its product on the way.
    m, k, p = 8, 128, 128
    x, y = ints(7, N * m, N * k), ints(8, N * k, p)
    def kernel(x_ref, y_ref, o_ref, buf, send_sem, recv_sem):
      step = pl.program_id(0)
      me, left, right = neighbours()
      slot = lax.rem(step, 2)
      block = lax.rem(me + 2 * N - step - 1, N)
      barrier(left, right)  # every step: the other slot is free everywhere
      @pl.when(step == 0)
      def _():
        buf[slot] = jnp.zeros((m, p), jnp.float32)
      _matmul(x_ref.at[pl.ds(block * m, m)], y_ref, buf.at[slot])
      @pl.when(step < N - 1)
      def _():
        pltpu.async_remote_copy(buf.at[slot], buf.at[1 - slot], send_sem,
                                recv_sem, device_id=right).wait()
      @pl.when(step == N - 1)
      def _():
        o_ref[...] = buf[slot]
    f = on_mesh(lambda x, y: kernel_call(
        kernel, jax.ShapeDtypeStruct((m, p), jnp.float32), x, y, space=VMEM,
        scratch_shapes=[pltpu.VMEM((2, m, p), jnp.float32), DMA, DMA],
        grid=(N,), barrier=True), mesh(N), (P(None, "x"), P("x")), P("x"))
    np.testing.assert_array_equal(f(x, y), x @ y)


class LocalKernelOnMeshTest(jtu.JaxTestCase):

  def test_device_position_in_a_local_kernel(self):
    # No communication: device_id and axis_index are the mesh position, also
    # next to a wait in a conditional (the partitioner needs them manual).
    x = ints(9, 2 * 8, 4 * 128)
    def kernel(x_ref, o_ref, sem):
      y, xi = lax.axis_index("y"), lax.axis_index("x")
      @pl.when(y == 1)
      def _():
        pltpu.async_copy(x_ref, o_ref, sem).wait()
        o_ref[...] *= (xi + 1).astype(jnp.float32)
      @pl.when(y == 0)
      def _():
        o_ref[...] = x_ref[...]
      rows, cols = (lax.broadcasted_iota(jnp.int32, o_ref.shape, d)
                    for d in (0, 1))
      o_ref[...] = jnp.where((rows == 0) & (cols == 0), lax.convert_element_type(
          pltpu.device_id(), jnp.float32), o_ref[...])
    f = on_blocks(kernel, mesh(2, 4, names=("y", "x")), P("y", "x"),
                  space=VMEM, scratch_shapes=[DMA])
    want = x.copy()
    want[8:] *= np.repeat(np.arange(1, 5), 128)
    want[::8, ::128] = np.arange(8).reshape(2, 4)
    np.testing.assert_array_equal(f(x), want)


class ApiTest(jtu.JaxTestCase):

  def test_communication_outside_shard_map_is_an_error(self):
    def kernel(x_ref, o_ref, send, recv):
      pltpu.async_remote_copy(x_ref, o_ref, send, recv, device_id=0).wait()
    with self.assertRaisesRegex(ValueError, "'kernel' copies to or signals "
                                "other devices: in interpret mode it must run "
                                "under shard_map"):
      kernel_call(kernel, jax.ShapeDtypeStruct((8,), jnp.float32),
                  np.ones(8, np.float32), scratch_shapes=[DMA, DMA])
    with self.assertRaisesRegex(
        ValueError, r"pltpu.device_id\(\) in interpret mode needs the kernel "
        "to run under shard_map"):
      kernel_call(lambda o_ref: o_ref.__setitem__(0, pltpu.device_id()),
                  jax.ShapeDtypeStruct((1,), jnp.int32), space=pltpu.SMEM)

  @pytest.mark.interpret_true_only(_SEMAPHORE_READ)
  def test_the_barrier_semaphore_is_the_kernels_with_a_collective_id(self):
    def kernel(o_ref):
      sem = pltpu.get_barrier_semaphore()
      pltpu.semaphore_signal(sem, 3)
      o_ref[0] = pltpu.semaphore_read(sem)
      pltpu.semaphore_wait(sem, 2)
      o_ref[1] = pltpu.semaphore_read(sem)
      pltpu.semaphore_wait(sem)
    out_shape = jax.ShapeDtypeStruct((2,), jnp.int32)
    np.testing.assert_array_equal(
        kernel_call(kernel, out_shape, space=pltpu.SMEM, barrier=True), [3, 1])
    with self.assertRaisesRegex(ValueError, "get_barrier_semaphore needs the "
                                "pallas_call's compiler_params to have a "
                                "collective_id"):
      kernel_call(kernel, out_shape, space=pltpu.SMEM)
    with self.assertRaisesRegex(NotImplementedError, r"Barrier semaphores as "
                                r"scratch \(SemaphoreType.BARRIER\) are not "
                                "supported in interpret mode"):
      kernel_call(lambda o_ref, sem: None, out_shape, space=pltpu.SMEM,
                  scratch_shapes=[pltpu.SemaphoreType.BARRIER])


class FailureTest(jtu.JaxTestCase):
  """A kernel that fails fails every device at once, with a readable error,
  in the caller's thread; later programs on several devices run as usual."""

  def ring(self, interpret=True, shift=1, n=N):
    def kernel(x_ref, o_ref, send_sem, recv_sem):
      right = lax.rem(lax.axis_index("x") + n + shift, n)
      pltpu.async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                              device_id=right).wait()
    def f(x):
      return pl.pallas_call(
          kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
          interpret=interpret, grid_spec=pltpu.PrefetchScalarGridSpec(
              num_scalar_prefetch=0, in_specs=[pl.BlockSpec(memory_space=ANY)],
              out_specs=pl.BlockSpec(memory_space=ANY),
              scratch_shapes=[DMA, DMA]))(x)
    return f

  def assert_still_works(self, devices=None):
    x = ints(20, N * 8, 128)
    m = Mesh(np.array(devices or jax.devices()[:N]), ("x",))
    np.testing.assert_array_equal(
        on_mesh(self.ring(), m, P("x"), P("x"))(x), np.roll(x, 8, axis=0))
    np.testing.assert_array_equal(
        on_mesh(lambda x: lax.psum(x, "x"), m, P("x"), P())(x),
        x.reshape(N, 8, 128).sum(0))

  @parameterized.parameters(True, pltpu.InterpretParams())
  def test_deadlock_then_correct_programs(self, interpret):
    def kernel(x_ref, o_ref, sem):
      pltpu.semaphore_signal(sem, device_id=neighbours()[2])
      pltpu.semaphore_wait(sem, 2)  # only 1 will come
    f = on_blocks(kernel, scratch_shapes=[REGULAR], interpret=interpret)
    start = time.monotonic()
    with self.assertRaisesRegex(
        RuntimeError, r"Pallas kernel 'kernel' on device \d: no device can "
        r"proceed: device 0 waits for semaphore sem to reach 2 \(at .*"
        r"pallas_interpret_devices_test.py:\d+(:\d+)? .*\); device 1 waits"):
      f(ints(0, N * 8, 128))
    self.assertLess(time.monotonic() - start, 30)  # not a timeout
    self.assert_still_works()

  def test_address_outside_the_mesh(self):
    def kernel(x_ref, o_ref, sem):
      pltpu.semaphore_signal(sem, device_id=lax.axis_index("x") + N)
    f = on_blocks(kernel, scratch_shapes=[REGULAR])
    with self.assertRaisesRegex(ValueError, r"device (\d) addressed device "
                                r"\d, but the mesh \{'x': 4\} has devices 0 "
                                "to 3"):
      f(ints(0, N * 8, 128))
    self.assert_still_works()

  def test_out_of_bounds_on_one_device(self):
    def kernel(x_ref, o_ref, send_sem, recv_sem):
      me, _, right = neighbours()
      o_ref[pl.ds(me // 3 * 8, 8)] = x_ref[...]   # device 3 writes rows 8-15
      pltpu.async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                              device_id=right).wait()
    f = on_blocks(kernel, space=VMEM, scratch_shapes=[DMA, DMA],
                  interpret=pltpu.InterpretParams())
    with self.assertRaisesRegex(IndexError, r"'kernel' on device 3: "
                                r"out-of-bounds write of o_ref\[8:16, 0:128\]"):
      f(ints(0, N * 8, 128))
    self.assert_still_works()

  def test_a_device_that_never_reaches_the_kernel(self):
    x = ints(0, N * 8, 128)
    f = on_mesh(lambda x: lax.cond(lax.axis_index("x") == 2, lambda x: x,
                                   self.ring(), x), mesh(N), P("x"), P("x"))
    start = time.monotonic()
    with self.assertRaisesRegex(RuntimeError, "device 2 finished without "
                                "reaching the kernel"):
      f(x)
    self.assertLess(time.monotonic() - start, 30)
    self.assert_still_works()

  def test_a_failing_device_fails_the_others_at_once(self):
    # An error in a callback of a program on several devices breaks jaxlib
    # 0.4.26's CPU client for the rest of the process: in a child process.
    script = textwrap.dedent("""
        import os, time
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
        import numpy as np, jax, jax.numpy as jnp
        from jax import lax
        from jax.experimental import io_callback, pallas as pl, shard_map
        from jax.experimental.pallas import tpu as pltpu
        def fail_on_0(i):
          if int(i) == 0:
            raise ValueError("device 0 fails")
          return np.int32(0)
        def kernel(o_ref, sem):
          me = lax.axis_index("x")
          io_callback(fail_on_0, jax.ShapeDtypeStruct((), jnp.int32), me,
                      ordered=True)
          pltpu.semaphore_signal(sem, device_id=lax.rem(me + 1, 4))
          pltpu.semaphore_wait(sem, 1)
        f = jax.jit(shard_map.shard_map(lambda x: pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            interpret=True, grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=0,
                scratch_shapes=[pltpu.SemaphoreType.REGULAR]))(),
            jax.sharding.Mesh(np.array(jax.devices()), ("x",)),
            in_specs=jax.sharding.PartitionSpec("x"),
            out_specs=jax.sharding.PartitionSpec("x"), check_rep=False))
        start = time.monotonic()
        try:
          f(jnp.zeros(4))
        except RuntimeError as e:
          print("after", round(time.monotonic() - start), "s:", e)
        os._exit(0)
        """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True,
                       text=True, timeout=300)
    self.assertRegex(r.stdout, r"after [0-9] s: Pallas kernel 'kernel' on "
                     r"device \d: a device's program finished \(or failed\) "
                     "before it ended the kernel: device 0 stopped in the "
                     "kernel", r.stdout + r.stderr)


class RunTest(jtu.JaxTestCase):
  """Each call is its own run, with the data where the sender points."""

  def test_devices_that_finish_at_different_times(self):
    # After the exchange, device 3 computes for longer than the timeout
    # while the others have ended the kernel: a correct kernel.
    x = ints(0, N * 8, 128)
    def kernel(x_ref, o_ref, send_sem, recv_sem):
      me, _, right = neighbours()
      pltpu.async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                              device_id=right).wait()
      @pl.when(me == N - 1)
      def _():   # seconds of work that does not reach the host runtime
        jax.debug.callback(lambda: time.sleep(3))
        o_ref[...] += 1 / 256
    f = on_blocks(kernel, space=VMEM, scratch_shapes=[DMA, DMA])
    saved = jax.config.jax_pallas_interpret_timeout
    jax.config.update("jax_pallas_interpret_timeout", 2.)
    try:
      start = time.monotonic()
      out = f(x)
      seconds = time.monotonic() - start
    finally:
      jax.config.update("jax_pallas_interpret_timeout", saved)
    want = np.roll(x, 8, axis=0)
    want[-8:] += 1 / 256
    np.testing.assert_allclose(out, want, rtol=1e-5)
    self.assertGreater(seconds, 2.)   # device 3 did work past the timeout

  @parameterized.parameters(True, pltpu.InterpretParams(),
                            pltpu.InterpretParams(dma_execution_mode="eager"))
  def test_a_copy_lands_where_the_sender_points(self, interpret):
    # The receiver waits through a descriptor that names its scratch buffer:
    # the bytes are counted there, the data is in o_ref, as on a TPU.
    x = ints(1, N * 8, 128)
    def kernel(x_ref, o_ref, scratch, send_sem, recv_sem):
      _, _, right = neighbours()
      scratch[...] = jnp.zeros_like(scratch)
      copy = pltpu.make_async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                                          device_id=right)
      copy.start()
      copy.wait_send()
      pltpu.make_async_remote_copy(x_ref, scratch, send_sem, recv_sem,
                                   device_id=right).wait_recv()
      o_ref[...] += scratch[...]
    f = on_blocks(kernel, space=VMEM, interpret=interpret, scratch_shapes=[
        pltpu.VMEM((8, 128), jnp.float32), DMA, DMA])
    np.testing.assert_array_equal(f(x), np.roll(x, 8, axis=0))

  def test_a_wait_for_fewer_bytes_than_were_sent(self):
    # A DMA semaphore counts bytes, as a TPU's does: a wait naming a smaller
    # buffer than the remote copy takes that many bytes (the copy lands
    # whole), and the rest is left on the semaphore when the kernel ends.
    def kernel(x_ref, o_ref, send_sem, recv_sem):
      _, _, right = neighbours()
      copy = pltpu.make_async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                                          device_id=right)
      copy.start()
      copy.wait_send()
      pltpu.make_async_remote_copy(
          x_ref.at[:4], o_ref.at[:4], send_sem, recv_sem,
          device_id=right).wait_recv()
    f = on_blocks(kernel, space=VMEM, scratch_shapes=[DMA, DMA],
                  interpret=pltpu.InterpretParams())
    x = ints(2, N * 8, 128)
    with self.assertWarnsRegex(pltpu.InterpretWarning,
                               r"DMA semaphore recv_sem is 2048 bytes at the "
                               "end of the kernel: DMAs never waited for"):
      np.testing.assert_array_equal(f(x), np.roll(x, 8, axis=0))

  def test_two_threads_on_disjoint_meshes(self):
    x = ints(3, N * 8, 128)
    halves = jax.devices()[:N], jax.devices()[N:2 * N]
    calls = [jax.jit(shard_map.shard_map(
        FailureTest().ring(shift=shift), Mesh(np.array(d), ("x",)),
        in_specs=P("x"), out_specs=P("x"), check_rep=False))
             for d, shift in zip(halves, (1, -1))]
    results, errors = {}, []
    def run(k):
      try:
        for _ in range(3):
          results[k] = np.asarray(calls[k](x))
      except Exception as e:  # pylint: disable=broad-except
        errors.append(e)
    threads = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
    for t in threads:
      t.start()
    for t in threads:
      t.join(300)
    self.assertEqual(errors, [])
    np.testing.assert_array_equal(results[0], np.roll(x, 8, axis=0))
    np.testing.assert_array_equal(results[1], np.roll(x, -8, axis=0))

  def test_a_race_across_devices(self):
    # Each device writes into its right neighbour's o_ref while the neighbour
    # may still read it; a barrier first orders the read before the write.
    def kernel(x_ref, o_ref, send_sem, recv_sem, *, ordered):
      _, left, right = neighbours()
      o_ref[...] = x_ref[...]
      y = o_ref[...]
      if ordered:
        barrier(left, right)
      pltpu.async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                              device_id=right).wait()
      o_ref[...] += y
    x = ints(4, N * 8, 128)
    def run(ordered):
      return on_blocks(functools.partial(kernel, ordered=ordered),
                       space=VMEM, scratch_shapes=[DMA, DMA], barrier=ordered,
                       interpret=pltpu.InterpretParams(detect_races=True))(x)
    with self.assertWarnsRegex(
        pltpu.RaceWarning, r"race: a DMA into o_ref on device \d started at "
        r".* and the access at .*, which no semaphore orders before it"):
      run(False)
    with warnings.catch_warnings():
      warnings.simplefilter("error", pltpu.InterpretWarning)
      np.testing.assert_array_equal(run(True), x + np.roll(x, 8, axis=0))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
