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
"""Tests of `build/fork.py rebase` / `rebase-report` (build/forktool/rebase.py).

A synthetic upstream "base" and patch series are built in each test with git,
and synthetic "releases" are derived from the base by editing files: one
where a patch applies as it is, one where it applies at an offset, one where
git's 3-way merge is needed, one where it conflicts, and ones that already
contain a patch's change.  No network.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from unittest import mock

from absl.testing import absltest

from forktool import patches as P
from forktool import rebase as R
from forktool import tree as T
from forktool import upstream as U

REPO = Path(__file__).resolve().parents[1]

FORK_PY = REPO / "build" / "fork.py"


def _lines(n: int, prefix: str) -> str:
  return "".join(f"{prefix} line {i}\n" for i in range(1, n + 1))


# The base release: three modules of 30 lines each.
BASE = {
    "pkg/a.py": _lines(30, "a"),
    "pkg/b.py": _lines(30, "b"),
    "pkg/c.py": _lines(30, "c"),
    "README": "base\n",
}


def _write_tree(root: Path, files: dict[str, str]) -> Path:
  root.mkdir(parents=True)
  for path, text in files.items():
    p = root / path
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
  return root


def _replace_line(text: str, old: str, new: str) -> str:
  assert old + "\n" in text, old
  return text.replace(old + "\n", new + "\n", 1)


class RebaseTestCase(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.tmp = Path(tempfile.mkdtemp(prefix="rebase-test-"))
    self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
    self.base = _write_tree(self.tmp / "base", BASE)

  def make_series(self, edits: list[tuple[str, dict[str, str | None]]],
                  superseded: dict[str, str] | None = None) -> Path:
    """Commits each (subject, {path: new text or None}) on the base and
    exports the commits as a series, as `build/fork.py export` writes it.
    `superseded` maps a subject to its patch's Superseded-In value."""
    repo = self.tmp / "dev"
    shutil.copytree(self.base, repo)
    T.git(repo, "init", "-q", "-b", "main")
    T.git(repo, "add", "-A")
    T.git(repo, "commit", "-q", "-m", "base")
    T.git(repo, "tag", T.UPSTREAM_TAG)
    for subject, files in edits:
      for path, text in files.items():
        if text is None:
          (repo / path).unlink()
        else:
          (repo / path).parent.mkdir(parents=True, exist_ok=True)
          (repo / path).write_text(text)
      field = (f"Superseded-In: {superseded[subject]}\n"
               if subject in (superseded or {}) else "")
      T.git(repo, "add", "-A")
      T.git(repo, "commit", "-q", "-F", "-", input=(
          f"{subject}\n\nWhy it matters.\n\n{field}Origin: jax-fork\n"
          "Forwarded: not-needed\nLast-Update: 2026-12-01\n").encode())
    patches = self.tmp / "patches"
    T.export(repo, patches)
    return patches

  def release(self, name: str, edits: dict[str, str | None]) -> Path:
    files = dict(BASE)
    for path, text in edits.items():
      if text is None:
        files.pop(path)
      else:
        files[path] = text
    return _write_tree(self.tmp / name, files)

  def rebase(self, release: Path, patches: Path, version: str = "9.9.9"):
    return R.rebase_onto(self.base, release, patches,
                         self.tmp / f"rebased-{release.name}",
                         version=version, base_version="1.0")


