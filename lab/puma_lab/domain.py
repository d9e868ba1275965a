# SPDX-License-Identifier: Apache-2.0
"""libvirt domain XML for lab guests (TCG, direct kernel boot)."""

from xml.sax import saxutils

from puma_lab import paths

_TEMPLATE = """<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>{mem_mb}</memory>
  <vcpu>{vcpus}</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>{boot_image}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>{cmdline}</cmdline>
  </os>
  <features><acpi/>{kvm_features}</features>{cpu}
  <on_poweroff>destroy</on_poweroff>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{emulator}</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw' cache='none'/>
      <source file='{root}'/>
      <target dev='vda' bus='virtio'/>
      <readonly/>
    </disk>{disks}
    <serial type='file'>
      <source path='{console}' append='on'/>
      <target port='0'/>
    </serial>
    <channel type='unix'>
      <target type='virtio' name='org.qemu.guest_agent.0'/>
    </channel>
    <controller type='usb' model='none'/>
    <video><model type='none'/></video>
    <memballoon model='none'/>{filesystems}
  </devices>
</domain>
"""


# A data disk of guest_xml: a raw file with libvirt <driver> attributes.
_DISK = """
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'{attrs}/>
      <source file='{path}'/>
      <target dev='{target}' bus='virtio'/>
    </disk>"""


def disk_xml(path, target, **driver):
    """<disk> of the raw file PATH as TARGET (vdb, ...).

    DRIVER: attributes of its <driver> (cache='writeback',
    exclusive_cache='on', ...).
    """
    q = saxutils.quoteattr
    attrs = ''.join(' %s=%s' % (k, q(str(v)))
                    for k, v in sorted(driver.items()))
    return _DISK.format(attrs=attrs, path=saxutils.escape(path),
                        target=saxutils.escape(target))


def guest_xml(name, kernel, console, mem_mb=512, vcpus=1, append='',
              cpu=None, kvm_features=None, share=None, disks=()):
    """Domain XML booting lab KERNEL (a paths.Kernel) with the lab image.

    CONSOLE is a path both source and destination hosts can write, so the
    serial log of a migrated guest stays in one file.  CPU is a libvirt
    CPU mode ('maximum', 'host-model', ...), KVM_FEATURES maps names of
    ``<features><kvm>`` children to 'on'/'off', and SHARE is a host
    directory the guest mounts at /mnt/host (9p).  DISKS are data disks,
    disk_xml() strings.
    """
    cmdline = 'console=ttyS0 loglevel=4 no_timer_check puma.root=/dev/vda ' \
              'puma.hostname=%s %s' % (name, append)
    q = saxutils.escape
    kvm = ''
    if kvm_features:
        kvm = '<kvm>%s</kvm>' % ''.join(
            "<%s state='%s'/>" % (q(f), q(state))
            for f, state in sorted(kvm_features.items()))
    fs = ''
    if share:
        cmdline += ' puma.share=host'
        fs = ("\n    <filesystem type='mount' accessmode='passthrough'>"
              "<source dir='%s'/><target dir='host'/></filesystem>"
              % q(share))
    return _TEMPLATE.format(
        name=q(name), mem_mb=int(mem_mb), vcpus=int(vcpus),
        boot_image=q(kernel.boot_image), initrd=q(kernel.initrd),
        cmdline=q(cmdline.strip()), emulator=q(paths.qemu_binary()),
        root=q(paths.root_image()), console=q(console),
        kvm_features=kvm,
        cpu="\n  <cpu mode='%s'/>" % q(cpu) if cpu else '',
        filesystems=fs, disks=''.join(disks))
