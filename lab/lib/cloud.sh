# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# lab/lib/cloud.sh - the Python environment of the lab cloud's control
# plane (./lab/cloud, lab/puma_lab/cloud.py).
#
# Depends on: lib/common.sh, lib/deps.sh (install_deps has run: MariaDB
# and RabbitMQ are installed), lib/nova.sh (install_nova_venv has run:
# nova-compute runs in the Nova environment).
# Call order: install_cloud_venv, install_tempest_venv,
# install_horizon_venv (idempotent; a second run only checks).
#
# $PUMA_CACHE/cloud/KEY/venv holds lab/cloud-env/requirements.txt (Keystone,
# Placement, Glance, Nova's control services, Neutron, the openstack
# client, PyMySQL and uWSGI, all from PyPI) installed with
# lab/cloud-env/constraints.txt. KEY hashes both files, so a new pin gives a
# new environment; the older ones are pruned.

# create_pinned_venv BASE REQ CONSTRAINTS PKG... - REQ installed with
# CONSTRAINTS in BASE/venv; prints the versions of the PKGs.
create_pinned_venv()
{
	local base=$1 req=$2 con=$3
	shift 3
	/usr/bin/python3 -m venv "$base/venv" &&
	"$base/venv/bin/pip" install --upgrade pip &&
	"$base/venv/bin/pip" install -c "$con" -r "$req" &&
	"$base/venv/bin/python" -c '
import importlib.metadata as m, sys
for p in sys.argv[1:]:
    print(p, m.version(p))' "$@"
}

install_cloud_venv()
{
	local req=$PUMA_TOP/lab/cloud-env/requirements.txt
	local con=$PUMA_TOP/lab/cloud-env/constraints.txt
	install_keyed_venv cloud "$(content_hash "$req" "$con" | cut -c1-16)" \
		"cloud environment" \
		"OpenStack 2026.2 from PyPI; uWSGI is compiled, a few minutes" \
		create_pinned_venv "$req" "$con" nova keystone openstack-placement \
		glance neutron python-openstackclient uWSGI
}

# create_tempest_venv BASE REQ CONSTRAINTS - tempest in BASE/venv.
create_tempest_venv()
{
	local base=$1 req=$2 con=$3
	/usr/bin/python3 -m venv "$base/venv" &&
	"$base/venv/bin/pip" install --upgrade pip &&
	"$base/venv/bin/pip" install -c "$con" -r "$req" &&
	"$base/venv/bin/tempest" --version
}

# $PUMA_CACHE/tempest/KEY/venv: tempest from PyPI (lab/cloud-env/
# tempest-requirements.txt, the cloud's constraints), apart from the
# cloud environment so that a new tempest never rebuilds the cloud's.
# Puma's tempest plugin is not installed here: the lab cloud's test puts
# the checkout's nova_driver on PYTHONPATH (its entry point finds it).
install_tempest_venv()
{
	local req=$PUMA_TOP/lab/cloud-env/tempest-requirements.txt
	local con=$PUMA_TOP/lab/cloud-env/constraints.txt
	install_keyed_venv tempest "$(content_hash "$req" "$con" | cut -c1-16)" \
		"tempest environment" "PyPI" create_tempest_venv "$req" "$con"
}

# $PUMA_CACHE/horizon/KEY/venv: Horizon (lab/cloud-env/
# horizon-requirements.txt, the cloud's constraints) for the lab cloud's
# dashboard, and Selenium, which drives Debian's Chromium against it.
# Apart from the cloud environment: Horizon brings Django and its own
# libraries.  Puma's panel is not installed here: the cloud puts the
# checkout's puma_nova on Horizon's PYTHONPATH and links the panel's
# enabled files (devstack/lib/puma install_puma_dashboard).
install_horizon_venv()
{
	local req=$PUMA_TOP/lab/cloud-env/horizon-requirements.txt
	local con=$PUMA_TOP/lab/cloud-env/constraints.txt
	install_keyed_venv horizon "$(content_hash "$req" "$con" | cut -c1-16)" \
		"Horizon environment" "PyPI" create_pinned_venv "$req" "$con" \
		horizon Django selenium
}
