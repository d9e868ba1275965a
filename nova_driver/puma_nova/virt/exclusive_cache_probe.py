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

"""Do a libvirt and its QEMU know the exclusive_cache disk attribute?

Kept free of Nova imports so that the lab can run it against a real
patched libvirtd.
"""

import uuid

ATTRIBUTE = 'exclusive_cache'
# libvirt.VIR_DOMAIN_DEFINE_VALIDATE: check the XML against libvirt's
# schema, so that a libvirt without the attribute refuses it instead of
# dropping it.
DEFINE_VALIDATE = 1

PROBE_XML = """<domain type='%(type)s'>
  <name>puma-exclusive-cache-probe-%(id)s</name>
  <uuid>%(id)s</uuid>
  <memory unit='MiB'>16</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64'>hvm</type></os>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw' cache='writeback' %(attribute)s='on'/>
      <source file='/nonexistent/puma-exclusive-cache-probe.img'/>
      <target dev='vda' bus='virtio'/>
    </disk>
  </devices>
</domain>"""


def probe(conn, virt_type, attribute=ATTRIBUTE):
    """(supported, detail) for a libvirt connection-like object.

    Defines a never-started domain whose disk has the attribute, with
    validation, and undefines it again: a libvirt without the attribute
    refuses the XML against its schema, and a patched libvirt whose QEMU
    lacks the exclusive-cache option refuses it too.  ``conn`` needs
    defineXMLFlags(xml, flags) returning an object with XMLDesc(flags)
    and undefine().
    """
    probe_id = str(uuid.uuid4())
    xml = PROBE_XML % {'type': virt_type, 'id': probe_id,
                       'attribute': attribute}
    try:
        dom = conn.defineXMLFlags(xml, DEFINE_VALIDATE)
    except Exception as e:
        return False, 'libvirt refused %s: %s' % (attribute, e)
    try:
        kept = "%s='on'" % attribute in dom.XMLDesc(0)
    except Exception as e:
        kept, detail = False, 'could not read the probe domain back: %s' % e
    else:
        detail = None if kept else (
            'libvirt accepted %s but dropped it' % attribute)
    try:
        dom.undefine()
    except Exception as e:
        undefine = ('could not undefine the probe domain %s: %s'
                    % (probe_id, e))
        detail = '%s; %s' % (detail, undefine) if detail else undefine
    return kept, detail
