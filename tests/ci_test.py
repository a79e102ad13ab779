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
"""The test selection CI makes on the other Pythons (.ci/other-pythons):
JAX_FORK_TEST_CASES=K/N in tests/conftest.py."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from absl.testing import absltest

TESTS = Path(__file__).resolve().parent

SAMPLE = textwrap.dedent("""
    from absl.testing import absltest
    from absl.testing import parameterized

    class SampleTest(parameterized.TestCase):

      @parameterized.parameters(*range(7))
      def test_cases(self, i):
        pass

      @parameterized.named_parameters(("a", 1), ("b", 2))
      def test_named(self, i):
        pass

      def test_plain(self):
        pass
    """)


class CaseShareTest(absltest.TestCase):

  def collected(self, share: str | None) -> set[str]:
    folder = Path(tempfile.mkdtemp())
    self.addCleanup(shutil.rmtree, folder, ignore_errors=True)
    shutil.copy(TESTS / "conftest.py", folder / "conftest.py")
    (folder / "sample_test.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_FORK_TEST_CASES", "PYTEST_ADDOPTS")}
    if share:
      env["JAX_FORK_TEST_CASES"] = share
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q",
         "-p", "no:cacheprovider", "sample_test.py"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
    return {line.rpartition("::")[2] for line in proc.stdout.splitlines()
            if "::" in line}

  def test_each_file_everywhere_each_test_once(self):
    everything = {*(f"test_cases{i}" for i in range(7)), "test_named_a",
                  "test_named_b", "test_plain"}
    self.assertEqual(self.collected(None), everything)
    shares = [self.collected(f"{k}/3") for k in range(3)]
    self.assertEqual(set.union(*shares), everything)
    for k, share in enumerate(shares):
      for other in shares[k + 1:]:
        self.assertEqual(share & other, set())
    # unittest's order (by name), dealt from the first Python on
    self.assertEqual(shares[0], {"test_cases0", "test_cases3", "test_cases6",
                                 "test_plain"})
    self.assertEqual(shares[1], {"test_cases1", "test_cases4", "test_named_a"})


if __name__ == "__main__":
  absltest.main()
