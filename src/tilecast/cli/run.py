"""Running a job: :func:`with_catalog_args` is how every job's ``__main__`` starts Hydra (the command line rewritten by
:mod:`tilecast.cli.args`, the job's schema registered (:mod:`tilecast.cli.schema`), ``--help`` answered, signals
handled), and a config Hydra cannot compose is reported on one line (:func:`hydra_error_line`)."""
from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

from hydra.errors import HydraException, MissingConfigException, OverrideParseException

from tilecast.cli.args import _OVERRIDE, catalog_argv, hydra_dir_args, split_joined
from tilecast.cli.errors import TRACEBACK_ENV, _report, user_errors
from tilecast.cli.help import job_help
from tilecast.cli.overrides import _did_you_mean
from tilecast.cli.schema import listify, register
from tilecast.errors import one_line
from tilecast.signals import install as install_signal_handlers


def with_catalog_args(main: Callable[[], Any], what_if: tuple[str, ...] = ()) -> Callable[[], Any]:
    """Wrap a ``@hydra.main`` function: split joined overrides, normalise catalog arguments, place Hydra's
    directories (:func:`hydra_dir_args`); exit 2 on an unknown name or a config Hydra cannot compose
    (:func:`hydra_error_line`). ``what_if`` names the groups (``gpu``, ``model``) the job reads through
    :func:`gpu_from_cfg` / :func:`model_from_cfg`, which take field overrides; what-ifs of other groups are
    refused (a job that drops them must not accept them)."""

    @wraps(main)
    def run() -> Any:
        with user_errors():
            job = _config_name(main)
            register(job)  # the job's settings dataclasses as its Hydra schema (before Hydra composes)
            sys.argv[1:] = hydra_dir_args(listify(job, catalog_argv(split_joined(sys.argv[1:]),
                                                                   what_if=tuple(what_if))))
        # Hydra prints a composition error itself (several lines, exit 1) unless HYDRA_FULL_ERROR is set: then it
        # raises, and the error is reported here on one line. A job's own bugs keep their (whole) traceback.
        os.environ.setdefault(HYDRA_FULL_ERROR_ENV, "1")
        if {"--help", "-h"} & set(sys.argv[1:]):  # the job's own options first (Hydra's: --hydra-help, --cfg job)
            print(job_help(_config_name(main)))
            return None
        install_signal_handlers()  # SIGTERM / SIGINT: like a crash at any step, never inside a step that must be whole
        try:
            return main()
        except KeyboardInterrupt as exc:  # SIGINT / SIGTERM (tilecast.signals.Terminated): open runs closed FAILED
            if os.environ.get(TRACEBACK_ENV) == "1":
                raise
            signum = getattr(exc, "signum", signal.SIGINT)
            print(f"error: interrupted by {signal.Signals(signum).name}: stopped; what was recorded is whole "
                  f"(open MLflow runs closed FAILED, no alias moved halfway)", file=sys.stderr)
            raise SystemExit(128 + int(signum)) from None
        except HydraException as exc:
            if os.environ.get(TRACEBACK_ENV) == "1":
                raise
            help_note = (" (--help shows the composed config: give the mandatory groups too)"
                         if _HELP_FLAGS & set(sys.argv[1:]) else "")
            _report(hydra_error_line(exc, sys.argv[1:], _config_name(main)) + help_note)

    return run


_HELP_FLAGS = {"--help", "-h", "--hydra-help"}
HYDRA_FULL_ERROR_ENV = "HYDRA_FULL_ERROR"


def _config_name(main: Callable[..., Any]) -> str:
    """The job's primary config: ``conf/<job>.yaml`` for ``jobs/<job>.py``."""
    import inspect

    return Path(inspect.unwrap(main).__code__.co_filename).stem


def _override_of(argv: list[str], key: str) -> str:
    """The command-line override that sets ``key`` (``key=value``, ``+key=...``), else ``key``."""
    for arg in argv:
        m = _OVERRIDE.match(arg)
        if m and m["name"] == key:
            return arg
    return key


def _options(text: str) -> str:
    """The tab-indented option names Hydra lists after ``Available options...:``."""
    text = text.split("Config search path:", 1)[0]
    block = text.split("Available options", 1)[1] if "Available options" in text else ""
    return ", ".join(line.strip() for line in block.splitlines()[1:] if line.startswith("\t"))


def hydra_error_line(exc: HydraException, argv: list[str], config_name: str = "") -> str:
    """One line for a config Hydra could not compose from ``argv``, naming the override and what is known."""
    text = str(exc)
    cause = exc.__cause__
    merging = re.match(r"Error merging override (?P<arg>.+)", text)
    if merging and cause is not None:  # a value the job's schema refuses (tilecast.cli.schema): Hydra's own message
        why = str(cause).split("full_key:")[0].strip().splitlines()[0]
        return f"{merging['arg'].strip()}: {why}"
    bad = re.match(r"Could not override '(?P<key>[^']+)'\.(?P<rest>.*)", text, re.S)
    if bad:
        key = bad["key"]
        arg = _override_of(argv, key)
        if "No match in the defaults list" in bad["rest"]:
            return f"{arg}: this job has no config group or setting {key!r}{_did_you_mean(config_name, key)}"
        if cause is not None and "not in struct" in str(cause):
            return (f"{arg}: unknown setting {key!r} (not in conf/{config_name}.yaml or its groups)"
                    f"{_did_you_mean(config_name, key)}")
        return f"{arg}: {one_line(cause) if cause is not None else one_line(exc)}"
    missing = re.search(r"Could not find '(?P<group>[^'/]*)/(?P<option>[^']*)'", text)
    if isinstance(exc, MissingConfigException) and missing:
        group, option = missing["group"], missing["option"]
        known = _options(text)
        what = f"no config conf/{group}/{option}.yaml" if option else "no option given"
        return f"{group}={option}: {what}" + (f"; available: {known}" if known else "")
    mandatory = re.match(r"You must specify '(?P<group>[^']+)'", text)
    if mandatory:
        known = _options(text)
        return (f"You must specify '{mandatory['group']}' ({mandatory['group']}=<option>)"
                + (f"; available: {known}" if known else ""))
    if isinstance(exc, OverrideParseException):
        first = text.splitlines()[0] if text else type(exc).__name__
        return f"cannot parse the command line: {first} (override syntax: key=value, see " \
               "https://hydra.cc/docs/advanced/override_grammar/basic)"
    return one_line(ValueError(text.split("Config search path:")[0]))


# ---------------------------------------------------------------- the overrides against the job's conf files
