"""Pre-training data: the on-disk format shared with ``data_prep`` and its reader."""

from .dataset import PretrainDataset
from .manifest import DatasetError, Manifest, load_manifest

__all__ = ["DatasetError", "Manifest", "PretrainDataset", "load_manifest"]
