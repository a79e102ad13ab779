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
"""Test session setup: 8 host CPU devices, before anything imports jax."""
from __future__ import annotations

import functools
import os

_flag = "--xla_force_host_platform_device_count=8"
if _flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag
                             ).strip()
os.environ.setdefault("JAX_NUM_GENERATED_CASES", "10")


def _build_native_half() -> None:
  """The PJRT adapter's native half (patch 0026) beside the C source of a
  materialized tree on PYTHONPATH, where it is missing: the fork loads it
  from there alone, and a wheel carries its own (build/forktool/native.py).
  Built under a temporary name and renamed (pytest-xdist's workers race);
  git leaves it out of the tree's patches."""
  import importlib.util   # pylint: disable=g-import-not-at-top
  from pathlib import Path   # pylint: disable=g-import-not-at-top
  spec = importlib.util.find_spec("jax")
  if spec is None or not spec.submodule_search_locations:
    return
  package = Path(list(spec.submodule_search_locations)[0])
  source = package / "_src" / "pjrt_adapter.c"
  git = package.parent / ".git"
  if not (source.is_file() and git.is_dir()):
    return
  try:
    from forktool import native   # pylint: disable=g-import-not-at-top
  except ImportError:   # build/ not on sys.path: run by absltest
    return
  library = source.with_name(native.library_name(source.read_bytes()))
  cc, _ = native.find_compiler()
  if library.exists() or cc is None:
    return
  exclude = git / "info" / "exclude"
  if "pjrt_adapter-*.so" not in (exclude.read_text()
                                 if exclude.exists() else ""):
    exclude.parent.mkdir(exist_ok=True)
    with exclude.open("a") as f:
      f.write("/jax/_src/pjrt_adapter-*.so\n")
  built = library.with_name(f"{library.name}.{os.getpid()}")
  native.compile_library(cc, source, built)
  os.replace(built, library)


_build_native_half()


def pjrt_plugin_path() -> str | None:
  """A newer XLA CPU PJRT plugin: $JAX_FORK_TEST_PJRT_PLUGIN, else PyPI's
  lammps-jax-pjrt-cpu (requirements-test.txt), else None."""
  if os.environ.get("JAX_FORK_TEST_PJRT_PLUGIN"):
    return os.environ["JAX_FORK_TEST_PJRT_PLUGIN"]
  try:
    import lammps_jax_pjrt_cpu   # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  return str(lammps_jax_pjrt_cpu.PLUGIN_PATH)


if os.environ.get("JAX_FORK_TEST_ON_PLUGIN") == "1":
  # The tests with that plugin (8 devices) as JAX's one backend, served by
  # the PJRT adapter (patch 0026).
  import json, tempfile   # pylint: disable=g-import-not-at-top
  _config = os.path.join(tempfile.mkdtemp(), "cpu_plugin.json")
  with open(_config, "w") as _f:
    json.dump({"library_path": pjrt_plugin_path(),
               "create_options": {"cpu_device_count": 8}}, _f)
  os.environ["PJRT_NAMES_AND_LIBRARY_PATHS"] = f"plugin:{_config}"
  os.environ["JAX_PLATFORMS"] = "plugin"
os.environ.setdefault("JAX_PLATFORMS", "cpu")


# The reason tests/tpu_test.py gives for skipping without a TPU: the one skip
# CI=true allows.
NEEDS_A_TPU = "needs a TPU"


def _strict_ci() -> bool:
  return os.environ.get("CI", "").lower() in ("1", "true", "yes")


try:
  import pytest
except ImportError:   # absltest run without pytest
  pytest = None

