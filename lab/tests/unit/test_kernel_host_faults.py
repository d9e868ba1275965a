# SPDX-License-Identifier: Apache-2.0
"""A lost machine under an L2 guest is told apart from a failing guest."""

import pytest

from puma_lab import agent
from puma_lab import errors
from puma_lab import kernel_host

BOOT = ('[    0.000000] Linux version 6.1.0-56-amd64 (debian-kernel@...)\n'
        '[    1.000000] smp: Bringing up secondary CPUs ...\n'
        'puma-guest: ready 6.1.0-56-amd64\n')


class FailingAgent(agent.GuestAgent):
    """The agent does not answer, or COMMAND exits with EXIT."""

    def __init__(self, exit=None):
        super().__init__(None, 'l2')
        self.exit = exit

    def run(self, command, timeout, check):
        if self.exit is None:
            raise errors.LabError('guest l2: agent guest-exec-status '
                                  'failed: timed out')
        res = agent.ExecResult(self.exit, '', 'insmod: ERROR')
        if check:
            self.check(command, res)
        return res


class Host:
    name = 'kh'

    def __init__(self, alive=True, answers=True, lost_timer=None,
                 l2_runs=True, panic=None, stall=None, dmesg='',
                 late_probes=0, stuck=None):
        self._dmesg = dmesg
        self._stuck = stuck
        # Probes of the L2 QEMU the agent answers too late (then in time).
        self._late_probes = late_probes
        self._alive = alive
        self._answers = answers
        self._lost_timer = lost_timer
        self._stall = stall
        self._l2_runs = l2_runs
        self._panic = panic

    def alive(self):
        return self._alive

    def answers(self):
        return self._alive and self._answers

    def lost_timer(self):
        return self._lost_timer

    def stall_line(self):
        return self._stall

    def panic_line(self):
        return self._panic

    def unresponsive(self):
        return self._stuck

    def chroot(self, command, timeout=120, check=True):
        if not self.answers():
            raise errors.LabError('guest kh: agent guest-exec-status '
                                  'failed: timed out')
        if command.startswith('kill -0') and self._late_probes:
            self._late_probes -= 1
            raise errors.LabError('guest kh: command pid 7 still running '
                                  'after 120s (3 polls unanswered)')
        if command.startswith('kill -0') and not self._l2_runs:
            return agent.ExecResult(1, '', 'No such process')
        return agent.ExecResult(0, '', '')

    def run(self, command, timeout=60, check=True):
        assert command == 'dmesg', command
        return agent.ExecResult(0, self._dmesg, '')

    def _diagnose(self, why):
        return 'guest kh: %s\n--- console: rcu: INFO: rcu_preempt ' \
            'self-detected stall on CPU' % why


def guest(tmp_path, console, host_alive=True, host_answers=True, **host):
    g = object.__new__(kernel_host.NestedGuest)
    g.name = 'l2'
    g.host = Host(host_alive, host_answers, **host)
    g.agent = FailingAgent()
    g.console_path = str(tmp_path / 'l2.console.log')
    g.stderr_path = str(tmp_path / 'l2.qemu.log')
    (tmp_path / 'l2.console.log').write_text(console)
    return g


def test_one_boot_is_no_machine_fault(tmp_path):
    g = guest(tmp_path, BOOT)
    assert g.machine_fault() is None
    with pytest.raises(errors.LabError) as e:
        g.run('true')
    assert not isinstance(e.value, kernel_host.MachineFault)


def test_a_silent_reset_is_a_machine_fault(tmp_path):
    g = guest(tmp_path, BOOT + BOOT[:60])
    assert 'reset with nothing on its console' in g.machine_fault()
    assert 'boot 2 began after "puma-guest: ready' in g.machine_fault()
    with pytest.raises(kernel_host.MachineFault, match='L2 guest l2 in kh'):
        g.run('true')


@pytest.mark.parametrize('death', ['Kernel panic - not syncing: Fatal',
                                   'BUG: kernel NULL pointer dereference',
                                   'Oops: 0000 [#1] PREEMPT SMP'])
def test_a_reboot_after_a_guest_death_is_the_guests_fault(tmp_path, death):
    g = guest(tmp_path, BOOT + '[    9.0] %s\n' % death + BOOT)
    assert g.machine_fault() is None
    with pytest.raises(errors.LabError) as e:
        g.run('true')
    assert not isinstance(e.value, kernel_host.MachineFault)


def test_no_l2_is_stopped_in_a_kernel_host_that_ended(tmp_path):
    g = guest(tmp_path, BOOT, host_alive=False)
    g.stop()  # would ask the ended kernel host's agent otherwise


