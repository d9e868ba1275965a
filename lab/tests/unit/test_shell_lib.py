# SPDX-License-Identifier: Apache-2.0
"""lab/lib/*.sh helpers: series ids, patch lists and clear errors."""

import os
import subprocess

from puma_lab import paths

LIB = os.path.join(paths.TOP, 'lab', 'lib')


def sh(script, **env):
    full = '. %s/common.sh; . %s/kernels.sh; %s' % (LIB, LIB, script)
    return subprocess.run(['bash', '-c', full], capture_output=True,
                          text=True, env=dict(os.environ, **env))


def test_series_id_of_empty_series_is_empty(tmp_path):
    (tmp_path / 'series').write_text('# nothing yet\n\n')
    assert sh('series_id %s' % tmp_path).stdout.strip() == 'empty'


def test_series_id_changes_with_patch_content(tmp_path):
    (tmp_path / 'series').write_text('0001-a.patch\n')
    patch = tmp_path / '0001-a.patch'
    patch.write_text('one\n')
    first = sh('series_id %s' % tmp_path).stdout.strip()
    patch.write_text('two\n')
    second = sh('series_id %s' % tmp_path).stdout.strip()
    assert first != second and len(first) == 10 and first != 'empty'


def test_series_naming_a_missing_patch_is_an_error(tmp_path):
    (tmp_path / 'series').write_text('0001-missing.patch\n')
    p = sh('series_patches %s' % tmp_path)
    assert p.returncode == 1
    assert 'names 0001-missing.patch, which does not exist' in p.stderr


def test_unknown_kernel_name():
    p = sh('check_kernel_name 4.19')
    assert p.returncode == 1
    assert "unknown guest kernel '4.19' (known: 6.1 6.12)" in p.stderr


def test_missing_command_is_named():
    p = sh('require_cmd sh no-such-tool-puma')
    assert p.returncode == 1
    assert 'missing command(s): no-such-tool-puma' in p.stderr


def test_versions_newest_first_in_debian_order():
    p = sh('printf "6.12.8-1\\n6.12.117-1\\n6.1.5-1\\n6.12.38-1\\n'
           '6.12.117-1\\n6.12.38-1~bpo12+1\\n" | '
           'versions_newest_first "6.12.*"')
    assert p.stdout.split() == ['6.12.117-1', '6.12.38-1',
                                '6.12.38-1~bpo12+1', '6.12.8-1']


FAKE_APT_CACHE = r'''#!/bin/bash
# showsrc PKG: three versions of a source package; sha256 of "tar-VER".
for v in 1.3-1 1.2-1 1.1-1; do
    sum=$(printf 'tar-%s' "$v" | sha256sum | cut -d' ' -f1)
    printf 'Package: %s\nVersion: %s\nChecksums-Sha256:\n' "$2" "$v"
    printf ' %s 7 %s_%s.orig.tar.xz\n\n' "$sum" "$2" "${v%-*}"
done
'''

# apt-get source --download-only PKG=VER: only the versions in $SERVED;
# those in $TAMPERED come with other contents than the index says.
FAKE_APT_GET = r'''#!/bin/bash
spec=${@: -1}; pkg=${spec%%=*}; ver=${spec#*=}
case " $TAMPERED " in
*" $ver "*) echo tampered >"${pkg}_${ver%-*}.orig.tar.xz"; exit 0 ;;
esac
case " $SERVED " in
*" $ver "*) printf 'tar-%s' "$ver" >"${pkg}_${ver%-*}.orig.tar.xz" ;;
*) echo "Err:1 http://deb.example/pool ${pkg}_${ver%-*}.orig.tar.xz"
   echo "  404  Not Found"
   echo "E: Failed to fetch ${pkg}_${ver%-*}.orig.tar.xz  404  Not Found" >&2
   exit 100 ;;
esac
'''


def fake_apt(tmp_path):
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    for name, text in (('apt-cache', FAKE_APT_CACHE),
                       ('apt-get', FAKE_APT_GET)):
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    return dict(PATH='%s:%s' % (bindir, os.environ['PATH']),
                PUMA_CACHE=str(tmp_path / 'cache'))


def stack_sh(script, **env):
    return sh('. %s/stack.sh; %s' % (LIB, script), **env)


