# SPDX-License-Identifier: Apache-2.0
"""x509 certificates for the lab's hosts and memory servers.

A certificate authority per lab (or several, to test a peer whose
certificate another authority signed) and, per host, a directory laid out
as QEMU's ``tls-creds-x509`` objects and libvirt's
``migrate_tls_x509_cert_dir`` expect: ``ca-cert.pem``, ``server-cert.pem``
and ``server-key.pem`` (the host's address and name as subject alternative
names, for peers that check them), ``client-cert.pem`` and
``client-key.pem``.  Made with the openssl command line tool.
"""

import os
import subprocess

from puma_lab import errors

DAYS = '7'


def _openssl(*args, cwd):
    p = subprocess.run(('openssl',) + args, cwd=cwd, capture_output=True,
                       text=True, timeout=60)
    if p.returncode:
        raise errors.LabError('openssl %s: %s'
                              % (' '.join(args), p.stderr))


class Authority:
    """A certificate authority in DIRECTORY (made if missing)."""

    def __init__(self, directory, name='Puma lab CA'):
        self.dir = directory
        self.cert = os.path.join(directory, 'ca-cert.pem')
        self.key = os.path.join(directory, 'ca-key.pem')
        self._serial = 1
        if os.path.exists(self.cert):
            return
        os.makedirs(directory, mode=0o700, exist_ok=True)
        _openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes',
                 '-keyout', self.key, '-out', self.cert, '-days', DAYS,
                 '-subj', '/CN=%s' % name,
                 '-addext', 'basicConstraints=critical,CA:TRUE',
                 '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
                 cwd=directory)

    def _issue(self, directory, role, name, addr):
        key = os.path.join(directory, '%s-key.pem' % role)
        csr = os.path.join(directory, '%s.csr' % role)
        ext = os.path.join(directory, '%s.ext' % role)
        purpose = 'serverAuth' if role == 'server' else 'clientAuth'
        with open(ext, 'w') as f:
            f.write('basicConstraints=critical,CA:FALSE\n'
                    'keyUsage=critical,digitalSignature,keyEncipherment\n'
                    'extendedKeyUsage=%s\n'
                    'subjectAltName=IP:%s,DNS:%s\n' % (purpose, addr, name))
        _openssl('req', '-new', '-newkey', 'rsa:2048', '-nodes',
                 '-keyout', key, '-out', csr, '-subj', '/CN=%s' % name,
                 cwd=directory)
        self._serial += 1
        _openssl('x509', '-req', '-in', csr, '-CA', self.cert,
                 '-CAkey', self.key, '-set_serial', str(self._serial),
                 '-days', DAYS, '-extfile', ext,
                 '-out', os.path.join(directory, '%s-cert.pem' % role),
                 cwd=directory)
        os.unlink(csr)
        os.unlink(ext)

    def host_dir(self, directory, name, addr):
        """Fill DIRECTORY for host NAME at ADDR; returns DIRECTORY.

        The CA's certificate, and a server and a client certificate.
        """
        os.makedirs(directory, mode=0o700, exist_ok=True)
        with open(self.cert) as src, \
                open(os.path.join(directory, 'ca-cert.pem'), 'w') as dst:
            dst.write(src.read())
        for role in ('server', 'client'):
            self._issue(directory, role, name, addr)
        return directory
