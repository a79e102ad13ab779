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
"""Carrying the patch series onto a later upstream release.

`rebase_onto` builds one git repository holding

* the base (the pin, or the release `--from` names; tag `base`) and the
  series applied to it strictly (branch `series-base`, one commit per patch),
  so that every blob named in the patches' `index` lines exists;
* the release's sdist as a commit whose parent is the base (tag `upstream`,
  so `build/fork.py export --dir OUT` works on the result);
* branch `rebased` (checked out): the release plus one commit per patch that
  still carries a change, applied one at a time and never stopping.  Each
  commit's message ends with `Rebased-From: NAME blob ID`, the patch file it
  was made from and that file's git blob id, so that a rebased series can be
  checked against the series it claims to carry.

Each patch ends with one status:

  superseded its `Superseded-In: jax X.Y.Z` field names this release or an
             earlier one: upstream has its own version of the change, so the
             patch is left out (no commit; `export` drops it)
  clean      `git apply` takes it as it is, every hunk at its stated line
  offset     `git apply` takes it, some hunks at other lines (listed)
  merged     the context changed; git's 3-way merge against the patch's
             preimage blob applied it without conflict (where `patch` would
             have needed fuzz, this is checked against the original file)
  conflict   the 3-way merge left conflict markers; they are committed, in
             the patch's own commit, for a developer to resolve (then
             `export`).  Reported with the files and the patch's hunks whose
             preimage is not found in the release's file
  redundant  the release already has the change: the patch applies in
             reverse, or it is empty once merged.  No commit is made, so an
             `export` of the rebased branch drops it from the series
  failed     git could not even merge it (for example a file it changes
             is gone from the release); the reason is given, no commit

The release's sdist is taken from the registry with `pip download` run with
a cleaned environment (a pip started inside a PEP 517 build would otherwise
inherit that build's hooks and trackers), cached next to the pinned one, and
its sha256 printed so that it can be pinned.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from . import patches as P
from . import tree as T
from . import upstream as U

STATUSES = ("superseded", "clean", "offset", "merged", "conflict",
            "redundant", "failed")
BASE_TAG = "base"
SERIES_BRANCH = "series-base"
REBASED_BRANCH = "rebased"
REPORT_NAME = "rebase-report.json"   # kept in the repository's .git folder
_VERSION_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)*)((?:a|b|rc)[0-9]+)?"
                         r"(?:\.post[0-9]+)?$")
_OFFSET_RE = re.compile(r"^Hunk #(\d+) succeeded at (\d+) \(offset (-?\d+) "
                        r"lines?\)\.$")


class RebaseError(Exception):
  """The release cannot be had or the rebase repository cannot be built."""


@dataclasses.dataclass
class PatchResult:
  name: str
  status: str
  files: list[str] = dataclasses.field(default_factory=list)
  hunks: dict[str, list[int]] = dataclasses.field(default_factory=dict)
  offsets: dict[str, list[tuple[int, int]]] = dataclasses.field(
      default_factory=dict)
  detail: str = ""
  commit: str | None = None
  added_by_both: list[str] = dataclasses.field(default_factory=list)
  superseded_in: str | None = None   # the patch's Superseded-In release

  def cell(self) -> str:
    """The result as one Markdown table cell."""
    if self.status == "conflict":
      parts = []
      for f in self.files:
        h = self.hunks.get(f)
        if f in self.added_by_both:
          parts.append(f"`{f}` (added by both)")
        else:
          parts.append(f"`{f}`" + (f" (hunk {', '.join(map(str, h))})"
                                   if h else ""))
      return "**conflict**: " + "; ".join(parts)
    if self.status == "offset":
      n = sum(len(v) for v in self.offsets.values())
      return f"offset ({n} hunk{'s' if n != 1 else ''})"
    if self.status == "failed":
      return f"**failed**: {self.detail}"
    if self.status == "superseded":
      return f"superseded (jax {self.superseded_in})"
    return self.status


@dataclasses.dataclass
class RebaseResult:
  version: str
  sdist_sha256: str | None
  repo: Path
  patches: list[PatchResult]

  def counts(self) -> dict[str, int]:
    out = {s: 0 for s in STATUSES}
    for p in self.patches:
      out[p.status] += 1
    return out

  def to_json(self) -> dict:
    return {"version": self.version, "sdist_sha256": self.sdist_sha256,
            "patches": [dataclasses.asdict(p) for p in self.patches]}


# --- the release's sdist -----------------------------------------------------

def _check_version(version: str) -> None:
  if not _VERSION_RE.match(version):
    raise RebaseError(f"{version!r} is not a release version (e.g. 0.4.30)")


def _release_key(version: str) -> tuple[tuple[int, ...], bool]:
  """Orders release versions: by number, a pre-release before its release."""
  _check_version(version)
  m = _VERSION_RE.match(version)
  parts = [int(x) for x in m.group(1).split(".")]
  while len(parts) > 1 and parts[-1] == 0:   # 0.5 == 0.5.0
    parts.pop()
  return tuple(parts), m.group(2) is None


def superseded_on(since: str | None, version: str) -> bool:
  """Whether a patch whose `Superseded-In` names `since` is superseded on
  release `version` (that release or a later one)."""
  return since is not None and _release_key(version) >= _release_key(since)


def fetch_release_sdist(version: str, name: str = "jax",
                        cache: Path | None = None) -> Path:
  """Returns the cached sdist of `name==version`, downloading it with pip."""
  _check_version(version)
  cache = cache or U.cache_dir()
  target = cache / f"{name}-{version}.tar.gz"
  if target.is_file():
    return target
  cache.mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=cache) as tmp:
    try:
      # Run from the command line, not a build: stripping the environment
      # is enough (no pip of a build environment to point PYTHONPATH at).
      got = U.pip_download_sdist(name, version, Path(tmp),
                                 env=U.strip_build_env())
    except U.UpstreamError as e:
      raise RebaseError(
          f"could not fetch the sdist {target.name} with pip ({e}); pass a "
          "local copy with --release-sdist") from None
    os.replace(got, target)
  return target


# --- classification ----------------------------------------------------------

def _find(seq: list[bytes], sub: list[bytes]) -> bool:
  if not sub:
    return True
  n = len(sub)
  first = sub[0]
  for i in range(len(seq) - n + 1):
    if seq[i] == first and seq[i:i + n] == sub:
      return True
  return False


def failing_hunks(patch: P.Patch, path: str, content: bytes | None
                  ) -> list[int]:
  """The 1-based numbers of `patch`'s hunks on `path` whose preimage (context
  and removed lines) is found nowhere in `content`, i.e. would not apply even
  with an offset."""
  lines = content.splitlines(keepends=True) if content else []
  out = []
  for fd in patch.files:
    if path not in (fd.old_path, fd.new_path):
      continue
    for k, h in enumerate(fd.hunks, 1):
      if not _find(lines, h.old_lines):
        out.append(k)
  return out


def _parse_offsets(text: str) -> dict[str, list[tuple[int, int]]]:
  """Reads `git apply -v`'s "Hunk #N succeeded at L (offset K lines)."."""
  offsets: dict[str, list[tuple[int, int]]] = {}
  current = None
  for line in text.splitlines():
    m = re.match(r"^Checking patch (.+)\.\.\.$", line)
    if m:
      current = m.group(1)
      continue
    m = _OFFSET_RE.match(line)
    if m and current is not None:
      offsets.setdefault(current, []).append((int(m.group(1)),
                                              int(m.group(3))))
  return offsets


