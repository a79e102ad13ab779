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
host CPU devices (`jax/_src/pallas/mosaic/interpret_devices.py`).

Data are small integers in float32, so every result is exact whatever the
order of summation, and is compared with NumPy exactly. A kernel that fails
runs in a child process: on jaxlib 0.4.26 an error in a program on several
CPU devices makes every later such program in the process fail too."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
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

ANY = pltpu.TPUMemorySpace.ANY
VMEM = pltpu.TPUMemorySpace.VMEM
DMA = pltpu.SemaphoreType.DMA
REGULAR = pltpu.SemaphoreType.REGULAR
N = 4  # devices in the 1-D tests


def ints(seed, *shape):
  return np.random.RandomState(seed).randint(-3, 4, shape).astype(np.float32)


def mesh(*shape, names=("x",)):
  return Mesh(np.array(jax.devices()[:np.prod(shape)]).reshape(shape), names)


def kernel_call(kernel, out_shape, *args, space=ANY, scratch_shapes=(),
                grid=(), barrier=False):
  """pallas_call of `kernel` in interpret mode, every operand whole."""
  spec = pl.BlockSpec(memory_space=space)
  n_out = len(out_shape) if isinstance(out_shape, (list, tuple)) else 1
  return pl.pallas_call(
      kernel, out_shape=out_shape, interpret=True,
      compiler_params=dict(mosaic=dict(collective_id=0)) if barrier else {},
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0, grid=grid, in_specs=[spec] * len(args),
          out_specs=[spec] * n_out if n_out > 1 else spec,
          scratch_shapes=scratch_shapes))(*args)


def on_mesh(f, m, in_specs, out_specs):
  return jax.jit(shard_map.shard_map(f, m, in_specs=in_specs,
                                     out_specs=out_specs, check_rep=False))


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
    f = on_mesh(lambda x: kernel_call(
        kernel, jax.ShapeDtypeStruct(x.shape, x.dtype), x,
        scratch_shapes=[DMA, DMA]), mesh(N), P("x"), P("x"))
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
    f = on_mesh(lambda x: kernel_call(
        kernel, jax.ShapeDtypeStruct(x.shape, x.dtype), x, space=VMEM,
        scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32), DMA, DMA,
                        REGULAR]), mesh(N), P("x"), P("x"))
    total = x.reshape(N, 8, 128).sum(0)
    np.testing.assert_array_equal(f(x), np.tile(total, (N, 1)))

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
    f = on_mesh(lambda x: kernel_call(
        kernel, jax.ShapeDtypeStruct(x.shape, x.dtype), x,
        space=VMEM, scratch_shapes=[DMA, DMA, REGULAR]),
        mesh(2, 4, names=("y", "x")), P("y", "x"), P("y", "x"))
    blocks = x.reshape(2, 8, 4, 128)
    np.testing.assert_array_equal(
        f(x), np.roll(blocks, 1, axis=2).reshape(x.shape))

  def test_all_gather_kernel_of_jax_0_4_26(self):
    from jax.experimental.pallas.ops.tpu import all_gather
    m = mesh(N)
    x = ints(4, N * 8, 128)
    pallas_call = pl.pallas_call
    with mock.patch.object(pl, "pallas_call", lambda *args, **kwargs:
                           pallas_call(*args, **{**kwargs, "interpret": True})):
      out = all_gather.all_gather(
          jax.device_put(x, jax.sharding.NamedSharding(m, P("x"))), mesh=m,
          axis_name="x")
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
    def kernel(x_ref, y_ref, o_ref, gathered, send_sem, recv_sem):
      step = pl.program_id(0)
      me, left, right = neighbours()
      shard = lax.rem(me + N - step, N)
      @pl.when(step == 0)
      def _():
        barrier(left, right)
        pltpu.async_copy(x_ref, gathered.at[me], send_sem).wait()
        o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)
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
        scratch_shapes=[DMA, DMA], grid=(N,), barrier=True)[0],
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
      o_ref[0, 0] = lax.convert_element_type(pltpu.device_id(), jnp.float32)
    f = on_mesh(lambda x: kernel_call(
        kernel, jax.ShapeDtypeStruct(x.shape, x.dtype), x, space=VMEM,
        scratch_shapes=[DMA]), mesh(2, 4, names=("y", "x")), P("y", "x"),
        P("y", "x"))
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
    with self.assertRaisesRegex(ValueError, r"pltpu.device_id\(\) in interpret"
                                " mode needs the kernel to run under shard_map"):
      kernel_call(lambda o_ref: o_ref.__setitem__(0, pltpu.device_id()),
                  jax.ShapeDtypeStruct((1,), jnp.int32), space=pltpu.SMEM)

  def test_the_barrier_semaphore_is_the_kernels_with_a_collective_id(self):
    def kernel(o_ref):
      sem = pltpu.get_barrier_semaphore()
      pltpu.semaphore_signal(sem, 3)
      o_ref[0] = pltpu.semaphore_read(sem)
      pltpu.semaphore_wait(sem, 2)
      o_ref[1] = pltpu.semaphore_read(sem)
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


