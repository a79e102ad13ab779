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

import ctypes
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from unittest import mock

from absl.testing import absltest

from forktool import backend as B
from forktool import fulltree as FT
from forktool import native as N
from forktool import patches as P
from forktool import tree as T
from forktool import upstream as U
from forktool import upstream_tests as UT
from forktool import wheel as W

REPO = Path(__file__).resolve().parents[1]

PATCHES = REPO / "patches"
FORK_PY = REPO / "build" / "fork.py"


def run_cli(*args: str, env: dict[str, str] | None = None):
  return subprocess.run([sys.executable, str(FORK_PY), *args],
                        capture_output=True, text=True, env=env)



def python_with_this_jax(path: Path, **env: str) -> str:
  """An interpreter wrapper that sees the jax this test runs with (installed,
  or a tree on PYTHONPATH, which the upstream test runner drops), after
  what the runner puts on PYTHONPATH (its pytest plugins)."""
  import jax
  site = Path(jax.__file__).resolve().parents[1]
  extra = "".join(f"{k}={v} " for k, v in env.items())
  path.write_text(f"#!/bin/sh\nPYTHONPATH=${{PYTHONPATH:+$PYTHONPATH:}}{site} "
                  f"{extra}"
                  f"exec {sys.executable} \"$@\"\n")
  path.chmod(0o755)
  return str(path)

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

  def test_superseded_in_must_name_a_release(self):
    d = self.copy_patches()
    p = self.first_patch(d)
    text = p.read_text()
    self.assertIn("\nOrigin: ", text)

    def with_field(value):
      p.write_text(text.replace("\nOrigin: ",
                                f"\nSuperseded-In: {value}\nOrigin: ", 1))

    for bad in ("0.4.28", "jax 0.4", "jax 0.4.28rc1", "jax latest",
                "jaxlib 0.4.28"):
      with_field(bad)
      problems = P.check_series(d)
      self.assertLen(problems, 1, problems)
      self.assertIn(f"{p.name}: Superseded-In must be 'jax X.Y.Z'",
                    problems[0])
      self.assertIn(repr(bad), problems[0])
    r = run_cli("check", "--patches", str(d))
    self.assertEqual(r.returncode, 1)
    self.assertIn(f"{p.name}: Superseded-In must be 'jax X.Y.Z'", r.stderr)
    with_field("jax 0.4.28")
    self.assertEqual(P.check_series(d), [])
    self.assertEqual(P.read_patch(p).superseded_in(), "0.4.28")
    self.assertIsNone(P.read_patch(PATCHES / P.read_series(PATCHES)[0]
                                   ).superseded_in())

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

  def test_commit_from_an_envelope_keeps_author_date_and_message(self):
    # Non-ASCII names and subjects travel as RFC 2047 words in the envelope.
    def repo(name):
      r = self.tmp / name
      r.mkdir()
      (r / "a.txt").write_text("a\n")
      T.init_repo(r)
      T.git(r, "add", "-A")
      T.git(r, "commit", "-q", "-m", "base")
      T.git(r, "tag", T.UPSTREAM_TAG)
      return r
    src = repo("src")
    (src / "a.txt").write_text("a\nb\n")
    env = T.git_env({"GIT_AUTHOR_NAME": "J\u00f6rg M\u00fcller",
                     "GIT_AUTHOR_EMAIL": "j@example.org",
                     "GIT_AUTHOR_DATE": "2026-11-30T12:34:56+01:00"})
    message = ("\u00dcn\u00efcode: a subject long enough that format-patch "
               "folds its header over lines\n\nWhy, in a body\n"
               "of two paragraphs.\n\nOrigin: jax-fork\n")
    T.git(src, "commit", "-q", "-a", "--cleanup=verbatim", "-F", "-",
          env=env, input=message.encode())
    out = self.tmp / "patches"
    name, = T.export(src, out)
    self.assertIn("=?UTF-8?", (out / name).read_text())
    dst = repo("dst")
    T.commit_series(dst, out, [name])
    fmt = "--format=%an%n%ae%n%aI%n%B"
    self.assertEqual(T.git(dst, "log", "-1", fmt).decode(),
                     T.git(src, "log", "-1", fmt).decode())
    self.assertEqual(T.git(dst, "notes", "show", "HEAD").decode().strip(),
                     name)

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

  def test_a_deleted_patchs_number_is_never_given_again(self):
    # patches/ in a repository that once committed the number after the
    # series' highest, since deleted.
    gone = max(int(n[:4]) for n in P.read_series(PATCHES)) + 1
    out = self.copy_patches()
    T.git(self.tmp, "init", "-q")
    (out / f"{gone:04d}-gone.patch").write_bytes(b"")
    T.git(self.tmp, "add", "-A")
    T.git(self.tmp, "commit", "-qm", f"with {gone:04d}")
    T.git(self.tmp, "rm", "-q", str(out / f"{gone:04d}-gone.patch"))
    T.git(self.tmp, "commit", "-qm", f"without {gone:04d}")
    self.assertIn(gone, T.committed_numbers(out))
    tree = self.tmp / "tree"
    T.materialize(tree, PATCHES)
    (tree / "jax" / "fork_probe.py").write_text("X = 1\n")
    T.git(tree, "add", "-A")
    T.git(tree, "commit", "-q", "-m",
          "probe: add a file\n\nWhy.\n\nOrigin: jax-fork\nForwarded: "
          "not-needed\nLast-Update: 2026-11-30\n")
    self.assertEqual(T.export(tree, out)[-1],
                     f"{gone + 1:04d}-probe-add-a-file.patch")

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


  def test_materialize_reports_how_many_patches_it_applied(self):
    names = P.read_series(PATCHES)
    r = run_cli("materialize", "--dir", str(self.tmp / "all"))
    self.assertEqual(r.returncode, 0, r.stderr)
    self.assertIn(f"{len(names)} of {len(names)} patches applied", r.stdout)
    r = run_cli("materialize", "--dir", str(self.tmp / "some"), "--upto",
                names[1])
    self.assertEqual(r.returncode, 0, r.stderr)
    self.assertIn(f"2 of {len(names)} patches applied", r.stdout)
    self.assertEqual(T.applied_patches(self.tmp / "some"), 2)

  def test_export_after_upto_keeps_the_patches_not_materialized(self):
    names = P.read_series(PATCHES)
    upto = names[4]
    tree = self.tmp / "tree"
    r = run_cli("materialize", "--dir", str(tree), "--upto", upto)
    self.assertEqual(r.returncode, 0, r.stderr)
    out = self.copy_patches()
    r = run_cli("export", "--dir", str(tree), "--patches", str(out))
    self.assertEqual(r.returncode, 0, r.stderr)
    self.assertIn(f"kept {len(names) - 5} patch(es)", r.stderr)
    self.assertEqual(P.read_series(out), names)
    self.assertEqual(sorted(os.listdir(out)), sorted(os.listdir(PATCHES)))
    for name in names + ["series"]:
      self.assertEqual((PATCHES / name).read_bytes(), (out / name).read_bytes(),
                       name)
    # A new commit on the partial tree goes after the materialized patches,
    # numbered past every existing one; the rest follow, unchanged.
    (tree / "jax" / "fork_probe.py").write_text("X = 1\n")
    T.git(tree, "add", "-A")
    T.git(tree, "commit", "-q", "-m",
          "probe: add a file\n\nWhy.\n\nOrigin: jax-fork\nForwarded: "
          "not-needed\nLast-Update: 2026-12-01\n")
    new = T.export(tree, out)
    last = max(int(n[:4]) for n in names)
    self.assertEqual(new, names[:5] + [f"{last + 1:04d}-probe-add-a-file.patch"]
                     + names[5:])
    self.assertEqual(P.read_series(out), new)
    self.assertEqual(P.check_series(out), [])
    for name in names[5:]:
      self.assertEqual((PATCHES / name).read_bytes(), (out / name).read_bytes())

  def test_export_after_upto_refuses_when_a_left_out_patch_is_gone(self):
    names = P.read_series(PATCHES)
    tree = self.tmp / "tree"
    T.materialize(tree, PATCHES, upto=names[0])
    out = self.copy_patches()
    (out / names[-1]).unlink()
    before = (out / "series").read_bytes()
    with self.assertRaisesRegex(T.TreeError, f"--upto.*{names[-1]}.*refusing"):
      T.export(tree, out)
    self.assertEqual((out / "series").read_bytes(), before)
    self.assertTrue((out / names[1]).exists())