def test_a_kernel_host_that_does_not_answer_is_a_machine_fault(tmp_path):
    g = guest(tmp_path, BOOT, host_answers=False)
    with pytest.raises(kernel_host.MachineFault,
                       match='(?s)its kernel host does not answer.*stall'):
        g.run('true')


def test_a_failing_command_after_a_reset_is_no_machine_fault(tmp_path):
    # The guest reset once (in its boot, say) and then answered: a
    # command that exits non-zero is the guest's failure.
    g = guest(tmp_path, BOOT + BOOT)
    g.agent = FailingAgent(exit=1)
    with pytest.raises(errors.LabError, match='exited 1') as e:
        g.run('insmod /mnt/host/shoot4u.ko')
    assert not isinstance(e.value, kernel_host.MachineFault)
    assert g.run('insmod /mnt/host/shoot4u.ko', check=False).rc == 1


def kernel_host_ending(seconds, monkeypatch, tmp_path):
    """A KernelHost whose QEMU ends SECONDS after its agent went away."""
    import subprocess

    from puma_lab import vm
    kh = object.__new__(kernel_host.KernelHost)
    kh.name = 'kh'
    kh.console_log = str(tmp_path / 'console.log')
    kh.vcpus = 2
    kh.proc = subprocess.Popen(['sleep', str(seconds)])
    kh._diagnose = lambda why: errors.LabError('guest kh: ' + why)

    def gone(self, command, timeout, check):
        raise errors.LabError('guest kh: agent guest-exec failed: [Errno 2] '
                              'No such file or directory')
    monkeypatch.setattr(vm.Guest, 'run', gone)
    return kh


def test_a_kernel_host_whose_qemu_is_ending_is_a_machine_fault(
        monkeypatch, tmp_path):
    """Its agent's socket goes first: QEMU gets a moment to end."""
    kh = kernel_host_ending(0.5, monkeypatch, tmp_path)
    with pytest.raises(kernel_host.MachineFault, match='QEMU ended'):
        kh.run('true')


def test_a_kernel_host_that_runs_on_is_no_machine_fault(monkeypatch,
                                                        tmp_path):
    """Its agent went away, no stall on its console: not the machine."""
    monkeypatch.setattr(kernel_host, 'ENDING_GRACE', 0.2)
    kh = kernel_host_ending(30, monkeypatch, tmp_path)
    try:
        with pytest.raises(errors.LabError) as e:
            kh.run('true')
        assert not isinstance(e.value, kernel_host.MachineFault)
    finally:
        kh.proc.kill()
        kh.proc.wait()


STALLED = BOOT.split('puma-guest')[0]


def booting(tmp_path, console, **kw):
    g = guest(tmp_path, console, **kw)
    g.started = 0
    g.pidfile = '/run/l2.pid'
    return g


def test_a_boot_that_stops_silently_is_a_machine_fault(tmp_path):
    g = booting(tmp_path, STALLED)
    with pytest.raises(kernel_host.MachineFault,
                       match='stopped with nothing on its console after '
                       '"\\[    1.000000\\] smp: Bringing up'):
        g.wait_booted(timeout=0)


def test_a_boot_in_a_lost_kernel_host_is_a_machine_fault(tmp_path):
    g = booting(tmp_path, STALLED, host_answers=False)
    with pytest.raises(kernel_host.MachineFault,
                       match='kernel host does not answer'):
        g.wait_booted(timeout=0)


def test_a_kernel_host_silent_while_its_guest_boots_is_a_machine_fault(
        tmp_path, monkeypatch):
    """The probe of QEMU in the kernel host is where its silence shows.

    CI of 2026-11-27: the kernel host's agent timed out on that probe (a
    soft lockup on its console) and the boot failed with a plain error,
    which the test does not retry.
    """
    monkeypatch.setattr(kernel_host, 'ALIVE_EVERY', 0)
    g = booting(tmp_path, STALLED, host_answers=False)
    with pytest.raises(kernel_host.MachineFault,
                       match='does not answer while it boots'):
        g.wait_booted(timeout=30)


def test_a_kernel_host_panic_is_named_in_the_fault(tmp_path, monkeypatch):
    """CI of 2026-11-28: the kernel host panicked while an L2 guest booted.

    Our KVM runs there, so the panic line goes into the fault's message.
    """
    monkeypatch.setattr(kernel_host, 'ALIVE_EVERY', 0)
    panic = ('[  340.888740] Kernel panic - not syncing: corrupted stack '
             'end detected inside scheduler')
    g = booting(tmp_path, STALLED, host_answers=False, panic=panic)
    with pytest.raises(kernel_host.MachineFault,
                       match='its console: .*corrupted stack end'):
        g.wait_booted(timeout=30)


