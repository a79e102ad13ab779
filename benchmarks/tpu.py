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
"""The fork on a TPU against another JAX on the same chip, in one run.

    python benchmarks/tpu.py --baseline-pythonpath DIR [--rounds 2]

Each round runs a worker process with the fork (this interpreter's jax)
and one with the baseline (the jax that DIR on PYTHONPATH gives, e.g. the
machine's own), one at a time, since one process at a time holds the chip;
it prints each worker's figures and their ratios (fork / baseline) per round:

- an 8192^3 bf16 matmul (f32 accumulation; `--matmul N` for N^3), TFLOP/s;
- a tiny jitted call (x + 1 on a scalar), wall time per call, waited for;
- the fork's only: the refactored `emit_pipeline` (patch 0015) 2048^3 bf16
  matmul, TFLOP/s, and its time over XLA's dot of the same operands.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _timed(f, *args, reps, wait_each=False):
  """Seconds per call of f(*args) (compiled first), the median of 5 batches
  of `reps` calls: each waited for, or the batch's last."""
  import jax  # pylint: disable=g-import-not-at-top
  jax.block_until_ready(f(*args))
  times = []
  for _ in range(5):
    t0 = time.perf_counter()
    for _ in range(reps):
      out = f(*args)
      if wait_each:
        jax.block_until_ready(out)
    jax.block_until_ready(out)
    times.append((time.perf_counter() - t0) / reps)
  return statistics.median(times)


def worker(with_pipeline: bool, n: int) -> dict[str, float]:
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  x = jnp.ones((n, n), jnp.bfloat16)
  dot = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32))
  out = {"jax": jax.__version__,
         "matmul_tflops": 2 * n**3 / _timed(dot, x, x, reps=20) / 1e12}
  tiny = jax.jit(lambda v: v + 1)
  out["tiny_call_us"] = _timed(tiny, jnp.float32(1), reps=1000,
                               wait_each=True) * 1e6
  if with_pipeline and jax.default_backend() == "tpu":
    out.update(pipeline())
  return out


def pipeline() -> dict[str, float]:
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from jax.experimental import pallas as pl  # pylint: disable=g-import-not-at-top
  from jax.experimental.pallas import tpu as pltpu  # pylint: disable=g-import-not-at-top
  m = k = n = 2048
  tm, tk, tn = 512, 512, 512
  def body(x_ref, y_ref, z_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
      acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)
    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...],
                            preferred_element_type=jnp.float32)
    @pl.when(pl.program_id(2) == k // tk - 1)
    def _():
      z_ref[...] = acc_ref[...].astype(z_ref.dtype)
  def kernel(x_ref, y_ref, z_ref, acc_ref):
    pltpu.emit_pipeline(
        lambda x, y, z: body(x, y, z, acc_ref),
        grid=(m // tm, n // tn, k // tk),
        in_specs=[pl.BlockSpec(lambda i, j, l: (i, l), (tm, tk)),
                  pl.BlockSpec(lambda i, j, l: (l, j), (tk, tn))],
        out_specs=pl.BlockSpec(lambda i, j, l: (i, j), (tm, tn)),
    )(x_ref, y_ref, z_ref)
  spec = pl.BlockSpec(memory_space=pltpu.TPUMemorySpace.ANY)
  f = jax.jit(pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0, grid=(), in_specs=[spec, spec],
          out_specs=spec,
          scratch_shapes=[pltpu.VMEM((tm, tn), jnp.float32)])))
  x = jax.random.normal(jax.random.PRNGKey(0), (m, k), jnp.bfloat16)
  y = jax.random.normal(jax.random.PRNGKey(1), (k, n), jnp.bfloat16)
  dot = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32)
                .astype(jnp.bfloat16))
  error = float(jnp.max(jnp.abs(f(x, y).astype(jnp.float32) -
                                dot(x, y).astype(jnp.float32))))
  t_pipe = _timed(f, x, y, reps=50)
  t_xla = _timed(dot, x, y, reps=50)
  return {"pipeline_tflops": 2 * m * n * k / t_pipe / 1e12,
          "pipeline_over_xla_time": t_pipe / t_xla,
          "pipeline_max_abs_error_vs_xla": error}


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--baseline-pythonpath", required=True)
  p.add_argument("--rounds", type=int, default=2)
  p.add_argument("--matmul", type=int, default=8192, help="its size")
  p.add_argument("--worker", choices=["fork", "baseline"])
  args = p.parse_args()
  if args.worker:
    print(json.dumps(worker(args.worker == "fork", args.matmul)))
    return
  envs = {"fork": dict(os.environ),
          "baseline": dict(os.environ, PYTHONPATH=args.baseline_pythonpath)}
  for r in range(args.rounds):
    results = {}
    for name, env in envs.items():
      proc = subprocess.run([sys.executable, __file__, "--worker", name,
                             "--baseline-pythonpath", "-",
                             "--matmul", str(args.matmul)], env=env,
                            capture_output=True, text=True, check=False)
      if proc.returncode:
        sys.exit(f"{name} worker failed:\n{proc.stderr[-3000:]}")
      results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
      print(f"round {r} {name}: {results[name]}", flush=True)
    f, b = results["fork"], results["baseline"]
    print(f"round {r}: matmul TFLOP/s fork/baseline "
          f"{f['matmul_tflops'] / b['matmul_tflops']:.3f}; tiny call time "
          f"fork/baseline {f['tiny_call_us'] / b['tiny_call_us']:.3f}",
          flush=True)


if __name__ == "__main__":
  main()
