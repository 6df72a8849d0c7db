"""Test data shared across test packages."""

#: the smoke matrix's rule that drops the cells a dp4 layout cannot split (batch 2 over 4 GPUs)
SMOKE_DP4_RULE = {"parallel": "dp4", "batch": 2}


def smoke_with_failures(matrix: dict) -> dict:
    """The smoke matrix with its dp4 x batch-2 cells put back: three cells (one per GPU) that fail with
    their error while the rest are scored, the fixture of every test about failed cells. The shipped
    smoke matrix excludes them, so that a first look scores whole."""
    rules = [r for r in matrix["exclude"] if dict(r) != SMOKE_DP4_RULE]
    assert len(rules) == len(matrix["exclude"]) - 1, "the smoke matrix lost its dp4 x batch-2 rule"
    return {**matrix, "exclude": rules}
