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
fork, to the same end, in a fraction of the time; `--recheck-on-cpu` reruns
them with the same interpreter on the built-in CPU backend (for a run on an
accelerator).  A file in which no test passed did not run: it fails the run.
`--export DIR` lays the named files out in DIR for a machine without the
sources (a TPU machine), where `--tests-dir DIR` runs them.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from . import results_stream
from . import tree as T
from . import upstream as U

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
    # The check on a TPU (chipcheck/upstream_suites.sh, in this order: the
    # most telling and the quickest first): the suites of issue 49 and
    # 0.4.26's Pallas TPU files (pallas_test is GPU-only there;
    # all_gather_test needs more than one chip).
    "tpu": ("lax_test", "pallas/pallas_call_tpu_test", "lax_autodiff_test",
            "lax_numpy_indexing_test", "python_callback_test",
            "debugging_primitives_test", "pjit_test", "random_test",
            "pallas/splash_attention_kernel_test",
            "pallas/paged_attention_kernel_test", "pallas/gmm_test",
            "pallas/indexing_test", "pallas/ops_test", "checkify_test",
            "lax_numpy_test", "api_test", "lax_control_flow_test",
            "shard_map_test", "pallas/splash_attention_mask_test",
            "pallas/all_gather_test"),
}

# Upstream jax 0.4.26 tests that assert a bug the fork fixes (upstream rewrote
# each with its own fix): left out of every run at that tag, each named in the
# report with the patch that changes the outcome. A name ending in `*` is a
# parameterized test's cases (name0, name1, ...).
ASSERTS_FIXED_BUG = {
    "shard_map_test.py::ShardMapTest::test_custom_vjp_replication_error_message_hint":
        "patch 0063: psum of a replicated value works (upstream's test "
        "expects it from 0.4.31)",
    # Their NumPy-1 reference (np_unique_backport) expands the inverse with
    # an axis to the input's rank, as NumPy 2.0.0 alone did.
    "lax_numpy_test.py::LaxBackedNumpyTests::testUnique*":
        "patch 0101: with an axis, unique's inverse is 1-D, as NumPy's "
        "(upstream's test expects it from 0.4.31)",
    "lax_numpy_test.py::LaxBackedNumpyTests::testUniqueSize*":
        "patch 0101: with an axis, unique's inverse is 1-D, as NumPy's "
        "(upstream's test expects it from 0.4.31)",
    "lax_scipy_special_functions_test.py::LaxScipySpcialFunctionsTest::testGammaSign":
        "patch 0103: gamma at the negative integers is NaN, as SciPy's from "
        "1.15; the test compares with SciPy 1.13's inf (upstream's test "
        "expects NaN from 0.4.36)",
}


def deselect_prefixes(test_id: str) -> list[str]:
  """pytest's --deselect values (node id prefixes) that leave out `test_id`:
  for `name*` the ten prefixes name0 to name9, which match every case
  (name0, name1, ..., name10, ...) and no test of another name (nameSize0)."""
  if test_id.endswith("*"):
    return [f"{test_id[:-1]}{digit}" for digit in range(10)]
  return [test_id]

# What --export writes beside the files: the run's own pytest configuration,
# so that no configuration of a folder above applies.
EXPORT_INI = "[pytest]\n"
EXPORT_TAG = "TAG"


