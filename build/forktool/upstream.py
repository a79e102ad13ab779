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
"""The upstream pin: reading fork.toml, fetching and verifying the sdist."""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

try:
  import tomllib
except ModuleNotFoundError:  # Python < 3.11: the same parser, from PyPI
  import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parents[2]
SDIST_ENV = "JAX_FORK_SDIST"
CACHE_ENV = "JAX_FORK_CACHE"


class UpstreamError(Exception):
  """The upstream sdist cannot be had or is not the pinned one."""


@dataclasses.dataclass(frozen=True)
class Pin:
  name: str
  version: str
  sha256: str
  jaxlib_version: str
  summary: str

  @property
  def sdist_name(self) -> str:
    return f"{self.name}-{self.version}.tar.gz"


def load_pin(root: Path = REPO_ROOT) -> Pin:
  with open(root / "fork.toml", "rb") as f:
    data = tomllib.load(f)
  try:
    return Pin(name=data["upstream"]["name"],
               version=data["upstream"]["version"],
               sha256=data["upstream"]["sha256"].lower(),
               jaxlib_version=data["jaxlib"]["version"],
               summary=data["metadata"]["summary"])
  except KeyError as e:
    raise UpstreamError(f"fork.toml lacks the key {e}") from None


def sha256_of(path: Path) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      h.update(chunk)
  return h.hexdigest()


def verify(path: Path, pin: Pin) -> None:
  actual = sha256_of(path)
  if actual != pin.sha256:
    raise UpstreamError(
        f"sha256 mismatch for {path}: expected {pin.sha256}, got {actual}. "
        "The file is not the pinned upstream sdist; refusing to build.")


def cache_dir() -> Path:
  base = os.environ.get(CACHE_ENV)
  if base:
    return Path(base)
  xdg = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
  return Path(xdg) / "jax-fork"


# Variables through which a PEP 517 frontend, pip's build isolation or an
# enclosing pip talk to their own children (and user install options that do
# not apply to a download).  A pip started from inside our build must not see
# them: with them, its own build of an sdist would look for setuptools in
# *our* backend-path, and share our build's tracker.
_FRONTEND_VAR_PREFIXES = ("_PYPROJECT_HOOKS_", "PEP517_")
_FRONTEND_VARS = ("PIP_BUILD_TRACKER", "PIP_REQ_TRACKER", "PIP_NO_BUILD_ISOLATION",
                  "PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME",
                  "PYTHONSTARTUP", "PYTHONSAFEPATH", "PIP_TARGET", "PIP_PREFIX",
                  "PIP_USER", "PIP_REQUIRE_VIRTUALENV", "PIP_CONSTRAINT",
                  "PIP_REQUIREMENT", "__PYVENV_LAUNCHER__")


def strip_build_env(environ: dict[str, str] | None = None) -> dict[str, str]:
  """`environ` (default: os.environ) without what a build leaked into it."""
  environ = dict(os.environ if environ is None else environ)
  return {k: v for k, v in environ.items()
          if not k.startswith(_FRONTEND_VAR_PREFIXES)
          and k not in _FRONTEND_VARS}


def child_pip_env(environ: dict[str, str] | None = None) -> dict[str, str]:
  """The environment for a child `pip`, free of any enclosing build's state.

  The enclosing frontend may run us in an isolated environment whose only
  packages come through PYTHONPATH; the child gets a PYTHONPATH holding just
  the `pip` that this process imports, so it works in that environment, in a
  plain venv, and under `--no-build-isolation` alike.
  """
  env = strip_build_env(environ)
  spec = importlib.util.find_spec("pip")
  if spec is not None and spec.origin:
    env["PYTHONPATH"] = str(Path(spec.origin).resolve().parent.parent)
  return env


