# SPDX-License-Identifier: Apache-2.0
# lab/lib/common.sh - paths, messages and small helpers shared by every lab script.
#
# Sourced, never run. Every lab entry point sources this first.

PUMA_TOP=${PUMA_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# Builds, downloads and images live outside the repository, keyed by content.
PUMA_CACHE=${PUMA_CACHE:-/var/cache/puma}
# Runtime state of emulated hosts and guests (sockets, logs, disks).
PUMA_RUN=${PUMA_RUN:-/run/puma-lab}
# Compiler cache for QEMU/libvirt/kernel builds: a changed patch series
# recompiles only the files it touches.  Every build lives in its own
# cache-key directory, so paths are hashed relative to the build directory
# and the directory itself is left out of the hash.
export CCACHE_DIR=${CCACHE_DIR:-$PUMA_CACHE/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PUMA_CACHE}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}

# Debian sources and kernels the lab is pinned to (DESIGN.md section 3).
# Patterns, resolved against the configured apt sources at fetch time.
QEMU_SRC_PKG=qemu
QEMU_SRC_VERSION_GLOB='1:10.0.*'
LIBVIRT_SRC_PKG=libvirt
LIBVIRT_SRC_VERSION_GLOB='11.3.0-*'
# Host kernel for the KVM series (compile-tested only: no hardware KVM here).
LINUX_SRC_PKG=linux
LINUX_SRC_VERSION_GLOB='6.12.*'
# Guest kernels: Debian 12 (6.1) and bookworm-backports (6.12).

PUMA_KERNELS="6.1 6.12"

info()
{
	printf '[puma-lab] %s\n' "$*" >&2
}

die()
{
	printf '[puma-lab] ERROR: %s\n' "$*" >&2
	exit 1
}

# require_cmd CMD... - fail with one clear message naming each missing command.
require_cmd()
{
	local c missing=
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
	done
	[ -z "$missing" ] || die "missing command(s):$missing (run lab/setup first)"
}

# require_root - the lab creates namespaces, bridges and libvirtd instances.
require_root()
{
	[ "$(id -u)" = 0 ] || die "the lab needs root (network namespaces, libvirtd)"
}

# content_hash FILE|DIR... - stable sha256 over names and contents.
content_hash()
{
	local p
	for p in "$@"; do
		if [ -d "$p" ]; then
			(cd "$p" && find . -type f ! -name '*~' -print0 | LC_ALL=C sort -z |
				xargs -0r sha256sum)
		elif [ -e "$p" ]; then
			sha256sum "$p" | sed "s|  .*/|  |"
		else
			printf 'absent %s\n' "$p"
		fi
	done | sha256sum | cut -c1-16
}

# series_hash DIR - hash of DIR/series and the patches it lists (and of
# nothing else in DIR, so a README there does not trigger a rebuild).
series_hash()
{
	local dir=$1
	content_hash "$dir/series" $(series_patches "$dir")
}

# series_id DIR - short id of a patch series: "empty" or its series_hash.
# Built binaries carry it in their version string.
series_id()
{
	local dir=$1
	if [ -z "$(series_patches "$dir")" ]; then
		echo empty
	else
		series_hash "$dir" | cut -c1-10
	fi
}

# series_patches DIR - the patch files named by DIR/series, in order.
series_patches()
{
	local dir=$1 line
	[ -f "$dir/series" ] || return 0
	while read -r line; do
		case "$line" in ''|'#'*) continue ;; esac
		[ -f "$dir/$line" ] || die "$dir/series names $line, which does not exist"
		echo "$dir/$line"
	done <"$dir/series"
}

# newest_version GLOB - the highest Debian version read on stdin (one per
# line) that matches GLOB; nothing if none does.
newest_version()
{
	local glob=$1 v best=
	while read -r v; do
		# shellcheck disable=SC2254
		case "$v" in $glob) ;; *) continue ;; esac
		if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then
			best=$v
		fi
	done
	[ -z "$best" ] || echo "$best"
}

# prune_cache DIR KEEP - remove the other builds in DIR (a component's cache
# folder), keeping KEEP and anything matching base-* (shared inputs).
prune_cache()
{
	local dir=$1 keep=$2 d
	for d in "$dir"/*; do
		case "${d##*/}" in "$keep"|current|base-*) continue ;; esac
		[ -d "$d" ] && rm -rf "$d"
	done
}