def test_kernel_host_panic_line(tmp_path):
    kh = object.__new__(kernel_host.KernelHost)
    kh.console_log = str(tmp_path / 'console.log')
    assert kh.panic_line() is None
    (tmp_path / 'console.log').write_text(
        'puma-guest: ready\n[ 3.0] Kernel panic - not syncing: x\n')
    assert kh.panic_line() == '[ 3.0] Kernel panic - not syncing: x'


def test_a_boot_that_panics_is_the_guests_fault(tmp_path):
    g = booting(tmp_path, STALLED + '[    2.0] Kernel panic - not syncing\n')
    with pytest.raises(errors.LabError, match='did not boot') as e:
        g.wait_booted(timeout=0)
    assert not isinstance(e.value, kernel_host.MachineFault)


def test_a_booted_guest_is_no_fault(tmp_path):
    g = booting(tmp_path, BOOT)
    assert g.wait_booted(timeout=5) is g


LOST_TIMER = ("[ 1143.875461] rcu: rcu_preempt kthread timer wakeup didn't "
              "happen for 52527 jiffies! g299609 f0x2 RCU_GP_WAIT_FQS(5)")


def test_a_guest_that_ends_in_a_kernel_host_that_lost_a_timer(
        tmp_path, monkeypatch):
    """The bench of 2026-11-27: CPU 0 of the kernel host lost its timer.

    The L2 guest's QEMU ended while it booted and the kernel host's agent
    still answered (from CPU 1): a machine fault, not the guest's exit.
    """
    monkeypatch.setattr(kernel_host, 'ALIVE_EVERY', 0)
    g = booting(tmp_path, STALLED, lost_timer=LOST_TIMER, l2_runs=False)
    with pytest.raises(kernel_host.MachineFault,
                       match="lost a timer interrupt: .*timer wakeup"):
        g.wait_booted(timeout=30)


def test_a_guest_that_ends_in_a_sound_kernel_host_is_no_machine_fault(
        tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_host, 'ALIVE_EVERY', 0)
    g = booting(tmp_path, STALLED, l2_runs=False)
    with pytest.raises(errors.LabError, match='exited') as e:
        g.wait_booted(timeout=30)
    assert not isinstance(e.value, kernel_host.MachineFault)


def test_a_late_probe_of_a_booting_guest_is_no_exit(tmp_path, monkeypatch):
    """CI of 2026-12-06: "L2 guest x1-a exited" while its console booted.

    The probe of its QEMU then took the kernel host's agent's failure
    for a QEMU that ended; the kernel host answered the next question.
    A probe without an answer is asked again.
    """
    monkeypatch.setattr(kernel_host, 'ALIVE_EVERY', 0)
    g = booting(tmp_path, STALLED, late_probes=1)
    with pytest.raises(errors.LabError, match='did not boot') as e:
        g.wait_booted(timeout=1)
    assert 'exited' not in str(e.value)


def test_a_guest_that_ends_names_what_its_qemu_and_host_said(
        tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_host, 'ALIVE_EVERY', 0)
    dmesg = ('[  9.0] virtio_net virtio0 enp0s2: renamed\n'
             '[ 88.1] qemu-system-x86[812]: segfault at 0 ip 5 sp 7 '
             'error 4 in qemu-system-x86_64\n')
    g = booting(tmp_path, STALLED, l2_runs=False, dmesg=dmesg)
    (tmp_path / 'l2.qemu.log').write_text(
        'qemu-system-x86_64: block.c:42: assertion failed\n')
    with pytest.raises(errors.LabError, match='exited') as e:
        g.wait_booted(timeout=30)
    assert 'block.c:42: assertion failed' in str(e.value)
    assert 'segfault at 0' in str(e.value)
    assert 'renamed' not in str(e.value)


def test_a_silent_agent_in_a_kernel_host_that_lost_a_timer(tmp_path):
    g = guest(tmp_path, BOOT, lost_timer=LOST_TIMER)
    with pytest.raises(kernel_host.MachineFault,
                       match='lost a timer interrupt'):
        g.run('tlbstorm -n 300')


def test_lost_timer_reads_the_kernel_host_console(tmp_path):
    kh = object.__new__(kernel_host.KernelHost)
    kh.console_log = str(tmp_path / 'console.log')
    assert kh.lost_timer() is None
    assert kh.stall_line() is None
    (tmp_path / 'console.log').write_text(SOFT_LOCKUP + '\n')
    assert kh.lost_timer() is None
    assert kh.stall_line() == SOFT_LOCKUP
    with open(kh.console_log, 'a') as f:
        f.write(LOST_TIMER + '\n')
    assert kh.lost_timer() == LOST_TIMER
    assert kh.stall_line() == SOFT_LOCKUP


