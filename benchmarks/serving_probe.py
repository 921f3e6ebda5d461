"""Where the tail comes from: one probed service process under wrk, with py-spy sampling it.

    python benchmarks/serving_probe.py                     # embedded, c=32, 20 s
    python benchmarks/serving_probe.py --distributed --seconds 10

Starts `benchmarks/probed_server.py` (GC pauses, event-loop lag, stacks of the stalls), runs the
serving benchmark's request at --concurrency while `py-spy record` samples every thread of the
process, then prints wrk's figures, the probe report and py-spy's hottest stacks of the loop thread.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.loadgen import run_load
from benchmarks.servers import start_service
from benchmarks.serving import bench_record, heart_table, import_model, ten_rule_list


def top_stacks(raw: Path, thread_hint: str, n: int) -> list[tuple[int, str]]:
    """The n most sampled (leaf-most 6 frames) stacks of the threads whose name contains thread_hint."""
    counts: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, k = line.rpartition(" ")
        frames = stack.split(";")
        if thread_hint not in frames[0]:
            continue
        counts[" <- ".join(reversed(frames[-6:]))] += int(k)
    return counts.most_common(n)


def main() -> None:
    """Probe one server process under load and print what it shows."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--distributed", action="store_true")
    ap.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--stall-ms", type=float, default=10.0)
    ap.add_argument("--out", default=None, help="folder for the py-spy profile and the probe report")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="neurules-probe-"))
    out.mkdir(parents=True, exist_ok=True)
    report = out / "probe.json"
    names, X, y = heart_table()
    rl = ten_rule_list(names, X, y)
    body = json.dumps({"records": [bench_record(rl, names, X)]}).encode()

    def program(port: int) -> list[str]:
        script = str(ROOT / "benchmarks" / "probed_server.py")
        return [sys.executable, script, "--port", str(port), "--report", str(report), "--stall-ms", str(args.stall_ms)]

    server = start_service(
        1, {}, distributed_pg=args.pg if args.distributed else None, redis=args.redis, program=program
    )
    try:
        ref = import_model(server, rl.to_dict())
        url = f"{server.url}/v1/models/{ref}/predict"
        headers = {"Content-Type": "application/json", "X-API-Key": server.key or ""}
        run_load(url, body, headers, args.concurrency, 2)
        spy = None
        if shutil.which("py-spy") or (Path(sys.executable).parent / "py-spy").exists():
            exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
            cmd = [exe, "record", "--pid", str(server.proc.pid), "--duration", str(int(args.seconds)), "--rate", "500"]
            cmd += ["--threads", "--format", "raw", "--output", str(out / "pyspy.txt"), "--nonblocking"]
            spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        res = run_load(url, body, headers, args.concurrency, args.seconds)
        if spy is not None:
            spy.wait(60)
    finally:
        server.stop()
    print(f"wrk c={res.concurrency}: {res.rps:.0f} req/s, p50 {res.p50_ms:.2f} ms, p99 {res.p99_ms:.2f} ms")
    print(json.dumps(json.loads(report.read_text()), indent=2))
    if (out / "pyspy.txt").exists():
        print("\npy-spy, loop thread (MainThread), most sampled stacks (leaf first):")
        for k, stack in top_stacks(out / "pyspy.txt", "MainThread", 15):
            print(f"{k:>7}  {stack}")
    print(f"\nfiles in {out}")


if __name__ == "__main__":
    main()
