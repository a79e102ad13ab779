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
"""Time to first step: the fork against other JAXes, in one run.

    python benchmarks/first_step.py --baseline-python PY [--baseline-python PY2]
    python benchmarks/first_step.py --baseline-pythonpath DIR   # e.g. a chip
    python benchmarks/first_step.py --smoke [--baseline-python PY]

The fork is this interpreter's jax; a baseline is `--baseline-python PY`
(with PYTHONPATH removed, or set to the `--baseline-pythonpath` given with
it) or `--baseline-pythonpath DIR` alone (this interpreter). Each round runs
every program in fresh processes for each side, the sides in turn (their
order rotated each round), and prints each side's figures and their ratios
to the fork's (fork / baseline: above 1 is the fork slower); a table of all
rounds at the end. Per program, three processes per side (`--phases main`:
the first alone, e.g. where each compile takes seconds):

- `main`: `trace_s` (jaxpr from the Python function: `jit(f).trace` where
  the jax has it, else `jit(f).lower` less its `lower_sharding_computation`),
  `lower_s` (jaxpr to StableHLO), `compile_s` (the process's first),
  `first_step_s` (the compiled program's first call, waited for),
  `step_ms` (a steady call, median), then after `jax.clear_caches()` a fresh
  `lower_again_s` (tracing included) and `compile_again_s`;
- `fill`: with the persistent compilation cache on (`jax_compilation_cache_dir`
  a temporary directory, `jax_persistent_cache_min_compile_time_secs=0`),
  `fill_compile_s`: a compile that writes its entry; `cache_entries`;
- `load`: a fresh process on the same cache, `cache_compile_s`: the compile
  that reads it back.

Programs (`--programs`): `mid` (`value_and_grad` of 24 layers of matmul, GELU
and layer norm: f32 256 wide, batch 64 on a CPU; bf16 1024 wide, batch 512
elsewhere), `train` (benchmarks/tpu.py's training step: 4 layers, sized down
on a CPU) and `mlp24` (benchmarks/tpu.py's 24-layer bf16 MLP).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = ("mid", "train", "mlp24")
LAYERS = 24
SIZES = {
    "cpu": dict(mid_width=256, mid_batch=64, mlp_width=256, mlp_batch=64,
                train=dict(layers=4, d_model=128, heads=4, seq=64, batch=4,
                           vocab=512)),
    "accelerator": dict(mid_width=1024, mid_batch=512, mlp_width=4096,
                        mlp_batch=2048,
                        train=dict(layers=4, d_model=1024, heads=8, seq=1024,
                                   batch=8, vocab=8192)),
    "smoke": dict(mid_width=16, mid_batch=4, mlp_width=16, mlp_batch=4,
                  train=dict(layers=1, d_model=16, heads=2, seq=8, batch=2,
                             vocab=32)),
}
FIGURES = ("trace_s", "lower_s", "compile_s", "first_step_s", "step_ms",
           "lower_again_s", "compile_again_s", "fill_compile_s",
           "cache_compile_s", "cache_entries")


def program(name: str, s: dict, layers: int):
  """(f, args) of program `name` at sizes `s`."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  if name == "mid":
    dtype = jnp.float32 if jax.default_backend() == "cpu" else jnp.bfloat16
    w, b = s["mid_width"], s["mid_batch"]

    def mid_loss(params, x):
      for wi, g in params:
        x = jax.nn.gelu(jnp.dot(x, wi))
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
        x = (x - mean) * jax.lax.rsqrt(var + 1e-5) * g
      return jnp.mean(jnp.square(x.astype(jnp.float32)))

    params = [((rng.standard_normal((w, w), np.float32) / w ** 0.5)
               .astype(dtype), np.ones((w,), dtype)) for _ in range(layers)]
    x = rng.standard_normal((b, w), np.float32).astype(dtype)
    return jax.value_and_grad(mid_loss), jax.device_put((params, x))
  if name == "mlp24":
    w, b = s["mlp_width"], s["mlp_batch"]

    def mlp_loss(weights, x):  # benchmarks/tpu.py's mlp24
      for wi in weights:
        x = jax.nn.gelu(jnp.dot(x, wi))
      return jnp.mean(jnp.square(x.astype(jnp.float32)))

    weights = [(rng.standard_normal((w, w), np.float32) / w ** 0.5)
               .astype(jnp.bfloat16) for _ in range(layers)]
    x = rng.standard_normal((b, w), np.float32).astype(jnp.bfloat16)
    return jax.value_and_grad(mlp_loss), jax.device_put((weights, x))
  if name == "train":
    sys.path.insert(0, str(HERE))
    import tpu  # pylint: disable=g-import-not-at-top
    return tpu.train_step(s["train"])
  raise ValueError(f"unknown program {name!r}; known: {PROGRAMS}")


