"""The files that say what a directory is (a training run, an export, a dataset), and
the check that nothing is made inside one that a job, an export or a build replaces.

Asked by training, the export, the analysis and the dataset build, so it imports
nothing but the standard library and the dataset format's names: ``data_prep`` may
import it (docs/design.md, "Layering"). :mod:`tacl_scale.run_dir` names everything
else a run directory holds."""

from __future__ import annotations

import os
from pathlib import Path

from .data.manifest import MANIFEST_NAME

RUN_FILE = "run.json"  # a training run's record (tacl_scale.run_dir.RunRecord)
EXPORT_DIR = "export"  # the run's own export, inside its directory
# Written into every export (the run's own and tacl_scale.export's): what tells an
# earlier export, which a new one may replace, from any other directory, which it may not.
EXPORT_MARKER = "tacl_export.json"
MODEL_CONFIG = "config.json"  # a Hugging Face model's (an export holds one too)

# What a marker file says its directory is, in messages ("holds a dataset (manifest.json)").
MARKED_AS = {EXPORT_MARKER: "an export", RUN_FILE: "a training run", MANIFEST_NAME: "a dataset",
             MODEL_CONFIG: "a model"}


def marked_as(directory: Path, markers: tuple[str, ...]) -> tuple[str, str] | None:
    """The first of ``markers`` (names in :data:`MARKED_AS`) that ``directory`` holds,
    with what it says the directory is, e.g. ``("manifest.json", "a dataset")``; None
    when it holds none of them (or is not a directory)."""
    for marker in markers:
        if (directory / marker).is_file():
            return marker, MARKED_AS[marker]
    return None


def container_problem(out: Path, runs_and_datasets: bool = True, own_export: bool = True) -> str | None:
    """Why ``out`` may not be made inside a directory that holds it, or None: inside
    an export (replaced whole by the next one) and, with ``runs_and_datasets``, a
    training run (whose checkpoints and export training rotates and replaces; its
    own ``export`` is allowed for an export, ``own_export``) or a dataset."""
    absolute = Path(os.path.abspath(out))
    for above in absolute.parents:
        if (above / EXPORT_MARKER).is_file():
            return (f"{out}: inside the export {above}, which the next export there replaces whole: choose a place "
                    "outside it")
        if not runs_and_datasets:
            continue
        if (above / RUN_FILE).is_file() and not (own_export and absolute == above / EXPORT_DIR):
            # The run's own export is named only where it is allowed (an export's).
            own = f" ({above / EXPORT_DIR} is the run's own export)" if own_export else ""
            return (f"{out}: inside the training run {above}, whose checkpoints and export training rotates and "
                    f"replaces: choose a place outside it{own}")
        # Shards as well as the manifest: every directory above is asked, and a stray
        # manifest.json (a web project's, $HOME's) must not forbid everything under it.
        # run_dir.output_problem asks of the one directory given and refuses on the manifest alone.
        if (above / MANIFEST_NAME).is_file() and any(above.glob("shard-*.idx")):
            return f"{out}: inside the dataset {above}: choose a place outside it"
    return None
