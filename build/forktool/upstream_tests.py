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
A later tag than the pin runs upstream's later tests (e.g. those of features
the fork carries) against the fork.  `--compare PYTHON` runs the same files,
with the same options, on a second interpreter (an upstream install) and
reports the counts of both and only the failures that are new on the fork,
by test id; `--recheck PYTHON` reruns there only the tests that failed on the
fork, to the same end, in a fraction of the time.  A file in which no test
passed did not run: it fails the run.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from . import tree as T

# How --pallas-interpret (forktool/pallas_interpret.py) reports the tests of
# features that interpret mode lacks, and those that upstream's kernel fails.
NOT_RUNNABLE = "not runnable on CPU"
KERNEL_BUG = "a bug of upstream's kernel"

_SUMMARY_RE = re.compile(r"(\d+) (passed|failed|skipped|error|errors|xfailed|"
                         r"xpassed|deselected)")

# Named sets of upstream test files (`--set NAME`, repeatable).
SETS: dict[str, tuple[str, ...]] = {
    # The suites whose counts each release records in CHANGELOG.md.
    "core": ("lax_test", "lax_autodiff_test", "lax_numpy_test",
             "lax_numpy_indexing_test", "shard_map_test", "core_test",
             "api_test", "pjit_test"),
    "wide": ("checkify_test", "lax_control_flow_test", "lax_vmap_test",
             "lax_vmap_op_test", "batching_test", "dynamic_api_test",
             "lax_scipy_test", "lax_scipy_special_functions_test",
             "linalg_test", "export_test", "pmap_test", "sparsify_test",
             "lax_numpy_operators_test", "lax_numpy_reducers_test",
             "lax_numpy_ufuncs_test", "lax_numpy_vectorize_test",
             "lax_numpy_einsum_test", "nn_test", "random_test",
             "custom_linear_solve_test", "custom_root_test", "for_loop_test",
             "state_test", "attrs_test", "jet_test", "fft_test", "image_test",
             "ode_test", "debugging_primitives_test", "stax_test",
             "name_stack_test", "x64_context_test", "aot_test",
             "memories_test"),
    # What CI runs on every change (.ci/upstream-suites), at a few cases.
    "ci": ("lax_test", "shard_map_test", "checkify_test",
           "lax_numpy_indexing_test", "lax_autodiff_test"),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
  T.add_jax_repo_argument(p)
  p.add_argument("--tag", default="jax-v0.4.26",
                 help="upstream tag whose tests/ to run (default jax-v0.4.26; "
                      "a later tag runs upstream's later tests)")
  p.add_argument("--num-cases", default="10",
                 help="JAX_NUM_GENERATED_CASES (default 10)")
  p.add_argument("--devices", type=int, default=8,
                 help="host CPU devices (XLA_FLAGS device count)")
  p.add_argument("--python", default=sys.executable,
                 help="interpreter whose installed jax is tested")
  p.add_argument("--compare", metavar="PYTHON", default=None,
                 help="also run the files on this interpreter (an upstream "
                      "jax install) and report only the failures new on the "
                      "fork")
  p.add_argument("--recheck", metavar="PYTHON", default=None,
                 help="rerun only the tests that fail on the fork on this "
                      "interpreter (an upstream jax install): only those "
                      "that do not fail there too fail the run")
  p.add_argument("-k", dest="keyword", default=None,
                 help="pytest -k expression")
  p.add_argument("--set", dest="sets", action="append", default=[],
                 choices=sorted(SETS),
                 help="a named set of test files (repeatable): " +
                      "; ".join(f"{k}: {' '.join(v)}" for k, v in
                                SETS.items()))
  p.add_argument("--workers", type=int, default=0,
                 help="pytest-xdist workers (0: none)")
  p.add_argument("--log-dir", default=tempfile.gettempdir(),
                 help="where the pytest logs go")
  p.add_argument("--pallas-interpret", action="store_true",
                 help="run Pallas TPU tests in interpret mode on CPU: "
                      "force pallas_call(interpret=True), answer the TPU "
                      "gates as a TPU v5e, use rtol >= --pallas-rtol "
                      "in numpy.testing.assert_allclose, and report tests of "
                      "what interpret mode cannot model as skipped, 'not "
                      "runnable on CPU', by name "
                      "(forktool/pallas_interpret.py)")
  p.add_argument("--interpret-params", action="store_true",
                 help="with --pallas-interpret: interpret="
                      "pltpu.InterpretParams() (its checks) instead of True, "
                      "and its warnings (races, semaphores left) errors")
  p.add_argument("--interpret-param", action="append", default=[],
                 metavar="FIELD=VALUE",
                 help="a field of those InterpretParams, a Python literal "
                      "(e.g. detect_races=True); implies --interpret-params")
  p.add_argument("--pallas-rtol", type=float, default=1e-5,
                 help="the least rtol with --pallas-interpret (default 1e-5: "
                      "interpret mode sums in XLA CPU's order)")
  p.add_argument("--hypothesis-max-examples", type=int, default=None,
                 metavar="N",
                 help="with --pallas-interpret: at most N hypothesis examples "
                      "per test, a failing one not shrunk (the kernel test "
                      "files' own profiles ask for 10 to 50)")
  p.add_argument("--pjrt-plugin", metavar="PATH", default=None,
                 help="run the fork on this PJRT CPU plugin (a .so) as its "
                      "only backend, with --devices devices; --recheck and "
                      "--compare run without it (so --recheck with the "
                      "fork's own interpreter names the failures the "
                      "built-in CPU backend does not have)")
  p.add_argument("--no-skips", action="store_true",
                 help="a skipped test fails the run (for files every test "
                      "of which must run)")
  p.add_argument("tests", nargs="*",
                 help="test file names, e.g. lax_test shard_map_test "
                      "pallas/pallas_test")


def selected_tests(names: list[str], sets: list[str]) -> list[str]:
  """The files named by `--set`s and positional names, each once, in order."""
  out: list[str] = []
  for n in [*(t for s in sets for t in SETS[s]), *names]:
    n = n[:-3] if n.endswith(".py") else n
    if n not in out:
      out.append(n)
  return out


def extract_tests(repo: Path, tag: str, dest: Path) -> Path:
  archive = T.git_run(repo, "archive", tag, "--", "tests", check=False,
                      git_dir=True)
  if archive.returncode != 0:
    raise SystemExit(f"error: git archive {tag} tests in {repo} failed: "
                     f"{archive.stderr.decode(errors='replace').strip()}")
  subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout,
                 check=True)
  return dest / "tests"


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