class UpstreamPinTest(ToolingTestCase):

  def test_pin_is_the_sdist_the_registry_serves(self):
    # Fetched with pip (as a cold build does) but bypassing our own
    # verification, so a wrong pin in fork.toml fails here, naming the hash.
    pin = U.load_pin()
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
         "--no-binary", ":all:", "--no-build-isolation", "--no-cache-dir",
         f"{pin.name}=={pin.version}", "-d", str(self.tmp)],
        capture_output=True, text=True, env=U.child_pip_env())
    got = self.tmp / pin.sdist_name
    if not got.exists():   # --no-build-isolation needs setuptools; retry
      proc = subprocess.run(
          [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
           "--no-binary", ":all:", f"{pin.name}=={pin.version}", "-d",
           str(self.tmp)], capture_output=True, text=True,
          env=U.child_pip_env())
    self.assertTrue(got.exists(), proc.stderr)
    self.assertEqual(U.sha256_of(got), pin.sha256)
    self.assertIn(f"Version: {pin.version}\n", U.read_pkg_info(got, pin))

  def test_child_pip_runs_outside_the_enclosing_build(self):
    env = U.child_pip_env({
        "_PYPROJECT_HOOKS_BACKEND_PATH": "/checkout/build",
        "_PYPROJECT_HOOKS_BUILD_BACKEND": "forktool.backend",
        "PEP517_BUILD_BACKEND": "forktool.backend",
        "PIP_BUILD_TRACKER": "/build/pip-build-tracker-x",
        "PYTHONPATH": "/build/pip-build-env-x/site",
        "PYTHONNOUSERSITE": "1", "HOME": "/users/u", "PIP_INDEX_URL": "idx"})
    self.assertEqual(set(env) - {"PYTHONPATH"}, {"HOME", "PIP_INDEX_URL"})
    import pip  # noqa: F401  (the child's PYTHONPATH is pip's own folder)
    self.assertEqual(Path(env["PYTHONPATH"]),
                     Path(pip.__file__).resolve().parent.parent)

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
    # With the PJRT adapter's native half (a C compiler is here: CI has
    # one), which needs nothing newer than manylinux2014's glibc 2.17.
    arch = platform.machine()
    self.assertRegex(w1.name, r"^jax-0\.4\.26\+fork\d+-py3-none-"
                     rf"manylinux_2_17_{arch}\.manylinux2014_{arch}\.whl$")

  def test_wheel_metadata_pins_jaxlib_and_installs_and_imports(self):
    whl = W.build_from_series(self.tmp / "w", PATCHES)
    version = whl.name.split("-")[1]
    with zipfile.ZipFile(whl) as zf:
      meta = zf.read(f"jax-{version}.dist-info/METADATA").decode()
      self.assertIsNone(zf.testzip())
      names = zf.namelist()
    self.assertIn("Requires-Dist: jaxlib==0.4.26\n", meta)
    self.assertIn(f"Version: {version}\n", meta)
    # Upstream's requirements and extras (compared field by field with
    # upstream's own wheel in install_test.py).
    self.assertIn('Requires-Dist: jax-cuda12-plugin==0.4.26; extra == "cuda12"'
                  '\n', meta)
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


