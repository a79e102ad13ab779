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
"""Each `rebases/jax-VERSION/` folder is the series rebased onto VERSION.

It must be a well-formed series whose every patch names (`Rebased-From`) the
patch file it was rebased from, and it must apply strictly to that release's
sdist (fetched with pip, as `build/fork.py rebase` does); .ci/rebase-record
runs every patch's own tests on it.  Whether it is the rebase of *today's*
`patches/` is a report (`build/fork.py record-status`, printed by CI), not a
failure: a release refreshes the record (docs/rebasing.md).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from forktool import patches as P
from forktool import rebase as R

REPO = Path(__file__).resolve().parents[1]
RECORDS = sorted((REPO / "rebases").glob("jax-*"))


def _version(record: Path) -> str:
  return record.name.removeprefix("jax-")


def test_there_is_a_record():
  assert [r.name for r in RECORDS] == ["jax-0.4.30"]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_is_a_series_rebased_from_patch_files(record):
  assert P.check_series(record) == []
  for name in P.read_series(record):
    source = P.read_patch(record / name).rebased_from()
    assert source is not None, f"{record.name}/{name} has no Rebased-From"
    assert source[0] == name


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_applies_strictly_to_the_release(record):
  r = subprocess.run(
      [sys.executable, str(REPO / "build" / "fork.py"), "check", "--from",
       _version(record), "--patches", str(record)],
      capture_output=True, text=True)
  assert r.returncode == 0, r.stdout + r.stderr
  assert f"apply to jax {_version(record)} with no fuzz" in r.stdout


def test_record_lag_names_each_patch_behind(tmp_path):
  """record_lag on a record made current by construction, then edited."""
  patches = tmp_path / "patches"
  shutil.copytree(REPO / "patches", patches)
  record = tmp_path / "jax-9.9.9"
  record.mkdir()
  names = P.read_series(patches)
  for name in names:   # a "rebase" that changed nothing
    data = (patches / name).read_bytes()
    end = data.index(b"\n---\n")   # of the message
    (record / name).write_bytes(
        data[:end] + f"\nRebased-From: {name} blob {P.blob_id(data)}".encode() +
        data[end:])
  (record / "series").write_text("".join(n + "\n" for n in names))
  assert R.record_lag(record, patches) == []
  with open(patches / names[1], "ab") as f:   # an edit of patches/
    f.write(b"\n")
  (patches / "series").write_text("".join(n + "\n" for n in names[2:]) +
                                  "9999-new.patch\n")
  shutil.copy(patches / names[0], patches / "9999-new.patch")   # not superseded
  lag = R.record_lag(record, patches)
  assert lag == [
      f"{names[0]}: patches/{names[0]} is no longer in the series",
      f"{names[1]}: patches/{names[1]} is no longer in the series",
      "9999-new.patch: not in the record"], lag
  (patches / "series").write_text("".join(n + "\n" for n in names))
  (lag,) = R.record_lag(record, patches)
  assert lag.startswith(f"{names[1]}: patches/{names[1]} has changed since")
  r = subprocess.run(
      [sys.executable, str(REPO / "build" / "fork.py"), "record-status",
       "--patches", str(patches), str(record)], capture_output=True, text=True)
  assert (r.returncode, r.stdout.splitlines()[0]) == (
      0, "jax-9.9.9: 1 patch(es) behind patches/"), r.stdout + r.stderr
  r = subprocess.run(
      [sys.executable, str(REPO / "build" / "fork.py"), "record-status",
       "--strict", "--patches", str(patches), str(record)],
      capture_output=True, text=True)
  assert r.returncode == 1, r.stdout + r.stderr