def test_source_version_falls_back_to_one_the_registry_serves(tmp_path):
    p = stack_sh('resolve_src_version fakepkg "1.*"', SERVED='1.1-1',
                 **fake_apt(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == '1.1-1'
    # The newer ones were tried first, and why they failed is said.
    assert 'apt-get source fakepkg=1.3-1 failed: E: Failed to fetch' in \
        p.stderr
    assert 'fakepkg=1.2-1' in p.stderr


def test_source_version_none_served_names_what_was_tried(tmp_path):
    p = stack_sh('resolve_src_version fakepkg "1.*"', SERVED='',
                 **fake_apt(tmp_path))
    assert p.returncode == 1
    assert ('no source version of fakepkg (1.*) could be downloaded; '
            'tried: 1.3-1 1.2-1 1.1-1 (pin one that downloads with '
            'PUMA_FAKEPKG_VERSION=VERSION)') in p.stderr


def test_source_version_pin_is_the_only_candidate(tmp_path):
    p = stack_sh('resolve_src_version fakepkg "1.*"', SERVED='1.3-1 1.2-1',
                 PUMA_FAKEPKG_VERSION='1.2-1', **fake_apt(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == '1.2-1'
    assert '1.3-1' not in p.stderr


def test_source_with_a_wrong_checksum_is_fatal(tmp_path):
    p = stack_sh('resolve_src_version fakepkg "1.*"', SERVED='1.2-1',
                 TAMPERED='1.3-1', **fake_apt(tmp_path))
    assert p.returncode == 1
    assert 'checksum mismatch for' in p.stderr
    assert '1.2-1' not in p.stdout


def test_long_step_reports_progress(tmp_path):
    log = tmp_path / 'log'
    p = sh('PUMA_PROGRESS_EVERY=1; work() { for i in 1 2 3; do '
           'echo "[$i/3] step"; sleep 1; done; }; '
           'run_with_progress %s thing work' % log)
    assert p.returncode == 0, p.stderr
    assert 'thing: building, 0:0' in p.stderr
    assert 'ninja at [' in p.stderr
    assert 'thing: done in 0:0' in p.stderr
    assert '[3/3] step' in log.read_text()


def test_failed_step_shows_its_log_and_status(tmp_path):
    p = sh('work() { echo "cc: error: boom"; return 3; }; '
           'run_with_progress %s thing work' % (tmp_path / 'log'))
    assert p.returncode == 3
    assert 'cc: error: boom' in p.stderr


# apt-cache show PKG=VER of a kernel's headers package; $SOURCE is its
# Source: field (Debian leaves the version out when it is the package's).
FAKE_APT_CACHE_SHOW = r'''#!/bin/bash
[ "$1" = show ] || exit 1
printf 'Package: %s\nSource: %s\nVersion: %s\n\n' "${2%%=*}" "$SOURCE" \
    "${2#*=}"
'''


def fake_kernel(tmp_path, source):
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    (bindir / 'apt-cache').write_text(FAKE_APT_CACHE_SHOW)
    (bindir / 'apt-cache').chmod(0o755)
    k = tmp_path / 'cache' / 'kernels' / '6.12'
    k.mkdir(parents=True)
    (k / 'good').write_text('')
    (k / 'release').write_text('6.12.95+deb12-amd64\n')
    (k / 'version').write_text('6.12.95-1~bpo12+1\n')
    return dict(PATH='%s:%s' % (bindir, os.environ['PATH']),
                PUMA_CACHE=str(tmp_path / 'cache'), SOURCE=source)


def test_kvm_source_is_the_guest_kernels_own(tmp_path):
    p = stack_sh('kernel_source_version 6.12',
                 **fake_kernel(tmp_path, 'linux'))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == '6.12.95-1~bpo12+1'


def test_kvm_source_version_from_the_source_field(tmp_path):
    p = stack_sh('kernel_source_version 6.12',
                 **fake_kernel(tmp_path, 'linux (6.12.95-2~bpo12+1)'))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == '6.12.95-2~bpo12+1'


def test_a_missing_series_file_builds_nothing(tmp_path):
    # What a checkout deleted under a running lab/setup looked like: the
    # patches directory gone.  Nothing may be built, published or pruned.
    cache = tmp_path / 'cache'
    good = cache / 'qemu' / 'k1'
    good.mkdir(parents=True)
    (good / 'good').write_text('')
    p = stack_sh('build_component qemu "1:10.0.*" %s true'
                 % (tmp_path / 'gone'), PUMA_CACHE=str(cache))
    assert p.returncode != 0
    assert 'series is missing: not building qemu' in p.stderr, p.stderr
    assert sorted(os.listdir(cache / 'qemu')) == ['k1']


def test_two_builds_of_one_source_keep_their_own_caches(tmp_path):
    # The KVM modules and the khost kernel are both builds of linux: the
    # second names its cache, and finding it built touches nothing of
    # the first's (its current link, its builds).
    env = fake_apt(tmp_path)
    cache = tmp_path / 'cache'
    series = tmp_path / 'series-dir'
    series.mkdir()
    (series / 'series').write_text('')
    kvm = cache / 'linux' / 'kvmkey'
    kvm.mkdir(parents=True)
    (kvm / 'good').write_text('')
    os.symlink('kvmkey', cache / 'linux' / 'current')
    key = stack_sh('stack_key linux 1.3-1 %s true' % series,
                   **env).stdout.strip()
    built = cache / 'khost-kernel' / key
    built.mkdir(parents=True)
    (built / 'good').write_text('')
    p = stack_sh('build_component linux 1.3-1 %s true khost-kernel'
                 % series, **env)
    assert p.returncode == 0, p.stderr
    assert 'is up to date in %s' % built in p.stderr
    assert os.readlink(cache / 'khost-kernel' / 'current') == key
    assert os.readlink(cache / 'linux' / 'current') == 'kvmkey'
    assert sorted(os.listdir(cache / 'linux')) == ['current', 'kvmkey']
