#!/usr/bin/env python3
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
"""The fork's build CLI.

  python build/fork.py materialize [--dir .work/tree]   # patched git repo
  python build/fork.py export [--dir .work/tree]        # commits -> patches/
  python build/fork.py check                            # series sanity
  python build/fork.py rebase --onto 0.4.30             # series onto a release
  python build/fork.py rebase-report --onto 0.4.27 0.4.28  # Markdown tables
  python build/fork.py record-status                    # rebases/ vs patches/
  python build/fork.py wheel [--out dist]               # reproducible wheel
  python build/fork.py upstream-tests --jax-repo PATH lax_test shard_map_test
  python build/fork.py upstream-tests --set tpu --export .tpu/upstream-tests
  python build/fork.py tree --jax-repo PATH [--tag jax-v0.4.26] [--dir OUT]
  (--jax-repo: a jax-ml/jax clone or git bundle; default $JAX_UPSTREAM_REPO)
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from forktool import fulltree  # noqa: E402
from forktool import patches as P  # noqa: E402
from forktool import rebase as R  # noqa: E402
from forktool import tree as T  # noqa: E402
from forktool import upstream as U  # noqa: E402
from forktool import upstream_tests  # noqa: E402
from forktool import wheel as W  # noqa: E402

DEFAULT_TREE = U.REPO_ROOT / ".work" / "tree"
DEFAULT_PATCHES = U.REPO_ROOT / "patches"


def cmd_materialize(args) -> int:
  src, pin = R.base_sdist(args)   # the pin, or the release --from names
  dest = T.materialize(Path(args.dir), Path(args.patches), str(src),
                       args.upto, pin=pin)
  applied = T.applied_patches(dest)
  total = len(P.read_series(Path(args.patches)))
  print(f"materialized {dest} (upstream tag {T.UPSTREAM_TAG!r}, "
        f"{applied} of {total} patches applied)")
  return 0


def cmd_export(args) -> int:
  names = T.export(Path(args.dir), Path(args.patches), args.number_from,
                   args.dry_run)
  for n in names:
    print(n)
  kept = T.kept_patches(Path(args.dir), names)
  if kept:
    print(f"export: kept {len(kept)} patch(es) that {args.dir} did not "
          f"materialize (--upto), unchanged: {', '.join(kept)}; run "
          "`build/fork.py check` to see that they still apply", file=sys.stderr)
  return 0


def cmd_check(args) -> int:
  patches_dir = Path(args.patches)
  problems = P.check_series(patches_dir)
  if not problems:
    src, pin = R.base_sdist(args)   # the pin, or the release --from names
    with tempfile.TemporaryDirectory() as tmp:
      tree = U.extract(src, pin, Path(tmp) / "tree")
      try:
        P.apply_series(tree, patches_dir, write=False)
      except P.PatchError as e:
        problems.append(str(e))
  for p in problems:
    print(f"check: {p}", file=sys.stderr)
  if problems:
    return 1
  print(f"check: OK ({len(P.read_series(patches_dir))} patches apply to "
        f"jax {pin.version} with no fuzz or offset)")
  return 0


def cmd_wheel(args) -> int:
  whl = W.build_from_series(Path(args.out), Path(args.patches), args.sdist)
  print(whl)
  return 0


def cmd_tree(args) -> int:
  return fulltree.main(args)


def cmd_upstream_tests(args) -> int:
  return upstream_tests.main(args)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="build/fork.py", description=__doc__,
                               formatter_class=argparse.RawTextHelpFormatter)
  sub = ap.add_subparsers(dest="cmd", required=True)

  def common(p):
    p.add_argument("--patches", default=str(DEFAULT_PATCHES),
                   help="the patch folder (with its series file)")
    p.add_argument("--sdist", default=None,
                   help="a local copy of the pinned upstream sdist "
                        f"(else ${U.SDIST_ENV}, the cache, or pip download)")

  def from_option(p):
    p.add_argument("--from", dest="from_version", default=None,
                   metavar="VERSION",
                   help="the release the series applies to, when it is not "
                        "the pin (e.g. --from 0.4.30 --patches "
                        "rebases/jax-0.4.30)")

  p = sub.add_parser("materialize", help="patched source tree as a git repo")
  common(p)
  from_option(p)
  p.add_argument("--dir", default=str(DEFAULT_TREE))
  p.add_argument("--upto", default=None, help="stop after this patch")
  p.set_defaults(fn=cmd_materialize)

  p = sub.add_parser("export", help="write the tree's commits to patches/")
  p.add_argument("--patches", default=str(DEFAULT_PATCHES))
  p.add_argument("--dir", default=str(DEFAULT_TREE))
  p.add_argument("--number-from", type=int, default=None,
                 help="lowest number to give a new patch")
  p.add_argument("--dry-run", action="store_true")
  p.set_defaults(fn=cmd_export)

  p = sub.add_parser("check", help="series, headers and strict application")
  common(p)
  from_option(p)
  p.set_defaults(fn=cmd_check)

  R.add_commands(sub, DEFAULT_PATCHES)   # rebase, rebase-report

  p = sub.add_parser("wheel", help="build the wheel into dist/")
  common(p)
  p.add_argument("--out", default=str(U.REPO_ROOT / "dist"))
  p.set_defaults(fn=cmd_wheel)

  p = sub.add_parser("tree", help="the whole patched source tree (jaxlib, "
                     "tests, build/ ...) from a jax-ml/jax clone")
  common(p)
  fulltree.add_arguments(p, U.REPO_ROOT / ".work" / "jax-tree")
  p.set_defaults(fn=cmd_tree)

  p = sub.add_parser("upstream-tests",
                     help="run upstream's test files against the installed jax")
  upstream_tests.add_arguments(p)
  p.set_defaults(fn=cmd_upstream_tests)

  args = ap.parse_args(argv)
  try:
    return args.fn(args)
  except (P.PatchError, U.UpstreamError, T.TreeError, R.RebaseError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
  sys.exit(main())