class StatusTest(RebaseTestCase):
  """One patch, one release each: every status the rebase can report."""

  def setUp(self):
    super().setUp()
    self.patches = self.make_series([
        ("a: change line 10", {
            "pkg/a.py": _replace_line(BASE["pkg/a.py"], "a line 10",
                                      "a line 10 (fork)")}),
    ])

  def status(self, release_edits: dict[str, str | None]) -> R.PatchResult:
    res = self.rebase(self.release("rel", release_edits), self.patches)
    self.assertLen(res.patches, 1)
    return res.patches[0]

  def test_clean_when_the_release_changed_other_files(self):
    r = self.status({"pkg/b.py": BASE["pkg/b.py"] + "b new\n"})
    self.assertEqual(r.status, "clean")
    self.assertEqual(r.offsets, {})
    self.assertIsNotNone(r.commit)

  def test_offset_when_the_release_inserted_lines_above(self):
    r = self.status({"pkg/a.py": "new 1\nnew 2\nnew 3\n" + BASE["pkg/a.py"]})
    self.assertEqual(r.status, "offset")
    self.assertEqual(r.offsets, {"pkg/a.py": [(1, 3)]})
    self.assertEqual(r.cell(), "offset (1 hunk)")

  def test_merged_when_the_context_changed(self):
    # Line 8 is in the hunk's context; the 3-way merge still applies it.
    r = self.status({"pkg/a.py": _replace_line(BASE["pkg/a.py"], "a line 8",
                                               "a line 8 (upstream)")})
    self.assertEqual(r.status, "merged")
    repo = self.tmp / "rebased-rel"
    text = (repo / "pkg/a.py").read_text()
    self.assertIn("a line 8 (upstream)\n", text)
    self.assertIn("a line 10 (fork)\n", text)

  def test_conflict_is_committed_with_markers(self):
    r = self.status({"pkg/a.py": _replace_line(BASE["pkg/a.py"], "a line 10",
                                               "a line 10 (upstream)")})
    self.assertEqual(r.status, "conflict")
    self.assertEqual(r.files, ["pkg/a.py"])
    self.assertEqual(r.hunks, {"pkg/a.py": [1]})
    self.assertIn("**conflict**: `pkg/a.py` (hunk 1)", r.cell())
    repo = self.tmp / "rebased-rel"
    # The markers are in the patch's own commit, on top of the release, and
    # the commit carries the patch's name for `export`.
    self.assertEqual(T.git(repo, "rev-parse", "HEAD").decode().strip(),
                     r.commit)
    self.assertEqual(T.git(repo, "rev-parse", "HEAD~1").decode().strip(),
                     T.git(repo, "rev-parse", T.UPSTREAM_TAG).decode().strip())
    committed = T.git(repo, "show", "HEAD:pkg/a.py").decode()
    self.assertIn("<<<<<<< ", committed)
    self.assertIn("a line 10 (upstream)", committed)
    self.assertIn("a line 10 (fork)", committed)
    self.assertEqual(T.git(repo, "notes", "show", "HEAD").decode().strip(),
                     P.read_series(self.patches)[0])
    self.assertEqual(T.git(repo, "status", "--porcelain").decode(), "")

  def test_redundant_when_the_release_has_the_change(self):
    r = self.status({"pkg/a.py": _replace_line(BASE["pkg/a.py"], "a line 10",
                                               "a line 10 (fork)")})
    self.assertEqual(r.status, "redundant")
    self.assertEqual(r.detail, "applies in reverse")
    self.assertIsNone(r.commit)

  def test_redundant_when_empty_once_merged(self):
    # The release made the same change and also changed the hunk's context,
    # so neither direction applies as is; the merge leaves nothing to commit.
    text = _replace_line(BASE["pkg/a.py"], "a line 10", "a line 10 (fork)")
    text = _replace_line(text, "a line 7", "a line 7 (upstream)")
    r = self.status({"pkg/a.py": text})
    self.assertEqual(r.status, "redundant")
    self.assertEqual(r.detail, "empty once merged")
    repo = self.tmp / "rebased-rel"
    self.assertEqual(T.git(repo, "rev-parse", "HEAD").decode(),
                     T.git(repo, "rev-parse", T.UPSTREAM_TAG).decode())

  def test_failed_when_the_file_is_gone(self):
    r = self.status({"pkg/a.py": None})
    self.assertEqual(r.status, "failed")
    self.assertIn("pkg/a.py", r.detail)
    repo = self.tmp / "rebased-rel"
    self.assertEqual(T.git(repo, "status", "--porcelain").decode(), "")


class AddAddTest(RebaseTestCase):

  def test_file_added_by_both_is_a_conflict_naming_it(self):
    patches = self.make_series([("d: new module", {"pkg/d.py": "d fork\n"})])
    res = self.rebase(self.release("rel", {"pkg/d.py": "d upstream\n"}),
                      patches)
    r, = res.patches
    self.assertEqual(r.status, "conflict")
    self.assertEqual(r.added_by_both, ["pkg/d.py"])
    self.assertEqual(r.cell(), "**conflict**: `pkg/d.py` (added by both)")
    text = T.git(res.repo, "show", "HEAD:pkg/d.py").decode()
    self.assertIn("d fork", text)
    self.assertIn("d upstream", text)


