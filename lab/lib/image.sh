# SPDX-License-Identifier: Apache-2.0
# lab/lib/image.sh - the guest image: one read-only ext4 root shared by every
# guest, plus a small initramfs per guest kernel.
#
# Depends on: lib/common.sh, lib/kernels.sh (install_kernels has run)
# Call order: install_image (idempotent).
#
# Why debootstrap minbase and not busybox: tests run Debian's fio, stress-ng
# and qemu-guest-agent, which are dynamically linked; minbase gives them
# their libraries and the same userspace as a Debian cloud guest. The root
# is made with "mkfs.ext4 -d" (no loop mount, no root-only mount step) and
# is read-only under a tmpfs overlay, so all guests share one file and
# libvirt can migrate them without copying storage.
#
# Layout: $PUMA_CACHE/image/base-KEY/      debootstrap result
#         $PUMA_CACHE/image/KEY/root.img   ext4 root
#         $PUMA_CACHE/image/KEY/initrd-NAME.img
#         $PUMA_CACHE/image/current -> KEY

PUMA_IMAGE_SH=${BASH_SOURCE[0]}
PUMA_GUEST_SUITE=bookworm
PUMA_GUEST_MIRROR=http://deb.debian.org/debian
PUMA_GUEST_PACKAGES="fio,sqlite3,stress-ng,qemu-guest-agent,kmod,iproute2,iputils-ping,procps,xfsprogs,util-linux,e2fsprogs,busybox"
# Modules the guests load (with their dependencies from modules.dep); the
# crypto ones are the AES-GCM a Puma borrower seals its pages with.
PUMA_GUEST_MODULES="virtio_pci virtio_blk virtio_net virtio_console virtio_balloon
	virtio_rng crc32c_generic ext4 xfs overlay 9p 9pnet_virtio
	aesni_intel ghash_clmulni_intel ctr ghash_generic gcm"
PUMA_INITRD_MODULES="virtio_pci virtio_blk crc32c_generic ext4 overlay"

install_guest_base()
{
	local key dir
	key=$(printf '%s %s %s\n' "$PUMA_GUEST_SUITE" "$PUMA_GUEST_PACKAGES" \
		"$PUMA_GUEST_MIRROR" | sha256sum | cut -c1-12)
	dir=$PUMA_CACHE/image/base-$key
	if [ ! -f "$dir.good" ]; then
		info "debootstrap $PUMA_GUEST_SUITE minbase with $PUMA_GUEST_PACKAGES"
		rm -rf "$dir" "$dir.log"
		mkdir -p "$PUMA_CACHE/image"
		run_with_progress "$dir.log" debootstrap \
			debootstrap --variant=minbase --include="$PUMA_GUEST_PACKAGES" \
			"$PUMA_GUEST_SUITE" "$dir" "$PUMA_GUEST_MIRROR" ||
			die "debootstrap of the guest root failed; log: $dir.log"
		rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
		touch "$dir.good"
	fi
	echo "$dir"
}

# copy_modules KROOT RELEASE DEST MODULES - MODULES and their dependencies
# from the unpacked kernel, decompressed (busybox modprobe reads plain .ko).
copy_modules()
{
	local kroot=$1 rel=$2 dest=$3 mods=$4 src m f dep
	src=$kroot/lib/modules/$rel
	[ -f "$src/modules.dep" ] || die "no modules.dep in $src (run lab/setup kernels)"
	mkdir -p "$dest/lib/modules/$rel"
	for m in $mods; do
		f=$(grep -E "/${m//_/[_-]}\.ko(\.xz|\.zst)?:" "$src/modules.dep" | head -n 1) || true
		if [ -z "$f" ]; then
			grep -qE "/${m//_/[_-]}\.ko" "$src/modules.builtin" ||
				die "guest kernel $rel has no module $m"
			continue
		fi
		for dep in ${f%%:*} ${f#*:}; do
			mkdir -p "$dest/lib/modules/$rel/$(dirname "$dep")"
			case "$dep" in
			*.xz) xz -dc "$src/$dep" >"$dest/lib/modules/$rel/${dep%.xz}" ;;
			*.zst) zstd -qdc "$src/$dep" >"$dest/lib/modules/$rel/${dep%.zst}" ;;
			*) cp "$src/$dep" "$dest/lib/modules/$rel/$dep" ;;
			esac
		done
	done
	cp "$src/modules.builtin" "$src/modules.order" "$dest/lib/modules/$rel/"
	cp "$src/modules.builtin.modinfo" "$dest/lib/modules/$rel/" 2>/dev/null || true
	depmod -b "$dest" "$rel" || die "depmod for $rel failed"
}

