"""What a host has: GPUs (the declared emulation, else NVML, else nvidia-smi, else none), CPUs,
memory, Python and torch versions.

Every optional NVML query is wrapped: a GPU that cannot report utilization or processes
("not supported" on many consumer cards) yields ``None`` for that value, never a crash.
"""

import os
import sys
import threading
import time

# shutil, subprocess and platform are imported where used: agent start-up time is paid on
# every host at every connect.

SMI_FIELDS = ("index", "uuid", "name", "memory.total", "memory.used", "utilization.gpu")
SHADOWED = "not used: this host declares emulated GPUs"  # ends the note a user must see
_SMI_MISSING = ("[n/a]", "[not supported]", "n/a", "not supported", "")
SAMPLE_LIMIT_S = 5.0  # one nvidia-smi reading while the agent runs (the controller's hello may set it)
PROBE_LIMIT_S = 10.0  # all of a connect's GPU reading; below the controller's 15 s connect timeout
BUS_HINT = "a GPU may have fallen off the bus: look for Xid errors in dmesg"


class ProbeTimeout(OSError):
    """A GPU reading that did not finish in time. Unlike "no driver" or "no GPUs", it says
    nothing about what the host has: the connect fails and is retried, instead of bringing the
    host up as an empty box that stays empty until it reconnects."""


def within(read, limit_s):
    """``read()``, in a thread so that a reading stuck where no signal reaches it (NVML inside
    the driver, nvidia-smi in the kernel after an Xid 79) cannot stop the caller; raises
    ProbeTimeout after ``limit_s`` and leaves the stuck thread behind (a daemon)."""
    box = {}

    def run():
        try:
            box["value"] = read()
        except BaseException as exc:  # handed to the caller as is
            box["error"] = exc

    thread = threading.Thread(target=run, name="gpu-probe", daemon=True)
    thread.start()
    thread.join(max(0.0, limit_s))
    if thread.is_alive():
        raise ProbeTimeout("has not answered within %g s (%s)" % (round(limit_s, 1), BUS_HINT))
    if "error" in box:
        raise box["error"]
    return box["value"]


def _optional(call, *args):
    try:
        return call(*args)
    except Exception:
        return None


def _text(value):
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _failing_errors(nvml):
    """The NVML errors that mean the GPU itself is gone or failing, not a query the card lacks."""
    names = ("NVMLError_GpuIsLost", "NVMLError_Unknown", "NVMLError_GpuNotFound", "NVMLError_ResetRequired")
    return tuple(c for c in (getattr(nvml, n, None) for n in names) if isinstance(c, type))


def _query(call, handle, failing):
    """(value, "") for an answer, (None, "") for a query this card lacks ("Not Supported"), and
    (None, why) when the GPU is failing: only the first two were told apart, and a GPU lost
    between readings was offered with no memory and no processes, as if idle."""
    try:
        return call(handle), ""
    except failing as exc:
        return None, _text(exc) or type(exc).__name__
    except Exception:  # noqa: BLE001 - a query the card or driver does not support
        return None, ""


def _unusable(index, why, uuid=None):
    return {"index": index, "uuid": _text(uuid) if uuid is not None else "", "name": "unknown", "memory_mb": 0,
            "memory_used_mb": None, "utilization": None, "processes": None, "error": why}


