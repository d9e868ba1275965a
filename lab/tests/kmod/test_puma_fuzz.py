# SPDX-License-Identifier: Apache-2.0
"""Fuzz the Puma protocol checks (the module's proto.c, built in user space).

libFuzzer with AddressSanitizer and UBSan when clang has it (Debian:
libclang-rt-14-dev), else the standalone driver of the same target.  A
crash, a sanitizer report or a check that lets a length past the bound
fails the test.
"""

import os
import subprocess
import sys

from puma_lab import paths

FUZZ_DIR = os.path.join(paths.TOP, 'lab', 'fuzz')
PUMA_SRC = os.path.join(paths.TOP, 'guest-kmod', 'puma')
SOURCES = [os.path.join(FUZZ_DIR, 'puma_proto_fuzz.c'),
           os.path.join(PUMA_SRC, 'proto.c')]


def _build(out, libfuzzer):
    if libfuzzer:
        argv = ['clang', '-g', '-O1',
                '-fsanitize=fuzzer,address,undefined']
    else:
        argv = ['cc', '-g', '-O1', '-DPUMA_STANDALONE',
                '-fsanitize=address,undefined']
    res = subprocess.run(argv + ['-I', PUMA_SRC] + SOURCES + ['-o', out],
                         capture_output=True, text=True)
    return res.returncode == 0, res.stderr


def test_protocol_parser_fuzz(tmp_path):
    exe = str(tmp_path / 'fuzz')
    ok, err = _build(exe, libfuzzer=True)
    corpus = tmp_path / 'corpus'
    subprocess.run([sys.executable, os.path.join(FUZZ_DIR, 'gen_corpus.py'),
                    str(corpus)], check=True)
    if ok:
        argv = [exe, '-max_total_time=20', '-print_final_stats=1',
                '-error_exitcode=77', str(corpus)]
    else:
        ok, err2 = _build(exe, libfuzzer=False)
        assert ok, err + err2
        argv = [exe, '200000']
    res = subprocess.run(['nice', '-n', '10'] + argv, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert 'ERROR: AddressSanitizer' not in res.stderr
    assert 'runtime error' not in res.stderr