def _conflict_blocks(content: bytes) -> int:
  return sum(1 for line in content.splitlines() if line.startswith(b"<<<<<<< "))


def apply_one(repo: Path, patch_path: Path) -> PatchResult:
  """Applies one patch onto the checked-out branch; never raises on content."""
  name = patch_path.name
  patch = P.read_patch(patch_path).with_rebased_from(patch_path)
  res = PatchResult(name=name, status="clean")
  # Already upstream?  The reverse applies to the release as it is.
  rev = T.git_run(repo, "apply", "--check", "--reverse", str(patch_path),
                  check=False)
  if rev.returncode == 0:
    res.status = "redundant"
    res.detail = "applies in reverse"
    return res
  fwd = T.git_run(repo, "apply", "--check", "-v", str(patch_path),
                  check=False)
  if fwd.returncode == 0:
    res.offsets = _parse_offsets(fwd.stderr.decode(errors="replace"))
    res.status = "offset" if res.offsets else "clean"
    T.git(repo, "apply", "--index", str(patch_path))
    res.files = sorted(patch.touched_paths())
    res.commit = T.commit_patch(repo, patch)
    return res
  # The context changed: merge against the patch's preimage blobs.
  before = {p: _blob(repo, p) for p in patch.touched_paths()}
  three = T.git_run(repo, "apply", "--3way", "--index", str(patch_path),
                    check=False)
  out = (three.stdout + three.stderr).decode(errors="replace")
  unmerged = sorted({line.split("\t", 1)[1] for line in
                     T.git(repo, "ls-files", "-u").decode().splitlines()
                     if "\t" in line})
  if three.returncode != 0 and not unmerged:
    # Nothing was applied (e.g. a preimage file is missing); leave no trace.
    T.git(repo, "reset", "-q", "--hard", "HEAD")
    T.git(repo, "clean", "-q", "-fdx")
    res.status = "failed"
    errors = [l.removeprefix("error: ") for l in out.splitlines()
              if l.startswith("error: ")]
    if errors:
      res.detail = errors[-1]
    else:
      res.detail = out.strip().splitlines()[-1] if out.strip() else \
          "git apply --3way failed"
    return res
  if unmerged:
    # Keep the markers: stage the files as they are, in the patch's commit.
    T.git(repo, "add", "-A", "-f", "--", *unmerged)
    res.status = "conflict"
    res.files = unmerged
    created = {fd.new_path for fd in patch.files if fd.old_path is None}
    for f in unmerged:
      if f in created:
        res.added_by_both.append(f)
      else:
        res.hunks[f] = failing_hunks(patch, f, before.get(f))
    blocks = {f: _conflict_blocks((repo / f).read_bytes()) for f in unmerged
              if (repo / f).is_file()}
    res.detail = "; ".join(f"{f}: {n} conflict block{'s' if n != 1 else ''}"
                           for f, n in blocks.items())
    stacked = [f for f in unmerged if before.get(f) and
               _conflict_blocks(before[f])]
    if stacked:
      res.detail += ("; already had an earlier patch's markers: " +
                     ", ".join(stacked))
    res.commit = T.commit_patch(repo, patch, allow_empty=True)
    return res
  if T.git_run(repo, "diff", "--cached", "--quiet",
               check=False).returncode == 0:
    res.status = "redundant"
    res.detail = "empty once merged"
    return res
  res.status = "merged"
  res.files = sorted(patch.touched_paths())
  res.commit = T.commit_patch(repo, patch)
  return res


