/**
 * Reads TCP_NODELAY of live sockets of a process from the kernel: a Python
 * child takes a duplicate of each socket's descriptor with pidfd_getfd(2)
 * (same user, no Yama restriction here) and calls getsockopt on it. Sockets
 * are found by their (local port, remote port) in /proc/PID/net/tcp{,6}.
 */
import { execFileSync } from 'node:child_process';

const SCRIPT = `
import os, sys, json, socket, ctypes
pid = int(sys.argv[1]); want = json.loads(sys.argv[2])
inodes = {}
for name in ('tcp', 'tcp6'):
    with open(f'/proc/{pid}/net/{name}') as f:
        next(f)
        for line in f:
            p = line.split()
            lp = int(p[1].rsplit(':', 1)[1], 16); rp = int(p[2].rsplit(':', 1)[1], 16)
            inodes[(lp, rp)] = p[9]
fds = {}
for fd in os.listdir(f'/proc/{pid}/fd'):
    try: link = os.readlink(f'/proc/{pid}/fd/{fd}')
    except OSError: continue
    if link.startswith('socket:['): fds[link[8:-1]] = int(fd)
libc = ctypes.CDLL(None, use_errno=True)
pidfd = os.pidfd_open(pid)
out = []
for lp, rp in want:
    ino = inodes.get((lp, rp))
    if ino is None or ino not in fds: out.append(None); continue
    dup = libc.syscall(438, pidfd, fds[ino], 0)  # pidfd_getfd
    if dup < 0: raise OSError(ctypes.get_errno(), 'pidfd_getfd')
    s = socket.socket(fileno=dup)
    out.append(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0)
    s.detach(); os.close(dup)
print(json.dumps(out))
`;

/** TCP_NODELAY of each socket of `pid` named by [localPort, remotePort]; null when no such socket. */
export function noDelayOf(pid: number, sockets: Array<[number, number]>): Array<boolean | null> {
  return JSON.parse(execFileSync('python3', ['-c', SCRIPT, String(pid), JSON.stringify(sockets)], { encoding: 'utf8' })) as Array<
    boolean | null
  >;
}
