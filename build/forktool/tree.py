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
"""The materialized tree: upstream + one git commit per patch, and back.

`materialize` builds the tree in a temporary sibling folder and only renames
it into place once every patch applied, so a failure leaves the old tree as it
was.  Each commit remembers its patch file name in a git note
(refs/notes/commits; rewritten by amend and rebase), which `export` uses to
write the same file names back.  Git is run with a fixed, private
configuration and fixed dates, so that materialize + export is byte-stable.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

from . import patches as P
from . import upstream as U

UPSTREAM_TAG = "upstream"
_IDENT = ("jax-fork", "jax-fork@localhost")
_UPSTREAM_DATE = "2024-04-11T00:00:00+00:00"   # jax 0.4.26 release day


class TreeError(Exception):
  pass


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
  env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
  env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1",
             GIT_AUTHOR_NAME=_IDENT[0], GIT_AUTHOR_EMAIL=_IDENT[1],
             GIT_COMMITTER_NAME=_IDENT[0], GIT_COMMITTER_EMAIL=_IDENT[1],
             LC_ALL="C", TZ="UTC")
  if extra:
    env.update(extra)
  return env


def git_run(repo: Path, *args: str, env: dict[str, str] | None = None,
            input: bytes | None = None, check: bool = True,
            git_dir: bool = False) -> subprocess.CompletedProcess:
  """Runs git on `repo` with `git_env()` (or `env`); the one way forktool
  runs git.

  With `check`, a failure raises TreeError with git's message; without it
  the caller reads the returned process's exit status.  `git_dir=True` is
  for a clone the tooling did not make (bare, a work tree, or a linked
  worktree): git is given its git directory (`find_git_dir`) rather than
  searching upwards from `repo`, so a folder that is not a clone is never
  taken for an enclosing repository.
  """
  where = ([f"--git-dir={find_git_dir(repo)}"] if git_dir
           else ["-C", str(repo)])
  proc = subprocess.run(["git", *where, *args], input=input,
                        capture_output=True, env=env or git_env())
  if check and proc.returncode != 0:
    raise TreeError(f"git {' '.join(args)} in {repo} failed: "
                    f"{proc.stderr.decode(errors='replace').strip()}")
  return proc


def git(repo: Path, *args: str, env: dict[str, str] | None = None,
        input: bytes | None = None, git_dir: bool = False) -> bytes:
  """`git_run`'s standard output; a failure raises TreeError."""
  return git_run(repo, *args, env=env, input=input, git_dir=git_dir).stdout


def find_git_dir(repo: Path) -> Path:
  """The git directory of the clone `repo`: its `.git` folder, the folder
  the `.git` file of a linked worktree or submodule names, or `repo` itself
  (a bare repository)."""
  repo = repo.resolve()
  dot_git = repo / ".git"
  if dot_git.is_dir():
    return dot_git
  if dot_git.is_file():
    text = dot_git.read_text(encoding="utf-8").strip()
    if not text.startswith("gitdir: "):
      raise TreeError(f"{dot_git} does not name a git directory")
    return (repo / text[len("gitdir: "):]).resolve()
  return repo


JAX_REPO_ENV = "JAX_UPSTREAM_REPO"


def add_jax_repo_argument(p: argparse.ArgumentParser) -> None:
  """`--jax-repo`: where upstream's sources come from (see open_jax_repo)."""
  p.add_argument("--jax-repo", default=os.environ.get(JAX_REPO_ENV),
                 required=not os.environ.get(JAX_REPO_ENV),
                 help="jax-ml/jax's sources: a git clone (bare or not) or a "
                      f"git bundle, with its release tags (default "
                      f"${JAX_REPO_ENV})")


def is_bundle(path: Path) -> bool:
  """Whether `path` is a git bundle file (`git bundle create`)."""
  try:
    with open(path, "rb") as f:
      return f.readline().startswith((b"# v2 git bundle", b"# v3 git bundle"))
  except (IsADirectoryError, FileNotFoundError, NotADirectoryError):
    return False


@contextlib.contextmanager
def open_jax_repo(path: str | os.PathLike) -> Iterator[Path]:
  """A clone of jax-ml/jax for `git_run(..., git_dir=True)`, from `path`.

  `path` is a clone (bare, a work tree or a linked worktree), used in place,
  or a git bundle, cloned bare into a temporary folder for the duration.
  """
  path = Path(path)
  if not path.exists():
    raise TreeError(f"--jax-repo {path} does not exist (a jax-ml/jax clone "
                    f"or git bundle; or set ${JAX_REPO_ENV})")
  if not is_bundle(path):
    yield path
    return
  with tempfile.TemporaryDirectory(prefix="jax-upstream-") as tmp:
    git(Path(tmp), "clone", "-q", "--bare", str(path.resolve()),
        str(Path(tmp) / "jax.git"))
    yield Path(tmp) / "jax.git"


