"""Third-party data files the tests and measurement scripts read but the repository does not carry.

Other projects' traces and logs (tests/data/EXTERNAL.md names each file's public source) live in one
folder: $DDPSCOPE_EXTERNAL_DATA, else the shared data folder beside the checkout when it exists
(the same default as the CMake cache variable DDPSCOPE_EXTERNAL_DATA), else none.

The repository's derived data names such a file by KEY_PREFIX and its path inside that folder
(e.g. "$DDPSCOPE_EXTERNAL_DATA/hta/resnet_2gpu_rank0.json.gz"), never by a machine path.
A test without its file skips with one line naming the file and the variable; with
DDPSCOPE_REQUIRE_EXTERNAL_DATA=1 (scripts/test) it fails instead.
"""

import os

VARIABLE = "DDPSCOPE_EXTERNAL_DATA"
KEY_PREFIX = "$" + VARIABLE + "/"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def external_dir():
    """The external data folder, or None when there is none."""
    if VARIABLE in os.environ:
        return os.environ[VARIABLE] or None
    shared = os.path.normpath(os.path.join(ROOT, "../shared/data"))
    return shared if os.path.isdir(shared) else None


def path(relative):
    """The path of `relative` inside the external folder when that file exists, else None."""
    folder = external_dir()
    if not folder:
        return None
    candidate = os.path.join(folder, relative)
    return candidate if os.path.isfile(candidate) else None


def required():
    """Whether a missing external file is a failure (DDPSCOPE_REQUIRE_EXTERNAL_DATA=1)."""
    return os.environ.get("DDPSCOPE_REQUIRE_EXTERNAL_DATA") == "1"


def missing_message(relative):
    folder = external_dir()
    where = "%s=%s" % (VARIABLE, folder) if folder else "%s is empty" % VARIABLE
    return ("external data file %s not found: %s (tests/data/EXTERNAL.md says where to get it)"
            % (relative, where))


def key(file_path):
    """How derived data names `file_path`: KEY_PREFIX + its path in the external folder, else its
    path relative to the repository root."""
    absolute = os.path.abspath(file_path)
    folder = external_dir()
    if folder:
        folder = os.path.abspath(folder)
        if absolute.startswith(folder + os.sep):
            return KEY_PREFIX + os.path.relpath(absolute, folder).replace(os.sep, "/")
    if absolute.startswith(ROOT + os.sep):
        return os.path.relpath(absolute, ROOT).replace(os.sep, "/")
    return os.path.basename(absolute)


def glob(pattern):
    """The external files matching `pattern` (relative to the folder), sorted; [] without one."""
    import glob as globlib
    folder = external_dir()
    if not folder:
        return []
    return sorted(globlib.glob(os.path.join(folder, pattern)))
