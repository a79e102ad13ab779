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
"""A GPT-2-sized language model trained with flax, optax and orbax.

A decoder-only transformer of GPT-2 small's shape (12 layers, width 768, 12
heads, sequence 1024, vocabulary 50304, tied input and output embeddings:
124M parameters) in plain `flax.linen`, trained with optax's AdamW on
synthetic tokens, its train state saved and restored with orbax-checkpoint.
The same script runs on the fork with the ecosystem of its time (flax 0.8.4,
optax 0.2.2, chex 0.1.86, orbax-checkpoint 0.6.4: `ecosystem-constraints.txt`)
and on today's JAX with today's flax, optax and orbax-checkpoint. The
parameters come from NumPy with a fixed seed and the data are NumPy tokens,
so every JAX, version and backend starts from the same numbers and their
losses can be compared step by step.

  python examples/lm_train.py                       # GPT-2 small, batch 8
  python examples/lm_train.py --layers 2 --width 64 --heads 4 --seq 64 \\
      --vocab 256 --batch 4 --steps 12 --lr 3e-3    # a few seconds on CPU

The data: each sequence draws tokens from a Zipf-like distribution over the
vocabulary, and half the time a token is instead a fixed function of the one
before it, so the loss falls from ln(vocab) as the model learns the tokens'
frequencies and then those bigrams.

It prints the loss of every step, then (over the steps after the first
`--untimed` ones, in windows of `--window` steps) the time per step, tokens
per second and the model FLOPs utilisation (MFU), the lowering and compile
times of the train step (ahead of time, not counted in the step time), the
step's temporary memory and the device's peak memory where the backend
reports them, and whether the train state saved with orbax restores exactly
(every leaf bitwise equal, same dtype and shape). `--json FILE` writes the
same as a JSON object. The exit status is 0 when the checkpoint restored
exactly and the last loss is below the first.

MFU counts the model's FLOPs, PaLM's way (Chowdhery et al. 2022, appendix B):

  MFU = (6 N + 12 L d T) * tokens per second / peak

with N the parameters except the position table (the tied token table is a
matmul's weight at the output), L the layers, d the width, T the sequence
length (12 L d T: the attention's two matmuls, forward and backward, the
causal mask not discounted), and peak the chip's dense bf16 rate: 197e12
FLOP/s for a TPU v5e (`--peak-tflops` for another chip; on CPU no MFU is
printed unless it is given).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import shutil
import sys
import tempfile
import time
from typing import Any
import zlib

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp

V5E_PEAK_TFLOPS = 197.0


@dataclasses.dataclass(frozen=True)
class Config:
  vocab: int = 50304
  seq: int = 1024
  layers: int = 12
  width: int = 768
  heads: int = 12
  dtype: str = "bfloat16"   # matmul inputs; parameters and residuals are f32
  remat: bool = False


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def causal_softmax(s, dtype):
  """Softmax over the keys (last axis) of f32 scores (..., queries, keys),
  each query's later keys masked out, computed in f32, returned in `dtype`.

  Its backward pass uses only the result (in `dtype`), which the attention's
  second matmul keeps anyway: one (batch, heads, seq, seq) residual a layer,
  for GPT-2 small at batch 8 to fit one TPU v5e without rematerialising.
  """
  causal = jnp.tril(jnp.ones(s.shape[-2:], dtype=bool))
  s = jnp.where(causal, s, jnp.float32(-1e9))
  e = jnp.exp(s - s.max(axis=-1, keepdims=True))
  return (e / e.sum(axis=-1, keepdims=True)).astype(dtype)


def _causal_softmax_fwd(s, dtype):
  p = causal_softmax(s, dtype)
  return p, p


def _causal_softmax_bwd(dtype, p, g):
  del dtype   # the masked entries' p, hence their gradient, is 0
  p, g = p.astype(jnp.float32), g.astype(jnp.float32)
  return (p * (g - (p * g).sum(axis=-1, keepdims=True)),)


causal_softmax.defvjp(_causal_softmax_fwd, _causal_softmax_bwd)


class Block(nn.Module):
  """Pre-LN transformer block: causal self-attention, then a GELU MLP."""
  heads: int
  dtype: Any

  @nn.compact
  def __call__(self, x):
    b, t, d = x.shape
    hd = d // self.heads
    h = nn.LayerNorm(epsilon=1e-5, dtype=self.dtype, name="ln1")(x)
    qkv = nn.Dense(3 * d, dtype=self.dtype, name="qkv")(h)
    q, k, v = jnp.split(qkv.reshape(b, t, 3, self.heads, hd), 3, axis=2)
    q, k, v = q[:, :, 0], k[:, :, 0], v[:, :, 0]        # (b, t, heads, hd)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k,
                   preferred_element_type=jnp.float32) / math.sqrt(hd)
    p = causal_softmax(s, self.dtype)
    a = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(b, t, d)
    x = x + nn.Dense(d, dtype=self.dtype, name="proj")(a)
    h = nn.LayerNorm(epsilon=1e-5, dtype=self.dtype, name="ln2")(x)
    h = nn.gelu(nn.Dense(4 * d, dtype=self.dtype, name="fc")(h))
    return x + nn.Dense(d, dtype=self.dtype, name="out")(h)


class LM(nn.Module):
  """Decoder-only LM: token ids (b, t) -> float32 logits (b, t, vocab)."""
  cfg: Config

  @nn.compact
  def __call__(self, tokens):
    cfg, dtype = self.cfg, jnp.dtype(self.cfg.dtype)
    init = nn.initializers.normal(0.02)
    wte = self.param("wte", init, (cfg.vocab, cfg.width))
    wpe = self.param("wpe", init, (cfg.seq, cfg.width))
    x = jnp.take(wte, tokens, axis=0) + wpe[:tokens.shape[1]]
    block = nn.remat(Block) if cfg.remat else Block
    for i in range(cfg.layers):
      x = block(cfg.heads, dtype, name=f"h{i}")(x)
    x = nn.LayerNorm(epsilon=1e-5, dtype=dtype, name="ln_f")(x)
    return jnp.einsum("btd,vd->btv", x.astype(dtype), wte.astype(dtype),
                      preferred_element_type=jnp.float32)


def init_params(cfg: Config, seed: int = 0) -> dict:
  """GPT-2's initialisation, from NumPy: the same numbers on every JAX.

  Weights are normal(0, 0.02) (the projections into the residual stream
  0.02 / sqrt(2 layers)), biases 0, LayerNorm scales 1. Each leaf's numbers
  come from its own generator, seeded by `seed` and the leaf's path.
  """
  shapes = jax.eval_shape(LM(cfg).init, jax.random.PRNGKey(0),
                          jnp.zeros((1, cfg.seq), jnp.int32))["params"]
  def leaf(path, s):
    name = "/".join(str(getattr(k, "key", k)) for k in path)
    last = name.rsplit("/", 1)[-1]
    if last == "bias":
      return np.zeros(s.shape, np.float32)
    if last == "scale":
      return np.ones(s.shape, np.float32)
    std = 0.02
    if name.endswith(("proj/kernel", "out/kernel")):
      std /= math.sqrt(2 * cfg.layers)
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    return (rng.standard_normal(s.shape, dtype=np.float32) * std
            ).astype(np.float32)
  return jax.tree_util.tree_map_with_path(leaf, shapes)


def make_batches(cfg: Config, batch: int, steps: int, seed: int = 0):
  """(steps, batch, seq + 1) int32 tokens: Zipf-like, half of them bigrams."""
  rng = np.random.default_rng(seed)
  ranks = np.arange(cfg.vocab, dtype=np.float64)
  p = (ranks + 2.7) ** -1.1
  ids = rng.permutation(cfg.vocab)          # which token has which rank
  follow = rng.permutation(cfg.vocab)       # the bigrams: token -> next
  n = steps * batch
  fresh = ids[rng.choice(cfg.vocab, size=(n, cfg.seq + 1), p=p / p.sum())]
  keep = rng.random((n, cfg.seq + 1)) < 0.5
  tokens = fresh.copy()
  for t in range(1, cfg.seq + 1):
    tokens[:, t] = np.where(keep[:, t], follow[tokens[:, t - 1]], fresh[:, t])
  return tokens.astype(np.int32).reshape(steps, batch, cfg.seq + 1)


def make_optimizer(lr: float, warmup: int):
  schedule = lambda step: lr * jnp.minimum(1.0, (step + 1) / max(warmup, 1))
  decay = lambda params: jax.tree_util.tree_map(lambda p: p.ndim >= 2, params)
  return optax.chain(
      optax.clip_by_global_norm(1.0),
      optax.adamw(schedule, b1=0.9, b2=0.95, weight_decay=0.1, mask=decay))


def make_train_step(cfg: Config, tx):
  model = LM(cfg)

  def loss_fn(params, tokens):
    logits = model.apply({"params": params}, tokens[:, :-1])
    labels = tokens[:, 1:]
    label_logits = jnp.take_along_axis(logits, labels[..., None], axis=-1)
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - label_logits[..., 0])

  def train_step(state, tokens):
    loss, grads = jax.value_and_grad(loss_fn)(state["params"], tokens)
    updates, opt = tx.update(grads, state["opt"], state["params"])
    return {"params": optax.apply_updates(state["params"], updates),
            "opt": opt}, loss

  return jax.jit(train_step, donate_argnums=0)


def flops_per_token(cfg: Config, n_params: int) -> int:
  """6 N + 12 L d T (module docstring), N without the position table."""
  n = n_params - cfg.seq * cfg.width
  return 6 * n + 12 * cfg.layers * cfg.width * cfg.seq


def same_bits(a, b) -> bool:
  a, b = np.asarray(a), np.asarray(b)
  return (a.dtype == b.dtype and a.shape == b.shape
          and np.array_equal(a.reshape(-1).view(np.uint8),
                             b.reshape(-1).view(np.uint8)))


def checkpoint_round_trip(state, directory: str) -> dict:
  """Saves `state` with orbax, restores it onto the same devices, compares."""
  path = f"{directory}/state"
  ckptr = ocp.StandardCheckpointer()
  t0 = time.perf_counter()
  ckptr.save(path, state)
  ckptr.wait_until_finished()
  t1 = time.perf_counter()
  target = jax.tree_util.tree_map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding),
      state)
  restored = ckptr.restore(path, target)
  jax.block_until_ready(restored)
  t2 = time.perf_counter()
  ckptr.close()
  leaves, tree = jax.tree_util.tree_flatten(state)
  rleaves, rtree = jax.tree_util.tree_flatten(restored)
  exact = (tree == rtree and len(leaves) == len(rleaves)
           and all(same_bits(a, b) for a, b in zip(leaves, rleaves)))
  return {"exact": exact, "leaves": len(leaves), "save_s": t1 - t0,
          "restore_s": t2 - t1,
          "bytes": sum(x.size * x.dtype.itemsize for x in leaves)}


def memory(compiled, device) -> dict:
  out = {}
  try:
    temp = int(compiled.memory_analysis().temp_size_in_bytes)
  except Exception:   # pylint: disable=broad-except
    temp = 0          # not every backend analyses a program's memory
  if temp:            # (jaxlib 0.4.26's CPU client answers 0)
    out["temp_bytes"] = temp
  try:
    out["peak_bytes"] = int(device.memory_stats()["peak_bytes_in_use"])
  except Exception:   # pylint: disable=broad-except
    pass              # CPU has no memory_stats
  return out


def versions() -> dict:
  import importlib.metadata as md   # pylint: disable=g-import-not-at-top
  out = {"jax": jax.__version__}
  for dist in ("jaxlib", "flax", "optax", "orbax-checkpoint"):
    try:
      out[dist] = md.version(dist)
    except md.PackageNotFoundError:
      out[dist] = "?"
  out["flax"] = flax.__version__
  return out


def run(cfg: Config, *, batch: int = 8, steps: int = 20, untimed: int = 2,
        window: int = 5, lr: float = 6e-4, lr_warmup: int = 5, seed: int = 0,
        peak_tflops: float | None = None, ckpt_dir: str | None = None,
        log=print) -> dict:
  """Trains `steps` steps and round-trips the state; returns the results."""
  if not 0 <= untimed < steps:
    raise ValueError(f"--untimed {untimed} must be in [0, --steps {steps})")
  if cfg.width % cfg.heads:
    raise ValueError(f"--width {cfg.width} is not a multiple of --heads "
                     f"{cfg.heads}")
  device = jax.devices()[0]
  if peak_tflops is None and device.platform == "tpu":
    peak_tflops = V5E_PEAK_TFLOPS
  tx = make_optimizer(lr, lr_warmup)
  params = jax.device_put(init_params(cfg, seed), device)
  state = {"params": params, "opt": tx.init(params)}
  n_params = sum(int(np.prod(x.shape))
                 for x in jax.tree_util.tree_leaves(params))
  batches = jax.device_put(make_batches(cfg, batch, steps, seed), device)
  out = {"config": dataclasses.asdict(cfg), "batch": batch, "steps": steps,
         "platform": device.platform, "device": device.device_kind,
         "versions": versions(), "params": n_params}
  log(f"{device.device_kind} ({device.platform}); " + ", ".join(
      f"{k} {v}" for k, v in out["versions"].items()))
  log(f"{n_params / 1e6:.1f}M parameters; {cfg}; batch {batch}")

  train_step = make_train_step(cfg, tx)
  t0 = time.perf_counter()
  lowered = train_step.lower(state, batches[0])
  t1 = time.perf_counter()
  compiled = lowered.compile()
  t2 = time.perf_counter()
  out["lower_s"], out["compile_s"] = t1 - t0, t2 - t1

  losses, marks = [], []
  for i in range(steps):
    if i >= untimed and (i - untimed) % window == 0:
      jax.block_until_ready(state)
      marks.append((i, time.perf_counter()))
    state, loss = compiled(state, batches[i])
    losses.append(loss)
  jax.block_until_ready(state)
  marks.append((steps, time.perf_counter()))
  out["losses"] = [float(x) for x in losses]
  for i, x in enumerate(out["losses"]):
    log(f"step {i + 1:4d}  loss {x:.5f}")

  out["window_ms"] = [1e3 * (tb - ta) / (b - a)
                      for (a, ta), (b, tb) in zip(marks, marks[1:])]
  step_s = float(np.median(out["window_ms"])) / 1e3
  tokens = batch * cfg.seq
  out["step_ms"] = 1e3 * step_s
  out["tokens_per_s"] = tokens / step_s
  out["flops_per_token"] = flops_per_token(cfg, n_params)
  out["tflops"] = out["flops_per_token"] * out["tokens_per_s"] / 1e12
  out["mfu"] = out["tflops"] / peak_tflops if peak_tflops else None
  out.update(memory(compiled, device))
  log(f"step {out['step_ms']:.2f} ms (median of windows of {window}: " +
      " ".join(f"{w:.2f}" for w in out["window_ms"]) + f" ms), "
      f"{out['tokens_per_s']:,.0f} tokens/s, {out['tflops']:.2f} TFLOP/s" +
      (f", MFU {100 * out['mfu']:.1f}% of {peak_tflops:g} TFLOP/s"
       if out["mfu"] is not None else ""))
  log(f"lower {out['lower_s']:.2f} s, compile {out['compile_s']:.2f} s" +
      "".join(f", {k[:-6]} memory {out[k] / 2**30:.2f} GiB"
              for k in ("temp_bytes", "peak_bytes") if k in out))

  directory = ckpt_dir or tempfile.mkdtemp(prefix="lm_train_")
  try:
    out["checkpoint"] = ck = checkpoint_round_trip(state, directory)
  finally:
    if ckpt_dir is None:
      shutil.rmtree(directory, ignore_errors=True)
  log(f"checkpoint: {ck['leaves']} leaves, {ck['bytes'] / 2**20:.1f} MiB, "
      f"save {ck['save_s']:.2f} s, restore {ck['restore_s']:.2f} s, "
      f"restored {'exactly (bitwise)' if ck['exact'] else 'NOT EXACTLY'}")
  return out


def main(argv=None) -> int:
  p = argparse.ArgumentParser(
      description=__doc__.split("\n\n")[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  d = Config()
  p.add_argument("--layers", type=int, default=d.layers)
  p.add_argument("--width", type=int, default=d.width)
  p.add_argument("--heads", type=int, default=d.heads)
  p.add_argument("--seq", type=int, default=d.seq)
  p.add_argument("--vocab", type=int, default=d.vocab)
  p.add_argument("--dtype", default=d.dtype, choices=["bfloat16", "float32"])
  p.add_argument("--remat", action="store_true",
                 help="recompute each block's activations in the backward "
                 "pass (less memory)")
  p.add_argument("--batch", type=int, default=8)
  p.add_argument("--steps", type=int, default=20)
  p.add_argument("--untimed", type=int, default=2,
                 help="first steps left out of the step time")
  p.add_argument("--window", type=int, default=5,
                 help="steps per timed window (the median window counts)")
  p.add_argument("--lr", type=float, default=6e-4)
  p.add_argument("--lr-warmup", type=int, default=5)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--peak-tflops", type=float, default=None,
                 help=f"for MFU (default: {V5E_PEAK_TFLOPS:g} on a TPU)")
  p.add_argument("--ckpt-dir", default=None,
                 help="keep the checkpoint here (default: a temporary "
                 "directory, removed)")
  p.add_argument("--json", default=None, help="write the results here")
  a = p.parse_args(argv)
  cfg = Config(vocab=a.vocab, seq=a.seq, layers=a.layers, width=a.width,
               heads=a.heads, dtype=a.dtype, remat=a.remat)
  out = run(cfg, batch=a.batch, steps=a.steps, untimed=a.untimed,
            window=a.window, lr=a.lr, lr_warmup=a.lr_warmup, seed=a.seed,
            peak_tflops=a.peak_tflops, ckpt_dir=a.ckpt_dir)
  if a.json:
    with open(a.json, "w") as f:
      json.dump(out, f, indent=1)
  ok = out["checkpoint"]["exact"] and out["losses"][-1] < out["losses"][0]
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