def _blob(repo: Path, path: str) -> bytes | None:
  p = repo / path
  return p.read_bytes() if p.is_file() else None


# --- the whole rebase --------------------------------------------------------

def rebase_onto(base_src: Path, release_src: Path, patches_dir: Path,
                dest: Path, *, version: str, base_version: str = "",
                release_sha256: str | None = None,
                names: list[str] | None = None,
                log=None) -> RebaseResult:
  """Rebases the series in `patches_dir` from `base_src` onto `release_src`.

  Both sources are folders or sdists.  `dest` must not exist; it becomes the
  rebase repository (see the module docstring).  Never stops at a patch.
  A patch superseded on `version` (see `superseded_on`) is not applied.
  """
  dest = Path(dest).resolve()
  patches_dir = Path(patches_dir).resolve()   # git runs in `dest`
  if dest.exists():
    raise RebaseError(f"{dest} exists; remove it or choose another --dir")
  names = P.read_series(patches_dir) if names is None else names
  # Malformed patches (and Superseded-In fields) fail up front.
  patches = {n: P.read_patch(patches_dir / n) for n in names}
  since = {n: p.superseded_in() for n, p in patches.items()}
  _check_version(version)
  work = Path(tempfile.mkdtemp(prefix="fork-rebase-"))
  try:
    base_dir = _as_dir(base_src, work / "base")
    rel_dir = _as_dir(release_src, work / "release")
    T.init_repo(dest, REBASED_BRANCH, {"merge.conflictStyle": "diff3",
                                       "rerere.enabled": "false",
                                       "gc.auto": "0"})
    base = T.commit_dir(dest, base_dir,
                        f"Upstream base {base_version}".rstrip())
    T.git(dest, "tag", BASE_TAG, base)
    # The series on its own base: strict, so its blobs are exactly those the
    # patches' index lines name.
    T.git(dest, "checkout", "-q", "-f", "-B", SERIES_BRANCH, base)
    for n in names:
      proc = T.git_run(dest, "apply", "--index", str(patches_dir / n),
                       check=False)
      if proc.returncode != 0:
        raise RebaseError(f"{n} does not apply to its own base: "
                          f"{proc.stderr.decode(errors='replace').strip()}")
      T.commit_patch(dest, patches[n])
    sha = f" (sdist sha256 {release_sha256})" if release_sha256 else ""
    release = T.commit_dir(dest, rel_dir, f"Upstream {version}{sha}", base)
    T.git(dest, "tag", T.UPSTREAM_TAG, release)
    T.git(dest, "checkout", "-q", "-f", "-B", REBASED_BRANCH, release)
    T.git(dest, "clean", "-q", "-fdx")
    results = []
    for n in names:
      if superseded_on(since[n], version):
        r = PatchResult(name=n, status="superseded", superseded_in=since[n])
      else:
        r = apply_one(dest, patches_dir / n)
      if log:
        log(f"{n}: {r.cell()}")
      results.append(r)
  except BaseException:
    shutil.rmtree(dest, ignore_errors=True)
    raise
  finally:
    shutil.rmtree(work, ignore_errors=True)
  result = RebaseResult(version=version, sdist_sha256=release_sha256,
                        repo=dest, patches=results)
  (dest / ".git" / REPORT_NAME).write_text(
      json.dumps(result.to_json(), indent=1) + "\n")
  return result


