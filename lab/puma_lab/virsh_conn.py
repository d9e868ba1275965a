# SPDX-License-Identifier: Apache-2.0
"""The part of libvirt the Nova driver's probes and figures use, via virsh.

The probes (puma_nova/virt/shoot4u_probe.py, exclusive_cache_probe.py)
take a connection-like object, puma_nova/compute/host_cache.py domains;
these drive a lab host's patched libvirtd through its virsh, so that the
tests run them for real.
"""

from puma_lab import errors

# libvirt.VIR_DOMAIN_DEFINE_VALIDATE: virsh define --validate.
DEFINE_VALIDATE = 1
# libvirt.VIR_DOMAIN_XML_INACTIVE: virsh dumpxml --inactive.
XML_INACTIVE = 2
# virDomainBlockStats' tuple, in order, as virsh domblkstat names them.
BLOCK_STATS = ('rd_req', 'rd_bytes', 'wr_req', 'wr_bytes', 'errs')


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
        if flags & XML_INACTIVE:
            return self.host.virsh('dumpxml', '--inactive', self.name)
        return self.host.virsh('dumpxml', self.name)

    def blockStats(self, dev):
        """virDomainBlockStats: (rd_req, rd_bytes, wr_req, wr_bytes, errs)."""
        out = self.host.virsh('domblkstat', self.name, dev)
        values = dict(line.split()[1:3] for line in out.splitlines()
                      if len(line.split()) == 3)
        return tuple(int(values.get(k, -1)) for k in BLOCK_STATS)

    def undefine(self):
        self.host.virsh('undefine', self.name)
