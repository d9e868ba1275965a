# SPDX-License-Identifier: Apache-2.0
# lab/lib/stack.sh - the patched QEMU and libvirt, built from Debian sources.
#
# Depends on: lib/common.sh, lib/deps.sh (install_deps has run)
# Call order: install_qemu, install_libvirt, install_kvm (each idempotent;
# install_kvm after install_kernels, whose 6.12 config it uses).
#
# Each component is built in $PUMA_CACHE/<pkg>/<key>, where <key> hashes the
# Debian source version, our patch series and the configure function. The
# prefix is only published (the "good" stamp and the "current" link) once the
# build and the install succeeded, so a failed build is never used; the next
# run resumes it (ninja rebuilds only what is missing).

# src_version_candidates PKG GLOB - source versions of PKG to try, best
# first: the pinned one ($PUMA_<PKG>_VERSION) or those matching GLOB.
src_version_candidates()
{
	local pkg=$1 glob=$2 list
	list=$(apt-cache showsrc "$pkg" 2>/dev/null | sed -n 's/^Version: //p' |
		version_candidates "$(pin_var "$pkg")" "$glob")
	[ -n "$list" ] || die "no source package $pkg $glob in the apt sources (is deb-src for trixie configured? run lab/setup deps)"
	echo "$list"
}

# resolve_src_version PKG GLOB - the first of src_version_candidates whose
# source is in the cache or downloads (fetched on the way).
resolve_src_version()
{
	local pkg=$1 glob=$2 ver tried=
	for ver in $(src_version_candidates "$pkg" "$glob"); do
		if fetch_source "$pkg" "$ver"; then
			echo "$ver"
			return 0
		fi
		tried="$tried $ver"
	done
	die "no source version of $pkg ($glob) could be downloaded; tried:$tried (pin one that downloads with $(pin_var "$pkg")=VERSION)"
}

# src_sums PKG VERSION - "sha256 file" lines of the source package's files.
src_sums()
{
	apt-cache showsrc "$1" | awk -v ver="$2" '
		/^Package:/ { mine = 0 }
		/^Version:/ { mine = ($2 == ver) }
		/^Checksums-Sha256:/ { on = mine; next }
		/^[^ ]/ { on = 0 }
		on && NF == 3 { print $1, $3 }' | sort -u
}

# fetch_source PKG VERSION - download the Debian source package into
# $PUMA_CACHE/src with apt-get source and check it against the archive's
# checksums. Returns 1, with apt's reason, when the registry does not
# serve it (the index can list a version before its files are there); a
# file that does not match its checksum is fatal.
fetch_source()
{
	local pkg=$1 ver=$2 dir=$PUMA_CACHE/src sums f sum err
	mkdir -p "$dir"
	sums=$(src_sums "$pkg" "$ver")
	if [ -z "$sums" ]; then
		info "apt has no checksums for $pkg $ver"
		return 1
	fi
	if ! echo "$sums" | grep -vE '\.(dsc|asc)$' | (cd "$dir" && sha256sum -c --status - 2>/dev/null); then
		info "apt-get source $pkg=$ver"
		# Some mirrors lack the .dsc/.asc; the tarballs are checked below.
		if ! err=$(cd "$dir" && apt-get source -qq --download-only "$pkg=$ver" 2>&1 >/dev/null); then
			info "apt-get source $pkg=$ver failed: $(echo "$err" | grep -m1 -E '^(E|Err):' || echo "$err" | tail -n 1)"
		fi
	fi
	while read -r sum f; do
		if [ ! -f "$dir/$f" ]; then
			info "the registry did not serve $f of $pkg $ver"
			return 1
		fi
		echo "$sum  $dir/$f" | sha256sum -c --status ||
			die "checksum mismatch for $dir/$f"
	done < <(echo "$sums" | grep -E '\.(tar\.[a-z0-9]+)$' | grep -v '\.asc$')
}

