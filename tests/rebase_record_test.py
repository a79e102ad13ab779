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
"""Each `rebases/jax-VERSION/` folder is the rebase of today's `patches/`.

It must list exactly the series' patches that are not superseded on VERSION,
in the series' order; each must name (`Rebased-From`) the very bytes of the
patch file it was made from; and it must apply strictly to that release's
sdist (fetched with pip, as `build/fork.py rebase` does).  When a patch in
`patches/` changes, the first two fail until the rebase is redone
(docs/rebasing.md).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from forktool import patches as P
from forktool import rebase as R

REPO = Path(__file__).resolve().parents[1]

RECORDS = sorted((REPO / "rebases").glob("jax-*"))
REDO = ("redo `build/fork.py rebase --onto {v}` and resolve it with this "
        "folder as the guide (docs/rebasing.md)")


def _version(record: Path) -> str:
  return record.name.removeprefix("jax-")


def test_there_is_a_record():
  assert [r.name for r in RECORDS] == ["jax-0.4.30"]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_lists_the_series_less_what_is_superseded(record):
  v = _version(record)
  series = P.read_series(REPO / "patches")
  kept = [n for n in series if not R.superseded_on(
      P.read_patch(REPO / "patches" / n).superseded_in(), v)]
  assert P.read_series(record) == kept, REDO.format(v=v)
  assert P.check_series(record) == []


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_each_patch_names_the_current_patch_file(record):
  v = _version(record)
  for name in P.read_series(record):
    source = P.read_patch(record / name).rebased_from()
    assert source is not None, f"{record.name}/{name} has no Rebased-From"
    assert source[0] == name
    current = P.blob_id((REPO / "patches" / name).read_bytes())
    assert source[1] == current, (
        f"{record.name}/{name} was rebased from another version of "
        f"patches/{name} (blob {source[1]}, now {current}); " + REDO.format(v=v))


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_applies_strictly_to_the_release(record):
  r = subprocess.run(
      [sys.executable, str(REPO / "build" / "fork.py"), "check", "--from",
       _version(record), "--patches", str(record)],
      capture_output=True, text=True)
  assert r.returncode == 0, r.stdout + r.stderr
  assert f"apply to jax {_version(record)} with no fuzz" in r.stdout
