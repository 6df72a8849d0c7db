"""MLproject: every entry point runs an existing Hydra job and passes the overrides through."""

from mlflow.projects._project_spec import load_project

from tilecast.paths import ROOT


def test_entry_points_name_existing_jobs():
    project = load_project(str(ROOT))
    assert {"main", "train", "evaluate", "promote", "score", "report", "nightly"} <= set(project._entry_points)
    for name in project._entry_points:
        command = project.get_entry_point(name).compute_command({"overrides": "a=1"}, None)
        script = command.split()[1]
        assert (ROOT / script).is_file(), (name, command)
        assert command.endswith("a=1")