SOFT_LOCKUP = ('[  485.112006] watchdog: BUG: soft lockup - CPU#1 stuck for '
               '26s! [khugepaged:41]')
RCU_STALL = ('[  459.114765] rcu: INFO: rcu_preempt detected stalls on '
             'CPUs/tasks:')


def test_a_silent_agent_in_a_kernel_host_whose_cpu_stalled(tmp_path):
    """CI of 2026-11-28: the relay through a stalled kernel host failed."""
    g = guest(tmp_path, BOOT, stall=RCU_STALL)
    with pytest.raises(kernel_host.MachineFault,
                       match='a CPU of its kernel host stalled: .*rcu'):
        g.run('tlbstorm -n 300')


def test_a_kernel_host_that_stalled_and_went_silent_is_lost(
        tmp_path, monkeypatch):
    """CI of 2026-11-28: CPU 0 stalled, then a soft lockup on CPU 1."""
    monkeypatch.setattr(kernel_host, 'ENDING_GRACE', 0.2)
    kh = kernel_host_ending(30, monkeypatch, tmp_path)
    (tmp_path / 'console.log').write_text(
        BOOT + RCU_STALL + '\n' + SOFT_LOCKUP + '\n')
    try:
        with pytest.raises(kernel_host.MachineFault,
                           match='stopped answering after a CPU stalled '
                           '.*detected stalls'):
            kh.run('true')
    finally:
        kh.proc.kill()
        kh.proc.wait()


DOUBLE_FAULT = ('[   42.704623] traps: PANIC: double fault, error_code: 0x0\n'
                '[   42.706597] double fault: 0000 [#1] PREEMPT SMP NOPTI\n'
                '[   46.746493] Kernel panic - not syncing: Fatal exception '
                'in interrupt\n')


def test_a_silent_agent_of_a_guest_that_died_names_the_death(tmp_path):
    """CI of 2026-11-29: the agent timeout hid the guest's panic."""
    g = guest(tmp_path, BOOT + DOUBLE_FAULT)
    with pytest.raises(errors.LabError,
                       match='died: ".*PANIC: double fault') as e:
        g.run('tlbstorm -n 300')
    assert not isinstance(e.value, kernel_host.MachineFault)


# The console of CI 2026-11-29's 6.1 guest (tlbstorm, native run).
DOUBLE_FAULT = (
    '[   42.704623] traps: PANIC: double fault, error_code: 0x0\n'
    '[   42.706597] double fault: 0000 [#1] PREEMPT SMP NOPTI\n'
    '[   42.707145] CPU: 1 PID: 154 Comm: tlbstorm Not tainted '
    '6.1.0-56-amd64 #1  Debian 6.1.192-2\n'
    '[   42.707461] RIP: 0010:%s/0x29\n'
    '[   42.724455] Code: cc cc cc <0f> 01 f8 65 48 89 24 25 14 60 00 00\n'
    '[   42.724659] RSP: 0018:00007f50185ad0a0 EFLAGS: %s\n'
    '[   42.725818] PKRU: 55555554\n'
    '[   46.746493] Kernel panic - not syncing: Fatal exception in '
    'interrupt\n')


def test_a_double_fault_at_syscall_entry_with_if_clear_is_the_machines(
        tmp_path):
    died = DOUBLE_FAULT % ('entry_SYSCALL_64+0x0', '00000002')
    g = guest(tmp_path, BOOT + died)
    assert 'double fault at entry_SYSCALL_64+0x0 with interrupts off ' \
        '(EFLAGS 2)' in g.machine_fault()
    with pytest.raises(kernel_host.MachineFault, match='x86 delivers none'):
        g.run('true')


@pytest.mark.parametrize('rip,eflags', [
    ('entry_SYSCALL_64+0x0', '00000202'),    # IF set: not that case
    ('entry_SYSCALL_64+0x3', '00000002'),    # after SWAPGS
    ('asm_exc_page_fault+0x0', '00000002'),
])
def test_other_double_faults_are_the_guests(tmp_path, rip, eflags):
    g = guest(tmp_path, BOOT + DOUBLE_FAULT % (rip, eflags))
    assert g.machine_fault() is None
    with pytest.raises(errors.LabError, match='died: ".*PANIC: double') as e:
        g.run('true')
    assert not isinstance(e.value, kernel_host.MachineFault)


