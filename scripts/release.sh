#!/usr/bin/env bash
# release.sh — what `make release` runs: static linux/amd64 and linux/arm64 binaries of
# cmd/scheduler in dist/, a CycloneDX SBOM of each (JSON, from the modules compiled into it),
# and SHA256SUMS over all of them. It needs Go alone (and git, to name the version); the SBOM
# tool is installed at a pinned version into bin/tools when missing, as lint.sh does.
#
#   make release                        version from `git describe --tags --always --dirty`
#   VERSION=v1.2.0 make release         any version; COMMIT too outside a git checkout
#   SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) make release
#                                       the commit's time as the build date: the same source and
#                                       Go version then give byte-identical binaries
#
# The Dockerfile builds with the same flags (keep the two in step; cmd/scheduler's
# TestReleaseAndDockerfileBuildAlike checks it), so an image holds the same build.
set -euo pipefail
cd "$(dirname "$0")/.."

CYCLONEDX_GOMOD_VERSION=v1.10.0 # github.com/CycloneDX/cyclonedx-gomod
PLATFORMS=(linux/amd64 linux/arm64)

command -v go >/dev/null || { echo "release.sh: no go on PATH; install Go $(awk '/^go /{print $2}' go.mod) (https://go.dev/dl)" >&2; exit 1; }

# What `scheduler version` will say: the version, the full commit hash, and the build date.
in_git() { git rev-parse --is-inside-work-tree >/dev/null 2>&1; }
version=${VERSION:-}
commit=${COMMIT:-}
if [ -z "$version" ] || [ -z "$commit" ]; then
  if ! in_git; then
    echo "release.sh: not a git checkout (or no git): set VERSION and COMMIT, e.g. VERSION=v1.2.0 COMMIT=<the full commit hash>" >&2
    exit 2
  fi
  version=${version:-$(git describe --tags --always --dirty)}
  commit=${commit:-$(git rev-parse HEAD)}
fi
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
  date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
else
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
fi
case $version in *dirty*) echo "release.sh: warning: the tree has uncommitted changes; the version says so ($version)" >&2 ;; esac

# One build for every platform and for the image: static (no libc to match), no local paths,
# the IANA zone database embedded (the jobs compute local times in every group's zone, and
# must not depend on the host carrying tzdata), and no VCS stamp, so a binary depends on the
# source, Go's version and these three values only, as the image's does (its build context
# has no .git).
ldflags="-s -w -X main.version=$version -X main.commit=$commit -X main.date=$date"

tools=$(pwd)/bin/tools
sbom_tool="github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$CYCLONEDX_GOMOD_VERSION"
if [ ! -x "$tools/cyclonedx-gomod" ] || [ "$(cat "$tools/cyclonedx-gomod.version" 2>/dev/null)" != "$sbom_tool" ]; then
  echo "release.sh: installing $sbom_tool" >&2
  GOBIN=$tools go install "$sbom_tool"
  echo "$sbom_tool" >"$tools/cyclonedx-gomod.version"
fi

rm -rf dist
mkdir -p dist
for platform in "${PLATFORMS[@]}"; do
  os=${platform%/*} arch=${platform#*/}
  bin=dist/scheduler-$os-$arch
  echo "release.sh: $bin ($version, $commit, $date)" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=false -tags timetzdata \
    -ldflags "$ldflags" -o "$bin" ./cmd/scheduler
  # From the binary's own module list (go version -m): exactly what was compiled in, the
  # Go standard library included (its version is what a vulnerability scanner matches), and
  # the binary's hashes. The tool takes the package URLs' platform from GOOS and GOARCH.
  GOOS=$os GOARCH=$arch "$tools/cyclonedx-gomod" bin -json -std -version "$version" -output "$bin.cdx.json" "$bin"
done
(cd dist && sha256sum scheduler-* >SHA256SUMS)

echo "release.sh: dist/ holds $version:" >&2
(cd dist && ls -l)
