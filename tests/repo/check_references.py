#!/usr/bin/env python3
"""The repository stands alone: every document it cites is inside it.

Usage: check_references.py [--root DIR] [--only] [FILE ...]

Scans every text file of the repository (git ls-files: tracked plus untracked, not ignored;
without git, every file outside .git/ and build*/), plus each FILE given, and prints one line
per mistake, "path:line: what: the reference". Exit status 1 if there was any, 0 otherwise.
--only scans the given FILEs alone. Binary files (a NUL byte, not UTF-8, or .gz/.png/...) are
skipped. Text inside a URL (http://, https://) is never checked: other projects' files are
cited by URL.

The rules (docs/style.md §17 states them for people):

1. Documents exist. A token ending in ".md" outside a URL is a reference:
   - a path "<dir>/<name>.md" (also "./<name>.md", "../<name>.md") must exist relative to the
     repository root or to the citing file's folder. A path whose first folder is not a
     top-level entry of the repository (and does not resolve) names another project's file or a
     generated output, and is not checked;
   - a bare "<name>.md" must be the name of some file of the repository;
   - in a Markdown file, a link target [text](target) that is not a URL or an anchor must exist
     relative to the citing file's folder.
2. Sections exist. "§N" (N = 1, 3.7, ...), or "section N" right after a document's name,
   cites section N of a Markdown document of the repository: the one named last before it on
   the same line; with none there, in a Markdown file, the file itself; elsewhere, the document
   named last on an earlier line of the file. That document must resolve to a repository path
   (a bare name that only matches a file in another folder is not enough) and have a heading
   numbered N ("## 3. Title", "### 3.7 Title"; a "§" may precede the number).
3. No machine paths. An absolute path whose first folder is work, root, home or Users (or a
   Windows C: Users folder) names one machine's layout and is an error, even in an example
   command; write a repository-relative path or a generic name ("python", "$HOME"). System
   locations every Linux machine has (/tmp, /usr, /etc, /dev, /proc, /opt) are fine.
4. No outside documents. The design notes and style rules that lived next to the repository
   (a "shared" folder above it, and its upper-case design and style files) are never named;
   cite docs/design.md and docs/style.md. One exception: the default of the external data folder
   (tests/data/EXTERNAL.md), its "data" subfolder, in the two places that define it
   (EXTERNAL_DATA_DEFAULTS).
5. Other projects' files stay outside. No file of the repository (nor a FILE given) has the
   name of an external data file that tests/data/EXTERNAL.md lists (a `hta/...` or
   `nccl-tests-logs/...` path in it): those are read from DDPSCOPE_EXTERNAL_DATA, never copied.
"""

import argparse
import os
import re
import subprocess
import sys

BINARY_EXTENSIONS = {
    ".gz", ".png", ".jpg", ".jpeg", ".gif", ".ico", ".pdf", ".zip", ".xz", ".bz2", ".zst",
    ".sqlite", ".nsys-rep", ".so", ".a", ".o", ".bin", ".whl", ".woff", ".woff2", ".ttf",
}

URL_RE = re.compile(r"(?:https?|ftp|file)://[^\s<>\"'`)\]]*")
# A path-like token ending in .md; the look-behind keeps it from starting inside a longer word.
MD_TOKEN_RE = re.compile(r"(?<![\w.$/-])((?:\.{1,2}/)*(?:[\w.+-]+/)*[\w.+-]*\w\.md)(?![\w/])")
LINK_RE = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SECTION_RE = re.compile(r"§\s*(\d+(?:\.\d+)*)")
# "<name>.md section N" (plain ASCII text, e.g. in JSON) cites a section too.
SECTION_WORD_RE = re.compile(r"(?<=\.md)`?,?\s+section\s+(\d+(?:\.\d+)*)")
HEADING_RE = re.compile(r"^#{1,6}\s+(?:§\s*)?(\d+(?:\.\d+)*)[.)]?(?:\s|$)")
# Built from pieces so that this file does not match its own patterns.
MACHINE_PATH_RE = re.compile(r"(?<![\w.~-])(/(?:work|root|home|Users)/|[A-Za-z]:\\Users\\)")
# The files that define DDPSCOPE_EXTERNAL_DATA's default, and what they may name.
EXTERNAL_DATA_DEFAULTS = {"CMakeLists.txt", "tests/external_data.py"}
EXTERNAL_DATA_DEFAULT = "../" + "shared" + "/data"
SHARED_RE = re.compile(r"\.\./" + "shared" + r"\b(?:/data\b)?|(?<![\w-])" + "shared" + r"/spec/")
FORBIDDEN = [
    (SHARED_RE,
     "names the shared folder outside the repository"),
    (re.compile(r"\b(?:DESIGN|STYLE)" + r"\.md\b"),
     "names a design/style file outside the repository (cite docs/design.md or docs/style.md)"),
    (re.compile(r"\bSTYLE" + r"(?:\.md)? rules?\b"),
     "cites an outside style rule (state it, or cite docs/style.md §N)"),
]


def repository_files(root):
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            check=True, capture_output=True).stdout.decode("utf-8", "surrogateescape")
        names = sorted({n for n in out.split("\0") if n})
        return [n for n in names if os.path.isfile(os.path.join(root, n))]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for dirpath, dirnames, filenames in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            dirnames[:] = [d for d in dirnames
                           if d != ".git" and not (rel == "." and d.startswith("build"))]
            for f in filenames:
                names.append(os.path.normpath(os.path.join(rel, f)))
        return sorted(names)


def external_names(root):
    """The file names tests/data/EXTERNAL.md lists as external data."""
    text = read_text(os.path.join(root, "tests", "data", "EXTERNAL.md")) or ""
    return {os.path.basename(m) for m in
            re.findall(r"`((?:hta|nccl-tests-logs)/[^`\s]+\.(?:json\.gz|txt))`", text)}


