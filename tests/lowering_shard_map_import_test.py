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
"""Lowering a jit imports no shard_map; a jitted shard_map still takes the
devices of its mesh (patch 0150)."""
from __future__ import annotations

from functools import partial
import os
import subprocess
import sys
import textwrap

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS",
                                                                ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=2")

from absl.testing import absltest
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import test_util as jtu


class LoweringShardMapImportTest(jtu.JaxTestCase):

  def test_lowering_a_jit_does_not_import_shard_map(self):
    # A fresh process: this one has imported shard_map below.
    script = textwrap.dedent("""
        import sys
        import jax
        import jax.numpy as jnp
        jax.jit(lambda x: jnp.sin(x) @ x).lower(jnp.ones((3, 3))).compile()
        print("jax.experimental.shard_map" in sys.modules)
        """)
    out = subprocess.run([sys.executable, "-c", script], check=True,
                         capture_output=True, text=True).stdout
    self.assertEqual(out.strip().splitlines()[-1], "False")

  def test_jitted_shard_map_takes_the_devices_of_its_mesh(self):
    from jax.experimental.shard_map import shard_map  # pylint: disable=g-import-not-at-top
    from jax.sharding import Mesh, PartitionSpec as P  # pylint: disable=g-import-not-at-top
    if jax.device_count() < 2:
      self.skipTest("needs 2 devices")
    devices = jax.devices()[:2][::-1]
    mesh = Mesh(np.array(devices), ("i",))

    @jax.jit
    @partial(shard_map, mesh=mesh, in_specs=P("i"), out_specs=P())
    def f(x):
      return lax.psum(jnp.sum(x, axis=0), "i")

    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    out = f(x)
    self.assertEqual(out.sharding._device_assignment, tuple(devices))
    np.testing.assert_allclose(out, x.sum(axis=0))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
