"""Every MJCF file of a corpus against MuJoCo's mj_kinematics (issue 35): per package, how many
load, are exact, refused, wrong or crash, with free_joint="floating" (the default) and "fixed".
Protocol and corpus: ``experiments.mjcf_load`` (default: the issue's packages installed beside
this Python); without ``mujoco`` or a corpus it says so in one line.

    python benchmarks/mjcf_load.py [--corpus FOLDER_OR_JSON] [--out /tmp/mjcf]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import RESULTS_DIR, Report, dist_version, log

from experiments import mjcf_load as protocol


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, help="a folder or a JSON list (default: installed)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per file")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "mjcf_load", help="results path")
    args = parser.parse_args()
    entries, skip = protocol.mjcf_corpus(args.corpus)
    if skip:
        print(f"skipped: {skip}")
        return
    out = args.out.with_suffix("")
    report = Report(out.name, "torchik's MJCF loader against MuJoCo's mj_kinematics")
    report.intro = protocol.corpus_intro(entries, args.corpus)
    report.stamp["mjcf_packages"] = {d: dist_version(d) for d in protocol.DISTRIBUTIONS}
    report.tables.extend(protocol.mjcf_tables(protocol.run_corpus(entries, args.timeout, log=log)))
    for path in report.write(out.parent):
        log(f"wrote {path}")
    print(report.tables[0].markdown())


if __name__ == "__main__":
    main()