if pytest is not None:

  @pytest.hookimpl(hookwrapper=True)
  def pytest_runtest_makereport(item, call):
    """With CI=true a skip is a failure: a green CI means every test ran.

    Our tests skip only when a tool that `.ci/install-test-deps` installs
    (Node's source-map, Chromium, the GCS emulator, the ecosystem packages,
    the PJRT CPU plugin) is missing; in CI that is a broken install, not a
    reason to pass. The exception: tests/tpu_test.py skips without a TPU.
    """
    outcome = yield
    report = outcome.get_result()
    if report.skipped and _strict_ci() and not hasattr(report, "wasxfail"):
      reason = report.longrepr[2] if isinstance(report.longrepr, tuple) \
          else str(report.longrepr)
      if NEEDS_A_TPU in reason:   # CI has no accelerator
        return
      report.outcome = "failed"
      report.longrepr = f"skipped under CI=true (a missing tool?): {reason}"

  def _checked_interpret() -> bool:
    return os.environ.get("JAX_FORK_TEST_INTERPRET") == "races"

  def pytest_configure(config):
    """JAX_FORK_TEST_INTERPRET=races runs every `interpret=True` Pallas kernel
    of the tests under `pltpu.InterpretParams(detect_races=True)`, its
    warnings errors; the tests marked `interpret_true_only(reason)` (of what
    interpret=True alone does, or of kernels with the bugs it does not
    check) are deselected."""
    config.addinivalue_line(
        "markers", "interpret_true_only(reason): a Pallas test that "
        "JAX_FORK_TEST_INTERPRET=races leaves out")
    if not _checked_interpret():
      return
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    pallas_call = pl.pallas_call
    @functools.wraps(pallas_call)
    def checked_pallas_call(*args, interpret=False, **kwargs):
      if interpret is True:
        interpret = pltpu.InterpretParams(detect_races=True)
      return pallas_call(*args, interpret=interpret, **kwargs)
    pl.pallas_call = checked_pallas_call
    config.addinivalue_line(
        "filterwarnings", "error::jax.experimental.pallas.tpu.InterpretWarning")

  def pytest_collection_modifyitems(config, items):
    """Leaves out the tests of a superseded patch's own contract.

    A test class with `superseded_patch = "NNNN"` tests what patch NNNN alone
    promised (error types and messages, API extras).  On a jax release at or
    after the patch's `Superseded-In` field (a series rebased under
    rebases/, .ci/rebase-record) upstream's own version of the change is
    there instead, tested by upstream's test files; those tests are
    deselected, not skipped.
    """
    keep, drop = [], []
    shared_out = _cases_shared_out(items)
    for item in items:
      number = getattr(getattr(item, "cls", None), "superseded_patch", None)
      superseded = number and _superseded_on(number, _jax_version())
      left_out = _checked_interpret() and item.get_closest_marker(
          "interpret_true_only")
      (drop if superseded or left_out or item in shared_out
       else keep).append(item)
    if drop:
      config.hook.pytest_deselected(items=drop)
      items[:] = keep


def _cases_shared_out(items) -> set:
  """JAX_FORK_TEST_CASES=K/N (.ci/other-pythons: the K-th of N Pythons,
  from 0) deals each test file's tests to the N in turn, the f-th file's
  first to the (f mod N)-th, and leaves out those dealt to the others: each
  file runs on each of the N (one with N tests or more), each test on one of
  them. (.ci/run runs every test on 3.11.)"""
  share = os.environ.get("JAX_FORK_TEST_CASES")
  if not share:
    return set()
  k, n = (int(x) for x in share.split("/"))
  files: dict = {}   # a file's position among the files
  dealt: dict = {}   # how many of a file's tests are dealt
  out = set()
  for item in items:
    f = files.setdefault(item.path, len(files))
    i = dealt[item.path] = dealt.get(item.path, 0) + 1
    if (f + i - 1) % n != k:
      out.add(item)
  return out


def _jax_version() -> str:
  """The running jax's version: imported here, after the environment above
  is set, and only where a test names a superseded patch (a collection of
  files that import no jax, as tests/ci_test.py's, then starts none)."""
  import jax   # pylint: disable=g-import-not-at-top
  return jax.version._version


@functools.lru_cache(maxsize=None)
def _superseded_on(number: str, release: str) -> bool:
  """Whether patch NNNN's `Superseded-In` field names `release` or earlier."""
  from forktool import patches as P   # build/ (pytest's pythonpath)
  from forktool import rebase as R
  from forktool import upstream as U
  (path,) = (U.REPO_ROOT / "patches").glob(f"{number}-*.patch")
  return R.superseded_on(P.read_patch(path).superseded_in(), release)