class NativeHalfTest(ToolingTestCase):
  """The PJRT adapter's native half in the wheel (forktool/native.py)."""

  def build(self, name: str, **env: str) -> tuple[Path, str]:
    """A wheel by `fork.py wheel` with `env`; its path and the CLI's stderr."""
    r = run_cli("wheel", "--out", str(self.tmp / name),
                env={**os.environ, **env})
    self.assertEqual(r.returncode, 0, r.stderr)
    (whl,) = (self.tmp / name).glob("*.whl")
    return whl, r.stderr

  def test_wheel_carries_the_native_half_named_for_its_c_source(self):
    whl, log = self.build("w")
    with zipfile.ZipFile(whl) as zf:
      source = zf.read(N.SOURCE)
      name = ("jax/_src/pjrt_adapter-"
              f"{hashlib.sha256(source).hexdigest()[:16]}.so")
      library = zf.read(name)
      info = zf.read(next(n for n in zf.namelist()
                          if n.endswith(".dist-info/WHEEL"))).decode()
      record = zf.read(next(n for n in zf.namelist()
                            if n.endswith(".dist-info/RECORD"))).decode()
    self.assertIn(f"jax-fork: built the PJRT adapter's native half {name}",
                  log)
    self.assertIn(f"\n{name},sha256=", "\n" + record)
    arch = platform.machine()
    self.assertIn("Root-Is-Purelib: false\n", info)
    self.assertIn(f"Tag: py3-none-manylinux_2_17_{arch}\n"
                  f"Tag: py3-none-manylinux2014_{arch}\n", info)
    so = self.tmp / name.rsplit("/", 1)[1]
    so.write_bytes(library)
    # What the manylinux tag claims, read by binutils rather than by us.
    if shutil.which("objdump") is None:
      self.fail("no objdump (binutils comes with the C compiler)")
    dump = subprocess.run(["objdump", "-p", "-T", str(so)], check=True,
                          capture_output=True, text=True).stdout
    versions = {tuple(map(int, v.split(".")))
                for v in re.findall(r"GLIBC_([0-9.]+)", dump)}
    self.assertTrue(versions)
    self.assertLessEqual(max(versions), (2, 17))
    self.assertEqual({n for n in re.findall(r"NEEDED\s+(\S+)", dump)
                      if not n.startswith("ld-")}, {"libc.so.6"})  # any Python
    # Reproducible: no build folder in the library.
    self.assertNotIn(tempfile.gettempdir().encode(), library)
    lib = ctypes.CDLL(str(so))
    self.assertTrue(hasattr(lib, "jax_pjrt_adapter_new"))

  def test_without_a_working_compiler_the_wheel_is_pure_and_says_so(self):
    cases = {
        "missing": ({"CC": str(self.tmp / "no-such-cc")},
                    f"$CC names '{self.tmp / 'no-such-cc'}', which is not "
                    "found"),
        "failing": ({"CC": "false"}, "$CC (false) failed to compile "
                    "jax/_src/pjrt_adapter.c"),
    }
    for case, (env, why) in cases.items():
      with self.subTest(case):
        whl, log = self.build(case, **env)
        self.assertRegex(whl.name, r"-py3-none-any\.whl$")
        self.assertIn(f"jax-fork: {why}", log)
        self.assertIn("the wheel does not carry the PJRT adapter's native "
                      "half (jax/_src/pjrt_adapter-", log)
        with zipfile.ZipFile(whl) as zf:
          self.assertEqual([n for n in zf.namelist() if n.endswith(".so")],
                           [])
          self.assertIn("Root-Is-Purelib: true\nTag: py3-none-any\n",
                        zf.read(next(n for n in zf.namelist()
                                     if n.endswith("WHEEL"))).decode())

  def test_no_cc_on_path_and_no_cc_variable_is_no_compiler(self):
    empty = self.tmp / "bin"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CC"}
    with mock.patch.dict(os.environ, {**env, "PATH": str(empty)}, clear=True):
      self.assertEqual(N.find_compiler()[0], None)
      (empty / "cc").symlink_to(shutil.which("cc", path=os.defpath) or
                                "/usr/bin/cc")
      self.assertEqual(N.find_compiler()[0], [str(empty / "cc")])
    with mock.patch.dict(os.environ, {"CC": "cc  -O1"}):   # as a shell splits
      self.assertEqual(N.find_compiler()[0], ["cc", "-O1"])

  def stub_libm(self, version: str) -> Path:
    """A library that needs `stub` at `version` from a library named as
    manylinux's libm.so.6 (a stub built here): what a glibc newer than the
    policy's gives a library built against it."""
    d = self.tmp / version
    d.mkdir()
    (d / "stub.c").write_text("int stub(void) { return 1; }\n")
    (d / "v.map").write_text(f"{version} {{ global: stub; local: *; }};\n")
    (d / "user.c").write_text("int stub(void);\n"
                              "int user(void) { return stub(); }\n")
    cc = N.find_compiler()[0]
    subprocess.run([*cc, "-shared", "-fPIC", "-o", "libm.so.6", "stub.c",
                    "-Wl,-soname,libm.so.6", "-Wl,--version-script=v.map"],
                   cwd=d, check=True)
    subprocess.run([*cc, "-shared", "-fPIC", "-o", "user.so", "user.c",
                    "-L.", "-l:libm.so.6"], cwd=d, check=True)
    return d / "user.so"

  def test_manylinux_only_where_the_library_needs_glibc_2_17_at_most(self):
    arch = platform.machine()
    ok = self.stub_libm("GLIBC_2.17").read_bytes()
    info = N.read_elf(ok)
    self.assertIn(("libm.so.6", "GLIBC_2.17"), info.versions)
    self.assertIn("libm.so.6", info.needed)
    self.assertEqual(N.platform_tags(ok),
                     (f"manylinux_2_17_{arch}", f"manylinux2014_{arch}"))
    self.assertEqual(
        N.platform_tags(self.stub_libm("GLIBC_2.18").read_bytes()),
        (f"linux_{arch}",))
    self.assertEqual(
        N.platform_tags(self.stub_libm("FOO_1.0").read_bytes()),
        (f"linux_{arch}",))

  def test_a_library_outside_the_policy_gets_the_plain_tag(self):
    arch = platform.machine()
    d = self.tmp / "lib"
    d.mkdir()
    (d / "foo.c").write_text("int foo(void) { return 1; }\n")
    (d / "user.c").write_text("int foo(void);\n"
                              "int user(void) { return foo(); }\n")
    cc = N.find_compiler()[0]
    subprocess.run([*cc, "-shared", "-fPIC", "-o", "libfoo.so", "foo.c",
                    "-Wl,-soname,libfoo.so"], cwd=d, check=True)
    subprocess.run([*cc, "-shared", "-fPIC", "-o", "user.so", "user.c",
                    "-L.", "-lfoo"], cwd=d, check=True)
    self.assertIn("libfoo.so", N.read_elf((d / "user.so").read_bytes()).needed)
    self.assertEqual(N.platform_tags((d / "user.so").read_bytes()),
                     (f"linux_{arch}",))
    with self.assertRaisesRegex(ValueError, "not an ELF file"):
      N.read_elf(b"MZ\x90\x00")


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
    # The PJRT adapter's native half, built from the series' C source, is
    # in the package where the wheel carries one (forktool/native.py).
    inst_files.discard(N.library_path((patched / N.SOURCE).read_bytes())[4:])
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

  def test_deselect_prefixes_of_a_parameterized_test(self):
    self.assertEqual(UT.deselect_prefixes("t.py::C::test_x"), ["t.py::C::test_x"])
    prefixes = tuple(UT.deselect_prefixes("t.py::C::testUnique*"))
    self.assertLen(prefixes, 10)
    for case in ["testUnique0", "testUnique7", "testUnique10", "testUnique123"]:
      self.assertTrue(f"t.py::C::{case}".startswith(prefixes), case)
    for other in ["testUniqueSize0", "testUniqueAll3", "testUnique"]:
      self.assertFalse(f"t.py::C::{other}".startswith(prefixes), other)
    for test_id in UT.ASSERTS_FIXED_BUG:
      self.assertRegex(test_id, r"^[a-z_/]+_test\.py::\w+::\w+\*?$")

  def test_runs_files_from_a_tag_of_a_bare_repo(self):
    work = make_tests_repo(self.tmp / "work", tiny_test=(
        "import os, jax\n"
        "def test_devices():\n"
        "  assert jax.device_count() == 8\n"
        "def test_cases():\n"
        "  assert os.environ['JAX_NUM_GENERATED_CASES'] == '3'\n"
        "def test_fails():\n"
        "  assert False\n"))
    bare = self.tmp / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)],
                   check=True, env=T.git_env())
    r = run_cli("upstream-tests", "--jax-repo", str(bare), "--num-cases", "3",
                "--python", python_with_this_jax(self.tmp / "py"),
                "--log-dir", str(self.tmp), "tiny_test", "missing_test")
    self.assertIn("tiny_test: 2 passed, 1 failed, 0 skipped", r.stdout)
    self.assertIn("missing_test: no such file", r.stdout)
    self.assertNotEqual(r.returncode, 0)

  def test_extracts_tests_from_a_clone_and_a_linked_worktree(self):
    work = make_tests_repo(self.tmp / "work",
                      tiny_test="def test_ok():\n  pass\n")
    linked = self.tmp / "linked"
    T.git(work, "worktree", "add", "-q", "--detach", str(linked),
          "jax-v0.4.26")
    self.assertTrue((linked / ".git").is_file())
    self.assertEqual(T.find_git_dir(work), (work / ".git").resolve())
    self.assertEqual(T.find_git_dir(linked),
                     (work / ".git" / "worktrees" / "linked").resolve())
    for repo in (work, linked):
      dest = self.tmp / f"out-{repo.name}"
      dest.mkdir()
      got = UT.extract_tests(repo, "jax-v0.4.26", dest)
      self.assertEqual((got / "tiny_test.py").read_text(),
                       "def test_ok():\n  pass\n")


