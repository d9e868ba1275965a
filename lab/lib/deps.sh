# SPDX-License-Identifier: Apache-2.0
# lab/lib/deps.sh - host packages the lab needs, from Debian and PyPI.
#
# Depends on: lib/common.sh
# Call order: install_deps (idempotent; a second run only checks).

PUMA_APT_SOURCES=/etc/apt/sources.list.d/puma-lab.sources

# Build dependencies of QEMU and libvirt (subset of their Build-Depends that
# our configure options use), the lab's runtime tools and the module build;
# Chromium and its WebDriver for the lab cloud's Horizon test.
PUMA_APT_PACKAGES="
	ninja-build pkgconf flex bison python3-venv quilt patch git ca-certificates
	ccache
	libglib2.0-dev libpixman-1-dev zlib1g-dev libcap-ng-dev libattr1-dev
	libaio-dev libzstd-dev liburing-dev
	libxml2-dev libxml2-utils xsltproc libgnutls28-dev libtirpc-dev
	libnl-3-dev libnl-route-3-dev libjson-c-dev libudev-dev libacl1-dev
	libselinux1-dev libpciaccess-dev python3-docutils
	seabios ipxe-qemu
	iproute2 nftables openssl e2fsprogs debootstrap busybox-static cpio xz-utils zstd kmod
	nbdkit
	systemd
	gcc gcc-multilib make libelf-dev libssl-dev bc dwarves
	clang libclang-rt-14-dev
	chromium chromium-driver
	python3 python3-pip python3-dev"
# Daemons the lab runs privately, one instance per test or cloud
# (lib/rabbitmq.sh, lib/mariadb.sh; Prometheus in lab/tests/lab/test_exporter.py;
# Open vSwitch and OVN in lab/puma_lab/ovn.py);
# their Debian services must never start: see install_daemons.
# Open vSwitch and OVN for the lab cloud's Neutron (lab/puma_lab/ovn.py).
PUMA_APT_DAEMONS="rabbitmq-server mariadb-server prometheus
	openvswitch-switch ovn-central ovn-host"
# meson >= 1.5 is required by QEMU 10.0; bookworm has it in backports.
PUMA_APT_BACKPORTS="meson"
# The lab's own Python environment: tox plus what lab/requirements.txt lists.
PUMA_VENV=$PUMA_CACHE/venv

configure_apt_sources()
{
	local want
	want=$(cat <<-'SRC'
	# Written by puma lab/setup: trixie sources for QEMU/libvirt,
	# bookworm-backports for meson, the 6.12 guest kernel and its
	# source (the KVM series is built against it).
	Types: deb-src
	URIs: http://deb.debian.org/debian
	Suites: trixie bookworm-backports
	Components: main
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

	Types: deb
	URIs: http://deb.debian.org/debian
	Suites: bookworm-backports
	Components: main
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	SRC
	)
	if [ "$(cat "$PUMA_APT_SOURCES" 2>/dev/null)" != "$want" ]; then
		info "configuring apt sources in $PUMA_APT_SOURCES"
		printf '%s\n' "$want" >"$PUMA_APT_SOURCES"
		rm -f "$PUMA_CACHE/.apt-updated"
	fi
	# Refresh the lists once a day at most (and on first use).
	if [ -z "$(find "$PUMA_CACHE/.apt-updated" -mmin -1440 2>/dev/null)" ]; then
		info "apt-get update"
		apt-get update -qq || die "apt-get update failed"
		mkdir -p "$PUMA_CACHE" && touch "$PUMA_CACHE/.apt-updated"
	fi
}

# missing_packages PKG... - those not installed.
missing_packages()
{
	local p
	for p in "$@"; do
		dpkg-query -W -f '${Status}\n' "$p" 2>/dev/null |
			grep -q '^install ok installed$' || echo "$p"
	done
}

install_deps()
{
	local missing
	require_root
	configure_apt_sources
	export DEBIAN_FRONTEND=noninteractive
	missing=$(missing_packages $PUMA_APT_BACKPORTS)
	if [ -n "$missing" ]; then
		info "installing from bookworm-backports:" $missing
		apt-get install -y -qq --no-install-recommends -t bookworm-backports \
			$missing >/dev/null || die "apt-get install $missing failed"
	fi
	dpkg --compare-versions "$(meson --version)" ge 1.5 ||
		die "meson $(meson --version) is too old for QEMU 10.0 (need >= 1.5)"
	missing=$(missing_packages $PUMA_APT_PACKAGES)
	if [ -n "$missing" ]; then
		info "installing Debian packages:" $missing
		apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
			die "apt-get install failed for:" $missing
	fi
	install_daemons
	install_venv
}

# install_daemons - $PUMA_APT_DAEMONS without their system-wide services:
# a policy-rc.d keeps the postinst from starting them (unless one already
# exists, e.g. in containers) and the units are disabled at boot.
install_daemons()
{
	local missing policy=/usr/sbin/policy-rc.d ours= p
	missing=$(missing_packages $PUMA_APT_DAEMONS)
	[ -n "$missing" ] || return 0
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\n# lab/setup deps: no service starts now\nexit 101\n' \
			>"$policy"
		chmod 755 "$policy"
		ours=1
	fi
	info "installing Debian packages (services not started):" $missing
	p=0
	apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
		p=$?
	[ -z "$ours" ] || rm -f "$policy"
	[ $p -eq 0 ] || die "apt-get install failed for:" $missing
	if [ -d /run/systemd/system ]; then
		for p in $missing; do
			systemctl disable "$p.service" >/dev/null 2>&1 || true
		done
	else
		for p in $missing; do
			update-rc.d "$p" disable >/dev/null 2>&1 || true
		done
	fi
}

# install_venv - $PUMA_VENV with tox and the lab requirements, rebuilt when
# lab/requirements.txt changes.
install_venv()
{
	local req=$PUMA_TOP/lab/requirements.txt stamp
	stamp="$(content_hash "$req") tox"
	[ "$(cat "$PUMA_VENV/.puma-stamp" 2>/dev/null)" = "$stamp" ] && return 0
	info "creating the lab Python environment in $PUMA_VENV"
	rm -rf "$PUMA_VENV"
	/usr/bin/python3 -m venv "$PUMA_VENV" || die "python3 -m venv failed"
	"$PUMA_VENV/bin/pip" install -q --upgrade pip >/dev/null &&
		"$PUMA_VENV/bin/pip" install -q tox -r "$req" ||
		die "pip install of the lab requirements failed"
	echo "$stamp" >"$PUMA_VENV/.puma-stamp"
}
