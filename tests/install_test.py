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
"""Installing the fork as a new user would: cold, with every frontend.

Each build here starts with an empty fork cache ($JAX_FORK_CACHE in a fresh
folder) and no $JAX_FORK_SDIST, from a copy of the checkout, with the working
directory elsewhere, so the real `pip download` of the upstream sdist runs
inside the frontend's build environment.  These tests need the package
registry (as `pip install .` does).
"""
from __future__ import annotations

import atexit
import email.parser
import functools
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from absl.testing import absltest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from forktool import upstream as U
from forktool import wheel as W

REPO = Path(__file__).resolve().parents[1]

PIN = U.load_pin(REPO)
# What the fork changes in upstream's metadata (documented in README,
# "Install"): the version, the summary, the description, and one added base
# requirement.
FORK_ADDED_REQUIREMENTS = {f"jaxlib=={PIN.jaxlib_version}"}


def _copy_checkout(dest: Path) -> Path:
  """The checkout's files as a fresh clone has them (no .work, .venv, dist)."""
  listing = subprocess.run(
      ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others",
       "--exclude-standard"], capture_output=True)
  if listing.returncode == 0:
    for name in listing.stdout.decode().split("\0"):
      if name and (REPO / name).is_file():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, dest / name)
  else:   # not a git checkout (e.g. the fork's own sdist)
    shutil.copytree(REPO, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
        ".work", ".venv", "dist", "__pycache__", ".git"))
  return dest


@functools.lru_cache(maxsize=None)
def _reference_wheel() -> Path:
  """The reference wheel, built in-process (any cache), once per process:
  every test class compares with the same bytes."""
  tmp = Path(tempfile.mkdtemp(prefix="fork-install-reference-"))
  atexit.register(shutil.rmtree, tmp, ignore_errors=True)
  return W.build_from_series(tmp, REPO / "patches")


