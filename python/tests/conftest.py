"""pytest setup for the ddpscope package.

The package is imported from PYTHONPATH (scripts/test points it at <build>/python, where the
build puts _core next to the package's sources; after `pip install .` the installed one). The
`ddpscope` CLI binary the API is compared with: $DDPSCOPE_CLI, else the `ddpscope` next to the
package's build (<build>/bin/ddpscope), else the one on PATH.
"""

import json
import os
import re
import shutil
import subprocess

import sys

import pytest

import ddpscope

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "tests", "data")
sys.path.insert(0, os.path.join(ROOT, "tests"))
import external_data  # noqa: E402  (tests/external_data.py)


def in_python(message, function):
    """A CLI bad-input message as the Python API words it: the keyword argument where the CLI
    names its flag (--bucket-cap-mb -> bucket_cap_mb), and "unknown flag --x (...)" as Python's
    "f() got an unexpected keyword argument 'x'"."""
    unknown = re.match(r"unknown flag --([a-z0-9-]+)", message)
    if unknown:
        return "%s() got an unexpected keyword argument '%s'" % (
            function, unknown.group(1).replace("-", "_"))
    return re.sub(r"--([a-z0-9][a-z0-9-]*)",
                  lambda m: m.group(0) if m.group(1) == "help" else m.group(1).replace("-", "_"),
                  message)


def _find_cli():
    if os.environ.get("DDPSCOPE_CLI"):
        return os.environ["DDPSCOPE_CLI"]
    pkg = os.path.dirname(os.path.abspath(ddpscope.__file__))
    candidate = os.path.join(os.path.dirname(os.path.dirname(pkg)), "bin", "ddpscope")
    if os.path.exists(candidate):
        return candidate
    return shutil.which("ddpscope")


class Cli:
    """The `ddpscope` binary, run as a user runs it."""

    def __init__(self, path):
        self.path = path

    def run(self, *args):
        return subprocess.run([self.path] + list(args), capture_output=True, text=True)

    def json(self, *args):
        r = self.run(*args, "--json")
        assert r.returncode == 0, "ddpscope %s: rc %d: %s" % (" ".join(args), r.returncode,
                                                             r.stderr)
        return json.loads(r.stdout)

    def error(self, *args):
        """(exit code, message) of a failing command: "ddpscope CMD: error: MESSAGE"."""
        r = self.run(*args)
        assert r.returncode != 0, "ddpscope %s succeeded" % " ".join(args)
        prefix = "ddpscope %s: error: " % args[0]
        line = next(l for l in r.stderr.splitlines() if l.startswith(prefix))
        return r.returncode, line[len(prefix):]


@pytest.fixture(scope="session")
def cli():
    path = _find_cli()
    if not path:
        pytest.fail("no ddpscope CLI binary: set DDPSCOPE_CLI")
    return Cli(path)


@pytest.fixture(scope="session")
def data_dir():
    return DATA


def require_external(relative):
    """The path of an external data file (tests/data/EXTERNAL.md); skips the test when it is
    missing, or fails it under DDPSCOPE_REQUIRE_EXTERNAL_DATA=1 (scripts/test)."""
    path = external_data.path(relative)
    if path:
        return path
    message = external_data.missing_message(relative)
    if external_data.required():
        pytest.fail(message + " and DDPSCOPE_REQUIRE_EXTERNAL_DATA=1")
    pytest.skip(message)


@pytest.fixture(scope="session")
def external():
    """require_external as a fixture: external("nccl-tests-logs/x.txt") -> path."""
    return require_external
