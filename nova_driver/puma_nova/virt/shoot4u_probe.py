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

"""Does a libvirt know the pv-tlb-shootdown KVM feature (Shoot4U)?

Kept free of Nova imports so that the lab can run it against a real
patched libvirtd.
"""

import uuid

ELEMENT = 'pv-tlb-shootdown'

PROBE_XML = """<domain type='%(type)s'>
  <name>puma-shoot4u-probe-%(id)s</name>
  <uuid>%(id)s</uuid>
  <memory unit='MiB'>16</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64'>hvm</type></os>
  <features><kvm><%(element)s state='on'/></kvm></features>
</domain>"""


def probe(conn, virt_type, element=ELEMENT):
    """(supported, detail) for a libvirt connection-like object.

    Defines a never-started domain with the feature and undefines it
    again: an unpatched libvirt rejects the XML while parsing it.
    ``conn`` needs defineXML(xml) returning an object with undefine().
    """
    probe_id = str(uuid.uuid4())
    xml = PROBE_XML % {'type': virt_type, 'id': probe_id,
                       'element': element}
    try:
        dom = conn.defineXML(xml)
    except Exception as e:
        return False, 'libvirt refused <%s>: %s' % (element, e)
    try:
        dom.undefine()
    except Exception as e:
        return True, ('could not undefine the probe domain %s: %s'
                      % (probe_id, e))
    return True, None
