#!/bin/sh
# Builds slurmdbd_exporter and its deb and rpm packages into OUTDIR:
#   VERSION=1.2.0 packaging/package.sh dist
# make package runs it, and so does packaging/package_test.go.
#
# VERSION: the version of the binary and the packages, a leading v dropped.
# git describe's forms are made into versions deb and rpm order right:
# 1.2.0-3-gabc1234[-dirty] (after tag v1.2.0) becomes 1.2.0+3.gabc1234[.dirty],
# after 1.2.0; one without a tag (abc1234-dirty) 0.0.0~gitabc1234.dirty,
# before any release; 1.2.0-rc.1 stays, before 1.2.0.
# REVISION, BRANCH: the commit and branch slurmdbd_exporter_build_info
# labels (default: git's). PACKAGERS: "deb rpm" unless set. GO: go.
set -eu

# nfpm's command line, pinned (the module proxy here refuses @latest; this
# version builds with Go 1.26, v2.47.0's command does not). go run caches
# the build: only the first run compiles it.
NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.43.0

out=${1:?usage: VERSION=1.2.0 $0 OUTDIR}
cd "$(dirname "$0")/.."
case $out in /*) ;; *) out=$PWD/$out ;; esac
GO=${GO:-go}
version=${VERSION:-devel}
version=${version#v}
case $version in
[0-9]*.[0-9]*) version=$(printf %s "$version" | sed -E 's/-([0-9]+)-g([0-9a-f]+)/+\1.g\2/; s/-dirty$/.dirty/') ;;
*) version=0.0.0~git$(printf %s "$version" | tr -c 'A-Za-z0-9.~+' .) ;;
esac

mkdir -p "$out"
GOARCH=$("$GO" env GOARCH)
vp=github.com/prometheus/common/version
revision=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
branch=${BRANCH:-$(git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)}
"$GO" build -ldflags "-X $vp.Version=$version -X $vp.Revision=$revision -X $vp.Branch=$branch" -o "$out/slurmdbd_exporter" .
for p in ${PACKAGERS:-deb rpm}; do
	VERSION=$version BINARY=$out/slurmdbd_exporter GOARCH=$GOARCH \
		"$GO" run "$NFPM" package --packager "$p" --config packaging/nfpm.yaml --target "$out/"
done
