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
"""The fork's own source distribution (PEP 517 `build_sdist`).

It holds what the backend needs to build the wheel again (pyproject.toml,
fork.toml, the series, the build tooling, the README that becomes the wheel's
description), not upstream's files: building a wheel from it fetches and
verifies the pinned upstream sdist as a build from the checkout does, and
gives a byte-identical wheel.  The archive itself is reproducible (sorted
entries, fixed times and owners).
"""
from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

from . import patches as P
from . import upstream as U
from . import wheel as W

# Paths (relative to the repository root) that make up the sdist.
_FILES = ("pyproject.toml", "fork.toml", "README.md", "CHANGELOG.md",
          "jaxlib/README.md", "build/fork.py")
_TREES = (("build/forktool", ".py"), ("patches", ""))
_MTIME = 315532800   # 1980-01-01, as in the wheel


def sdist_members(root: Path = U.REPO_ROOT) -> list[str]:
  members = [f for f in _FILES if (root / f).is_file()]
  for folder, suffix in _TREES:
    for p in sorted((root / folder).iterdir()):
      if p.is_file() and p.name.endswith(suffix) and \
          not p.name.endswith(".pyc"):
        members.append(p.relative_to(root).as_posix())
  missing = [n for n in P.read_series(root / "patches")
             if f"patches/{n}" not in members]
  if missing:
    raise P.PatchError(f"patches missing from the sdist: {missing}")
  return sorted(members)


def pkg_info(version: str, pin: U.Pin) -> str:
  # Static core metadata; the wheel's full METADATA needs the upstream sdist,
  # which an sdist build does not fetch.
  return (f"Metadata-Version: 2.1\nName: jax\nVersion: {version}\n"
          f"Summary: {pin.summary}\nLicense: Apache-2.0\n"
          "Requires-Python: >=3.9\n")


def build_sdist(out_dir: Path, root: Path = U.REPO_ROOT) -> Path:
  pin = U.load_pin(root)
  version = W.series_version(root / "patches")
  base = f"jax-{version}"
  buf = io.BytesIO()
  with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
    def add(name: str, data: bytes) -> None:
      info = tarfile.TarInfo(f"{base}/{name}")
      info.size = len(data)
      info.mtime = _MTIME
      info.mode = 0o644
      info.uid = info.gid = 0
      info.uname = info.gname = ""
      tf.addfile(info, io.BytesIO(data))
    add("PKG-INFO", pkg_info(version, pin).encode())
    for name in sdist_members(root):
      add(name, (root / name).read_bytes())
  out_dir.mkdir(parents=True, exist_ok=True)
  out = out_dir / f"{base}.tar.gz"
  tmp = out.with_name(out.name + ".tmp")
  with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb",
                                              compresslevel=9, mtime=0,
                                              filename="") as gz:
    gz.write(buf.getvalue())
  tmp.replace(out)
  return out
