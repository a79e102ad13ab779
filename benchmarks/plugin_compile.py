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
"""Compile time on a 2026 XLA CPU PJRT plugin: the fork against another JAX
on the same plugin, in one run.

    python -m venv PEER && PEER/bin/pip install jax==0.10.2 lammps-jax-pjrt-cpu==0.11.2
    python benchmarks/plugin_compile.py --baseline-python PEER/bin/python [--rounds 3]
    python benchmarks/plugin_compile.py --smoke   # the fork alone, tiny sizes

The plugin is PyPI's lammps-jax-pjrt-cpu (PJRT C API 0.115; the fork reaches
it through its PJRT adapter, patch 0026), named to each JAX in
`PJRT_NAMES_AND_LIBRARY_PATHS`. Each round runs one worker process per JAX,
one at a time (the fork first in even rounds), and each worker, after a tiny
warm-up program (the process's one-time costs), lowers and compiles each
program once (`compile_first`: the first compile of real size in the
process) and then the same program at another width (`compile_later`), each
compile timed by the clock (`_s`) and by the CPU time of all the process's
threads (`_cpu_s`, steadier on a loaded machine).
Programs: `mlp24`, `value_and_grad` of a 24-layer f32 MLP with layer norm
and GELU; `transformer4`, a 4-layer transformer training step (attention,
GELU MLP, RMS norm, cross-entropy, an Adam update with `tree_map`). It prints
each worker's figures, then per figure the fork / baseline ratio of each
round and their median.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

SIZES = {"full": dict(width=256, batch=64, seq=64, vocab=512),
         "smoke": dict(width=32, batch=4, seq=8, vocab=64)}


def mlp24(width, batch, **_):
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  def loss(ws, x):
    for w in ws:
      y = jnp.dot(x, w)
      m = y.mean(-1, keepdims=True)
      v = jnp.square(y - m).mean(-1, keepdims=True)
      x = jax.nn.gelu((y - m) * jax.lax.rsqrt(v + 1e-5))
    return jnp.mean(x ** 2)

  ws = [jax.ShapeDtypeStruct((width, width), jnp.float32)] * 24
  return jax.value_and_grad(loss), (ws, jax.ShapeDtypeStruct(
      (batch, width), jnp.float32))


def transformer4(width, batch, seq, vocab, **_):
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  heads, f32 = 4, jnp.float32
  tree_map = jax.tree_util.tree_map

  def norm(x):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)

  def loss_fn(p, tokens):
    x = p["embed"][tokens[:, :-1]]
    causal = jnp.tril(jnp.ones((seq, seq), bool))
    for layer in p["layers"]:
      q, k, v = jnp.split(norm(x) @ layer["qkv"], 3, axis=-1)
      q, k, v = (a.reshape(batch, seq, heads, -1) for a in (q, k, v))
      logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
      probs = jax.nn.softmax(jnp.where(causal, logits, -1e9), axis=-1)
      x = x + jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(
          batch, seq, width) @ layer["out"]
      x = x + jax.nn.gelu(norm(x) @ layer["up"]) @ layer["down"]
    logits = norm(x) @ p["embed"].T
    picked = jnp.take_along_axis(logits, tokens[:, 1:, None], axis=-1)
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked[..., 0])

  def step(p, m, v, tokens):
    loss, g = jax.value_and_grad(loss_fn)(p, tokens)
    m = tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
    v = tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
    p = tree_map(lambda p, m, v: p - 1e-3 * m / (jnp.sqrt(v) + 1e-8), p, m, v)
    return p, m, v, loss

  shape = lambda *s: jax.ShapeDtypeStruct(s, f32)
  p = {"embed": shape(vocab, width),
       "layers": [{"qkv": shape(width, 3 * width), "out": shape(width, width),
                   "up": shape(width, 4 * width),
                   "down": shape(4 * width, width)} for _ in range(4)]}
  return step, (p, p, p, jax.ShapeDtypeStruct((batch, seq + 1), jnp.int32))


PROGRAMS = {"mlp24": mlp24, "transformer4": transformer4}


def worker(sizes) -> dict[str, float]:
  import jax  # pylint: disable=g-import-not-at-top
  out: dict[str, float] = {"jax": jax.__version__,
                           "backend": jax.default_backend()}
  jax.jit(lambda x: x + 1).lower(1.0).compile()
  for name, make in PROGRAMS.items():
    for which, size in (("first", sizes), ("later", dict(
        sizes, width=sizes["width"] * 3 // 2))):
      f, args = make(**size)
      t0 = time.perf_counter()
      lowered = jax.jit(f).lower(*args)
      t1, c1 = time.perf_counter(), time.process_time()
      lowered.compile()
      out[f"{name}_lower_{which}_s"] = t1 - t0
      out[f"{name}_compile_{which}_s"] = time.perf_counter() - t1
      out[f"{name}_compile_{which}_cpu_s"] = time.process_time() - c1
  return out


def plugin_env(python: str, baseline: bool) -> dict[str, str]:
  """The environment that gives `python`'s JAX the plugin as its backend
  (the baseline's without this process's PYTHONPATH)."""
  env = dict(os.environ)
  if baseline:
    env.pop("PYTHONPATH", None)
  where = subprocess.run(
      [python, "-c", "import lammps_jax_pjrt_cpu as p; print(p.PLUGIN_PATH)"],
      capture_output=True, text=True, check=False, env=env)
  if where.returncode:
    sys.exit(f"{python}: the plugin is not installed (pip install "
             f"lammps-jax-pjrt-cpu==0.11.2):\n{where.stderr[-500:]}")
  config = os.path.join(tempfile.mkdtemp(), "plugin.json")
  with open(config, "w") as f:
    json.dump({"library_path": where.stdout.strip(),
               "create_options": {"cpu_device_count": 1}}, f)
  return dict(env, PJRT_NAMES_AND_LIBRARY_PATHS=f"plugin:{config}",
              JAX_PLATFORMS="plugin", PYTHONHASHSEED="0")


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--baseline-python", default=None,
                 help="the Python whose JAX is the baseline (required "
                      "unless --smoke)")
  p.add_argument("--rounds", type=int, default=3)
  p.add_argument("--smoke", action="store_true",
                 help="tiny sizes, one round, the fork alone unless "
                      "--baseline-python is given")
  p.add_argument("--worker", choices=["full", "smoke"],
                 help=argparse.SUPPRESS)
  args = p.parse_args()
  if args.worker:
    print(json.dumps(worker(SIZES[args.worker])))
    return
  if not args.smoke and not args.baseline_python:
    p.error("--baseline-python is required (or --smoke)")
  pythons = {"fork": sys.executable}
  if args.baseline_python:
    pythons["baseline"] = args.baseline_python
  envs = {name: plugin_env(py, name == "baseline")
          for name, py in pythons.items()}
  rounds = 1 if args.smoke else args.rounds
  size = "smoke" if args.smoke else "full"
  history = []
  for r in range(rounds):
    results = {}
    for name in (list(pythons) if r % 2 == 0 else list(pythons)[::-1]):
      proc = subprocess.run(
          [pythons[name], os.path.abspath(__file__), "--worker", size],
          env=envs[name], capture_output=True, text=True, check=False,
          timeout=600)
      if proc.returncode:
        sys.exit(f"{name} worker failed:\n{proc.stderr[-3000:]}")
      results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
      print(f"round {r} {name}: " + ", ".join(
          f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
          for k, v in results[name].items()), flush=True)
    history.append(results)
  if len(pythons) == 2:
    print("\n| figure | fork / baseline, each round | median |")
    print("| --- | --- | --- |")
    for k, v in history[0]["fork"].items():
      if isinstance(v, float):
        ratios = [h["fork"][k] / h["baseline"][k] for h in history]
        print(f"| `{k}` | {', '.join(f'{x:.2f}' for x in ratios)} | "
              f"{statistics.median(ratios):.2f} |")
    print(f"\njax: fork {history[0]['fork']['jax']}, baseline "
          f"{history[0]['baseline']['jax']}")


if __name__ == "__main__":
  main()
