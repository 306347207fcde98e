#!/usr/bin/env bash
# Readies a lent GPU machine for gorila. Such a machine has Python 3.12 with PyTorch, matplotlib,
# TensorBoard and OpenCV, but no Ray, Gymnasium or ale-py, and it reaches no package registry; what
# travels to it with one command is at most 64 MiB, and Ray's wheel alone is about 79 MB.
#
#   tools/gpu_machine_setup.sh prepare        # here, where pip reaches PyPI: fills .whl/ (about 25 MB)
#   source tools/gpu_machine_setup.sh install # there, with .whl carried: gorila importable and on PATH
#
# `prepare` downloads the wheels of the packages the machine lacks for CPython 3.12 on x86-64 Linux,
# and repacks Ray without what gorila never loads (its Java jars, RLlib, the LLM library and the
# dashboard's web client) as an xz tarball of about 20 MB, so that everything travels in one command.
# `install` unpacks them into /tmp/site, puts it and src/ on PYTHONPATH and a `gorila` command on PATH.
# .whl/ must be ignored by git (listed in .git/info/exclude) and named in the command's carry.
set -euo pipefail

WHEELS=(ray==2.60.0 gymnasium==1.4.0 ale-py==0.12.1 Farama-Notifications==0.0.6 simpy==4.1.2 MinAtar==1.0.15
        jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1)
# What gorila never imports from Ray: 34 MB of Java jars, RLlib, Ray's LLM library, the dashboard's web client.
RAY_UNUSED=(ray/jars ray/rllib ray/llm ray/dashboard/client/build)

prepare() {
    local python=${PYTHON:-python3} tmp
    tmp=$(mktemp -d)
    rm -rf .whl && mkdir -p .whl
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    for spec in "${WHEELS[@]}"; do
        "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$tmp" "$spec"
    done
    mkdir "$tmp/ray" && (cd "$tmp/ray" && unzip -q ../ray-*.whl && rm -rf "${RAY_UNUSED[@]}" \
        && tar cf - . | xz -6 -T0 > "$OLDPWD/.whl/ray-lean.tar.xz")
    mv "$tmp"/*.whl .whl/ && rm .whl/ray-*.whl && rm -rf "$tmp"
    du -sh .whl
}

install() {
    local site=/tmp/site
    mkdir -p "$site" /tmp/bin
    tar xJf .whl/ray-lean.tar.xz -C "$site"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl
    export PYTHONPATH="$PWD/src:$site" PATH="/tmp/bin:$site/bin:$PATH"
    printf '#!/bin/sh\nexec python3 -m gorila "$@"\n' > /tmp/bin/gorila && chmod +x /tmp/bin/gorila
    python3 -c "import ray, gymnasium, ale_py, torch; print('ray', ray.__version__, 'gymnasium', gymnasium.__version__, \
'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
}

case "${1:-}" in
    prepare) prepare ;;
    install) install ;;
    *) echo "usage: tools/gpu_machine_setup.sh prepare | source tools/gpu_machine_setup.sh install" >&2; return 2 2>/dev/null || exit 2 ;;
esac
