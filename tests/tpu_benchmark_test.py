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
"""`benchmarks/tpu.py --smoke`: every case runs on CPU, on both sides."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from absl.testing import absltest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import first_step  # noqa: E402  pylint: disable=g-import-not-at-top
import tpu  # noqa: E402  pylint: disable=g-import-not-at-top


class TpuBenchmarkSmokeTest(absltest.TestCase):

  def test_both_sides_report_every_figure_and_its_ratio(self):
    import jax
    # This jax stands in for the baseline too.
    site = str(Path(jax.__file__).resolve().parents[1])
    r = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "tpu.py"), "--smoke",
         "--rounds", "2", "--baseline-pythonpath", site],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PYTHONPATH=site))
    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
    # Two rounds, the sides alternating.
    sides = re.findall(r"^round (\d) (fork|baseline) \(", r.stdout, re.M)
    self.assertEqual(sides, [("0", "fork"), ("0", "baseline"),
                             ("1", "baseline"), ("1", "fork")])
    for name in tpu.COMPARED:
      row = re.search(rf"^\| `{name}` \| (.*) \| (.*) \| (.*) \|$", r.stdout,
                      re.M)
      self.assertIsNotNone(row, name)
      self.assertEqual(len(row.group(3).split("; ")), 2, name)
    sizes = json.loads(r.stdout.splitlines()[0].split("sizes: ", 1)[1])
    steps = re.search(r"^\| `train_step_ms` \| \[(.*?)\]", r.stdout, re.M)
    self.assertLen(steps.group(1).split(", "), sizes["batches"])
    # The same parameters and tokens on both sides: the same loss.
    losses = set(re.findall(r"^round \d (?:fork|baseline) \(.*"
                            r"train_loss ([0-9.]+)", r.stdout, re.M))
    self.assertLen(losses, 1, r.stdout)
    # Figures a backend does not report read n/a, and so do their ratios;
    # the CPU has no peak memory in use.
    self.assertRegex(r.stdout, r"(?m)^\| `train_peak_mb` \| n/a; n/a \| "
                     r"n/a; n/a \| n/a; n/a \|$")


class FirstStepSmokeTest(absltest.TestCase):

  def _first_step(self, *args: str) -> subprocess.CompletedProcess:
    """benchmarks/first_step.py's smoke run of `mid`, this jax standing in
    for the baseline too."""
    import jax
    site = str(Path(jax.__file__).resolve().parents[1])
    return subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "first_step.py"),
         "--smoke", "--programs", "mid", "--layers", "1",
         "--baseline-pythonpath", site, *args],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PYTHONPATH=site))

  def _rows(self, stdout: str) -> dict[str, str]:
    """Each figure's row of the final table."""
    rows = {}
    for name in first_step.FIGURES:
      row = re.search(rf"^\| mid \| `{name}` \| (.*) \| (.*) \| (.*) \|$",
                      stdout, re.M)
      self.assertIsNotNone(row, name + "\n" + stdout)
      rows[name] = row.group(0)
    return rows

  def test_every_figure_of_both_sides_and_their_ratio(self):
    r = self._first_step()
    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
    sides = re.findall(r"^round 0 mid (fork|baseline0) \(", r.stdout, re.M)
    self.assertEqual(sides, ["fork", "baseline0"])
    for row in self._rows(r.stdout).values():
      self.assertNotIn("n/a", row)
    # The persistent cache took the entry the fill process wrote.
    self.assertRegex(r.stdout, r"(?m)^\| mid \| `cache_entries` \| 1 \| 1 \|")

  def test_first_step_main_phase_alone(self):
    r = self._first_step("--phases", "load,fill")
    self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
    self.assertIn("--phases load,fill", r.stderr)
    r = self._first_step("--phases", "main")
    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
    for name, row in self._rows(r.stdout).items():
      cached = name in ("fill_compile_s", "cache_compile_s", "cache_entries")
      self.assertEqual("n/a" in row, cached, row)


if __name__ == "__main__":
  absltest.main()
