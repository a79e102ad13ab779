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
#
# Sourced on the TPU machine (no network) by each chipcheck/*.sh, from the
# checkout's root, with .tpu/ (laid by chipcheck/prepare.sh) carried along:
# puts jaxlib 0.4.26 and the fork's wheel (and absl-py, flatbuffers) in a
# folder of the machine's temporary directory, ahead of the machine's own
# JAX on PYTHONPATH. jaxlib is unpacked once per machine (a warm machine
# keeps it between calls); the fork is reinstalled every time. Exports
# LIBTPU (the machine's libtpu.so) and JAX_FORK_CHIP_BASE (the PYTHONPATH
# the machine came with: its own JAX, the peer of tpu_benchmark.sh).
# Sourcing it twice does nothing more.
if [ -z "${JAX_FORK_CHIP_BASE+set}" ]; then
  _tpu="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.tpu"
  _site="$(python3 -c 'import tempfile; print(tempfile.gettempdir())')/jax-fork-chip"
  export PYTHONUNBUFFERED=1
  export JAX_FORK_CHIP_BASE="${PYTHONPATH:-}"
  LIBTPU="$(python3 -c 'import libtpu; print(libtpu.get_library_path())')"
  export LIBTPU
  mkdir -p "$_site/jaxlib" "$_site/deps" "$_site/fork"
  if [ ! -f "$_site/jaxlib/.ok" ]; then
    python3 -c "import glob, sys, tarfile
tarfile.open(glob.glob(sys.argv[1] + '/jaxlib-*.tar.xz')[0]).extractall(sys.argv[2])" \
      "$_tpu" "$_site/jaxlib" && touch "$_site/jaxlib/.ok"
    PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index \
      --no-deps --target "$_site/deps" "$_tpu"/wheels/*.whl
  fi
  rm -rf "$_site/fork" && mkdir -p "$_site/fork"   # the fork, fresh each call
  PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index \
    --no-deps --no-compile --target "$_site/fork" "$_tpu"/jax-*.whl
  export PYTHONPATH="$_site/fork:$_site/jaxlib${PYTHONPATH:+:$PYTHONPATH}:$_site/deps"
  python3 -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', \
jaxlib.__version__, 'libtpu', '$LIBTPU')"
  unset _tpu _site
fi
