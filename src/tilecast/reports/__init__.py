"""Reports of a score run: tables, fleet totals, run-to-run comparison, plots, Markdown and one-file HTML.

Entry point: :func:`tilecast.pipelines.report.run_report` (``jobs/report.py``).
"""
