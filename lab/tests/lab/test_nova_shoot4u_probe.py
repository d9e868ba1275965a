# SPDX-License-Identifier: Apache-2.0
"""The Puma Nova driver's Shoot4U probe against a real patched libvirtd."""

import os
import sys

from puma_lab import host as host_mod
from puma_lab import virsh_conn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', '..',
                                'nova_driver'))
from puma_nova.virt import shoot4u_probe  # noqa: E402


def test_probe_finds_pv_tlb_shootdown(lab):
    h = host_mod.Host(lab, 'a').start()
    conn = virsh_conn.VirshConnection(h)
    supported, detail = shoot4u_probe.probe(conn, 'qemu')
    assert (supported, detail) == (True, None)
    # The probe leaves no domain behind.
    assert h.virsh('list', '--all', '--name').split() == []


def test_probe_sees_unknown_kvm_features_refused(lab):
    # An unpatched libvirt treats pv-tlb-shootdown like this unknown
    # element: the probe must then report no support.
    h = host_mod.Host(lab, 'a').start()
    supported, detail = shoot4u_probe.probe(
        virsh_conn.VirshConnection(h), 'qemu', element='puma-no-such-feature')
    assert not supported
    assert 'puma-no-such-feature' in detail
    assert h.virsh('list', '--all', '--name').split() == []