class SeriesTest(RebaseTestCase):
  """A whole series on one release: never stopping, and `export` after."""

  def setUp(self):
    super().setUp()
    a1 = _replace_line(BASE["pkg/a.py"], "a line 5", "a line 5 (fork)")
    self.patches = self.make_series([
        ("a: change line 5", {"pkg/a.py": a1}),
        ("b: change line 20", {
            "pkg/b.py": _replace_line(BASE["pkg/b.py"], "b line 20",
                                      "b line 20 (fork)")}),
        ("c: new module", {"pkg/d.py": "d\n"}),
        ("a: change line 25", {
            "pkg/a.py": _replace_line(a1, "a line 25", "a line 25 (fork)")}),
    ])
    self.names = P.read_series(self.patches)
    self.rel = self.release("rel", {
        # conflicts with the first patch
        "pkg/a.py": _replace_line(BASE["pkg/a.py"], "a line 5",
                                  "a line 5 (upstream)"),
        # has the third patch already
        "pkg/d.py": "d\n",
    })

  def test_every_patch_is_tried_in_order(self):
    res = self.rebase(self.rel, self.patches)
    self.assertEqual([p.name for p in res.patches], self.names)
    # The last patch lands below the first one's committed markers: offset.
    self.assertEqual([p.status for p in res.patches],
                     ["conflict", "clean", "redundant", "offset"])
    repo = res.repo
    log = T.git(repo, "log", "--format=%N%s", f"{T.UPSTREAM_TAG}..HEAD"
                ).decode().split()
    self.assertNotIn(self.names[2], log)
    # The report is kept in the repository's git folder.
    data = json.loads((repo / ".git" / R.REPORT_NAME).read_text())
    self.assertEqual([p["status"] for p in data["patches"]],
                     ["conflict", "clean", "redundant", "offset"])
    # The series on its own base is kept beside the rebased branch.
    self.assertEqual(T.git(repo, "rev-list", "--count",
                           f"{R.BASE_TAG}..{R.SERIES_BRANCH}").decode().strip(),
                     str(len(self.names)))

  def test_resolve_then_export_writes_the_rebased_series(self):
    res = self.rebase(self.rel, self.patches)
    repo = res.repo
    first = res.patches[0].commit
    # A developer resolves the conflict commit (rebase -i, 'edit' it).
    env = T.git_env({"GIT_SEQUENCE_EDITOR":
                     f"sed -i 's/^pick {first[:7]}/edit {first[:7]}/'",
                     "GIT_EDITOR": "true"})
    T.git(repo, "rebase", "-q", "-i", T.UPSTREAM_TAG, env=env)
    resolved = _replace_line(BASE["pkg/a.py"], "a line 5",
                             "a line 5 (upstream, fork)")
    (repo / "pkg/a.py").write_text(resolved)
    T.git(repo, "commit", "-q", "-a", "--amend", "--no-edit", env=env)
    T.git(repo, "rebase", "--continue", env=env)
    self.assertNotIn("<<<<<<<", (repo / "pkg/a.py").read_text())
    self.assertIn("a line 25 (fork)\n", (repo / "pkg/a.py").read_text())
    out = self.tmp / "rebased-patches"
    names = T.export(repo, out)
    self.assertEqual(names, [self.names[0], self.names[1], self.names[3]])
    self.assertEqual(P.read_series(out), names)
    self.assertEqual(P.check_series(out), [])
    # The exported series applies strictly to the release.
    P.apply_series(self.rel, out, write=False)

  def test_each_commit_names_the_patch_file_it_came_from(self):
    res = self.rebase(self.rel, self.patches)
    for p in res.patches:
      if p.commit is None:
        continue
      message = T.git(res.repo, "log", "-1", "--format=%B", p.commit).decode()
      blob = T.git(self.tmp, "hash-object", str(self.patches / p.name)
                   ).decode().strip()
      self.assertEqual(message.strip().splitlines()[-1],
                       f"Rebased-From: {p.name} blob {blob}")
    # Exported, and rebased again from there: the field names the new
    # source, once.
    out = self.tmp / "rebased-patches"
    T.export(res.repo, out)
    name = P.read_series(out)[1]
    self.assertEqual(P.read_patch(out / name).rebased_from(),
                     (name, P.blob_id((self.patches / name).read_bytes())))
    again = R.rebase_onto(self.rel, self.rel, out, self.tmp / "again",
                          version="9.9.9")
    message = T.git(again.repo, "log", "-1", "--format=%B",
                    again.patches[1].commit).decode()
    self.assertEqual(message.count("Rebased-From:"), 1)
    self.assertIn(f"Rebased-From: {name} blob "
                  f"{P.blob_id((out / name).read_bytes())}", message)

  def test_malformed_rebased_from_is_reported_by_check(self):
    out = self.tmp / "bad"
    shutil.copytree(self.patches, out)
    name = P.read_series(out)[0]
    text = (out / name).read_text().replace(
        "Last-Update: 2026-12-01\n",
        "Last-Update: 2026-12-01\nRebased-From: yesterday\n")
    (out / name).write_text(text)
    problems = P.check_series(out)
    self.assertLen(problems, 1)
    self.assertIn("Rebased-From must be 'NAME.patch blob GIT_BLOB_ID'",
                  problems[0])

  def test_report_table(self):
    other = self.release("rel2", {"README": "upstream\n"})
    results = [self.rebase(self.rel, self.patches, "9.9.9"),
               self.rebase(other, self.patches, "10.0")]
    table = R.markdown_table(results).splitlines()
    self.assertEqual(table[0], "| patch | jax 9.9.9 | jax 10.0 |")
    self.assertEqual(table[1], "| --- | --- | --- |")
    self.assertLen(table, 2 + len(self.names) + 1)
    self.assertEqual(table[2], f"| `{self.names[0]}` | **conflict**: "
                     "`pkg/a.py` (hunk 1) | clean |")
    self.assertEqual(table[4], f"| `{self.names[2]}` | redundant | clean |")
    self.assertEqual(table[-1], "| **total** | 1 clean, 1 offset, "
                     "1 conflict, 1 redundant | 4 clean |")

  def test_summary_gives_redundant_a_column_where_a_release_has_one(self):
    other = self.release("rel2", {"README": "upstream\n"})
    results = [self.rebase(self.rel, self.patches, "9.9.9"),
               self.rebase(other, self.patches, "10.0")]
    self.assertEqual(R.summary_table(results).splitlines(), [
        "| release | superseded | apply | conflict | redundant | "
        "patches that conflict |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| jax 9.9.9 | 0 | 2 | 1 | 1 | `{self.names[0][:-len('.patch')]}` |",
        "| jax 10.0 | 0 | 4 | 0 | 0 | none |",
    ])

  def test_existing_destination_is_refused(self):
    (self.tmp / "rebased-rel").mkdir()
    with self.assertRaisesRegex(R.RebaseError, "exists"):
      self.rebase(self.rel, self.patches)

  def test_releases_as_sdists(self):
    sdist = self.tmp / "pkg-9.9.9.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
      tf.add(self.rel, arcname="pkg-9.9.9")
    res = R.rebase_onto(self.base, sdist, self.patches, self.tmp / "out",
                        version="9.9.9")
    self.assertEqual([p.status for p in res.patches],
                     ["conflict", "clean", "redundant", "offset"])


