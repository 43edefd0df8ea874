"""Pre-training data: the on-disk format shared with ``data_prep`` and its reader."""

from .dataset import PretrainDataset
from .manifest import DatasetError, load_manifest

__all__ = ["DatasetError", "PretrainDataset", "load_manifest"]
