"""`python3 -m stoker ...` and the installed `stoker` command: stoker's CLI.

The CLI is a C++ program (tools/); an installed package carries it as
stoker/_bin/stoker, and in the source tree it is the build folder's
tools/stoker ($STOKER_BUILD, default build/). This replaces the Python process
with it, so its exit status and signals are the program's own.
"""
import os
import sys
from pathlib import Path


def _cli():
    here = Path(__file__).resolve().parent
    for exe in (here / "_bin" / "stoker",
                Path(os.environ.get("STOKER_BUILD") or here.parent.parent / "build") / "tools" / "stoker"):
        if exe.is_file() and os.access(exe, os.X_OK):
            return exe
    sys.exit(f"stoker: the CLI is not built: no {here / '_bin' / 'stoker'} (pip install builds it; "
             f"in the source tree run `make build`)")


def main(argv=None):
    exe = _cli()
    args = sys.argv[1:] if argv is None else list(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, [str(exe), *args])


if __name__ == "__main__":
    main()
