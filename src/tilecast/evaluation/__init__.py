"""Accuracy against measured labels: read label files, forecast the same workloads, report APE."""
