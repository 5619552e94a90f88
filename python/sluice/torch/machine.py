"""sluice.torch.machine: the machine and this process as /proc and /sys tell them: CPU and run-queue time
of processes and threads, bytes read, cores, memory, the whole machine's busy time."""

import glob as _glob
import os as _os


def _proc_sched(who):
    """(CPU seconds, run-queue seconds) of every thread of process `who` ("self" or a pid), from schedstat."""
    cpu = runq = 0
    for f in _glob.glob(f"/proc/{who}/task/*/schedstat"):
        try:
            with open(f) as fh:
                a = fh.read().split()
            cpu += int(a[0])
            runq += int(a[1])
        except (OSError, IndexError, ValueError):
            pass  # a thread that ended between the listing and the read
    return cpu / 1e9, runq / 1e9


def _thread_sched(tid, gone=(0.0, 0.0)):
    """(CPU seconds, run-queue seconds) of thread `tid` of this process; `gone` when it has ended."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as fh:
            a = fh.read().split()
        return int(a[0]) / 1e9, int(a[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return gone


def _proc_io(who):
    out = {}
    try:
        with open(f"/proc/{who}/io") as fh:
            for line in fh:
                k, _, v = line.partition(":")
                out[k.strip()] = int(v)
    except (OSError, ValueError):
        pass
    return out


def _cores():
    n = len(_os.sched_getaffinity(0))
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            q, p = fh.read().split()[:2]
        if q != "max":
            n = min(n, int(q) / int(p))
    except (OSError, ValueError):
        pass
    return float(n)


def _meminfo():
    out = {}
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                k, _, v = line.partition(":")
                out[k] = int(v.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out.get("MemTotal", 0), out.get("MemAvailable", 0)


def _busy_cpu_seconds():
    """CPU seconds the whole machine has been busy (/proc/stat: every state but idle and iowait). Niced time
    (nice > 0) is left out unless this process is niced: a background job at nice 10-19 yields its cores to a
    nice-0 loader (the C tracer's rule, trace.c sl__jiffies_busy)."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
        hz = _os.sysconf("SC_CLK_TCK")
        niced = f[1] if _os.getpriority(_os.PRIO_PROCESS, 0) <= 0 else 0
        return (sum(f[:8]) - f[3] - f[4] - niced) / hz
    except (OSError, ValueError):
        return -1.0
