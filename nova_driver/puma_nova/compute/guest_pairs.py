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

"""The lending pairs of this host's instances, told to their guests.

puma-scheduler pushes each host the pairs of its instances
(``apply_pairs``); :mod:`puma_nova.compute.lending` lets their traffic
through the lending channel's filter, and this module tells each guest
whom it lends to and borrows from. It runs the guest's ``puma-pairs``
(shipped with the Puma guest module, ``guest-kmod/tools``) through the
instance's qemu-guest-agent with a description of its pairs on standard
input (``guest-exec`` input-data: the pair keys are in no command line),
the lending interface named by its MAC so that the guest scopes the
link-local addresses to it::

    link fa:16:3f:8e:42:9e
    lend fe80::f816:3fff:feab:3f5f 6c1f...      (lender: its borrowers)
    borrow fe80::f816:3fff:fe8e:429e 7400 9d0e... (borrower: its lenders)

A guest whose pairs are all gone gets an empty description (role off).

Guests are told from a thread of their own (:meth:`GuestPairs.sync`),
never inside the scheduler's RPC call: a guest agent may be slow or
absent. What a guest accepted is remembered; a guest that failed (no
agent, no module, an error) is tried again at the next sync, and a guest
that left the host is forgotten.
"""

import threading

from oslo_log import log as logging

from puma_nova.compute import guest_agent
from puma_nova import lending_address

LOG = logging.getLogger(__name__)

TOOL = 'puma-pairs'


def describe(pairs, uuid, port):
    """What ``puma-pairs`` in instance UUID is given for PAIRS."""
    lines = ['link %s' % lending_address.mac(uuid)]
    for p in sorted(pairs, key=lambda p: (p['lender'], p['borrower'])):
        if p['lender'] == uuid:
            lines.append('lend %s %s' % (p['borrower_address'], p['key']))
        if p['borrower'] == uuid:
            lines.append('borrow %s %d %s' % (p['lender_address'], port,
                                              p['key']))
    return '\n'.join(lines) + '\n'


class GuestPairs(object):
    """Keeps the guests of this host told of their pairs.

    :param lookup: uuid -> the libvirt domain of that instance on this
        host, or None if it does not run here.
    :param port: the TCP port lenders listen on.
    :param timeout: seconds one guest agent command may take.
    :param agent: (domain, timeout) -> guest_agent.Agent (tests).
    """

    def __init__(self, lookup, port, timeout, agent=guest_agent.Agent):
        self._lookup = lookup
        self._port = port
        self._timeout = timeout
        self._agent = agent
        self._lock = threading.Lock()
        self._wanted = {}      # uuid -> description
        self._told = {}        # uuid -> description the guest accepted
        self.changed = threading.Event()

    def set_pairs(self, pairs):
        """The whole set of pairs of this host's instances."""
        involved = {p[end] for p in pairs for end in ('lender', 'borrower')}
        with self._lock:
            # Guests told of pairs before, and in none now, are told so.
            wanted = {u: describe([], u, self._port)
                      for u in set(self._told) | set(self._wanted)}
            for uuid in involved:
                wanted[uuid] = describe(
                    [p for p in pairs if uuid in (p['lender'],
                                                  p['borrower'])],
                    uuid, self._port)
            self._wanted = wanted
        self.changed.set()

    def sync(self):
        """Tell every guest whose pairs changed; returns how many failed."""
        self.changed.clear()
        with self._lock:
            todo = {u: d for u, d in self._wanted.items()
                    if self._told.get(u) != d}
        failed = 0
        for uuid, text in sorted(todo.items()):
            domain = self._lookup(uuid)
            if domain is None:
                # Not (or no longer) on this host: its new host tells it.
                with self._lock:
                    self._forget(uuid, text)
                continue
            try:
                self._tell(uuid, domain, text)
            except guest_agent.AgentError as e:
                failed += 1
                LOG.warning('Puma: instance %s was not told of its lending '
                            'pairs (tried again later): %s', uuid, e)
                continue
            with self._lock:
                if self._wanted.get(uuid) == text:
                    self._told[uuid] = text
                    if text == describe([], uuid, self._port):
                        # Told it has none: nothing more to remember.
                        self._forget(uuid, text)
        return failed

    def _forget(self, uuid, text):
        if self._wanted.get(uuid) == text:
            del self._wanted[uuid]
        self._told.pop(uuid, None)

    def _tell(self, uuid, domain, text):
        agent = self._agent(domain, self._timeout)
        code, out, err = agent.run(TOOL, stdin=text)
        if code != 0:
            raise guest_agent.AgentError('%s exited with %d: %s' % (
                TOOL, code, (err or out).strip()[:300]))
        LOG.info('Puma: instance %s: %s', uuid, out.strip()[:200])
