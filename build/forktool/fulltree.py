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
"""The whole patched JAX source tree (`build/fork.py tree`).

The registry's sdist holds only the `jax` package.  This builds a git
repository laid out exactly like upstream's at a tag (`jax`, `jaxlib`,
`tests`, `build`, `WORKSPACE`, `third_party`, ...), on which upstream's
`build/build.py` builds jaxlib with bazel, `pip wheel .` builds the fork's
`jax` wheel and upstream's tests run against the installed fork.  That wheel
(upstream's setup.py) carries the PJRT adapter's C source but not its native
half: it is the pure wheel `build/fork.py wheel` builds where there is no C
compiler, whose fork refuses a newer PJRT plugin until that half is built.

History of the result (branch `main`):

  1. the tag's files, as `git archive` writes them          (tag `<TAG>`)
  2. `jax/` files from the pinned, verified sdist where they differ
     (the stamped `jax/version.py`, ...)
  3. the fork's CHANGELOG sections on top of upstream's     (tag `upstream`)
  4. one commit per patch of the series, applied strictly, each with its
     patch file name in a git note, as `materialize` makes them; so
     `build/fork.py export --dir TREE` works on this tree too.

The tag is exported with a pathspec `git archive` that leaves out blobs the
clone lacks (some clones of jax-ml/jax miss an image blob and the whole-tag
archive fails).  A missing blob under a path the build or the tests need is
an error; elsewhere it is reported and left out.
"""
from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import native as N
from . import patches as P
from . import tree as T
from . import upstream as U

DEFAULT_TAG = "jax-v0.4.26"
# What upstream's build, packaging and tests need; a missing blob under one of
# these is an error.  The tag must have each of them.
REQUIRED_PATHS = ("jax", "jaxlib", "tests", "build", "third_party",
                  "WORKSPACE", "setup.py", "pyproject.toml", "CHANGELOG.md",
                  ".bazelrc", ".bazelversion", "LICENSE", "README.md")
_FORK_CHANGELOG_INTRO = (
    "<!-- The jax fork's releases (upstream jax {version} plus the patch "
    "series; see the commits after the `upstream` tag). -->\n\n")


@dataclasses.dataclass
class TreeReport:
  dest: Path
  tag: str
  tag_commit: str
  missing: list[str]           # blobs the clone lacks, left out
  from_sdist: list[str]        # jax/ files taken from the pinned sdist
  patches: list[str]           # applied, one commit each


def resolve_tag(repo: Path, tag: str) -> str:
  if not repo.exists():
    raise T.TreeError(f"--jax-repo {repo} does not exist")
  proc = T.git_run(repo, "rev-parse", "--verify", "-q", f"{tag}^{{commit}}",
                   check=False, git_dir=True)
  if proc.returncode != 0:
    raise T.TreeError(f"{repo} has no tag {tag!r} (is it a clone of "
                      "jax-ml/jax with its tags?)")
  return proc.stdout.decode().strip()


def list_blobs(repo: Path, commit: str) -> list[tuple[str, str, str]]:
  """Returns (mode, sha, path) of every blob in the commit's tree."""
  out = T.git(repo, "ls-tree", "-r", "-z", "--full-tree", commit,
              git_dir=True)
  entries = []
  for rec in out.split(b"\0"):
    if not rec:
      continue
    meta, _, path = rec.partition(b"\t")
    mode, kind, sha = meta.decode().split()
    if kind == "blob":
      entries.append((mode, sha, path.decode("utf-8")))
  return entries


def missing_blobs(repo: Path, entries: list[tuple[str, str, str]]
                  ) -> list[str]:
  """Paths whose blob is not in the clone's object store."""
  if not entries:
    return []
  shas = "".join(sha + "\n" for _, sha, _ in entries).encode()
  out = T.git(repo, "cat-file", "--batch-check", input=shas, git_dir=True)
  lines = out.decode().splitlines()
  return sorted(path for (_, _, path), line in zip(entries, lines)
                if line.endswith(" missing"))


def _required(path: str) -> bool:
  return any(path == r or path.startswith(r + "/") for r in REQUIRED_PATHS)


