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
"""Reverse mode through generic `lax.reduce_window`: speed and memory.

For float32 (1024, 1024), window (3, 3), SAME; (512, 512), window (8, 8),
SAME (windows longer than 4 are reduced by doubling); and NHWC
(32, 64, 64, 64), window (1, 3, 3, 1), strides (1, 2, 2, 1), SAME, with a
multiply and a log-sum-exp reducer written as Python functions, reports in
one run:

* jitted grad time / jitted primal time (goal: <= 4), grad of
  0.5 * sum(out ** 2), which needs the primal output as well; wall-clock
  medians, and CPU time of all threads (steadier on a shared machine);
* jitted grad time / the workaround's jitted grad time, where the workaround
  materializes the windows with `lax.conv_general_dilated_patches` (after
  padding with the reducer's identity) and reduces them with jnp (goal: <= 1);
* memory of the compiled grad against the workaround's: XLA's buffer
  assignment (temp + output bytes, parameters excluded; CPU's
  memory_analysis() reports zeros in this jaxlib), and the growth of peak
  RSS while running it once, each in a fresh subprocess (goal: <= 1).

Run: PYTHONPATH=<fork tree> python benchmarks/reduce_window_grad.py [--quick]
"""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CASES = {
    "2d": dict(shape=(1024, 1024), dims=(3, 3), strides=(1, 1)),
    "2d_8x8": dict(shape=(512, 512), dims=(8, 8), strides=(1, 1)),
    "nhwc": dict(shape=(32, 64, 64, 64), dims=(1, 3, 3, 1),
                 strides=(1, 2, 2, 1)),
}
QUICK_CASES = {
    "2d": dict(shape=(256, 256), dims=(3, 3), strides=(1, 1)),
    "2d_8x8": dict(shape=(128, 128), dims=(8, 8), strides=(1, 1)),
    "nhwc": dict(shape=(4, 32, 32, 16), dims=(1, 3, 3, 1),
                 strides=(1, 2, 2, 1)),
}
REDUCERS = ("mul", "logaddexp")
VARIANTS = ("primal", "grad", "workaround_grad", "workaround_primal")


def _build(case: dict, reducer: str):
  """Returns (x, {variant: jitted fn}) for one case and reducer."""
  import numpy as np
  import jax
  import jax.numpy as jnp
  from jax import lax
  from jax.scipy.special import logsumexp

  shape, dims, strides = case["shape"], case["dims"], case["strides"]
  if reducer == "mul":
    comp = lambda a, b: a * b
    init, pad_value = np.float32(1), np.float32(1)
    reduce = lambda p, axis: jnp.prod(p, axis=axis)
  else:
    comp = lambda a, b: jnp.logaddexp(a, b)
    # The patches are a convolution: -inf * 0 would give NaN, so the
    # workaround pads with a large finite negative instead of -inf.
    init, pad_value = np.float32(-np.inf), np.float32(-1e30)
    reduce = lambda p, axis: logsumexp(p, axis=axis)
  pads = lax.padtype_to_pads(shape, dims, strides, "SAME")

  def bench_primal(x):
    return lax.reduce_window(x, init, comp, dims, strides, "SAME")

  def workaround(x):
    xp = lax.pad(x, pad_value, [(lo, hi, 0) for lo, hi in pads])
    if len(shape) == 2:
      p = lax.conv_general_dilated_patches(xp[None, None], dims, strides,
                                           "VALID")
      return reduce(p[0], 0)
    p = lax.conv_general_dilated_patches(
        xp, dims[1:3], strides[1:3], "VALID",
        dimension_numbers=("NHWC", "OIHW", "NHWC"))
    p = p.reshape(p.shape[:3] + (shape[3], dims[1] * dims[2]))
    return reduce(p, -1)

  # A loss that needs the primal output, so grad runs forward and backward.
  def bench_grad(x):
    return jax.grad(lambda x: 0.5 * jnp.sum(bench_primal(x) ** 2))(x)

  def bench_workaround_grad(x):
    return jax.grad(lambda x: 0.5 * jnp.sum(workaround(x) ** 2))(x)

  def bench_workaround_primal(x):
    return workaround(x)

  rng = np.random.RandomState(0)
  x = jnp.asarray(rng.uniform(0.9, 1.1, shape).astype(np.float32))
  fns = {"primal": bench_primal, "grad": bench_grad,
         "workaround_grad": bench_workaround_grad,
         "workaround_primal": bench_workaround_primal}
  return x, {k: jax.jit(v) for k, v in fns.items()}


def _rss_kib(field: str) -> int:
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(field + ":"):
        return int(line.split()[1])
  raise RuntimeError(field)


def worker_rss(case: dict, reducer: str, variant: str) -> None:
  """Peak RSS growth (bytes) while running a compiled variant once."""
  import gc
  x, fns = _build(case, reducer)
  compiled = fns[variant].lower(x).compile()
  gc.collect()
  before = _rss_kib("VmRSS")
  try:
    with open("/proc/self/clear_refs", "w") as f:
      f.write("5")  # reset the peak-RSS counter
  except OSError:
    pass
  compiled(x).block_until_ready()
  print(json.dumps((_rss_kib("VmHWM") - before) * 1024))