def _as_dir(src: Path, scratch: Path) -> Path:
  src = Path(src)
  if src.is_dir():
    return src
  if src.is_file():
    return U.extract(src, None, scratch)
  raise RebaseError(f"{src} is neither a folder nor an sdist")


# --- reporting ----------------------------------------------------------------

def markdown_table(results: list[RebaseResult]) -> str:
  """One row per patch, one column per release."""
  names: list[str] = []
  for r in results:
    for p in r.patches:
      if p.name not in names:
        names.append(p.name)
  cells = {(r.version, p.name): p.cell() for r in results for p in r.patches}
  head = "| patch | " + " | ".join(f"jax {r.version}" for r in results) + " |"
  rule = "| --- |" + " --- |" * len(results)
  rows = [head, rule]
  for n in names:
    row = [f"`{n}`"] + [cells.get((r.version, n), "") for r in results]
    rows.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
  summary = []
  for r in results:
    c = r.counts()
    summary.append(", ".join(f"{v} {k}" for k, v in c.items() if v))
  rows.append("| **total** | " + " | ".join(summary) + " |")
  return "\n".join(rows) + "\n"


# The summary's columns: a label and the statuses it counts.  "redundant"
# and "failed" get a column only where some release has them.
_SUMMARY = (("superseded", ("superseded",)),
            ("apply", ("clean", "offset", "merged")),
            ("conflict", ("conflict",)),
            ("redundant", ("redundant",)),
            ("failed", ("failed",)))


def summary_table(results: list[RebaseResult]) -> str:
  """One row per release: how many patches are superseded there, apply
  (clean, offset or merged) or conflict, and which of the rest (the
  patches carrying what upstream lacks) conflict or fail there."""
  counts = [r.counts() for r in results]
  cols = [(label, sts) for label, sts in _SUMMARY
          if label not in ("redundant", "failed")
          or any(c[label] for c in counts)]
  rows = ["| release | " + " | ".join(label for label, _ in cols) +
          " | patches that conflict |",
          "| --- |" + " --- |" * (len(cols) + 1)]
  for r, c in zip(results, counts):
    hard = [f"`{p.name[:-len('.patch')]}`" for p in r.patches
            if p.status in ("conflict", "failed")]
    rows.append(f"| jax {r.version} | " +
                " | ".join(str(sum(c[st] for st in sts)) for _, sts in cols) +
                f" | {', '.join(hard) or 'none'} |")
  return "\n".join(rows) + "\n"


