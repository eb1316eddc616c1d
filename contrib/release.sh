#!/usr/bin/env bash
# Builds a release of retrylens into dist/: for Linux amd64 and arm64, a tarball with the
# binary, the man pages, the bash, zsh and fish completions, README, LICENSE and
# CHANGELOG; and SHA256SUMS over the tarballs.
#
#   bash contrib/release.sh 0.1.0
#
# DuckDB is linked through cgo (the prebuilt library its Go module ships for each
# platform, C++), so each platform needs its C and C++ toolchain: gcc and g++ for the
# machine's own, Debian's g++-aarch64-linux-gnu for arm64 on amd64, g++-x86-64-linux-gnu
# for amd64 on arm64. Binaries are built with -trimpath and the commit stamped in
# (retrylens version names it).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: contrib/release.sh VERSION (as in CHANGELOG.md, without a v)}
version=${version#v}
case "$version" in
  [0-9]*.[0-9]*.[0-9]*) ;;
  *) echo "release.sh: VERSION must look like 1.2.3, not $version" >&2; exit 2 ;;
esac
grep -q "^## \[$version\]" CHANGELOG.md || echo "release.sh: warning: CHANGELOG.md has no section for $version" >&2
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
host=$(go env GOARCH)
dist=dist
rm -rf "$dist"
mkdir -p "$dist"
cc_for() {
  case "$1" in
    "$host") echo gcc ;;
    arm64) echo aarch64-linux-gnu-gcc ;;
    amd64) echo x86_64-linux-gnu-gcc ;;
  esac
}
for arch in amd64 arm64; do
  cc=$(cc_for "$arch")
  command -v "$cc" >/dev/null || { echo "release.sh: $cc not found (Debian: apt-get install g++-${cc%-gcc})" >&2; exit 1; }
  name=retrylens-$version-linux-$arch
  out=$dist/$name
  mkdir -p "$out/man" "$out/completions"
  echo "building $name with $cc" >&2
  CGO_ENABLED=1 GOOS=linux GOARCH=$arch CC=$cc go build -trimpath -buildvcs=true \
    -ldflags "-s -w -X main.release=$version -X main.buildDate=$date" -o "$out/retrylens" ./cmd/retrylens
  cp README.md LICENSE CHANGELOG.md "$out/"
done
# The man pages and completions come from the host's binary: the same text for every platform.
bin=$dist/retrylens-$version-linux-$host/retrylens
"$bin" man "$dist/man"
for arch in amd64 arm64; do
  out=$dist/retrylens-$version-linux-$arch
  cp "$dist"/man/*.1 "$out/man/"
  "$bin" completion bash > "$out/completions/retrylens.bash"
  "$bin" completion zsh > "$out/completions/_retrylens"
  "$bin" completion fish > "$out/completions/retrylens.fish"
  tar -C "$dist" -czf "$out.tar.gz" "$(basename "$out")"
done
rm -rf "$dist/man"
(cd "$dist" && sha256sum ./*.tar.gz | sed 's# \./# #' > SHA256SUMS)
cat "$dist/SHA256SUMS"