class ColdInstallTestCase(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = Path(tempfile.mkdtemp(prefix="fork-install-test-"))
    cls.checkout = _copy_checkout(cls.tmp / "checkout")
    cls.reference = _reference_wheel()

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def cold_env(self) -> tuple[dict[str, str], Path]:
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=self.tmp))
    env = {k: v for k, v in os.environ.items()
           if k not in (U.SDIST_ENV, "PYTHONPATH", "VIRTUAL_ENV")}
    env[U.CACHE_ENV] = str(cache)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env, cache

  def workdir(self) -> Path:
    return Path(tempfile.mkdtemp(prefix="cwd-", dir=self.tmp))

  def run_ok(self, cmd, env, cwd, timeout=900) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
      self.fail(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n"
                f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc

  def assert_downloaded(self, cache: Path) -> None:
    """The cold build fetched and verified the sdist into the empty cache."""
    got = cache / PIN.sdist_name
    self.assertTrue(got.is_file(), f"no {PIN.sdist_name} in {cache}")
    self.assertEqual(U.sha256_of(got), PIN.sha256)

  def assert_same_wheel(self, wheel: Path) -> None:
    self.assertEqual(wheel.name, self.reference.name)
    self.assertEqual(wheel.read_bytes(), self.reference.read_bytes(),
                     f"{wheel} differs from the reference build")

  def venv(self, *, pip: bool = True) -> Path:
    d = Path(tempfile.mkdtemp(prefix="venv-", dir=self.tmp))
    # The newest pip, as a user who upgrades it has (pip 26.3's build
    # environment leaked into our child pip; the bundled 23.2.1's did not).
    args = [sys.executable, "-m", "venv", str(d),
            "--upgrade-deps" if pip else "--without-pip"]
    subprocess.run(args, check=True)
    return d / "bin" / "python"


class PipTest(ColdInstallTestCase):

  def test_pip_install_from_elsewhere_installs_a_working_fork(self):
    env, cache = self.cold_env()
    py = self.venv()
    self.run_ok([py, "-m", "pip", "install", "-q", self.checkout], env,
                self.workdir())
    self.assert_downloaded(cache)
    probe = self.run_ok([py, "-c", (
        "import jax, jax.numpy as jnp\n"
        "print(jax.__version__)\n"
        "j = jax.make_jaxpr(lambda x: x[..., 0])(jnp.ones((2, 3)))\n"
        "print('gather' in str(j))\n")], env, self.workdir())
    version, has_gather = probe.stdout.split()
    self.assertEqual(version, W.series_version(REPO / "patches"))
    self.assertEqual(has_gather, "False")   # patch 0004 is in

  def test_pip_install_without_build_isolation(self):
    env, cache = self.cold_env()
    py = self.venv()
    self.run_ok([py, "-m", "pip", "install", "-q", "--no-deps",
                 "--no-build-isolation", self.checkout], env, self.workdir())
    self.assert_downloaded(cache)
    show = self.run_ok([py, "-m", "pip", "show", "jax"], env, self.workdir())
    self.assertIn(f"Version: {W.series_version(REPO / 'patches')}",
                  show.stdout)

  def test_pip_wheel_is_the_reference_wheel(self):
    env, cache = self.cold_env()
    out = self.workdir()
    self.run_ok([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                 "-w", out, self.checkout], env, self.workdir())
    self.assert_downloaded(cache)
    self.assert_same_wheel(next(out.glob("jax-*.whl")))

  def test_ecosystem_constraints_keep_the_installed_fork(self):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    py = self.venv()
    self.run_ok([py, "-m", "pip", "install", "-q", self.reference], env,
                self.workdir())

    def to_install(*args: str) -> dict[str, str]:
      report = self.workdir() / "report.json"
      self.run_ok([py, "-m", "pip", "install", "--dry-run", "-q", "--report",
                   report, *args], env, self.workdir())
      return {canonicalize_name(i["metadata"]["name"]):
              i["metadata"]["version"]
              for i in json.loads(report.read_text())["install"]}

    constraints = REPO / "ecosystem-constraints.txt"
    plan = to_install("-c", constraints, "flax", "optax", "chex",
                      "orbax-checkpoint")
    self.assertNotIn("jax", plan)
    self.assertNotIn("jaxlib", plan)
    self.assertEqual(plan["flax"], "0.8.4")
    self.assertEqual(plan["orbax-checkpoint"], "0.6.4")
    # The failure the file exists for: without it pip replaces the fork.
    self.assertIn("jax", to_install("flax==0.8.4"))

  def test_offline_with_a_local_sdist_setting(self):
    env, cache = self.cold_env()
    sdist = U.get_sdist(PIN)   # warm: any cache
    env["PIP_NO_INDEX"] = "1"
    out = self.workdir()
    self.run_ok([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                 "--no-build-isolation", "-C", f"sdist={sdist}", "-w", out,
                 self.checkout], env, self.workdir())
    self.assertFalse((cache / PIN.sdist_name).exists())
    self.assert_same_wheel(next(out.glob("jax-*.whl")))


class BuildAndUvTest(ColdInstallTestCase):

  def test_python_m_build_sdist_then_wheel(self):
    env, cache = self.cold_env()
    out = self.workdir()
    self.run_ok([sys.executable, "-m", "build", "--outdir", out,
                 self.checkout], env, self.workdir())
    self.assert_downloaded(cache)
    self.assert_same_wheel(next(out.glob("jax-*.whl")))
    sdist = next(out.glob("jax-*.tar.gz"))
    with tarfile.open(sdist) as tf:
      names = {m.name.split("/", 1)[1] for m in tf.getmembers()}
    self.assertIn("patches/series", names)
    self.assertIn("build/forktool/backend.py", names)
    self.assertIn("fork.toml", names)
    # Reproducible: a second sdist from the same checkout is byte-identical.
    out2 = self.workdir()
    self.run_ok([sys.executable, "-m", "build", "--sdist", "--outdir", out2,
                 self.checkout], env, self.workdir())
    self.assertEqual(sdist.read_bytes(),
                     (out2 / sdist.name).read_bytes())

  def test_uv_pip_install_and_uv_build(self):
    uv = shutil.which("uv")
    if uv is None:
      self.fail("uv is not installed (requirements-test.txt installs it)")
    env, cache = self.cold_env()
    py = self.venv(pip=False)   # uv's venvs have no pip
    self.run_ok([uv, "pip", "install", "--python", py, "--no-deps",
                 self.checkout], env, self.workdir())
    self.assert_downloaded(cache)
    self.run_ok([py, "-c", "import importlib.metadata as m; "
                 "print(m.version('jax'))"], env, self.workdir())
    env, cache = self.cold_env()
    out = self.workdir()
    self.run_ok([uv, "build", "--out-dir", out, self.checkout], env,
                self.workdir())
    self.assert_downloaded(cache)
    self.assert_same_wheel(next(out.glob("jax-*.whl")))


def _parse_metadata(text: str):
  return email.parser.Parser().parsestr(text)


def _requirements(msg) -> set[str]:
  """Requirements in a canonical form, extras normalized (PEP 685)."""
  out = set()
  for r in msg.get_all("Requires-Dist") or []:
    req = Requirement(r)
    req.name = canonicalize_name(req.name)
    marker = str(req.marker) if req.marker else ""
    for extra in (msg.get_all("Provides-Extra") or []):
      marker = marker.replace(f'"{extra}"', f'"{canonicalize_name(extra)}"')
    req.marker = None
    out.add(f"{req}; {marker}" if marker else str(req))
  return out


class MetadataTest(ColdInstallTestCase):

  def upstream_wheel_metadata(self) -> str:
    out = self.workdir()
    self.run_ok([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                 "--only-binary", ":all:", f"jax=={PIN.version}", "-d", out],
                dict(os.environ), self.workdir())
    whl = next(out.glob("jax-*.whl"))
    with zipfile.ZipFile(whl) as zf:
      return zf.read(f"jax-{PIN.version}.dist-info/METADATA").decode()

  def test_metadata_is_upstreams_but_for_documented_changes(self):
    with zipfile.ZipFile(self.reference) as zf:
      ours = _parse_metadata(zf.read(
          f"jax-{W.series_version(REPO / 'patches')}.dist-info/METADATA"
      ).decode())
    theirs = _parse_metadata(self.upstream_wheel_metadata())
    changed = {"Version", "Summary", "Requires-Dist", "Provides-Extra"}
    for key in sorted(set(theirs.keys()) | set(ours.keys())):
      if key in changed:
        continue
      self.assertEqual(sorted(ours.get_all(key) or []),
                       sorted(theirs.get_all(key) or []), key)
    self.assertEqual(ours["Version"], W.series_version(REPO / "patches"))
    self.assertEqual(
        {canonicalize_name(e) for e in ours.get_all("Provides-Extra")},
        {canonicalize_name(e) for e in theirs.get_all("Provides-Extra")})
    self.assertEqual(_requirements(ours) - FORK_ADDED_REQUIREMENTS,
                     _requirements(theirs))
    self.assertTrue(FORK_ADDED_REQUIREMENTS <= _requirements(ours))
    for classifier in ("3.9", "3.10", "3.11", "3.12"):
      self.assertIn(f"Programming Language :: Python :: {classifier}",
                    ours.get_all("Classifier"))

  def resolve(self, spec: str) -> dict[str, str]:
    report = self.workdir() / "report.json"
    self.run_ok([sys.executable, "-m", "pip", "install", "--dry-run", "-q",
                 "--ignore-installed", "--report", report, spec],
                dict(os.environ), self.workdir())
    data = json.loads(report.read_text())
    return {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"]
            for i in data["install"]}

  def test_cuda12_extra_resolves_like_upstream(self):
    ours = self.resolve(f"{self.checkout}[cuda12]")
    theirs = self.resolve(f"jax[cuda12]=={PIN.version}")
    self.assertEqual(ours.pop("jax"), W.series_version(REPO / "patches"))
    self.assertEqual(theirs.pop("jax"), PIN.version)
    self.assertIn("jax-cuda12-plugin", ours)
    self.assertIn("nvidia-cudnn-cu12", ours)
    self.assertEqual(ours, theirs)

  def test_source_built_and_cuda_jaxlibs_satisfy_the_requirement(self):
    py = self.venv()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for version in (f"{PIN.jaxlib_version}+cuda12.cudnn89",
                    PIN.jaxlib_version):
      # A stand-in jaxlib wheel with that version, as a source build or
      # upstream's CUDA index would produce.
      wheels = self.workdir()
      name = f"jaxlib-{version}.dist-info"
      fake = wheels / f"jaxlib-{version}-py3-none-any.whl"
      with zipfile.ZipFile(fake, "w") as zf:
        zf.writestr(f"{name}/METADATA", "Metadata-Version: 2.1\nName: jaxlib"
                    f"\nVersion: {version}\n")
        zf.writestr(f"{name}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                    "Root-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{name}/RECORD", "")
      self.run_ok([py, "-m", "pip", "install", "-q", "--no-deps",
                   "--force-reinstall", fake], env, self.workdir())
      report = self.workdir() / "report.json"
      self.run_ok([py, "-m", "pip", "install", "--dry-run", "-q", "--report",
                   report, self.reference], env, self.workdir())
      install = {canonicalize_name(i["metadata"]["name"])
                 for i in json.loads(report.read_text())["install"]}
      self.assertIn("jax", install)
      self.assertNotIn("jaxlib", install, version)   # the installed one fits


if __name__ == "__main__":
  absltest.main()
