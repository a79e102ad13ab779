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
import tempfile

from absl.testing import absltest
import numpy as np

import jax

try:
  import flax_train  # needs flax, optax, orbax-checkpoint
except ImportError as e:   # pragma: no cover - CI installs them
  flax_train = None
  _why = str(e)


@absltest.skipIf(flax_train is None, "downstream packages not installed "
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
    params, losses = flax_train.train(steps=40)
    self.assertLess(losses[-1], 0.5 * losses[0])
    with tempfile.TemporaryDirectory() as d:
      restored = flax_train.save_and_restore(params, d)
    leaves_a = jax.tree_util.tree_leaves(params)
    leaves_b = jax.tree_util.tree_leaves(restored)
    self.assertEqual(len(leaves_a), len(leaves_b))
    for a, b in zip(leaves_a, leaves_b):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


if __name__ == "__main__":
  absltest.main()
