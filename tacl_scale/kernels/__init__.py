"""Fused kernels for TaCL training. ``tacl_loss`` (padded batches) and
``tacl_loss_packed`` (unpadded, packed batches) are the entry points; they dispatch
to a Triton kernel on CUDA or the PyTorch reference."""

from .tacl_loss import tacl_loss, tacl_loss_packed, tacl_loss_packed_reference, tacl_loss_reference

__all__ = ["tacl_loss", "tacl_loss_packed", "tacl_loss_packed_reference", "tacl_loss_reference"]
