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

# Debian sources and kernels the lab is pinned to (docs/design.md, section
# 3). Patterns, resolved against the configured apt sources at fetch time:
# the newest matching version that the registry actually serves is used
# (the index can list a version before its files are downloadable). Set
# PUMA_QEMU_VERSION, PUMA_LIBVIRT_VERSION or PUMA_KERNEL_6_1_VERSION /
# PUMA_KERNEL_6_12_VERSION (linux-image-amd64) to pin one exact version
# instead, PUMA_LINUX_VERSION only to the 6.12 guest kernel's own source
# (docs/lab.md).
QEMU_SRC_PKG=qemu
QEMU_SRC_VERSION_GLOB='1:10.0.*'
LIBVIRT_SRC_PKG=libvirt
LIBVIRT_SRC_VERSION_GLOB='11.3.0-*'
# Host kernel for the KVM series: the source of the 6.12 guest kernel,
# which kernel hosts run (lab/lib/stack.sh, install_kvm).
LINUX_SRC_PKG=linux
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

# elapsed SECONDS - "M:SS" (or "H:MM:SS").
elapsed()
{
	local t=$1
	if [ "$t" -ge 3600 ]; then
		printf '%d:%02d:%02d' $((t / 3600)) $((t % 3600 / 60)) $((t % 60))
	else
		printf '%d:%02d' $((t / 60)) $((t % 60))
	fi
}

# PUMA_PROGRESS_EVERY: seconds between two "still building" lines.
PUMA_PROGRESS_EVERY=${PUMA_PROGRESS_EVERY:-30}

# run_with_progress LOG LABEL CMD... - run CMD with its output in LOG; every
# $PUMA_PROGRESS_EVERY seconds say that LABEL is alive, with the time spent
# and the last progress counter ninja or make wrote ("[1234/2609]"). On
# failure the end of LOG is shown. Returns CMD's status.
run_with_progress()
{
	local log=$1 label=$2 pid start next rc=0 step
	shift 2
	start=$SECONDS
	next=$((start + PUMA_PROGRESS_EVERY))
	"$@" >"$log" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		[ "$SECONDS" -ge "$next" ] || continue
		next=$((SECONDS + PUMA_PROGRESS_EVERY))
		step=$(tail -c 65536 "$log" | grep -ao '^\[[0-9]*/[0-9]*\]' | tail -n 1)
		info "$label: building, $(elapsed $((SECONDS - start))) so far${step:+, ninja at $step}"
	done
	wait "$pid" || rc=$?
	if [ $rc -ne 0 ]; then
		tail -n 30 "$log" >&2
	else
		info "$label: done in $(elapsed $((SECONDS - start)))"
	fi
	return $rc
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

# stop_pidfile FILE COMM - TERM the PID in FILE if it still is a COMM process
# (never a reused PID), KILL it after 30 s, forget it.
stop_pidfile()
{
	local file=$1 comm=$2 pid i
	[ -f "$file" ] || return 0
	pid=$(cat "$file")
	if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] &&
		kill -TERM "$pid" 2>/dev/null; then
		for i in $(seq 1 60); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$file"
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
	versions_newest_first "$1" | head -n 1
}

# versions_newest_first GLOB - the Debian versions read on stdin (one per
# line) that match GLOB, without duplicates, highest first.
versions_newest_first()
{
	local glob=$1 v i n sorted=()
	while read -r v; do
		# shellcheck disable=SC2254
		case "$v" in $glob) ;; *) continue ;; esac
		# Insertion into the sorted list (a handful of versions).
		n=${#sorted[@]}
		for ((i = 0; i < n; i++)); do
			[ "$v" = "${sorted[i]}" ] && continue 2
			dpkg --compare-versions "$v" gt "${sorted[i]}" && break
		done
		sorted=("${sorted[@]:0:i}" "$v" "${sorted[@]:i}")
	done
	[ ${#sorted[@]} -eq 0 ] || printf '%s\n' "${sorted[@]}"
}

# version_candidates PIN GLOB - the versions to try, best first: the value
# of the variable named PIN if it is set, else the versions read on stdin
# that match GLOB, newest first.
version_candidates()
{
	local pin=${!1:-} glob=$2
	if [ -n "$pin" ]; then
		cat >/dev/null
		echo "$pin"
	else
		versions_newest_first "$glob"
	fi
}

# pin_var NAME - the variable that pins NAME's version: PUMA_NAME_VERSION,
# upper case, with dots as underscores (6.12 -> PUMA_KERNEL_6_12_VERSION).
pin_var()
{
	local n=${1^^}
	echo "PUMA_${n//[.-]/_}_VERSION"
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

# install_keyed_venv DIR KEY LABEL NOTE CREATE ARGS... - the environment in
# $PUMA_CACHE/DIR/KEY/venv, made by "CREATE BASE ARGS..." (BASE: that
# KEY folder) unless a good one is there; DIR/current points at it and the
# other keys are pruned. LABEL names it in messages, NOTE says what
# making it involves.
install_keyed_venv()
{
	local dir=$1 key=$2 label=$3 note=$4 create=$5 base log
	shift 5
	base=$PUMA_CACHE/$dir/$key
	if [ -f "$base/good" ]; then
		ln -sfn "$key" "$PUMA_CACHE/$dir/current"
		info "$label is up to date in $base/venv"
		return 0
	fi
	info "creating the $label in $base/venv ($note)"
	rm -rf "$base"
	mkdir -p "$base"
	log=$base/install.log
	run_with_progress "$log" "$label" "$create" "$base" "$@" ||
		die "creating the $label failed; full log: $log"
	touch "$base/good"
	ln -sfn "$key" "$PUMA_CACHE/$dir/current"
	prune_cache "$PUMA_CACHE/$dir" "$key"
	info "$label ready in $base/venv"
}
