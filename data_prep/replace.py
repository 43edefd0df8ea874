"""``--overwrite``: the new dataset is built beside the old one (a hidden sibling,
:func:`staging_directory`) and swapped into its place by two renames once it is
whole (:func:`swap_in`), the user's own files of the old directory carried over; a
build killed between the renames leaves what :func:`recover_swap` finishes."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from tacl_scale.data.manifest import MANIFEST_NAME, replaced_prefix, set_aside_copies
from tacl_scale.locking import holder
from tacl_scale.preemption import uninterrupted

from .workspace import is_build_file

log = logging.getLogger("data_prep.build")


def staging_directory(output: Path) -> Path:
    """Where ``--overwrite`` builds the new dataset: a hidden sibling of the old one
    (the same filesystem, so the swap is two renames)."""
    return output.parent / f".{output.name}.overwrite"


def swap_in(staging: Path, output: Path) -> None:
    """Put the finished dataset in ``staging`` in the place of the old one in
    ``output``: two renames, then the user's own files of the old directory are
    carried over and the rest of it removed. A build killed meanwhile (SIGKILL)
    leaves what :func:`recover_swap` finishes."""
    old = output.parent / f"{replaced_prefix(output)}{os.getpid()}"
    # Ctrl-C between the renames left no dataset in place, the user's files hidden; one
    # held until the old copy is gone stops the build with nothing left hidden.
    with uninterrupted():
        os.rename(output, old)
        try:
            os.rename(staging, output)
        except OSError:
            os.rename(old, output)  # the old dataset back, whole
            raise
        _retire(old, output)
    log.info("replaced the dataset in %s", output)


def _retire(old: Path, output: Path) -> None:
    """Carry the user's own files of the replaced dataset ``old`` over to ``output``
    (renames: each is there or here, never half), then remove the rest of ``old``."""
    for path in old.iterdir():
        if path.name != MANIFEST_NAME and not is_build_file(path):
            shutil.move(str(path), output / path.name)
    shutil.rmtree(old, ignore_errors=True)


def recover_swap(output: Path) -> None:
    """Finish the :func:`swap_in` of a build killed in it (SIGKILL, a lost node), which
    left the old dataset set aside and, between the two renames, no dataset at
    ``output``: the finished new one is put in place (the old one if the new one is
    gone), the user's files carried over and the old copy removed. A swap still
    under way (its build holds the old copy's lock) is left alone."""
    for old in set_aside_copies(output):
        if holder(old) is not None:
            continue
        staging = staging_directory(output)
        if not output.exists():
            if not (staging / MANIFEST_NAME).is_file():
                os.rename(old, output)
                log.warning("%s: put back the dataset a build killed while replacing it had set aside in %s",
                            output, old.name)
                continue
            os.rename(staging, output)
            log.warning("%s: put in place the dataset a build killed while replacing the old one had finished",
                        output)
        _retire(old, output)
        log.warning("%s: removed %s, the old dataset a killed build had replaced (your files in it are in %s)",
                    output, old.name, output)
