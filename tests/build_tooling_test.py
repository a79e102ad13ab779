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
"""Tests of the fork's build tooling (build/fork.py and build/forktool)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from unittest import mock

from absl.testing import absltest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "build"))

from forktool import backend as B  # noqa: E402
from forktool import patches as P  # noqa: E402
from forktool import tree as T  # noqa: E402
from forktool import upstream as U  # noqa: E402
from forktool import upstream_tests as UT  # noqa: E402
from forktool import wheel as W  # noqa: E402

PATCHES = REPO / "patches"
FORK_PY = REPO / "build" / "fork.py"


def run_cli(*args: str, env: dict[str, str] | None = None):
  return subprocess.run([sys.executable, str(FORK_PY), *args],
                        capture_output=True, text=True, env=env)


class ToolingTestCase(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.tmp = Path(tempfile.mkdtemp(prefix="forktool-test-"))
    self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

  def copy_patches(self) -> Path:
    dest = self.tmp / "patches"
    shutil.copytree(PATCHES, dest)
    return dest

  def first_patch(self, patches_dir: Path) -> Path:
    return patches_dir / P.read_series(patches_dir)[0]


class SeriesTest(ToolingTestCase):

  def test_repository_series_is_consistent_and_applies_strictly(self):
    r = run_cli("check")
    self.assertEqual(r.returncode, 0, r.stderr)
    self.assertIn("check: OK", r.stdout)

  def test_every_patch_has_dep3_fields_and_a_message(self):
    for name in P.read_series(PATCHES):
      patch = P.read_patch(PATCHES / name)
      fields = patch.fields()
      for key in P.REQUIRED_FIELDS:
        self.assertIn(key, fields, f"{name} lacks {key}")
      self.assertRegex(name, P.PATCH_NAME_RE)
      self.assertTrue(patch.subject)

  def test_series_entry_without_file_is_named(self):
    d = self.copy_patches()
    with open(d / "series", "a") as f:
      f.write("0999-not-there.patch\n")
    r = run_cli("check", "--patches", str(d))
    self.assertEqual(r.returncode, 1)
    self.assertIn("0999-not-there.patch has no file", r.stderr)

  def test_file_not_in_series_is_named(self):
    d = self.copy_patches()
    shutil.copy(self.first_patch(d), d / "0998-stray-extra.patch")
    r = run_cli("check", "--patches", str(d))
    self.assertEqual(r.returncode, 1)
    self.assertIn("0998-stray-extra.patch is in", r.stderr)
    self.assertIn("not in the series", r.stderr)

  def test_duplicate_entry_is_named(self):
    d = self.copy_patches()
    first = P.read_series(d)[0]
    with open(d / "series", "a") as f:
      f.write(first + "\n")
    r = run_cli("check", "--patches", str(d))
    self.assertEqual(r.returncode, 1)
    self.assertIn(f"series lists {first} more than once", r.stderr)

  def test_missing_header_field_is_named(self):
    d = self.copy_patches()
    p = self.first_patch(d)
    text = p.read_text()
    self.assertIn("\nForwarded: ", text)
    p.write_text(text.replace("\nForwarded: ", "\nForwarded-Not: "))
    r = run_cli("check", "--patches", str(d))
    self.assertEqual(r.returncode, 1)
    self.assertIn(f"{p.name}: header field 'Forwarded' is missing", r.stderr)

  def test_offset_hunk_is_rejected_naming_patch_and_hunk(self):
    d = self.copy_patches()
    p = self.first_patch(d)
    lines = p.read_text().split("\n")
    i = next(k for k, l in enumerate(lines) if l.startswith("@@ -"))
    old = lines[i]
    start = int(old.split()[1][1:].split(",")[0])
    # Shift the hunk by one line: `patch` would accept it with an offset.
    lines[i] = old.replace(f"-{start},", f"-{start + 1},", 1).replace(
        f"+{start},", f"+{start + 1},", 1)
    p.write_text("\n".join(lines))
    r = run_cli("check", "--patches", str(d))
    self.assertEqual(r.returncode, 1)
    self.assertIn(p.name, r.stderr)
    self.assertIn("hunk #1", r.stderr)
    self.assertIn("does not apply", r.stderr)

  def test_fuzzy_context_is_rejected(self):
    d = self.copy_patches()
    p = self.first_patch(d)
    lines = p.read_text().split("\n")
    i = next(k for k, l in enumerate(lines) if l.startswith("@@ -"))
    j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith(" "))
    lines[j] = " " + lines[j][1:] + "  # context that upstream lacks"
    p.write_text("\n".join(lines))
    pin = U.load_pin()
    pristine = U.extract(U.get_sdist(pin), pin, self.tmp / "up")
    with self.assertRaisesRegex(P.PatchError,
                                f"{p.name}: .*hunk #1 .*does not apply"):
      P.apply_patch(P.read_patch(p), P.FileSource(pristine))


class MaterializeExportTest(ToolingTestCase):

  def test_round_trip_changes_no_byte(self):
    tree = self.tmp / "tree"
    T.materialize(tree, PATCHES)
    out = self.tmp / "exported"
    shutil.copytree(PATCHES, out)
    T.export(tree, out)
    names = P.read_series(PATCHES)
    self.assertEqual(P.read_series(out), names)
    self.assertEqual(sorted(os.listdir(PATCHES)), sorted(os.listdir(out)))
    for name in names + ["series"]:
      self.assertEqual((PATCHES / name).read_bytes(), (out / name).read_bytes(),
                       f"{name} changed in the round trip")

  def test_materialized_history_is_upstream_then_one_commit_per_patch(self):
    tree = self.tmp / "tree"
    T.materialize(tree, PATCHES)
    subjects = T.git(tree, "log", "--reverse", "--format=%s").decode(
        ).splitlines()
    names = P.read_series(PATCHES)
    self.assertLen(subjects, len(names) + 1)
    self.assertStartsWith(subjects[0], "Upstream jax 0.4.26")
    for subject, name in zip(subjects[1:], names):
      self.assertEqual(subject, P.read_patch(PATCHES / name).subject)

  def test_new_commit_exports_as_next_numbered_patch(self):
    tree = self.tmp / "tree"
    T.materialize(tree, PATCHES)
    (tree / "jax" / "fork_probe.py").write_text("X = 1\n")
    T.git(tree, "add", "-A")
    T.git(tree, "commit", "-q", "-m",
          "probe: add a file\n\nWhy.\n\nOrigin: jax-fork\nForwarded: "
          "not-needed\nLast-Update: 2026-11-30\n")
    out = self.copy_patches()
    names = T.export(tree, out)
    last = max(int(n[:4]) for n in P.read_series(PATCHES))
    self.assertEqual(names[-1], f"{last + 1:04d}-probe-add-a-file.patch")
    self.assertEqual(P.check_series(out), [])

  def test_failed_materialize_leaves_existing_tree_as_it_was(self):
    tree = self.tmp / "tree"
    T.materialize(tree, PATCHES)
    head = T.git(tree, "rev-parse", "HEAD")
    (tree / "scratch.txt").write_text("my work in progress\n")
    bad = self.copy_patches()
    p = self.first_patch(bad)
    p.write_text(p.read_text().replace("\n-_release_version", "\n-_RELEASE",
                                       1))
    with self.assertRaisesRegex(P.PatchError, p.name):
      T.materialize(tree, bad)
    self.assertEqual(T.git(tree, "rev-parse", "HEAD"), head)
    self.assertEqual((tree / "scratch.txt").read_text(),
                     "my work in progress\n")
    leftovers = [x for x in os.listdir(self.tmp) if ".tmp-" in x]
    self.assertEqual(leftovers, [])


class UpstreamPinTest(ToolingTestCase):

  def test_pin_matches_the_documented_hash(self):
    pin = U.load_pin()
    self.assertEqual(pin.version, "0.4.26")
    self.assertEqual(pin.jaxlib_version, "0.4.26")
    self.assertEqual(pin.sha256, "2cce025d0a279ec630d550524749bc8efe25d2ff4724"
                     "0d2a7d4cfbc5090c5383")

  def test_hash_mismatch_stops_the_build_naming_both_hashes(self):
    fake = self.tmp / "jax-0.4.26.tar.gz"
    fake.write_bytes(b"not the real sdist")
    actual = U.sha256_of(fake)
    with self.assertRaises(U.UpstreamError) as cm:
      U.get_sdist(U.load_pin(), fake)
    msg = str(cm.exception)
    self.assertIn(U.load_pin().sha256, msg)
    self.assertIn(actual, msg)
    # Through the PEP 517 backend (what `pip install .` runs): no wheel.
    out = self.tmp / "wheels"
    out.mkdir()
    with self.assertRaises(U.UpstreamError):
      B.build_wheel(str(out), {"sdist": str(fake)})
    self.assertEqual(os.listdir(out), [])

  def test_hash_mismatch_via_pip_install_installs_nothing(self):
    fake = self.tmp / "jax-0.4.26.tar.gz"
    fake.write_bytes(b"not the real sdist")
    target = self.tmp / "target"
    env = dict(os.environ, JAX_FORK_SDIST=str(fake))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps",
                        "--no-build-isolation", "--target", str(target),
                        str(REPO)], capture_output=True, text=True, env=env)
    self.assertNotEqual(r.returncode, 0)
    self.assertIn("sha256 mismatch", r.stdout + r.stderr)
    self.assertFalse(target.exists() and any(target.iterdir()))

  def test_no_registry_and_no_local_sdist_says_how_to_pass_one(self):
    empty = self.tmp / "empty"
    empty.mkdir()
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1",
               PIP_FIND_LINKS=str(empty), JAX_FORK_CACHE=str(self.tmp / "c"))
    env.pop(U.SDIST_ENV, None)
    env.pop("PIP_EXTRA_INDEX_URL", None)
    r = run_cli("check", env=env)
    self.assertEqual(r.returncode, 2)
    self.assertIn("JAX_FORK_SDIST=", r.stderr)
    self.assertIn("--sdist", r.stderr)

  def test_corrupt_cache_entry_is_replaced_not_used(self):
    pin = U.load_pin()
    good = U.get_sdist(pin)   # the default cache has the real one
    cache = self.tmp / "cache"
    cache.mkdir()
    (cache / pin.sdist_name).write_bytes(b"corrupt")
    downloads = []

    def fake_download(pin, dest):   # stands in for `pip download`
      downloads.append(dest)
      return Path(shutil.copy(good, dest / pin.sdist_name))

    with mock.patch.dict(os.environ, {U.CACHE_ENV: str(cache)}), \
        mock.patch.object(U, "_pip_download", fake_download):
      os.environ.pop(U.SDIST_ENV, None)
      got = U.get_sdist(pin)
      self.assertLen(downloads, 1)   # the corrupt entry was not used ...
      self.assertEqual(got, cache / pin.sdist_name)
      self.assertEqual(U.sha256_of(got), pin.sha256)   # ... but replaced
      self.assertEqual(U.get_sdist(pin), got)
      self.assertLen(downloads, 1)   # and a good entry is used as it is


class WheelTest(ToolingTestCase):

  def test_two_builds_are_byte_identical(self):
    w1 = W.build_from_series(self.tmp / "a", PATCHES)
    w2 = W.build_from_series(self.tmp / "b", PATCHES)
    self.assertEqual(w1.name, w2.name)
    self.assertEqual(w1.read_bytes(), w2.read_bytes())
    self.assertRegex(w1.name, r"^jax-0\.4\.26\+fork\.\d+-py3-none-any\.whl$")

  def test_wheel_metadata_pins_jaxlib_and_installs_and_imports(self):
    whl = W.build_from_series(self.tmp / "w", PATCHES)
    version = whl.name.split("-")[1]
    with zipfile.ZipFile(whl) as zf:
      meta = zf.read(f"jax-{version}.dist-info/METADATA").decode()
      self.assertIsNone(zf.testzip())
      names = zf.namelist()
    self.assertIn("Requires-Dist: jaxlib==0.4.26\n", meta)
    self.assertIn(f"Version: {version}\n", meta)
    self.assertIn("Requires-Dist: numpy>=1.23.2,<2\n", meta)
    self.assertIn("jax/_src/core.py", names)
    self.assertIn("jax/py.typed", names)
    # The jaxpr_html dump page's assets (inlined into each dump).
    for asset in ("page.html", "page.css", "page.js"):
      self.assertIn(f"jax/_src/jaxpr_dump_assets/{asset}", names)
    target = self.tmp / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps",
                        "--target", str(target), str(whl)],
                       capture_output=True, text=True)
    self.assertEqual(r.returncode, 0, r.stderr)
    r = subprocess.run(
        [sys.executable, "-c", "import jax, jax.numpy as jnp; "
         "print(jax.__version__, jax.__file__, float(jnp.arange(4.).sum()))"],
        capture_output=True, text=True, cwd=self.tmp,
        env=dict(os.environ, PYTHONPATH=str(target)))
    self.assertEqual(r.returncode, 0, r.stderr)
    got_version, got_file, total = r.stdout.split()
    self.assertEqual(got_version, version)
    self.assertStartsWith(got_file, str(target))
    self.assertEqual(total, "6.0")


class InstalledForkTest(ToolingTestCase):

  def test_installed_jax_is_the_patched_one(self):
    import jax
    pin = U.load_pin()
    pristine = U.extract(U.get_sdist(pin), pin, self.tmp / "pristine")
    patched = W.patched_tree(self.tmp / "patched", PATCHES)
    self.assertEqual(jax.__version__, W.fork_version(patched))
    self.assertEqual(jax.__version_info__, (0, 4, 26))
    installed = Path(jax.__file__).resolve().parent
    # Files of the installed package that differ from upstream's ...
    differing = set()
    inst_files = {p.relative_to(installed).as_posix()
                  for p in installed.rglob("*") if p.is_file()
                  and "__pycache__" not in p.parts}
    up_files = {p.relative_to(pristine / "jax").as_posix()
                for p in (pristine / "jax").rglob("*") if p.is_file()}
    for rel in inst_files | up_files:
      a, b = installed / rel, pristine / "jax" / rel
      if not (a.exists() and b.exists()) or a.read_bytes() != b.read_bytes():
        differing.add("jax/" + rel)
    # ... are exactly those the series touches, with the series' content.
    touched = set()
    for name in P.read_series(PATCHES):
      touched |= {p for p in P.read_patch(PATCHES / name).touched_paths()
                  if p.startswith("jax/")}
    self.assertEqual(differing, touched)
    for rel in touched:
      self.assertEqual((installed / rel[4:]).read_bytes(),
                       (patched / rel).read_bytes(), rel)


class UpstreamTestRunnerTest(ToolingTestCase):

  def test_parse_summary(self):
    self.assertEqual(
        UT.parse_summary("...\n== 3 failed, 10 passed, 2 skipped in 1.0s ==\n"),
        {"passed": 10, "failed": 3, "skipped": 2, "error": 0})
    self.assertEqual(UT.parse_summary("7 passed, 1 error in 3.2s"),
                     {"passed": 7, "failed": 0, "skipped": 0, "error": 1})

  def test_runs_files_from_a_tag_of_a_bare_repo(self):
    work = self.tmp / "work"
    (work / "tests").mkdir(parents=True)
    (work / "tests" / "tiny_test.py").write_text(
        "import os, jax\n"
        "def test_devices():\n"
        "  assert jax.device_count() == 8\n"
        "def test_cases():\n"
        "  assert os.environ['JAX_NUM_GENERATED_CASES'] == '3'\n"
        "def test_fails():\n"
        "  assert False\n")
    env = T.git_env()
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "t"],
                 ["tag", "jax-v0.4.26"]):
      subprocess.run(["git", "-C", str(work), *args], check=True, env=env)
    bare = self.tmp / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)],
                   check=True, env=env)
    r = run_cli("upstream-tests", "--jax-repo", str(bare), "--num-cases", "3",
                "tiny_test", "missing_test")
    self.assertIn("tiny_test: 2 passed, 1 failed, 0 skipped", r.stdout)
    self.assertIn("missing_test: no such file", r.stdout)
    self.assertNotEqual(r.returncode, 0)


if __name__ == "__main__":
  absltest.main()