def commit_and_tag(work: Path, tag: str) -> None:
  """Makes `work` a git repository whose one commit (all files) is `tag`."""
  env = T.git_env()
  for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "t"],
               ["tag", tag]):
    subprocess.run(["git", "-C", str(work), *args], check=True, env=env)


def make_tests_repo(work: Path, tag: str = "jax-v0.4.26", **files: str) -> Path:
  """A repository whose commit `tag` holds tests/NAME.py for each file."""
  (work / "tests").mkdir(parents=True)
  for name, text in files.items():
    (work / "tests" / f"{name}.py").write_text(text)
  commit_and_tag(work, tag)
  return work


def make_upstream_repo(root: Path, tag: str = "jax-v0.4.26",
                       missing: str = "images/big.gif") -> Path:
  """A small bare repository laid out like jax-ml/jax at a release tag.

  Upstream's own top-level packaging files (setup.py, pyproject.toml, README,
  LICENSE, AUTHORS) come from the pinned sdist, where they are the tag's. The
  blob of `missing` is deleted from the object store, as in some real clones.
  """
  pin = U.load_pin()
  sdist = U.extract(U.get_sdist(pin), pin, root / "sdist")
  work = root / "work"
  files = {
      ".bazelrc": "build --config=short_logs\n",
      ".bazelversion": "6.1.2\n",
      "WORKSPACE": 'workspace(name = "jax")\n',
      "CHANGELOG.md": ("# Change log\n\nBest viewed elsewhere.\n\n"
                       "## jax 0.4.26\n\n* Changes\n  * upstream's entry\n"),
      "build/build.py": "print('upstream build script')\n",
      "jaxlib/BUILD": "# jaxlib targets\n",
      "jaxlib/setup.py": "# jaxlib's own setup\n",
      "third_party/xla/workspace.bzl": 'XLA_COMMIT = "0123abcd"\n',
      "tests/tiny_test.py": "def test_ok():\n  assert True\n",
      "jax/BUILD": "# only in the tag, not in the sdist\n",
      # The tag's version.py differs from the sdist's stamped one.
      "jax/version.py": "_release_version = None\n",
      ".gitignore": "*.so\n",
      "jaxlib/prebuilt.so": "tracked although ignored\n",
      missing: "GIF89a not really\n",
  }
  for rel, text in files.items():
    (work / rel).parent.mkdir(parents=True, exist_ok=True)
    (work / rel).write_text(text)
  for rel in ("setup.py", "pyproject.toml", "README.md", "LICENSE", "AUTHORS"):
    shutil.copy(sdist / rel, work / rel)
  bare = root / "jax.git"
  env = T.git_env()
  g = ["git", f"--git-dir={bare}", f"--work-tree={work}"]
  subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True,
                 env=env)
  for args in (["add", "-A", "-f"], ["commit", "-qm", "Release"],
               ["tag", tag]):
    subprocess.run(g + args, check=True, env=env)
  sha = subprocess.run(g + ["rev-parse", f"{tag}:{missing}"], check=True,
                       env=env, capture_output=True, text=True).stdout.strip()
  (bare / "objects" / sha[:2] / sha[2:]).unlink()
  return bare