def pip_download_sdist(name: str, version: str, dest: Path, *,
                       env: dict[str, str] | None = None) -> Path:
  """Downloads the sdist of `name==version` into `dest` with a child pip.

  `env` defaults to `child_pip_env()`.  Raises UpstreamError saying why
  (pip's last lines) when pip cannot be run or fetches nothing.
  """
  if importlib.util.find_spec("pip") is None:
    raise UpstreamError(f"pip is not importable by {sys.executable}")
  cmd = [sys.executable, "-m", "pip", "download", "--no-deps",
         "--no-binary", ":all:", "--disable-pip-version-check",
         f"{name}=={version}", "-d", str(dest)]
  try:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env=child_pip_env() if env is None else env,
                          cwd=dest, stdin=subprocess.DEVNULL)
  except (OSError, subprocess.TimeoutExpired) as e:
    raise UpstreamError(str(e)) from None
  candidate = dest / f"{name}-{version}.tar.gz"
  if proc.returncode != 0 or not candidate.exists():
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    raise UpstreamError(" | ".join(tail))
  return candidate


def _pip_download(pin: Pin, dest: Path) -> Path:
  log(f"fetching {pin.sdist_name} with pip download")
  try:
    return pip_download_sdist(pin.name, pin.version, dest)
  except UpstreamError as e:
    raise UpstreamError(_no_sdist_message(pin, str(e))) from None


def log(msg: str) -> None:
  # Frontends show a backend's stderr (pip with -v, `python -m build`, uv).
  print(f"jax-fork: {msg}", file=sys.stderr, flush=True)


def _no_sdist_message(pin: Pin, why: str) -> str:
  return (f"could not fetch the upstream sdist {pin.sdist_name} with pip "
          f"({why}). For an offline build pass a local copy: set "
          f"{SDIST_ENV}=/path/to/{pin.sdist_name} (or use --sdist PATH with "
          "build/fork.py).")


def get_sdist(pin: Pin, local: str | os.PathLike | None = None) -> Path:
  """Returns a verified path to the pinned sdist.

  Order: an explicit local path (argument or $JAX_FORK_SDIST), the cache,
  then `pip download` into the cache.
  """
  local = local or os.environ.get(SDIST_ENV)
  if local:
    path = Path(local)
    if not path.is_file():
      raise UpstreamError(f"local sdist {path} does not exist")
    verify(path, pin)
    log(f"using {path}: sha256 {pin.sha256} verified")
    return path
  cached = cache_dir() / pin.sdist_name
  if cached.is_file():
    if sha256_of(cached) == pin.sha256:
      log(f"using cached {cached}: sha256 {pin.sha256} verified")
      return cached
    cached.unlink()   # a corrupt or foreign file; fetch again
  cached.parent.mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=cached.parent) as tmp:
    got = _pip_download(pin, Path(tmp))
    verify(got, pin)
    log(f"verified {pin.sdist_name}: sha256 {pin.sha256}")
    os.replace(got, cached)
  return cached


def read_pkg_info(sdist: Path, pin: Pin) -> str:
  """The upstream sdist's PKG-INFO: upstream's own declared metadata."""
  with tarfile.open(sdist, "r:gz") as tf:
    f = tf.extractfile(f"{pin.name}-{pin.version}/PKG-INFO")
    if f is None:
      raise UpstreamError(f"{sdist} has no PKG-INFO")
    return f.read().decode("utf-8")


def extract(sdist: Path, pin: Pin | None, dest: Path) -> Path:
  """Extracts the sdist's top folder's contents into `dest` (must not exist).

  The top folder is `pin`'s `NAME-VERSION`; with `pin=None` (a release that
  is not the pin), the sdist's one top folder, whatever its name.
  """
  dest.mkdir(parents=True)
  with tarfile.open(sdist, "r:gz") as tf:
    if pin is None:
      tops = {m.name.split("/", 1)[0] for m in tf.getmembers()}
      if len(tops) != 1:
        raise UpstreamError(f"{sdist} has {len(tops)} top folders, not one")
      top = tops.pop()
    else:
      top = f"{pin.name}-{pin.version}"
    prefix = top + "/"
    members = []
    for m in tf.getmembers():
      if m.name == top:
        continue
      if not m.name.startswith(prefix) or ".." in Path(m.name).parts:
        raise UpstreamError(f"unexpected member {m.name!r} in {sdist}")
      if not (m.isfile() or m.isdir()):
        continue
      m.name = m.name[len(prefix):]
      if m.name:
        members.append(m)
    tf.extractall(dest, members=members, filter="data")
  return dest


def remove_tree(path: Path) -> None:
  if path.exists():
    shutil.rmtree(path)
