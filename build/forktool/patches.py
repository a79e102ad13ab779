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
"""Parsing and *strict* application of `git format-patch` files.

Strict means: every hunk must match the file exactly at the line numbers the
hunk header states.  There is no fuzz and no offset search; a patch that would
need either is rejected with an error naming the patch, the file and the hunk.
Files are applied in memory, so a failure never leaves a half-patched tree.
"""
from __future__ import annotations

import dataclasses
import email.header
import email.utils
import hashlib
import os
import re
from pathlib import Path

REQUIRED_FIELDS = ("Origin", "Forwarded", "Last-Update")
# `Superseded-In: jax X.Y.Z`: the first upstream release that has upstream's
# own version of the patch's change; `rebase` leaves the patch out on it and
# on every later release.
SUPERSEDED_FIELD = "Superseded-In"
_SUPERSEDED_RE = re.compile(r"^jax ([0-9]+\.[0-9]+\.[0-9]+)$")
# `Rebased-From: NAME blob ID`, written by `rebase`: the patch file a rebased
# patch was made from and that file's git blob id (`git hash-object`).
REBASED_FIELD = "Rebased-From"
_REBASED_RE = re.compile(r"^(\S+\.patch) blob ([0-9a-f]{40})$")
PATCH_NAME_RE = re.compile(r"^(\d{4})-[a-z0-9]+(?:-[a-z0-9]+)*\.patch$")
_HUNK_RE = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(Exception):
  """A patch is malformed or does not apply."""


@dataclasses.dataclass
class Hunk:
  old_start: int
  old_count: int
  new_start: int
  new_count: int
  old_lines: list[bytes]
  new_lines: list[bytes]
  header: str


@dataclasses.dataclass
class FileDiff:
  old_path: str | None   # None for a new file
  new_path: str | None   # None for a deleted file
  hunks: list[Hunk]
  new_mode: str | None = None


@dataclasses.dataclass
class Patch:
  name: str
  headers: dict[str, str]
  message: str           # commit message body (without the subject)
  files: list[FileDiff]

  @property
  def subject(self) -> str:
    subj = self.headers.get("Subject", "")
    return re.sub(r"^\[PATCH[^\]]*\]\s*", "", subj)

  def fields(self) -> dict[str, str]:
    """DEP-3 style `Key: value` fields found in the message body."""
    out = {}
    for line in self.message.splitlines():
      m = re.match(r"^([A-Za-z][A-Za-z0-9-]*): (.+)$", line)
      if m:
        out[m.group(1)] = m.group(2).strip()
    return out

  def _field(self, key: str, pattern: re.Pattern, form: str
             ) -> re.Match | None:
    """The match of field `key`'s value against `pattern`, or None without
    the field; a PatchError saying `form` for a value that does not match."""
    value = self.fields().get(key)
    if value is None:
      return None
    m = pattern.match(value)
    if not m:
      raise PatchError(f"{self.name}: {key} must be {form}, not {value!r}")
    return m

  def superseded_in(self) -> str | None:
    """The release version of the `Superseded-In` field, or None."""
    m = self._field(SUPERSEDED_FIELD, _SUPERSEDED_RE,
                    "'jax X.Y.Z' (the first release with upstream's own "
                    "version of the change)")
    return m and m.group(1)

  def rebased_from(self) -> tuple[str, str] | None:
    """(file name, git blob id) of the `Rebased-From` field, or None."""
    m = self._field(REBASED_FIELD, _REBASED_RE,
                    "'NAME.patch blob GIT_BLOB_ID'")
    return m and (m.group(1), m.group(2))

  def with_rebased_from(self, path: Path) -> Patch:
    """This patch, its message naming `path` as what it is rebased from (in
    place of any earlier `Rebased-From`)."""
    lines = [l for l in self.message.splitlines()
             if not l.startswith(REBASED_FIELD + ":")]
    lines.append(f"{REBASED_FIELD}: {path.name} blob "
                 f"{blob_id(path.read_bytes())}")
    return dataclasses.replace(self, message="\n".join(lines))

  @property
  def author(self) -> tuple[str, str]:
    """(name, email) of the `From` header."""
    return email.utils.parseaddr(self.headers["From"])

  def commit_message(self) -> bytes:
    """The commit message `git am` makes of the envelope."""
    message = self.subject + "\n"
    if self.message.strip():
      message += "\n" + self.message + "\n"
    return message.encode("utf-8")

  def touched_paths(self) -> set[str]:
    return {p for f in self.files for p in (f.old_path, f.new_path) if p}


