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

"""The cache-lending channel of this host.

Puma-enabled instances (flavor ``puma:lending=true``) reach their
lending peers over an isolated interface (host side ``pl-<uuid>``) on a
host bridge (``[puma] lending_bridge``) that carries no tenant traffic.
A bridge-family nftables table lets frames through only between the
addresses of authorised borrower/lender pairs, and only from an
interface's own address; everything else touching a lending interface
is dropped. ``apply_pairs`` gives the full desired set
of pairs of the VMs on this host; the table is replaced atomically.
"""

import ipaddress
import threading

from oslo_concurrency import processutils
from oslo_log import log as logging

LOG = logging.getLogger(__name__)

TAP_PREFIX = 'pl-'
_FIELDS = ('borrower', 'lender', 'lender_address', 'borrower_address',
           'capacity_mb', 'key')


class InvalidPairs(ValueError):
    pass


def validate(pairs):
    """Check pairs as received over RPC; returns them normalised."""
    if not isinstance(pairs, list):
        raise InvalidPairs('pairs must be a list, not %s'
                           % type(pairs).__name__)
    out = []
    for i, pair in enumerate(pairs):
        if not isinstance(pair, dict):
            raise InvalidPairs('pair %d is not an object' % i)
        missing = [f for f in _FIELDS if f not in pair]
        if missing:
            raise InvalidPairs('pair %d lacks %s' % (i, ', '.join(missing)))
        try:
            lender = ipaddress.ip_address(pair['lender_address'])
            borrower = ipaddress.ip_address(pair['borrower_address'])
        except ValueError as e:
            raise InvalidPairs('pair %d: %s' % (i, e))
        if lender.version != borrower.version:
            raise InvalidPairs('pair %d mixes IPv4 and IPv6' % i)
        capacity = pair['capacity_mb']
        if (not isinstance(capacity, int) or isinstance(capacity, bool) or
                capacity <= 0):
            raise InvalidPairs('pair %d: bad capacity_mb %r' % (i, capacity))
        normal = dict(pair)
        normal['lender_address'] = str(lender)
        normal['borrower_address'] = str(borrower)
        out.append(normal)
    return out


def tap_name(instance_uuid):
    """Host-side name of an instance's lending interface (IFNAMSIZ 15)."""
    return TAP_PREFIX + instance_uuid.replace('-', '')[:11]


def ruleset(pairs, table):
    """nftables script that replaces the lending table with these pairs.

    Only frames entering or leaving a lending interface (``pl-*``) are
    filtered; other bridges of the host are left alone. A lending
    interface may only send from its own address to the address of a
    peer it is paired with; frames from other hosts (not from a lending
    interface) only between the addresses of a pair.
    """
    lines = [
        'table bridge %s' % table,
        'delete table bridge %s' % table,
        'table bridge %s {' % table,
        '  chain forward {',
        '    type filter hook forward priority 0; policy accept;',
        '    iifname != "%s*" oifname != "%s*" return'
        % (TAP_PREFIX, TAP_PREFIX),
        # Address resolution carries no lending data.
        '    ether type arp accept',
        '    icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept',
    ]
    for pair in sorted(pairs, key=lambda p: (p['borrower'], p['lender'])):
        family = ('ip' if ipaddress.ip_address(pair['lender_address'])
                  .version == 4 else 'ip6')
        ends = ((pair['borrower'], pair['borrower_address'],
                 pair['lender_address']),
                (pair['lender'], pair['lender_address'],
                 pair['borrower_address']))
        for src_uuid, src, dst in ends:
            # From the local interface of the instance with that address,
            # or from another host (which filtered its own interfaces).
            for iif in ('"%s"' % tap_name(src_uuid),
                        '!= "%s*"' % TAP_PREFIX):
                lines.append('    iifname %s %s saddr %s %s daddr %s accept'
                             % (iif, family, src, family, dst))
    lines += ['    drop', '  }', '}', '']
    return '\n'.join(lines)


class LendingChannel(object):

    def __init__(self, bridge, table, enabled=False,
                 execute=processutils.execute):
        self.bridge = bridge
        self.table = table
        self.enabled = enabled
        self._execute = execute
        self._lock = threading.Lock()
        self.pairs = []

    def apply(self, pairs):
        pairs = validate(pairs)
        with self._lock:
            if self.enabled:
                self._execute('nft', '-f', '-',
                              process_input=ruleset(pairs, self.table))
            else:
                LOG.info('Puma lending channel disabled on this host; %d '
                         'pairs recorded, no filter programmed', len(pairs))
            self.pairs = pairs
