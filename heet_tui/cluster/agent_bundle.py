"""The agent as one file: a zipapp built in memory from the ``heet_agent`` package sources.

Named by content hash so deployment is idempotent (same sources, same name: nothing to
upload) and two controller versions never overwrite each other's agent on a host.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

# The zipapp's entry point. Python cannot cache bytecode for modules imported from a zip, so
# every start would compile the agent again; instead the first start unpacks the sources next
# to the .pyz (same content-hash name, so never stale) and later starts run ``<name>.d/__main__.py``
# (this same entry) directly, importing from there with their __pycache__: no zip, no runpy.
# Unpacking reads through the zip importer that is already loaded (importing ``zipfile`` costs
# about as much as the agent's own imports). Any failure to unpack just means importing from the zip.
# The version gate comes first, in syntax every Python parses: a host whose python is too old
# then says so, not a SyntaxError from deep inside the agent.
_ENTRY = b"""import os, sys
if sys.version_info < (3, 8):
    sys.stderr.write("the agent needs Python 3.8 or newer; %%s is Python %%s: name a newer one "
                     "as this host's python in the hosts file\\n" %% (sys.executable, sys.version.split()[0]))
    sys.exit(2)
here = os.path.abspath(sys.argv[0])
if here.endswith(".pyz"):
    unpacked = here[:-4] + ".d"
    if not os.path.isfile(os.path.join(unpacked, "__main__.py")):
        mask = os.umask(0o077)  # the agent's code is the user's alone, whatever the umask (jobs keep theirs)
        try:
            tmp = "%%s.tmp.%%d" %% (unpacked, os.getpid())
            os.makedirs(os.path.join(tmp, "heet_agent"))
            for name in %(names)s:
                with open(os.path.join(tmp, name), "wb") as fh:
                    fh.write(__loader__.get_data(name))
            os.rename(tmp, unpacked)
        except Exception:  # e.g. another agent unpacked first: use its copy, drop ours
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
        finally:
            os.umask(mask)
    if os.path.isfile(os.path.join(unpacked, "__main__.py")):
        sys.path.insert(0, unpacked)
from heet_agent.main import main
sys.exit(main())
"""
_FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # zip entries carry mtimes; fix them so the hash is the content's


@dataclass(frozen=True, slots=True)
class AgentBundle:
    data: bytes
    digest: str

    @property
    def file_name(self) -> str:
        return f"heet-agent-{self.digest[:16]}.pyz"

    @property
    def unpacked_entry(self) -> str:
        """Where the first start leaves the unpacked agent's entry, relative to the work dir."""
        return f"{self.file_name[:-4]}.d/__main__.py"


def _sources() -> list[tuple[str, bytes]]:
    root = resources.files("heet_agent")
    files = [(entry.name, entry.read_bytes()) for entry in root.iterdir()
             if entry.is_file() and (entry.name.endswith(".py") or entry.name.endswith(".md"))]
    if not any(name == "main.py" for name, _ in files):
        raise RuntimeError("the heet_agent package has no main.py; is the package installed?")
    return sorted(files)


@lru_cache(maxsize=1)
def agent_bundle() -> AgentBundle:
    """Build (once per process) the zipapp bytes and their SHA-256."""
    sources = _sources()
    names = ["__main__.py"] + [f"heet_agent/{name}" for name, _ in sources]
    entry = _ENTRY % {b"names": repr(tuple(names)).encode()}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("__main__.py", _FIXED_TIME), entry)
        for name, data in sources:
            info = zipfile.ZipInfo(f"heet_agent/{name}", _FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    data = buffer.getvalue()
    return AgentBundle(data, hashlib.sha256(data).hexdigest())
