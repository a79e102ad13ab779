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
"""A reproducible pure-Python wheel of the patched tree.

Reproducible: entries are sorted, timestamps fixed, permissions normalized and
the compression level fixed, so two builds from the same inputs are
byte-identical.
"""
from __future__ import annotations

import base64
import hashlib
import re
import tempfile
import zipfile
from pathlib import Path

from . import patches as P
from . import upstream as U

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_WHEEL_TAG = "py3-none-any"
_PACKAGE_SUFFIXES = (".py", ".pyi", ".typed",
                     # Assets of jax/_src/jaxpr_dump_assets (the HTML view).
                     ".html", ".css", ".js")


def fork_version(tree: Path) -> str:
  text = (tree / "jax" / "version.py").read_text()
  m = re.search(r"^_release_version: str = '([^']+)'", text, re.M)
  if not m:
    raise P.PatchError("jax/version.py has no _release_version")
  return m.group(1)


def metadata(pin: U.Pin, version: str, tree: Path) -> str:
  lines = [
      "Metadata-Version: 2.1",
      "Name: jax",
      f"Version: {version}",
      "Summary: Differentiate, compile, and transform Numpy code "
      f"(fork of jax {pin.version}; see the fork's README).",
      "Author: JAX team and the JAX fork authors",
      "License: Apache-2.0",
      "Classifier: Programming Language :: Python :: 3.11",
      "Requires-Python: >=3.9",
      f"Requires-Dist: jaxlib=={pin.jaxlib_version}",
  ]
  lines += [f"Requires-Dist: {d}" for d in pin.dependencies]
  lines += ["Provides-Extra: cpu",
            f'Requires-Dist: jaxlib=={pin.jaxlib_version}; extra == "cpu"',
            "Description-Content-Type: text/markdown", ""]
  readme_path = U.REPO_ROOT / "README.md"
  if not readme_path.exists():
    readme_path = tree / "README.md"
  readme = readme_path.read_text(encoding="utf-8")
  return "\n".join(lines) + "\n" + readme


def _record_hash(data: bytes) -> str:
  digest = hashlib.sha256(data).digest()
  return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def package_files(tree: Path) -> list[Path]:
  out = []
  for p in sorted((tree / "jax").rglob("*")):
    if p.is_file() and p.suffix in _PACKAGE_SUFFIXES and \
        "__pycache__" not in p.parts:
      out.append(p)
  return out


def build_wheel(tree: Path, out_dir: Path, pin: U.Pin) -> Path:
  version = fork_version(tree)
  dist_info = f"jax-{version}.dist-info"
  entries: list[tuple[str, bytes]] = []
  for p in package_files(tree):
    entries.append((p.relative_to(tree).as_posix(), p.read_bytes()))
  entries.append((f"{dist_info}/METADATA",
                  metadata(pin, version, tree).encode("utf-8")))
  entries.append((f"{dist_info}/WHEEL", (
      "Wheel-Version: 1.0\nGenerator: jax-fork-build\nRoot-Is-Purelib: true\n"
      f"Tag: {_WHEEL_TAG}\n").encode()))
  entries.append((f"{dist_info}/top_level.txt", b"jax\n"))
  for lic in ("LICENSE", "AUTHORS"):
    if (tree / lic).exists():
      entries.append((f"{dist_info}/licenses/{lic}",
                      (tree / lic).read_bytes()))
  record = "".join(f"{name},{_record_hash(data)},{len(data)}\n"
                   for name, data in entries)
  record += f"{dist_info}/RECORD,,\n"
  entries.append((f"{dist_info}/RECORD", record.encode()))
  out_dir.mkdir(parents=True, exist_ok=True)
  wheel = out_dir / f"jax-{version}-{_WHEEL_TAG}.whl"
  tmp = wheel.with_suffix(".tmp")
  with zipfile.ZipFile(tmp, "w") as zf:
    for name, data in entries:
      info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
      info.external_attr = 0o644 << 16
      info.compress_type = zipfile.ZIP_DEFLATED
      zf.writestr(info, data, compresslevel=6)
  tmp.replace(wheel)
  return wheel


def patched_tree(dest: Path, patches_dir: Path, sdist: str | None = None
                 ) -> Path:
  """Extracts the pinned sdist into `dest` and applies the series strictly."""
  pin = U.load_pin()
  src = U.get_sdist(pin, sdist)
  U.extract(src, pin, dest)
  P.apply_series(dest, patches_dir)
  return dest


def build_from_series(out_dir: Path, patches_dir: Path,
                      sdist: str | None = None) -> Path:
  pin = U.load_pin()
  problems = P.check_series(patches_dir)
  if problems:
    raise P.PatchError("the patch series is inconsistent:\n  " +
                       "\n  ".join(problems))
  with tempfile.TemporaryDirectory() as tmp:
    tree = patched_tree(Path(tmp) / "tree", patches_dir, sdist)
    return build_wheel(tree, out_dir, pin)