# A failing kernel, in a child process. The kernel sends a ring permute,
# preceded by what fails; every device must fail within the timeout.
_FAILING = """
import os, time
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_PALLAS_INTERPRET_TIMEOUT"] = "{timeout}"
import numpy as np, jax, jax.numpy as jnp
from jax import lax
from jax.experimental import io_callback, pallas as pl, shard_map
from jax.experimental.pallas import tpu as pltpu
from jax._src.pallas.mosaic import interpret_devices
def fail_on_0(i):
  if int(i) == 0:
    raise ValueError("device 0 fails")
  return np.int32(0)
def kernel(x_ref, o_ref, sem, send_sem, recv_sem):
  me = lax.axis_index("x")
  right = lax.rem(me + 1, 4)
  {failure}
  pltpu.async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                          device_id=right).wait()
spec = pl.BlockSpec(memory_space=pltpu.TPUMemorySpace.ANY)
f = jax.jit(shard_map.shard_map(lambda x: pl.pallas_call(
    kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True,
    grid_spec=pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=0, in_specs=[spec], out_specs=spec,
        scratch_shapes=[pltpu.SemaphoreType.REGULAR] +
                       [pltpu.SemaphoreType.DMA] * 2))(x),
    jax.sharding.Mesh(np.array(jax.devices()), ("x",)),
    in_specs=jax.sharding.PartitionSpec("x"),
    out_specs=jax.sharding.PartitionSpec("x"), check_rep=False))
start = time.monotonic()
try:
  np.asarray(f(jnp.zeros((32, 128))))
except Exception:
  print("raised after", round(time.monotonic() - start), "s")
  print("runs left:", sum(len(g.runs) for g in interpret_devices._groups.values()))
  os._exit(1)
print("no error")
"""


class FailureTest(jtu.JaxTestCase):
  """Each device of a failing kernel ends with an error, in bounded time."""

  def run_failing(self, failure, timeout=60):
    start = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-c", _FAILING.format(failure=failure,
                                               timeout=timeout)],
        capture_output=True, text=True, timeout=300)
    return r, time.monotonic() - start

  def test_wait_that_nothing_satisfies_fails_every_device_at_once(self):
    # Nobody signals `sem`: when each device waits, none can proceed; the
    # default timeout (60 s) is never reached.
    r, seconds = self.run_failing("pltpu.semaphore_wait(sem, 1)")
    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
    self.assertLess(seconds, 60)
    self.assertIn("no device can proceed: device 0 waits for semaphore 1 to "
                  "reach 1; device 1 waits for semaphore 1", r.stderr)
    self.assertIn("runs left: 0", r.stdout)

  def test_address_outside_the_mesh_fails_every_device(self):
    r, _ = self.run_failing("pltpu.semaphore_signal(sem, device_id=me + 4)")
    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
    # Whichever device signals first names itself.
    self.assertRegex(r.stderr, r"device (\d) addressed device \d, but the "
                     r"mesh \{'x': 4\} has devices 0 to 3")
    self.assertIn("runs left: 0", r.stdout)

  def test_error_on_one_device_fails_the_others_after_the_timeout(self):
    # Device 0 fails before it signals; its neighbour waits 2 s for it.
    r, seconds = self.run_failing(
        "io_callback(fail_on_0, jax.ShapeDtypeStruct((), jnp.int32), me,"
        " ordered=True)\n"
        "  pltpu.semaphore_signal(sem, device_id=right)\n"
        "  pltpu.semaphore_wait(sem, 1)", timeout=2)
    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
    self.assertIn("ValueError: device 0 fails", r.stderr)
    # Whichever device times out first reports every device's state.
    self.assertRegex(r.stderr, r"device \d waited 2 s "
                     r"\(jax_pallas_interpret_timeout\) for [^:]+: device 0 "
                     r"runs; device 1 waits for semaphore 1 to reach 1")
    self.assertLess(seconds, 120)


class HostRuntimeTest(jtu.JaxTestCase):
  """The runtime itself, with threads as devices (no XLA)."""

  def test_a_run_after_a_device_vanished_pairs_devices_afresh(self):
    from jax._src.pallas.mosaic import interpret_devices as rt
    kernel = rt._Kernel("k", (100, 101), ("x",), (2,))
    def device(me, results, signal=True):
      try:
        rt._enter(kernel, me)
        if signal:
          rt._signal(kernel, me, 1 - me, 7, 1)
        rt._wait(kernel, me, 7, 1)
        rt._end(kernel, me)
        results[me] = "ok"
      except RuntimeError as e:
        results[me] = str(e)
    with _timeout(0.5):
      # Run 1: device 0 enters, then fails outside the runtime.
      rt._enter(kernel, 0)
      results = {}
      t = threading.Thread(target=device, args=(1, results))
      t.start()
      t.join(10)
      self.assertIn("device 1 waited 0.5 s", results[1])
      # Run 2: both devices, each signalling the other.
      results = {}
      threads = [threading.Thread(target=device, args=(d, results))
                 for d in (0, 1)]
      for t in threads:
        t.start()
      for t in threads:
        t.join(10)
    self.assertEqual(results, {0: "ok", 1: "ok"})
    self.assertEqual(rt._groups, {})


class _timeout:
  """Sets jax_pallas_interpret_timeout globally (devices' threads read it)."""

  def __init__(self, seconds):
    self.seconds = seconds

  def __enter__(self):
    self.saved = jax.config.jax_pallas_interpret_timeout
    jax.config.update("jax_pallas_interpret_timeout", self.seconds)

  def __exit__(self, *exc):
    jax.config.update("jax_pallas_interpret_timeout", self.saved)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