class SupersededTest(RebaseTestCase):
  """A patch whose `Superseded-In` release upstream reached is left out."""

  def setUp(self):
    super().setUp()
    self.patches = self.make_series([
        ("a: change line 10", {
            "pkg/a.py": _replace_line(BASE["pkg/a.py"], "a line 10",
                                      "a line 10 (fork)")}),
        ("b: change line 20", {
            "pkg/b.py": _replace_line(BASE["pkg/b.py"], "b line 20",
                                      "b line 20 (fork)")}),
    ], superseded={"a: change line 10": "jax 9.9.0"})
    self.names = P.read_series(self.patches)
    # Upstream's own version of the first patch's change: a conflict for a
    # patch that is not marked superseded.
    self.rel = self.release("rel", {
        "pkg/a.py": _replace_line(BASE["pkg/a.py"], "a line 10",
                                  "a line 10 (upstream)")})

  def test_left_out_at_and_after_the_release_named(self):
    for version in ("9.9.0", "9.9.1", "10.0"):
      res = R.rebase_onto(self.base, self.rel, self.patches,
                          self.tmp / f"rebased-{version}", version=version)
      self.assertEqual([p.status for p in res.patches],
                       ["superseded", "clean"], version)
      first = res.patches[0]
      self.assertEqual(first.superseded_in, "9.9.0")
      self.assertIsNone(first.commit)
      self.assertEqual(first.cell(), "superseded (jax 9.9.0)")
      self.assertEqual(res.counts()["superseded"], 1)
      self.assertEqual(res.counts()["conflict"], 0)
      # Only the other patch is on the rebased branch, so `export` drops
      # the superseded one from the series.
      log = T.git(res.repo, "log", "--format=%N", f"{T.UPSTREAM_TAG}..HEAD"
                  ).decode().split()
      self.assertEqual(log, [self.names[1]])
      self.assertIn("a line 10 (upstream)\n",
                    (res.repo / "pkg/a.py").read_text())
      out = self.tmp / f"exported-{version}"
      self.assertEqual(T.export(res.repo, out), [self.names[1]])
      data = json.loads((res.repo / ".git" / R.REPORT_NAME).read_text())
      self.assertEqual(data["patches"][0]["status"], "superseded")
      self.assertEqual(data["patches"][0]["superseded_in"], "9.9.0")

  def test_applied_as_usual_before_the_release_named(self):
    for version in ("9.8.7", "9.9.0rc1"):
      res = R.rebase_onto(self.base, self.rel, self.patches,
                          self.tmp / f"rebased-{version}", version=version)
      self.assertEqual([p.status for p in res.patches],
                       ["conflict", "clean"], version)

  def test_report_counts_superseded_apart_from_conflicts(self):
    results = [R.rebase_onto(self.base, self.rel, self.patches,
                             self.tmp / f"rebased-{v}", version=v)
               for v in ("9.8.0", "9.9.0")]
    table = R.markdown_table(results).splitlines()
    self.assertEqual(table[0], "| patch | jax 9.8.0 | jax 9.9.0 |")
    self.assertEqual(table[2], f"| `{self.names[0]}` | **conflict**: "
                     "`pkg/a.py` (hunk 1) | superseded (jax 9.9.0) |")
    self.assertEqual(table[3], f"| `{self.names[1]}` | clean | clean |")
    self.assertEqual(table[-1], "| **total** | 1 clean, 1 conflict | "
                     "1 superseded, 1 clean |")
    self.assertEqual(R.summary_table(results).splitlines(), [
        "| release | superseded | apply | conflict | patches that conflict |",
        "| --- | --- | --- | --- | --- |",
        f"| jax 9.8.0 | 0 | 1 | 1 | `{self.names[0][:-len('.patch')]}` |",
        "| jax 9.9.0 | 1 | 1 | 0 | none |",
    ])

  def test_malformed_field_fails_up_front(self):
    p = self.patches / self.names[0]
    p.write_text(p.read_text().replace("Superseded-In: jax 9.9.0",
                                       "Superseded-In: 9.9"))
    with self.assertRaisesRegex(P.PatchError, f"{self.names[0]}: "
                                "Superseded-In must be 'jax X.Y.Z'"):
      R.rebase_onto(self.base, self.rel, self.patches, self.tmp / "out",
                    version="9.9.9")
    self.assertFalse((self.tmp / "out").exists())

  def test_cli_rebase_and_report(self):
    sdists = self.tmp / "sdists"
    sdists.mkdir()
    for name, tree in (("jax-1.0.0", self.base), ("jax-9.8.0", self.rel),
                       ("jax-9.9.0", self.rel)):
      with tarfile.open(sdists / f"{name}.tar.gz", "w:gz") as tf:
        tf.add(tree, arcname=name)
    common = ["--patches", str(self.patches), "--from", "1.0.0",
              "--sdist", str(sdists / "jax-1.0.0.tar.gz")]
    r = subprocess.run([sys.executable, str(FORK_PY), "rebase", *common,
                        "--onto", "9.9.0", "--release-sdist",
                        str(sdists / "jax-9.9.0.tar.gz"),
                        "--dir", str(self.tmp / "cli-rebase")],
                       capture_output=True, text=True)
    self.assertEqual(r.returncode, 0, r.stderr)
    self.assertIn("1 superseded, 1 clean", r.stdout)
    self.assertIn(f"{self.names[0]}: left out, superseded since jax 9.9.0",
                  r.stdout)
    r = subprocess.run([sys.executable, str(FORK_PY), "rebase-report",
                        *common, "--onto", "9.8.0", "9.9.0",
                        "--release-sdist-dir", str(sdists)],
                       capture_output=True, text=True)
    self.assertEqual(r.returncode, 0, r.stderr)
    self.assertIn("| **total** | 1 clean, 1 conflict | 1 superseded, 1 clean "
                  "|\n\n| release | superseded | apply | conflict |",
                  r.stdout)
    self.assertIn("| jax 9.9.0 | 1 | 1 | 0 | none |", r.stdout)


