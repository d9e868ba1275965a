# SPDX-License-Identifier: Apache-2.0
# lab/lib/nova.sh - a Python environment that runs the Puma Nova driver
# against the lab's patched libvirtd (lab/tests/lab/test_nova_split_smoke.py).
#
# Depends on: lib/common.sh, lib/deps.sh (install_deps has run),
# lib/stack.sh (install_libvirt has run)
# Call order: install_nova_venv (idempotent; a second run only checks).
#
# $PUMA_CACHE/nova/KEY/venv holds nova_driver/requirements.txt and the
# requirements of every extra of nova_driver/setup.cfg (Nova 34 and the
# oslo libraries, from PyPI) and libvirt-python built from its sdist
# against the patched libvirt, linked with an rpath to that prefix. KEY
# hashes the requirements (the extras' too), the libvirt-python version
# and the libvirt build, so a new libvirt gets a new environment.
# puma_nova itself is not installed: the lab puts nova_driver/ of the
# checkout on PYTHONPATH.
#
# libvirt-python generates its bindings from libvirt's API description
# (libvirt-api.xml), which libvirt installs only with its docs; the lab
# builds libvirt with -Ddocs=disabled, so nova_api_xml runs libvirt's own
# scripts/apibuild.py on the patched source tree instead, into this cache
# folder, and a copy of the prefix's .pc files points libvirt-python there.
# The lab's own venv ($PUMA_CACHE/venv, tox) stays small.

# libvirt-python of the libvirt release the series is based on.
PUMA_LIBVIRT_PYTHON=${PUMA_LIBVIRT_PYTHON:-libvirt-python==11.3.0}

# nova_api_xml LIBVIRTDIR DEST - libvirt's API XML files and .pc files
# naming them, in DEST/docs and DEST/pkgconfig.
nova_api_xml()
{
	local lv=$1 dest=$2 pc
	mkdir -p "$dest/docs" "$dest/pkgconfig"
	# apibuild.py reads the generated headers from BUILDDIR/../include.
	ln -sfn "$lv/src/build/include" "$dest/include"
	(cd "$lv/src/docs" && /usr/bin/python3 ../scripts/apibuild.py \
		"$lv/src/docs" "$dest/docs") || return 1
	for pc in "$lv"/prefix/lib/pkgconfig/libvirt*.pc; do
		sed "s|=$lv/prefix/share/libvirt/api/|=$dest/docs/|" "$pc" \
			>"$dest/pkgconfig/${pc##*/}" || return 1
	done
	[ -s "$dest/docs/libvirt-api.xml" ]
}

# nova_extras_req - the requirements of every extra of nova_driver/
# setup.cfg (compute, controller, client), one per line: the lab runs
# all of the package's roles from the checkout.
nova_extras_req()
{
	/usr/bin/python3 - "$PUMA_TOP/nova_driver/setup.cfg" <<-'PY'
	import configparser, sys
	cfg = configparser.ConfigParser()
	cfg.read(sys.argv[1])
	seen = set()
	for name, value in sorted(cfg["extras"].items()):
	    for line in value.splitlines():
	        req = line.split("#")[0].strip()
	        if req and req not in seen:
	            seen.add(req)
	            print(req)
	PY
}

# create_nova_venv BASE REQ LVDIR - the venv with REQ, the extras' and
# libvirt-python built against the libvirt in LVDIR (which it must then
# load).
create_nova_venv()
{
	local base=$1 req=$2 lvdir=$3
	/usr/bin/python3 -m venv "$base/venv" &&
	"$base/venv/bin/pip" install --upgrade pip &&
	nova_extras_req >"$base/extras.txt" &&
	"$base/venv/bin/pip" install -r "$req" -r "$base/extras.txt" &&
	nova_api_xml "$lvdir" "$base/api" &&
	PKG_CONFIG_PATH=$base/api/pkgconfig \
	LDFLAGS="-Wl,-rpath,$lvdir/prefix/lib" \
		"$base/venv/bin/pip" install --no-binary libvirt-python \
		--no-cache-dir "$PUMA_LIBVIRT_PYTHON" &&
	"$base/venv/bin/python" -c '
import sys, libvirt
want = sys.argv[1]
if not any(want in l for l in open("/proc/self/maps")):
    sys.exit("libvirt-python does not use the libvirt in " + want)
print("libvirt client", libvirt.getVersion(), "VIR_MIGRATE_SPLIT",
      getattr(libvirt, "VIR_MIGRATE_SPLIT", None))' "$lvdir/prefix/lib/"
}

install_nova_venv()
{
	local req=$PUMA_TOP/nova_driver/requirements.txt lvdir key base log
	lvdir=$(readlink -f "$PUMA_CACHE/libvirt/current") ||
		die "libvirt is not built (run lab/setup stack)"
	[ -f "$lvdir/good" ] || die "libvirt in $lvdir is not built (run lab/setup stack)"
	key=$( { content_hash "$req"; nova_extras_req;
		echo "$PUMA_LIBVIRT_PYTHON $lvdir"; } | sha256sum | cut -c1-16)
	base=$PUMA_CACHE/nova/$key
	if [ -f "$base/good" ]; then
		ln -sfn "$key" "$PUMA_CACHE/nova/current"
		info "Nova environment is up to date in $base/venv"
		return 0
	fi
	info "creating the Nova environment in $base/venv (Nova 34, $PUMA_LIBVIRT_PYTHON)"
	rm -rf "$base"
	mkdir -p "$base"
	log=$base/install.log
	run_with_progress "$log" "Nova environment" \
		create_nova_venv "$base" "$req" "$lvdir" ||
		die "creating the Nova environment failed; full log: $log"
	printf '%s\n' "$lvdir" >"$base/libvirt"
	touch "$base/good"
	ln -sfn "$key" "$PUMA_CACHE/nova/current"
	prune_cache "$PUMA_CACHE/nova" "$key"
	info "Nova environment ready in $base/venv"
}
