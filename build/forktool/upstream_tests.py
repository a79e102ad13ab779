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
"""Runs upstream JAX's own test files against the installed fork.

The files are extracted with `git archive` from a jax git checkout (bare or
not) at a tag into a temporary folder; nothing is copied into the repository.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SUMMARY_RE = re.compile(r"(\d+) (passed|failed|skipped|error|errors|xfailed|"
                         r"xpassed|deselected)")


def add_arguments(p: argparse.ArgumentParser) -> None:
  p.add_argument("--jax-repo", required=True,
                 help="path to a git checkout of jax-ml/jax (bare or not)")
  p.add_argument("--tag", default="jax-v0.4.26")
  p.add_argument("--num-cases", default="10",
                 help="JAX_NUM_GENERATED_CASES (default 10)")
  p.add_argument("--devices", type=int, default=8,
                 help="host CPU devices (XLA_FLAGS device count)")
  p.add_argument("--python", default=sys.executable,
                 help="interpreter whose installed jax is tested")
  p.add_argument("-k", dest="keyword", default=None,
                 help="pytest -k expression")
  p.add_argument("--workers", type=int, default=0,
                 help="pytest-xdist workers (0: none)")
  p.add_argument("tests", nargs="+",
                 help="test file names, e.g. lax_test shard_map_test")


def extract_tests(repo: Path, tag: str, dest: Path) -> Path:
  archive = subprocess.run(
      ["git", f"--git-dir={_git_dir(repo)}", "archive", tag, "tests"],
      capture_output=True)
  if archive.returncode != 0:
    raise SystemExit(f"error: git archive {tag} tests in {repo} failed: "
                     f"{archive.stderr.decode(errors='replace').strip()}")
  subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout,
                 check=True)
  return dest / "tests"


def _git_dir(repo: Path) -> Path:
  return repo / ".git" if (repo / ".git").exists() else repo


def parse_summary(text: str) -> dict[str, int]:
  counts = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
  for line in reversed(text.splitlines()):
    if re.search(r"\b(passed|failed|error|skipped|no tests ran)\b", line) \
        and (" in " in line or line.startswith("=")):
      for n, kind in _SUMMARY_RE.findall(line):
        kind = "error" if kind.startswith("error") else kind
        counts[kind] = counts.get(kind, 0) + int(n)
      break
  return counts


def main(args) -> int:
  repo = Path(args.jax_repo)
  env = dict(os.environ)
  env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                      f" --xla_force_host_platform_device_count={args.devices}"
                      ).strip()
  env["JAX_NUM_GENERATED_CASES"] = str(args.num_cases)
  env.pop("PYTHONPATH", None)
  worst = 0
  with tempfile.TemporaryDirectory(prefix="jax-upstream-tests-") as tmp:
    tests_dir = extract_tests(repo, args.tag, Path(tmp))
    version = subprocess.run(
        [args.python, "-c", "import jax; print(jax.__version__, jax.__file__)"],
        capture_output=True, text=True, env=env, cwd=tmp).stdout.strip()
    print(f"upstream tests at {args.tag} against jax {version}")
    for name in args.tests:
      name = name[:-3] if name.endswith(".py") else name
      path = tests_dir / f"{name}.py"
      if not path.exists():
        print(f"{name}: no such file at {args.tag}")
        worst = max(worst, 2)
        continue
      cmd = [args.python, "-m", "pytest", str(path), "-q", "-p",
             "no:cacheprovider", "-o", "addopts="]
      if args.keyword:
        cmd += ["-k", args.keyword]
      if args.workers:
        cmd += ["-n", str(args.workers)]
      t0 = time.time()
      proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                            cwd=tmp)
      out = proc.stdout + proc.stderr
      log = Path(tempfile.gettempdir()) / f"upstream-{name}.log"
      log.write_text(out)
      c = parse_summary(out)
      print(f"{name}: {c['passed']} passed, {c['failed']} failed, "
            f"{c['skipped']} skipped, {c['error']} errors "
            f"({time.time() - t0:.0f} s; log {log})", flush=True)
      if proc.returncode not in (0, 5):
        worst = max(worst, 1)
  return worst
