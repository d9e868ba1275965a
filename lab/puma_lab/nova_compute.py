# SPDX-License-Identifier: Apache-2.0
"""The Puma Nova driver on emulated hosts, one agent process per host.

:class:`Cloud` starts :mod:`puma_lab.nova_agent` with the Python of the
Nova environment ``lab/setup nova`` built (Nova 34, libvirt-python linked
to the patched libvirt) in each host's network namespace, and carries the
driver's RPC calls between the agents: puma-compute calls go to the
agent of the target host (its real ``PumaComputeEndpoint``), Puma
scheduler calls to :class:`Ledger`, a stand-in of the scheduler that
hands out one fixed plan and keeps the ledger entries in memory.
"""

import configparser
import json
import os
import subprocess

from puma_lab import errors
from puma_lab import paths

AGENT_TIMEOUT = 900


def nova_env():
    return os.path.join(paths.CACHE, 'nova', 'current')


def python():
    return os.path.join(nova_env(), 'venv', 'bin', 'python')


def missing():
    """None if the Nova environment is built, else why not."""
    if not os.path.exists(os.path.join(nova_env(), 'good')):
        return ('no Nova environment in %s (run lab/setup nova)'
                % nova_env())
    return None


class Ledger:
    """The Puma scheduler's side of a split, as the driver sees it.

    plan_split answers PLAN (sub host, resident limit, remote size) and
    records a 'planned' entry; the other calls follow the scheduler's
    RPC contract. Every call is kept in ``calls``.
    """

    def __init__(self, plan):
        self.plan = dict(plan)
        self.entries = {}
        self.sources = {}
        self.calls = []

    def plan_split(self, instance_uuid, memory_mb, main_host, project_id,
                   supersede=False, source_host=None):
        # The source the destination named (scheduler API 1.5).
        self.sources[instance_uuid] = source_host
        # One entry per instance: a new plan always supersedes.
        self.entries[instance_uuid] = {
            'instance_uuid': instance_uuid, 'main_host': main_host,
            'sub_host': self.plan['sub_host'], 'mb': self.plan['remote_mb'],
            'state': 'planned'}
        return dict(self.plan)

    def get_ledger(self, host):
        return [dict(e) for e in self.entries.values()
                if host in (e['main_host'], e['sub_host'])]

    def release_split(self, instance_uuid, main_host=None):
        e = self.entries.get(instance_uuid)
        if e and main_host in (None, e['main_host']):
            del self.entries[instance_uuid]

    def split_state(self, instance_uuid, state):
        if instance_uuid in self.entries:
            self.entries[instance_uuid]['state'] = state

    def report_host(self, host, stats):
        pass

    def call(self, method, args):
        self.calls.append((method, args))
        return getattr(self, method)(**args)


class AgentError(errors.LabError):
    """An operation of the driver failed; TYPE is the exception's class."""

    def __init__(self, host, op, message, type_):
        super().__init__('%s on %s: %s: %s' % (op, host, type_, message))
        self.type = type_
        self.message = message


class Agent:
    """One host's driver: ``python -m puma_lab.nova_agent`` in its netns."""

    def __init__(self, host, options):
        self.host = host
        self.name = 'nova-' + host.name
        self.log = host.lab.path('nova-agent-%s.log' % host.name)
        self.config = host.lab.path('nova-%s.conf' % host.name)
        # Nova's host name is the lab's host name.
        self.options = dict(options, host=host.name)
        self.proc = None

    def write_config(self):
        """nova.conf of the host: OPTIONS maps 'group.option' to values."""
        conf = configparser.ConfigParser(interpolation=None)
        conf.optionxform = str
        for name, value in sorted(self.options.items()):
            group, _, opt = name.rpartition('.')
            group = group or 'DEFAULT'
            if group != 'DEFAULT' and not conf.has_section(group):
                conf.add_section(group)
            if isinstance(value, bool):
                value = str(value).lower()
            conf.set(group, opt, str(value))
        with open(self.config, 'w') as f:
            conf.write(f)

    def start(self):
        self.write_config()
        env = dict(os.environ,
                   PYTHONPATH=os.pathsep.join(
                       [os.path.join(paths.TOP, 'lab'),
                        os.path.join(paths.TOP, 'nova_driver')]),
                   OS_NOVA_DISABLE_EVENTLET_PATCHING='true')
        with open(self.log, 'w') as log:
            self.proc = subprocess.Popen(
                ['ip', 'netns', 'exec', self.host.ns, python(), '-m',
                 'puma_lab.nova_agent', '--host', self.host.name,
                 '--config-file', self.config] +
                (['--libvirtd'] if self.host.libvirtd else []),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                text=True, env=env)
        self.host.lab.register(self, 'guest')
        line = self.proc.stdout.readline()
        if not line or json.loads(line).get('ready') != self.host.name:
            raise errors.LabError('Nova agent of %s did not start: %s'
                                  % (self.host.name, self.output()[-3000:]))
        return self

    def output(self):
        with open(self.log, errors='replace') as f:
            return f.read()

    def send(self, msg):
        self.proc.stdin.write(json.dumps(msg) + '\n')
        self.proc.stdin.flush()

    def receive(self):
        line = self.proc.stdout.readline()
        if not line:
            raise errors.LabError('Nova agent of %s exited: %s'
                                  % (self.host.name, self.output()[-3000:]))
        return json.loads(line)

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Cloud:
    """Agents by host name, the ledger stand-in, and the calls between."""

    def __init__(self, ledger):
        self.ledger = ledger
        self.agents = {}

    def add(self, host, **options):
        self.agents[host.name] = Agent(host, options).start()
        return self.agents[host.name]

    def call(self, host, op, **args):
        """Run OP of HOST's agent; relay the calls it makes meanwhile."""
        agent = self.agents[host]
        agent.send({'op': op, 'args': args})
        while True:
            msg = agent.receive()
            if 'rpc' not in msg:
                break
            try:
                if msg['host'] == 'scheduler':
                    result = self.ledger.call(msg['rpc'], msg['args'])
                else:
                    result = self.call(msg['host'], 'rpc', method=msg['rpc'],
                                       args=msg['args'])
                agent.send({'result': result})
            except Exception as e:  # noqa: B902 - goes back to the caller
                agent.send({'error': str(e)})
        if 'error' in msg:
            raise AgentError(host, op, msg['error'], msg.get('type'))
        return msg['result']