_UNMATERIALIZED_KEY = "forktool.unmaterialized"
_CONFIG = {"core.autocrlf": "false", "core.filemode": "true",
           "notes.rewriteRef": "refs/notes/commits",
           "notes.rewrite.amend": "true", "notes.rewrite.rebase": "true",
           "user.name": _IDENT[0], "user.email": _IDENT[1],
           "diff.renames": "false"}


def init_repo(repo: Path, branch: str = "main",
              config: dict[str, str] | None = None) -> None:
  """`git init` (creating `repo` if needed) on `branch`, with the fixed,
  private configuration the tooling relies on, plus `config`."""
  repo.mkdir(parents=True, exist_ok=True)
  git(repo, "init", "-q", "-b", branch)
  for key, value in {**_CONFIG, **(config or {})}.items():
    git(repo, "config", key, value)


def commit_dir(repo: Path, src: Path, message: str,
               parent: str | None = None) -> str:
  """Commits the files of folder `src` (ignore rules aside) into `repo`
  with its own index, dated as the upstream commit; returns the commit id.
  No branch moves."""
  with tempfile.TemporaryDirectory() as tmp:
    env = git_env({"GIT_INDEX_FILE": str(Path(tmp) / "index"),
                   "GIT_AUTHOR_DATE": _UPSTREAM_DATE,
                   "GIT_COMMITTER_DATE": _UPSTREAM_DATE})
    git(repo, f"--work-tree={src}", "add", "-A", "-f", ".", env=env)
    tree = git(repo, "write-tree", env=env).decode().strip()
    args = ["commit-tree", tree, "-m", message]
    if parent:
      args += ["-p", parent]
    return git(repo, *args, env=env).decode().strip()


def commit_patch(repo: Path, patch: P.Patch, *,
                 allow_empty: bool = False) -> str:
  """Commits the index with the patch's author, date and message, notes
  the commit with the patch's file name (what `export` writes back) and
  returns the commit id."""
  name, email = patch.author
  date = patch.headers["Date"]
  env = git_env({"GIT_AUTHOR_NAME": name or _IDENT[0],
                 "GIT_AUTHOR_EMAIL": email or _IDENT[1],
                 "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
  args = ["commit", "-q", "--no-verify", "--cleanup=verbatim", "-F", "-"]
  if allow_empty:
    args.append("--allow-empty")
  git(repo, *args, env=env, input=patch.commit_message())
  git(repo, "notes", "add", "-f", "-m", patch.name, "HEAD")
  return git(repo, "rev-parse", "HEAD").decode().strip()


def commit_series(tree: Path, patches_dir: Path, names: list[str]) -> None:
  """Applies `names` strictly on top of HEAD, one commit (+ note) per patch."""
  files = P.FileSource(tree)
  for n in names:
    patch = P.read_patch(patches_dir / n)
    changes = P.apply_patch(patch, files)   # raises before touching disk
    files.update(changes)
    files.flush()
    git(tree, "add", "-A")
    commit_patch(tree, patch, allow_empty=True)


def replace_dir(new: Path, dest: Path) -> None:
  """Moves `new` to `dest`, replacing what is there only at the very end."""
  if dest.exists():
    old = Path(tempfile.mkdtemp(prefix=dest.name + ".old-", dir=dest.parent))
    os.replace(dest, old / "tree")
    os.replace(new, dest)
    shutil.rmtree(old)
  else:
    os.replace(new, dest)


def unmaterialized(tree: Path) -> list[str]:
  """The series entries `materialize --upto` left out of this tree, in order."""
  proc = git_run(tree, "config", "--get-all", _UNMATERIALIZED_KEY,
                 check=False)   # exit status 1: none
  return proc.stdout.decode().split()


def kept_patches(tree: Path, series: list[str]) -> list[str]:
  """Of an exported `series`, the entries the tree did not materialize."""
  return series[applied_patches(tree):]


def applied_patches(tree: Path) -> int:
  """How many commits the tree has after the `upstream` tag."""
  return int(git(tree, "rev-list", "--count", f"{UPSTREAM_TAG}..HEAD"))


def materialize(dest: Path, patches_dir: Path, sdist: str | None = None,
                upto: str | None = None, *, pin: U.Pin | None = None) -> Path:
  """Creates `dest` as a git repo: upstream commit + one commit per patch.

  The upstream is `pin` (default: the fork's pin), its sdist `sdist` or one
  `U.get_sdist` finds.  With `upto`, only the series up to and including
  that patch is applied; the names of the rest are recorded in the tree's
  git config so that `export` keeps them.
  """
  pin = pin or U.load_pin()
  src = U.get_sdist(pin, sdist)
  names = P.read_series(patches_dir)
  rest: list[str] = []
  if upto is not None:
    if upto not in names:
      raise TreeError(f"--upto {upto!r} is not in the series")
    cut = names.index(upto) + 1
    names, rest = names[:cut], names[cut:]
  dest = dest.resolve()
  dest.parent.mkdir(parents=True, exist_ok=True)
  tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".tmp-", dir=dest.parent))
  try:
    tree = tmp / "tree"
    U.extract(src, pin, tree)
    init_repo(tree)
    for n in rest:
      git(tree, "config", "--add", _UNMATERIALIZED_KEY, n)
    git(tree, "add", "-A")
    date_env = git_env({"GIT_AUTHOR_DATE": _UPSTREAM_DATE,
                        "GIT_COMMITTER_DATE": _UPSTREAM_DATE})
    git(tree, "commit", "-q", "-m",
        f"Upstream {pin.name} {pin.version} (sdist sha256 {pin.sha256})",
        env=date_env)
    git(tree, "tag", UPSTREAM_TAG)
    commit_series(tree, patches_dir, names)
    replace_dir(tree, dest)
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return dest