def _buffer_bytes(dump_dir: str, name: str) -> int:
  """temp + output bytes of XLA's buffer assignment (parameters excluded)."""
  files = glob.glob(os.path.join(
      dump_dir, f"*jit_bench_{name}.cpu_after_optimizations-buffer-"
      "assignment.txt"))
  if not files:
    return -1
  total = 0
  with open(sorted(files)[-1]) as f:
    for line in f:
      m = re.match(r"allocation \d+: size (\d+), (.*)", line)
      if m and "parameter" not in m.group(2) and (
          "constant" not in m.group(2)):
        total += int(m.group(1))
  return total


def worker_time(case: dict, reducer: str) -> None:
  import numpy as np
  from _common import timeit
  x, fns = _build(case, reducer)
  outs = {k: f(x).block_until_ready() for k, f in fns.items()}
  np.testing.assert_allclose(outs["grad"], outs["workaround_grad"],
                             rtol=2e-4, atol=1e-5)
  np.testing.assert_allclose(outs["primal"], outs["workaround_primal"],
                             rtol=2e-4, atol=1e-5)
  import time
  times = {k: [] for k in fns}
  cpu = {k: [] for k in fns}
  for _ in range(3):  # interleave the variants against machine noise
    for k, f in fns.items():
      times[k].append(timeit(lambda: f(x).block_until_ready(), repeat=3,
                             min_time=0.2))
      for _ in range(3):  # CPU time of all threads: robust to idle waits
        t0 = time.process_time()
        f(x).block_until_ready()
        cpu[k].append(time.process_time() - t0)
  print(json.dumps({**{k: min(v) for k, v in times.items()},
                    **{"cpu_" + k: min(v) for k, v in cpu.items()}}))


def _run_worker(args: list[str], env: dict[str, str]) -> object:
  out = subprocess.run([sys.executable, __file__, *args], env=env,
                       capture_output=True, text=True, check=False)
  if out.returncode:
    raise RuntimeError(f"worker {args} failed:\n{out.stderr[-4000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
  quick = "--quick" in sys.argv
  cases = QUICK_CASES if quick else CASES
  rows = []
  for case_name, case in cases.items():
    for reducer in REDUCERS:
      with tempfile.TemporaryDirectory() as dump:
        env = dict(os.environ)
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                            f" --xla_dump_to={dump}"
                            " --xla_dump_hlo_module_re=.*jit_bench_.*")
        times = _run_worker(["--time", case_name, reducer] +
                            (["--quick"] if quick else []), env)
        mem = {v: _buffer_bytes(dump, v) for v in VARIANTS}
      rss = {v: _run_worker(["--rss", case_name, reducer, v] +
                            (["--quick"] if quick else []), dict(os.environ))
             for v in VARIANTS}
      rows.append((case_name, reducer, times, mem, rss))

  mb = lambda b: f"{b / 2**20:8.1f}"
  print(f"reduce_window reverse mode, float32, jitted, CPU "
        f"({'quick sizes' if quick else 'full sizes'})")
  print(f"{'case':6} {'reducer':9} {'primal ms':>10} {'grad ms':>9} "
        f"{'grad/primal':>11} {'wa grad ms':>10} {'grad/wa':>8} "
        f"{'XLA MiB':>8} {'wa MiB':>8} {'mem/wa':>7} "
        f"{'RSS MiB':>8} {'wa RSS':>8} {'rss/wa':>7}")
  for case_name, reducer, t, mem, rss in rows:
    print(f"{case_name:6} {reducer:9} {t['primal'] * 1e3:10.2f} "
          f"{t['grad'] * 1e3:9.2f} {t['grad'] / t['primal']:11.2f} "
          f"{t['workaround_grad'] * 1e3:10.2f} "
          f"{t['grad'] / t['workaround_grad']:8.3f} "
          f"{mb(mem['grad'])} {mb(mem['workaround_grad'])} "
          f"{mem['grad'] / mem['workaround_grad']:7.3f} "
          f"{mb(rss['grad'])} {mb(rss['workaround_grad'])} "
          f"{rss['grad'] / max(rss['workaround_grad'], 1):7.3f}")
  print("CPU time (all threads) ratios, less sensitive to a shared machine: "
        "grad/primal, grad/workaround grad")
  for case_name, reducer, t, mem, rss in rows:
    print(f"  {case_name:6} {reducer:9} "
          f"{t['cpu_grad'] / t['cpu_primal']:.2f} "
          f"{t['cpu_grad'] / t['cpu_workaround_grad']:.3f}")
  print("primal vs workaround primal (time ratio, XLA memory ratio):")
  for case_name, reducer, t, mem, rss in rows:
    print(f"  {case_name:6} {reducer:9} "
          f"{t['primal'] / t['workaround_primal']:.3f} "
          f"{mem['primal'] / max(mem['workaround_primal'], 1):.3f}")


if __name__ == "__main__":
  if "--time" in sys.argv or "--rss" in sys.argv:
    argv = [a for a in sys.argv[1:] if a != "--quick"]
    cases = QUICK_CASES if "--quick" in sys.argv else CASES
    if argv[0] == "--time":
      worker_time(cases[argv[1]], argv[2])
    else:
      worker_rss(cases[argv[1]], argv[2], argv[3])
  else:
    main()
