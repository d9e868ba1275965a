# SPDX-License-Identifier: Apache-2.0
"""Live migration between two emulated hosts through the patched libvirt."""

from puma_lab import host as host_mod
from puma_lab import migration


def test_live_migration_keeps_memory_intact(lab):
    a = host_mod.Host(lab, 'a').start()
    b = host_mod.Host(lab, 'b').start()
    migration.start_guest(a, 'vm1', kernel='6.1', mem_mb=512, vcpus=2)
    out = migration.migrate_verified(a, b, 'vm1')
    assert out.ok, out.verify
    assert out.rounds_after > out.rounds_before
    assert 'vm1' not in a.virsh('list', '--all', '--name').split()
    assert b.virsh('domstate', 'vm1').strip() == 'running'
