#!/usr/bin/python3
"""Benchmark: deploy-and-start time across 1, 2, 4 and 8 nodes of the test
cluster (network namespaces with their own sshd, tests/cluster/cluster.sh),
with the agent bundle already on every node: connect over SSH, check the
bundle's hash, start the agent, and get its probe, all nodes in parallel.
Prints the median of --repeats runs per node count and the ratio to one node.
Needs root (the cluster); asserts nothing.

    sudo /usr/bin/python3 tests/bench/deploy_bench.py --build build
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER = os.path.join(ROOT, "tests", "cluster", "cluster.sh")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("deploy_bench: needs root for the test cluster")
    cli = os.path.join(a.build, "bin", "flotilla")
    with tempfile.TemporaryDirectory() as work:
        # The hosts' login (flotilla-test unless FLOTILLA_CLUSTER_USER says
        # root) reaches its folders under the cluster's through this one.
        os.chmod(work, 0o711)
        cluster_dir = os.path.join(work, "cluster")
        subprocess.run([CLUSTER, "up", "8", cluster_dir], check=True)
        try:
            with open(os.path.join(cluster_dir, "cluster.json")) as f:
                cluster = json.load(f)
            base = [cli, "--db", os.path.join(work, "f.db"), "--known-hosts", os.path.join(work, "known_hosts")]
            for host in cluster["hosts"]:
                subprocess.run(base + ["nodes", "add", host["name"], "--host", host["address"], "--user", host["user"],
                                       "--key", cluster["key_file"], "--remote-dir", host["remote_dir"]],
                               check=True, capture_output=True)
            first = time.perf_counter()
            subprocess.run(base + ["--trust-new-host-key", "nodes", "probe"], check=True, capture_output=True)
            print(f"first deploy to 8 nodes (bundle uploaded): {time.perf_counter() - first:.2f} s")
            print(f"{'nodes':>5} {'median s':>9} {'min s':>7} {'ratio to 1':>10}")
            one = None
            for n in (1, 2, 4, 8):
                times = []
                for _ in range(a.repeats):
                    start = time.perf_counter()
                    out = subprocess.run(base + ["nodes", "probe"] + [f"flh{i}" for i in range(1, n + 1)],
                                         check=True, capture_output=True, text=True).stdout
                    times.append(time.perf_counter() - start)
                    assert out.count("nothing uploaded") == n, out
                median = statistics.median(times)
                one = one or median
                print(f"{n:>5} {median:>9.3f} {min(times):>7.3f} {median / one:>9.2f}x")
                sys.stdout.flush()
        finally:
            subprocess.run([CLUSTER, "down", cluster_dir], check=False)


if __name__ == "__main__":
    main()
