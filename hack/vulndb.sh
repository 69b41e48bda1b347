#!/usr/bin/env bash
# vulndb.sh: print the folder of a local Go vulnerability database, for
# `govulncheck -db file://$(hack/vulndb.sh)`. The data is the module
# golang.org/x/vulndb at VIGIL_VULNDB_VERSION, fetched through the Go module
# proxy (its data/osv folder holds every OSV entry), converted once by
# hack/vulndb into govulncheck's v1 layout and cached in
# ${VIGIL_VULNDB_DIR:-~/.cache/vigil/vulndb}/<version>. Progress goes to stderr.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="${VIGIL_VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}"
cache="${VIGIL_VULNDB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vigil/vulndb}"
out="$cache/$version"
if [ -f "$out/index/modules.json" ] && [ -f "$out/index/db.json" ]; then
	echo "$out"
	exit 0
fi
echo "vulndb: fetching golang.org/x/vulndb@$version from the Go module proxy" >&2
# Outside any module, so the fetch changes no go.mod or go.sum.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! info="$(cd "$tmp" && go mod download -json "golang.org/x/vulndb@$version")"; then
	echo "vulndb: could not fetch golang.org/x/vulndb@$version from the Go module proxy:" >&2
	sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/    \1/p' <<<"$info" >&2
	exit 1
fi
field() { sed -n 's/^[[:space:]]*"'"$1"'": "\(.*\)",\{0,1\}$/\1/p' <<<"$info"; }
dir="$(field Dir)"
stamp="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$(field Info)")"
if [ ! -d "$dir/data/osv" ]; then
	echo "vulndb: $dir has no data/osv folder of OSV entries" >&2
	exit 1
fi
mkdir -p "$cache"
rm -rf "$out"
(cd "$root" && go run ./hack/vulndb -osv "$dir/data/osv" -out "$out" ${stamp:+-modified "$stamp"})
echo "$out"
