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
"""Pallas TPU kernels in interpret mode on CPU: what a remote copy costs.

Every figure is a ratio of medians from this one run (wall time per call of
a jitted kernel, on 4 host CPU devices under shard_map):

  * remote / local copy: a kernel that sends K copies of a (8, 128) float32
    block round a ring (`async_remote_copy(...).wait()`, through the host
    runtime of jax/_src/pallas/mosaic/interpret.py) against the same
    kernel with local copies (`async_copy(...).wait()`, no host round trip);
  * local copy in a kernel that communicates / in one that does not: the
    same local copies, in a kernel that also signals a neighbour once (its
    semaphores then live in the host runtime);
  * with --baseline TREE (a materialized jax tree, e.g. of an older series):
    kernels that do not communicate (a double-buffered DMA loop; the
    pipeline emitter's matmul), this jax / TREE's, in interleaved rounds.

Run: python benchmarks/pallas_interpret_devices.py [--rounds N] [--baseline TREE]
(with the fork importable, e.g. PYTHONPATH=<materialized tree>).
"""
from __future__ import annotations

import argparse
import statistics
import sys

import _common

_WORKER = r'''
import json, os, statistics, sys, time
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
import numpy as np
import jax, jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl, shard_map
from jax.experimental.pallas import tpu as pltpu
N, K = 4, int(sys.argv[1])
ANY = pltpu.TPUMemorySpace.ANY
DMA, REGULAR = pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.REGULAR

def call(kernel, out_shape, *args, scratch=(), space=ANY):
  spec = pl.BlockSpec(memory_space=space)
  return pl.pallas_call(kernel, out_shape=out_shape, interpret=True,
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0, in_specs=[spec] * len(args), out_specs=spec,
          scratch_shapes=scratch))(*args)

def ring(kind):
  def kernel(x_ref, o_ref, ready, send, recv):
    right = lax.rem(lax.axis_index("x") + 1, N)
    if kind == "local+signal":  # makes the kernel one that communicates
      pltpu.semaphore_signal(ready, device_id=right)
      pltpu.semaphore_wait(ready)
    def step(i, c):
      if kind == "remote":
        pltpu.async_remote_copy(x_ref, o_ref, send, recv,
                                device_id=right).wait()
      else:
        pltpu.async_copy(x_ref, o_ref, recv).wait()
      return c
    lax.fori_loop(0, K, step, 0)
  f = jax.jit(shard_map.shard_map(
      lambda x: call(kernel, jax.ShapeDtypeStruct(x.shape, x.dtype), x,
                     scratch=[REGULAR, DMA, DMA]),
      jax.sharding.Mesh(np.array(jax.devices()[:N]), ("x",)),
      in_specs=jax.sharding.PartitionSpec("x"),
      out_specs=jax.sharding.PartitionSpec("x"), check_rep=False))
  return f, (jnp.ones((N * 8, 128), jnp.float32),)

def dma_loop():
  def kernel(x_ref, o_ref, buf, sems):
    def copy(i, slot):
      return pltpu.make_async_copy(x_ref.at[i], buf.at[slot], sems.at[slot])
    copy(0, 0).start()
    def body(i, acc):
      slot = i % 2
      @pl.when(i + 1 < K)
      def _():
        copy(i + 1, 1 - slot).start()
      copy(i, slot).wait()
      return acc + buf[slot]
    o_ref[...] = lax.fori_loop(0, K, body, jnp.zeros((8, 128), jnp.float32))
  return jax.jit(lambda x: call(
      kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32), x,
      scratch=[pltpu.VMEM((2, 8, 128), jnp.float32), DMA((2,))])), (
          jnp.ones((K, 8, 128), jnp.float32),)

def pipeline_matmul():
  def body(x_ref, y_ref, z_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
      z_ref[...] = jnp.zeros(z_ref.shape, jnp.float32)
    z_ref[...] += x_ref[...] @ y_ref[...]
  def kernel(x_ref, y_ref, z_ref):
    pltpu.emit_pipeline(
        body, grid=(2, 2, 2),
        in_specs=[pl.BlockSpec(lambda i, j, k: (i, k), (128, 128)),
                  pl.BlockSpec(lambda i, j, k: (k, j), (128, 128))],
        out_specs=pl.BlockSpec(lambda i, j, k: (i, j), (128, 128)))(
            x_ref, y_ref, z_ref)
  x = jnp.ones((256, 256), jnp.float32)
  return jax.jit(lambda x, y: call(
      kernel, jax.ShapeDtypeStruct((256, 256), jnp.float32), x, y)), (x, x)

CASES = {"remote": lambda: ring("remote"), "local": lambda: ring("local"),
         "local+signal": lambda: ring("local+signal"), "dma_loop": dma_loop,
         "pipeline_matmul": pipeline_matmul}
compiled = {}
print(json.dumps({"version": jax.__version__}), flush=True)
for line in sys.stdin:
  what, number = line.split()
  if what not in compiled:
    f, args = CASES[what]()
    jax.block_until_ready(f(*args))
    compiled[what] = f, args
  f, args = compiled[what]
  times = []
  for _ in range(int(number)):
    t0 = time.perf_counter()
    jax.block_until_ready(f(*args))
    times.append(time.perf_counter() - t0)
  print(json.dumps(statistics.median(times)), flush=True)
'''


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--rounds", type=int, default=5)
  ap.add_argument("--calls", type=int, default=5)
  ap.add_argument("--copies", type=int, default=64, help="K")
  ap.add_argument("--baseline", default=None, metavar="TREE")
  args = ap.parse_args()

  fork = _common.Worker("fork", _WORKER, str(args.copies),
                        env={"JAX_PLATFORMS": "cpu"})
  baseline = None
  if args.baseline:
    baseline = _common.Worker("fork", _WORKER, str(args.copies),
                              env={"JAX_PLATFORMS": "cpu",
                                   "PYTHONPATH": args.baseline})
  print(f"jax {fork.info['version']}, {args.rounds} rounds of {args.calls} "
        f"calls, K = {args.copies} copies of f32[8, 128] per call")
  times: dict[str, list[float]] = {}
  for _ in range(args.rounds):
    for what in ("remote", "local", "local+signal", "dma_loop",
                 "pipeline_matmul"):
      times.setdefault(what, []).append(
          float(fork.call(what, str(args.calls))))
      if baseline and what in ("dma_loop", "pipeline_matmul"):
        times.setdefault("baseline " + what, []).append(
            float(baseline.call(what, str(args.calls))))
  med = {k: statistics.median(v) for k, v in times.items()}
  per_copy = lambda what: med[what] / args.copies * 1e6
  print(f"remote copy: {per_copy('remote'):.0f} us, local copy "
        f"{per_copy('local'):.1f} us per copy (whole call / K)")
  print(f"remote / local copy: {med['remote'] / med['local']:.1f}")
  print("local copy in a kernel that communicates / in one that does not: "
        f"{med['local+signal'] / med['local']:.1f}")
  if baseline:
    print(f"baseline {baseline.info['version']} at {args.baseline}")
    for what in ("dma_loop", "pipeline_matmul"):
      print(f"{what}: this / baseline {med[what] / med['baseline ' + what]:.2f}")


if __name__ == "__main__":
  sys.exit(main())