def export_tag(repo: Path, commit: str, dest: Path) -> list[str]:
  """Writes the commit's files into `dest`; returns the paths left out."""
  entries = list_blobs(repo, commit)
  top = {p.split("/", 1)[0] for _, _, p in entries}
  absent = [r for r in REQUIRED_PATHS if r not in top]
  if absent:
    raise T.TreeError(f"{commit[:12]} lacks {', '.join(absent)}: not a "
                      "jax-ml/jax release tag")
  missing = missing_blobs(repo, entries)
  needed = [p for p in missing if _required(p)]
  if needed:
    raise T.TreeError(
        f"the clone {repo} lacks the contents of {len(needed)} file(s) the "
        f"build or the tests need, e.g. {needed[0]}; fetch the full history "
        "(`git fetch --refetch`) or use another clone")
  pathspec = ["."] + [f":(exclude,literal){p}" for p in missing]
  archive = T.git(repo, "archive", "--format=tar", commit, "--", *pathspec,
                  git_dir=True)
  dest.mkdir(parents=True)
  subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
  return missing


def overlay_sdist_jax(sdist_root: Path, tree: Path) -> list[str]:
  """Copies the sdist's `jax/` files that differ from (or are absent in) the
  tree's; returns their paths.  Files only in the tree (BUILD, ...) stay."""
  changed = []
  for src in sorted((sdist_root / "jax").rglob("*")):
    if not src.is_file():
      continue
    rel = src.relative_to(sdist_root).as_posix()
    dst = tree / rel
    data = src.read_bytes()
    if not dst.is_file() or dst.read_bytes() != data:
      dst.parent.mkdir(parents=True, exist_ok=True)
      dst.write_bytes(data)
      changed.append(rel)
  return changed


def fork_changelog_sections(fork_changelog: str) -> str:
  """The fork's `## ...` release sections (everything from the first)."""
  m = re.search(r"^## ", fork_changelog, re.M)
  if not m:
    raise T.TreeError("the fork's CHANGELOG.md has no `## ` release section")
  return fork_changelog[m.start():].rstrip("\n") + "\n\n"


def merge_changelog(upstream_text: str, fork_text: str, version: str) -> str:
  """Puts the fork's release sections before upstream's first release one."""
  m = re.search(r"^## ", upstream_text, re.M)
  at = m.start() if m else len(upstream_text)
  return (upstream_text[:at] + _FORK_CHANGELOG_INTRO.format(version=version)
          + fork_changelog_sections(fork_text) + upstream_text[at:])


