"""Fused kernels for TaCL training. ``tacl_loss`` is the one entry point; it
dispatches to a Triton kernel on CUDA (once built) or the PyTorch reference."""

from .tacl_loss import tacl_loss, tacl_loss_reference

__all__ = ["tacl_loss", "tacl_loss_reference"]
