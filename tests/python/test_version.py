"""One version, in the top-level CMakeLists.txt's project(): the Python
package, the CLI and the installed C++ header all report it."""
import os
import re
import subprocess

import stoker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("STOKER_BUILD", os.path.join(ROOT, "build"))


def project_version():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    m = re.search(r"project\(stoker VERSION (\d+\.\d+\.\d+)", text)
    assert m, "no project(stoker VERSION x.y.z) in CMakeLists.txt"
    return m.group(1)


def test_python_cli_and_header_report_the_projects_version():
    v = project_version()
    assert stoker.__version__ == v
    out = subprocess.run([os.path.join(BUILD, "tools", "stoker"), "--version"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"stoker {v}"
    header = open(os.path.join(BUILD, "include", "stoker", "version.h")).read()
    assert f'#define STOKER_VERSION "{v}"' in header