class FullTreeTest(ToolingTestCase):
  """`build/fork.py tree` on a synthetic upstream repository (no network)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = Path(tempfile.mkdtemp(prefix="forktool-fulltree-"))
    cls.repo = make_upstream_repo(cls.root)
    cls.out = cls.root / "tree"
    cls.result = run_cli("tree", "--jax-repo", str(cls.repo), "--dir",
                         str(cls.out))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def test_layout_is_upstreams_with_the_missing_blob_left_out(self):
    r = self.result
    self.assertEqual(r.returncode, 0, r.stderr)
    self.assertIn("left out (blob missing from the clone): images/big.gif",
                  r.stdout)
    for rel in (".bazelrc", ".bazelversion", "WORKSPACE", "setup.py",
                "pyproject.toml", "CHANGELOG.md", "build/build.py",
                "jaxlib/BUILD", "third_party/xla/workspace.bzl",
                "tests/tiny_test.py", "jax/BUILD", "jax/_src/core.py"):
      self.assertTrue((self.out / rel).is_file(), rel)
    self.assertFalse((self.out / "images" / "big.gif").exists())
    # The tag commit holds the tag's entries (modes, blobs) but the missing.
    ours = T.git(self.out, "ls-tree", "-r", "jax-v0.4.26").decode()
    theirs = subprocess.run(
        ["git", f"--git-dir={self.repo}", "ls-tree", "-r", "jax-v0.4.26"],
        capture_output=True, text=True, check=True).stdout
    self.assertEqual(ours.splitlines(), [l for l in theirs.splitlines()
                                         if not l.endswith("\timages/big.gif")])
    self.assertEqual((self.out / ".bazelversion").read_text(), "6.1.2\n")
    self.assertEqual(T.git(self.out, "status", "--porcelain"), b"")

  def test_jax_is_the_patched_sdist_and_tag_only_files_stay(self):
    patched = W.patched_tree(self.tmp / "patched", PATCHES)
    want = {p.relative_to(patched).as_posix(): p.read_bytes()
            for p in (patched / "jax").rglob("*") if p.is_file()}
    got = {p.relative_to(self.out).as_posix(): p.read_bytes()
           for p in (self.out / "jax").rglob("*") if p.is_file()}
    self.assertEqual(set(got) - set(want), {"jax/BUILD"})
    for rel, data in want.items():
      self.assertEqual(got[rel], data, rel)
    self.assertIn("from sdist: jax/version.py", self.result.stdout)

  def test_history_is_tag_sdist_changelog_then_one_commit_per_patch(self):
    names = P.read_series(PATCHES)
    log = T.git(self.out, "log", "--reverse", "--format=%H %s").decode(
        ).splitlines()
    subjects = [line.split(" ", 1)[1] for line in log]
    tag_commit = FT.resolve_tag(self.repo, "jax-v0.4.26")
    self.assertEqual(subjects[0], f"Upstream jax-v0.4.26 ({tag_commit})")
    self.assertStartsWith(subjects[1], "jax/: files from the pinned sdist")
    self.assertStartsWith(subjects[2], "CHANGELOG.md:")
    self.assertEqual(subjects[3:], [P.read_patch(PATCHES / n).subject
                                    for n in names])
    self.assertEqual(T.git(self.out, "rev-parse", "jax-v0.4.26").decode(),
                     log[0].split()[0] + "\n")
    self.assertEqual(T.git(self.out, "rev-parse", "upstream").decode(),
                     log[2].split()[0] + "\n")
    self.assertEqual(T.applied_patches(self.out), len(names))
    # The tree is a development tree too: export writes the same series.
    out = self.copy_patches()
    self.assertEqual(T.export(self.out, out), names)
    for name in names + ["series"]:
      self.assertEqual((PATCHES / name).read_bytes(), (out / name).read_bytes())

  def test_changelog_has_the_fork_sections_on_top_of_upstreams(self):
    text = (self.out / "CHANGELOG.md").read_text()
    self.assertStartsWith(text, "# Change log\n\nBest viewed elsewhere.\n")
    fork = (REPO / "CHANGELOG.md").read_text()
    first_fork = next(l for l in fork.splitlines() if l.startswith("## "))
    self.assertIn(first_fork + "\n", text)
    self.assertLess(text.index(first_fork), text.index("## jax 0.4.26\n"))
    self.assertTrue(text.endswith("* Changes\n  * upstream's entry\n"))

  def test_pip_wheel_of_the_tree_has_the_files_of_our_wheel(self):
    # Upstream's setup.py packages the adapter's C source, not its native
    # half: the tree's wheel is ours where no C compiler is (pure Python).
    with mock.patch.dict(os.environ, {"CC": str(self.tmp / "no-cc")}):
      ours = W.build_from_series(self.tmp / "ours", PATCHES)
    work = self.tmp / "tree"
    shutil.copytree(self.out, work, symlinks=True)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                        "-q", "-w", str(self.tmp / "theirs"), "."],
                       cwd=work, capture_output=True, text=True)
    if r.returncode != 0 and "setuptools" in r.stdout + r.stderr:
      self.skipTest(f"no setuptools to build with: {r.stderr[-300:]}")
    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
    (theirs,) = (self.tmp / "theirs").glob("*.whl")
    self.assertEqual(theirs.name, ours.name)
    def names(zf: zipfile.ZipFile) -> list[str]:
      # Setuptools releases disagree on where license files go in .dist-info
      # (upstream's 0.4.26 wheel and ours: next to METADATA; newer setuptools:
      # licenses/); the files are the same.
      return sorted(n.replace(".dist-info/licenses/", ".dist-info/")
                    for n in zf.namelist())
    with zipfile.ZipFile(ours) as a, zipfile.ZipFile(theirs) as b:
      self.assertEqual(names(a), names(b))
      for n in a.namelist():
        if n.startswith("jax/"):
          self.assertEqual(a.read(n), b.read(n), n)

  def test_missing_blob_the_build_needs_is_an_error(self):
    repo = make_upstream_repo(self.tmp / "r", missing="jaxlib/gone.py")
    dest = self.tmp / "t"
    r = run_cli("tree", "--jax-repo", str(repo), "--dir", str(dest))
    self.assertEqual(r.returncode, 2)
    self.assertIn("jaxlib/gone.py", r.stderr)
    self.assertFalse(dest.exists())
    self.assertEqual([x for x in os.listdir(self.tmp) if ".tmp-" in x], [])

  def test_check_installed_names_every_file_not_the_trees(self):
    site = self.tmp / "site"
    shutil.copytree(self.out / "jax", site / "jax",
                    ignore=shutil.ignore_patterns("BUILD"))
    py = self.tmp / "py"
    py.write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "
                  "\"$@\"\n")
    py.chmod(0o755)
    self.assertEqual(FT.differing_from_installed(self.out, PATCHES, str(py)),
                     [])
    # The native half of the tree's C source (our wheel's) is the tree's;
    # one of another source is not.
    native = N.library_path((self.out / N.SOURCE).read_bytes())
    (site / native).write_bytes(b"\x7fELF")
    self.assertEqual(FT.differing_from_installed(self.out, PATCHES, str(py)),
                     [])
    (site / native).rename(site / N.library_path(b"older source"))
    self.assertEqual(FT.differing_from_installed(self.out, PATCHES, str(py)),
                     [N.library_path(b"older source")])
    (site / N.library_path(b"older source")).unlink()
    # A file that `import jax` does not import, which the series patches.
    patched = next(path for name in P.read_series(PATCHES)
                   for path in P.read_patch(PATCHES / name).touched_paths()
                   if path.startswith("jax/_src/pallas/"))
    with open(site / patched, "a") as f:
      f.write("# edited\n")
    (site / "jax" / "extra.py").write_text("")
    self.assertEqual(FT.differing_from_installed(self.out, PATCHES, str(py)),
                     sorted([patched, "jax/extra.py"]))
    (site / patched).unlink()
    self.assertEqual(FT.differing_from_installed(self.out, PATCHES, str(py)),
                     ["jax/extra.py", patched])

  def test_unknown_tag_is_named(self):
    r = run_cli("tree", "--jax-repo", str(self.repo), "--tag", "jax-v9.9.9",
                "--dir", str(self.tmp / "t"))
    self.assertEqual(r.returncode, 2)
    self.assertIn("no tag 'jax-v9.9.9'", r.stderr)


class UpstreamCompareTest(ToolingTestCase):

  def fork_and_upstream(self) -> dict[str, str]:
    # The jax this test runs with stands in for both installs, told apart by
    # $FAKE_KIND.
    return {kind: python_with_this_jax(self.tmp / f"python-{kind}",
                                       FAKE_KIND=kind)
            for kind in ("fork", "upstream")}

  def test_sets_expand_in_order_without_duplicates(self):
    self.assertEqual(UT.selected_tests(["lax_test", "extra_test.py"],
                                       ["ci", "core"]),
                     ["lax_test", "shard_map_test", "checkify_test",
                      "lax_numpy_indexing_test", "lax_autodiff_test",
                      "lax_numpy_test", "core_test", "api_test", "pjit_test",
                      "extra_test"])
    self.assertLen(UT.SETS["wide"], 34)

  def test_compare_reports_only_failures_new_on_the_fork(self):
    pythons = self.fork_and_upstream()
    work = make_tests_repo(self.tmp / "work", "jax-v0.4.28", tiny_test=(
        "import os\n"
        "def test_new_on_fork():\n"
        "  assert os.environ['FAKE_KIND'] == 'upstream'\n"
        "def test_fails_on_both():\n"
        "  assert False\n"
        "def test_fails_only_upstream():\n"
        "  assert os.environ['FAKE_KIND'] == 'fork'\n"
        "def test_passes():\n"
        "  pass\n"
        "def test_other():\n"
        "  assert os.environ['FAKE_KIND'] == 'upstream'\n"))
    r = run_cli("upstream-tests", "--jax-repo", str(work), "--tag",
                "jax-v0.4.28", "--python", pythons["fork"], "--compare",
                pythons["upstream"], "-k", "not other", "--log-dir",
                str(self.tmp / "logs"), "tiny_test")
    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
    self.assertIn("tiny_test: fork 2 passed, 2 failed, 0 skipped, 0 errors | "
                  "upstream 2 passed, 2 failed, 0 skipped, 0 errors | "
                  "1 also fail on upstream | 1 new on the fork", r.stdout)
    new = [l.strip() for l in r.stdout.splitlines() if "new failure:" in l]
    self.assertEqual(new, ["new failure: tiny_test.py::test_new_on_fork"])
    self.assertIn("| `tiny_test` | 2 / 2 / 0 | 2 / 2 / 0 | 1 |", r.stdout)

  def test_recheck_reruns_only_the_forks_failures_on_upstream(self):
    pythons = self.fork_and_upstream()
    work = make_tests_repo(self.tmp / "work", tiny_test=(
        "import os, pathlib\n"
        "def setup_function(f):\n"   # which tests ran where
        "  with open(os.environ['RAN_LOG'], 'a') as log:\n"
        "    log.write(f\"{os.environ['FAKE_KIND']} {f.__name__}\\n\")\n"
        "def test_new_on_fork():\n"
        "  assert os.environ['FAKE_KIND'] == 'upstream'\n"
        "def test_fails_on_both():\n"
        "  assert False\n"
        "def test_fails_only_upstream():\n"
        "  assert os.environ['FAKE_KIND'] == 'fork'\n"
        "def test_passes():\n"
        "  pass\n"))
    ran = self.tmp / "ran.log"
    r = run_cli("upstream-tests", "--jax-repo", str(work), "--python",
                pythons["fork"], "--recheck", pythons["upstream"],
                "--log-dir", str(self.tmp / "logs"), "tiny_test",
                env=dict(os.environ, RAN_LOG=str(ran)))
    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
    self.assertIn("tiny_test: fork 2 passed, 2 failed, 0 skipped, 0 errors | "
                  "1 also fail on upstream | 1 new on the fork", r.stdout)
    new = [l.strip() for l in r.stdout.splitlines() if "new failure:" in l]
    self.assertEqual(new, ["new failure: tiny_test.py::test_new_on_fork"])
    self.assertEqual(sorted(l for l in ran.read_text().splitlines()
                            if l.startswith("upstream")),
                     ["upstream test_fails_on_both",
                      "upstream test_new_on_fork"])

  def test_pjrt_plugin_runs_the_fork_alone_on_it(self):
    # The fork's run sees the plugin as JAX's one backend, with --devices
    # devices; the recheck runs without it.
    work = make_tests_repo(self.tmp / "work", tiny_test=(
        "import json, os\n"
        "def test_on_the_plugin():\n"
        "  if 'PJRT_NAMES_AND_LIBRARY_PATHS' not in os.environ:\n"
        "    return  # the recheck: passes\n"
        "  name, path = os.environ['PJRT_NAMES_AND_LIBRARY_PATHS'].split(':')\n"
        "  assert (name, os.environ['JAX_PLATFORMS']) == ('plugin', 'plugin')\n"
        "  with open(path) as f:\n"
        "    assert json.load(f) == {'library_path': '/p/plugin.so',\n"
        "        'create_options': {'cpu_device_count': 4}}\n"
        "  assert False  # fails on the plugin alone\n"
        "def test_ok():\n"
        "  pass\n"))
    py = python_with_this_jax(self.tmp / "py")
    r = run_cli("upstream-tests", "--jax-repo", str(work), "--python", py,
                "--pjrt-plugin", "/p/plugin.so", "--devices", "4",
                "--recheck", py, "--log-dir", str(self.tmp / "logs"),
                "tiny_test")
    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
    self.assertIn("on PJRT plugin /p/plugin.so", r.stdout)
    self.assertIn("tiny_test: fork 1 passed, 1 failed", r.stdout)
    self.assertIn("0 also fail on upstream | 1 new on the fork", r.stdout)

  def test_the_recheck_interpreter_starts_only_for_a_failure(self):
    # .ci/upstream-suites makes upstream's venv when it is first started.
    work = make_tests_repo(self.tmp / "work", ok_test=(
        "import os\n"
        "def test_ok():\n"
        "  assert os.environ.get('FAIL') != '1'\n"))
    py = python_with_this_jax(self.tmp / "py")
    broken = self.tmp / "broken-python"
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: jax' >&2\n"
                      "exit 1\n")
    broken.chmod(0o755)
    for fail in ("0", "1"):
      r = run_cli("upstream-tests", "--jax-repo", str(work), "--python", py,
                  "--recheck", str(broken), "--log-dir",
                  str(self.tmp / "logs"), "ok_test",
                  env=dict(os.environ, FAIL=fail))
      self.assertEqual(r.returncode, int(fail), r.stdout + r.stderr)
      self.assertIn(f"failures rechecked with {broken}", r.stdout)
      self.assertEqual("cannot import jax" in r.stderr, fail == "1",
                       r.stderr)

  def test_a_file_that_ran_no_test_fails_the_run(self):
    work = make_tests_repo(self.tmp / "work", gated_test=(
        "import pytest\n"
        "@pytest.mark.skip(reason='Need TPU devices')\n"
        "def test_on_tpu():\n"
        "  pass\n"), ok_test="def test_ok():\n  pass\n")
    py = python_with_this_jax(self.tmp / "py")
    for args in ([], ["--recheck", py]):
      r = run_cli("upstream-tests", "--jax-repo", str(work), "--python", py,
                  *args, "--log-dir", str(self.tmp / "logs"), "gated_test",
                  "ok_test")
      self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
      self.assertIn("gated_test.py ran no test", r.stdout)
      self.assertNotIn("ok_test.py ran no test", r.stdout)
      r = run_cli("upstream-tests", "--jax-repo", str(work), "--python", py,
                  *args, "--log-dir", str(self.tmp / "logs"), "-k", "nothing",
                  "ok_test")
      self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
      self.assertIn("ok_test.py ran no test", r.stdout)

  def test_no_skips_fails_a_file_that_skipped_a_test(self):
    work = make_tests_repo(self.tmp / "work", some_test=(
        "import pytest\n"
        "def test_ok():\n  pass\n"
        "@pytest.mark.skip(reason='Need TPU devices')\n"
        "def test_on_tpu():\n  pass\n"))
    py = python_with_this_jax(self.tmp / "py")
    for args, rc in (([], 0), (["--no-skips"], 1)):
      r = run_cli("upstream-tests", "--jax-repo", str(work), "--python", py,
                  *args, "--log-dir", str(self.tmp / "logs"), "some_test")
      self.assertEqual(r.returncode, rc, r.stdout + r.stderr)
      self.assertEqual("some_test.py skipped 1 test(s) under --no-skips" in
                       r.stdout, bool(args), r.stdout)

  def test_jax_repo_is_a_bundle_or_the_environment_names_it(self):
    work = make_tests_repo(self.tmp / "work",
                      tiny_test="def test_ok():\n  pass\n")
    bundle = self.tmp / "jax.bundle"
    T.git(work, "bundle", "create", "-q", str(bundle), "--all")
    self.assertTrue(T.is_bundle(bundle))
    self.assertFalse(T.is_bundle(work))
    py = python_with_this_jax(self.tmp / "py")
    for args, env in ((["--jax-repo", str(bundle)], dict(os.environ)),
                      ([], dict(os.environ, **{T.JAX_REPO_ENV: str(bundle)}))):
      r = run_cli("upstream-tests", *args, "--python", py, "--log-dir",
                  str(self.tmp / "logs"), "tiny_test", env=env)
      self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
      self.assertIn("tiny_test: 1 passed, 0 failed", r.stdout)
    r = run_cli("upstream-tests", "--python", py, "tiny_test",
                env=dict(os.environ, **{T.JAX_REPO_ENV: ""}))
    self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
    self.assertIn("--jax-repo", r.stderr)
    r = run_cli("upstream-tests", "--jax-repo", str(self.tmp / "nowhere"),
                "--python", py, "tiny_test")
    self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
    self.assertIn("does not exist", r.stderr)


class UpstreamOnDeviceTest(ToolingTestCase):
  """The options of the check on a TPU machine (chipcheck/upstream_suites.sh):
  --export/--tests-dir, --recheck-on-cpu, --timeout/--budget, --summary,
  --keep-pythonpath, and --hypothesis-max-examples on any backend."""

  def make_repo(self, **files: str) -> Path:
    """A repository whose tag jax-v0.4.26 holds tests/PATH.py per file
    (PATH may name a folder: `pallas/x_test`, given as `pallas__x_test`)."""
    work = self.tmp / "work"
    for name, text in files.items():
      path = work / "tests" / (name.replace("__", "/") + ".py")
      path.parent.mkdir(parents=True, exist_ok=True)
      path.write_text(text)
    commit_and_tag(work, "jax-v0.4.26")
    return work

  def test_tpu_set_has_the_suites_of_issue_49_once_each(self):
    tpu = UT.SETS["tpu"]
    self.assertEqual(len(tpu), len(set(tpu)))
    for name in ("lax_test", "lax_autodiff_test", "lax_numpy_test",
                 "lax_numpy_indexing_test", "lax_control_flow_test",
                 "random_test", "api_test", "pjit_test", "shard_map_test",
                 "checkify_test", "python_callback_test",
                 "debugging_primitives_test", "pallas/pallas_call_tpu_test",
                 "pallas/splash_attention_kernel_test",
                 "pallas/paged_attention_kernel_test", "pallas/gmm_test",
                 "pallas/all_gather_test"):
      self.assertIn(name, tpu)
    # chipcheck/upstream_suites.sh gives the same files, in the same order,
    # their own time limits.
    script = (REPO / "chipcheck" / "upstream_suites.sh").read_text()
    listed = script.split("files=(\n", 1)[1].split(")", 1)[0].split()
    self.assertEqual(tuple(n.partition(":")[0] for n in listed), tpu)
    self.assertTrue(all(n.partition(":")[2].isdigit() for n in listed))

  def test_export_lays_out_files_that_run_without_the_sources(self):
    work = self.make_repo(
        tiny_test="def test_ok():\n  pass\n",
        other_test="def test_not_exported():\n  pass\n",
        pallas__conftest="",
        pallas__kernel_test="def test_kernel():\n  pass\n")
    # A configuration above the exported folder (as the project's own
    # pyproject.toml above .tpu/) must not apply to the run.
    (self.tmp / "pyproject.toml").write_text(
        "[tool.pytest.ini_options]\npython_functions = ['nothing_*']\n")
    out = self.tmp / "exported"
    r = run_cli("upstream-tests", "--jax-repo", str(work), "--export",
                str(out), "tiny_test", "pallas/kernel_test")
    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
    self.assertEqual(
        sorted(str(p.relative_to(out)) for p in out.rglob("*")
               if p.is_file()),
        ["TAG", "pytest.ini", "tests/pallas/conftest.py",
         "tests/pallas/kernel_test.py", "tests/tiny_test.py"])
    self.assertEqual((out / "TAG").read_text(), "jax-v0.4.26\n")
    r = run_cli("upstream-tests", "--jax-repo", str(work), "--export",
                str(self.tmp / "x"), "missing_test")
    self.assertNotEqual(r.returncode, 0)
    self.assertIn("tests/missing_test.py", r.stdout + r.stderr)
    py = python_with_this_jax(self.tmp / "py")
    r = run_cli("upstream-tests", "--tests-dir", str(out), "--python", py,
                "--log-dir", str(self.tmp / "logs"), "tiny_test",
                "pallas/kernel_test",
                env=dict(os.environ, **{T.JAX_REPO_ENV: ""}))
    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
    self.assertIn("upstream tests at jax-v0.4.26", r.stdout)
    self.assertIn("tiny_test: 1 passed, 0 failed", r.stdout)
    self.assertIn("pallas/kernel_test: 1 passed, 0 failed", r.stdout)

  def test_recheck_on_cpu_reruns_the_failures_on_the_cpu_backend(self):
    work = self.make_repo(dev_test=(
        "import os, pytest\n"
        "def setup_function(f):\n"   # which tests ran where
        "  with open(os.environ['RAN_LOG'], 'a') as log:\n"
        "    log.write(f\"{os.environ.get('JAX_PLATFORMS')} {f.__name__}\\n\")\n"
        "def on_cpu():\n"
        "  return os.environ.get('JAX_PLATFORMS') == 'cpu'\n"
        "def test_fails_off_cpu():\n"
        "  assert on_cpu()\n"
        "def test_fails_everywhere():\n"
        "  assert False\n"
        "def test_skipped_on_cpu():\n"
        "  if on_cpu():\n"
        "    pytest.skip('Only works on TPU')\n"
        "  assert False\n"
        "def test_passes():\n"
        "  pass\n"))
    ran = self.tmp / "ran.log"
    summary = self.tmp / "out" / "summary.txt"
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    env["RAN_LOG"] = str(ran)
    r = run_cli("upstream-tests", "--jax-repo", str(work), "--python",
                python_with_this_jax(self.tmp / "py"), "--recheck-on-cpu",
                "--summary", str(summary), "--log-dir", str(self.tmp / "logs"),
                "dev_test", env=env)
    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
    self.assertIn("dev_test: 1 passed, 3 failed, 0 skipped, 0 errors | "
                  "1 of its failures also fail on CPU", r.stdout)
    failures = [l.strip() for l in r.stdout.splitlines() if "failure:" in l]
    self.assertEqual(failures, [
        "failure: dev_test.py::test_fails_everywhere (fails on CPU too)",
        "failure: dev_test.py::test_fails_off_cpu (passes on CPU)",
        "failure: dev_test.py::test_skipped_on_cpu (skipped on CPU)"])
    self.assertEqual(sorted(l for l in ran.read_text().splitlines()
                            if l.startswith("cpu")),
                     ["cpu test_fails_everywhere", "cpu test_fails_off_cpu",
                      "cpu test_skipped_on_cpu"])
    self.assertEqual(summary.read_text(), r.stdout)
    r = run_cli("upstream-tests", "--jax-repo", str(work), "--recheck-on-cpu",
                "--recheck", sys.executable, "dev_test")
    self.assertNotEqual(r.returncode, 0)
    self.assertIn("exclude each other", r.stderr)

  def test_time_limits_and_budget_report_what_ran(self):
    work = self.make_repo(slow_test=(
        "import time\n"
        "def test_a():\n  pass\n"
        "def test_b():\n  assert False\n"
        "def test_c():\n  time.sleep(120)\n"
        "def test_d():\n  pass\n"), after_test="def test_ok():\n  pass\n")
    py = python_with_this_jax(self.tmp / "py")
    # A file's own limit (NAME:SECONDS) before --timeout; then the budget.
    for args, after in ((["--timeout", "60", "slow_test:6", "after_test"],
                         "after_test: 1 passed, 0 failed"),
                        (["--timeout", "60", "--budget", "12", "slow_test",
                          "after_test"],
                         "after_test: not run, the budget of 12 s is spent")):
      t0 = time.monotonic()
      r = run_cli("upstream-tests", "--jax-repo", str(work), "--python", py,
                  "--log-dir", str(self.tmp / "logs"), *args)
      self.assertLess(time.monotonic() - t0, 60)
      self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
      self.assertIn("slow_test: 1 passed, 1 failed, 0 skipped, 0 errors, cut "
                    "short with 2 of 4 run", r.stdout)
      self.assertIn("failure: slow_test.py::test_b", r.stdout)
      self.assertIn("slow_test.py cut short at its time limit", r.stdout)
      self.assertIn(after, r.stdout)

  def test_keep_pythonpath_keeps_it(self):
    import jax
    site = str(Path(jax.__file__).resolve().parents[1])
    marker = self.tmp / "marker"
    marker.mkdir()
    work = self.make_repo(path_test=(
        "import os, sys\n"
        "def test_path():\n"
        f"  assert {str(marker)!r} in sys.path\n"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([site, str(marker)]))
    for args, rc in (([], 1), (["--keep-pythonpath"], 0)):
      r = run_cli("upstream-tests", "--jax-repo", str(work), *args,
                  "--log-dir", str(self.tmp / "logs"), "path_test", env=env)
      self.assertEqual(r.returncode, rc, r.stdout + r.stderr)

  def test_hypothesis_max_examples_without_interpret_mode(self):
    work = self.make_repo(prop_test=(
        "import os\n"
        "import hypothesis as hp\n"
        "import hypothesis.strategies as hps\n"
        "@hp.settings(max_examples=30, database=None)\n"
        "@hp.given(hps.integers())\n"
        "def test_examples(i):\n"
        "  with open(os.environ['RAN_LOG'], 'a') as log:\n"
        "    log.write(f'{i}\\n')\n"))
    py = python_with_this_jax(self.tmp / "py")
    for args, most in (([], 30), (["--hypothesis-max-examples", "1"], 1)):
      ran = self.tmp / f"ran{len(args)}.log"
      r = run_cli("upstream-tests", "--jax-repo", str(work), "--python", py,
                  *args, "--log-dir", str(self.tmp / "logs"), "prop_test",
                  env=dict(os.environ, RAN_LOG=str(ran)))
      self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
      self.assertEqual(len(ran.read_text().splitlines()) <= 1, most == 1,
                       ran.read_text())


if __name__ == "__main__":
  absltest.main()