def add_arguments(p: argparse.ArgumentParser) -> None:
  p.add_argument("--jax-repo", default=os.environ.get(T.JAX_REPO_ENV),
                 help="jax-ml/jax's sources: a git clone (bare or not) or a "
                      f"git bundle, with its release tags (default "
                      f"${T.JAX_REPO_ENV}; not needed with --tests-dir)")
  p.add_argument("--export", metavar="DIR", default=None,
                 help="write the named test files at --tag to DIR/tests/ "
                      "(with a pytest.ini and the tag) and run nothing: for "
                      "a machine without the sources")
  p.add_argument("--tests-dir", metavar="DIR", default=None,
                 help="run the files that --export laid out in DIR, "
                      "instead of extracting them")
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
                 help="at most N hypothesis examples per test, a failing one "
                      "not shrunk (the Pallas kernel test files' own "
                      "profiles ask for 10 to 50)")
  p.add_argument("--recheck-on-cpu", action="store_true",
                 help="rerun the tests that fail with this interpreter and "
                      "JAX_PLATFORMS=cpu (the built-in CPU backend) and say "
                      "which fail there too (for a run on an accelerator)")
  p.add_argument("--keep-pythonpath", action="store_true",
                 help="keep $PYTHONPATH for the runs (where the jax under "
                      "test is on it, as on the TPU machine)")
  p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                 help="stop a file's run (and its recheck's) after SECONDS "
                      "and report what it had done")
  p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                 help="start no file after SECONDS from the start, and cut "
                      "each run at what is left")
  p.add_argument("--summary", metavar="FILE", default=None,
                 help="also append the report (per-file counts, failing "
                      "test ids) to FILE")
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
                      "pallas/pallas_test; NAME:SECONDS gives a file its own "
                      "time limit (else --timeout)")


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


def export_tests(repo: Path, tag: str, names: list[str], dest: Path) -> None:
  """Writes tests/NAME.py at `tag` for each name (and the conftest.py or
  __init__.py files of their folders, if any) under `dest`, with a
  pytest.ini and the tag in TAG."""
  listed = T.git(repo, "ls-tree", "-r", "--name-only", tag, "--", "tests",
                 git_dir=True).decode().splitlines()
  wanted = [f"tests/{n}.py" for n in names]
  missing = [w for w in wanted if w not in listed]
  if missing:
    raise SystemExit(f"error: not at {tag}: {', '.join(missing)}")
  folders = {str(Path(w).parent) for w in wanted}
  wanted += [f for f in listed if Path(f).name in ("conftest.py", "__init__.py")
             and str(Path(f).parent) in folders]
  for rel in wanted:
    out = dest / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(T.git(repo, "show", f"{tag}:{rel}", git_dir=True))
  (dest / "pytest.ini").write_text(EXPORT_INI)
  (dest / EXPORT_TAG).write_text(tag + "\n")


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


def outcomes(junit_xml: Path) -> dict[str, str]:
  """{id (`file.py::Class::test`): failed|error|skipped|passed} of a run."""
  try:
    root = ET.parse(junit_xml).getroot()
  except (OSError, ET.ParseError):
    return {}
  out = {}
  for case in root.iter("testcase"):
    kind = next((k for k in ("failure", "error", "skipped")
                 if case.find(k) is not None), "passed")
    out[_case_id(case)] = {"failure": "failed"}.get(kind, kind)
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


@dataclasses.dataclass
class Run:
  counts: dict[str, int]
  outcomes: dict[str, str]   # by test id
  rc: int
  timed_out: bool = False
  collected: int | None = None

  @property
  def failed(self) -> set[str]:
    return {i for i, o in self.outcomes.items() if o in ("failed", "error")}


def _stream_id(nodeid: str) -> str:
  # pytest's `[...]/tests/dir/file.py::Class::test` -> `dir/file.py::...`
  path, sep, rest = nodeid.partition("::")
  return path.rpartition("tests/")[2] + sep + rest


def time_limit_options() -> list[str]:
  """The fork's per-test time limit (pyproject.toml), as pytest options."""
  with open(U.REPO_ROOT / "pyproject.toml", "rb") as f:
    ini = U.tomllib.load(f)["tool"]["pytest"]["ini_options"]
  return [f"-o{k}={ini[k]}"
          for k in ("timeout", "timeout_method", "faulthandler_timeout")]


