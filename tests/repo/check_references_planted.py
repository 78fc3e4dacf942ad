#!/usr/bin/env python3
"""check_references.py catches planted mistakes (the ctest repo.references_catches_planted).

Writes three temporary files (C++, Python, Markdown) holding correct citations and, one per line,
a bad reference of each kind, and a file named like an external data file; runs check_references.py on the repository plus those files; and
passes only if the checker exits non-zero, names each planted mistake as "file:line: what:
reference", and reports none of the correct lines. The bad references are assembled from pieces so that this file itself
passes the checker.
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_references.py")
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

S = "\u00a7"  # the section sign, written so that this file cites nothing itself
MACHINE_PATH = "/" + "work" + "/venv/bin/python"
OUTSIDE_NOTES = ".." + "/shared/" + "DESIGN" + ".md"
EXTERNAL_DATA = ".." + "/shared/" + "data"
MISSING_DOC = "docs/spec/no-such-page" + ".md"
MISSING_SECTION = "docs/spec/nccl-cost-model" + f".md {S}99.9"
MISSING_LINK = "spec/gone" + ".md"
# A copy of an external data file (tests/data/EXTERNAL.md lists it) is reported on its line 1.
EXTERNAL_FILE = "konnase-v100x8-1node" + ".txt"

# (line text, None if the line is correct, else the substrings its report must contain)
CODE_LINES = [
    (f"// Correct: docs/spec/ddp-semantics.md {S}3.7 and docs/design.md {S}2.", None),
    (f"// A section the document lacks: {MISSING_SECTION}", [MISSING_SECTION]),
    (f"// A bare section binds to the document named last above: {S}1.4", None),
    (f"// A document the repository lacks: {MISSING_DOC}", [MISSING_DOC]),
    (f"// Run {MACHINE_PATH} tests/x.py", [MACHINE_PATH]),
    (f"// See {OUTSIDE_NOTES}", [OUTSIDE_NOTES[:9]]),
    # Allowed only where DDPSCOPE_EXTERNAL_DATA's default is defined, not in any other file.
    (f"// Default: {EXTERNAL_DATA}", [EXTERNAL_DATA]),
]
CODE_UNBOUND_LINES = [
    (f"# A section with no document named before it: {S}4", [f"{S}4"]),
]
# A Markdown file binds a bare section to itself; this one has a heading numbered 1 only.
MARKDOWN_LINES = [
    ("# 1. Planted", None),
    (f"A section of this file: {S}1.", None),
    (f"A section of this file that does not exist: {S}2", [f"{S}2"]),
    (f"A link to a missing file: [gone]({MISSING_LINK})", [MISSING_LINK]),
]
EXTERNAL_FILE_LINES = [
    ("# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728", [EXTERNAL_FILE]),
]


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for name, table in (("planted.cpp", CODE_LINES), ("planted.py", CODE_UNBOUND_LINES),
                            ("planted" + ".md", MARKDOWN_LINES),
                            (EXTERNAL_FILE, EXTERNAL_FILE_LINES)):
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(text for text, _ in table) + "\n")
            files.append((path, table))

        run = subprocess.run([sys.executable, CHECKER, "--root", ROOT] + [p for p, _ in files],
                             capture_output=True, text=True)
        out = run.stdout
        if run.returncode == 0:
            failures.append("the checker exited 0 on planted mistakes")
        for path, table in files:
            reported = {}
            for line in out.splitlines():
                if line.startswith(path + ":"):
                    number = int(line[len(path) + 1:].split(":", 1)[0])
                    reported.setdefault(number, []).append(line)
            for number, (text, expected) in enumerate(table, 1):
                got = reported.get(number, [])
                if expected is None:
                    if got:
                        failures.append(f"a correct line was reported: {got}")
                    continue
                for want in expected:
                    if not any(want in g for g in got):
                        failures.append(f"{path}:{number} not reported with '{want}' "
                                        f"(line: {text!r}; got {got})")

    if failures:
        print("check_references.py missed planted mistakes:")
        for f in failures:
            print("  " + f)
        print("checker output:\n" + out + run.stderr)
        return 1
    print("check_references.py reported every planted mistake with its file:line")
    return 0


if __name__ == "__main__":
    sys.exit(main())
