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
"""The PJRT adapter's native half, built into the wheel.

The patched tree's `jax/_src/pjrt_adapter.c` (patch 0026) is compiled, on
Linux, by `$CC` (else `cc` on PATH) with `-O2 -shared -fPIC` into
`jax/_src/pjrt_adapter-<the first 16 hex digits of the sha256 of the .c
file's bytes>.so`, the name the runtime looks for next to
`pjrt_adapter.py` before its per-user cache.  The library does not link
libpython, so the wheel is tagged `py3-none-<platform>`: manylinux_2_17 /
manylinux2014 for the library's architecture where the library itself
(read here as ELF) needs nothing beyond that policy's libraries and glibc
2.17's symbol versions, else the plain `linux_<arch>`.

Reproducible: the compiler runs in the source's folder on its bare name,
with `-ffile-prefix-map`, a content-derived build-id, `LC_ALL=C` and a fixed
`SOURCE_DATE_EPOCH`, so two builds with one compiler are byte-identical
(whatever Python runs the build).  Where there is no compiler, it does not
run, or the platform is not Linux, `build` returns None and says why in a
`jax-fork:` line: the wheel is then the pure `py3-none-any` one, whose fork
refuses a newer PJRT plugin with a message saying how to build the half.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from . import upstream as U

SOURCE = "jax/_src/pjrt_adapter.c"
_FLAGS = ("-O2", "-shared", "-fPIC")
_SOURCE_DATE_EPOCH = "315532800"   # 1980-01-01, as the wheel's entries

# manylinux2014 (PEP 599): the libraries a wheel may need from the system
# (those a C library of ours can need; the dynamic loader is always there)
# and the newest glibc symbol version.
_MANYLINUX_LIBS = frozenset({"libc.so.6", "libm.so.6", "libdl.so.2",
                             "libpthread.so.0", "librt.so.1"})
_MANYLINUX_GLIBC = (2, 17)
# ELF e_machine (and class, byte order) -> the architecture in wheel tags.
_ARCHES = {(62, 2, 1): "x86_64", (3, 1, 1): "i686", (183, 2, 1): "aarch64",
           (21, 2, 1): "ppc64le", (22, 2, 2): "s390x"}


def library_name(source: bytes) -> str:
  """The native half's file name for the C source `source`."""
  return f"pjrt_adapter-{hashlib.sha256(source).hexdigest()[:16]}.so"


def library_path(source: bytes) -> str:
  """Where the native half of the C source `source` lies in the wheel."""
  return f"{SOURCE.rsplit('/', 1)[0]}/{library_name(source)}"


@dataclasses.dataclass(frozen=True)
class Native:
  path: str   # in the wheel: jax/_src/pjrt_adapter-HASH.so
  data: bytes
  platform_tags: tuple[str, ...]   # e.g. ("manylinux_2_17_x86_64", ...)


def find_compiler() -> tuple[list[str] | None, str]:
  """The compiler command ($CC, split as a shell would, else `cc` on PATH)
  and its description; None and why where there is none."""
  cc = os.environ.get("CC", "").strip()
  if cc:
    argv = shlex.split(cc)
    if shutil.which(argv[0]) is None:
      return None, f"$CC names {argv[0]!r}, which is not found"
    return argv, f"$CC ({cc})"
  found = shutil.which("cc")
  if found is None:
    return None, "no C compiler ($CC is unset and there is no `cc` on PATH)"
  return [found], found


def compile_library(cc: list[str], source: Path, out: Path) -> None:
  """Compiles `source` into the shared library `out`, reproducibly; raises
  OSError or CalledProcessError (with the compiler's output)."""
  env = dict(os.environ, LC_ALL="C", SOURCE_DATE_EPOCH=_SOURCE_DATE_EPOCH)
  subprocess.run(
      [*cc, *_FLAGS, f"-ffile-prefix-map={source.parent}=.",
       "-Wl,--build-id=sha1", "-o", str(out), source.name],
      cwd=source.parent, env=env, check=True, capture_output=True, text=True,
      stdin=subprocess.DEVNULL)


