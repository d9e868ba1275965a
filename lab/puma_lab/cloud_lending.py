# SPDX-License-Identifier: Apache-2.0
"""Cache lending in the lab cloud: the Puma image and guest commands.

The cloud's Puma image is the lab's guest image with the Puma guest
package installed, as a tenant would install it (a DKMS package): the
module built for the image's kernel in ``/lib/modules/RELEASE/updates``
(the guest's init runs depmod when that folder exists), ``pumactl`` and
``puma-pairs`` in ``/usr/local/sbin``. It is written into a copy of the
image with debugfs (no mount), and its kernel command line has no
working set: the tests start what each server runs through its agent.

Servers run commands through their guest agent, reached with ``virsh
qemu-agent-command`` on their compute host: the host side that Nova
configured (``hw_qemu_guest_agent=yes``).
"""

import base64
import importlib.util
import os
import shutil
import subprocess
import time

from puma_lab import cloud_checks as cc
from puma_lab import errors
from puma_lab import kmod
from puma_lab import paths

IMAGE = 'puma-debian-lending'
TOOLS = ('pumactl', 'puma-pairs')


def _lending_address():
    """puma_nova.lending_address, which needs nothing but the stdlib."""
    spec = importlib.util.spec_from_file_location(
        'puma_lending_address', os.path.join(
            paths.TOP, 'nova_driver', 'puma_nova', 'lending_address.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lending_mac(instance_uuid):
    """The MAC the driver gives the instance's lending interface."""
    return _lending_address().mac(instance_uuid)


def _debugfs(image, commands):
    p = subprocess.run(['debugfs', '-w', '-f', '-', image], input=commands,
                       capture_output=True, text=True, timeout=120)
    # debugfs reports failed requests on stderr but exits 0.
    bad = [line for line in p.stderr.splitlines()
           if line and not line.startswith('debugfs ')]
    if p.returncode or bad:
        raise errors.LabError('debugfs on %s (%d): %s'
                              % (image, p.returncode, '; '.join(bad)))


def build_image(cloud):
    """The Puma image's root file system (a file in the cloud's folder)."""
    kernel = paths.kernel(cc.KERNEL)
    out = cloud.path('lending-image')
    os.makedirs(out, exist_ok=True)
    built = kmod.build(kernel, out)
    image = os.path.join(out, 'root.img')
    shutil.copyfile(paths.root_image(), image)
    updates = '/lib/modules/%s/updates' % kernel.release
    cmds = ['mkdir %s' % updates,
            'write %s %s/puma.ko' % (os.path.join(built, 'puma.ko'),
                                     updates)]
    for tool in TOOLS:
        cmds += ['write %s /usr/local/sbin/%s'
                 % (os.path.join(kmod.KMOD_SRC, 'tools', tool), tool),
                 'set_inode_field /usr/local/sbin/%s mode 0100755' % tool]
    _debugfs(image, '\n'.join(cmds) + '\n')
    return image


def image(cloud):
    """The Puma image in Glance, uploaded once per cloud."""
    found = [i for i in cc.osc(cloud, 'image', 'list') if i['Name'] == IMAGE]
    if found:
        return cc.osc(cloud, 'image', 'show', found[0]['ID'])
    base = cc.guest_image(cloud)
    props = base['properties']
    return cc.upload(cloud, build_image(cloud), IMAGE, 'raw',
                     '--property', 'kernel_id=%s' % props['kernel_id'],
                     '--property', 'ramdisk_id=%s' % props['ramdisk_id'],
                     '--property', 'hw_qemu_guest_agent=yes',
                     '--property', 'os_command_line=console=ttyS0 '
                     'loglevel=4 no_timer_check puma.root=/dev/vda')


def run(cloud, host, domain, command, wait=120, stdin=''):
    """Run COMMAND (sh -c) in DOMAIN through its agent; (rc, out, err).

    With WAIT None the command is left running and its pid returned.
    """
    args = {'path': '/bin/sh', 'arg': ['-c', command],
            'capture-output': wait is not None}
    if stdin:
        args['input-data'] = base64.b64encode(stdin.encode()).decode()
    pid = cc.agent(cloud, host, domain, 'guest-exec', **args)['pid']
    if wait is None:
        return pid
    deadline = time.monotonic() + wait
    while True:
        st = cc.agent(cloud, host, domain, 'guest-exec-status', pid=pid)
        if st['exited']:
            return (st.get('exitcode', -1),
                    base64.b64decode(st.get('out-data', '')).decode(),
                    base64.b64decode(st.get('err-data', '')).decode())
        if time.monotonic() > deadline:
            raise AssertionError('%s in %s still runs after %d s'
                                 % (command, domain, wait))
        time.sleep(1)


def check(cloud, host, domain, command, wait=120):
    rc, out, err = run(cloud, host, domain, command, wait)
    assert rc == 0, (command, rc, out, err)
    return out


def counters(cloud, host, domain):
    """The Puma module's counters in DOMAIN (``/sys/kernel/puma/stats``)."""
    text = cc.agent_read(cloud, host, domain, '/sys/kernel/puma/stats')
    return {k: int(v) for k, v in (line.split() for line in
                                   text.splitlines())}


def wait_agent(cloud, host, domain, timeout=cc.SERVER_TIMEOUT):
    """Until DOMAIN's guest agent answers."""
    def ping():
        try:
            return cc.agent(cloud, host, domain, 'guest-ping') == {}
        except errors.LabError:
            return False
    return cc.wait_for('%s\'s guest agent' % domain, ping, timeout)


def sha256_of(cloud, host, domain, path):
    return check(cloud, host, domain, 'sha256sum %s' % path).split()[0]


def pairs(cloud):
    """puma-api's lending pairs, as (lender, borrower) uuids."""
    return {(p['lender'], p['borrower'])
            for p in cc.puma_list(cloud, 'pairs')}
