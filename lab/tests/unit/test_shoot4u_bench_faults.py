# SPDX-License-Identifier: Apache-2.0
"""shoot4u --host kvm: a machine fault anywhere in a round runs it again."""

import argparse
import contextlib

import pytest

from puma_lab.benches import shoot4u
from puma_lab import errors
from puma_lab import kernel_host


def figures(p50):
    return {'p50_us': p50, 'p99_us': p50 * 2, 'total_s': p50 / 10,
            'tlb_ipis': 0}


class Machine:
    """Faults in ready() at the calls of READY_FAULTS (1 = the first)."""

    def __init__(self, ready_faults=(), pair_faults=()):
        self.ready_faults, self.pair_faults = ready_faults, pair_faults
        self.readies = self.pairs = 0
        self.stopped = False

    def ready(self):
        self.readies += 1
        if self.readies in self.ready_faults:
            raise kernel_host.MachineFault('lost in ready %d'
                                           % self.readies)

    def pair(self, base):
        self.pairs += 1
        if self.pairs in self.pair_faults:
            raise kernel_host.MachineFault('lost in pair %d' % self.pairs)
        if base == 'hvflush':
            return figures(40.0), None
        return figures(100.0), figures(10.0)

    def stop(self):
        self.stopped = True


@pytest.fixture
def machine(monkeypatch):
    box = {}

    def make(ready_faults=(), pair_faults=()):
        box['m'] = Machine(ready_faults, pair_faults)
        return box['m']

    monkeypatch.setattr(shoot4u.lab_mod, 'Lab',
                        lambda *a, **k: contextlib.nullcontext())
    monkeypatch.setattr(shoot4u, 'KvmMachine',
                        lambda lab, args: box['m'])
    return make


ARGS = argparse.Namespace(rounds=2, kvm_modes=['ipi', 'pvflush'])


def test_fault_while_making_the_machine_ready_is_retried(machine):
    # The third run lost its kernel host in repair() before this.
    m = machine(ready_faults=(1, 3), pair_faults=(2,))
    out = shoot4u.run_kvm(ARGS)
    assert out['kvm_machine_faults'] == 3
    assert out['kvm_p50_x_ipi'] == 10.0
    assert out['kvm_p50_x_pvflush'] == 10.0
    # Four completed rounds, each after ready().
    assert m.pairs == 5 and m.readies == 7
    assert m.stopped


def test_too_many_faults_end_the_run(machine):
    m = machine(ready_faults=range(1, 100))
    with pytest.raises(kernel_host.MachineFault):
        shoot4u.run_kvm(ARGS)
    assert m.readies == shoot4u.MACHINE_FAULTS + 1
    assert m.stopped


class Host:
    name = 'kh'

    def __init__(self, healthy):
        self._healthy = healthy

    def healthy(self):
        return self._healthy

    def restart(self):
        raise errors.LabError('guest kh: command pid 321 still running '
                              'after 120s')


def test_a_silent_kernel_host_while_made_ready_is_a_machine_fault():
    m = object.__new__(shoot4u.KvmMachine)
    m.kh, m.busy = Host(healthy=False), None
    with pytest.raises(kernel_host.MachineFault, match='still running'):
        m.ready()


def test_an_error_in_a_sound_kernel_host_is_no_machine_fault():
    m = object.__new__(shoot4u.KvmMachine)
    m.kh, m.busy = Host(healthy=True), None
    m.start_busy = Host(True).restart
    with pytest.raises(errors.LabError) as e:
        m.ready()
    assert not isinstance(e.value, kernel_host.MachineFault)


def test_hyper_v_rounds_compare_with_shoot4u_of_the_ipi_rounds(machine):
    m = machine(pair_faults=(5,))
    out = shoot4u.run_kvm(argparse.Namespace(
        rounds=2, kvm_modes=['ipi', 'pvflush', 'hvflush']))
    assert m.pairs == 7
    assert out['kvm_hvflush_p50_us'] == 40.0
    assert 'kvm_s4u-hvflush_p50_us' not in out
    # Against Shoot4U's 10.0 of the ipi rounds.
    assert out['kvm_p50_x_hvflush'] == 4.0
    assert out['kvm_p99_x_hvflush'] == 4.0
    assert out['kvm_runtime_x_hvflush'] == 4.0
    assert out['kvm_p50_x_ipi'] == 10.0


def test_a_guest_without_hyper_v_flush_gives_no_hvflush_figures():
    shoot4u.check_hv_flush('[ 0.1] Hypervisor detected: Microsoft Hyper-V\n'
                           '[ 0.2] Hyper-V: Using hypercall for remote TLB '
                           'flush\n')
    with pytest.raises(errors.LabError,
                       match='does not use Hyper-V.*Hypervisor detected: '
                       'KVM'):
        shoot4u.check_hv_flush('[ 0.1] Hypervisor detected: KVM\n')


def test_kvm_modes_are_checked():
    with pytest.raises(SystemExit):
        shoot4u.run(['--host', 'kvm', '--kvm-modes', 'pvflush,hvflush'])
    with pytest.raises(SystemExit):
        shoot4u.run(['--kvm-modes', 'ipi,nope'])
