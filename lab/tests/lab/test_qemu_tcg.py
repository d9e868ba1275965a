# SPDX-License-Identifier: Apache-2.0
"""QEMU's TCG in the lab: MMIO reads while the memory map changes.

Debian's QEMU 10.0.13 (our base) carries upstream's fix for QEMU issue
3040, which looks a TLB entry's section index up in the address space's
current map, while the vCPU's TLB still holds indexes of the old map
until its queued flush runs. QEMU patch 0049 keeps the map the TLB was
filled from (docs/lab.md, "QEMU aborts seen in the lab").
"""

import pytest

from puma_lab import errors
from puma_lab import vm


def test_mmio_reads_never_reach_another_region(lab):
    """A guest reads a device's register while its decoding flips.

    mmiorace (lab/guest) reads the edu device's identification through a
    mapping of its BAR on one vCPU while another vCPU turns the device's
    memory decoding off and on: every read must return the
    identification or unassigned memory. Without patch 0049, reads
    returned 0xfee02000 (52 and 91 in two 10-second runs with the tool
    in the background), and in two runs of this test the guest agent
    stopped answering during the run (a read that reaches another
    device can have its side effects); the assertion `section_index <
    d->map.sections_nb` can abort QEMU instead.
    """
    g = vm.Guest(lab, 'mmio', kernel='6.12', vcpus=3, mem_mb=384,
                 extra_args=['-device', 'edu']).start().wait_booted()
    try:
        res = g.run('mmiorace -t 10', timeout=120, check=False)
    except errors.LabError as e:
        pytest.fail('the guest stopped answering while MMIO reads raced '
                    'with memory map changes: %s' % e)
    print(res.out)
    assert g.proc.poll() is None, 'QEMU exited; see %s' % g.qemu_log
    fields = res.out.split()
    counts = dict(zip(fields[-10::2], map(int, fields[-9::2])))
    assert set(counts) == {'reads', 'ident', 'unassigned', 'wrong',
                           'toggles'}, res.out
    # Both kinds of reads happened: the race had its chance.
    assert counts['toggles'] > 100 and counts['ident'] > 0 and \
        counts['unassigned'] > 0, counts
    assert counts['wrong'] == 0 and res.rc == 0, res.out
