"""Training and promotion of the per-family kernel predictors: what is fitted and measured (:mod:`.train`), the parity
plot of a run (:mod:`.parity`), and the promotion policy with its gates and rollback (:mod:`.promotion`).

The MLflow side (runs, registered versions, aliases and their history, artifacts, the served model) is
:mod:`tilecast.registry`; this package decides what to train and what to promote, and records it there. Calibration
(``registry.calibrate`` / ``registry.calibrations``) has not moved yet (issue 27 item 15: another helper is editing it).
"""