def run_file(python: str, targets: list[str], args, env: dict[str, str],
             cwd: str, log: Path, timeout: float | None = None,
             deselect: Sequence[str] = ()) -> Run:
  """Runs pytest on `targets` (a file, or test ids) with `python`; cut at
  `timeout` seconds, it reports what the run had done."""
  junit = log.with_suffix(".xml")
  stream = log.with_suffix(".jsonl")
  for f in (junit, stream):
    f.unlink(missing_ok=True)
  cmd = [python, "-m", "pytest", *targets, "-q", "-p", "no:cacheprovider",
         "-o", "addopts=", f"--junitxml={junit}", *time_limit_options()]
  if args.keyword:
    cmd += ["-k", args.keyword]
  for test_id in deselect:
    cmd += ["--deselect", test_id]
  if args.workers:
    cmd += ["-n", str(args.workers)]
  if args.pallas_interpret:
    cmd += ["-p", "forktool.pallas_interpret"]
  if timeout is not None or args.hypothesis_max_examples is not None:
    cmd += ["-p", "forktool.results_stream"]
    env = dict(env, JAX_FORK_RESULTS_STREAM=str(stream))
  proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, cwd=cwd, start_new_session=True)
  timed_out = False
  try:
    stdout, stderr = proc.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    timed_out = True
    os.killpg(proc.pid, signal.SIGKILL)
    stdout, stderr = proc.communicate()
  out = stdout + stderr
  if timed_out:
    out += f"\n[killed after {timeout:.0f} s]\n"
  log.write_text(out)
  collected = None
  if timed_out:
    collected, streamed = results_stream.read(stream)
    found = {_stream_id(i): o for i, o in streamed.items()}
    counts = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
    for o in found.values():
      counts[o] = counts.get(o, 0) + 1
  else:
    counts, found = parse_summary(out), outcomes(junit)
  return Run(counts, found, proc.returncode, timed_out, collected)


def _counts_line(c: dict[str, int], run: Run | None = None) -> str:
  if run is None or not run.timed_out:
    return _fmt(c)
  total = "" if run.collected is None else f" of {run.collected}"
  return f"{_fmt(c)}, cut short with {sum(c.values())}{total} run"


