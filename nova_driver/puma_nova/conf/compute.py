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

"""The ``[puma]`` options read by the Puma compute driver in nova-compute."""

from oslo_config import cfg

from puma_nova.conf import upgrade_levels

GROUP = cfg.OptGroup(
    'puma',
    title='Puma compute driver options',
    help="""
Options of the Puma extension of the libvirt compute driver
(``compute_driver = puma.PumaLibvirtDriver``): split migrations with
memory servers, the lending ledger applied to placement, Shoot4U and the
cache-lending channel.
""")

OPTS = [
    cfg.IntOpt(
        'report_interval',
        default=60,
        min=0,
        help="""
Seconds between two reports of this host's memory statistics to the Puma
scheduler (``report_host``). 0 disables the periodic report.
"""),
    cfg.IntOpt(
        'guest_agent_timeout',
        default=2,
        min=1,
        max=30,
        help="""
Seconds one guest agent command may take when this host reads an
instance's own counters for the report (``/proc/vmstat`` and the Puma
guest module's ``/sys/kernel/puma/stats``, through qemu-guest-agent, for
instances whose image has ``hw_qemu_guest_agent=yes`` and whose agent is
connected). A guest that does not answer in time is reported from
libvirt's statistics alone.
"""),
    cfg.FloatOpt(
        'lender_max_cpu_percent',
        default=10.0,
        min=0.0,
        max=100.0,
        help="""
An instance on the cache-lending channel is reported as an idle lender
while its CPU use since the previous report, in percent of its vCPUs
(libvirt's CPU time, measured by the host), stays below this, and the
Puma guest module, if loaded, does not report its lender busy. One report
above this after a quiet one is forgiven (the work of a new pair); a lender
that stays busier loses its pairs at the next planning round after its
second report above this; its guest module suspends lending by itself
before that.
"""),
    cfg.IntOpt(
        'rpc_timeout',
        default=30,
        min=1,
        help='Seconds to wait for an answer of the Puma scheduler or of '
             'another compute host.'),
    cfg.IntOpt(
        'ledger_cache_seconds',
        default=30,
        min=0,
        help="""
How long the lending ledger read from the Puma scheduler is reused by
``update_provider_tree`` before it is read again. Split migrations,
rollbacks and deletes on this host refresh it at once. If the scheduler
cannot be reached, the last ledger read stays applied.
"""),
    cfg.BoolOpt(
        'split_allowed',
        default=True,
        help="""
Whether this host takes part in split migrations: as the main host that
receives an instance that does not fit in its free RAM, and as a sub host
that serves memory to a main host. A split migration also needs the
flavor extra spec ``puma:split=allowed`` (or the image property
``puma_split=allowed``) and the patched libvirt/QEMU stack.
"""),
    cfg.IntOpt(
        'free_ram_margin_mb',
        default=512,
        min=0,
        help="""
Memory in MiB that a live migration must leave free on this host. An
instance that allows splitting and would leave less free RAM than this
is split: only the part that fits stays resident here, the rest is served
by a memory server on a sub host.
"""),
    cfg.StrOpt(
        'memory_server_binary',
        default='qemu-memory-server',
        help='Path or name of the memory server daemon of the patched QEMU '
             'build.'),
    cfg.HostAddressOpt(
        'memory_server_address',
        help="""
Address the memory servers of this host listen on, as seen by main hosts.
Defaults to ``[DEFAULT] my_ip``.
"""),
    cfg.StrOpt(
        'memory_server_tls_x509_dir',
        default='/etc/pki/qemu',
        help="""
Directory of the x509 certificates (``ca-cert.pem``, ``server-cert.pem``,
``server-key.pem``) of this host's memory servers, used when ``[libvirt]
live_migration_with_native_tls`` is set: split migrations then reach the
memory servers over TLS with the hosts' libvirt migration certificates,
so the server certificate must come from the same authority as those and
name ``memory_server_address``. The memory servers accept only clients
with a certificate of that authority. libvirt's default
``migrate_tls_x509_cert_dir`` is the same directory.
"""),
    cfg.StrOpt(
        'memory_server_client_dn',
        default='CN={host}',
        help="""
Distinguished name of a compute host's x509 client certificate (the one
of libvirt's migration TLS setup), ``{host}`` standing for its Nova host
name, as GnuTLS prints it (e.g. ``C=GB,O=Example,CN={host}.example.com``).
With TLS (see ``memory_server_tls_x509_dir``) the memory server of an
instance then accepts only the source and the destination host of its
split migration, not every host with a certificate of the authority.
Empty: every such host.
"""),
    cfg.PortOpt(
        'memory_server_port_min',
        default=49200,
        help='Lowest TCP port a memory server of this host may use.'),
    cfg.PortOpt(
        'memory_server_port_max',
        default=49263,
        help='Highest TCP port a memory server of this host may use.'),
    cfg.IntOpt(
        'memory_server_check_interval',
        default=10,
        min=0,
        help="""
Seconds between two checks of this host's memory servers. A memory server
that is gone (killed, crashed, or the host restarted) is started again,
empty, on its port, with its size, TLS and admitted clients: the main host
of its instance reconnects, a mirrored instance copies its pages onto it
again from its other server, an unmirrored one stays paused (its remote
memory was lost with the server). Also checked when nova-compute starts.
0 disables the checks.
"""),
    cfg.IntOpt(
        'memory_server_watchdog_timeout',
        default=30,
        min=0,
        help="""
Seconds a memory server may go without a watchdog notification before it
counts as hung. Each memory server gets a notify socket in the instances
path (``NOTIFY_SOCKET`` and ``WATCHDOG_USEC``, the protocol of systemd's
``WatchdogSec=``) and its main loop says ``WATCHDOG=1`` there every half
of this. At a check (``memory_server_check_interval``) a server that has
been silent for longer, while its process is still there, is killed and
started again, empty, like one that is gone. Only a server that has sent
one notification is held to it. 0 disables the watchdog.
"""),
    cfg.IntOpt(
        'lendable_max_mb',
        default=0,
        min=0,
        help="""
Largest amount of memory in MiB this host lends to split instances of
other hosts. 0 means no limit other than the free RAM.
"""),
    cfg.BoolOpt(
        'shoot4u_allowed',
        default=True,
        help="""
Whether instances whose flavor asks for ``puma:shoot4u=true`` may run on
this host. They are refused anyway when the host's libvirt does not know
the ``pv-tlb-shootdown`` KVM feature.
"""),
    cfg.StrOpt(
        'lending_bridge',
        default='br-puma',
        help="""
Host bridge of the cache-lending channel. Puma-enabled instances get one
extra interface on it; nftables rules on the bridge only let authorised
lender/borrower pairs talk to each other.
"""),
    cfg.StrOpt(
        'lending_table',
        default='puma_lending',
        help='Name of the nftables table (family bridge) holding the '
             'lending-channel filter of this host.'),
    cfg.BoolOpt(
        'lending_channel_enabled',
        default=False,
        help='Whether this host attaches lending-channel interfaces and '
             'programs the nftables filter for the lending pairs.'),
    cfg.PortOpt(
        'lending_port',
        default=7400,
        help="""
TCP port the Puma guest module of a lender listens on (the module's
default). Borrowers on this host are told to reach their lenders there.
"""),
    cfg.BoolOpt(
        'lending_tell_guests',
        default=True,
        help="""
Whether this host tells its instances of their lending pairs: it runs
``puma-pairs`` (shipped with the Puma guest module) in each instance of
a pair through its qemu-guest-agent, with the pair keys on its standard
input. Without it the guests must learn their pairs otherwise.
"""),
]


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    return [(GROUP, OPTS)] + upgrade_levels.list_opts()
