#!/usr/bin/env python3
"""report.py OUT: the markdown report of check.sh's outputs in OUT (stdlib only)."""
import json
import os
import re
import sys

MIB = 1 << 20
MODELS = ["tiny", "base", "small", "medium", "large"]


def load(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def smi_used(path):
    used = {}
    for row in text(path).splitlines():
        parts = [p.strip() for p in row.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            used[int(parts[0])] = int(parts[1]) * MIB
    return used


def times(path):
    out = {}
    for row in text(path).splitlines():
        parts = row.split()
        if len(parts) == 2:
            out[parts[0]] = parts[1]
    return out


def row(out, pass_, model, took):
    suffix = "for-tests-ggml-%s.bin" % model
    leases = load(os.path.join(out, "%s-%s.leases.json" % (pass_, model)), []) or []
    lease = next((l for l in leases if l.get("labels", {}).get("wsched.model", "").endswith(suffix)), None)
    if lease is None:
        return "| %s | no lease found | | | | | |" % model
    backends = load(os.path.join(out, "%s-%s.backends.json" % (pass_, model)), {}) or {}
    inst = next((i for i in backends.get("instances", []) if i.get("lease") == lease["id"]), {})
    used = smi_used(os.path.join(out, "%s-%s.smi" % (pass_, model)))
    nvml = sum(used.get(pid, 0) for pid in lease.get("pids", []))
    size = lease["memory_bytes"]
    margin = "%+.1f %%" % (100.0 * (size - nvml) / nvml) if nvml else "n/a"
    return "| %s | %.0f | %.1f | %.0f | %s | %.0f | %s s |" % (
        model, size / MIB, inst.get("reported_bytes", 0) / MIB, nvml / MIB, margin,
        lease.get("peak_bytes", 0) / MIB, took.get(model, "?"))


def table(out, pass_):
    took = times(os.path.join(out, pass_ + ".times"))
    lines = ["| model | lease MiB | backend's buffers MiB | NVML per process MiB | lease vs NVML | lease peak MiB | cold job wall |",
             "|---|---|---|---|---|---|---|"]
    lines += [row(out, pass_, m, took) for m in MODELS]
    return "\n".join(lines)


def oom(out):
    jobs = load(os.path.join(out, "oom-jobs.json"), []) or []
    if isinstance(jobs, dict):
        jobs = jobs.get("jobs", [])
    job = next((j for j in jobs if j.get("spec", j).get("model") == "large-too-small" or j.get("model") == "large-too-small"), None)
    if job is None:
        return "no job found for large-too-small"
    hist = ", ".join("%s@%s(attempt %s)" % (h.get("state"), h.get("time", "")[11:23], h.get("attempt"))
                     for h in job.get("history", []))
    return "state **%s**, attempts **%s**, memory_bytes %s, retry_bytes %s, error %r\n\nhistory: %s" % (
        job.get("state"), job.get("attempts"), job.get("memory_bytes"), job.get("retry_bytes"), job.get("error", ""), hist)


def main():
    out = sys.argv[1]
    learned = [l for l in text(os.path.join(out, "daemon.log")).splitlines() if "learned a CUDA context" in l]
    print("# wsched GPU check\n")
    print("```\n" + "\n".join(text(os.path.join(out, "nvidia-smi.txt")).splitlines()[:12]) + "\n```\n")
    print("## First run (nothing learned)\n")
    print(table(out, "first") + "\n")
    print("## Second run (after learning)\n")
    print(table(out, "second") + "\n")
    print("## CUDA context\n")
    print("```\n" + text(os.path.join(out, "bare-context.txt")).strip() + "\n```\n")
    print("learned by the daemon from its backends' readings at start:\n")
    print("```\n" + "\n".join(learned[:6]) + "\n```\n")
    print("## OOM under a 200 MiB entry for large, GPU full but for 1.5 GiB for 25 s\n")
    print(oom(out) + "\n")
    print("```\n" + text(os.path.join(out, "hog.txt")).strip() + "\n" +
          "\n".join(l for l in text(os.path.join(out, "steps.log")).splitlines() if "oom" in l.lower()) + "\n```\n")
    ooms = [l for l in text(os.path.join(out, "daemon.log")).splitlines()
            if re.search(r"out of memory|too small|waits for more", l)]
    print("```\n" + "\n".join(ooms[:8]) + "\n```")


if __name__ == "__main__":
    main()
