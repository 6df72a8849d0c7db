"""The ``tilecast`` console script: ``tilecast <job> key=value ...`` runs ``jobs/<job>.py`` with the same arguments
from any directory; ``tilecast --help`` lists the jobs, ``tilecast list <catalog>`` prints a catalog."""
from __future__ import annotations

import runpy
import sys

from tilecast.cli.errors import USER_ERROR_EXIT, user_errors
from tilecast.cli.help import _job_files, list_catalog, usage
from tilecast.paths import ROOT


def main(argv: list[str] | None = None) -> None:
    """The ``tilecast`` command: ``tilecast <job> [overrides...]`` runs ``jobs/<job>.py`` as
    ``python jobs/<job>.py [overrides...]`` would, from any working directory."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return
    if args[0] == "list":
        with user_errors():
            print(list_catalog(args[1] if len(args) > 1 else ""))
        return
    jobs = _job_files()
    if not jobs:
        print(f"error: no jobs under {ROOT / 'jobs'}: reinstall tilecast (python3 -m pip install <checkout>) or set "
              f"TILECAST_ROOT=<checkout>", file=sys.stderr)
        raise SystemExit(USER_ERROR_EXIT)
    name = args[0].removesuffix(".py")
    if name not in jobs:
        print(f"error: unknown job {args[0]!r}; jobs: {', '.join(jobs)} (tilecast --help)", file=sys.stderr)
        raise SystemExit(USER_ERROR_EXIT)
    sys.argv = [str(jobs[name]), *args[1:]]
    runpy.run_path(str(jobs[name]), run_name="__main__")
