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
"""A libvirt connection closed under Nova's connection lock.

Nova's own Host (nova.virt.libvirt.host, native threads as in the lab
cloud) with a connection whose ``getLibVersion`` runs the close callback
before it fails, as libvirt-python does when libvirtd has dropped the
connection (puma_nova/virt/libvirt_host.py).  Without the driver's
reentrant lock the thread that tests the connection waits for itself for
good; with it, the connection is replaced.
"""

import threading
from unittest import mock

from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.virt.libvirt import host as nova_host

from puma_nova.virt import driver as puma_driver
from puma_nova.virt import libvirt_host

WAIT_S = 10


class ClosedConnectionTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.host = nova_host.Host('qemu:///system')
        self.assertIsInstance(self.host._event_handler,
                              nova_host._ThreadingLibvirtEventHandler)

    def _closing_connection(self):
        host = self.host

        class Closing:
            def getLibVersion(conn):
                host._close_callback(conn, 'keepalive timeout', None)
                raise fakelibvirt.make_libvirtError(
                    fakelibvirt.libvirtError, 'connection closed',
                    error_code=fakelibvirt.VIR_ERR_SYSTEM_ERROR,
                    error_domain=fakelibvirt.VIR_FROM_RPC)

        return Closing()

    def _get_connection(self):
        """Host._get_connection() in a thread: (thread, what it returned)."""
        fresh = object()
        self.host._wrapped_conn = self._closing_connection()
        got = []
        with mock.patch.object(self.host, '_get_new_connection',
                               return_value=fresh):
            t = threading.Thread(
                target=lambda: got.append(self.host._get_connection()),
                daemon=True)
            t.start()
            t.join(WAIT_S)
        return t, got, fresh

    def test_nova_alone_waits_for_itself(self):
        # The premise of the workaround: if this fails, Nova no longer
        # dispatches the callback under its lock (the workaround may go).
        t, got, _fresh = self._get_connection()
        self.assertTrue(t.is_alive())
        self.assertEqual([], got)

    def test_reentrant_lock_replaces_the_connection(self):
        libvirt_host.reentrant_connection_lock(self.host)
        t, got, fresh = self._get_connection()
        self.assertFalse(t.is_alive())
        self.assertEqual([fresh], got)
        self.assertIs(fresh, self.host._wrapped_conn)

    def test_the_driver_makes_its_host_lock_reentrant(self):
        def fake_init(drv, virtapi, read_only=False):
            drv._host = self.host

        drv = puma_driver.PumaLibvirtDriver.__new__(
            puma_driver.PumaLibvirtDriver)
        with mock.patch.object(puma_driver.libvirt_driver.LibvirtDriver,
                               '__init__', fake_init):
            puma_driver.PumaLibvirtDriver.__init__(drv, mock.Mock())
        self.assertIs(self.host, drv._host)
        self.assertIsInstance(self.host._wrapped_conn_lock,
                              type(threading.RLock()))
