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
    python benchmarks/tpu.py --smoke      # the fork alone, tiny sizes, CPU

Each round runs a worker process with the fork (this interpreter's jax)
and one with the baseline (the jax that DIR on PYTHONPATH gives, e.g. the
machine's own), one at a time, since one process at a time holds the chip,
the fork first in even rounds and the baseline first in odd ones; it prints
each worker's figures and their ratios (fork / baseline, of each figure as
named: above 1 is the fork slower for a time, faster for a rate) per round,
then a table of all rounds; `n/a` where a jax or backend does not report
a figure. Each worker, in this order:

- `init_s`: the backend's start (`jax.default_backend()`);
- `train_*`: a transformer training step (`--layers` pre-norm layers of
  causal multi-head attention and a GELU MLP, bf16 parameters and
  activations, f32 softmax, norms and loss; `value_and_grad` of the
  next-token cross-entropy and an Adam update written with
  `jax.tree_util`; `model()`, its numbers made with NumPy): lowering
  (tracing included), compile (the process's first: one-time costs land
  here), the first call after
  compiling (waited for), `--batches` batches of `--steps` steps each, per
  step; the device's peak memory in use after them (`memory_stats()`), the
  compiled program's temporary memory (`memory_analysis()`), bytes accessed
  and FLOPs (`cost_analysis()`), the loss after the last step;
- `mlp24_*`: `value_and_grad` of a 24-layer bf16 MLP (`--mlp-width`,
  `--mlp-batch`), lowering and compile;
- `train_*_again_s`: the training step lowered and compiled again after
  `jax.clear_caches()`: a later compile of the same program;
- `tiny_*`: `jit(x + 1)` on a scalar, lowering and compile;
- `matmul_async_*`: an 8192^3 bf16 matmul (f32 accumulation; `--matmul N`)
  compiled, then at once `--batches` batches of 10 calls dispatched
  asynchronously, each batch waited for at its end: TFLOP/s per batch;
- `matmul_tflops`: the same matmul, the median of 5 batches of 20 calls
  after a warm call;
- `tiny_call_us`: the tiny jitted call, waited for each time;
- on a TPU, the fork's only: the refactored `emit_pipeline` (patch 0015)
  2048^3 bf16 matmul, TFLOP/s, and its time over XLA's dot of the same
  operands.

Every program is called through its `Compiled` object (`jit(f).lower(...)
.compile()`), on both sides the same way. The code runs under jax 0.4.26
and today's jax alike.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

# Sizes: the chip's, and --smoke's (seconds on a CPU).
SIZES = {
    "chip": dict(matmul=8192, layers=4, d_model=1024, heads=8, seq=1024,
                 batch=8, vocab=8192, mlp_width=4096, mlp_batch=2048,
                 steps=10, batches=4, tiny_reps=1000, matmul_reps=20),
    "smoke": dict(matmul=128, layers=2, d_model=64, heads=4, seq=32,
                  batch=2, vocab=128, mlp_width=64, mlp_batch=16,
                  steps=3, batches=3, tiny_reps=50, matmul_reps=3),
}
MLP_LAYERS = 24
ASYNC_CALLS = 10


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


def _lower_compile(f, *args):
  """(compiled, lowering seconds, compile seconds) of jit(f) at args."""
  import jax  # pylint: disable=g-import-not-at-top
  t0 = time.perf_counter()
  lowered = jax.jit(f).lower(*args)
  t1 = time.perf_counter()
  compiled = lowered.compile()
  return compiled, t1 - t0, time.perf_counter() - t1


def mlp24(s) -> dict[str, float]:
  """Lowering and compile of a 24-layer bf16 MLP's value_and_grad."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  w, b = s["mlp_width"], s["mlp_batch"]

  def loss(weights, x):
    for wi in weights:
      x = jax.nn.gelu(jnp.dot(x, wi))
    return jnp.mean(jnp.square(x.astype(jnp.float32)))

  weights = [jax.ShapeDtypeStruct((w, w), jnp.bfloat16)] * MLP_LAYERS
  x = jax.ShapeDtypeStruct((b, w), jnp.bfloat16)
  _, lower_s, compile_s = _lower_compile(jax.value_and_grad(loss), weights, x)
  return {"mlp24_lower_s": lower_s, "mlp24_compile_s": compile_s}


# The step's variants for benchmarks/tpu_step_parts.py (values and dtypes
# as the plain step's; only the program differs). The attention's q, k, v:
# "split_slices" takes three `lax.slice`s (jax 0.4.26's `jnp.split`: its
# cotangent is three pads and two adds), "split_concat" a custom_vjp whose
# cotangent is one concatenate (today's `lax.split`); "pick_one_hot" picks the
# targets' logits by a one-hot select and sum instead of `take_along_axis`
# (no gather, and no scatter in the gradient).
VARIANTS = ("split_slices", "split_concat", "pick_one_hot")


def model(s, variants=()) -> dict[str, object]:
  """The transformer at sizes `s`: its parameters, optimizer state, tokens
  (from NumPy's seeded generator: the same numbers under every jax) and
  functions: `embed`, `split` (the attention's q, k, v), `layer`, `pick`
  (the targets' logits), `head` (the loss from the last activations), `loss`,
  `update` (Adam) and `step` (value_and_grad and update)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  unknown = set(variants) - set(VARIANTS)
  if unknown:
    raise ValueError(f"unknown variants {sorted(unknown)}; known: {VARIANTS}")
  tree_map = jax.tree_util.tree_map
  bf16, f32 = jnp.bfloat16, jnp.float32
  d, h, n, b, v = (s["d_model"], s["heads"], s["seq"], s["batch"],
                   s["vocab"])
  dh = d // h

  # The same numbers on both sides, made with NumPy: nothing is compiled
  # before the step.
  rng = np.random.default_rng(0)

  def dense(shape):
    return (rng.standard_normal(shape, np.float32) /
            math.sqrt(shape[0])).astype(bf16)

  params = {
      "embed": dense((v, d)),
      "unembed": dense((d, v)),
      "norm": np.ones((d,), bf16),
      "layers": [{"qkv": dense((d, 3 * d)),
                  "out": dense((d, d)),
                  "up": dense((d, 4 * d)),
                  "down": dense((4 * d, d)),
                  "norm1": np.ones((d,), bf16),
                  "norm2": np.ones((d,), bf16)}
                 for _ in range(s["layers"])],
  }
  opt = {"m": tree_map(lambda p: np.zeros(p.shape, np.float32), params),
         "v": tree_map(lambda p: np.zeros(p.shape, np.float32), params),
         "count": np.zeros((), np.int32)}
  tokens = rng.integers(0, v, (b, n + 1)).astype(np.int32)
  inputs, targets = tokens[:, :-1], tokens[:, 1:]

  def norm(x, g):
    x = x.astype(f32)
    x = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)
    return (x * g.astype(f32)).astype(bf16)

  causal = np.tril(np.ones((n, n), np.bool_))

  @jax.custom_vjp
  def split3(x):
    return tuple(jnp.split(x, 3, axis=-1))
  split3.defvjp(lambda x: (split3(x), None),
                lambda _, cts: (jnp.concatenate(cts, axis=-1),))

  def split(qkv):
    if "split_slices" in variants:
      return [jax.lax.slice_in_dim(qkv, i * d, (i + 1) * d, axis=2)
              for i in range(3)]
    if "split_concat" in variants:
      return split3(qkv)
    return jnp.split(qkv, 3, axis=-1)

  def attention(p, x):
    q, k, val = split(jnp.dot(x, p["qkv"]))
    q, k, val = (a.reshape(b, n, h, dh) for a in (q, k, val))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k,
                        preferred_element_type=f32) / math.sqrt(dh)
    logits = jnp.where(causal, logits, jnp.finfo(f32).min)
    probs = jnp.exp(logits - jnp.max(logits, axis=-1, keepdims=True))
    probs = (probs / jnp.sum(probs, axis=-1, keepdims=True)).astype(bf16)
    out = jnp.einsum("bhqk,bkhd->bqhd", probs, val).reshape(b, n, d)
    return jnp.dot(out, p["out"])

  def layer(p, x):
    x = x + attention(p, norm(x, p["norm1"]))
    return x + jnp.dot(jax.nn.gelu(jnp.dot(norm(x, p["norm2"]), p["up"])),
                       p["down"])

  def embed(params, inputs):
    return params["embed"][inputs]

  def pick(logits, targets):
    if "pick_one_hot" in variants:
      hot = jnp.arange(v) == targets[..., None]
      return jnp.sum(jnp.where(hot, logits, 0), axis=-1)
    return jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]

  def head(params, x, targets):
    logits = jnp.dot(norm(x, params["norm"]), params["unembed"],
                     preferred_element_type=f32)
    top = jnp.max(logits, axis=-1, keepdims=True)
    lse = jnp.log(jnp.sum(jnp.exp(logits - top), axis=-1)) + top[..., 0]
    return jnp.mean(lse - pick(logits, targets))

  def loss(params, inputs, targets):
    x = embed(params, inputs)
    for p in params["layers"]:
      x = layer(p, x)
    return head(params, x, targets)

  def update(params, opt, grads):
    b1, b2, lr, eps = 0.9, 0.95, 1e-4, 1e-8
    count = opt["count"] + 1
    m = tree_map(lambda m, g: b1 * m + (1 - b1) * g.astype(f32), opt["m"],
                 grads)
    vv = tree_map(lambda v, g: b2 * v + (1 - b2) * jnp.square(g.astype(f32)),
                  opt["v"], grads)
    c1 = 1 - b1 ** count.astype(f32)
    c2 = 1 - b2 ** count.astype(f32)
    params = tree_map(
        lambda p, m, v: (p.astype(f32) - lr * (m / c1) /
                         (jnp.sqrt(v / c2) + eps)).astype(p.dtype),
        params, m, vv)
    return params, {"m": m, "v": vv, "count": count}

  def step(params, opt, inputs, targets):
    value, grads = jax.value_and_grad(loss)(params, inputs, targets)
    params, opt = update(params, opt, grads)
    return params, opt, value

  params, opt, inputs, targets = jax.block_until_ready(
      jax.device_put((params, opt, inputs, targets)))
  return {"params": params, "opt": opt, "inputs": inputs, "targets": targets,
          "embed": embed, "split": split, "layer": layer, "pick": pick,
          "head": head, "loss": loss, "update": update, "step": step}


def train_step(s, variants=()):
  """(step, (params, opt, inputs, targets)): `model(s, variants)`'s training
  step and its arguments."""
  m = model(s, variants)
  return m["step"], (m["params"], m["opt"], m["inputs"], m["targets"])


def _program_figures(compiled, prefix: str) -> dict[str, object]:
  """The compiled program's temporary memory (MB, `memory_analysis()`), bytes
  accessed (GB) and GFLOPs (`cost_analysis()`); None where this jax or
  backend does not say."""
  out: dict[str, object] = {}
  try:
    memory = compiled.memory_analysis()
    out[prefix + "temp_mb"] = memory.temp_size_in_bytes / 1e6
  except Exception:  # pylint: disable=broad-except
    out[prefix + "temp_mb"] = None
  try:
    cost = compiled.cost_analysis()
    if isinstance(cost, list):  # jax 0.4.26: one dict per module
      cost = cost[0] if cost else None
  except Exception:  # pylint: disable=broad-except
    cost = None
  for name, key, scale in (("gb_accessed", "bytes accessed", 1e9),
                           ("gflops", "flops", 1e9)):
    value = cost.get(key) if cost else None
    out[prefix + name] = None if value is None else value / scale
  return out


def peak_memory_mb() -> float | None:
  """The first device's peak memory in use so far (`memory_stats()`), MB; None
  where the backend does not say (e.g. the CPU)."""
  import jax  # pylint: disable=g-import-not-at-top
  try:
    stats = jax.devices()[0].memory_stats()
  except Exception:  # pylint: disable=broad-except
    return None
  peak = (stats or {}).get("peak_bytes_in_use")
  return None if peak is None else peak / 1e6


def transformer(s) -> dict[str, object]:
  """A transformer training step: lowering, compile, first call, steps, the
  compiled program's figures, the peak memory after the steps."""
  import jax  # pylint: disable=g-import-not-at-top
  step, (params, opt, inputs, targets) = train_step(s)
  compiled, lower_s, compile_s = _lower_compile(step, params, opt, inputs,
                                                targets)
  t0 = time.perf_counter()
  params, opt, loss = jax.block_until_ready(
      compiled(params, opt, inputs, targets))
  first_s = time.perf_counter() - t0
  step_ms = []
  for _ in range(s["batches"]):
    t0 = time.perf_counter()
    for _ in range(s["steps"]):
      params, opt, loss = compiled(params, opt, inputs, targets)
    jax.block_until_ready((params, opt, loss))
    step_ms.append((time.perf_counter() - t0) / s["steps"] * 1e3)
  return {"train_lower_s": lower_s, "train_compile_s": compile_s,
          "train_first_s": first_s, "train_step_ms": step_ms,
          "train_step_ms_later": statistics.median(step_ms[1:] or step_ms),
          "train_peak_mb": peak_memory_mb(),
          **_program_figures(compiled, "train_"),
          "train_loss": float(loss)}


def transformer_again(s) -> dict[str, float]:
  """The training step lowered and compiled again, after
  `jax.clear_caches()`: a later compile of the same program in the process."""
  import jax  # pylint: disable=g-import-not-at-top
  step, args = train_step(s)
  jax.clear_caches()
  _, lower_s, compile_s = _lower_compile(step, *args)
  return {"train_lower_again_s": lower_s, "train_compile_again_s": compile_s}


def worker(s, with_pipeline: bool) -> dict[str, object]:
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  t0 = time.perf_counter()
  out: dict[str, object] = {"jax": jax.__version__,
                            "backend": jax.default_backend(),
                            "init_s": time.perf_counter() - t0}
  out.update(transformer(s))  # the process's first compile
  out.update(mlp24(s))
  out.update(transformer_again(s))
  one = jnp.float32(1)
  tiny, out["tiny_lower_s"], out["tiny_compile_s"] = _lower_compile(
      lambda v: v + 1, one)
  jax.block_until_ready(tiny(one))

  n = s["matmul"]
  x = jax.block_until_ready(jnp.ones((n, n), jnp.bfloat16))
  dot, _, _ = _lower_compile(
      lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32), x, x)
  rates = []
  for _ in range(s["batches"]):
    t0 = time.perf_counter()
    for _ in range(ASYNC_CALLS):
      y = dot(x, x)
    jax.block_until_ready(y)
    rates.append(2 * n**3 * ASYNC_CALLS / (time.perf_counter() - t0) / 1e12)
  del y
  out["matmul_async_tflops"] = rates
  out["matmul_async_first_tflops"] = rates[0]
  out["matmul_async_later_tflops"] = statistics.median(rates[1:] or rates)
  out["matmul_tflops"] = 2 * n**3 / _timed(dot, x, x,
                                           reps=s["matmul_reps"]) / 1e12
  out["tiny_call_us"] = _timed(tiny, one, reps=s["tiny_reps"],
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


# The figures compared per round, in the order printed.
COMPARED = ("init_s", "train_lower_s", "train_compile_s", "train_first_s",
            "train_step_ms", "train_step_ms_later", "train_peak_mb",
            "train_temp_mb", "train_gb_accessed", "train_gflops",
            "train_loss", "mlp24_lower_s", "mlp24_compile_s",
            "train_lower_again_s", "train_compile_again_s", "tiny_compile_s",
            "matmul_async_tflops", "matmul_async_first_tflops",
            "matmul_async_later_tflops", "matmul_tflops", "tiny_call_us")


def _fmt(x) -> str:
  if isinstance(x, list):
    return "[" + ", ".join(_fmt(v) for v in x) + "]"
  if x is None:
    return "n/a"
  return f"{x:.4g}" if isinstance(x, float) else str(x)


def _ratio(f, b):
  if isinstance(f, list):
    return [_ratio(x, y) for x, y in zip(f, b)]
  return None if f is None or not b else f / b


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--baseline-pythonpath", default=None,
                 help="PYTHONPATH that gives the baseline jax (required "
                      "unless --smoke)")
  p.add_argument("--rounds", type=int, default=None,
                 help="default 2 (1 with --smoke)")
  p.add_argument("--smoke", action="store_true",
                 help="tiny sizes on the CPU (JAX_PLATFORMS=cpu), one round, "
                      "the fork alone unless --baseline-pythonpath is given")
  for name, value in SIZES["chip"].items():
    p.add_argument("--" + name.replace("_", "-"), type=int, default=None,
                   help=f"default {value} ({SIZES['smoke'][name]} with "
                        "--smoke)")
  p.add_argument("--worker-timeout", type=int, default=240,
                 help="seconds a worker may take (default 240)")
  p.add_argument("--worker", choices=["fork", "baseline"],
                 help=argparse.SUPPRESS)
  args = p.parse_args()
  sizes = dict(SIZES["smoke" if args.smoke else "chip"])
  sizes.update({k: getattr(args, k) for k in sizes
                if getattr(args, k) is not None})
  if args.worker:
    print(json.dumps(worker(sizes, args.worker == "fork")))
    return
  if not args.smoke and not args.baseline_pythonpath:
    p.error("--baseline-pythonpath is required (or --smoke)")
  base_env = dict(os.environ)
  if args.smoke:
    base_env["JAX_PLATFORMS"] = "cpu"
  envs = {"fork": base_env}
  if args.baseline_pythonpath:
    envs["baseline"] = dict(base_env, PYTHONPATH=args.baseline_pythonpath)
  rounds = args.rounds or (1 if args.smoke else 2)
  size_args = [a for k, v in sizes.items()
               for a in ("--" + k.replace("_", "-"), str(v))]
  print(f"sizes: {json.dumps(sizes)}", flush=True)
  start = time.perf_counter()
  history = []
  for r in range(rounds):
    results = {}
    order = list(envs) if r % 2 == 0 else list(envs)[::-1]
    for name in order:
      t0 = time.perf_counter()
      try:
        proc = subprocess.run(
            [sys.executable, __file__, "--worker", name, *size_args],
            env=envs[name], capture_output=True, text=True, check=False,
            timeout=args.worker_timeout)
      except subprocess.TimeoutExpired:
        sys.exit(f"{name} worker ran past {args.worker_timeout} s")
      if proc.returncode:
        sys.exit(f"{name} worker failed:\n{proc.stderr[-3000:]}")
      results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
      print(f"round {r} {name} ({time.perf_counter() - t0:.0f} s): " +
            ", ".join(f"{k} {_fmt(v)}" for k, v in results[name].items()),
            flush=True)
    history.append(results)
    if "baseline" in results:
      f, b = results["fork"], results["baseline"]
      print(f"round {r} fork/baseline: " + ", ".join(
          f"{k} {_fmt(_ratio(f[k], b[k]))}" for k in COMPARED), flush=True)
  if len(envs) == 2:
    print("\n| figure | fork | baseline | fork / baseline |")
    print("| --- | --- | --- | --- |")
    for k in COMPARED:
      fs = [h["fork"][k] for h in history]
      bs = [h["baseline"][k] for h in history]
      print(f"| `{k}` | {'; '.join(_fmt(x) for x in fs)} | "
            f"{'; '.join(_fmt(x) for x in bs)} | "
            f"{'; '.join(_fmt(_ratio(x, y)) for x, y in zip(fs, bs))} |")
    print(f"\njax: fork {history[0]['fork']['jax']}, baseline "
          f"{history[0]['baseline']['jax']}")
  print(f"total {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
  main()