class FetchTest(absltest.TestCase):

  def test_child_pip_gets_a_cleaned_environment(self):
    leaked = {"_PYPROJECT_HOOKS_BUILD_BACKEND": "forktool.backend",
              "_PYPROJECT_HOOKS_BACKEND_PATH": "/somewhere/build",
              "PEP517_BUILD_BACKEND": "x", "PIP_BUILD_TRACKER": "/build/t",
              "PYTHONPATH": "/overlay", "PYTHONNOUSERSITE": "1",
              "PIP_FIND_LINKS": "/wheels"}
    seen = {}

    def fake_run(cmd, **kw):
      seen["cmd"], seen["env"] = cmd, kw["env"]
      dest = Path(cmd[cmd.index("-d") + 1])
      (dest / "jax-0.4.99.tar.gz").write_bytes(b"sdist")
      return subprocess.CompletedProcess(cmd, 0, "", "")

    with tempfile.TemporaryDirectory() as cache, \
        mock.patch.dict(os.environ, leaked), \
        mock.patch.object(U.subprocess, "run", fake_run):
      got = R.fetch_release_sdist("0.4.99", cache=Path(cache))
      self.assertEqual(got, Path(cache) / "jax-0.4.99.tar.gz")
      self.assertEqual(got.read_bytes(), b"sdist")
    for key in leaked:
      if key != "PIP_FIND_LINKS":
        self.assertNotIn(key, seen["env"])
    self.assertEqual(seen["env"]["PIP_FIND_LINKS"], "/wheels")
    self.assertIn("--no-binary", seen["cmd"])
    self.assertEqual(seen["cmd"][seen["cmd"].index("--no-binary") + 1],
                     ":all:")
    self.assertIn("jax==0.4.99", seen["cmd"])
    self.assertIn("--no-deps", seen["cmd"])

  def test_pip_failure_is_a_rebase_error(self):
    def fake_run(cmd, **kw):
      return subprocess.CompletedProcess(cmd, 1, "", "No matching "
                                         "distribution found for jax==0.0.1")
    with tempfile.TemporaryDirectory() as cache, \
        mock.patch.object(U.subprocess, "run", fake_run):
      with self.assertRaisesRegex(R.RebaseError, "No matching distribution"):
        R.fetch_release_sdist("0.0.1", cache=Path(cache))

  def test_bad_version_is_refused_before_pip(self):
    with mock.patch.object(U.subprocess, "run") as run:
      with self.assertRaisesRegex(R.RebaseError, "not a release version"):
        R.fetch_release_sdist("0.4.30; rm -rf /")
      run.assert_not_called()


