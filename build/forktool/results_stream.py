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
"""pytest plugin of `build/fork.py upstream-tests --timeout` and
`--hypothesis-max-examples` (without `--pallas-interpret`).

`-p forktool.results_stream` with $JAX_FORK_RESULTS_STREAM set appends each
test's outcome to that file as it is reported, one JSON object a line, so
that a run killed at its time limit leaves what it had done: `{"collected":
N}` once, then `{"id": ID, "when": PHASE, "outcome": OUTCOME}` per phase
that decides a test's outcome (ID as pytest names it; see `read`). With
$JAX_FORK_HYPOTHESIS_MAX_EXAMPLES, hypothesis runs at most that many
examples per test and shrinks no failing one.
"""
from __future__ import annotations

import json
import os
from pathlib import Path


def cap_hypothesis(items, cap: int) -> None:
  """At most `cap` hypothesis examples for each test of `items`, unshrunk."""
  for item in items:
    # `hypothesis.given` keeps the settings in force when it decorated the
    # test (the file's profile) on its wrapper, which reads them from
    # itself; other decorators (`parameterized`) wrap it and copy them.
    test = getattr(getattr(item, "obj", None), "__func__",
                   getattr(item, "obj", None))
    while test is not None:
      settings = getattr(test, "_hypothesis_internal_use_settings", None)
      if settings is not None:
        test._hypothesis_internal_use_settings = type(settings)(
            settings, max_examples=min(settings.max_examples, cap),
            phases=tuple(p for p in settings.phases if p.name != "shrink"))
      test = getattr(test, "__wrapped__", None)


def _write(record: dict) -> None:
  path = os.environ.get("JAX_FORK_RESULTS_STREAM")
  if path:
    with open(path, "a") as f:
      f.write(json.dumps(record) + "\n")


def pytest_collection_modifyitems(config, items):
  del config
  if cap := os.environ.get("JAX_FORK_HYPOTHESIS_MAX_EXAMPLES"):
    cap_hypothesis(items, int(cap))


def pytest_collection_finish(session):
  _write({"collected": len(session.items)})


def pytest_runtest_logreport(report):
  outcome = report.outcome
  if hasattr(report, "wasxfail"):
    outcome = "xfailed" if report.skipped else "xpassed"
  if report.when == "call" or outcome != "passed":
    _write({"id": report.nodeid, "when": report.when, "outcome": outcome})


def pytest_collectreport(report):
  if report.failed:
    _write({"id": report.nodeid, "when": "collect", "outcome": "failed"})


def read(path: Path) -> tuple[int | None, dict[str, str]]:
  """(tests collected or None, {pytest id: passed|failed|error|skipped|
  xfailed|xpassed}) from a stream: a failure outside a test's call is an
  error, as pytest counts it."""
  collected, outcomes = None, {}
  try:
    lines = path.read_text().splitlines()
  except FileNotFoundError:
    return None, {}
  for line in lines:
    try:
      r = json.loads(line)
    except ValueError:
      continue   # a line cut short by the kill
    if "collected" in r:
      collected = r["collected"]
      continue
    outcome = r["outcome"]
    if outcome == "failed" and r["when"] != "call":
      outcome = "error"
    if outcomes.get(r["id"]) not in ("failed", "error"):
      outcomes[r["id"]] = outcome
  return collected, outcomes
