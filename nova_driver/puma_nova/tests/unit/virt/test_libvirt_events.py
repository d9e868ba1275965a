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
"""Lifecycle events handled off libvirt's event loop, in order.

Nova's own Host and event handler (nova.virt.libvirt.host, native
threads as in the lab cloud); events are put in as libvirt's event loop
thread puts them (``_queue_event``).  The handler is the compute
manager's side, which may wait for the conductor.
"""

import threading
from unittest import mock

from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.virt import event as virtevent
from nova.virt.libvirt import host as nova_host

from puma_nova.virt import driver as puma_driver
from puma_nova.virt import libvirt_events

WAIT_S = 10


def started(n):
    return virtevent.LifecycleEvent('uuid-%d' % n,
                                    virtevent.EVENT_LIFECYCLE_STARTED)


class LifecycleEventsTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.seen = []
        self.threads = []
        self.release = threading.Event()
        self.handled = threading.Semaphore(0)

        def handle(event):
            self.threads.append(threading.current_thread())
            self.release.wait(WAIT_S)
            self.seen.append(event.uuid)
            self.handled.release()

        self.host = nova_host.Host('qemu:///system',
                                   lifecycle_event_handler=handle)
        self.assertIsInstance(self.host._event_handler,
                              nova_host._ThreadingLibvirtEventHandler)

    def _from_the_event_loop(self, n):
        """Events 0..N-1 put as libvirt's loop does: whether it returned."""
        loop = threading.Thread(target=lambda: [
            self.host._event_handler._queue_event(started(i))
            for i in range(n)], daemon=True)
        loop.start()
        loop.join(WAIT_S)
        return not loop.is_alive(), loop

    def test_nova_alone_handles_on_the_event_loop(self):
        # The premise: if this fails, Nova no longer handles events on
        # the loop's thread (the dispatcher may go).
        self.release.set()
        returned, loop = self._from_the_event_loop(1)
        self.assertTrue(returned)
        self.assertEqual([loop], self.threads)

    def test_a_waiting_handler_leaves_the_loop_free(self):
        self.assertTrue(libvirt_events.dispatch_lifecycle_events(self.host))
        # The handler waits (a conductor call while RabbitMQ restarts);
        # libvirt's loop puts three events and goes on.
        returned, loop = self._from_the_event_loop(3)
        self.assertTrue(returned)
        self.assertEqual([], self.seen)
        self.release.set()
        for _ in range(3):
            self.assertTrue(self.handled.acquire(timeout=WAIT_S))
        self.assertEqual(['uuid-0', 'uuid-1', 'uuid-2'], self.seen)
        self.assertEqual(1, len(set(self.threads)))
        self.assertNotIn(loop, self.threads)

    def test_a_failing_handler_does_not_stop_the_next_events(self):
        libvirt_events.dispatch_lifecycle_events(self.host)
        self.release.set()
        seen = self.seen

        def flaky(event):
            if event.uuid == 'uuid-0':
                raise RuntimeError('conductor unreachable')
            seen.append(event.uuid)
            self.handled.release()

        self.host._event_handler._lifecycle_event_handler.handler = flaky
        self.assertTrue(self._from_the_event_loop(2)[0])
        self.assertTrue(self.handled.acquire(timeout=WAIT_S))
        self.assertEqual(['uuid-1'], seen)

    def test_set_up_once(self):
        libvirt_events.dispatch_lifecycle_events(self.host)
        queued = self.host._event_handler._lifecycle_event_handler
        libvirt_events.dispatch_lifecycle_events(self.host)
        self.assertIs(queued,
                      self.host._event_handler._lifecycle_event_handler)

    def test_eventlet_handler_is_left_alone(self):
        host = mock.Mock(_event_handler=object())
        self.assertFalse(libvirt_events.dispatch_lifecycle_events(host))

    def test_the_driver_dispatches_its_host_events(self):
        def fake_init(drv, virtapi, read_only=False):
            drv._host = self.host

        drv = puma_driver.PumaLibvirtDriver.__new__(
            puma_driver.PumaLibvirtDriver)
        with mock.patch.object(puma_driver.libvirt_driver.LibvirtDriver,
                               '__init__', fake_init):
            puma_driver.PumaLibvirtDriver.__init__(drv, mock.Mock())
        self.assertIsInstance(
            self.host._event_handler._lifecycle_event_handler,
            libvirt_events.QueuedHandler)