def main(args) -> int:
  limits: dict[str, float] = {}   # NAME:SECONDS
  names = []
  for n in selected_tests(args.tests, args.sets):
    n, _, seconds = n.partition(":")
    n = n[:-3] if n.endswith(".py") else n
    if seconds:
      limits[n] = float(seconds)
    if n not in names:
      names.append(n)
  if not names:
    raise SystemExit("error: name test files or a --set "
                     f"({', '.join(sorted(SETS))})")
  others = [o for o in ("compare", "recheck", "recheck_on_cpu")
            if getattr(args, o)]
  if len(others) > 1:
    raise SystemExit("error: --compare, --recheck and --recheck-on-cpu "
                     "exclude each other")
  if args.export and args.tests_dir:
    raise SystemExit("error: --export and --tests-dir exclude each other")
  if not args.tests_dir and not args.jax_repo:
    print(f"error: upstream's sources are needed: --jax-repo PATH or "
          f"${T.JAX_REPO_ENV} (or --tests-dir DIR from --export)",
          file=sys.stderr)
    return 2
  if args.export:
    with T.open_jax_repo(args.jax_repo) as repo:
      export_tests(repo, args.tag, names, Path(args.export))
    print(f"wrote {len(names)} test files at {args.tag} to "
          f"{Path(args.export) / 'tests'}")
    return 0
  start = time.monotonic()
  other = args.compare or args.recheck
  recheck_python = args.recheck or (args.python if args.recheck_on_cpu
                                    else None)
  env = dict(os.environ)
  env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                      f" --xla_force_host_platform_device_count={args.devices}"
                      ).strip()
  env["JAX_NUM_GENERATED_CASES"] = str(args.num_cases)
  paths = env.pop("PYTHONPATH", "").split(os.pathsep)
  paths = [x for x in paths if x] if args.keep_pythonpath else []
  if (args.pallas_interpret or args.timeout or args.budget or limits or
      args.hypothesis_max_examples is not None):
    paths.append(str(Path(__file__).resolve().parent.parent))  # forktool
  if paths:
    env["PYTHONPATH"] = os.pathsep.join(paths)
  if args.pallas_interpret:
    env["JAX_FORK_PALLAS_INTERPRET_RTOL"] = str(args.pallas_rtol)
    if args.interpret_params or args.interpret_param:
      env["JAX_FORK_PALLAS_INTERPRET_PARAMS"] = ",".join(
          args.interpret_param) or "1"
  if args.hypothesis_max_examples is not None:
    env["JAX_FORK_HYPOTHESIS_MAX_EXAMPLES"] = str(args.hypothesis_max_examples)
  recheck_env = dict(env, JAX_PLATFORMS="cpu") if args.recheck_on_cpu else env
  log_dir = Path(args.log_dir)
  log_dir.mkdir(parents=True, exist_ok=True)
  summary = Path(args.summary) if args.summary else None
  if summary:
    summary.parent.mkdir(parents=True, exist_ok=True)

  def report(line: str) -> None:
    print(line, flush=True)
    if summary:
      with summary.open("a") as f:
        f.write(line + "\n")

  def time_left(limit: float | None) -> float | None:
    if args.budget is None:
      return limit
    left = args.budget - (time.monotonic() - start)
    return left if limit is None else min(left, limit)

  worst = 0
  rows = []
  any_rechecked = False
  with contextlib.ExitStack() as stack:
    tmp = stack.enter_context(
        tempfile.TemporaryDirectory(prefix="jax-upstream-tests-"))
    if args.tests_dir:
      root = Path(args.tests_dir).resolve()
      tests_dir = root / "tests"
      tag_file = root / EXPORT_TAG
      tag = tag_file.read_text().strip() if tag_file.exists() else "?"
      cwd = str(root)
    else:
      repo = stack.enter_context(T.open_jax_repo(args.jax_repo))
      tests_dir = extract_tests(repo, args.tag, Path(tmp))
      tag, cwd = args.tag, tmp
    fork_env = env
    if args.pjrt_plugin:
      config = Path(tmp) / "pjrt_plugin.json"
      config.write_text(json.dumps({
          "library_path": str(Path(args.pjrt_plugin).resolve()),
          "create_options": {"cpu_device_count": args.devices}}))
      fork_env = dict(env, PJRT_NAMES_AND_LIBRARY_PATHS=f"plugin:{config}",
                      JAX_PLATFORMS="plugin")
    report(f"upstream tests at {tag} against jax "
           f"{_installed(args.python, fork_env, cwd)}"
           f"{f' on PJRT plugin {args.pjrt_plugin}' if args.pjrt_plugin else ''}"
           f"{f', from {tests_dir}' if args.tests_dir else ''}")
    if args.compare:
      report(f"compared with jax {_installed(other, env, cwd)}")
    elif other:   # asked at the first recheck: it may be made on first use
      report(f"failures rechecked with {other}")
    if args.recheck_on_cpu:
      report("failures rechecked with JAX_PLATFORMS=cpu")
    for name in names:
      path = tests_dir / f"{name}.py"
      if not path.exists():
        report(f"{name}: no such file at {tag}")
        worst = max(worst, 2)
        continue
      limit = limits.get(name, args.timeout)
      left = time_left(limit)
      if args.budget is not None and left is not None and left < 1:
        report(f"{name}: not run, the budget of {args.budget:.0f} s is spent")
        worst = max(worst, 1)
        continue
      t0 = time.time()
      log_name = name.replace("/", "-")   # pallas/pallas_test
      log = log_dir / f"upstream-{log_name}{'-fork' if other else ''}.log"
      fixed = [i for i in ASSERTS_FIXED_BUG
               if tag == "jax-v0.4.26" and i.startswith(f"{name}.py::")]
      for test_id in fixed:
        report(f"{name}: left out {test_id}, which asserts a bug the fork "
               f"fixes ({ASSERTS_FIXED_BUG[test_id]})")
      run = run_file(args.python, [str(path)], args, fork_env, cwd, log,
                     left, [str(tests_dir.relative_to(cwd) / d)
                            for i in fixed for d in deselect_prefixes(i)])
      c, failed, rc = run.counts, run.failed, run.rc
      skipped = not_runnable(log.with_suffix(".xml"))
      ulog = log_dir / (f"upstream-{log_name}-"
                        f"{'cpu' if args.recheck_on_cpu else 'upstream'}.log")
      uc, rechecked, urun = None, False, None
      if args.compare:
        urun = run_file(args.compare, [str(path)], args, env, cwd, ulog,
                        time_left(limit))
        uc, ufailed = urun.counts, urun.failed
      elif recheck_python and failed:
        if args.recheck and not any_rechecked:
          report(f"rechecking with jax {_installed(other, env, cwd)}")
        rechecked = any_rechecked = True
        urun = run_file(recheck_python,
                        [str(tests_dir / i) for i in sorted(failed)],
                        args, recheck_env, cwd, ulog, time_left(limit))
        ufailed = urun.failed
      else:
        ufailed = set()
      new = sorted(failed - ufailed)
      if rc not in (0, 5) and not failed and not run.timed_out:
        # pytest failed without a test id (e.g. a crash): count it as new.
        new = [f"{name}.py (pytest exit status {rc}, no test ids; see {log})"]
      if c["passed"] == 0:
        new.append(f"{name}.py ran no test (see {log})")
      if args.no_skips and c["skipped"]:
        new.append(f"{name}.py skipped {c['skipped']} test(s) under "
                   f"--no-skips (see {log})")
      if run.timed_out:
        new.append(f"{name}.py cut short at its time limit (see {log})")
      line = f"{name}: {'fork ' if other else ''}{_counts_line(c, run)}"
      if uc is not None:
        line += f" | upstream {_counts_line(uc, urun)}"
      if other:
        line += (f" | {len(failed & ufailed)} also fail on upstream | "
                 f"{len(new)} new on the fork")
      elif args.recheck_on_cpu and failed:
        line += f" | {len(failed & ufailed)} of its failures also fail on CPU"
      logs = f"log {log}" + (f", {ulog}" if uc is not None or rechecked else "")
      report(f"{line} ({time.time() - t0:.0f} s; {logs})")
      if args.recheck_on_cpu:
        on_cpu = urun.outcomes if urun else {}
        for test_id in sorted(failed):
          verdict = ("not rechecked: cut short" if urun and urun.timed_out
                     and test_id not in on_cpu else
                     {"failed": "fails on CPU too",
                      "error": "fails on CPU too",
                      "passed": "passes on CPU",
                      "skipped": "skipped on CPU"}.get(
                          on_cpu.get(test_id, ""), "not rechecked"))
          report(f"  failure: {test_id} ({verdict})")
        for test_id in new:
          if test_id not in failed:
            report(f"  failure: {test_id}")
      else:
        for test_id in new:
          report(f"  {'new failure' if other else 'failure'}: {test_id}")
      for line in skipped:
        report(f"  {line}")
      if new or (not other and failed):
        worst = max(worst, 1)
      if uc is not None:
        rows.append((name, c, uc, len(new)))
  if rows:
    report("\n| suite | fork passed / failed / skipped | upstream passed / "
           "failed / skipped | new on the fork |")
    report("| --- | --- | --- | --- |")
    for name, c, uc, n in rows:
      report(f"| `{name}` | {c['passed']} / {c['failed'] + c['error']} / "
             f"{c['skipped']} | {uc['passed']} / "
             f"{uc['failed'] + uc['error']} / {uc['skipped']} | {n} |")
  return worst