def build(tree: Path) -> Native | None:
  """The native half of the tree's adapter, or None (said on stderr)."""
  source = tree / SOURCE
  if not source.is_file():
    return None   # a series without the adapter
  data = source.read_bytes()
  path = library_path(data)
  skipped = (f"the wheel does not carry the PJRT adapter's native half "
             f"({path}); it is the pure py3-none-any wheel, and the fork "
             "refuses a newer PJRT plugin until that half is built")
  if not sys.platform.startswith("linux"):
    U.log(f"not Linux ({sys.platform}): {skipped}")
    return None
  cc, which = find_compiler()
  if cc is None:
    U.log(f"{which}: {skipped}")
    return None
  with tempfile.TemporaryDirectory(prefix="jax-fork-native-") as tmp:
    out = Path(tmp) / library_name(data)
    try:
      compile_library(cc, source, out)
    except (OSError, subprocess.CalledProcessError) as e:
      detail = getattr(e, "stderr", None) or str(e)
      U.log(f"{which} failed to compile {SOURCE}: {detail.strip()[-2000:]}")
      U.log(skipped)
      return None
    library = out.read_bytes()
  tags = platform_tags(library)
  U.log(f"built the PJRT adapter's native half {path} with {which} "
        f"(wheel platform {'.'.join(tags)})")
  return Native(path=path, data=library, platform_tags=tags)


@dataclasses.dataclass(frozen=True)
class ElfInfo:
  arch: str | None   # the wheel tags' name of its architecture, if known
  needed: tuple[str, ...]   # DT_NEEDED
  versions: tuple[tuple[str, str], ...]   # (library, version) it needs


def read_elf(data: bytes) -> ElfInfo:
  """What a shared library needs from the system, read from its ELF
  section headers (DT_NEEDED and the GNU version needs)."""
  if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
    raise ValueError("not an ELF file")
  wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
  machine, = struct.unpack_from(order + "H", data, 18)
  if wide:
    shoff, = struct.unpack_from(order + "Q", data, 40)
    shentsize, shnum, _ = struct.unpack_from(order + "HHH", data, 58)
    header = order + "IIQQQQIIQQ"
  else:
    shoff, = struct.unpack_from(order + "I", data, 32)
    shentsize, shnum, _ = struct.unpack_from(order + "HHH", data, 46)
    header = order + "IIIIIIIIII"
  # (type, offset, size, link, info) of each section.
  sections = []
  for i in range(shnum):
    f = struct.unpack_from(header, data, shoff + i * shentsize)
    sections.append((f[1], f[4], f[5], f[6], f[7]))

  def string(strtab: int, at: int) -> str:
    start = sections[strtab][1] + at
    return data[start:data.index(b"\0", start)].decode()

  needed, versions = [], []
  for kind, offset, size, link, info in sections:
    if kind == 6:   # SHT_DYNAMIC: (tag, value) pairs, DT_NEEDED = 1
      entry = order + ("qQ" if wide else "iI")
      for at in range(offset, offset + size, struct.calcsize(entry)):
        tag, value = struct.unpack_from(entry, data, at)
        if tag == 0:
          break
        if tag == 1:
          needed.append(string(link, value))
    elif kind == 0x6ffffffe:   # SHT_GNU_verneed: `info` entries
      at = offset
      for _ in range(info):
        _, count, file, aux, nxt = struct.unpack_from(order + "HHIII", data,
                                                      at)
        vat = at + aux
        for _ in range(count):
          _, _, _, name, vnext = struct.unpack_from(order + "IHHII", data,
                                                    vat)
          versions.append((string(link, file), string(link, name)))
          vat += vnext
        at += nxt
  return ElfInfo(arch=_ARCHES.get((machine, data[4], data[5])),
                 needed=tuple(needed), versions=tuple(versions))


def _glibc_version(name: str) -> tuple[int, ...] | None:
  if not name.startswith("GLIBC_"):
    return None
  try:
    return tuple(int(p) for p in name[len("GLIBC_"):].split("."))
  except ValueError:
    return None


def _is_loader(lib: str) -> bool:
  return lib.startswith("ld-linux") or lib in ("ld64.so.1", "ld64.so.2")


def platform_tags(library: bytes) -> tuple[str, ...]:
  """The wheel's platform tags for a Linux build carrying `library`."""
  info = read_elf(library)
  if info.arch is None:   # an architecture manylinux does not name
    import sysconfig   # pylint: disable=g-import-not-at-top
    return (sysconfig.get_platform().replace("-", "_").replace(".", "_"),)
  system = [lib for lib in info.needed if not _is_loader(lib)]
  versions_ok = all(
      (v := _glibc_version(name)) is not None and v <= _MANYLINUX_GLIBC
      for _, name in info.versions)
  if set(system) <= _MANYLINUX_LIBS and versions_ok:
    return (f"manylinux_2_17_{info.arch}", f"manylinux2014_{info.arch}")
  return (f"linux_{info.arch}",)
