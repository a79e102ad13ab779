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
"""The fork under the JAX ecosystem: flax + optax + orbax (examples/)."""
from __future__ import annotations

import importlib.metadata
import math
import os
import tempfile

from absl.testing import absltest
import numpy as np

import jax
import jax.numpy as jnp

import lm_chip   # the chip runner's helpers need no ecosystem

try:
  import lm_train  # needs flax, optax, orbax-checkpoint
except ImportError as e:   # pragma: no cover - CI installs them
  lm_train = None
  _why = str(e)

# examples/lm_train.py at sizes a CPU trains in seconds.
TINY = dict(vocab=512, seq=64, layers=2, width=64, heads=4)


@absltest.skipIf(lm_train is None, "downstream packages not installed "
                 "(pip install -c ecosystem-constraints.txt flax optax chex "
                 "orbax-checkpoint)")
class DownstreamTest(absltest.TestCase):
  """A plain TestCase: downstream code runs under default jax config."""

  def test_ecosystem_kept_the_fork(self):
    self.assertIn("+fork", importlib.metadata.version("jax"))
    self.assertEqual(importlib.metadata.version("jax"), jax.__version__)
    for dist, version in [("flax", "0.8.4"), ("optax", "0.2.2"),
                          ("chex", "0.1.86"), ("orbax-checkpoint", "0.6.4")]:
      self.assertEqual(importlib.metadata.version(dist), version)

  def test_train_and_checkpoint_round_trip(self):
    cfg = lm_train.Config(**TINY)
    out = lm_train.run(cfg, batch=4, steps=12, lr=3e-3, log=lambda s: None)
    losses = out["losses"]
    self.assertLen(losses, 12)
    # NumPy's GPT-2 initialisation predicts nearly uniformly at first ...
    self.assertAlmostEqual(losses[0], math.log(cfg.vocab), delta=0.1)
    # ... and AdamW brings the loss down.
    self.assertLess(np.mean(losses[-3:]), np.mean(losses[:3]) - 0.2)
    ck = out["checkpoint"]
    self.assertTrue(ck["exact"])
    params = lm_train.init_params(cfg)
    n = len(jax.tree_util.tree_leaves(params))
    self.assertGreater(ck["leaves"], 3 * n)   # params, Adam's mu and nu, ...
    self.assertLen(out["window_ms"], 2)
    self.assertGreater(out["tokens_per_s"], 0)
    self.assertIsNone(out["mfu"])   # no peak rate for a CPU unless given

  def test_same_bits_tells_bits_apart(self):
    x = np.array([0.0, 1.5, np.nan], np.float32)
    self.assertTrue(lm_train.same_bits(x, x.copy()))
    self.assertFalse(lm_train.same_bits(x, -x))   # 0.0 == -0.0, bits differ
    flipped = x.copy()
    flipped.view(np.uint32)[1] ^= 1
    self.assertFalse(lm_train.same_bits(x, flipped))
    self.assertFalse(lm_train.same_bits(x, x.astype(jnp.bfloat16)))
    self.assertFalse(lm_train.same_bits(x, x[None]))

  def test_gpt2_small_shape(self):
    cfg = lm_train.Config()
    shapes = jax.eval_shape(lm_train.LM(cfg).init, jax.random.PRNGKey(0),
                            jax.ShapeDtypeStruct((1, cfg.seq), jnp.int32))
    n = sum(math.prod(x.shape) for x in jax.tree_util.tree_leaves(shapes))
    # GPT-2 small with its vocabulary padded to 50304: 123.69M parameters
    # without the position table, as nanoGPT counts them.
    self.assertEqual(n - cfg.seq * cfg.width, 123_689_472)

  def test_numpy_init_is_the_models_tree(self):
    cfg = lm_train.Config(**TINY)
    params = lm_train.init_params(cfg, seed=3)
    flax_params = jax.jit(lm_train.LM(cfg).init)(
        jax.random.PRNGKey(0), jnp.zeros((1, cfg.seq), jnp.int32))["params"]
    self.assertEqual(jax.tree_util.tree_structure(params),
                     jax.tree_util.tree_structure(flax_params))
    for a, b in zip(jax.tree_util.tree_leaves(params),
                    jax.tree_util.tree_leaves(flax_params)):
      self.assertEqual((a.shape, a.dtype), (b.shape, b.dtype))
    again = lm_train.init_params(cfg, seed=3)
    other = lm_train.init_params(cfg, seed=4)
    self.assertTrue(all(lm_train.same_bits(a, b) for a, b in zip(
        jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(again))))
    self.assertFalse(lm_train.same_bits(params["wte"], other["wte"]))
    self.assertAlmostEqual(float(np.std(params["wte"])), 0.02, delta=0.002)

  def test_causal_softmax_is_jaxs_masked_softmax(self):
    rng = np.random.default_rng(0)
    s = jnp.asarray(rng.standard_normal((2, 3, 5, 5)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((2, 3, 5, 5)), jnp.float32)
    causal = np.tril(np.ones((5, 5), bool))
    ours = lambda s: lm_train.causal_softmax(s, jnp.float32)
    jaxs = lambda s: jax.nn.softmax(jnp.where(causal, s, -np.inf))
    np.testing.assert_allclose(ours(s), jaxs(s), atol=1e-6)
    self.assertTrue(np.all(np.asarray(ours(s))[..., ~causal] == 0))
    grad = lambda f: jax.grad(lambda s: jnp.sum(f(s) * w))(s)
    np.testing.assert_allclose(grad(ours), grad(jaxs), atol=1e-6)
    self.assertEqual(lm_train.causal_softmax(s, jnp.bfloat16).dtype,
                     jnp.bfloat16)

  def test_bad_sizes_are_named(self):
    cfg = lm_train.Config(**dict(TINY, heads=3))
    with self.assertRaisesRegex(ValueError, "--width 64 .* --heads 3"):
      lm_train.run(cfg, steps=4, log=lambda s: None)
    with self.assertRaisesRegex(ValueError, "--untimed 5 .* --steps 4"):
      lm_train.run(lm_train.Config(**TINY), steps=4, untimed=5,
                   log=lambda s: None)


class ChipRunnerTest(absltest.TestCase):
  """examples/lm_chip.py installs only what a side's own path lacks."""

  def _dist(self, root, name, version, *requires):
    d = os.path.join(root, f"{name}-{version}.dist-info")
    os.makedirs(d)
    with open(os.path.join(d, "METADATA"), "w") as f:
      f.write(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
      f.writelines(f"Requires-Dist: {r}\n" for r in requires)

  def test_missing_requirements(self):
    with tempfile.TemporaryDirectory() as eco, \
         tempfile.TemporaryDirectory() as side:
      self._dist(eco, "flax", "0.8.4", "jax>=0.4.19", "msgpack",
                 "etils[epath]", "win32-thing; sys_platform == 'win32'")
      self._dist(side, "jax", "0.4.26+fork5")
      self._dist(side, "etils", "1.14.0", "fsspec; extra == 'epath'",
                 "s3fs; extra == 'epath-s3'")
      self._dist(side, "msgpack", "1.0.0")
      self.assertEqual(
          lm_chip.missing_requirements([eco, side], ["flax"]),
          {"fsspec": "fsspec"})
      self._dist(eco, "msgpack", "0.5.0")   # shadows the side's
      self._dist(eco, "fsspec", "2026.1.0")
      self.assertEqual(
          lm_chip.missing_requirements([eco, side], ["flax"]), {})
      self._dist(eco, "optax", "0.2.8", "jax>=0.5.3", "chex>=0.1.86")
      self.assertEqual(
          lm_chip.missing_requirements([eco, side], ["flax", "optax"]),
          {"jax": "jax>=0.5.3", "chex": "chex>=0.1.86"})


if __name__ == "__main__":
  absltest.main()
