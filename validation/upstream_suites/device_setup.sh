# Sourced on the device host (no registry there): instep's dependencies from carried
# wheels (.whl), instep from the source tree, then into the upstream test folder.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 INSTEP_ROOT=$PWD
cd upstream_tests/inductor || return 1
