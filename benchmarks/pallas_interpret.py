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
"""Pallas TPU interpret mode: this jax's against upstream's newest.

Each case runs in a process of its own (so that its peak RSS is its own),
for each interpreter, in interleaved rounds; the figures are ratios of the
medians of one run:

  * matmul N: an N^3 float32 matmul on an (N/128)^3 grid of BlockSpec'd
    (128, 128) blocks (`--matmul 512 1024 2048`);
  * dma_loop: 32 double-buffered DMAs of f32[8, 128] blocks, HBM to VMEM;
  * ring: a remote copy round a ring of 8 host CPU devices (shard_map).

Interpreters: this jax's `interpret=True`, `InterpretParams()` and
`InterpretParams(detect_races=True)`; with `--upstream PYTHON` (a Python
whose jax is upstream's, e.g. a venv with `pip install 'jax[cpu]'`) its
`InterpretParams()`; with `--baseline TREE ...` (materialized jax trees)
each tree's `interpret=True`.

Run: python benchmarks/pallas_interpret.py --upstream ~/venv-jax/bin/python
[--baseline TREE ...] [--rounds N] [--matmul 512 ...] [--cases ...]
(with this jax importable, e.g. PYTHONPATH=<materialized tree>).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import _common

_WORKER = r'''
import json, os, resource, statistics, sys, time
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np
import jax, jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
case, mode, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
NEW = hasattr(jax, "shard_map")   # upstream's newest, not 0.4.26
ANY = pl.ANY if NEW else pltpu.TPUMemorySpace.ANY
interpret = True if mode == "true" else pltpu.InterpretParams(
    detect_races=mode == "races")

def shard_map(f, mesh, spec):
  if NEW:
    return jax.shard_map(f, mesh=mesh, in_specs=spec, out_specs=spec,
                         check_vma=False)
  from jax.experimental import shard_map as sm
  return sm.shard_map(f, mesh, in_specs=spec, out_specs=spec,
                      check_rep=False)

def matmul(n):
  def body(x_ref, y_ref, z_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
      z_ref[...] = jnp.zeros(z_ref.shape, jnp.float32)
    z_ref[...] += x_ref[...] @ y_ref[...]
  g = n // 128
  f = pl.pallas_call(
      body, out_shape=jax.ShapeDtypeStruct((n, n), jnp.float32), grid=(g,) * 3,
      in_specs=[pl.BlockSpec(block_shape=(128, 128),
                             index_map=lambda i, j, k: (i, k)),
                pl.BlockSpec(block_shape=(128, 128),
                             index_map=lambda i, j, k: (k, j))],
      out_specs=pl.BlockSpec(block_shape=(128, 128),
                             index_map=lambda i, j, k: (i, j)),
      interpret=interpret)
  x = jnp.asarray(np.random.RandomState(0).randint(-3, 4, (n, n)), jnp.float32)
  return jax.jit(f), (x, x), lambda z: np.testing.assert_allclose(
      z, np.asarray(x) @ np.asarray(x), rtol=1e-5)

def dma_loop(k=32):
  def kernel(x_ref, o_ref, buf, sems):
    def copy(i, slot):
      return pltpu.make_async_copy(x_ref.at[i], buf.at[slot], sems.at[slot])
    copy(0, 0).start()
    def step(i, acc):
      slot = i % 2
      @pl.when(i + 1 < k)
      def _():
        copy(i + 1, 1 - slot).start()
      copy(i, slot).wait()
      return acc + buf[slot]
    o_ref[...] = lax.fori_loop(0, k, step, jnp.zeros((8, 128), jnp.float32))
  f = pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
      interpret=interpret, grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0, in_specs=[pl.BlockSpec(memory_space=ANY)],
          scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                          pltpu.SemaphoreType.DMA((2,))]))
  x = jnp.ones((k, 8, 128), jnp.float32)
  return jax.jit(f), (x,), lambda o: np.testing.assert_array_equal(o, k)

def ring(n=8):
  def kernel(x_ref, o_ref, send, recv):
    right = lax.rem(lax.axis_index("x") + 1, n)
    pltpu.make_async_remote_copy(
        x_ref, o_ref, send, recv, device_id=right,
        device_id_type=pltpu.DeviceIdType.LOGICAL).start()
    pltpu.make_async_remote_copy(
        x_ref, o_ref, send, recv, device_id=right,
        device_id_type=pltpu.DeviceIdType.LOGICAL).wait()
  def permute(x):
    spec = pl.BlockSpec(memory_space=ANY)
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=interpret, grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, in_specs=[spec], out_specs=spec,
            scratch_shapes=[pltpu.SemaphoreType.DMA] * 2))(x)
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:n]), ("x",))
  f = jax.jit(shard_map(permute, mesh, jax.sharding.PartitionSpec("x")))
  x = jnp.arange(n * 8 * 128, dtype=jnp.float32).reshape(n * 8, 128)
  return f, (x,), lambda y: np.testing.assert_array_equal(
      y, np.roll(np.asarray(x), 8, axis=0))

name, _, size = case.partition(":")
f, args, check = {"matmul": lambda: matmul(int(size)), "dma_loop": dma_loop,
                  "ring": ring}[name]()
t0 = time.perf_counter()
check(jax.block_until_ready(f(*args)))
first = time.perf_counter() - t0
times = []
for _ in range(calls):
  t0 = time.perf_counter()
  jax.block_until_ready(f(*args))
  times.append(time.perf_counter() - t0)
print(json.dumps(dict(
    version=jax.__version__, first=first, steady=statistics.median(times),
    peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))
'''


def run(python: str, env: dict[str, str], case: str, mode: str,
        calls: int) -> dict[str, float]:
  full_env = {**os.environ, **env, "JAX_PLATFORMS": "cpu",
              "PYTHONHASHSEED": "0"}
  r = subprocess.run([python, "-c", _WORKER, case, mode, str(calls)],
                     env=full_env, capture_output=True, text=True, check=False)
  if r.returncode:
    raise RuntimeError(f"{case} {mode} on {python} failed:\n{r.stderr[-3000:]}")
  return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--upstream", metavar="PYTHON",
                  help="a Python whose jax is upstream's newest")
  ap.add_argument("--baseline", metavar="TREE", nargs="*", default=[],
                  help="other jax trees, for their interpret=True")
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--calls", type=int, default=5,
                  help="steady-state calls per process (1 for matmul 2048)")
  ap.add_argument("--matmul", type=int, nargs="*", default=[512, 1024, 2048])
  ap.add_argument("--cases", nargs="*", default=None)
  args = ap.parse_args()
  cases = args.cases or [f"matmul:{n}" for n in args.matmul] + [
      "dma_loop", "ring"]
  runs = [("true", sys.executable, {}), ("params", sys.executable, {}),
          ("races", sys.executable, {})]
  if args.upstream:
    runs.append(("upstream params", args.upstream, {"PYTHONPATH": ""}))
  baselines = [f"baseline{k} true" for k in range(len(args.baseline))]
  for label, tree in zip(baselines, args.baseline):
    print(f"{label.split()[0]}: {tree}")
    runs.append((label, sys.executable, {"PYTHONPATH": tree}))
  results: dict[tuple[str, str], list[dict[str, float]]] = {}
  versions = {}
  for _ in range(args.rounds):
    for case in cases:
      calls = 1 if case == "matmul:2048" else args.calls
      for label, python, env in runs:
        r = run(python, env, case, label.split()[-1], calls)
        versions[label] = r["version"]
        results.setdefault((case, label), []).append(r)
  med = lambda case, label, key: statistics.median(
      r[key] for r in results[case, label])
  print("interpreters: " + ", ".join(
      f"{label} (jax {v})" for label, v in versions.items()))
  print(f"{args.rounds} rounds; seconds per call, steady state (median), "
        "and peak RSS (MB)")
  header = ["case", *[label for label, *_ in runs]]
  print("| " + " | ".join(header) + " |")
  print("|" + " --- |" * len(header))
  for case in cases:
    cells = [f"{med(case, label, 'steady'):.4g} s, "
             f"{med(case, label, 'peak_rss_mb'):.0f} MB" for label, *_ in runs]
    print(f"| {case} | " + " | ".join(cells) + " |")
  print("\nratios (steady state):")
  for case in cases:
    t = {label: med(case, label, "steady") for label, *_ in runs}
    line = (f"{case}: params / true {t['params'] / t['true']:.2f}, "
            f"races / true {t['races'] / t['true']:.2f}")
    if args.upstream:
      u = t["upstream params"]
      line += (f"; upstream params / params {u / t['params']:.1f}, "
               f"upstream params / true {u / t['true']:.1f}")
    for label in baselines:
      line += f"; {label} / true {t[label] / t['true']:.2f}"
    print(line)
  matmuls = sorted(n for n in args.matmul if f"matmul:{n}" in cases)
  for a, b in zip(matmuls, matmuls[1:]):
    for label, *_ in runs:
      print(f"matmul {a} -> {b} ({(b // a) ** 3}x the steps), {label}: "
            f"{med(f'matmul:{b}', label, 'steady') / med(f'matmul:{a}', label, 'steady'):.1f}x the time")


if __name__ == "__main__":
  sys.exit(main())
