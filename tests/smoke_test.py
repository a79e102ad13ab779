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
"""Smoke test of the installed fork: it is the fork, and jit/grad/vmap work."""
from __future__ import annotations

import re

from absl.testing import absltest
import numpy as np

import jax
import jax.numpy as jnp
from jax._src import test_util as jtu


# The upstream release under the fork: the pin, or that of a rebased series
# (rebases/jax-VERSION, tested by .ci/rebase-record).
RELEASES = ("0.4.26", "0.4.30")
RELEASE = jax.version._version


class SmokeTest(jtu.JaxTestCase):

  def test_version_is_the_fork(self):
    self.assertIn(RELEASE, RELEASES)
    self.assertRegex(jax.__version__, rf"^{re.escape(RELEASE)}\+fork\d+$")
    self.assertEqual(jax.__version_info__,
                     tuple(int(p) for p in RELEASE.split(".")))
    import jaxlib.version
    self.assertEqual(jaxlib.version.__version__, RELEASE)

  def test_version_scheme(self):
    # Upstream 0.4.26's tests/version_test.py pattern accepts it ...
    upstream_pattern = re.compile(
        r"^[0-9]+\.[0-9]+\.[0-9]+(?:\.dev[0-9]+)?(?:\+[a-zA-Z0-9_]+)?$")
    self.assertRegex(jax.__version__, upstream_pattern)
    # ... and PEP 440 orders it after upstream's release and the fork's
    # earlier `+fork.N` labels, whatever N.
    from packaging.version import Version
    v = Version(jax.__version__)
    self.assertEqual(str(v), jax.__version__)    # already normalized
    self.assertEqual(v.public, RELEASE)
    for older in ("", "+fork.1", "+fork.3", "+fork.99"):
      self.assertGreater(v, Version(RELEASE + older))
    major, minor, micro = v.release
    self.assertLess(v, Version(f"{major}.{minor}.{micro + 1}"))

  def test_jit_matches_numpy(self):
    rng = np.random.RandomState(0)
    a = rng.randn(5, 7).astype(np.float32)
    b = rng.randn(7, 3).astype(np.float32)
    f = jax.jit(lambda a, b: jnp.tanh(a @ b).sum(axis=0))
    self.assertAllClose(f(a, b), np.tanh(a @ b).sum(axis=0), rtol=1e-5)

  def test_grad_matches_closed_form(self):
    x = np.linspace(-2, 2, 9, dtype=np.float32)
    g = jax.grad(lambda x: jnp.sum(jnp.sin(x) * x))(x)
    self.assertAllClose(g, np.cos(x) * x + np.sin(x), rtol=1e-5)

  def test_vmap_of_grad_matches_loop(self):
    xs = np.random.RandomState(1).randn(4, 3).astype(np.float32)
    f = lambda x: jnp.sum(x ** 3)
    batched = jax.vmap(jax.grad(f))(xs)
    self.assertAllClose(batched, np.stack([3 * x ** 2 for x in xs]),
                        rtol=1e-5)

  def test_collectives_across_host_devices(self):
    n = jax.device_count()
    xs = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    out = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(xs)
    np.testing.assert_array_equal(np.asarray(out),
                                  np.broadcast_to(xs.sum(0), xs.shape))
    self.assertEqual({d.platform for d in jax.devices()}, {"cpu"})


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