def failed_ids(junit_xml: Path) -> set[str]:
  """Ids (`file.py::Class::test`) of the failed or erroring test cases."""
  if not junit_xml.exists():
    return set()
  try:
    root = ET.parse(junit_xml).getroot()
  except ET.ParseError:
    return set()
  out = set()
  for case in root.iter("testcase"):
    if case.find("failure") is None and case.find("error") is None:
      continue
    out.add(_case_id(case))
  return out


def _case_id(case: ET.Element) -> str:
  # [tests.][dir.]module.Class -> [dir/]module.py::Class (a collection error
  # has no class); upstream's test classes are CamelCase, its modules not.
  parts = [x for x in case.get("classname", "").split(".") if x]
  if parts and parts[0] == "tests":
    parts = parts[1:]
  n = next((i for i, x in enumerate(parts) if x[:1].isupper()), len(parts))
  if n:
    parts = ["/".join(parts[:n]) + ".py", *parts[n:]]
  return "::".join([*parts, case.get("name", "")])


def not_runnable(junit_xml: Path) -> list[str]:
  """`id: reason` of the cases that --pallas-interpret skipped, or expected
  to fail (the cases of one reason on one line when they are more than 3)."""
  try:
    root = ET.parse(junit_xml).getroot()
  except (OSError, ET.ParseError):
    return []
  by_reason: dict[str, list[str]] = {}
  for case in root.iter("testcase"):
    skip = case.find("skipped")
    message = "" if skip is None else skip.get("message", "")
    if NOT_RUNNABLE in message or KERNEL_BUG in message:
      by_reason.setdefault(message, []).append(_case_id(case))
  return [line for message, ids in by_reason.items() for line in (
      [f"{i}: {message}" for i in ids] if len(ids) <= 3 else
      [f"{len(ids)} cases ({ids[0]}, ...): {message}"])]


def _fmt(c: dict[str, int]) -> str:
  return (f"{c['passed']} passed, {c['failed']} failed, "
          f"{c['skipped']} skipped, {c['error']} errors" +
          (f", {c['xfailed']} expected to fail" if c.get("xfailed") else ""))


def _installed(python: str, env: dict[str, str], cwd: str) -> str:
  proc = subprocess.run(
      [python, "-c", "import jax; print(jax.__version__, jax.__file__)"],
      capture_output=True, text=True, env=env, cwd=cwd)
  if proc.returncode != 0:
    raise SystemExit(f"error: {python} cannot import jax: "
                     f"{proc.stderr.strip().splitlines()[-1:]}")
  return proc.stdout.strip()


def run_file(python: str, targets: list[str], args, env: dict[str, str],
             cwd: str, log: Path) -> tuple[dict[str, int], set[str], int]:
  """Runs pytest on `targets` (a file, or test ids) with `python`."""
  junit = log.with_suffix(".xml")
  cmd = [python, "-m", "pytest", *targets, "-q", "-p", "no:cacheprovider",
         "-o", "addopts=", f"--junitxml={junit}"]
  if args.keyword:
    cmd += ["-k", args.keyword]
  if args.workers:
    cmd += ["-n", str(args.workers)]
  if args.pallas_interpret:
    cmd += ["-p", "forktool.pallas_interpret"]
  proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
  out = proc.stdout + proc.stderr
  log.write_text(out)
  return parse_summary(out), failed_ids(junit), proc.returncode


