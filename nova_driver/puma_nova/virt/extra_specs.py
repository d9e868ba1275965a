# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Validators of the ``puma:`` flavor extra specs for nova-api.

Registered with the ``nova.api.extra_spec_validators`` entry point: with
puma-nova installed where nova-api runs, API microversion 2.86 and later
reject unknown ``puma:`` keys and bad values.
"""

from nova.api.validation.extra_specs import base

EXTRA_SPEC_VALIDATORS = [
    base.ExtraSpecValidator(
        name='puma:split',
        description=(
            'Whether a live migration may split the instance when it does '
            'not fit in the free memory of the destination: part of its '
            'memory stays resident there, the rest is served by a memory '
            'server on a sub host.'
        ),
        value={
            'type': str,
            'enum': ['allowed', 'forbidden'],
        },
    ),
    base.ExtraSpecValidator(
        name='puma:shoot4u',
        description=(
            'Whether the guest gets the Shoot4U paravirtual remote TLB '
            'shootdown (libvirt <kvm><pv-tlb-shootdown/></kvm>).'
        ),
        value={
            'type': bool,
        },
    ),
    base.ExtraSpecValidator(
        name='puma:page_merging',
        description=(
            'Whether the host may merge the guest\'s identical pages with '
            'other VMs\' (KSM). false gives libvirt <nosharepages/>: no '
            'cross-VM deduplication side channel, and no memory saved by '
            'merging.'
        ),
        value={
            'type': bool,
        },
    ),
    base.ExtraSpecValidator(
        name='puma:exclusive_cache',
        description=(
            'Whether the host drops from its page cache what the guest has '
            'just read from its disks (libvirt <driver '
            'exclusive_cache=\'on\'/>, QEMU exclusive-cache), so that '
            'blocks the guest caches are not held twice. Applies to disks '
            'that use the host page cache; hosts that offer it have the '
            'trait CUSTOM_PUMA_EXCLUSIVE_CACHE.'
        ),
        value={
            'type': bool,
        },
    ),
    base.ExtraSpecValidator(
        name='puma:lending',
        description=(
            'Whether the guest gets a lending-channel interface on the '
            'host bridge [puma] lending_bridge, to lend or borrow page '
            'cache with its authorised peers.'
        ),
        value={
            'type': bool,
        },
    ),
]


def register():
    return EXTRA_SPEC_VALIDATORS