build_initrd()
{
	local name=$1 out=$2 rel kroot tmp
	rel=$(kernel_release "$name")
	kroot=$PUMA_CACHE/kernels/$name/root
	tmp=$(mktemp -d)
	mkdir -p "$tmp/bin" "$tmp/proc" "$tmp/sys" "$tmp/dev"
	cp /bin/busybox "$tmp/bin/busybox"
	cp "$PUMA_TOP/lab/guest/initramfs-init" "$tmp/init"
	copy_modules "$kroot" "$rel" "$tmp" "$PUMA_INITRD_MODULES"
	(cd "$tmp" && find . | cpio -o -H newc --quiet | gzip -1) >"$out" ||
		die "cannot build the initramfs for $name"
	rm -rf "$tmp"
}

install_image()
{
	local base key dir stage k rel size
	require_cmd debootstrap mkfs.ext4 cpio busybox depmod gcc
	base=$(install_guest_base) || exit 1
	key=$( (echo "$base"; for k in $PUMA_KERNELS; do kernel_release "$k"; done) |
		cat - <(content_hash "$PUMA_IMAGE_SH" "$PUMA_TOP/lab/guest") |
		sha256sum | cut -c1-12)
	dir=$PUMA_CACHE/image/$key
	if [ -f "$dir/good" ]; then
		ln -sfn "$key" "$PUMA_CACHE/image/current"
		info "guest image is up to date in $dir"
		return 0
	fi
	info "building the guest image in $dir"
	rm -rf "$dir" && mkdir -p "$dir"
	stage=$dir/stage
	cp -a "$base" "$stage"
	install -m0755 "$PUMA_TOP/lab/guest/puma-init" "$stage/sbin/puma-init"
	gcc -O2 -Wall -static -o "$stage/usr/local/bin/memverify" \
		"$PUMA_TOP/lab/guest/memverify.c" || die "cannot build memverify"
	gcc -O2 -Wall -static -pthread -o "$stage/usr/local/bin/tlbstorm" \
		"$PUMA_TOP/lab/guest/tlbstorm.c" || die "cannot build tlbstorm"
	gcc -O2 -Wall -static -o "$stage/usr/local/bin/hcprobe" \
		"$PUMA_TOP/lab/guest/hcprobe.c" || die "cannot build hcprobe"
	gcc -O2 -Wall -static -pthread -o "$stage/usr/local/bin/mmiorace" \
		"$PUMA_TOP/lab/guest/mmiorace.c" || die "cannot build mmiorace"
	gcc -O2 -Wall -static -pthread -o "$stage/usr/local/bin/fstorture" \
		"$PUMA_TOP/lab/guest/fstorture.c" || die "cannot build fstorture"
	gcc -O2 -Wall -static -pthread -o "$stage/usr/local/bin/ufdwrite" \
		"$PUMA_TOP/lab/guest/ufdwrite.c" || die "cannot build ufdwrite"
	echo puma-guest >"$stage/etc/hostname"
	for k in $PUMA_KERNELS; do
		rel=$(kernel_release "$k")
		copy_modules "$PUMA_CACHE/kernels/$k/root" "$rel" "$stage" "$PUMA_GUEST_MODULES"
		build_initrd "$k" "$dir/initrd-$k.img"
	done
	size=$(du -sm "$stage" | cut -f1)
	mkfs.ext4 -q -F -L pumaroot -d "$stage" "$dir/root.img" "$((size * 13 / 10 + 64))M" ||
		die "mkfs.ext4 -d of the guest root failed"
	rm -rf "$stage"
	touch "$dir/good"
	ln -sfn "$key" "$PUMA_CACHE/image/current"
	prune_cache "$PUMA_CACHE/image" "$key"
	info "guest image ready: $dir/root.img (${size} MiB of files)"
}
