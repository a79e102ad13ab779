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
"""The suite's per-test time limit (pyproject.toml): a hung test is a failure
that names it, with every thread's Python stack, with pytest-xdist or without;
build/fork.py upstream-tests passes the same options."""
from __future__ import annotations

import subprocess
import sys

import pytest

from forktool import upstream as U
from forktool import upstream_tests

_HANGS = """
import threading

def test_passes():
  pass

def test_hangs():
  threading.Event().wait()   # no one sets it
"""


def _pytest(tmp_path, *args):
  (tmp_path / "hang_test.py").write_text(_HANGS)
  return subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-c",
       str(U.REPO_ROOT / "pyproject.toml"), "--rootdir", str(tmp_path),
       # the suite's options, at a limit this test can wait for
       "-o", "timeout=4", "-o", "faulthandler_timeout=3",
       str(tmp_path / "hang_test.py"), *args],
      capture_output=True, text=True, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_hung_test_fails_by_name_with_its_stacks(tmp_path, workers):
  out = _pytest(tmp_path, *workers)
  text = out.stdout + out.stderr
  assert out.returncode != 0, text
  # Every thread's stack, the hung test's frame in it.
  assert "Timeout" in text, text
  assert 'hang_test.py", line 8' in text and "test_hangs" in text, text
  if workers:   # xdist names the test whose worker the limit ended
    assert "hang_test.py::test_hangs" in text, text
    assert "1 failed, 1 passed" in text, text


def test_upstream_test_runs_get_the_same_limit():
  with open(U.REPO_ROOT / "pyproject.toml", "rb") as f:
    ini = U.tomllib.load(f)["tool"]["pytest"]["ini_options"]
  assert upstream_tests.time_limit_options() == [
      f"-otimeout={ini['timeout']}", "-otimeout_method=thread",
      f"-ofaulthandler_timeout={ini['faulthandler_timeout']}"]
  assert 0 < ini["faulthandler_timeout"] < ini["timeout"]
