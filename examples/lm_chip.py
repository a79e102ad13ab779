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
"""examples/lm_train.py on a TPU: the fork against today's JAX, in one run.

On a TPU VM of your own, with two virtual environments (the fork with its
ecosystem, and today's JAX with today's), from the checkout's root:

  python3 -m venv ~/fork && ~/fork/bin/pip install . libtpu==0.0.42.1
  ~/fork/bin/pip install -c ecosystem-constraints.txt flax optax chex orbax-checkpoint
  python3 -m venv ~/today && ~/today/bin/pip install 'jax[tpu]' flax optax orbax-checkpoint
  python3 examples/lm_chip.py --no-install --fork-python ~/fork/bin/python \\
      --fork-path '' --peer-python ~/today/bin/python --peer-path ''

About 3-4 minutes. It runs, one process at a time:

  fork/full   the fork on the chip, GPT-2 small (lm_train.py's defaults)
  peer/full   today's JAX and today's flax/optax/orbax, the same
  fork/check  the fork on the chip, a smaller model (--check-args)
  fork/cpu    the same smaller model on the CPU (JAX_PLATFORMS=cpu)

and prints their losses side by side, the step time, tokens per second, MFU,
compile time and memory of both sides with their ratio (fork / peer), the
largest relative loss difference of the chip against the CPU and of the
fork against the peer, whether each side's checkpoint restored exactly, and
PASS when all of these hold (exit status 0). Each run's output and JSON go
to `--out`.

A TPU machine whose package index has only today's flax, optax and
orbax-checkpoint (for today's JAX) and no network beyond it: download the
fork side's wheels where a registry is reachable (`python3
examples/lm_chip.py --download .whl-tpu`, 4 wheels, 1.3 MB), copy the
checkout there with `.whl-tpu` and `.tpu` (`bash chipcheck/prepare.sh`), and
run `source chipcheck/on_device.sh && python3 examples/lm_chip.py
--index-url URL`: each side's ecosystem is installed into a folder of its
own (the carried wheels for the fork; flax 0.12.8, optax 0.2.8 and
orbax-checkpoint from the index for the machine's own JAX, the peer).

  python examples/lm_chip.py --smoke --fork-python P --fork-path P \\
      --peer-python P --peer-path P --no-install

runs the same at tiny sizes on the CPU (the four runs on the CPU), e.g.
with the fork's and today's JAX in two virtual environments.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# pip download's recipe for wheels that install on the TPU machine.
DOWNLOAD = ["--no-deps", "--only-binary=:all:", "--python-version", "3.11",
            "--implementation", "cp"] + [
                a for plat in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
                               "manylinux_2_17_x86_64", "manylinux2014_x86_64",
                               "manylinux1_x86_64")
                for a in ("--platform", plat)]
FORK_WHEELS = ["flax==0.8.4", "optax==0.2.2", "chex==0.1.86",
               "orbax-checkpoint==0.6.4"]
PEER_PACKAGES = ["flax==0.12.8", "optax==0.2.8", "orbax-checkpoint"]
# What each side's own path gives and no install may shadow.
PROTECTED = {"jax", "jaxlib", "numpy", "scipy", "ml-dtypes", "opt-einsum",
             "libtpu", "libtpu-nightly"}
FULL = ["--steps", "22", "--untimed", "2", "--window", "5"]
CHECK = ["--layers", "4", "--width", "256", "--heads", "4", "--seq", "256",
         "--batch", "4", "--steps", "8", "--window", "3"]
SMOKE = ["--layers", "2", "--width", "64", "--heads", "4", "--seq", "64",
         "--vocab", "512", "--batch", "4", "--steps", "12", "--lr", "3e-3"]
SMOKE_CHECK = ["--layers", "2", "--width", "64", "--heads", "4", "--seq",
               "32", "--vocab", "256", "--batch", "2", "--steps", "6",
               "--window", "2"]


def _canon(name: str) -> str:
  return name.lower().replace("_", "-").replace(".", "-")


def missing_requirements(paths: list[str], roots: list[str]
                         ) -> dict[str, str]:
  """What `roots` need, transitively, that the distributions on `paths`
  (the first of a name wins, as at import) do not satisfy: name -> spec."""
  import importlib.metadata as md   # pylint: disable=g-import-not-at-top
  try:
    from packaging.requirements import Requirement   # pylint: disable=g-import-not-at-top
  except ImportError:
    from pip._vendor.packaging.requirements import Requirement   # pylint: disable=g-import-not-at-top
  dists = {}
  for d in md.distributions(path=paths):
    dists.setdefault(_canon(d.metadata["Name"]), d)
  need, seen = {}, set()
  todo = [(_canon(r), frozenset()) for r in roots]
  while todo:
    name, extras = todo.pop()
    if (name, extras) in seen or name not in dists:
      continue
    seen.add((name, extras))
    for text in dists[name].requires or []:
      req = Requirement(text)
      if req.marker and not any(req.marker.evaluate({"extra": e})
                                for e in (extras | {""})):
        continue
      dep = _canon(req.name)
      have = dists.get(dep)
      if have is None or not req.specifier.contains(have.version,
                                                    prereleases=True):
        need.setdefault(dep, f"{dep}{req.specifier}")
      else:
        todo.append((dep, frozenset(req.extras)))
  return need


def install(python: str, target: str, specs: list[str], side_path: str,
            roots: list[str], index: str, log) -> None:
  """pip-installs `specs` (names or wheel files) and what they need that
  `side_path` lacks into `target`, each with --no-deps."""
  stamp = os.path.join(target, ".lm_chip_installed")
  key = json.dumps([specs, side_path])
  if os.path.exists(stamp) and open(stamp).read() == key:
    log(f"  {target}: installed before")
    return
  env = dict(os.environ, PIP_CONFIG_FILE=os.devnull)
  pip = [python, "-m", "pip", "install", "--isolated", "-q",
         "--disable-pip-version-check", "--only-binary=:all:", "--no-deps",
         "--upgrade", "--target", target, "--index-url", index]
  paths = [target] + [p for p in side_path.split(os.pathsep) if p]
  added, batch = [], specs
  for _ in range(10):
    proc = subprocess.run(pip + batch, env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode:
      raise SystemExit(f"pip install {' '.join(batch)} failed:\n"
                       f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    added += batch
    want = missing_requirements(paths, roots)
    kept = [spec for name, spec in want.items() if name in PROTECTED]
    if kept:
      log(f"  warning: the side's own JAX, jaxlib or NumPy is not what "
          f"{', '.join(kept)} asks; left as it is")
    batch = [spec for name, spec in want.items() if name not in PROTECTED]
    if not batch:
      break
  log(f"  {target}: {' '.join(os.path.basename(a) for a in added)}")
  with open(stamp, "w") as f:
    f.write(key)


def run_one(name: str, python: str, path: str, args: list[str], out: str,
            timeout: float, cpu: bool, log) -> dict | None:
  env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1")
  if cpu:
    env["JAX_PLATFORMS"] = "cpu"
  stem = os.path.join(out, "lm_" + name.replace("/", "_"))
  # The checkpoint in memory where the machine has it: its exactness counts
  # here, not the disk's speed.
  ckpt = tempfile.mkdtemp(prefix="lm_chip_", dir="/dev/shm" if os.access(
      "/dev/shm", os.W_OK) else None)
  cmd = [python, os.path.join(HERE, "lm_train.py"), *args,
         "--ckpt-dir", ckpt, "--json", stem + ".json"]
  if os.path.exists(stem + ".json"):
    os.remove(stem + ".json")   # an earlier run's
  t0 = time.perf_counter()
  with open(stem + ".log", "w") as f:
    f.write(shlex.join(cmd) + "\n")
    f.flush()
    try:
      proc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT,
                            timeout=max(timeout, 1), check=False)
      rc = proc.returncode
    except subprocess.TimeoutExpired:
      rc = "timeout"
    finally:
      shutil.rmtree(ckpt, ignore_errors=True)
  took = time.perf_counter() - t0
  if not os.path.exists(stem + ".json"):
    with open(stem + ".log") as f:
      tail = f.read().splitlines()[-15:]
    log(f"{name}: failed ({rc}) after {took:.0f} s; {stem}.log ends:\n  " +
        "\n  ".join(tail))
    return None
  with open(stem + ".json") as f:
    res = json.load(f)
  v = res["versions"]
  ck = res["checkpoint"]
  log(f"{name} ({took:.0f} s): {res['device']}, jax {v['jax']}, flax "
      f"{v['flax']}, optax {v['optax']}, orbax {v['orbax-checkpoint']}; "
      f"{res['params'] / 1e6:.1f}M params, batch {res['batch']}; "
      f"checkpoint {'exact' if ck['exact'] else 'NOT EXACT'}"
      f"{'' if rc == 0 else f' (exit {rc})'}")
  return res


def _fmt(x) -> str:
  if x is None:
    return "-"
  return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def max_rel_diff(a: list[float], b: list[float]) -> float:
  return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def compare(res: dict, loss_rtol: float, log) -> bool:
  ok = True
  f, p = res.get("fork/full"), res.get("peer/full")
  if f and p:
    log("\nlosses, same model, same numbers (step: fork | peer):")
    n = min(len(f["losses"]), len(p["losses"]))
    for i in range(n):
      log(f"  {i + 1:3d}: {f['losses'][i]:.5f} | {p['losses'][i]:.5f}")
    d = max_rel_diff(f["losses"][:n], p["losses"][:n])
    agree = d <= loss_rtol
    ok &= agree
    log(f"  largest relative difference {d:.2e} "
        f"({'within' if agree else 'OVER'} {loss_rtol:g})")
    log("\n| figure | fork | peer | fork / peer |\n| --- | --- | --- | --- |")
    rows = [("step (ms)", "step_ms"), ("tokens/s", "tokens_per_s"),
            ("MFU", "mfu"), ("lowering (s)", "lower_s"),
            ("compile (s)", "compile_s"), ("temp memory (GiB)", "temp_bytes"),
            ("peak memory (GiB)", "peak_bytes")]
    for label, k in rows:
      a, b = f.get(k), p.get(k)
      if k == "mfu":
        a, b = (None if a is None else 100 * a,
                None if b is None else 100 * b)
        label = "MFU (%)"
      if k.endswith("bytes"):
        a, b = (None if a is None else a / 2**30,
                None if b is None else b / 2**30)
      ratio = a / b if a is not None and b else None
      log(f"| {label} | {_fmt(a)} | {_fmt(b)} | {_fmt(ratio)} |")
    log(f"| step windows (ms) | {' '.join(f'{w:.2f}' for w in f['window_ms'])}"
        f" | {' '.join(f'{w:.2f}' for w in p['window_ms'])} | |")
  c, cpu = res.get("fork/check"), res.get("fork/cpu")
  if c and cpu:
    log(f"\nchip against CPU, the fork, {c['params'] / 1e6:.1f}M params "
        f"(step: {c['platform']} | {cpu['platform']}):")
    for i, (x, y) in enumerate(zip(c["losses"], cpu["losses"])):
      log(f"  {i + 1:3d}: {x:.5f} | {y:.5f}")
    d = max_rel_diff(c["losses"], cpu["losses"])
    agree = d <= loss_rtol
    ok &= agree
    log(f"  largest relative difference {d:.2e} "
        f"({'within' if agree else 'OVER'} {loss_rtol:g})")
  exact = {k: r["checkpoint"]["exact"] for k, r in res.items() if r}
  ok &= all(exact.values()) and len(exact) == 4
  log("\ncheckpoints restored exactly: " + ", ".join(
      f"{k} {v}" for k, v in exact.items()) +
      f"; missing runs: {4 - len(exact)}")
  return ok


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--smoke", action="store_true",
                 help="tiny sizes, every run on the CPU")
  p.add_argument("--fork-python", default=sys.executable)
  p.add_argument("--peer-python", default=sys.executable)
  p.add_argument("--fork-path", default=None,
                 help="PYTHONPATH giving the fork (default: $PYTHONPATH)")
  p.add_argument("--peer-path", default=None,
                 help="PYTHONPATH giving the peer JAX (default: the machine's, "
                 "$JAX_FORK_CHIP_BASE, which chipcheck/on_device.sh sets)")
  p.add_argument("--wheels", default=".whl-tpu",
                 help="folder of the fork side's wheels")
  p.add_argument("--index-url", default=os.environ.get("PIP_INDEX_URL"),
                 help="the TPU machine's own package index (default: "
                 "$PIP_INDEX_URL)")
  p.add_argument("--eco-dir",
                 default=os.path.join(tempfile.gettempdir(), "lm_chip"),
                 help="where each side's ecosystem is installed")
  p.add_argument("--no-install", action="store_true",
                 help="each side's python already has its ecosystem")
  p.add_argument("--full-args", default=None,
                 help="lm_train.py's arguments for the full runs "
                 f"(default: {shlex.join(FULL)})")
  p.add_argument("--check-args", default=None,
                 help="lm_train.py's arguments for the chip/CPU check "
                 f"(default: {shlex.join(CHECK)})")
  p.add_argument("--loss-rtol", type=float, default=5e-3,
                 help="losses agree when their relative difference is at "
                 "most this (bf16 matmuls)")
  p.add_argument("--budget", type=float, default=240,
                 help="seconds for the whole run; each run gets what is left")
  p.add_argument("--out", default=os.path.join(tempfile.gettempdir(),
                                                "lm_chip_out"),
                 help="folder for each run's log and JSON")
  p.add_argument("--download", metavar="DIR", default=None,
                 help="only download the fork side's wheels into DIR (on a "
                 "machine with a package registry), then exit")
  a = p.parse_args(argv)
  if a.download:
    for spec in FORK_WHEELS:
      subprocess.run([sys.executable, "-m", "pip", "download", "-q",
                      *DOWNLOAD, "-d", a.download, spec], check=True)
    for w in sorted(os.listdir(a.download)):
      print(f"{os.path.getsize(os.path.join(a.download, w)):>9,}  {w}")
    return 0
  start = time.perf_counter()
  os.makedirs(a.out, exist_ok=True)
  logf = open(os.path.join(a.out, "lm_chip.log"), "w")

  lock = threading.Lock()

  def log(s):
    with lock:
      print(s, flush=True)
      logf.write(s + "\n")
      logf.flush()

  env_path = os.environ.get("PYTHONPATH", "")
  fork_path = env_path if a.fork_path is None else a.fork_path
  peer_path = a.peer_path
  if peer_path is None:
    peer_path = os.environ.get("JAX_FORK_CHIP_BASE")
  if peer_path is None:
    p.error("--peer-path is required outside chipcheck/on_device.sh")
  if not a.no_install and not a.index_url:
    p.error("--index-url (or $PIP_INDEX_URL): the machine's package index")
  if not a.no_install:
    log("installing (fork side: carried wheels; peer side: the index)")
    eco_fork = os.path.join(a.eco_dir, "fork")
    eco_peer = os.path.join(a.eco_dir, "peer")
    wheels = []
    for spec in FORK_WHEELS:
      name, version = spec.split("==")
      stem = f"{name.replace('-', '_')}-{version}-"
      found = [w for w in sorted(os.listdir(a.wheels))
               if w.startswith(stem) and w.endswith(".whl")]
      if not found:
        raise SystemExit(f"no {stem}*.whl in {a.wheels}")
      wheels.append(os.path.abspath(os.path.join(a.wheels, found[0])))
    roots = [s.split("==")[0] for s in FORK_WHEELS]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:   # both at once
      jobs = [pool.submit(install, a.fork_python, eco_fork, wheels, fork_path,
                          roots, a.index_url, log),
              pool.submit(install, a.peer_python, eco_peer, PEER_PACKAGES,
                          peer_path, [s.split("==")[0] for s in PEER_PACKAGES],
                          a.index_url, log)]
      for job in jobs:
        job.result()
    fork_path = os.pathsep.join(x for x in (eco_fork, fork_path) if x)
    peer_path = os.pathsep.join(x for x in (eco_peer, peer_path) if x)
    log(f"  {time.perf_counter() - start:.0f} s")

  full = shlex.split(a.full_args) if a.full_args is not None else (
      SMOKE if a.smoke else FULL)
  check = shlex.split(a.check_args) if a.check_args is not None else (
      SMOKE_CHECK if a.smoke else CHECK)
  runs = [("fork/full", a.fork_python, fork_path, full, a.smoke),
          ("peer/full", a.peer_python, peer_path, full, a.smoke),
          ("fork/check", a.fork_python, fork_path, check, a.smoke),
          ("fork/cpu", a.fork_python, fork_path, check, True)]
  res = {}
  for name, python, path, args, cpu in runs:
    left = a.budget - (time.perf_counter() - start)
    if left < 15:
      log(f"{name}: skipped, {max(left, 0):.0f} s of the budget left")
      continue
    res[name] = run_one(name, python, path, args, a.out, left, cpu, log)
  ok = compare(res, a.loss_rtol, log)
  log(f"\n{'PASS' if ok else 'FAIL'}; total {time.perf_counter() - start:.0f}"
      f" s; logs and JSON in {a.out}")
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
