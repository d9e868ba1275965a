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

"""A guest's own counters, read through its qemu-guest-agent.

Instances whose image has ``hw_qemu_guest_agent=yes`` get a virtio-serial
channel to qemu-guest-agent from Nova. The compute host reads two files
through it with ``guest-file-open``/``read``/``close``: ``/proc/vmstat``
(page-cache refaults and disk reads, from which the scheduler's cache
miss rate comes) and, when the Puma guest module is loaded,
``/sys/kernel/puma/stats`` (its counters).

The guest is a tenant's and untrusted: only a guest whose agent libvirt
reports connected is asked, every command waits at most
``[puma] guest_agent_timeout`` seconds, at most ``MAX_BYTES`` are read
per file, and only well-formed ``name value`` lines with non-negative
integers within bounds are taken. A guest that lies only changes what
the scheduler believes about that guest, whose pairs never leave its
project.
"""

import base64
import json
import re
import time
from xml.etree import ElementTree

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

AGENT = 'org.qemu.guest_agent.0'
VMSTAT = '/proc/vmstat'
PUMA_STATS = '/sys/kernel/puma/stats'
# /proc/vmstat is about 5 KiB on 6.x kernels, the module's stats 2 KiB.
MAX_BYTES = 16384
MAX_LINES = 400
MAX_VALUE = 2 ** 63 - 1
_LINE = re.compile(r'^([a-z][a-z0-9_]{0,63}) ([0-9]{1,19})$')


class AgentError(Exception):
    """The guest's agent did not give a usable answer."""


def connected(xml):
    """Whether libvirt says the guest agent's channel is connected.

    :param xml: the domain's live XML (libvirt's, trusted).
    """
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError:
        return False
    for target in root.iterfind('./devices/channel/target'):
        if (target.get('name') == AGENT and
                target.get('state') == 'connected'):
            return True
    return False


def _libvirt_qemu():
    import libvirt_qemu
    return libvirt_qemu


class Agent(object):
    """The guest agent of one libvirt domain.

    :param domain: a libvirt.virDomain.
    :param timeout: seconds one command may take.
    :param command: qemuAgentCommand(domain, json, timeout, flags); by
        default libvirt_qemu's (tests pass their own).
    """

    def __init__(self, domain, timeout, command=None):
        self.domain = domain
        self.timeout = timeout
        self._command = command or _libvirt_qemu().qemuAgentCommand

    def execute(self, name, **arguments):
        cmd = {'execute': name}
        if arguments:
            cmd['arguments'] = arguments
        try:
            out = self._command(self.domain, json.dumps(cmd), self.timeout,
                                0)
        except Exception as e:
            raise AgentError('%s: %s' % (name, e))
        try:
            return json.loads(out)['return']
        except (TypeError, ValueError, KeyError) as e:
            raise AgentError('%s: malformed answer (%s)' % (name, e))

    def read_file(self, path, max_bytes=MAX_BYTES):
        """The guest file PATH, at most MAX_BYTES of it, as text."""
        handle = self.execute('guest-file-open', path=path, mode='r')
        if not isinstance(handle, int) or isinstance(handle, bool):
            raise AgentError('guest-file-open: handle %r' % (handle,))
        try:
            data = self.execute('guest-file-read', handle=handle,
                                count=max_bytes)
        finally:
            try:
                self.execute('guest-file-close', handle=handle)
            except AgentError as e:
                LOG.debug('Puma: closing %s in the guest: %s', path, e)
        if not isinstance(data, dict) or not isinstance(
                data.get('buf-b64'), str):
            raise AgentError('guest-file-read: malformed answer')
        if data.get('eof') is False:
            raise AgentError('%s is larger than %d bytes' % (path, max_bytes))
        # base64 of max_bytes is 4/3 of it: anything longer is not ours.
        if len(data['buf-b64']) > (max_bytes + 2) // 3 * 4:
            raise AgentError('guest-file-read: %d bytes asked, more came'
                             % max_bytes)
        try:
            raw = base64.b64decode(data['buf-b64'], validate=True)
            return raw.decode('ascii')
        except (ValueError, UnicodeDecodeError) as e:
            raise AgentError('guest-file-read: %s' % e)

    def run(self, path, args=(), stdin='', wait=30.0, poll=0.2,
            max_output=MAX_BYTES):
        """Run PATH in the guest with STDIN; returns (exit code, out, err).

        Waits at most WAIT seconds for it to end (AgentError after);
        what it wrote is cut to MAX_OUTPUT bytes each. STDIN goes as the
        command's input-data, so nothing secret is in its command line.
        """
        pid = self.execute('guest-exec', path=path, arg=list(args),
                           **{'input-data': base64.b64encode(
                               stdin.encode()).decode(),
                              'capture-output': True})
        pid = pid.get('pid') if isinstance(pid, dict) else None
        if not isinstance(pid, int) or isinstance(pid, bool):
            raise AgentError('guest-exec: no pid')
        deadline = time.monotonic() + wait
        while True:
            status = self.execute('guest-exec-status', pid=pid)
            if not isinstance(status, dict):
                raise AgentError('guest-exec-status: malformed answer')
            if status.get('exited'):
                break
            if time.monotonic() > deadline:
                raise AgentError('%s did not end within %.0f s'
                                 % (path, wait))
            time.sleep(poll)
        code = status.get('exitcode')
        if not isinstance(code, int) or isinstance(code, bool):
            code = -1
        return (code, _output(status.get('out-data'), max_output),
                _output(status.get('err-data'), max_output))


def _output(b64, max_bytes):
    if not isinstance(b64, str):
        return ''
    try:
        raw = base64.b64decode(b64[:(max_bytes + 2) // 3 * 4])
    except ValueError:
        return ''
    return raw[:max_bytes].decode('utf-8', 'replace')


def parse_counters(text):
    """``name value`` lines as a dict of non-negative integers.

    Raises AgentError on a line of any other shape, a name seen twice, a
    value above 2**63-1 or more than MAX_LINES lines.
    """
    out = {}
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise AgentError('%d lines, at most %d taken'
                         % (len(lines), MAX_LINES))
    for n, line in enumerate(lines, 1):
        m = _LINE.match(line)
        if not m:
            raise AgentError('line %d is not "name value": %r'
                             % (n, line[:80]))
        name, value = m.group(1), int(m.group(2))
        if value > MAX_VALUE:
            raise AgentError('line %d: %s out of range' % (n, name))
        if name in out:
            raise AgentError('line %d: %s seen twice' % (n, name))
        out[name] = value
    return out


def read_counters(agent, path):
    """The counters of the guest file PATH; None if it does not exist.

    Other failures raise AgentError.
    """
    try:
        text = agent.read_file(path)
    except AgentError as e:
        # qemu-ga answers an open of a missing file with its errno text.
        if 'No such file or directory' in str(e):
            return None
        raise
    return parse_counters(text)
