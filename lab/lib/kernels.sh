# SPDX-License-Identifier: Apache-2.0
# lab/lib/kernels.sh - Debian guest kernels, downloaded and unpacked without
# installing them into the host.
#
# Depends on: lib/common.sh, lib/deps.sh (apt sources configured)
# Call order: install_kernels, or install_kernel NAME for one of $PUMA_KERNELS.
#
# Layout: $PUMA_CACHE/kernels/NAME/{release,version,root/,good}
#   root/boot/vmlinuz-RELEASE, root/lib/modules/RELEASE,
#   root/usr/src/linux-headers-RELEASE (the KDIR for module builds).

# check_kernel_name NAME - one clear error for a kernel the lab does not know.
check_kernel_name()
{
	case " $PUMA_KERNELS " in
	*" $1 "*) ;;
	*) die "unknown guest kernel '$1' (known: $PUMA_KERNELS)" ;;
	esac
}

# kernel_meta_version NAME - newest linux-image-amd64 for upstream series NAME.
kernel_meta_version()
{
	local name=$1 best
	best=$(apt-cache madison linux-image-amd64 |
		awk -F'|' '/Packages$/ {gsub(/ /, "", $2); print $2}' |
		newest_version "$name.*")
	[ -n "$best" ] || die "no linux-image-amd64 $name.x in the apt sources (run lab/setup deps)"
	echo "$best"
}

# pkg_dep PKG VERSION PATTERN - the first dependency of PKG=VERSION matching PATTERN.
pkg_dep()
{
	apt-cache show "$1=$2" 2>/dev/null | sed -n 's/^Depends: //p' | head -n 1 |
		tr ',|' '\n\n' | sed 's/(.*//; s/ //g' | grep -E "$3" | head -n 1
}

install_kernel()
{
	local name=$1 dir meta image release hdr common kbuild debs
	check_kernel_name "$name"
	dir=$PUMA_CACHE/kernels/$name
	meta=$(kernel_meta_version "$name")
	if [ -f "$dir/good" ] && [ "$(cat "$dir/version")" = "$meta" ]; then
		info "guest kernel $name: $(cat "$dir/release") is up to date"
		return 0
	fi
	image=$(pkg_dep linux-image-amd64 "$meta" '^linux-image-')
	release=${image#linux-image-}
	hdr=linux-headers-$release
	common=$(pkg_dep "$hdr" "$meta" '^linux-headers-.*-common$')
	kbuild=$(pkg_dep "$hdr" "$meta" '^linux-kbuild-')
	[ -n "$image" ] && [ -n "$common" ] && [ -n "$kbuild" ] ||
		die "cannot resolve the packages of guest kernel $name ($meta)"
	info "guest kernel $name: downloading $image $hdr $common $kbuild ($meta)"
	rm -rf "$dir" && mkdir -p "$dir/debs" "$dir/root"
	(cd "$dir/debs" && apt-get download -qq "$image=$meta" "$hdr=$meta" \
		"$common=$meta" "$kbuild" >/dev/null) ||
		die "apt-get download of guest kernel $name ($meta) failed"
	for debs in "$dir"/debs/*.deb; do
		dpkg-deb -x "$debs" "$dir/root" || die "cannot unpack $debs"
	done
	rm -rf "$dir/debs"
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
