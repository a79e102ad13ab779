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
"""jax._src.test_util.rand_like, which upstream's later test files call: the
helper of jax._src.public_test_util (patch 0013-test-util-rand-like.patch)."""
from __future__ import annotations

from absl.testing import absltest
import numpy as np

from jax._src import public_test_util
from jax._src import test_util as jtu


class RandLikeTest(jtu.JaxTestCase):
  superseded_patch = "0013"

  def test_is_public_test_util_rand_like(self):
    self.assertIs(jtu.rand_like, public_test_util.rand_like)
    x = jtu.rand_like(np.random.RandomState(0), np.zeros((2, 3), np.float32))
    self.assertEqual((x.shape, x.dtype), ((2, 3), np.float32))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