def _lower(f, args):
  """(lowered, tracing seconds, lowering seconds) of jit(f) at args."""
  import jax  # pylint: disable=g-import-not-at-top
  jitted = jax.jit(f)
  if hasattr(jitted, "trace"):
    t0 = time.perf_counter()
    traced = jitted.trace(*args)
    t1 = time.perf_counter()
    lowered = traced.lower()
    return lowered, t1 - t0, time.perf_counter() - t1
  # jax 0.4.26: time the jaxpr-to-module part of `lower` apart.
  from jax._src.interpreters import pxla  # pylint: disable=g-import-not-at-top
  original = pxla.lower_sharding_computation
  spent = []

  def timed(*a, **k):
    t = time.perf_counter()
    try:
      return original(*a, **k)
    finally:
      spent.append(time.perf_counter() - t)

  pxla.lower_sharding_computation = timed
  try:
    t0 = time.perf_counter()
    lowered = jitted.lower(*args)
    total = time.perf_counter() - t0
  finally:
    pxla.lower_sharding_computation = original
  return lowered, total - sum(spent), sum(spent)


def worker(name: str, phase: str, s: dict, layers: int,
           cache_dir: str | None) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  if phase != "main":
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
  f, args = program(name, s, layers)
  out = {"jax": jax.__version__, "backend": jax.default_backend()}
  lowered, trace_s, lower_s = _lower(f, args)
  t0 = time.perf_counter()
  compiled = lowered.compile()
  compile_s = time.perf_counter() - t0
  if phase == "fill":
    out["fill_compile_s"] = compile_s
    out["cache_entries"] = len(os.listdir(cache_dir))
    return out
  if phase == "load":
    out["cache_compile_s"] = compile_s
    return out
  t0 = time.perf_counter()
  jax.block_until_ready(compiled(*args))
  first_step_s = time.perf_counter() - t0
  times = []
  for _ in range(5):
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    times.append(time.perf_counter() - t0)
  jax.clear_caches()
  t0 = time.perf_counter()
  lowered = jax.jit(f).lower(*args)
  t1 = time.perf_counter()
  lowered.compile()
  out.update(trace_s=trace_s, lower_s=lower_s, compile_s=compile_s,
             first_step_s=first_step_s,
             step_ms=statistics.median(times) * 1e3, lower_again_s=t1 - t0,
             compile_again_s=time.perf_counter() - t1)
  return out


def run_side(env: dict, python: str, name: str, s_args: list[str],
             timeout: int, phases: list[str]) -> dict:
  """The figures of program `name` from its fresh processes, one a phase."""
  out = {}
  with tempfile.TemporaryDirectory(prefix="first_step_cache_") as cache:
    for phase in phases:
      try:
        proc = subprocess.run(
            [python, str(Path(__file__).resolve()), "--worker", name, phase,
             cache, *s_args], env=env, capture_output=True, text=True,
            timeout=timeout, check=False)
      except subprocess.TimeoutExpired:
        print(f"{name} {phase} worker ({python}) ran past {timeout} s: its "
              "figures read n/a", flush=True)
        continue
      if proc.returncode:
        sys.exit(f"{name} {phase} worker ({python}) failed:\n"
                 f"{proc.stderr[-3000:]}")
      out.update(json.loads(proc.stdout.strip().splitlines()[-1]))
  return out


def _fmt(x) -> str:
  if x is None:
    return "n/a"
  return f"{x:.4g}" if isinstance(x, float) else str(x)


