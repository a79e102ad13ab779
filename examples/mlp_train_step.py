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
"""A realistic train step in plain JAX: an MLP with remat on each layer, a
scan over micro-batches and an Adam update.

Shared by the jaxpr-dump tests (AOT identity) and benchmark (compile cost);
it runs on upstream jax 0.4.26 as well as on the fork.
"""
from __future__ import annotations

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

LEARNING_RATE = 1e-3


def init_params(key, sizes=(8, 16, 16, 4)):
  keys = jax.random.split(key, len(sizes) - 1)
  return [{"w": jax.random.normal(k, (m, n), jnp.float32) / np.sqrt(m),
           "b": jnp.zeros((n,), jnp.float32)}
          for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def mlp(params, x):
  @jax.checkpoint
  def layer(h, p):
    return jnp.tanh(h @ p["w"] + p["b"])
  for p in params[:-1]:
    x = layer(x, p)
  return x @ params[-1]["w"] + params[-1]["b"]


def loss_fn(params, batch):
  xs, ys = batch
  def micro_batch(total, xy):
    x, y = xy
    return total + jnp.mean((mlp(params, x) - y) ** 2), None
  total, _ = lax.scan(micro_batch, jnp.float32(0), (xs, ys))
  return total / xs.shape[0]


def train_step(params, opt_state, batch):
  loss, grads = jax.value_and_grad(loss_fn)(params, batch)
  m, v, t = opt_state
  t = t + 1
  tmap = jax.tree_util.tree_map
  m = tmap(lambda m, g: 0.9 * m + 0.1 * g, m, grads)
  v = tmap(lambda v, g: 0.999 * v + 0.001 * g * g, v, grads)
  corr1 = 1 - 0.9 ** t.astype(jnp.float32)
  corr2 = 1 - 0.999 ** t.astype(jnp.float32)
  params = tmap(lambda p, m, v: p - LEARNING_RATE * (m / corr1) /
                (jnp.sqrt(v / corr2) + 1e-8), params, m, v)
  return params, (m, v, t), loss


def train_inputs(sizes=(8, 16, 16, 4), micro_batches: int = 3,
                 batch: int = 2, seed: int = 0):
  """(params, opt_state, batch) for `train_step`."""
  k_params, k_x, k_y = jax.random.split(jax.random.key(seed), 3)
  params = init_params(k_params, sizes)
  zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
  opt_state = (zeros, zeros, jnp.zeros((), jnp.int32))
  xs = jax.random.normal(k_x, (micro_batches, batch, sizes[0]), jnp.float32)
  ys = jax.random.normal(k_y, (micro_batches, batch, sizes[-1]), jnp.float32)
  return params, opt_state, (xs, ys)
