"""The descriptor socket's wire format (common/fd_upload_wire.h) for the
tests, standard library only: test_fd_upload.py imports it, and runs it as
a script as another user (then it hands over a sealed memfd of FILE and
prints the symbolizer's answer).

  fd_wire.py SOCKET.fd FILE FILE_ID_HEX"""
import fcntl
import os
import socket
import struct
import sys

SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def hello(fid, size):
    return b"SONDEFD1" + fid + struct.pack("=Q", size)


def sealed_memfd(data, seals=SEALS):
    fd = os.memfd_create("sonde-test", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def hand_over(path, payload, fds, refused_early_ok=False):
    """Sends payload with fds on the descriptor socket at path: (status,
    message). refused_early_ok: a peer refused before its hello is read
    may find the socket closed under its send; the reply is there."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(path)
        try:
            socket.send_fds(s, [payload], fds)
        except OSError:
            if not refused_early_ok:
                raise
        r = b""
        while len(r) < 128:
            b = s.recv(128 - len(r))
            if not b:
                break
            r += b
    assert len(r) == 128, r
    return struct.unpack("=I", r[:4])[0], r[4:].split(b"\0")[0].decode()


if __name__ == "__main__":
    data = open(sys.argv[2], "rb").read()
    fd = sealed_memfd(data)
    try:
        status, message = hand_over(sys.argv[1], hello(bytes.fromhex(sys.argv[3]), len(data)), [fd],
                                    refused_early_ok=True)
    except OSError as e:
        print("connect", e.errno)
    else:
        print("status", status, message)