def _ratio(f, b):
  return None if f is None or b is None or not b else f / b


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--baseline-python", action="append", default=[],
                 help="a baseline's interpreter (repeatable)")
  p.add_argument("--baseline-pythonpath", action="append", default=[],
                 help="a baseline's PYTHONPATH: the n-th goes with the n-th "
                      "--baseline-python, or alone with this interpreter")
  p.add_argument("--programs", default=",".join(PROGRAMS))
  p.add_argument("--rounds", type=int, default=None,
                 help="default 3 (1 with --smoke)")
  p.add_argument("--layers", type=int, default=None,
                 help=f"layers of mid and mlp24 (default {LAYERS}, 2 with "
                      "--smoke)")
  p.add_argument("--smoke", action="store_true",
                 help="tiny sizes on the CPU (JAX_PLATFORMS=cpu), one round")
  p.add_argument("--sizes", choices=sorted(SIZES), default=None,
                 help="default: smoke with --smoke, else cpu on a CPU, "
                      "accelerator elsewhere (the worker decides)")
  p.add_argument("--phases", default="main,fill,load",
                 help="the processes run per program and side: main, fill "
                      "and load (these two need each other, in this order)")
  p.add_argument("--worker-timeout", type=int, default=600)
  p.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
  args = p.parse_args()
  layers = args.layers or (2 if args.smoke else LAYERS)
  if args.worker:
    name, phase, cache = args.worker
    import jax  # pylint: disable=g-import-not-at-top
    sizes = args.sizes or ("cpu" if jax.default_backend() == "cpu"
                           else "accelerator")
    print(json.dumps(worker(name, phase, SIZES[sizes], layers, cache)))
    return
  base_env = dict(os.environ, PYTHONHASHSEED="0")
  if args.smoke:
    base_env["JAX_PLATFORMS"] = "cpu"
  sides = {"fork": (sys.executable, base_env)}
  paths = list(args.baseline_pythonpath)
  for i, python in enumerate(args.baseline_python or [None] * len(paths)):
    env = dict(base_env)
    env.pop("PYTHONPATH", None)
    if i < len(paths):
      env["PYTHONPATH"] = paths[i]
    sides[f"baseline{i}"] = (python or sys.executable, env)
  programs = args.programs.split(",")
  phases = args.phases.split(",")
  if phases not in (["main"], ["main", "fill", "load"], ["fill", "load"]):
    p.error(f"--phases {args.phases}: main, fill and load, in this order "
            "(fill and load together)")
  rounds = args.rounds or (1 if args.smoke else 3)
  s_args = ["--layers", str(layers)]
  if args.smoke or args.sizes:
    s_args += ["--sizes", args.sizes or "smoke"]
  start = time.perf_counter()
  history = {(prog, side): [] for prog in programs for side in sides}
  names = list(sides)
  for r in range(rounds):
    order = names[r % len(names):] + names[:r % len(names)]
    for prog in programs:
      results = {}
      for side in order:
        t0 = time.perf_counter()
        results[side] = run_side(sides[side][1], sides[side][0], prog,
                                 s_args, args.worker_timeout, phases)
        history[prog, side].append(results[side])
        print(f"round {r} {prog} {side} ({time.perf_counter() - t0:.0f} s): "
              + ", ".join(f"{k} {_fmt(v)}" for k, v in results[side].items()),
              flush=True)
      for side in names[1:]:
        f, b = results["fork"], results[side]
        print(f"round {r} {prog} fork/{side}: " + ", ".join(
            f"{k} {_fmt(_ratio(f.get(k), b.get(k)))}" for k in FIGURES),
              flush=True)
  jaxes = {side: history[programs[0], side][0].get("jax") for side in names}
  print("\nsides: " + ", ".join(f"{k} jax {v}" for k, v in jaxes.items()))
  others = names[1:]
  print("\n| program | figure | " + " | ".join(names) + "".join(
      f" | fork / {o}" for o in others) + " |")
  print("|" + " --- |" * (2 + len(names) + len(others)))
  for prog in programs:
    for k in FIGURES:
      cols = [[h.get(k) for h in history[prog, side]] for side in names]
      cells = ["; ".join(_fmt(x) for x in c) for c in cols]
      cells += ["; ".join(_fmt(_ratio(x, y)) for x, y in zip(cols[0], c))
                for c in cols[1:]]
      print(f"| {prog} | `{k}` | " + " | ".join(cells) + " |")
  print(f"\ntotal {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
  main()
