# SPDX-License-Identifier: Apache-2.0
"""The part of a libvirt connection the Nova driver's probes use, via virsh.

The probes (puma_nova/virt/shoot4u_probe.py, exclusive_cache_probe.py)
take a connection-like object; this one drives a lab host's patched
libvirtd through its virsh, so that the tests run them for real.
"""

from puma_lab import errors

# libvirt.VIR_DOMAIN_DEFINE_VALIDATE: virsh define --validate.
DEFINE_VALIDATE = 1


class VirshConnection:

    def __init__(self, host):
        self.host = host
        self.count = 0
        self.flags = []

    def defineXML(self, xml):
        return self.defineXMLFlags(xml, 0)

    def defineXMLFlags(self, xml, flags):
        self.count += 1
        self.flags.append(flags)
        path = self.host.lab.path('probe-%d.xml' % self.count)
        with open(path, 'w') as f:
            f.write(xml)
        args = ['define', path]
        if flags & DEFINE_VALIDATE:
            args.append('--validate')
        try:
            self.host.virsh(*args)
        except errors.LabError as e:
            raise RuntimeError(str(e)) from e
        name = xml.split('<name>')[1].split('</name>')[0]
        return VirshDomain(self.host, name)


class VirshDomain:

    def __init__(self, host, name):
        self.host = host
        self.name = name

    def XMLDesc(self, flags):
        return self.host.virsh('dumpxml', '--inactive', self.name)

    def undefine(self):
        self.host.virsh('undefine', self.name)