def blob_id(data: bytes) -> str:
  """The git blob id of `data`, as `git hash-object` prints it."""
  return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _strip_prefix(path: bytes, prefix: bytes) -> str:
  text = path.decode("utf-8")
  if text == "/dev/null":
    return ""
  if not text.startswith(prefix.decode()):
    raise PatchError(f"path {text!r} lacks the {prefix.decode()!r} prefix")
  return text[len(prefix):]


def parse_patch(data: bytes, name: str) -> Patch:
  """Parses a `git format-patch` envelope."""
  lines = data.split(b"\n")
  if not lines or not lines[0].startswith(b"From "):
    raise PatchError(f"{name}: not a git format-patch file "
                     "(first line must start with 'From ')")
  # Mail headers, with RFC 5322 continuation lines.
  headers: dict[str, str] = {}
  i = 1
  last = None
  while i < len(lines) and lines[i] != b"":
    line = lines[i].decode("utf-8")
    if line[:1] in (" ", "\t") and last:
      headers[last] += " " + line.strip()
    else:
      key, sep, value = line.partition(":")
      if not sep:
        raise PatchError(f"{name}: line {i + 1}: malformed header {line!r}")
      last = key.strip()
      headers[last] = value.strip()
    i += 1
  for key in ("From", "Date", "Subject"):
    if key not in headers:
      raise PatchError(f"{name}: missing mail header {key!r}")
  # Non-ASCII names and subjects are RFC 2047 encoded words.
  headers = {k: str(email.header.make_header(email.header.decode_header(v)))
             for k, v in headers.items()}
  i += 1
  body: list[str] = []
  while i < len(lines) and lines[i] != b"---":
    if lines[i].startswith(b"diff --git "):
      break
    body.append(lines[i].decode("utf-8"))
    i += 1
  message = "\n".join(body).strip("\n")
  # Skip the diffstat.
  while i < len(lines) and not lines[i].startswith(b"diff --git "):
    i += 1
  files: list[FileDiff] = []
  while i < len(lines):
    line = lines[i]
    if line.startswith(b"diff --git "):
      fd = FileDiff(old_path=None, new_path=None, hunks=[])
      files.append(fd)
      i += 1
      while i < len(lines) and not lines[i].startswith(b"@@") and \
          not lines[i].startswith(b"diff --git "):
        l = lines[i]
        if l.startswith(b"--- "):
          fd.old_path = _strip_prefix(l[4:], b"a/") or None
        elif l.startswith(b"+++ "):
          fd.new_path = _strip_prefix(l[4:], b"b/") or None
        elif l.startswith(b"new file mode ") or l.startswith(b"new mode "):
          fd.new_mode = l.split()[-1].decode()
        elif l.startswith(b"GIT binary patch") or l.startswith(b"Binary files"):
          raise PatchError(f"{name}: binary patches are not supported")
        elif l.startswith((b"rename ", b"copy ", b"similarity ")):
          raise PatchError(f"{name}: renames/copies are not supported; "
                           "export with --no-renames")
        elif l == b"-- ":
          break
        i += 1
      if fd.old_path is None and fd.new_path is None:
        raise PatchError(f"{name}: file section without ---/+++ lines "
                         f"near line {i}")
      continue
    if line.startswith(b"@@"):
      m = _HUNK_RE.match(line)
      if not m:
        raise PatchError(f"{name}: line {i + 1}: malformed hunk header")
      if not files:
        raise PatchError(f"{name}: hunk before any file header")
      os_, oc, ns, nc = m.groups()
      hunk = Hunk(int(os_), 1 if oc is None else int(oc),
                  int(ns), 1 if nc is None else int(nc), [], [],
                  line.decode("utf-8", "replace"))
      i += 1
      old_left, new_left = hunk.old_count, hunk.new_count
      while old_left > 0 or new_left > 0:
        if i >= len(lines):
          raise PatchError(f"{name}: truncated hunk {hunk.header!r}")
        l = lines[i]
        tag, text = l[:1], l[1:] + b"\n"
        if tag == b" " or (l == b"" and old_left and new_left):
          hunk.old_lines.append(text)
          hunk.new_lines.append(text)
          old_left -= 1
          new_left -= 1
        elif tag == b"-":
          hunk.old_lines.append(text)
          old_left -= 1
        elif tag == b"+":
          hunk.new_lines.append(text)
          new_left -= 1
        elif tag == b"\\":
          pass
        else:
          raise PatchError(f"{name}: line {i + 1}: unexpected line in hunk "
                           f"{hunk.header!r}")
        i += 1
        # "\ No newline at end of file" applies to the line just read.
        if i < len(lines) and lines[i].startswith(b"\\ "):
          if tag in (b" ", b"-") and hunk.old_lines:
            hunk.old_lines[-1] = hunk.old_lines[-1][:-1]
          if tag in (b" ", b"+") and hunk.new_lines:
            hunk.new_lines[-1] = hunk.new_lines[-1][:-1]
          i += 1
      files[-1].hunks.append(hunk)
      continue
    if line == b"-- ":
      break   # signature
    i += 1
  return Patch(name=name, headers=headers, message=message, files=files)