class CliTest(absltest.TestCase):

  def run_cli(self, *args):
    return subprocess.run([sys.executable, str(FORK_PY), *args],
                          capture_output=True, text=True)

  def test_bad_version_exits_2(self):
    r = self.run_cli("rebase", "--onto", "latest", "--dir", "/nonexistent/x")
    self.assertEqual(r.returncode, 2)
    self.assertIn("not a release version", r.stderr)

  def test_rebase_onto_the_pin_itself_is_all_clean(self):
    pin = U.load_pin()
    cached = U.cache_dir() / pin.sdist_name
    if not cached.is_file():
      self.skipTest(f"the pinned sdist is not cached ({cached})")
    with tempfile.TemporaryDirectory() as tmp:
      r = self.run_cli("rebase-report", "--onto", pin.version,
                       "--release-sdist-dir", str(cached.parent),
                       "--json", str(Path(tmp) / "r.json"))
      self.assertEqual(r.returncode, 0, r.stderr)
      self.assertIn(f"sha256 {pin.sha256}", r.stderr)
      names = P.read_series(REPO / "patches")
      rows = [l for l in r.stdout.splitlines() if l.startswith("| `")]
      self.assertLen(rows, len(names))
      for name, row in zip(names, rows):
        self.assertEqual(row, f"| `{name}` | clean |")
      data = json.loads((Path(tmp) / "r.json").read_text())
      self.assertEqual({p["status"] for p in data[0]["patches"]}, {"clean"})


if __name__ == "__main__":
  absltest.main()
