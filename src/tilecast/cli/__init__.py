"""Command-line glue shared by the Hydra jobs, and the ``tilecast`` command, in small modules:

- :mod:`~tilecast.cli.args`: the command line before Hydra parses it (joined overrides split, catalog names, what-ifs,
  group options, Hydra's directories under ``$TILECAST_HOME``);
- :mod:`~tilecast.cli.schema`: each job's settings dataclasses registered as its Hydra structured config (the defaults
  and types live there once; a job's ``conf/<job>.yaml`` only overrides, and a bad type is Hydra's own error);
- :mod:`~tilecast.cli.overrides`: what Hydra's schema does not check (a new key, a deleted setting, the value types of
  jobs whose conf file is their schema);
- :mod:`~tilecast.cli.errors`: user errors -> one ``error:`` line and exit 2 (:class:`user_errors`);
- :mod:`~tilecast.cli.run`: :func:`with_catalog_args`, how every job's ``__main__`` starts Hydra;
- :mod:`~tilecast.cli.settings`: reading a composed config (bounded integers, output paths, what-if GPUs and models);
- :mod:`~tilecast.cli.help`: ``--help`` of the command and of a job, ``tilecast list gpus|models|prices``;
- :mod:`~tilecast.cli.main`: the ``tilecast`` console script (job dispatch).

The names below are what jobs and tests import (``from tilecast.cli import user_errors, with_catalog_args``).
"""
from __future__ import annotations

from tilecast.cli.args import (
    HOME_ENV,
    catalog_argv,
    catalog_value,
    check_group_value,
    config_groups,
    group_options,
    hydra_dir_args,
    price_file,
    split_joined,
    tilecast_home,
)
from tilecast.cli.errors import TRACEBACK_ENV, USER_ERROR_EXIT, USER_ERRORS, is_user_error, user_errors
from tilecast.cli.help import CATALOGS, job_help, list_catalog, usage
from tilecast.cli.main import main
from tilecast.cli.overrides import WHAT_IF_GROUPS, check_fields, check_overrides, conf_defaults
from tilecast.cli.run import HYDRA_FULL_ERROR_ENV, hydra_error_line, with_catalog_args
from tilecast.cli.settings import (
    MAX_INT_SETTING,
    gpu_from_cfg,
    int_setting,
    model_from_cfg,
    output_directory,
    output_file,
)
from tilecast.errors import one_line

__all__ = [
    "CATALOGS", "HOME_ENV", "HYDRA_FULL_ERROR_ENV", "MAX_INT_SETTING", "TRACEBACK_ENV", "USER_ERRORS",
    "USER_ERROR_EXIT", "WHAT_IF_GROUPS", "catalog_argv", "catalog_value", "check_fields", "check_group_value",
    "check_overrides", "conf_defaults", "config_groups", "gpu_from_cfg", "group_options", "hydra_dir_args",
    "hydra_error_line", "int_setting", "is_user_error", "job_help", "list_catalog", "main", "model_from_cfg",
    "one_line", "output_directory", "output_file", "price_file", "split_joined", "tilecast_home", "usage",
    "user_errors", "with_catalog_args",
]
