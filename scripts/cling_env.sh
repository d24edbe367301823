# Where cling lives and how it is started, for scripts/setup and the cling
# test. Sourced, not run.
#   NNSIGHT_CLING_PYTHON   the venv's python, with cppyy (and so cling) installed
#   EXTRA_CLING_ARGS       C++17, as the xcpp17 kernel uses
#   CLING_STANDARD_PCH     cling's precompiled standard headers for these flags
#                          (cppyy's bundled one is C++20; this one is built once)
NNSIGHT_HOME="${NNSIGHT_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/nnsight}"
NNSIGHT_VENV="${NNSIGHT_VENV:-$NNSIGHT_HOME/venv}"
NNSIGHT_CLING_PYTHON="${NNSIGHT_CLING_PYTHON:-$NNSIGHT_VENV/bin/python}"
export EXTRA_CLING_ARGS="-std=c++17 -O2"
export CLING_STANDARD_PCH="$NNSIGHT_VENV/cling-pch/allDict.cxx.pch.cxx17"
# cppyy versions known to work with Python 3.11 and these headers.
NNSIGHT_CPPYY_PACKAGES=(cppyy==3.5.0 cppyy-cling==6.32.8 cppyy-backend==1.15.3 CPyCppyy==1.13.0)