def main(args) -> int:
  names = selected_tests(args.tests, args.sets)
  if not names:
    raise SystemExit("error: name test files or a --set "
                     f"({', '.join(sorted(SETS))})")
  if args.compare and args.recheck:
    raise SystemExit("error: --compare and --recheck exclude each other")
  other = args.compare or args.recheck
  env = dict(os.environ)
  env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                      f" --xla_force_host_platform_device_count={args.devices}"
                      ).strip()
  env["JAX_NUM_GENERATED_CASES"] = str(args.num_cases)
  env.pop("PYTHONPATH", None)
  if args.pallas_interpret:
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    env["JAX_FORK_PALLAS_INTERPRET_RTOL"] = str(args.pallas_rtol)
    if args.interpret_params or args.interpret_param:
      env["JAX_FORK_PALLAS_INTERPRET_PARAMS"] = ",".join(
          args.interpret_param) or "1"
    if args.hypothesis_max_examples is not None:
      env["JAX_FORK_HYPOTHESIS_MAX_EXAMPLES"] = str(
          args.hypothesis_max_examples)
  log_dir = Path(args.log_dir)
  log_dir.mkdir(parents=True, exist_ok=True)
  worst = 0
  rows = []
  with T.open_jax_repo(args.jax_repo) as repo, \
      tempfile.TemporaryDirectory(prefix="jax-upstream-tests-") as tmp:
    tests_dir = extract_tests(repo, args.tag, Path(tmp))
    fork_env = env
    if args.pjrt_plugin:
      config = Path(tmp) / "pjrt_plugin.json"
      config.write_text(json.dumps({
          "library_path": str(Path(args.pjrt_plugin).resolve()),
          "create_options": {"cpu_device_count": args.devices}}))
      fork_env = dict(env, PJRT_NAMES_AND_LIBRARY_PATHS=f"plugin:{config}",
                      JAX_PLATFORMS="plugin")
    print(f"upstream tests at {args.tag} against jax "
          f"{_installed(args.python, fork_env, tmp)}"
          f"{f' on PJRT plugin {args.pjrt_plugin}' if args.pjrt_plugin else ''}")
    if other:
      print(f"{'compared' if args.compare else 'failures rechecked'} with jax "
            f"{_installed(other, env, tmp)}")
    for name in names:
      path = tests_dir / f"{name}.py"
      if not path.exists():
        print(f"{name}: no such file at {args.tag}")
        worst = max(worst, 2)
        continue
      t0 = time.time()
      log_name = name.replace("/", "-")   # pallas/pallas_test
      log = log_dir / f"upstream-{log_name}{'-fork' if other else ''}.log"
      c, failed, rc = run_file(args.python, [str(path)], args, fork_env, tmp,
                               log)
      skipped = not_runnable(log.with_suffix(".xml"))
      ulog = log_dir / f"upstream-{log_name}-upstream.log"
      uc, rechecked = None, False
      if args.compare:
        uc, ufailed, _ = run_file(args.compare, [str(path)], args, env, tmp,
                                  ulog)
      elif args.recheck and failed:
        rechecked = True
        _, ufailed, _ = run_file(args.recheck,
                                 [str(tests_dir / i) for i in sorted(failed)],
                                 args, env, tmp, ulog)
      else:
        ufailed = set()
      new = sorted(failed - ufailed)
      if rc not in (0, 5) and not failed:
        # pytest failed without a test id (e.g. a crash): count it as new.
        new = [f"{name}.py (pytest exit status {rc}, no test ids; see {log})"]
      if c["passed"] == 0:
        new.append(f"{name}.py ran no test (see {log})")
      if args.no_skips and c["skipped"]:
        new.append(f"{name}.py skipped {c['skipped']} test(s) under "
                   f"--no-skips (see {log})")
      line = f"{name}: {'fork ' if other else ''}{_fmt(c)}"
      if uc is not None:
        line += f" | upstream {_fmt(uc)}"
      if other:
        line += (f" | {len(failed & ufailed)} also fail on upstream | "
                 f"{len(new)} new on the fork")
      logs = f"log {log}" + (f", {ulog}" if uc is not None or rechecked else "")
      print(f"{line} ({time.time() - t0:.0f} s; {logs})", flush=True)
      for test_id in new:
        print(f"  {'new failure' if other else 'failure'}: {test_id}")
      for line in skipped:
        print(f"  {line}")
      if new or (not other and failed):
        worst = max(worst, 1)
      if uc is not None:
        rows.append((name, c, uc, len(new)))
  if rows:
    print("\n| suite | fork passed / failed / skipped | upstream passed / "
          "failed / skipped | new on the fork |")
    print("| --- | --- | --- | --- |")
    for name, c, uc, n in rows:
      print(f"| `{name}` | {c['passed']} / {c['failed'] + c['error']} / "
            f"{c['skipped']} | {uc['passed']} / {uc['failed'] + uc['error']} / "
            f"{uc['skipped']} | {n} |")
  return worst