def read_text(path):
    if os.path.splitext(path)[1].lower() in BINARY_EXTENSIONS:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


class Checker:
    def __init__(self, root, repo_files):
        self.root = os.path.abspath(root)
        self.top_level = {n.split("/")[0] for n in repo_files}
        self.basenames = {os.path.basename(n) for n in repo_files}
        self.sections = {}
        self.errors = []

    def sections_of(self, path):
        if path not in self.sections:
            numbers = set()
            text = read_text(path) or ""
            in_fence = False
            for line in text.splitlines():
                if line.lstrip().startswith("```"):
                    in_fence = not in_fence
                    continue
                m = None if in_fence else HEADING_RE.match(line)
                if m:
                    numbers.add(m.group(1))
            self.sections[path] = numbers
        return self.sections[path]

    def resolve(self, token, citing_dir):
        """The repository file a path token names, or None."""
        candidates = [os.path.join(citing_dir, token)]
        if not token.startswith("."):
            candidates.insert(0, os.path.join(self.root, token))
        for c in candidates:
            c = os.path.normpath(c)
            if os.path.isfile(c):
                return c
        return None

    def error(self, shown, lineno, what, ref):
        self.errors.append(f"{shown}:{lineno}: {what}: {ref}")

    def check_not_external(self, shown, external):
        if os.path.basename(shown) in external:
            self.error(shown, 1, "is an external data file (tests/data/EXTERNAL.md: read it from "
                       "DDPSCOPE_EXTERNAL_DATA, never commit it)", os.path.basename(shown))

    def check_file(self, path, shown):
        text = read_text(path)
        if text is None:
            return
        citing_dir = os.path.dirname(os.path.abspath(path))
        is_markdown = path.endswith(".md")
        self_doc = os.path.abspath(path) if is_markdown else None
        last_doc = None  # (token, resolved path or None) named last on an earlier line
        for lineno, line in enumerate(text.splitlines(), 1):
            for pattern, what in FORBIDDEN:
                for m in pattern.finditer(line):
                    if (pattern is SHARED_RE and shown in EXTERNAL_DATA_DEFAULTS and
                            m.group(0) == EXTERNAL_DATA_DEFAULT):
                        continue
                    self.error(shown, lineno, what, m.group(0))
            bare = URL_RE.sub(lambda m: " " * len(m.group(0)), line)
            for m in MACHINE_PATH_RE.finditer(bare):
                end = re.match(r"[^\s\"'`)\]>,;]*", bare[m.start():]).group(0)
                self.error(shown, lineno, "names a path on one machine", end)
            if is_markdown:
                for m in LINK_RE.finditer(bare):
                    target = m.group(1).split("#")[0]
                    if not target or re.match(r"^[a-z]+:", target) or target.startswith("/"):
                        continue
                    if not os.path.exists(os.path.join(citing_dir, target)):
                        self.error(shown, lineno, "links to a missing file", m.group(1))
            # Documents named on this line, in order, then the § citations that follow them.
            events = []
            for m in MD_TOKEN_RE.finditer(bare):
                events.append((m.start(), "doc", m.group(1)))
            for regex in (SECTION_RE, SECTION_WORD_RE):
                for m in regex.finditer(bare):
                    events.append((m.start(), "sec", m.group(1)))
            events.sort()
            line_doc = None
            for _, kind, value in events:
                if kind == "doc":
                    line_doc = (value, self.check_doc_token(value, citing_dir, shown, lineno))
                    continue
                doc = line_doc or ((None, self_doc) if is_markdown else last_doc)
                if doc is None:
                    self.error(shown, lineno, "cites a section without naming its document",
                               "§" + value)
                elif doc[1] is None:
                    self.error(shown, lineno, "cites a section of a document outside the "
                               "repository", f"{doc[0]} §{value}")
                elif value not in self.sections_of(doc[1]):
                    name = os.path.relpath(doc[1], self.root)
                    if name.startswith(".."):
                        name = doc[1]
                    self.error(shown, lineno, "cites a section that does not exist",
                               f"{name} §{value}")
            if line_doc is not None:
                last_doc = line_doc

    def check_doc_token(self, token, citing_dir, shown, lineno):
        """Reports a missing document; returns the repository file it names, or None."""
        if token.startswith("/"):
            return None
        resolved = self.resolve(token, citing_dir)
        if resolved is not None:
            return resolved
        if "/" not in token:
            if token not in self.basenames:
                self.error(shown, lineno, "names a document the repository does not have", token)
            return None
        first = [p for p in token.split("/") if p not in (".", "..")][0]
        if token.startswith(".") or first in self.top_level:
            self.error(shown, lineno, "names a document the repository does not have", token)
        return None


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    parser.add_argument("--only", action="store_true", help="scan the given files alone")
    parser.add_argument("files", nargs="*", help="extra files to scan")
    args = parser.parse_args()

    repo_files = repository_files(args.root)
    checker = Checker(args.root, repo_files)
    external = external_names(args.root)
    scanned = 0
    if not args.only:
        for rel in repo_files:
            checker.check_file(os.path.join(args.root, rel), rel)
            checker.check_not_external(rel, external)
            scanned += 1
    for f in args.files:
        checker.check_file(f, f)
        checker.check_not_external(f, external)
        scanned += 1
    for e in checker.errors:
        print(e)
    if checker.errors:
        print(f"check_references: {len(checker.errors)} bad reference(s) in {scanned} files",
              file=sys.stderr)
        return 1
    print(f"check_references: {scanned} files, every reference is inside the repository")
    return 0


if __name__ == "__main__":
    sys.exit(main())