def _commit(tree: Path, message: str, date: str) -> None:
  # -f: the tag may track files that match its own .gitignore.
  T.git(tree, "add", "-A", "-f")
  T.git(tree, "commit", "-q", "--allow-empty", "-m", message,
        env=T.git_env({"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}))


def build(dest: Path, jax_repo: Path, patches_dir: Path, tag: str = DEFAULT_TAG,
          sdist: str | None = None,
          fork_changelog: Path | None = None) -> TreeReport:
  """Creates `dest` (replacing it only once everything succeeded)."""
  pin = U.load_pin()
  jax_repo = Path(jax_repo)
  commit = resolve_tag(jax_repo, tag)
  tag_date = T.git(jax_repo, "log", "-1", "--format=%cI", commit,
                   git_dir=True).decode().strip()
  src = U.get_sdist(pin, sdist)   # verified against fork.toml's sha256
  names = P.read_series(patches_dir)
  fork_changelog = fork_changelog or U.REPO_ROOT / "CHANGELOG.md"
  dest = dest.resolve()
  dest.parent.mkdir(parents=True, exist_ok=True)
  tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".tmp-", dir=dest.parent))
  try:
    tree = tmp / "tree"
    missing = export_tag(jax_repo, commit, tree)
    T.init_repo(tree)
    note = ""
    if missing:
      note = ("\n\nLeft out (blob missing from the clone): " +
              ", ".join(missing))
    _commit(tree, f"Upstream {tag} ({commit}){note}", tag_date)
    T.git(tree, "tag", tag)
    sdist_root = U.extract(src, pin, tmp / "sdist")
    from_sdist = overlay_sdist_jax(sdist_root, tree)
    _commit(tree, f"jax/: files from the pinned sdist {pin.sdist_name}\n\n"
            f"sha256 {pin.sha256}; these differ from the tag's:\n" +
            "".join(f"  {p}\n" for p in from_sdist), tag_date)
    changelog = tree / "CHANGELOG.md"
    changelog.write_text(merge_changelog(
        changelog.read_text(encoding="utf-8"),
        fork_changelog.read_text(encoding="utf-8"), pin.version),
        encoding="utf-8")
    _commit(tree, "CHANGELOG.md: the fork's releases on top of upstream's",
            tag_date)
    T.git(tree, "tag", T.UPSTREAM_TAG)
    T.commit_series(tree, patches_dir, names)
    T.replace_dir(tree, dest)
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return TreeReport(dest=dest, tag=tag, tag_commit=commit, missing=missing,
                    from_sdist=from_sdist, patches=names)


def differing_from_installed(tree: Path, patches_dir: Path,
                             python: str) -> list[str]:
  """What keeps the `jax` package that `python` imports from being the
  tree's: its files that the tree's `jax/` lacks or holds other bytes of
  (but the PJRT adapter's native half built from the tree's C source, which
  our wheel carries: `native.py`), and the series' `jax/` files it lacks.
  (The tree also holds files that upstream does not package: BUILD files,
  jax2tf's examples, ...)"""
  # Where `import jax` finds the package, without running its __init__
  # (a second of CPU per check).
  proc = subprocess.run(
      [python, "-c", "import importlib.util as u; "
       "print(u.find_spec('jax').submodule_search_locations[0])"],
      capture_output=True, text=True, cwd=tempfile.gettempdir())
  if proc.returncode != 0:
    raise T.TreeError(f"{python} cannot import jax: {proc.stderr.strip()}")
  installed = Path(proc.stdout.strip())
  source = tree / N.SOURCE
  # The native half our wheel builds from the tree's C source (native.py).
  native = N.library_path(source.read_bytes()) if source.is_file() else None
  out = []
  for p in sorted(installed.rglob("*")):
    rel = p.relative_to(installed).as_posix()
    if p.is_file() and "__pycache__" not in p.parts and \
        f"jax/{rel}" != native and not (
            (tree / "jax" / rel).is_file()
            and (tree / "jax" / rel).read_bytes() == p.read_bytes()):
      out.append(f"jax/{rel}")
  out += sorted({path for name in P.read_series(patches_dir)
                 for path in P.read_patch(patches_dir / name).touched_paths()
                 if path.startswith("jax/") and (tree / path).exists()
                 and not (installed / path[4:]).exists()})
  return out


def add_arguments(p, default_dir: Path) -> None:
  T.add_jax_repo_argument(p)
  p.add_argument("--tag", default=DEFAULT_TAG,
                 help=f"upstream's release tag (default {DEFAULT_TAG})")
  p.add_argument("--dir", default=str(default_dir),
                 help="where to write the tree (replaced only on success)")
  p.add_argument("--check-installed", metavar="PYTHON", default=None,
                 help="then check that the jax package PYTHON imports (the "
                      "installed fork) is the tree's jax/, byte for byte")


def main(args) -> int:
  with T.open_jax_repo(args.jax_repo) as repo:
    r = build(Path(args.dir), repo, Path(args.patches), args.tag, args.sdist)
  print(f"tree {r.dest}: {r.tag} ({r.tag_commit[:12]}), "
        f"{len(r.from_sdist)} jax/ file(s) from the pinned sdist, "
        f"{len(r.patches)} patches applied (one commit each)")
  for p in r.from_sdist:
    print(f"  from sdist: {p}")
  for p in r.missing:
    print(f"  left out (blob missing from the clone): {p}")
  if args.check_installed:
    differing = differing_from_installed(r.dest, Path(args.patches),
                                         args.check_installed)
    for path in differing:
      print(f"  not the installed jax's: {path}")
    if differing:
      return 1
    print(f"tree {r.dest}: jax/ holds the installed jax, byte for byte")
  return 0