def read_patch(path: str | os.PathLike) -> Patch:
  p = Path(path)
  return parse_patch(p.read_bytes(), p.name)


def _split_keepends(data: bytes) -> list[bytes]:
  return data.splitlines(keepends=True) if data else []


def apply_patch(patch: Patch, files: "FileSource") -> dict[str, bytes | None]:
  """Applies `patch` strictly; returns {path: new content or None (deleted)}.

  `files` maps a relative path to its current content (None if absent).
  Raises PatchError naming the patch, the file and the hunk on any mismatch.
  """
  result: dict[str, bytes | None] = {}
  for fd in patch.files:
    path = fd.new_path or fd.old_path
    assert path is not None
    if fd.old_path is None:
      current = None
    else:
      current = result[fd.old_path] if fd.old_path in result else \
          files.get(fd.old_path)
      if current is None:
        raise PatchError(f"{patch.name}: {fd.old_path}: file to patch does "
                         "not exist")
    if fd.old_path is None and files.get(path) is not None:
      raise PatchError(f"{patch.name}: {path}: file to create already exists")
    old = _split_keepends(current or b"")
    out: list[bytes] = []
    pos = 0   # index into old of the next line not yet copied
    for k, h in enumerate(fd.hunks, 1):
      # For an empty old range git writes the line *before* the insertion.
      start = h.old_start - 1 if h.old_count else h.old_start
      if start < pos:
        raise PatchError(f"{patch.name}: {path}: hunk #{k} {h.header!r} "
                         "overlaps the previous hunk")
      actual = old[start:start + h.old_count]
      if actual != h.old_lines:
        # Find the first differing line for a useful message.
        for j, (want, got) in enumerate(zip(h.old_lines, actual + [b""] *
                                            len(h.old_lines))):
          if want != got:
            break
        raise PatchError(
            f"{patch.name}: {path}: hunk #{k} {h.header!r} does not apply "
            f"at line {start + j + 1} (no fuzz or offset allowed): expected "
            f"{want.decode('utf-8', 'replace')!r}, found "
            f"{got.decode('utf-8', 'replace')!r}")
      out.extend(old[pos:start])
      out.extend(h.new_lines)
      pos = start + h.old_count
    out.extend(old[pos:])
    if fd.new_path is None:
      result[path] = None
    else:
      result[path] = b"".join(out)
  return result