def gpus_from_nvml(nvml):
    """GPU dicts read through an ``pynvml``-like module; raises only if NVML itself is absent.

    One GPU that cannot be reached (fallen off the bus, Xid 79; or one the cgroup forbids, which
    NVML still counts) is listed with an ``error`` and the others are read: its error failed the
    whole reading, and every GPU of the host went unread with it."""
    nvml.nvmlInit()
    failing = _failing_errors(nvml)
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except Exception as exc:  # noqa: BLE001 - whatever it is, this GPU cannot be used now
                gpus.append(_unusable(index, _text(exc) or type(exc).__name__))
                continue
            memory, lost = _query(nvml.nvmlDeviceGetMemoryInfo, handle, failing)
            util, lost_util = _query(nvml.nvmlDeviceGetUtilizationRates, handle, failing)
            procs, lost_procs = _query(nvml.nvmlDeviceGetComputeRunningProcesses, handle, failing)
            if lost or lost_util or lost_procs:  # its UUID, where it still gives one: matched as the same GPU
                gpus.append(_unusable(index, lost or lost_util or lost_procs, _optional(nvml.nvmlDeviceGetUUID, handle)))
                continue
            uuid = _optional(nvml.nvmlDeviceGetUUID, handle)
            name = _optional(nvml.nvmlDeviceGetName, handle)
            mig_mode = getattr(nvml, "nvmlDeviceGetMigMode", None)  # absent from old pynvml releases
            mig = _optional(mig_mode, handle) if mig_mode else None  # [current, pending]; 1 is enabled
            gpus.append({
                "index": index,
                "uuid": _text(uuid) if uuid is not None else "",
                "name": _text(name) if name is not None else "unknown",
                "memory_mb": int(memory.total // (1024 * 1024)) if memory is not None else 0,
                "memory_used_mb": int(memory.used // (1024 * 1024)) if memory is not None else None,
                "utilization": float(util.gpu) if util is not None else None,
                "processes": [int(p.pid) for p in procs] if procs is not None else None,
            })
            if isinstance(mig, (list, tuple)) and mig and mig[0] == 1:
                gpus[-1]["mig"] = True
        return gpus
    finally:
        _optional(nvml.nvmlShutdown)


def _smi_number(text, cast):
    value = text.strip()
    if value.lower() in _SMI_MISSING:
        return None
    try:
        return cast(float(value))
    except ValueError:
        return None


def parse_nvidia_smi_csv(text):
    """GPU dicts from ``nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits``.

    Lines with too few fields are skipped (nvidia-smi prints warnings on some drivers); a name
    holding commas (the CSV does not quote it) keeps them; ``[N/A]`` and ``[Not Supported]``
    become ``None``.
    """
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < len(SMI_FIELDS):
            continue
        extra = len(parts) - len(SMI_FIELDS)
        parts[2:3 + extra] = [", ".join(parts[2:3 + extra])]
        index = _smi_number(parts[0], int)
        if index is None:
            continue
        total = _smi_number(parts[3], int)
        # "[GPU requires reset]" as its name, "ERR!" as a reading: a broken GPU, whose bracketed text
        # became its name, and jobs were put on it (NVML fails the whole reading of a lost one)
        trouble = next((p for p in parts[2:6] if p == "ERR!" or (p.startswith("[") and p.lower() not in _SMI_MISSING)),
                       None)
        gpus.append({
            "index": index,
            "uuid": parts[1] if parts[1].lower() not in _SMI_MISSING else "",
            "name": parts[2] if parts[2].lower() not in _SMI_MISSING else "unknown",
            "memory_mb": total if total is not None else 0,
            "memory_used_mb": _smi_number(parts[4], int),
            "utilization": _smi_number(parts[5], float),
            "processes": None,
            **({"error": trouble} if trouble is not None else {}),
        })
    return gpus


def _find_on_path(name):
    """``shutil.which`` without importing shutil: most hosts probed for nvidia-smi lack it."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def parse_compute_apps_csv(text, gpus):
    """Set each GPU dict's ``processes`` from ``nvidia-smi --query-compute-apps=gpu_uuid,pid
    --format=csv,noheader,nounits`` (GPUs named by UUID); malformed lines are skipped."""
    by_uuid = {g["uuid"]: g for g in gpus if g.get("uuid")}
    for g in gpus:
        g["processes"] = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2 or parts[0] not in by_uuid or not parts[1].isdigit():
            continue
        by_uuid[parts[0]]["processes"].append(int(parts[1]))
    return gpus


def gpus_from_nvidia_smi(timeout=10.0):
    exe = _find_on_path("nvidia-smi")
    if exe is None:
        raise OSError("nvidia-smi not found")
    import subprocess  # only when there is something to run

    began = time.monotonic()
    try:
        out = subprocess.run(
            [exe, "--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits"],
            capture_output=True, timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise ProbeTimeout("did not answer within %g s" % round(timeout, 1)) from None
    if out.returncode != 0:  # its own words (say, no driver) tell the user more than the exit code
        said = (_text(out.stderr).strip() or _text(out.stdout).strip()).splitlines()
        raise OSError(f"exit code {out.returncode}" + (f": {said[0][:200]}" if said else ""))
    gpus = parse_nvidia_smi_csv(out.stdout.decode("utf-8", errors="replace"))
    left = timeout - (time.monotonic() - began)  # both calls within ``timeout``: a slow nvidia-smi
    if left <= 0.5:  # (no persistence mode) must not double the connect's wait
        return gpus
    try:
        apps = subprocess.run([exe, "--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader,nounits"],
                              capture_output=True, timeout=left)
    except (OSError, subprocess.SubprocessError):
        return gpus  # processes stay unknown (None)
    if apps.returncode == 0:
        parse_compute_apps_csv(apps.stdout.decode("utf-8", errors="replace"), gpus)
    return gpus


def emulated_gpus(spec):
    """The GPUs a host declares it emulates: ``{"gpu_type", "count", "speed"}``."""
    return [
        {"index": i, "uuid": "emulated-%d" % i, "name": str(spec["gpu_type"]), "memory_mb": 0,
         "memory_used_mb": None, "utilization": None, "processes": None}
        for i in range(int(spec["count"]))
    ]


def _read_nvml():
    import pynvml  # type: ignore  # optional: nvidia-ml-py

    return gpus_from_nvml(pynvml)


def probe_gpus(emulate=None, probes=("nvml", "nvidia-smi"), limit_s=PROBE_LIMIT_S):
    """``(source, gpus, notes)``: the first source that works, with why the others did not.

    A declared ``emulate`` always wins: the user asked for that mode (to stand in for GPUs this
    host lacks, or to keep its real GPUs out of the cluster). Real GPUs found beside it are
    named in a note, so a leftover ``emulate`` line on a GPU host does not go unnoticed.
    Without one, a source that does not answer within ``limit_s`` (all sources together)
    raises ProbeTimeout naming it: the next source would hang on the same driver.
    """
    notes = []
    deadline = time.monotonic() + limit_s
    for probe in probes:
        left = deadline - time.monotonic()
        try:
            if probe == "nvml":
                gpus = within(_read_nvml, left)
            elif probe == "nvidia-smi":
                gpus = within(lambda: gpus_from_nvidia_smi(timeout=max(0.5, left - 0.5)), left)
            else:
                continue
        except ProbeTimeout as exc:
            if not emulate:
                raise ProbeTimeout(f"{probe}: {exc}") from None
            notes.append(f"{probe}: {exc}")
            break
        except ModuleNotFoundError as exc:  # "No module named 'pynvml'" named no package, nor which python
            notes.append(f"{probe}: {exc.name or 'pynvml'} is not importable by {sys.executable} (pip install "
                         "nvidia-ml-py for that python)")
            continue
        except Exception as exc:
            notes.append(f"{probe}: {_text(exc) or type(exc).__name__}")
            continue
        if not gpus:
            notes.append(f"{probe}: no GPUs")
            continue
        if not emulate:
            return probe, gpus, notes
        names = sorted({g["name"] for g in gpus})
        notes.append(f"{probe}: {len(gpus)} real GPU(s) ({', '.join(names)}) {SHADOWED}")
        break
    if emulate:
        return "emulated", emulated_gpus(emulate), notes
    return "none", [], notes


def _memory_mb():
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _torch_version():
    """torch's version from its dist-info directory name: importing torch takes seconds and
    importlib.metadata scans every installed distribution, which matters on 100s of hosts."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("torch-") and name.endswith((".dist-info", ".egg-info")):
                return name[len("torch-"):].rsplit(".", 1)[0]
    return None


def host_facts():
    return {
        "hostname": os.uname().nodename,
        "cpus": os.cpu_count(),
        "memory_mb": _memory_mb(),
        "python": "%d.%d.%d" % sys.version_info[:3],
        "torch": _torch_version(),
    }


def reader(source, limit_s=SAMPLE_LIMIT_S):
    """A function that reads the GPUs afresh from ``source`` (raising when it cannot, or when
    nvidia-smi takes over ``limit_s``), or None for a source with nothing to read again
    (emulated, none)."""
    if source == "nvml":
        def read():
            import pynvml  # type: ignore

            return gpus_from_nvml(pynvml)
        return read
    if source == "nvidia-smi":
        return lambda: gpus_from_nvidia_smi(timeout=limit_s)
    return None


def utilization(fresh, gpus_before):
    """``(gpus, changed)``: per-GPU utilization, memory and compute processes for a heartbeat, by
    the inventory's index, and what changed since the inventory ("" when nothing did).

    A GPU is matched by its UUID where both readings have one: after a GPU drops off the bus the
    driver numbers the others anew, and matched by index each took the readings, and the
    processes, of its neighbour. A GPU without a fresh reading is ``unread``, never given the
    inventory's old values nor read as idle."""
    if fresh is None:
        return [{"index": g["index"], "unread": True} for g in gpus_before], ""
    by_uuid = {g["uuid"]: g for g in fresh if g.get("uuid")}
    by_index = {g["index"]: g for g in fresh}
    out, gone, moved, seen = [], [], [], set()
    for before in gpus_before:
        uuid = before.get("uuid")
        now = by_uuid.get(uuid) if uuid and by_uuid else by_index.get(before["index"])
        if now is None:
            gone.append("gpu%d" % before["index"])
            out.append({"index": before["index"], "unread": True})
            continue
        seen.add(id(now))
        if now.get("error"):  # failing since it was listed: not read, and not idle
            out.append({"index": before["index"], "unread": True})
            continue
        if now["index"] != before["index"]:
            moved.append("gpu%d is now %d" % (before["index"], now["index"]))
        out.append({"index": before["index"], "utilization": now.get("utilization"),
                    "memory_used_mb": now.get("memory_used_mb"), "processes": now.get("processes")})
    new = ["gpu%d" % g["index"] for g in fresh if id(g) not in seen]
    parts = [("%s gone" % ", ".join(gone)) if gone else "", ", ".join(moved),
             ("%s new" % ", ".join(new)) if new else ""]
    changed = "; ".join(p for p in parts if p)
    return out, ("the GPUs changed since they were listed: %s" % changed) if changed else ""
