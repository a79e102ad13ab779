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
"""A reproducible wheel of the patched tree.

Pure Python but for the PJRT adapter's native half, which the wheel carries
where the build machine can compile it (`native.build`); the wheel is then
tagged for that platform (`py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64`
on x86-64 Linux), else it is `py3-none-any`.

Reproducible: entries are sorted, timestamps fixed, permissions normalized and
the compression level fixed, so two builds from the same inputs (and the same
C compiler) are byte-identical.
"""
from __future__ import annotations

import base64
import hashlib
import re
import tempfile
import zipfile
from pathlib import Path

from . import native as N
from . import patches as P
from . import upstream as U

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_PACKAGE_SUFFIXES = (".py", ".pyi", ".typed",
                     # The C half of jax/_src/pjrt_adapter.py (native.py).
                     ".c",
                     # Assets of jax/_src/jaxpr_dump_assets (the HTML view).
                     ".html", ".css", ".js")


_VERSION_RE = re.compile(r"^_release_version: str = '([^']+)'", re.M)
_PATCHED_VERSION_RE = re.compile(r"^\+_release_version: str = '([^']+)'", re.M)


def fork_version(tree: Path) -> str:
  """The version a patched tree's jax/version.py declares."""
  m = _VERSION_RE.search((tree / "jax" / "version.py").read_text())
  if not m:
    raise P.PatchError("jax/version.py has no _release_version")
  return m.group(1)


def series_version(patches_dir: Path) -> str:
  """The version the series sets, read from its patches without applying them.

  Lets the backend answer for metadata (and build an sdist) without the
  upstream sdist; `build_wheel` checks it against the patched tree.
  """
  version = None
  for name in P.read_series(patches_dir):
    for m in _PATCHED_VERSION_RE.finditer(
        (patches_dir / name).read_text(encoding="utf-8")):
      version = m.group(1)
  if version is None:
    raise P.PatchError(f"no patch in {patches_dir}/series sets "
                       "jax/version.py's _release_version")
  return version


def _split_pkg_info(text: str) -> list[tuple[str, str]]:
  headers: list[tuple[str, str]] = []
  for line in text.split("\n"):
    if not line.strip():
      break
    if line[0] in " \t" and headers:   # a folded continuation line
      key, value = headers[-1]
      headers[-1] = (key, value + "\n" + line)
      continue
    key, sep, value = line.partition(": ")
    if not sep:
      raise U.UpstreamError(f"unexpected PKG-INFO line {line!r}")
    headers.append((key, value))
  return headers


def metadata(pin: U.Pin, version: str, upstream_pkg_info: str,
             readme: str) -> str:
  """The wheel's METADATA: upstream's, with the fork's documented changes.

  Every header of upstream's PKG-INFO is kept, in order (extras,
  Requires-Python, classifiers, requirements), except `Version` and
  `Summary`; the base requirement `jaxlib==<pin>` comes before upstream's
  requirements, and the fork's README is the description.
  """
  out: list[str] = []
  added_jaxlib = False
  for key, value in _split_pkg_info(upstream_pkg_info):
    if key == "Version":
      value = version
    elif key == "Summary":
      value = pin.summary
    elif key == "Description":
      continue
    if key in ("Requires-Dist", "Provides-Extra") and not added_jaxlib:
      out.append(f"Requires-Dist: jaxlib=={pin.jaxlib_version}")
      added_jaxlib = True
    out.append(f"{key}: {value}")
  if not added_jaxlib:
    out.append(f"Requires-Dist: jaxlib=={pin.jaxlib_version}")
  return "\n".join(out) + "\n\n" + readme


def readme_text(tree: Path | None = None) -> str:
  path = U.REPO_ROOT / "README.md"
  if not path.exists() and tree is not None:
    path = tree / "README.md"
  return path.read_text(encoding="utf-8")


def wheel_metadata(patches_dir: Path, sdist: str | None = None) -> str:
  pin = U.load_pin()
  src = U.get_sdist(pin, sdist)
  return metadata(pin, series_version(patches_dir), U.read_pkg_info(src, pin),
                  readme_text())


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


def build_wheel(tree: Path, out_dir: Path, pin: U.Pin,
                upstream_pkg_info: str, expected_version: str | None = None
                ) -> Path:
  version = fork_version(tree)
  if expected_version is not None and version != expected_version:
    raise P.PatchError(f"the patched jax/version.py says {version}, the "
                       f"series' patches say {expected_version}")
  dist_info = f"jax-{version}.dist-info"
  entries: list[tuple[str, bytes]] = []
  for p in package_files(tree):
    entries.append((p.relative_to(tree).as_posix(), p.read_bytes()))
  native = N.build(tree)
  platforms = ("any",) if native is None else native.platform_tags
  if native is not None:
    entries.append((native.path, native.data))
  entries.append((f"{dist_info}/METADATA",
                  metadata(pin, version, upstream_pkg_info,
                           readme_text(tree)).encode("utf-8")))
  entries.append((f"{dist_info}/WHEEL", (
      "Wheel-Version: 1.0\nGenerator: jax-fork-build\n"
      f"Root-Is-Purelib: {'true' if native is None else 'false'}\n" +
      "".join(f"Tag: py3-none-{p}\n" for p in platforms)).encode()))
  entries.append((f"{dist_info}/top_level.txt", b"jax\n"))
  for lic in ("LICENSE", "AUTHORS"):   # where upstream's wheel has them
    if (tree / lic).exists():
      entries.append((f"{dist_info}/{lic}", (tree / lic).read_bytes()))
  record = "".join(f"{name},{_record_hash(data)},{len(data)}\n"
                   for name, data in entries)
  record += f"{dist_info}/RECORD,,\n"
  entries.append((f"{dist_info}/RECORD", record.encode()))
  out_dir.mkdir(parents=True, exist_ok=True)
  # The compressed tag set (PEP 425): py3-none-PLAT1.PLAT2.
  wheel = out_dir / f"jax-{version}-py3-none-{'.'.join(platforms)}.whl"
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
  src = U.get_sdist(pin, sdist)
  with tempfile.TemporaryDirectory() as tmp:
    tree = U.extract(src, pin, Path(tmp) / "tree")   # src is verified
    P.apply_series(tree, patches_dir)
    return build_wheel(tree, out_dir, pin, U.read_pkg_info(src, pin),
                       series_version(patches_dir))