class FileSource:
  """Read access to a tree of files, with pending in-memory edits on top."""

  def __init__(self, root: str | os.PathLike):
    self.root = Path(root)
    self.overlay: dict[str, bytes | None] = {}

  def get(self, path: str) -> bytes | None:
    if path in self.overlay:
      return self.overlay[path]
    p = self.root / path
    return p.read_bytes() if p.is_file() else None

  def update(self, changes: dict[str, bytes | None]) -> None:
    self.overlay.update(changes)

  def flush(self) -> None:
    """Writes the overlay to disk."""
    for path, content in sorted(self.overlay.items()):
      p = self.root / path
      if content is None:
        if p.exists():
          p.unlink()
      else:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content)
    self.overlay.clear()


def read_series(patches_dir: Path) -> list[str]:
  series = patches_dir / "series"
  if not series.exists():
    raise PatchError(f"{series} does not exist")
  names = []
  for line in series.read_text().splitlines():
    line = line.split("#", 1)[0].strip()
    if line:
      names.append(line)
  return names


def check_series(patches_dir: Path) -> list[str]:
  """Returns a list of problems with the series/folder agreement and headers."""
  problems = []
  try:
    names = read_series(patches_dir)
  except PatchError as e:
    return [str(e)]
  seen: set[str] = set()
  numbers: dict[str, str] = {}
  for n in names:
    if n in seen:
      problems.append(f"series lists {n} more than once")
    seen.add(n)
    m = PATCH_NAME_RE.match(n)
    if not m:
      problems.append(f"series entry {n!r} is not named NNNN-kebab-summary.patch")
    else:
      if m.group(1) in numbers and numbers[m.group(1)] != n:
        problems.append(f"patch number {m.group(1)} is used by both "
                        f"{numbers[m.group(1)]} and {n}")
      numbers[m.group(1)] = n
    if not (patches_dir / n).is_file():
      problems.append(f"series entry {n} has no file in {patches_dir}")
  for f in sorted(patches_dir.iterdir()):
    if f.name.endswith(".patch") and f.name not in seen:
      problems.append(f"{f.name} is in {patches_dir} but not in the series")
  for n in names:
    path = patches_dir / n
    if not path.is_file():
      continue
    try:
      patch = read_patch(path)
    except PatchError as e:
      problems.append(str(e))
      continue
    fields = patch.fields()
    for key in REQUIRED_FIELDS:
      if key not in fields:
        problems.append(f"{n}: header field {key!r} is missing from the "
                        "patch message")
    if "Last-Update" in fields and not re.match(r"^\d{4}-\d{2}-\d{2}$",
                                                fields["Last-Update"]):
      problems.append(f"{n}: Last-Update must be YYYY-MM-DD")
    try:
      patch.superseded_in()
      patch.rebased_from()
    except PatchError as e:
      problems.append(str(e))
    if not patch.message.strip():
      problems.append(f"{n}: the patch message says nothing about what "
                      "changes and why")
    if not patch.files:
      problems.append(f"{n}: the patch changes no file")
  return problems


def apply_series(tree: Path, patches_dir: Path,
                 names: list[str] | None = None, *,
                 write: bool = True) -> list[tuple[str, dict]]:
  """Applies the series strictly in memory, then (if `write`) writes it out.

  Nothing is written unless every patch applies; `write=False` only checks.
  Returns, per patch, the changes it made.
  """
  names = read_series(patches_dir) if names is None else names
  src = FileSource(tree)
  applied = []
  for n in names:
    patch = read_patch(patches_dir / n)
    changes = apply_patch(patch, src)
    src.update(changes)
    applied.append((n, changes))
  if write:
    src.flush()
  return applied
