"""The package list: every package under src/, plus the jobs, their configs and the shipped data as
tilecast._project.{jobs,conf,data} (mapped in pyproject.toml's [tool.setuptools.package-dir]), so that an installed
(non-editable) tilecast runs its jobs without a source checkout. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

setup(packages=[*find_packages("src"), "tilecast._project.jobs", "tilecast._project.conf", "tilecast._project.data"])
