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
"""benchmarks/tpu_step_parts.py on the CPU: the fork's worker at --smoke
sizes, and the counts it reads from optimized HLO."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from absl.testing import absltest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import tpu_step_parts  # noqa: E402  pylint: disable=g-import-not-at-top

# Lines in jaxlib 0.4.26's and jax 0.10.2's HLO text styles.
HLO = """\
HloModule jit_f, entry_computation_layout={(f32[3,2]{1,0})->(f32[2,3]{1,0}, s32[])}, allow_spmd_sharding_propagation_to_output={true}

ENTRY %main (p: f32[3,2]) -> (f32[2,3], s32[]) {
  %fusion.1 = bf16[8]{0} fusion(bf16[8]{0} %p), kind=kLoop, calls=%f
  %copy-start = (f32[8]{0}, f32[8]{0}, u32[]) copy-start(f32[8]{0} %a)
  %copy-done = f32[8]{0} copy-done((f32[8]{0}, f32[8]{0}, u32[]) %copy-start)
  %copy.3 = f32[3,2]{0,1} copy(%p)
  %transpose.2 = f32[2,3]{1,0} transpose(f32[3,2]{1,0} %p), dimensions={1,0}
  %convert = f32[8]{0} convert(%fusion.1)
  ROOT %t = (f32[2,3]{1,0}, s32[]) tuple(%transpose.2, %c)
}
"""


class TpuStepPartsTest(absltest.TestCase):

  def test_hlo_counts(self):
    counts = tpu_step_parts.hlo_counts(HLO)
    layout = counts.pop("layout")
    self.assertEqual(counts, {
        "fusion": 1, "copy-start": 1, "copy-done": 1, "copy": 1,
        "transpose": 1, "convert": 1, "gather": 0, "scatter": 0})
    # The entry layout's digest: another layout, another digest.
    other = tpu_step_parts.hlo_counts(HLO.replace("f32[3,2]{1,0}",
                                                  "f32[3,2]{0,1}"))
    self.assertRegex(layout, "^[0-9a-f]{8}$")
    self.assertNotEqual(other["layout"], layout)
    # The layout ends the line, or another attribute follows it.
    alone = HLO.replace(", allow_spmd_sharding_propagation_to_output={true}",
                        "")
    self.assertEqual(tpu_step_parts.hlo_counts(alone)["layout"], layout)

  def test_fork_worker_on_cpu(self):
    import jax
    from jax._src.lib import xla_client
    site = str(Path(jax.__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as artifacts:
      r = subprocess.run(
          [sys.executable, str(REPO / "benchmarks" / "tpu_step_parts.py"),
           "--worker", "fork", "--smoke", "--layers", "1", "--artifacts",
           artifacts, "--worker-budget", "900"],
          capture_output=True, text=True, timeout=900,
          env=dict(os.environ, PYTHONPATH=site, JAX_PLATFORMS="cpu"))
      self.assertEqual(r.returncode, 0, r.stderr[-3000:])
      rows = {}
      for line in r.stdout.splitlines():
        if line.startswith("ROW "):
          table, name, row = json.loads(line[4:])
          rows[table, name] = row
      # jax 0.4.26's jnp.split is the three slices of "split_slices".
      self.assertEqual(rows["steps", "split_slices"],
                       {"note": "the plain step's module"})
      timed = {name: row for (table, name), row in rows.items()
               if table == "steps" and "ms" in row}
      self.assertEqual(set(timed), {"plain", "pick_one_hot", "split_concat",
                                    "concat+one_hot"})
      # The variants change the program, not the numbers.
      self.assertLen({row["loss"] for row in timed.values()}, 1, timed)
      for row in timed.values():
        self.assertGreater(row["fusion"], 0)
      # The built-in CPU backend is not served by the PJRT adapter.
      self.assertEqual(rows["steps", "plain, + mfl O2"],
                       {"note": "not through the PJRT adapter"})
      parts = {name for (table, name), row in rows.items()
               if table == "parts" and "ms" in row}
      self.assertEqual(parts, {"embed", "split jnp", "split slices",
                               "split concat", "layer", "head", "pick take",
                               "pick one_hot", "update"})
      # The modules the baseline compiles, as portable artifacts.
      for name in tpu_step_parts.SHARED:
        with open(os.path.join(artifacts, name + ".mlirbc"), "rb") as f:
          text = xla_client._xla.mlir.deserialize_portable_artifact(f.read())
        self.assertIn("stablehlo.dot_general", text)


if __name__ == "__main__":
  absltest.main()
