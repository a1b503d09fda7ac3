#!/usr/bin/env bash
# Build etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok, Helm and promtool from the Go module proxy.
#
# Why a script: no Kubernetes release binaries can be downloaded here, but the Go module proxy
# serves k8s.io/kubernetes and its staging modules. k8s.io/kubernetes requires its staging modules
# at v0.0.0 and maps them with replace directives that a dependency's go.mod cannot carry, so we
# build through a wrapper module that replaces each staging module with its published v0.X.Y
# (docs/design.md §6). etcd gets its own wrapper so MVS does not raise the apiserver's dependencies.
#
# Output: $TESSERA_K8S_BIN (default ~/.cache/tessera/k8s-<version>/bin), never inside the repo.
# Idempotent: binaries that already report the pinned version are not rebuilt.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.36.3}"
CACHE="${TESSERA_CACHE:-$HOME/.cache/tessera}"
WORK="$CACHE/k8s-$K8S_VERSION"
BIN="${TESSERA_K8S_BIN:-$WORK/bin}"
mkdir -p "$WORK" "$BIN"
# One build at a time per cache, however it was started (by hand, by `find_binaries` for a test
# session, by another pytest worker): two at once rewrite each other's wrapper go.mod mid-build.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$WORK/.build.lock"
  flock 9
fi
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
staging_version="v0.${K8S_VERSION#v1.}"
start=$(date +%s)

have() { [ -x "$BIN/$1" ] && "$BIN/$1" --version 2>/dev/null | grep -q "$2"; }

# --- Kubernetes components -------------------------------------------------------------------
components=(kube-apiserver kube-scheduler kube-controller-manager)
missing=()
for c in "${components[@]}"; do have "$c" "$K8S_VERSION" || missing+=("$c"); done
# kubectl only on request (WITH_KUBECTL=1): the tests do not need it, a person trying the dev cluster may
if [ "${WITH_KUBECTL:-0}" = 1 ] && ! { [ -x "$BIN/kubectl" ] && "$BIN/kubectl" version --client 2>/dev/null | grep -q "$K8S_VERSION"; }; then
  missing+=(kubectl)
fi

k8s_mod_file() { go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p'; }

if [ "${#missing[@]}" -gt 0 ]; then
  echo "building ${missing[*]} $K8S_VERSION (a cold build takes about 6 min on 2 idle cores, up to 30 on a busy machine)" >&2
  mod="$WORK/k8s"; mkdir -p "$mod"; cd "$mod"
  upstream_mod="$(k8s_mod_file)"
  go_line="$(grep -E '^go [0-9]' "$upstream_mod")"
  {
    echo "module local.test/k8sbin"
    echo
    echo "$go_line"
    grep -E '^godebug ' "$upstream_mod" || true
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    grep -E '=> \./staging/src/' "$upstream_mod" | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } > go.mod
  kubectl_import=""
  if [[ " ${missing[*]} " == *" kubectl "* ]]; then kubectl_import='	_ "k8s.io/kubernetes/cmd/kubectl"'; fi
  cat > tools.go <<GO
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
${kubectl_import}
)
GO
  go mod tidy >&2
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitTreeState=clean"
  for c in "${missing[@]}"; do
    echo "go build $c" >&2
    go build -trimpath -ldflags "$ldflags" -o "$BIN/$c" "k8s.io/kubernetes/cmd/$c"
  done
fi

# --- etcd at the version Kubernetes pins -----------------------------------------------------
upstream_mod="$(k8s_mod_file)"
etcd_version="$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2}' "$upstream_mod")"
if ! have etcd "${etcd_version#v}"; then
  echo "building etcd $etcd_version" >&2
  mod="$WORK/etcd"; mkdir -p "$mod"; cd "$mod"
  cat > go.mod <<GOMOD
module local.test/etcdbin

go $(go env GOVERSION | sed 's/^go//; s/\.[0-9]*$//').0

require go.etcd.io/etcd/server/v3 $etcd_version
GOMOD
  cat > tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  go mod tidy >&2
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
fi

# --- kwok: the kubelet stand-in that makes pods on fake nodes run, finish and go away -----------
# sigs.k8s.io/kwok has no replace directives, so `go install module@version` builds it directly.
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
if ! have kwok "${KWOK_VERSION#v}"; then
  echo "building kwok $KWOK_VERSION" >&2
  (cd "$WORK" && GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
fi

# --- Helm: renders and lints the chart in deploy/helm (CI checks it against the kustomize tree) ---
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
if ! { [ -x "$BIN/helm" ] && "$BIN/helm" version --short 2>/dev/null | grep -q "$HELM_VERSION"; }; then
  echo "building helm $HELM_VERSION" >&2
  # As Helm's Makefile: the Kubernetes version `helm template`/`lint` assume without a cluster is
  # 1.<client-go minor> (v1.20.0 without these flags, below the chart's kubeVersion).
  HELM_GOMOD="$(cd "$WORK" && go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
  HELM_KUBE_MINOR="$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$HELM_GOMOD")"
  HELM_KUBE_FLAGS=""
  for pkg in pkg/chartutil pkg/lint/rules; do
    HELM_KUBE_FLAGS="$HELM_KUBE_FLAGS -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$HELM_KUBE_MINOR"
  done
  (cd "$WORK" && GOBIN="$BIN" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION$HELM_KUBE_FLAGS" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
fi

# --- promtool: checks and unit-tests the chart's alert rules (tests/unit/test_prometheus_rules.py) ---
# Prometheus' go.mod has exclude directives, which `go install module@version` refuses: build it
# through a wrapper module, as the Kubernetes components. Module v0.307.3 is Prometheus 3.7.3.
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.307.3}"
PROMTOOL_VERSION="${PROMTOOL_VERSION:-3.7.3}"
if ! { [ -x "$BIN/promtool" ] && "$BIN/promtool" --version 2>/dev/null | grep -q "version $PROMTOOL_VERSION "; }; then
  echo "building promtool $PROMTOOL_VERSION" >&2
  mod="$WORK/promtool"; mkdir -p "$mod"
  (cd "$mod" && { [ -f go.mod ] || go mod init promtoolbuild >/dev/null 2>&1; } \
    && go get "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION" \
    && go build -o "$BIN/promtool" -ldflags "-s -w -X github.com/prometheus/common/version.Version=$PROMTOOL_VERSION" \
         github.com/prometheus/prometheus/cmd/promtool)
fi

echo "control plane binaries ready in $BIN ($(( $(date +%s) - start )) s)" >&2
echo "$BIN"