def _slug(subject: str) -> str:
  s = re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")
  return "-".join(s.split("-")[:8]) or "patch"


def committed_numbers(patches_dir: Path) -> set[int]:
  """The numbers of every patch file the repository holding `patches_dir`
  ever committed there (none outside a git clone): a deleted patch's number
  is never given again."""
  if not patches_dir.is_dir():
    return set()
  proc = git_run(patches_dir, "log", "--all", "--format=", "--name-only",
                 "--relative", "--", ".", check=False)
  names = proc.stdout.decode(errors="replace").split() \
      if proc.returncode == 0 else []
  return {int(m.group(1)) for n in names
          if (m := P.PATCH_NAME_RE.match(Path(n).name))}


def export(tree: Path, patches_dir: Path, number_from: int | None = None,
           dry_run: bool = False) -> list[str]:
  """Writes the tree's commits since upstream back as the patch series.

  Commits carrying a note keep their file name; new commits get the next
  unused number (or `number_from` if larger) and a slug of their subject.
  Files are only rewritten when their bytes change.  Returns the new series.

  A tree made by `materialize --upto` lacks the patches after that one; they
  are kept, files untouched, after the exported ones in the series (see
  `kept_patches`).  If one of them is no longer in `patches_dir`, export
  refuses rather than guess.
  """
  tree = tree.resolve()
  commits = git(tree, "rev-list", "--reverse", f"{UPSTREAM_TAG}..HEAD"
                ).decode().split()
  old_names = P.read_series(patches_dir) if (patches_dir / "series").exists() \
      else []
  rest = unmaterialized(tree)
  lost = [n for n in rest if not (patches_dir / n).is_file()]
  if lost:
    raise TreeError(
        f"{tree} was materialized with --upto and lacks {', '.join(lost)}, "
        f"which {patches_dir} no longer has; refusing to export (materialize "
        "the whole series, or restore the patch files)")
  used = {int(n[:4]) for n in old_names if n[:4].isdigit()}
  used |= {int(f.name[:4]) for f in patches_dir.glob("[0-9][0-9][0-9][0-9]-*")}
  used |= committed_numbers(patches_dir)
  next_number = max([0, *used]) + 1
  if number_from is not None:
    next_number = max(next_number, number_from)
  names = []
  with tempfile.TemporaryDirectory() as tmp:
    for c in commits:
      try:
        name = git(tree, "notes", "show", c).decode().strip()
      except TreeError:
        subject = git(tree, "log", "-1", "--format=%s", c).decode().strip()
        name = f"{next_number:04d}-{_slug(subject)}.patch"
        next_number += 1
      if not P.PATCH_NAME_RE.match(name):
        raise TreeError(f"commit {c[:12]}: note {name!r} is not a patch name")
      if name in names:
        raise TreeError(f"two commits map to {name}")
      out = git(tree, "format-patch", "-1", c, "--stdout", "--zero-commit",
                "--no-signature", "--no-numbered", "--full-index",
                "--no-renames", "--diff-algorithm=myers", "--no-color",
                "--stat=72", "--no-notes")
      names.append(name)
      (Path(tmp) / name).write_bytes(out)
    exported = list(names)
    names += [n for n in rest if n not in exported]
    if dry_run:
      return names
    patches_dir.mkdir(parents=True, exist_ok=True)
    for name in exported:
      new = (Path(tmp) / name).read_bytes()
      target = patches_dir / name
      if not target.exists() or target.read_bytes() != new:
        target.write_bytes(new)
  for old in old_names:
    if old not in names and (patches_dir / old).exists():
      (patches_dir / old).unlink()
  series_text = "".join(n + "\n" for n in names)
  series = patches_dir / "series"
  if not series.exists() or series.read_text() != series_text:
    series.write_text(series_text)
  return names
