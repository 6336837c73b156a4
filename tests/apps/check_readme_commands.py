#!/usr/bin/env python3
"""README.md's launch commands, run verbatim (issue 34, item 4):
  check_readme_commands.py README BUILD_DIR
Every fenced block in README must follow a marker comment on the line before its fence:
  <!-- readme-test: run -->            the block runs, as written
  <!-- readme-test: skip: REASON -->   it does not (Slurm, downloads, benchmarks of minutes), and
                                       the test prints the block and its reason
A block without a marker fails the test, so a new command cannot be left out unnoticed. The
blocks to run go, in README order, into one bash script (set -e, each command traced) run in an
empty working directory whose build/ is BUILD_DIR and whose configs/ and scripts/ are the
repository's: the commands' outputs (out/...) land there, never in the source tree. Open MPI's
variables are taken out of the environment, so the README's own export line must make the
commands run as root. Exits 1 when a command fails or a block has no marker."""
import os
import re
import subprocess
import sys
import tempfile

MARKER = re.compile(r"^<!-- readme-test: (run|skip: (.+)) -->$")
FENCE = re.compile(r"^```")


def blocks(readme):
    """(line, marker match or None, text) for every fenced block."""
    lines = open(readme).read().splitlines()
    found, i = [], 0
    while i < len(lines):
        if not FENCE.match(lines[i]):
            i += 1
            continue
        start = i
        end = next(j for j in range(i + 1, len(lines)) if FENCE.match(lines[j]))
        marker = MARKER.match(lines[start - 1]) if start > 0 else None
        found.append((start + 1, marker, "\n".join(lines[start + 1:end])))
        i = end + 1
    return found


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    readme, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    source = os.path.dirname(readme)
    to_run, failures = [], []
    for line, marker, text in blocks(readme):
        if marker is None:
            failures.append(f"README.md:{line}: a fenced block without a '<!-- readme-test: run|skip: REASON -->' line")
        elif marker.group(2):
            print(f"skipped README.md:{line} ({marker.group(2)}):\n    " + text.replace("\n", "\n    "))
        else:
            to_run.append(f"# README.md:{line}\n{text}")
    if not to_run:
        failures.append("README.md: no block marked '<!-- readme-test: run -->'")
    if failures:
        print("\n".join(failures), file=sys.stderr)
        return 1
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_")}
    with tempfile.TemporaryDirectory(prefix="skew_readme_") as work:
        os.symlink(build, os.path.join(work, "build"))
        for name in ("configs", "scripts"):
            os.symlink(os.path.join(source, name), os.path.join(work, name))
        script = "set -eo pipefail\nset -x\n" + "\n".join(to_run) + "\n"
        print(f"running {len(to_run)} block(s) in {work}", flush=True)
        done = subprocess.run(["bash", "-c", script], cwd=work, env=env)
        if done.returncode != 0:
            print(f"FAILED: the last traced command above exited {done.returncode}", file=sys.stderr)
            return 1
    print("ok: every README block marked 'run' ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