# unpack_source PKG VERSION DEST - orig + debian tarballs, Debian's quilt
# series applied, the result committed to a git repository so that our
# series is applied (and can be developed) with git am.
unpack_source()
{
	local pkg=$1 ver=$2 dest=$3 srcdir=$PUMA_CACHE/src upver debver orig deb
	fetch_source "$pkg" "$ver" >&2 || die "cannot download the source of $pkg $ver"
	upver=${ver#*:}; debver=$upver; upver=${upver%-*}
	orig=$(ls "$srcdir/${pkg}_${upver}.orig.tar."* 2>/dev/null | grep -v '\.asc$' | head -n 1)
	deb=$(ls "$srcdir/${pkg}_${debver}.debian.tar."* 2>/dev/null | head -n 1)
	[ -n "$orig" ] && [ -n "$deb" ] || die "source tarballs of $pkg $ver missing in $srcdir"
	rm -rf "$dest" && mkdir -p "$dest"
	tar -C "$dest" --strip-components=1 -xf "$orig" || die "cannot unpack $orig"
	tar -C "$dest" -xf "$deb" || die "cannot unpack $deb"
	if [ -s "$dest/debian/patches/series" ]; then
		(cd "$dest" && QUILT_PATCHES=debian/patches quilt push -aq >/dev/null) ||
			die "Debian's patch series of $pkg $ver does not apply"
		rm -rf "$dest/.pc"
	fi
	git -C "$dest" init -q
	git -C "$dest" config gc.auto 0
	git -C "$dest" add -A -f . >/dev/null
	git -C "$dest" -c user.name=puma-lab -c user.email=puma-lab@localhost \
		commit -q -m "$pkg $ver with Debian's patches" || die "git commit of $pkg failed"
}

# apply_series TREE SERIESDIR - git am our patches; one clear error naming
# the patch that does not apply.
apply_series()
{
	local tree=$1 series=$2 p
	for p in $(series_patches "$series"); do
		if ! git -C "$tree" -c user.name=puma-lab -c user.email=puma-lab@localhost \
			am -q --keep-cr "$p" >/dev/null 2>&1; then
			git -C "$tree" am --abort >/dev/null 2>&1
			die "patch ${p#"$PUMA_TOP"/} does not apply to $(basename "$tree")"
		fi
		info "applied ${p#"$PUMA_TOP"/}"
	done
}

# stack_key PKG VERSION SERIESDIR CONFIGURE_FN - cache key for one component.
stack_key()
{
	local pkg=$1 ver=$2 series=$3 configure=$4
	printf '%s %s %s\n%s\n' "$pkg" "$ver" "$(series_hash "$series")" \
		"$(declare -f "$configure")" | sha256sum | cut -c1-16
}

# build_component PKG GLOB SERIESDIR CONFIGURE_FN [CACHE] - the shared
# pipeline: the newest source version that is built already or that the
# registry serves is built with our series, in $PUMA_CACHE/CACHE (PKG by
# default: two builds of one source package need two names).
build_component()
{
	local pkg=$1 glob=$2 series=$3 configure=$4 cache=${5:-$1} ver key base sid tried=
	# No series file is not an empty series: a checkout removed or
	# half-copied under a running setup must not build (and publish, and
	# prune the good build for) an unpatched stack.
	[ -f "$series/series" ] ||
		die "$series/series is missing: not building $pkg without its patch series"
	for ver in $(src_version_candidates "$pkg" "$glob"); do
		key=$(stack_key "$pkg" "$ver" "$series" "$configure")
		base=$PUMA_CACHE/$cache/$key
		sid=$(series_id "$series")
		if [ -f "$base/good" ]; then
			ln -sfn "$key" "$PUMA_CACHE/$cache/current"
			info "$pkg $ver (puma-$sid) is up to date in $base"
			return 0
		fi
		if [ -f "$base/unpacked" ] || fetch_source "$pkg" "$ver"; then
			build_version "$pkg" "$ver" "$series" "$configure" "$key" "$cache"
			return 0
		fi
		tried="$tried $ver"
		info "$pkg $ver cannot be downloaded; trying the next older version"
	done
	die "no source version of $pkg ($glob) could be downloaded; tried:$tried (pin one that downloads with $(pin_var "$pkg")=VERSION)"
}

# build_version PKG VERSION SERIESDIR CONFIGURE_FN KEY [CACHE] - unpack,
# apply our series, configure and build into $PUMA_CACHE/CACHE/KEY (CACHE
# is PKG by default), then publish it.
build_version()
{
	local pkg=$1 ver=$2 series=$3 configure=$4 key=$5 cache=${6:-$1} base sid
	base=$PUMA_CACHE/$cache/$key
	sid=$(series_id "$series")
	info "building $pkg $ver with series puma-$sid in $base"
	if [ ! -f "$base/unpacked" ]; then
		rm -rf "$base"
		mkdir -p "$base"
		unpack_source "$pkg" "$ver" "$base/src"
		apply_series "$base/src" "$series"
		touch "$base/unpacked"
	fi
	run_with_progress "$base/build.log" "$pkg" \
		build_in "$base/src" "$configure" "$base/prefix" "$sid" ||
		die "building $pkg failed; full log: $base/build.log"
	printf '%s\n' "$ver" >"$base/version"
	printf 'puma-%s\n' "$sid" >"$base/series-id"
	touch "$base/good"
	ln -sfn "$key" "$PUMA_CACHE/$cache/current"
	prune_cache "$PUMA_CACHE/$cache" "$key"
	info "$pkg built in $base/prefix"
}

# build_in DIR CONFIGURE_FN ARGS... - run CONFIGURE_FN ARGS in DIR.
build_in()
{
	local dir=$1
	shift
	cd "$dir" && "$@"
}

configure_qemu()
{
	local prefix=$1 sid=$2
	./configure --prefix="$prefix" --python=/usr/bin/python3 \
		--cc="ccache gcc" --cxx="ccache g++" \
		--target-list=x86_64-softmmu --with-pkgversion="puma-$sid" \
		--disable-download --disable-docs --disable-werror \
		--disable-install-blobs \
		--without-default-features --enable-tools --enable-kvm \
		--enable-tcg --enable-linux-aio --enable-linux-io-uring \
		--enable-zstd --enable-attr --enable-virtfs --enable-cap-ng \
		--enable-gnutls ||
		return 1
	ninja -C build -j"$(nproc)" && ninja -C build install || return 1
	# Debian's source drops prebuilt firmware: build the x86 option ROMs
	# (-kernel boot, vapic) as Debian does, and use Debian's SeaBIOS and
	# iPXE ROMs, all of them as qemu-system-data does (QEMU's qtests boot
	# q35 with its default e1000e NIC, for example).
	env -u ELF_PACKAGE_METADATA make -C build/pc-bios/optionrom || return 1
	install -m0644 -t "$prefix/share/qemu" build/pc-bios/optionrom/*.bin
	ln -sf /usr/share/seabios/*.bin /usr/lib/ipxe/qemu/efi-*.rom \
		"$prefix/share/qemu/"
}

configure_libvirt()
{
	local prefix=$1 sid=$2
	# runstatedir defaults to /run even with a prefix. Emulated hosts
	# bind their own directory over it; it is short because QEMU's agent
	# sockets live below it and unix socket paths are limited to 107 bytes.
	meson setup build --prefix="$prefix" --libdir=lib \
		-Drunstatedir=/run/puma-libvirtd \
		-Dpackager=puma -Dpackager_version="puma-$sid" \
		-Ddocs=disabled -Dtests=enabled -Dinit_script=none \
		-Ddriver_qemu=enabled -Ddriver_remote=enabled \
		-Ddriver_libvirtd=enabled -Ddriver_network=disabled \
		-Ddriver_lxc=disabled -Ddriver_ch=disabled -Ddriver_vbox=disabled \
		-Ddriver_esx=disabled -Ddriver_hyperv=disabled \
		-Ddriver_libxl=disabled -Ddriver_openvz=disabled \
		-Ddriver_vmware=disabled -Ddriver_vz=disabled \
		-Ddriver_bhyve=disabled -Ddriver_interface=disabled \
		-Dqemu_user=root -Dqemu_group=root \
		-Dfirewalld=disabled -Dapparmor=disabled -Dselinux=disabled \
		-Dsecdriver_apparmor=disabled -Dsecdriver_selinux=disabled \
		-Dstorage_disk=disabled -Dstorage_lvm=disabled \
		-Dstorage_iscsi=disabled -Dstorage_mpath=disabled \
		-Dstorage_rbd=disabled -Dstorage_gluster=disabled \
		-Dstorage_zfs=disabled -Dstorage_vstorage=disabled \
		-Dsasl=disabled -Dpolkit=disabled -Dwireshark_dissector=disabled \
		-Dnss=disabled -Dlibssh=disabled -Dlibssh2=disabled \
		-Dnumactl=disabled -Dfuse=disabled -Dudev=disabled \
		-Dcapng=enabled || return 1
	ninja -C build -j"$(nproc)" && ninja -C build install
}

# configure_kvm - build our KVM modules out of tree against the headers of
# the lab's stock 6.12 guest kernel, so that a kernel host running that
# kernel loads them (same vermagic and symbol versions; they taint it as
# out-of-tree and unsigned). The sources are arch/x86/kvm and virt/kvm of
# the same Debian source version with our series, and the headers our
# series changes; everything else comes from Debian's headers packages,
# copied so that the cache of the guest kernel stays untouched.
configure_kvm()
{
	local prefix=$1 sid=$2 rel kroot common work hdr f base
	rel=$(kernel_release 6.12) || return 1
	kroot=$PUMA_CACHE/kernels/6.12/root
	common=$(sed -n 's|^include \(.*\)/Makefile$|\1|p' \
		"$kroot/usr/src/linux-headers-$rel/Makefile")
	[ -d "$common" ] || { echo "no common headers for $rel" >&2; return 1; }
	work=$PWD/puma-oot
	rm -rf "$work" && mkdir -p "$work/usr/src" "$work/usr/lib"
	cp -a "$kroot/usr/src/linux-headers-$rel" "$common" "$work/usr/src/" &&
		cp -a "$kroot/usr/lib/linux-kbuild-"* "$work/usr/lib/" || return 1
	hdr=$work/usr/src/linux-headers-$rel
	common=$work/usr/src/${common##*/}
	echo "include $common/Makefile" >"$hdr/Makefile"
	# The headers our series changes (e.g. kvm_host.h), then the sources.
	base=$(git rev-list --max-parents=0 HEAD)
	for f in $(git diff --name-only "$base" HEAD -- include arch/x86/include); do
		mkdir -p "$common/${f%/*}" && cp "$f" "$common/$f" || return 1
	done
	mkdir -p "$common/virt" &&
		cp -a arch/x86/kvm "$common/arch/x86/" &&
		cp -a virt/kvm "$common/virt/" || return 1
	make -C "$hdr" M="$common/arch/x86/kvm" -j"$(nproc)" modules ||
		return 1
	mkdir -p "$prefix" && cp "$common"/arch/x86/kvm/*.ko "$prefix/" &&
		echo "$rel" >"$prefix/release" || return 1
	# KVM's selftests for kernel hosts (built against the patched tree's
	# UAPI headers): PV features (with the Shoot4U row), Shoot4U's
	# arguments, and upstream's tests of what the series touches (CPUID,
	# hypercalls, the APIC map, IPIs, remote TLB flushes).
	local t tests="kvm_pv_test shoot4u_test cpuid_test fix_hypercall_test
		recalc_apic_map_test xapic_ipi_test hyperv_tlb_flush"
	make O="$PWD/puma-hdr" headers &&
		make -C tools/testing/selftests/kvm OUTPUT="$PWD/puma-selftests" \
			KHDR_INCLUDES="-isystem $PWD/puma-hdr/usr/include" \
			-j"$(nproc)" $(for t in $tests; do
				echo "$PWD/puma-selftests/x86_64/$t"; done) &&
		mkdir -p "$prefix/selftests" || return 1
	for t in $tests; do
		cp "puma-selftests/x86_64/$t" "$prefix/selftests/" || return 1
	done
}

# configure_khost_kernel - the kernel-host kernel with our KSM series: the
# same Debian source as the lab's stock 6.12, configured from upstream's
# x86_64 defconfig and kvm_guest.config with what a kernel host needs
# built in (KVM for AMD, KSM, virtio, 9p, ext4, overlay, PVH boot) and no
# modules, so it boots with the lab's initramfs and image unchanged. Much
# smaller than Debian's config, so it builds in minutes (ccache). The
# prefix holds the ELF vmlinux (PVH boot), its config and its release.
configure_khost_kernel()
{
	local prefix=$1 sid=$2 out=$PWD/puma-build
	mkdir -p "$out" &&
		cat >"$out/puma.config" <<-EOF &&
		CONFIG_LOCALVERSION="-puma-$sid"
		CONFIG_LOCALVERSION_AUTO=n
		CONFIG_MODULES=n
		CONFIG_DEBUG_INFO_NONE=y
		CONFIG_PVH=y
		CONFIG_KVM=y
		CONFIG_KVM_AMD=y
		CONFIG_KVM_INTEL=n
		CONFIG_KSM=y
		CONFIG_TRANSPARENT_HUGEPAGE=y
		CONFIG_VIRTIO_PCI=y
		CONFIG_VIRTIO_BLK=y
		CONFIG_VIRTIO_NET=y
		CONFIG_VIRTIO_CONSOLE=y
		CONFIG_VIRTIO_BALLOON=y
		CONFIG_HW_RANDOM_VIRTIO=y
		CONFIG_NET_9P=y
		CONFIG_NET_9P_VIRTIO=y
		CONFIG_9P_FS=y
		CONFIG_9P_FS_POSIX_ACL=y
		CONFIG_OVERLAY_FS=y
		CONFIG_EXT4_FS=y
		CONFIG_XFS_FS=y
		CONFIG_TMPFS=y
		CONFIG_TMPFS_POSIX_ACL=y
		CONFIG_DEBUG_FS=y
		CONFIG_CRYPTO_CRC32C=y
		CONFIG_MEMCG=y
		CONFIG_CGROUPS=y
		CONFIG_TUN=y
		CONFIG_BRIDGE=y
		CONFIG_VETH=y
		CONFIG_VHOST_NET=y
		CONFIG_IKCONFIG=y
		CONFIG_IKCONFIG_PROC=y
		CONFIG_DRM=n
		CONFIG_SOUND=n
		CONFIG_USB_SUPPORT=n
		CONFIG_WLAN=n
		CONFIG_WIRELESS=n
		CONFIG_CFG80211=n
		CONFIG_ETHERNET=n
		CONFIG_AGP=n
		CONFIG_HID=n
		CONFIG_MEDIA_SUPPORT=n
		CONFIG_SECURITY_SELINUX=n
		CONFIG_NETFILTER=n
		CONFIG_WATCHDOG=n
		EOF
		make -s O="$out" x86_64_defconfig kvm_guest.config >/dev/null &&
		scripts/kconfig/merge_config.sh -m -O "$out" "$out/.config" \
			"$out/puma.config" >/dev/null &&
		make -s O="$out" olddefconfig || return 1
	# Every line of the fragment must hold in the final config.
	local want
	while read -r want; do
		case "$want" in
		*=n) grep -qx "${want%=n}=y" "$out/.config" && {
			echo "khost kernel config: $want did not hold" >&2; return 1; } ;;
		*) grep -qx "$want" "$out/.config" || {
			echo "khost kernel config: $want did not hold" >&2; return 1; } ;;
		esac
	done <"$out/puma.config"
	make O="$out" CC="ccache gcc" -j"$(nproc)" vmlinux || return 1
	mkdir -p "$prefix" && cp "$out/vmlinux" "$out/.config" "$prefix/" &&
		make -s O="$out" kernelrelease >"$prefix/release"
}

install_khost_kernel()
{
	local ver
	# The source of the lab's stock 6.12, so that the two differ only by
	# our series and the configuration.
	ver=$(kernel_source_version 6.12)
	[ -n "$ver" ] || die "cannot find the source version of guest kernel 6.12 (run lab/setup kernels)"
	build_component "$LINUX_SRC_PKG" "$ver" \
		"$PUMA_TOP/ksm-patches" configure_khost_kernel khost-kernel
}

# kernel_source_version NAME - the version of Debian's linux source that
# guest kernel NAME was built from (the source of its headers package).
kernel_source_version()
{
	local name=$1 rel meta
	rel=$(kernel_release "$name") || return 1
	meta=$(cat "$PUMA_CACHE/kernels/$name/version")
	apt-cache show "linux-headers-$rel=$meta" 2>/dev/null | awk '
		/^Source:/ && NF > 2 { v = $3; gsub(/[()]/, "", v) }
		/^Version:/ && !ver { ver = $2 }
		END { print (v != "" ? v : ver) }'
}

install_kvm()
{
	local ver
	# Exactly the kernel host's kernel: other versions do not load into it.
	ver=$(kernel_source_version 6.12)
	[ -n "$ver" ] || die "cannot find the source version of guest kernel 6.12 (run lab/setup kernels)"
	build_component "$LINUX_SRC_PKG" "$ver" \
		"$PUMA_TOP/kvm-patches" configure_kvm
}

install_qemu()
{
	build_component "$QEMU_SRC_PKG" "$QEMU_SRC_VERSION_GLOB" \
		"$PUMA_TOP/qemu-patches" configure_qemu
	install_ivshmem_server
}

# QEMU builds contrib/ivshmem-server but "meson install" leaves it out:
# copy it into the prefix when it is missing (the same-host Puma
# transport's lab tests start one per guest pair, puma_lab/ivshmem.py).
# Not part of configure_qemu on purpose: that function is hashed into the
# build key (stack_key), and changing it would rebuild QEMU for a binary
# that is built already.
install_ivshmem_server()
{
	local base=$PUMA_CACHE/$QEMU_SRC_PKG/current
	local bin=$base/src/build/contrib/ivshmem-server/ivshmem-server
	[ -x "$base/prefix/bin/ivshmem-server" ] && return 0
	[ -x "$bin" ] ||
		die "$bin is missing: QEMU in $base was built without it"
	install -m0755 "$bin" "$base/prefix/bin/ivshmem-server"
	info "ivshmem-server installed in $base/prefix/bin"
}

install_libvirt()
{
	build_component "$LIBVIRT_SRC_PKG" "$LIBVIRT_SRC_VERSION_GLOB" \
		"$PUMA_TOP/libvirt-patches" configure_libvirt
}