# --- the command line (build/fork.py rebase, rebase-report) -------------------

def _release_sdist(version: str, local: str | None, local_dir: str | None,
                   name: str) -> tuple[Path, str]:
  if local:
    path = Path(local)
    if not path.is_file():
      raise RebaseError(f"--release-sdist {path} does not exist")
  elif local_dir and (Path(local_dir) / f"{name}-{version}.tar.gz").is_file():
    path = Path(local_dir) / f"{name}-{version}.tar.gz"
  else:
    path = fetch_release_sdist(version, name)
  return path, U.sha256_of(path)


def base_sdist(args) -> tuple[Path, U.Pin]:
  """The base the series applies to: the pin, or the release --from names."""
  pin = U.load_pin()
  if not getattr(args, "from_version", None):
    return U.get_sdist(pin, args.sdist), pin
  _check_version(args.from_version)
  path, sha = _release_sdist(args.from_version, args.sdist, None, pin.name)
  print(f"{pin.name} {args.from_version} sdist (base): {path.name} sha256 "
        f"{sha}", file=sys.stderr)
  return path, dataclasses.replace(pin, version=args.from_version, sha256=sha)


def cmd_rebase(args) -> int:
  try:
    _check_version(args.onto)
    base, pin = base_sdist(args)
    rel, sha = _release_sdist(args.onto, args.release_sdist, None, pin.name)
    print(f"{pin.name} {args.onto} sdist: {rel.name} sha256 {sha}")
    dest = Path(args.dir or U.REPO_ROOT / ".work" / f"rebase-{args.onto}")
    if dest.exists() and args.force:
      shutil.rmtree(dest)
    result = rebase_onto(base, rel, Path(args.patches), dest,
                         version=args.onto, base_version=pin.version,
                         release_sha256=sha, log=print)
  except (RebaseError, U.UpstreamError, P.PatchError, T.TreeError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  c = result.counts()
  print(f"rebased onto {pin.name} {args.onto} in {result.repo} (branch "
        f"{REBASED_BRANCH!r}, tag {T.UPSTREAM_TAG!r} = the release): " +
        ", ".join(f"{v} {k}" for k, v in c.items() if v))
  for p in result.patches:
    if p.status == "conflict":
      print(f"  {p.name}: {p.detail} (commit {p.commit[:12]})")
    elif p.status == "superseded":
      print(f"  {p.name}: left out, superseded since jax {p.superseded_in}")
  if c["conflict"]:
    print("resolve each conflict commit in order (git rebase -i upstream, "
          "'edit'), then: python build/fork.py export --dir "
          f"{result.repo} --patches NEW_FOLDER")
  return 1 if c["conflict"] or c["failed"] else 0


def cmd_rebase_report(args) -> int:
  results = []
  try:
    for v in args.onto:
      _check_version(v)
    base, pin = base_sdist(args)
    with tempfile.TemporaryDirectory(prefix="fork-rebase-report-") as tmp:
      for v in args.onto:
        rel, sha = _release_sdist(v, None, args.release_sdist_dir, pin.name)
        print(f"{pin.name} {v} sdist: {rel.name} sha256 {sha}",
              file=sys.stderr)
        keep = Path(args.keep) / v if args.keep else Path(tmp) / v
        if keep.exists() and args.keep:
          shutil.rmtree(keep)
        results.append(rebase_onto(base, rel, Path(args.patches), keep,
                                   version=v, base_version=pin.version,
                                   release_sha256=sha))
        if not args.keep:
          shutil.rmtree(keep)
  except (RebaseError, U.UpstreamError, P.PatchError, T.TreeError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  sys.stdout.write(markdown_table(results) + "\n" + summary_table(results))
  if args.json:
    Path(args.json).write_text(json.dumps([r.to_json() for r in results],
                                          indent=1) + "\n")
  return 0


def record_lag(record: Path, patches_dir: Path) -> list[str]:
  """How `record` (a series rebased under rebases/jax-VERSION) lags behind
  the series in `patches_dir`: a line per record patch whose `patches/` file
  has changed since it was rebased (by its `Rebased-From`) or is gone, and
  per patch of the series, not superseded on VERSION, that it lacks.  Empty
  when the record is the rebase of today's series."""
  version = record.name.removeprefix("jax-")
  series = P.read_series(patches_dir)
  out, sources = [], set()
  for name in P.read_series(record):
    source = P.read_patch(record / name).rebased_from()
    if source is None:
      out.append(f"{name}: has no {P.REBASED_FIELD}")
      continue
    sources.add(source[0])
    path = patches_dir / source[0]
    if source[0] not in series:
      out.append(f"{name}: patches/{source[0]} is no longer in the series")
    elif P.blob_id(path.read_bytes()) != source[1]:
      out.append(f"{name}: patches/{source[0]} has changed since (blob "
                 f"{source[1][:12]}, now {P.blob_id(path.read_bytes())[:12]})")
  for name in series:
    if name not in sources and not superseded_on(
        P.read_patch(patches_dir / name).superseded_in(), version):
      out.append(f"{name}: not in the record")
  return out


def cmd_record_status(args) -> int:
  records = [Path(r) for r in args.record] or sorted(
      (U.REPO_ROOT / "rebases").glob("jax-*"))
  lagging = False
  for record in records:
    lag = record_lag(record, Path(args.patches))
    print(f"{record.name}: " + (f"{len(lag)} patch(es) behind patches/"
                                if lag else "the rebase of today's patches/"))
    for line in lag:
      print(f"  {line}")
    lagging = lagging or bool(lag)
  return 1 if lagging and args.strict else 0


def add_commands(sub, default_patches: Path) -> None:
  """Adds `rebase`, `rebase-report` and `record-status` to build/fork.py's
  subparsers."""
  def common(p):
    p.add_argument("--patches", default=str(default_patches),
                   help="the patch folder (with its series file)")
    p.add_argument("--sdist", default=None,
                   help="a local copy of the base's sdist (the pinned one, "
                        "or that of --from)")
    p.add_argument("--from", dest="from_version", default=None,
                   metavar="VERSION",
                   help="the release the --patches series applies to, when "
                        "it is not the pin (e.g. a series already rebased "
                        "under rebases/jax-VERSION)")

  p = sub.add_parser("rebase", help="apply the series onto a later release "
                     "(3-way, never stopping) and classify each patch")
  common(p)
  p.add_argument("--onto", required=True, metavar="VERSION",
                 help="the upstream release, e.g. 0.4.30")
  p.add_argument("--dir", default=None,
                 help="the rebase repository to create "
                      "(default .work/rebase-VERSION)")
  p.add_argument("--release-sdist", default=None, metavar="PATH",
                 help="a local copy of the release's sdist (else the cache, "
                      "or pip download)")
  p.add_argument("--force", action="store_true",
                 help="replace an existing --dir")
  p.set_defaults(fn=cmd_rebase)

  p = sub.add_parser("rebase-report", help="Markdown tables: each patch's "
                     "status on each of several releases, then per release "
                     "how many are superseded, apply or conflict")
  common(p)
  p.add_argument("--onto", required=True, nargs="+", metavar="VERSION")
  p.add_argument("--release-sdist-dir", default=None, metavar="DIR",
                 help="a folder holding NAME-VERSION.tar.gz files to use "
                      "before the cache and pip")
  p.add_argument("--keep", default=None, metavar="DIR",
                 help="keep each rebase repository as DIR/VERSION")
  p.add_argument("--json", default=None, metavar="FILE",
                 help="also write the results as JSON")
  p.set_defaults(fn=cmd_rebase_report)

  p = sub.add_parser("record-status", help="which patches of each rebased "
                     "series under rebases/ lag behind patches/ (a report; "
                     "--strict makes lag an error, as at a release)")
  p.add_argument("--patches", default=str(default_patches),
                 help="the patch folder (with its series file)")
  p.add_argument("record", nargs="*",
                 help="rebases/jax-VERSION folders (default: all)")
  p.add_argument("--strict", action="store_true",
                 help="exit 1 when a record lags behind")
  p.set_defaults(fn=cmd_record_status)