def test_a_relay_through_a_host_whose_share_hangs_is_a_machine_fault(
        tmp_path):
    g = guest(tmp_path, BOOT, stuck='"chroot /mnt/host ..." did not end')
    with pytest.raises(kernel_host.MachineFault,
                       match='its kernel host answers, but "chroot'):
        g.run('cd /sys/kernel/shoot4u && grep . *')


BLOCKED = ('[  400.000001] sysrq: Show Blocked State\n'
           '[  400.000002] task:python3 state:D stack:0 pid:491\n'
           '[  400.000003]  p9_client_rpc+0x1a5/0x3e0 [9pnet]\n')


def kernel_host_probed(monkeypatch, tmp_path, hangs):
    """A KernelHost whose commands in HANGS never end; the rest do."""
    from puma_lab import vm
    monkeypatch.setattr(kernel_host, 'SYSRQ_SETTLE', 0)
    kh = object.__new__(kernel_host.KernelHost)
    kh.name = 'kh'
    kh.vcpus = 2
    kh.console_log = str(tmp_path / 'console.log')
    (tmp_path / 'console.log').write_text(BOOT)
    kh.proc = None
    kh.alive = lambda grace=0: True
    kh._diagnose = lambda why: errors.LabError('guest kh: ' + why)
    ran = []

    def run(self, command, timeout, check):
        ran.append(command)
        if command.startswith('echo w'):
            with open(kh.console_log, 'a') as f:
                f.write(BLOCKED)
        if any(command.startswith(h) for h in hangs):
            raise errors.LabError('guest kh: command pid 9 still running '
                                  'after %ds (0 polls unanswered)' % timeout)
        return agent.ExecResult(0, '', '')
    monkeypatch.setattr(vm.Guest, 'run', run)
    return kh, ran


def test_a_kernel_host_whose_share_hangs_is_a_machine_fault(monkeypatch,
                                                            tmp_path):
    """CI of 2026-12-07: chroot commands hung, the agent answered."""
    kh, ran = kernel_host_probed(monkeypatch, tmp_path,
                                 ('sh -c', 'chroot'))
    with pytest.raises(kernel_host.MachineFault,
                       match='(?s)its agent answers, but "chroot /mnt/host '
                       '.*did not end in 45 s.*blocked tasks:.*'
                       'p9_client_rpc') as e:
        kh.chroot('python3 -c relay')
    assert 'still running after 120s' in str(e.value)
    assert [c for c in ran if c.startswith('taskset')] == [
        'taskset -c 0 true', 'taskset -c 1 true']
    assert not kh.healthy()


def test_a_kernel_host_cpu_that_runs_nothing_is_a_machine_fault(
        monkeypatch, tmp_path):
    kh, ran = kernel_host_probed(monkeypatch, tmp_path,
                                 ('sleep', 'taskset -c 1'))
    with pytest.raises(kernel_host.MachineFault,
                       match='"taskset -c 1 true" did not end'):
        kh.run('sleep 600', timeout=60)
    assert not any(c.startswith('chroot') for c in ran)


def test_a_slow_command_in_a_sound_kernel_host_is_no_machine_fault(
        monkeypatch, tmp_path):
    kh, ran = kernel_host_probed(monkeypatch, tmp_path, ('sleep',))
    with pytest.raises(errors.LabError, match='still running') as e:
        kh.run('sleep 600', timeout=60)
    assert not isinstance(e.value, kernel_host.MachineFault)
    assert not any(c.startswith('echo w') for c in ran)
    assert kh.healthy()


class ForgetfulAgent(agent.GuestAgent):
    """An agent that started anew: it knows no pid it was asked for."""

    def __init__(self):
        super().__init__(None, 'l2')

    def spawn(self, command):
        return 7

    def wait(self, pid, timeout):
        raise errors.LabError("guest l2: agent guest-exec-status: Invalid "
                              "parameter 'pid'")


def test_a_spawned_command_of_a_guest_that_reset_is_a_machine_fault(
        tmp_path):
    """lab/bench ksm's caching half, 2026-12-07: a plain error before."""
    g = guest(tmp_path, BOOT + BOOT)
    g.agent = ForgetfulAgent()
    pid = g.spawn('cat /mnt/data/f*')
    with pytest.raises(kernel_host.MachineFault,
                       match="it reset with nothing on its console.*"
                       "Invalid parameter 'pid'"):
        g.wait(pid, 60)


def test_a_spawned_command_of_a_sound_guest_fails_as_itself(tmp_path):
    g = guest(tmp_path, BOOT)
    g.agent = ForgetfulAgent()
    with pytest.raises(errors.LabError, match="Invalid parameter") as e:
        g.wait(g.spawn('true'), 60)
    assert not isinstance(e.value, kernel_host.MachineFault)
