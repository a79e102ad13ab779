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
"""A downstream project on the fork: flax + optax training, orbax checkpoint.

  python examples/flax_train.py [CHECKPOINT_DIR]

Trains a small MLP on a synthetic regression task for a few jitted steps,
saves the parameters with orbax, restores them and checks they are equal.
Install the ecosystem so that pip keeps the fork (docs/install.md):

  pip install -c ecosystem-constraints.txt flax optax chex orbax-checkpoint
"""
from __future__ import annotations

import sys
import tempfile

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp


class MLP(nn.Module):
  hidden: int = 32

  @nn.compact
  def __call__(self, x):
    x = nn.relu(nn.Dense(self.hidden)(x))
    return nn.Dense(1)(x)


def make_data(n: int = 256, seed: int = 0):
  rng = np.random.RandomState(seed)
  x = rng.uniform(-1, 1, size=(n, 4)).astype(np.float32)
  y = (np.sin(x @ np.array([1., -2., .5, 3.], np.float32)))[:, None]
  return jnp.asarray(x), jnp.asarray(y)


def train(steps: int = 50, seed: int = 0):
  x, y = make_data(seed=seed)
  model = MLP()
  params = model.init(jax.random.PRNGKey(seed), x[:1])
  tx = optax.adam(1e-2)
  opt_state = tx.init(params)

  @jax.jit
  def train_step(params, opt_state, x, y):
    def loss_fn(p):
      return jnp.mean((model.apply(p, x) - y) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  losses = []
  for _ in range(steps):
    params, opt_state, loss = train_step(params, opt_state, x, y)
    losses.append(float(loss))
  return params, losses


def save_and_restore(params, directory: str):
  ckptr = ocp.PyTreeCheckpointer()
  path = f"{directory}/params"
  ckptr.save(path, params)
  return ckptr.restore(path)


def main(argv):
  directory = argv[1] if len(argv) > 1 else tempfile.mkdtemp()
  params, losses = train()
  restored = save_and_restore(params, directory)
  same = jax.tree_util.tree_all(jax.tree_util.tree_map(
      lambda a, b: bool(np.array_equal(np.asarray(a), np.asarray(b))),
      params, restored))
  print(f"jax {jax.__version__}: loss {losses[0]:.4f} -> {losses[-1]:.4f}; "
        f"checkpoint restored equal: {same}")
  return 0 if same and losses[-1] < losses[0] else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv))
