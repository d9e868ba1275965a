# SPDX-License-Identifier: Apache-2.0
# lab/lib/kernels.sh - Debian guest kernels, downloaded and unpacked without
# installing them into the host.
#
# Depends on: lib/common.sh, lib/deps.sh (apt sources configured)
# Call order: install_kernels, or install_kernel NAME for one of $PUMA_KERNELS.
#
# Layout: $PUMA_CACHE/kernels/NAME/{release,version,root/,good}
#   root/boot/vmlinuz-RELEASE, root/lib/modules/RELEASE,
#   root/usr/src/linux-headers-RELEASE (the KDIR for module builds),
#   vmlinux (the ELF inside vmlinuz, which QEMU boots through PVH).

# check_kernel_name NAME - one clear error for a kernel the lab does not know.
check_kernel_name()
{
	case " $PUMA_KERNELS " in
	*" $1 "*) ;;
	*) die "unknown guest kernel '$1' (known: $PUMA_KERNELS)" ;;
	esac
}

# kernel_meta_versions NAME - versions of linux-image-amd64 for upstream
# series NAME to try, best first: $PUMA_KERNEL_<NAME>_VERSION if set, else
# those in the apt sources, newest first.
kernel_meta_versions()
{
	local name=$1 list
	list=$(apt-cache madison linux-image-amd64 |
		awk -F'|' '/Packages$/ {gsub(/ /, "", $2); print $2}' |
		version_candidates "$(pin_var "kernel_$name")" "$name.*")
	[ -n "$list" ] || die "no linux-image-amd64 $name.x in the apt sources (run lab/setup deps)"
	echo "$list"
}

# pkg_dep PKG VERSION PATTERN - the first dependency of PKG=VERSION matching PATTERN.
pkg_dep()
{
	apt-cache show "$1=$2" 2>/dev/null | sed -n 's/^Depends: //p' | head -n 1 |
		tr ',|' '\n\n' | sed 's/(.*//; s/ //g' | grep -E "$3" | head -n 1
}

install_kernel()
{
	local name=$1 dir meta tried=
	check_kernel_name "$name"
	dir=$PUMA_CACHE/kernels/$name
	for meta in $(kernel_meta_versions "$name"); do
		if [ -f "$dir/good" ] && [ "$(cat "$dir/version")" = "$meta" ]; then
			info "guest kernel $name: $(cat "$dir/release") is up to date"
			extract_vmlinux "$name"
			return 0
		fi
		if unpack_kernel "$name" "$meta"; then
			extract_vmlinux "$name"
			return 0
		fi
		tried="$tried $meta"
		info "guest kernel $name: $meta cannot be downloaded; trying the next older version"
	done
	die "no linux-image-amd64 $name.x could be downloaded; tried:$tried (pin one that downloads with $(pin_var "kernel_$name")=VERSION)"
}

# unpack_kernel NAME META - download the image and headers of
# linux-image-amd64=META and unpack them into $PUMA_CACHE/kernels/NAME.
# Returns 1 when the registry does not serve them.
unpack_kernel()
{
	local name=$1 meta=$2 dir image release hdr common kbuild debs err
	dir=$PUMA_CACHE/kernels/$name
	image=$(pkg_dep linux-image-amd64 "$meta" '^linux-image-')
	release=${image#linux-image-}
	hdr=linux-headers-$release
	common=$(pkg_dep "$hdr" "$meta" '^linux-headers-.*-common$')
	kbuild=$(pkg_dep "$hdr" "$meta" '^linux-kbuild-')
	[ -n "$image" ] && [ -n "$common" ] && [ -n "$kbuild" ] ||
		die "cannot resolve the packages of guest kernel $name ($meta)"
	info "guest kernel $name: downloading $image $hdr $common $kbuild ($meta)"
	# Download beside the installed kernel, which stays until this worked.
	rm -rf "$dir.debs" && mkdir -p "$dir.debs"
	if ! err=$(cd "$dir.debs" && apt-get download -qq "$image=$meta" "$hdr=$meta" \
		"$common=$meta" "$kbuild" 2>&1 >/dev/null); then
		info "apt-get download of guest kernel $name ($meta) failed: $(echo "$err" | grep -m1 -E '^(E|Err):' || echo "$err" | tail -n 1)"
		rm -rf "$dir.debs"
		return 1
	fi
	rm -rf "$dir" && mkdir -p "$dir/root"
	for debs in "$dir".debs/*.deb; do
		dpkg-deb -x "$debs" "$dir/root" || die "cannot unpack $debs"
	done
	rm -rf "$dir.debs"
	# The headers' "build" and "scripts" links point into /usr/lib and
	# /usr/src: make them relative to our private root.
	ln -sfn "../../../usr/src/$hdr" "$dir/root/lib/modules/$release/build"
	sed -i "s|include /usr/src/|include $dir/root/usr/src/|" \
		"$dir/root/usr/src/$hdr/Makefile"
	[ -f "$dir/root/boot/vmlinuz-$release" ] ||
		die "guest kernel $name: no vmlinuz-$release in $image"
	# Installing the package would run depmod; do it in the private root.
	depmod -b "$dir/root" "$release" || die "depmod for $release failed"
	echo "$release" >"$dir/release"
	echo "$meta" >"$dir/version"
	touch "$dir/good"
	info "guest kernel $name: $release unpacked in $dir/root"
}

# extract_vmlinux NAME - the uncompressed ELF kernel of guest kernel NAME,
# which QEMU boots directly through its PVH entry point (no real-mode setup
# and no decompression under TCG: lab guests are ready in about half the
# time).  Debian ships only vmlinuz; lab/puma_lab/bzimage.py unpacks it.
extract_vmlinux()
{
	local dir=$PUMA_CACHE/kernels/$1 release
	release=$(cat "$dir/release")
	[ "$dir/vmlinux" -nt "$dir/root/boot/vmlinuz-$release" ] && return 0
	PYTHONPATH=$PUMA_TOP/lab /usr/bin/python3 -m puma_lab.bzimage \
		"$dir/root/boot/vmlinuz-$release" "$dir/vmlinux" ||
		die "guest kernel $1: cannot unpack vmlinux from vmlinuz-$release"
	info "guest kernel $1: vmlinux for PVH boot in $dir"
}

install_kernels()
{
	local k
	for k in $PUMA_KERNELS; do
		install_kernel "$k"
	done
}

# kernel_release NAME - the unpacked release string (after install_kernel).
kernel_release()
{
	check_kernel_name "$1"
	[ -f "$PUMA_CACHE/kernels/$1/good" ] || die "guest kernel $1 is not installed (run lab/setup kernels)"
	cat "$PUMA_CACHE/kernels/$1/release"
}
